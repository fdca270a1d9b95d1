//! `plan cancel`: asks a live driver to stop, or cancels a plan nobody drives, and then its
//! children.

use std::time::Duration;

use serde_json::json;

use super::{Lifecycle, RunError, approvals, wrong_state};
use crate::domain::Next;
use crate::domain::{Id, Phase, Plan, ProcessingState};
use crate::lease;
use crate::store::children::ChildStatus;

/// `plan cancel`: when a live process drives the plan, asks it to stop (it records the
/// cancellation within 2 s) and waits up to `wait` for that; otherwise cancels at once.
/// Returns whether the plan is cancelled now.
///
/// # Errors
/// [`RunError::WrongState`] for applied or cancelled plans; store errors.
pub fn cancel(
    engine: &mut Lifecycle,
    plan_id: &Id,
    reason: Option<&str>,
    wait: std::time::Duration,
) -> Result<Plan, RunError> {
    engine.recover(plan_id)?;
    let mut plan = engine.plan(plan_id)?;
    if plan.phase() == Phase::Applied || plan.state() == ProcessingState::Cancelled {
        return Err(wrong_state(
            &plan,
            format!(
                "plan {plan_id} is {}/{}, which is final; there is nothing to cancel",
                plan.phase(),
                plan.state()
            ),
            vec![Next::PlanStatus { plan: *plan_id }],
        ));
    }
    lease::request_cancel(engine.store_mut(), plan_id, reason)?;
    match lease::acquire(engine.store_mut(), plan_id, "cancel") {
        Ok(guard) => {
            plan = engine.plan(plan_id)?;
            if plan.state() != ProcessingState::Cancelled {
                approvals::cancel_now(
                    engine,
                    &mut plan,
                    reason.unwrap_or("cancelled by the user"),
                )?;
            }
            drop(guard);
            cancel_children(engine, plan_id, reason.unwrap_or("cancelled by the user"))?;
            Ok(plan)
        }
        Err(lease::LeaseError::Held { .. }) => {
            let deadline = std::time::Instant::now() + wait;
            loop {
                plan = engine.plan(plan_id)?;
                if plan.state() == ProcessingState::Cancelled {
                    engine.flush(plan_id)?;
                    return Ok(plan);
                }
                if std::time::Instant::now() >= deadline {
                    return Ok(plan);
                }
                std::thread::sleep(std::time::Duration::from_millis(50));
                engine.recover(plan_id)?;
            }
        }
        Err(e) => Err(e.into()),
    }
}

/// Cancels the children of a plan that nobody drives any more (the parent was cancelled while
/// no process ran it), recursively.
///
/// # Errors
/// [`RunError`].
fn cancel_children(engine: &Lifecycle, parent: &Id, reason: &str) -> Result<(), RunError> {
    let seed = engine.seed();
    for link in engine.store().children_of(parent)? {
        let mut e = seed.open()?;
        let Some(p) = e.store().plan(&link.child_plan_id)? else {
            continue;
        };
        if p.state() == ProcessingState::Cancelled || p.phase() == Phase::Applied {
            continue;
        }
        let _ = cancel(
            &mut e,
            &link.child_plan_id,
            Some(&format!("its parent {parent} was cancelled: {reason}")),
            Duration::from_secs(5),
        );
        if matches!(
            link.status,
            ChildStatus::Pending | ChildStatus::Running | ChildStatus::Succeeded
        ) {
            e.store_mut().set_child_status(
                &link.child_plan_id,
                ChildStatus::Cancelled,
                Some(&json!({"reason": "the parent was cancelled"})),
                true,
            )?;
        }
    }
    Ok(())
}
