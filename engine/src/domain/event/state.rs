//! The payload of `state_changed`: a phase or state change no other kind describes. Its
//! emitters write four shapes with different leading fields, so the payload is an untagged
//! enum of them; reading tries each shape in order, the last ([`Transition`]) taking anything.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::domain::budget::PlanBudget;
use crate::domain::lifecycle::{Phase, ProcessingState};

/// `state_changed`, by shape.
// The catch-all is the largest shape and the common one; boxing it would only add an
// allocation per event.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(untagged)]
pub enum StateChanged {
    /// A correction (`plan correct`) revised the plan or appended a child plan.
    Correction(Correction),
    /// The plan was rolled back to a checkpoint.
    Rollback(Rollback),
    /// A child-spawn approval was answered.
    ChildSpawnAnswered(ChildSpawnAnswered),
    /// The execution actor recorded a decision (`create_subplan`).
    DecisionRecorded(DecisionRecorded),
    /// Any other change: an answered approval, guidance, a pause, a strategy revision.
    Transition(Transition),
}

/// `state_changed` of a correction: `reason` is `correction`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Correction {
    /// `correction`.
    pub reason: String,
    /// `revert` or `append`.
    pub mode: String,
    /// The correction attempt.
    pub attempt_id: String,
    /// The plan's attempt after a revert.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attempt: Option<u32>,
    /// The child plan an append created.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub child_plan_id: Option<String>,
    /// The decision corrected.
    #[serde(default)]
    pub corrects: String,
    /// The decision a revert put in its place.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub new_decision_id: Option<String>,
    /// Decisions a revert superseded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub superseded: Option<u64>,
    /// Decisions a revert recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub new_decisions: Option<u64>,
    /// Steps that run again after a revert.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub steps_rerun: Option<Vec<String>>,
    /// Steps whose recorded delta is replayed after a revert.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub steps_replayed: Option<Vec<String>>,
    /// The phase after a revert.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<Phase>,
    /// The state after a revert.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state: Option<ProcessingState>,
}

/// `state_changed` of a rollback: `reason` is `rollback`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Rollback {
    /// `rollback`.
    pub reason: String,
    /// The checkpoint rolled back to.
    pub checkpoint_id: String,
    /// The phase after it.
    pub phase: Phase,
    /// The state after it.
    pub state: ProcessingState,
    /// Steps reset to run again.
    #[serde(default)]
    pub steps_to_run_again: u32,
    /// Approvals withdrawn.
    #[serde(default)]
    pub withdrawn_approvals: Vec<String>,
}

/// `state_changed` of an answered child-spawn approval.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ChildSpawnAnswered {
    /// The phase.
    pub phase: Phase,
    /// The state.
    pub state: ProcessingState,
    /// The approval.
    pub approval_id: String,
    /// `spawn` or `skip`.
    pub child_spawn: String,
    /// Why it was skipped, when the user said.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// `state_changed` when the execution actor recorded a decision.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct DecisionRecorded {
    /// The decision.
    pub decision_id: String,
    /// Its type.
    pub decision_type: String,
    /// The tool that recorded it (`create_subplan`).
    pub by: String,
}

/// `state_changed` of every other change. `phase` and `state` lead; the rest is written by
/// the change it describes.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(default)]
pub struct Transition {
    /// The phase.
    pub phase: Option<Phase>,
    /// The state.
    pub state: Option<ProcessingState>,
    /// Why (`gate_rejected`, `redecide`, `awaiting_decision`, `strategy_revision`, ...; a
    /// rejected decision's re-decide stores the user's reason here).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// The approval answered.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub approval_id: Option<String>,
    /// An accepted invariant violation (`accepted`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub invariant_violation: Option<String>,
    /// The invariant of an accepted violation.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub invariant_id: Option<Value>,
    /// An answered tool approval (`approve`, `reject`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tool_approval: Option<Value>,
    /// The tool of a tool approval.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tool: Option<String>,
    /// A raised budget.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub budget: Option<PlanBudget>,
    /// The step that paused.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub step: Option<String>,
    /// The approvals raised.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub approvals: Option<Vec<String>>,
    /// Strategy revisions made when the limit stopped them.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub revisions: Option<u64>,
    /// This strategy revision.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub revision: Option<u64>,
    /// The strategy revision limit.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub limit: Option<u64>,
    /// The decision concerned (re-chosen, or revised).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub decision_id: Option<String>,
    /// The option chosen for a re-chosen decision.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub chosen_option: Option<String>,
    /// The failure a revision answers.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error_code: Option<String>,
    /// Its message, or why a revision could not be made.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// The user's guidance.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub guidance: Option<String>,
}

impl Transition {
    /// A transition at `phase`/`state` with nothing else set.
    pub fn at(phase: Phase, state: ProcessingState) -> Self {
        Self {
            phase: Some(phase),
            state: Some(state),
            ..Self::default()
        }
    }
}
