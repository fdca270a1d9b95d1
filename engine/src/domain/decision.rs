//! Decision records (spec section 08, "Decision data model").
//!
//! A decision is a choice the description did not make explicitly. The root of every plan's
//! tree is a `prompt_definition` decision; invariants are recorded as `invariant_enforced`
//! decisions under it; executable decisions carry a `step` with instructions.

use std::fmt;
use std::str::FromStr;

use jiff::Timestamp;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::id::Id;
use super::lifecycle::str_enum;

/// The kinds of decision the spec defines.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum DecisionType {
    /// The root: the substituted description the plan works from.
    PromptDefinition,
    /// An invariant the plan must respect.
    InvariantEnforced,
    /// How to approach the work.
    StrategyChoice,
    /// A concrete implementation choice (an executable step when it has `step`).
    ImplementationChoice,
    /// Which resource to work on.
    ResourceSelection,
    /// A child plan.
    SubplanSpawn,
    /// A group of child plans run concurrently.
    SubplanParallelSpawn,
    /// A tool to call.
    ToolInvocation,
    /// How an error was handled.
    ErrorRecovery,
    /// How a validation result was answered.
    ValidationResponse,
    /// Guidance a user gave.
    UserIntervention,
}

str_enum!(DecisionType {
    PromptDefinition => "prompt_definition",
    InvariantEnforced => "invariant_enforced",
    StrategyChoice => "strategy_choice",
    ImplementationChoice => "implementation_choice",
    ResourceSelection => "resource_selection",
    SubplanSpawn => "subplan_spawn",
    SubplanParallelSpawn => "subplan_parallel_spawn",
    ToolInvocation => "tool_invocation",
    ErrorRecovery => "error_recovery",
    ValidationResponse => "validation_response",
    UserIntervention => "user_intervention",
});

/// What an executable decision asks the execution actor to do.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Step {
    /// What to do, in the strategist's words (or the script step, for offline actors).
    pub instructions: String,
    /// What the step should leave behind. Each entry that is a path must exist in the sandbox
    /// after the step, or the step fails (`EXPECTED_OUTPUT_MISSING`, docs/context.md).
    #[serde(default)]
    pub expected_outputs: Vec<String>,
    /// Outputs the strategist marked optional: checked like `expected_outputs`, but a missing
    /// one is only a warning in the step's output. Absent in plans stored before the marker.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub optional_outputs: Vec<String>,
}

/// One recorded decision.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Decision {
    /// Decision id.
    pub decision_id: Id,
    /// The plan it belongs to.
    pub plan_id: Id,
    /// Its parent in the tree (`None` for the root).
    pub parent_decision_id: Option<Id>,
    /// Order within the plan, from 1.
    pub sequence_number: u32,
    /// The plan attempt that recorded it.
    pub attempt: u32,
    /// Kind of decision.
    pub decision_type: DecisionType,
    /// The question decided.
    pub question: Option<String>,
    /// What was chosen.
    pub chosen_option: String,
    /// Other options considered.
    pub alternatives_considered: Vec<String>,
    /// Confidence from 0.0 to 1.0, if the actor gave one.
    pub confidence_score: Option<f64>,
    /// Why.
    pub rationale: Option<String>,
    /// The actor's raw reasoning, if kept.
    pub actor_reasoning: Option<String>,
    /// What the actor had seen (hashes and references).
    pub context_snapshot: Value,
    /// The work to do, for executable decisions.
    pub step: Option<Step>,
    /// Whether this decision corrects another.
    pub is_correction: bool,
    /// The decision it corrects.
    pub corrects_decision_id: Option<Id>,
    /// The user's guidance for the correction.
    pub correction_reason: Option<String>,
    /// The decision that superseded this one.
    pub superseded_by: Option<Id>,
    /// When it was recorded.
    pub created_at: Timestamp,
}

impl Decision {
    /// A new decision with the required fields; the rest empty.
    pub fn new(
        plan_id: Id,
        decision_type: DecisionType,
        chosen_option: impl Into<String>,
        now: Timestamp,
    ) -> Self {
        Self {
            decision_id: Id::generate(),
            plan_id,
            parent_decision_id: None,
            sequence_number: 0,
            attempt: 1,
            decision_type,
            question: None,
            chosen_option: chosen_option.into(),
            alternatives_considered: Vec::new(),
            confidence_score: None,
            rationale: None,
            actor_reasoning: None,
            context_snapshot: Value::Object(Default::default()),
            step: None,
            is_correction: false,
            corrects_decision_id: None,
            correction_reason: None,
            superseded_by: None,
            created_at: now,
        }
    }

    /// Whether the decision is in force (not superseded by a correction).
    pub fn is_current(&self) -> bool {
        self.superseded_by.is_none()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_decision_type_round_trips_through_its_name() {
        for t in DecisionType::ALL {
            assert_eq!(t.as_str().parse::<DecisionType>().unwrap(), *t);
            assert_eq!(
                serde_json::to_value(t).unwrap(),
                serde_json::json!(t.as_str())
            );
        }
        assert_eq!(DecisionType::ALL.len(), 11);
    }
}
