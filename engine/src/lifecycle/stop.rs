//! The stop check: whether the work in flight must stop (a requested `plan cancel`, Ctrl-C),
//! asked at every step, model turn and tool call by every phase and driver, and how a run
//! records why it stopped.

use super::driven::Stopped;
use super::state::{self, commit};
use super::{Lifecycle, RunError, approvals};
use crate::domain::event::PlanInterrupted;
use crate::domain::{Id, Phase, Plan, ProcessingState};
use crate::events::EventKind;
use crate::lease;

/// Why the work in flight must stop.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StopCause {
    /// `plan cancel` was requested.
    Cancel,
    /// Ctrl-C, or the server driving the plan was asked to stop.
    Interrupt,
    /// Another process took the plan's lease over (it judged this one gone: frozen past the
    /// lease's expiry): this process stops and records nothing, the plan is no longer its own.
    LeaseLost,
}

/// Whether the plan's work must stop now (checked at every step, model turn and tool call).
///
/// # Errors
/// [`RunError::Store`].
pub fn stop_cause(engine: &Lifecycle, plan_id: &Id) -> Result<Option<StopCause>, RunError> {
    if lease::is_lost(engine.store().location(), plan_id) {
        return Ok(Some(StopCause::LeaseLost));
    }
    if lease::cancel_requested(engine.store(), plan_id)? {
        return Ok(Some(StopCause::Cancel));
    }
    if engine.observer().interrupted() {
        return Ok(Some(StopCause::Interrupt));
    }
    Ok(None)
}

/// Records why a run stopped: a requested cancellation cancels the plan; Ctrl-C re-queues it
/// with reason `interrupted`.
///
/// # Errors
/// [`RunError`].
pub(crate) fn stop(
    engine: &mut Lifecycle,
    plan: &mut Plan,
    cause: StopCause,
) -> Result<Stopped, RunError> {
    match cause {
        StopCause::Cancel => {
            let reason = engine.store().plan_cancel_reason(&plan.plan_id)?;
            *plan = engine.plan(&plan.plan_id)?;
            if plan.state() != ProcessingState::Cancelled && plan.phase() != Phase::Applied {
                approvals::cancel_now(
                    engine,
                    plan,
                    reason.as_deref().unwrap_or("cancelled by the user"),
                )?;
            }
            Ok(Stopped::Cancelled { reason })
        }
        StopCause::Interrupt => {
            *plan = engine.plan(&plan.plan_id)?;
            if plan.state() == ProcessingState::Processing {
                state::set_state(plan, ProcessingState::Queued)?;
                let snapshot = plan.clone();
                let (by, handover) = (
                    engine.observer().interrupted_by(),
                    engine.observer().hands_over(),
                );
                commit(
                    engine.store_mut(),
                    plan,
                    EventKind::PlanInterrupted(PlanInterrupted {
                        phase: snapshot.phase(),
                        state: ProcessingState::Queued,
                        reason: "interrupted".into(),
                        previous_owner: None,
                        by: Some(by),
                        handover,
                    }),
                    |tx| state::reason(tx, &snapshot, Some("interrupted")),
                )?;
                engine.flush(&plan.plan_id)?;
            }
            Ok(Stopped::Interrupted)
        }
        StopCause::LeaseLost => Ok(Stopped::LeaseLost),
    }
}
