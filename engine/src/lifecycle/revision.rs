//! Automatic strategy revision (spec section 27, `auto_strategy_revision`: "Strategize
//! re-runs for the affected subtree when Execute is stuck").
//!
//! When Execute errors on a failed step (after its retries) and the plan's frozen profile has
//! `auto_strategy_revision`, the strategy actor re-decides the failed step's decision and its
//! downstream subtree through the revert correction (handed in as the engine's
//! [`super::Reviser`]), with the failure as its guidance; only the affected steps run again.
//! A correction attempt whose re-run failed this way is marked `failed` with the error. Each revision is a
//! `state_changed` event with `reason: strategy_revision` (and the correction's own event).
//! After [`REVISION_LIMIT`] revisions of one plan, a failed step errors the plan as without
//! the flag (`reason: strategy_revision_limit`).

use serde_json::json;

use super::driven::{Driven, Stopped};
use super::gates::Gates;
use super::state::commit;
use super::{Lifecycle, RunError};
use crate::domain::event::StateChanged;
use crate::domain::event::state::Transition;
use crate::domain::{Id, Phase, ProcessingState};
use crate::events::EventKind;
use crate::store::corrections::AttemptStatus;
use crate::store::lifecycle_run::StepStatus;

/// How many automatic revisions one plan may have (the spec names no figure).
pub const REVISION_LIMIT: usize = 2;

/// The guidance of an automatic revision starts with this, which is also how earlier
/// revisions of the plan are counted (their correction attempts keep it as the reason).
pub const GUIDANCE_PREFIX: &str = "strategy revision after a failed step";

/// A failed step to revise: its decision and what went wrong.
struct Failure {
    decision_id: Id,
    code: String,
    message: String,
}

/// The failed step of a plan that `driven` left errored in Execute, when its profile allows
/// a revision.
fn failure(engine: &Lifecycle, driven: &Driven) -> Result<Option<Failure>, RunError> {
    let Stopped::Errored { code, message } = &driven.stopped else {
        return Ok(None);
    };
    let plan = &driven.plan;
    if plan.phase() != Phase::Execute
        || plan.state() != ProcessingState::Errored
        || !Gates::of(plan).auto_strategy_revision()
    {
        return Ok(None);
    }
    let failed = engine
        .store()
        .plan_steps(&plan.plan_id)?
        .into_iter()
        .rev()
        .find(|s| s.status == StepStatus::Failed);
    Ok(failed.map(|s| Failure {
        decision_id: s.decision_id,
        code: code.clone(),
        message: message.clone(),
    }))
}

/// Marks the plan's `executing` correction attempts `failed`: the Execute run they started
/// ended on `failure`.
fn fail_open_attempts(
    engine: &mut Lifecycle,
    plan_id: &Id,
    failure: &Failure,
) -> Result<(), RunError> {
    let open: Vec<_> = engine
        .store()
        .correction_attempts(plan_id)?
        .into_iter()
        .filter(|a| a.status == AttemptStatus::Executing)
        .collect();
    for a in open {
        let mut result = a.result.clone();
        if !result.is_object() {
            result = json!({});
        }
        result["failed_step_decision_id"] = json!(failure.decision_id.to_string());
        result["error_code"] = json!(failure.code);
        result["error"] = json!(failure.message);
        engine.store_mut().finish_correction_attempt(
            &a.attempt_id,
            AttemptStatus::Failed,
            &result,
        )?;
    }
    Ok(())
}

/// How many automatic revisions `plan_id` has had.
fn revisions_so_far(engine: &Lifecycle, plan_id: &Id) -> Result<usize, RunError> {
    Ok(engine
        .store()
        .correction_attempts(plan_id)?
        .iter()
        .filter(|a| {
            a.correction_reason
                .as_deref()
                .is_some_and(|r| r.starts_with(GUIDANCE_PREFIX))
        })
        .count())
}

/// Revises the plan `driven` left errored on a failed step, when its profile allows it and
/// the limit is not reached; otherwise returns `driven` unchanged. The revised plan is driven
/// on as its profile says (a failure there may revise again, up to the limit).
///
/// # Errors
/// [`RunError`] from the store or the correction; a strategy actor that cannot re-decide
/// leaves the plan errored as it was.
pub fn after_failure(engine: &mut Lifecycle, driven: Driven) -> Result<Driven, RunError> {
    let Some(revise) = engine.reviser() else {
        return Ok(driven);
    };
    let Some(failure) = failure(engine, &driven)? else {
        return Ok(driven);
    };
    let plan_id = driven.plan.plan_id;
    fail_open_attempts(engine, &plan_id, &failure)?;
    let done = revisions_so_far(engine, &plan_id)?;
    let mut plan = engine.plan(&plan_id)?;
    if done >= REVISION_LIMIT {
        commit(
            engine.store_mut(),
            &mut plan,
            EventKind::StateChanged(StateChanged::Transition(Transition {
                reason: Some("strategy_revision_limit".into()),
                revisions: Some(done as u64),
                limit: Some(REVISION_LIMIT as u64),
                decision_id: Some(failure.decision_id.to_string()),
                ..Transition::at(Phase::Execute, ProcessingState::Errored)
            })),
            |_| Ok(()),
        )?;
        engine.flush(&plan_id)?;
        return Ok(driven);
    }
    let revision = done + 1;
    let guidance = format!(
        "{GUIDANCE_PREFIX} ({revision} of {REVISION_LIMIT}): the step failed with {}: {}. Revise this decision and those depending on it so the work can succeed.",
        failure.code, failure.message
    );
    commit(
        engine.store_mut(),
        &mut plan,
        EventKind::StateChanged(StateChanged::Transition(Transition {
            reason: Some("strategy_revision".into()),
            revision: Some(revision as u64),
            limit: Some(REVISION_LIMIT as u64),
            decision_id: Some(failure.decision_id.to_string()),
            error_code: Some(failure.code.clone()),
            error: Some(failure.message.clone()),
            ..Transition::at(Phase::Execute, ProcessingState::Errored)
        })),
        |_| Ok(()),
    )?;
    engine.flush(&plan_id)?;
    let mut events = driven.events;
    events.extend(engine.take_log());
    engine.observer().progress(&format!(
        "Execute failed: revising the strategy ({revision} of {REVISION_LIMIT})"
    ));
    let revised = match revise(engine, &failure.decision_id, &guidance) {
        Ok(r) => r,
        Err(e) => {
            // The plan stays errored as it was; the revision that could not be made says why.
            let mut plan = engine.plan(&plan_id)?;
            commit(
                engine.store_mut(),
                &mut plan,
                EventKind::StateChanged(StateChanged::Transition(Transition {
                    reason: Some("strategy_revision_failed".into()),
                    revision: Some(revision as u64),
                    error: Some(e.to_string()),
                    ..Transition::at(Phase::Execute, ProcessingState::Errored)
                })),
                |_| Ok(()),
            )?;
            engine.flush(&plan_id)?;
            events.extend(engine.take_log());
            return Ok(Driven {
                plan: engine.plan(&plan_id)?,
                stopped: driven.stopped,
                events,
            });
        }
    };
    match revised {
        Some(mut d) => {
            events.append(&mut d.events);
            d.events = events;
            Ok(d)
        }
        None => Ok(Driven {
            plan: engine.plan(&plan_id)?,
            stopped: driven.stopped,
            events,
        }),
    }
}
