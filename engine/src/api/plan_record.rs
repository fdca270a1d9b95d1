//! What a plan recorded as it ran (spec section 10, "Execute"; section 26, errors): its
//! steps with their output (`plan logs`) and its errors (`plan errors`).

use serde::{Deserialize, Serialize};

use super::{ApiError, Engine};
use crate::domain::{Id, Plan};
use crate::lifecycle::report::ErrorEntry;
use crate::store::lifecycle_run::PlanStep;

/// A plan's steps, in order.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct StepsView {
    /// The plan.
    pub plan_id: Id,
    /// Execute's record of each executable decision.
    pub steps: Vec<PlanStep>,
}

/// A plan's errors.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ErrorsView {
    /// The plan's row.
    pub plan: Plan,
    /// Its errors, oldest first, from its `plan_errored` events.
    pub errors: Vec<ErrorEntry>,
}

/// The steps of plan `input`.
///
/// # Errors
/// `NOT_FOUND`, `AMBIGUOUS`; store failures.
pub(crate) fn steps(engine: &Engine, input: &str) -> Result<StepsView, ApiError> {
    let store = engine.store()?;
    let plan_id = store.resolve_plan_id(input)??;
    let steps = store.plan_steps(&plan_id)?;
    Ok(StepsView { plan_id, steps })
}

/// The errors of plan `input`.
///
/// # Errors
/// `NOT_FOUND`, `AMBIGUOUS`; store failures.
pub(crate) fn errors(engine: &Engine, input: &str) -> Result<ErrorsView, ApiError> {
    let store = engine.store()?;
    let id = store.resolve_plan_id(input)??;
    let plan = store
        .plan(&id)?
        .ok_or(crate::lifecycle::RunError::NotFound(id))?;
    let errors = crate::lifecycle::report::errors(&store, &id)?;
    Ok(ErrorsView { plan, errors })
}
