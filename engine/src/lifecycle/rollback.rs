//! `plan rollback` (spec section 11): the sandboxes go back to a checkpoint, the steps whose
//! work was discarded run again at the next Execute (a step interrupted mid-way from its
//! start, not from its journal), and every approval the plan was waiting
//! for is withdrawn, because what it asked about (the apply gate's diff, a failed step's
//! recovery) no longer exists. All of it is recorded as one `state_changed` event with
//! reason `rollback`.

use serde::Serialize;
use serde_json::json;

use super::state;
use crate::domain::Id;
use crate::domain::approval::ApprovalStatus;
use crate::domain::event::StateChanged;
use crate::domain::event::state::Rollback;
use crate::events::{self, EventKind};
use crate::sandbox::checkpoint::{self, RollbackOutcome};
use crate::sandbox::{CheckpointId, SandboxError, Sandboxes};
use crate::store::{Store, StoreError};

/// What a rollback did.
#[derive(Debug, Clone, Serialize, serde::Deserialize, schemars::JsonSchema)]
pub struct RolledBack {
    /// The sandboxes' side: checkpoint, resources, discarded records, the plan's new status.
    #[serde(flatten)]
    pub outcome: RollbackOutcome,
    /// Steps set back to pending.
    pub steps_to_run_again: u32,
    /// Approvals withdrawn (ids).
    pub withdrawn_approvals: Vec<String>,
}

/// Rolls plan `plan_id` back to `checkpoint` (see the module documentation).
///
/// # Errors
/// As [`checkpoint::rollback`] (applied plans, unknown or discarded checkpoints, git and
/// store failures); nothing is withdrawn when the files could not be restored.
pub fn to_checkpoint(
    store: &mut Store,
    sandboxes: &Sandboxes,
    plan_id: &Id,
    cp: &CheckpointId,
) -> Result<RolledBack, SandboxError> {
    let outcome = checkpoint::rollback(store, sandboxes, plan_id, cp)?;
    // A step interrupted mid-way runs again from its start, not from its journal: the work
    // the journal recorded is what the user rolled back.
    store.journal_clear_plan(plan_id)?;
    let steps_to_run_again = store.reset_steps_after_rollback(plan_id)?;
    let plan = store
        .plan(plan_id)?
        .ok_or(SandboxError::PlanNotFound(*plan_id))?;
    let tx = store.conn_mut().transaction().map_err(StoreError::from)?;
    let withdrawn_approvals = state::resolve_pending(
        &tx,
        &plan,
        None,
        ApprovalStatus::Withdrawn,
        &json!({"answer": "withdrawn", "why": format!("the plan was rolled back to checkpoint {cp}; what the approval asked about no longer exists")}),
    )?;
    events::append(
        &tx,
        Some(plan_id),
        &EventKind::StateChanged(StateChanged::Rollback(Rollback {
            reason: "rollback".into(),
            checkpoint_id: cp.to_string(),
            phase: outcome.status.phase,
            state: outcome.status.state,
            steps_to_run_again,
            withdrawn_approvals: withdrawn_approvals.clone(),
        })),
    )?;
    tx.commit().map_err(StoreError::from)?;
    Ok(RolledBack {
        outcome,
        steps_to_run_again,
        withdrawn_approvals,
    })
}
