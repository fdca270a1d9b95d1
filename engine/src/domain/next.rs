//! Next steps: the follow-up commands the engine suggests (an approval's answer, an error's
//! hints, a stopped run's next step, an errored plan's recovery), as typed values.
//!
//! The engine knows nothing of command lines (spec section 06: the faces render; the design's
//! "one typed API"): it says *what* the user can do next, and each face renders that its own
//! way. The CLI writes a [`Next`] as the `agents ...` command that does it, repeating the
//! global options the user gave; the TUI can bind the same step to a key.

use serde::{Deserialize, Serialize};

use super::id::Id;

/// How a suggested correction treats the decision it corrects (spec section 13).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum CorrectionMode {
    /// Re-decide the decision and what depends on it.
    Revert,
    /// Keep the decision; add a child plan carrying the guidance.
    Append,
}

/// One suggested next step. Placeholders the user fills in (guidance, a reason, a limit) are
/// part of the step's rendering, not fields: a suggestion holding one is a template.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(tag = "command", rename_all = "snake_case")]
pub enum Next {
    /// Show the plan's status (`plan status PLAN`).
    PlanStatus {
        /// The plan.
        plan: Id,
    },
    /// Run Strategize and Execute, or resume them (`plan execute PLAN`).
    ExecutePlan {
        /// The plan.
        plan: Id,
    },
    /// Apply the plan, or retry its Apply (`plan apply PLAN`).
    ApplyPlan {
        /// The plan.
        plan: Id,
    },
    /// Cancel the plan (`plan cancel PLAN`).
    CancelPlan {
        /// The plan.
        plan: Id,
    },
    /// Show what the plan changes (`plan diff PLAN`).
    PlanDiff {
        /// The plan.
        plan: Id,
    },
    /// Show the plan's errors (`plan errors PLAN`).
    PlanErrors {
        /// The plan.
        plan: Id,
    },
    /// Show the steps' output (`plan logs PLAN`).
    PlanLogs {
        /// The plan.
        plan: Id,
    },
    /// Show the plan's decision tree (`plan tree PLAN`).
    PlanTree {
        /// The plan.
        plan: Id,
    },
    /// Give the plan guidance and resume it (`plan prompt PLAN <guidance>`; a template).
    PromptPlan {
        /// The plan.
        plan: Id,
    },
    /// List the pending approvals (`plan approvals`).
    ListApprovals,
    /// List the actors (`actor list`).
    ListActors,
    /// Answer an approval with one of its options (`plan decide APR --option OPTION`).
    Decide {
        /// The approval (`apr_...`).
        approval: String,
        /// The option as typed: its name (`accept`, `spawn`) or `N` for "the number of one of
        /// the listed options" (a template).
        option: String,
    },
    /// Answer a budget approval with a higher limit (`plan decide APR --max-cost-usd USD` or
    /// `--max-tokens N`; a template).
    RaiseBudget {
        /// The approval (`apr_...`).
        approval: String,
    },
    /// Decline an approval with a reason (`plan reject APR --reason TEXT`; a template).
    Reject {
        /// The approval (`apr_...`).
        approval: String,
    },
    /// Correct a decision with guidance (`plan correct --mode MODE -g <guidance> DECISION`;
    /// a template).
    Correct {
        /// Revert or append.
        mode: CorrectionMode,
        /// The decision corrected.
        decision: Id,
    },
    /// Correct one of a plan's decisions, to be picked from its tree (a template naming
    /// `plan tree PLAN` for the decisions).
    CorrectInPlan {
        /// Revert or append.
        mode: CorrectionMode,
        /// The plan whose decisions are listed.
        plan: Id,
    },
    /// Remove a setting from `config.toml` (`config unset KEY`).
    ConfigUnset {
        /// The setting's key (`automation-profile`).
        key: String,
    },
    /// Either of two steps: `first`, or else `or`.
    Either {
        /// The step suggested first.
        first: Box<Next>,
        /// The alternative.
        or: Box<Next>,
    },
}

impl Next {
    /// `first`, or else `or`.
    pub fn either(first: Next, or: Next) -> Self {
        Next::Either {
            first: Box::new(first),
            or: Box::new(or),
        }
    }

    /// Answering approval `approval` with option `option`.
    pub fn decide(approval: &str, option: &str) -> Self {
        Next::Decide {
            approval: approval.to_string(),
            option: option.to_string(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_next_step_serializes_tagged_with_its_command() {
        let plan = Id::generate();
        let v = serde_json::to_value(Next::ApplyPlan { plan }).unwrap();
        assert_eq!(
            v,
            serde_json::json!({"command": "apply_plan", "plan": plan.to_string()})
        );
        let either = Next::either(
            Next::decide("apr_1", "approve"),
            Next::Reject {
                approval: "apr_1".into(),
            },
        );
        let back: Next = serde_json::from_value(serde_json::to_value(&either).unwrap()).unwrap();
        assert_eq!(back, either);
    }
}
