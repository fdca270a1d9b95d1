//! Every state change of a plan, with its event, in one transaction.
//!
//! Callers mutate a loaded [`Plan`] (checking the move with the domain's
//! [`PlanStatus`](crate::domain::PlanStatus) rules), then [`commit`] saves it, appends
//! the event and runs any extra statements (decisions, approvals, steps) before one commit.

use jiff::Timestamp;
use crate::store::Transaction;
use serde_json::{Value, json};

use super::RunError;
use crate::domain::approval::ApprovalStatus;
use crate::domain::event::PlanErrored;
use crate::domain::{Plan, ProcessingState};
use crate::events::{self, EventKind};
use crate::store::lifecycle_run::{save_plan, set_state_reason};
use crate::store::{Store, StoreError, approvals};

/// Saves `plan` (touching `updated_at`), appends `event`, runs
/// `extra`, and commits, all in one immediate transaction. Returns the event's sequence.
///
/// # Errors
/// [`StoreError`]; nothing is written then.
pub(crate) fn commit(
    store: &mut Store,
    plan: &mut Plan,
    event: EventKind,
    extra: impl FnOnce(&Transaction<'_>) -> Result<(), StoreError>,
) -> Result<i64, StoreError> {
    plan.updated_at = Timestamp::now();
    let tx = store
        .conn_mut()
        .transaction()?;
    save_plan(&tx, plan)?;
    extra(&tx)?;
    let seq = events::append(&tx, Some(&plan.plan_id), &event)?;
    tx.commit()?;
    Ok(seq)
}

/// Checks a within-phase state change against the domain rules.
///
/// # Errors
/// [`RunError::WrongState`].
pub(crate) fn set_state(plan: &mut Plan, to: ProcessingState) -> Result<(), RunError> {
    plan.status.set_state(to).map_err(|e| RunError::WrongState {
        phase: plan.phase(),
        state: plan.state(),
        message: e.to_string(),
        hints: Vec::new(),
    })
}

/// Moves a plan to (phase, errored) with an error code and message, an `errored` approval
/// (answered by retrying the phase, [`Approval::next`]), and a `plan_errored` event.
///
/// [`Approval::next`]: crate::domain::approval::Approval::next
///
/// # Errors
/// [`RunError`].
pub(crate) fn errored(
    store: &mut Store,
    plan: &mut Plan,
    code: &str,
    message: &str,
    details: Value,
) -> Result<String, RunError> {
    set_state(plan, ProcessingState::Errored)?;
    plan.error_code = Some(code.to_string());
    plan.error_message = Some(message.to_string());
    // A transient provider failure under a profile that does not retry by itself asks the
    // human to retry or abort; anything else is an errored plan.
    let transient = code == "TRANSIENT_FAILURE";
    // A child plan's results that conflict with the parent's sandbox need a human to recover.
    let recovery = code == "MERGE_CONFLICT";
    // A model call that would pass the plan's budget waits for a higher limit.
    if code == "BUDGET_EXCEEDED" {
        return budget_exceeded(store, plan, message, details);
    }
    let mut approval = crate::domain::approval::Approval::new(
        plan.plan_id,
        if transient {
            crate::domain::approval::ApprovalKind::TransientFailure
        } else if recovery {
            crate::domain::approval::ApprovalKind::ErrorRecovery
        } else {
            crate::domain::approval::ApprovalKind::Errored
        },
        if transient {
            format!(
                "{}: the model provider failed transiently: {message}",
                plan.phase()
            )
        } else if recovery {
            format!(
                "{}: merging a child plan's results conflicted: {message}",
                plan.phase()
            )
        } else {
            format!("{} errored: {message}", plan.phase())
        },
        Timestamp::now(),
    );
    approval.options = if transient {
        vec!["retry".into(), "abort".into()]
    } else {
        vec!["retry".into(), "cancel".into()]
    };
    approval.context =
        json!({"phase": plan.phase(), "code": code, "message": message, "details": details});
    let id = approval.approval_id.clone();
    let event = EventKind::PlanErrored(PlanErrored {
        phase: plan.phase(),
        state: plan.state(),
        code: code.to_owned(),
        message: message.to_owned(),
        details,
        approval_id: id.clone(),
    });
    commit(store, plan, event, |tx| approvals::insert_in(tx, &approval))?;
    Ok(id)
}

/// The `budget` approval of a plan whose next model call would pass its budget: options
/// `raise` (answered with `plan decide APR --max-cost-usd X` / `--max-tokens N`) and
/// `cancel`.
fn budget_exceeded(
    store: &mut Store,
    plan: &mut Plan,
    message: &str,
    details: Value,
) -> Result<String, RunError> {
    use crate::domain::approval::{Approval, ApprovalKind};
    let mut approval = Approval::new(
        plan.plan_id,
        ApprovalKind::Budget,
        format!("{}: {message}", plan.phase()),
        Timestamp::now(),
    );
    approval.options = vec!["raise".into(), "cancel".into()];
    approval.context = json!({"phase": plan.phase(), "code": "BUDGET_EXCEEDED", "message": message, "details": details});
    let id = approval.approval_id.clone();
    let event = EventKind::PlanErrored(PlanErrored {
        phase: plan.phase(),
        state: plan.state(),
        code: "BUDGET_EXCEEDED".into(),
        message: message.to_owned(),
        details,
        approval_id: id.clone(),
    });
    commit(store, plan, event, |tx| approvals::insert_in(tx, &approval))?;
    Ok(id)
}

/// Resolves every pending approval of the plan of `kind` (all kinds when `None`) with
/// `status`, inside a transaction.
///
/// # Errors
/// [`StoreError`].
pub(crate) fn resolve_pending(
    tx: &Transaction<'_>,
    plan: &Plan,
    kind: Option<&str>,
    status: ApprovalStatus,
    answer: &Value,
) -> Result<Vec<String>, StoreError> {
    let mut ids = approvals::pending_ids_in(tx, &plan.plan_id, kind)?;
    // A phase that runs again answers a transient-failure approval as it answers an errored one.
    if kind == Some("errored") {
        ids.extend(approvals::pending_ids_in(
            tx,
            &plan.plan_id,
            Some("transient_failure"),
        )?);
        ids.extend(approvals::pending_ids_in(
            tx,
            &plan.plan_id,
            Some("error_recovery"),
        )?);
        ids.extend(approvals::pending_ids_in(
            tx,
            &plan.plan_id,
            Some("budget"),
        )?);
    }
    for id in &ids {
        approvals::resolve_in(tx, id, status, answer)?;
    }
    Ok(ids)
}

/// Records the plan's state reason (`interrupted`, `awaiting_decision`; `None` clears it).
///
/// # Errors
/// [`StoreError`].
pub(crate) fn reason(
    tx: &Transaction<'_>,
    plan: &Plan,
    why: Option<&str>,
) -> Result<(), StoreError> {
    set_state_reason(tx, &plan.plan_id, why)
}
