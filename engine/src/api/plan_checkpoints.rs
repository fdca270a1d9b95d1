//! A plan's checkpoints (spec section 10, "Checkpoints and rollback"): the list `plan
//! checkpoints` shows and the checkpoint `plan rollback` names.

use serde::{Deserialize, Serialize};

use super::plan_diff::open_swept;
use super::{ApiError, Engine};
use crate::domain::Id;
use crate::domain::sandbox::{CheckpointId, CheckpointRecord};

/// A plan's checkpoints, oldest first.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct CheckpointsView {
    /// The plan.
    pub plan_id: Id,
    /// Its checkpoints (those a rollback discarded only when asked for).
    pub checkpoints: Vec<CheckpointRecord>,
}

/// One checkpoint of one plan, each named by its full id.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct CheckpointRef {
    /// The plan.
    pub plan_id: Id,
    /// The checkpoint.
    pub checkpoint_id: CheckpointId,
}

/// The checkpoints of plan `input`, with the discarded ones when `all`.
///
/// # Errors
/// `NOT_FOUND`, `AMBIGUOUS` for the plan; store failures.
pub(crate) fn checkpoints(
    engine: &Engine,
    input: &str,
    all: bool,
) -> Result<CheckpointsView, ApiError> {
    let (store, plan) = open_swept(engine, input)?;
    let checkpoints = store
        .checkpoints(&plan.plan_id)?
        .into_iter()
        .filter(|c| all || c.discarded_at.is_none())
        .collect();
    Ok(CheckpointsView {
        plan_id: plan.plan_id,
        checkpoints,
    })
}

/// Checkpoint `checkpoint` (an id, unique prefix or sequence number) of plan `plan` (an id).
///
/// # Errors
/// `NOT_FOUND`, `AMBIGUOUS`, `INVALID_INPUT`; store failures.
pub(crate) fn checkpoint(
    engine: &Engine,
    plan: &str,
    checkpoint: &str,
) -> Result<CheckpointRef, ApiError> {
    let (store, plan) = open_swept(engine, plan)?;
    let checkpoint_id = store.resolve_checkpoint(&plan.plan_id, checkpoint)??;
    Ok(CheckpointRef {
        plan_id: plan.plan_id,
        checkpoint_id,
    })
}
