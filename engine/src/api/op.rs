//! The operations of the engine's API and what each returns.

use serde::Serialize;

use crate::domain::{Id, Plan};
use crate::lease::Lease;
use crate::lifecycle::approvals::{self as lc_approvals, Answer};
use crate::lifecycle::driven::Driven;
use crate::lifecycle::rollback::RolledBack;
use crate::registry::plan_use::{Created, Request};
use crate::sandbox::CheckpointId;
use crate::sandbox::lifetime::CleanupReport;

/// Everything `plan use` needs: the plan to create and the budget flags.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize, schemars::JsonSchema)]
pub struct UseRequest {
    /// The action, projects, profile, actors, invariants and arguments.
    pub request: Request,
    /// `--max-cost-usd` (US dollars); the configured default when `None`.
    pub max_cost_usd: Option<f64>,
    /// `--max-tokens`; the configured default when `None`.
    pub max_tokens: Option<u64>,
}

/// How a correction treats the decision it corrects (spec section 13).
#[derive(
    Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize, schemars::JsonSchema,
)]
pub enum CorrectMode {
    /// Revert the decision and what depends on it, and re-run the affected steps.
    Revert,
    /// Keep the decision and its work; add a child plan carrying the guidance, run by
    /// `execution_actor` (the parent's when `None`).
    Append {
        /// The child plan's execution actor.
        execution_actor: Option<String>,
    },
}

/// A typed mutation of the engine's state. Plans are named by full id (resolve prefixes with
/// [`super::Engine::resolve_plan`]); approvals by their `apr_...` id.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize, schemars::JsonSchema)]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum Op {
    /// Create a plan from an action and run it as far as its automation profile allows.
    Use(Box<UseRequest>),
    /// Run a plan's Strategize and Execute phases (resuming an errored or interrupted one).
    Execute {
        /// The plan.
        plan: Id,
    },
    /// Apply a plan whose Execute is complete (or resume an interrupted Apply).
    Apply {
        /// The plan.
        plan: Id,
        /// Leave the changes in the working tree instead of committing them.
        no_commit: bool,
        /// Which reviewed files and hunks to write (`--only`, `--exclude`, `--discard-rest`);
        /// the default writes what the review marks accept, everything when nothing is marked.
        selection: crate::review::partial::ApplyRequest,
    },
    /// Cancel a plan; a live driver is asked to stop and given up to `wait`.
    Cancel {
        /// The plan.
        plan: Id,
        /// Why (recorded).
        reason: Option<String>,
        /// How long to wait for another process's driver to stop.
        wait: std::time::Duration,
    },
    /// Roll a plan's sandboxes back to a checkpoint (spec section 11).
    Rollback {
        /// The plan.
        plan: Id,
        /// The checkpoint.
        checkpoint: CheckpointId,
    },
    /// Answer an approval with an option, guidance or a higher budget; the plan is driven on
    /// when the answer lets it.
    Decide {
        /// The approval (`apr_...`).
        approval: String,
        /// The answer (not [`Answer::Reject`]: see [`Op::Reject`]).
        answer: Answer,
    },
    /// Reject an approval with a reason.
    Reject {
        /// The approval (`apr_...`).
        approval: String,
        /// Why (recorded; at a decision the actor decides again with it as guidance).
        reason: String,
    },
    /// Give a plan's actors guidance; an errored or waiting plan resumes with it.
    Prompt {
        /// The plan.
        plan: Id,
        /// The guidance.
        text: String,
    },
    /// Correct a decision (spec section 13).
    Correct(Box<Correction>),
    /// Remove the sandboxes of cancelled and errored plans and release those of applied ones.
    Cleanup,
    /// Export a plan's sandbox as a branch of the user's repository or as a patch file; the
    /// project is not touched (spec section 11).
    Export(Box<super::export::ExportRequest>),
    /// Change a registry: resources, projects, actions, actors, invariants, automation
    /// profiles, tools, skills, resource types (see [`super::RegistryOp`]). Not carried by
    /// the protocol yet.
    #[serde(skip)]
    Registry(Box<super::registry::RegistryOp>),
    /// Mark items of a plan's review for its current attempt (`docs/review.md`): hunk ids (or
    /// unique prefixes of at least 4 digits) or changed paths (every item of that file), all
    /// in one transaction. Marks change no phase, so no lease is taken.
    Review(Box<ReviewRequest>),
}

/// What [`Op::Review`] marks.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize, schemars::JsonSchema)]
pub struct ReviewRequest {
    /// The plan.
    pub plan: Id,
    /// Hunk ids, unique id prefixes or changed paths.
    pub targets: Vec<String>,
    /// The mark to set ([`crate::review::Mark::Pending`] resets).
    pub mark: crate::review::Mark,
    /// Why (kept with an accept or reject; a rejection's reason guides its correction).
    pub reason: Option<String>,
}

/// What [`Op::Review`] did.
#[derive(Debug, Clone, Serialize, serde::Deserialize, schemars::JsonSchema)]
pub struct Reviewed {
    /// The ids of the items marked.
    pub marked: Vec<String>,
    /// The review as it is now.
    pub review: crate::review::Review,
}

/// A correction of a decision.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize, schemars::JsonSchema)]
pub struct Correction {
    /// The decision corrected.
    pub decision: Id,
    /// Revert or append.
    pub mode: CorrectMode,
    /// What was wrong and what to do instead.
    pub guidance: String,
    /// Budget for the re-run on top of what was spent (US dollars); revert only.
    pub max_cost_usd: Option<f64>,
    /// Budget for the re-run on top of what was spent (tokens); revert only.
    pub max_tokens: Option<u64>,
}

/// What `plan use` did.
#[derive(Debug, Clone, Serialize, serde::Deserialize, schemars::JsonSchema)]
pub struct Used {
    /// The created plan and what went into it.
    pub created: Created,
    /// The plan as it is now (after running as far as its profile allows).
    pub plan: Plan,
    /// The result of running it; `None` when running needs something not yet supported.
    pub driven: Option<Driven>,
    /// What is not yet supported, when running stopped there.
    pub not_yet_supported: Option<String>,
    /// What the plan will not see of the user's checkouts (uncommitted files, submodules,
    /// filter drivers), per resource: `resource: warning`.
    pub checkout_warnings: Vec<String>,
}

/// What `plan cancel` did.
#[derive(Debug, Clone, Serialize, serde::Deserialize, schemars::JsonSchema)]
pub struct Cancelled {
    /// The plan as it is now (cancelled, unless another process's driver has not stopped).
    pub plan: Plan,
    /// The process that drove the plan when the cancellation was asked for.
    pub was_running_in: Option<Lease>,
}

/// What answering an approval (or rejecting it) did.
#[derive(Debug, Clone, Serialize, serde::Deserialize, schemars::JsonSchema)]
pub struct Answered {
    /// The approval as answered, its effect, whether the plan resumed.
    pub answered: lc_approvals::Answered,
    /// The plan as it is now.
    pub plan: Plan,
    /// The result of driving the plan on, when the answer resumed it.
    pub driven: Option<Driven>,
    /// What is not yet supported, when driving on stopped there.
    pub not_yet_supported: Option<String>,
}

/// What `plan prompt` did.
#[derive(Debug, Clone, Serialize, serde::Deserialize, schemars::JsonSchema)]
pub struct Prompted {
    /// The approval answered with the guidance and whether the plan resumed.
    pub prompted: lc_approvals::Prompted,
    /// The plan as it is now.
    pub plan: Plan,
    /// The result of driving the plan on, when it resumed.
    pub driven: Option<Driven>,
}

/// The typed result of an [`Op`], one variant per operation.
#[derive(Debug, Clone, Serialize, serde::Deserialize, schemars::JsonSchema)]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum Outcome {
    /// [`Op::Use`].
    Used(Box<Used>),
    /// [`Op::Execute`] and [`Op::Apply`].
    Driven(Box<Driven>),
    /// [`Op::Cancel`].
    Cancelled(Box<Cancelled>),
    /// [`Op::Rollback`].
    RolledBack(Box<RolledBack>),
    /// [`Op::Decide`] and [`Op::Reject`].
    Answered(Box<Answered>),
    /// [`Op::Prompt`].
    Prompted(Box<Prompted>),
    /// [`Op::Correct`] in revert mode.
    Reverted(Box<crate::correction::revert::Reverted>),
    /// [`Op::Correct`] in append mode.
    Appended(Box<crate::correction::append::Appended>),
    /// [`Op::Cleanup`].
    CleanedUp(Box<CleanupReport>),
    /// [`Op::Review`].
    Reviewed(Box<Reviewed>),
    /// [`Op::Export`].
    Exported(Box<super::export::Exported>),
    /// [`Op::Registry`] (faces render each change's own result; not serialised).
    #[serde(skip)]
    Registry(Box<super::registry::RegistryOutcome>),
}

impl Op {
    /// The operation's name, as the protocol spells it (`execute`, `apply`, ...).
    pub fn name(&self) -> &'static str {
        match self {
            Op::Use(_) => "use",
            Op::Execute { .. } => "execute",
            Op::Apply { .. } => "apply",
            Op::Cancel { .. } => "cancel",
            Op::Rollback { .. } => "rollback",
            Op::Decide { .. } => "decide",
            Op::Reject { .. } => "reject",
            Op::Prompt { .. } => "prompt",
            Op::Correct(_) => "correct",
            Op::Cleanup => "cleanup",
            Op::Export(_) => "export",
            Op::Registry(r) => r.name(),
            Op::Review(_) => "review",
        }
    }
}

impl Outcome {
    /// The operation's name, as the CLI spells the command (`execute`, `rollback`, ...).
    pub fn name(&self) -> &'static str {
        match self {
            Outcome::Used(_) => "use",
            Outcome::Driven(_) => "drive",
            Outcome::Cancelled(_) => "cancel",
            Outcome::RolledBack(_) => "rollback",
            Outcome::Answered(_) => "answer",
            Outcome::Prompted(_) => "prompt",
            Outcome::Reverted(_) | Outcome::Appended(_) => "correct",
            Outcome::CleanedUp(_) => "cleanup",
            Outcome::Reviewed(_) => "review",
            Outcome::Exported(_) => "export",
            Outcome::Registry(_) => "registry",
        }
    }
}
