//! Approval rows: raise, list, resolve. Each change writes its event in the same transaction.

use jiff::Timestamp;
use rusqlite::{OptionalExtension, params};
use serde_json::Value;

use super::events;
use super::{Store, StoreError};
use crate::domain::approval::{Approval, ApprovalStatus};
use crate::domain::event::{AnswerStep, ApprovalRequested, ApprovalResolved, EventKind};
use crate::domain::id::Id;

const COLUMNS: &str = "approval_id, plan_id, kind, status, summary, context, options, answer_command, answer, created_at, resolved_at";

fn corrupt(column: &'static str, message: impl ToString) -> StoreError {
    StoreError::Corrupt {
        table: "approvals",
        column,
        message: message.to_string(),
    }
}

type Raw = (
    String,
    String,
    String,
    String,
    String,
    String,
    String,
    String,
    Option<String>,
    String,
    Option<String>,
);

fn raw(r: &crate::store::db::Row<'_>) -> rusqlite::Result<Raw> {
    r.try_into()
}

fn convert(r: Raw) -> Result<Approval, StoreError> {
    let (
        approval_id,
        plan_id,
        kind,
        status,
        summary,
        context,
        options,
        // Not read back: the answer is derived from the row's kind (`Approval::next`).
        _answer_command,
        answer,
        created,
        resolved,
    ) = r;
    Ok(Approval {
        approval_id,
        plan_id: plan_id.parse().map_err(|e| corrupt("plan_id", e))?,
        kind: kind.parse().map_err(|e: String| corrupt("kind", e))?,
        status: status.parse().map_err(|e: String| corrupt("status", e))?,
        summary,
        context: serde_json::from_str(&context).map_err(|e| corrupt("context", e))?,
        options: serde_json::from_str(&options).map_err(|e| corrupt("options", e))?,
        answer: answer
            .map(|a| serde_json::from_str(&a).map_err(|e| corrupt("answer", e)))
            .transpose()?,
        created_at: created
            .parse()
            .map_err(|e: jiff::Error| corrupt("created_at", e))?,
        resolved_at: resolved
            .map(|t| {
                t.parse()
                    .map_err(|e: jiff::Error| corrupt("resolved_at", e))
            })
            .transpose()?,
    })
}

impl Store {
    /// Stores a new approval and its `approval_requested` event in one transaction.
    ///
    /// # Errors
    /// [`StoreError::Sqlite`] (for example an unknown plan).
    pub fn insert_approval(&mut self, approval: &Approval) -> Result<(), StoreError> {
        let tx = self.conn_mut().transaction()?;
        insert_in(&tx, approval)?;
        tx.commit()?;
        Ok(())
    }

    /// One approval by id.
    ///
    /// # Errors
    /// [`StoreError`].
    pub fn approval(&self, approval_id: &str) -> Result<Option<Approval>, StoreError> {
        let row = self
            .conn()
            .query_row(
                &format!("SELECT {COLUMNS} FROM approvals WHERE approval_id = ?1"),
                [approval_id],
                raw,
            )
            .optional()?;
        row.map(convert).transpose()
    }

    /// Pending approvals, oldest first, across all plans or for one plan.
    ///
    /// # Errors
    /// [`StoreError`].
    pub fn pending_approvals(&self, plan_id: Option<&Id>) -> Result<Vec<Approval>, StoreError> {
        let mut stmt = self.conn().prepare(&format!(
            "SELECT {COLUMNS} FROM approvals WHERE status = 'pending' AND (plan_id = ?1 OR ?1 IS NULL) ORDER BY created_at, approval_id"
        ))?;
        let rows = stmt
            .query_map([plan_id.map(Id::to_string)], raw)?
            .collect::<Result<Vec<_>, _>>()?;
        rows.into_iter().map(convert).collect()
    }

    /// Resolves a pending approval with a final status and answer, with its
    /// `approval_resolved` event. Returns false if it was not pending (answered elsewhere).
    ///
    /// # Errors
    /// [`StoreError`].
    pub fn resolve_approval(
        &mut self,
        approval_id: &str,
        status: ApprovalStatus,
        answer: &Value,
    ) -> Result<bool, StoreError> {
        let tx = self.conn_mut().transaction()?;
        let done = resolve_in(&tx, approval_id, status, answer)?;
        tx.commit()?;
        Ok(done)
    }
}

/// Stores a new approval and its `approval_requested` event on an open transaction.
///
/// # Errors
/// [`StoreError::Sqlite`].
pub(crate) fn insert_in(
    tx: &crate::store::Transaction<'_>,
    approval: &Approval,
) -> Result<(), StoreError> {
    tx.execute(
        &format!("INSERT INTO approvals ({COLUMNS}) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)"),
        params![
            approval.approval_id,
            approval.plan_id.to_string(),
            approval.kind.as_str(),
            approval.status.as_str(),
            approval.summary,
            approval.context.to_string(),
            serde_json::to_string(&approval.options).expect("strings serialize"),
            // The column keeps its name and NOT NULL; it now holds the typed step as JSON,
            // for a reader of the database (older rows hold the command text they showed).
            serde_json::to_string(&approval.next()).expect("a next step serializes"),
            approval.answer.as_ref().map(Value::to_string),
            approval.created_at.to_string(),
            approval.resolved_at.map(|t| t.to_string()),
        ],
    )?;
    events::append(
        tx,
        Some(&approval.plan_id),
        &EventKind::ApprovalRequested(ApprovalRequested {
            approval_id: approval.approval_id.clone(),
            kind: approval.kind,
            summary: approval.summary.clone(),
            options: approval.options.clone(),
            answer_command: AnswerStep::Step(approval.next()),
        }),
    )?;
    Ok(())
}

/// Resolves a pending approval on an open transaction, with its `approval_resolved` event.
/// Returns false if it was not pending.
///
/// # Errors
/// [`StoreError`].
pub(crate) fn resolve_in(
    tx: &crate::store::Transaction<'_>,
    approval_id: &str,
    status: ApprovalStatus,
    answer: &Value,
) -> Result<bool, StoreError> {
    let plan: Option<String> = tx
        .query_row(
            "SELECT plan_id FROM approvals WHERE approval_id = ?1 AND status = 'pending'",
            [approval_id],
            |r| r.get(0),
        )
        .optional()?;
    let Some(plan) = plan else { return Ok(false) };
    tx.execute(
        "UPDATE approvals SET status = ?2, answer = ?3, resolved_at = ?4, \
         decided_by = (SELECT driven_by FROM plans WHERE plans.plan_id = approvals.plan_id) \
         WHERE approval_id = ?1",
        params![
            approval_id,
            status.as_str(),
            answer.to_string(),
            Timestamp::now().to_string()
        ],
    )?;
    let plan_id: Id = plan.parse().map_err(|e| corrupt("plan_id", e))?;
    events::append(
        tx,
        Some(&plan_id),
        &EventKind::ApprovalResolved(ApprovalResolved {
            approval_id: approval_id.to_owned(),
            status,
            answer: answer.clone(),
        }),
    )?;
    Ok(true)
}

/// Pending approval ids of a plan, optionally of one kind, on any connection.
///
/// # Errors
/// [`StoreError::Sqlite`].
pub(crate) fn pending_ids_in(
    conn: &crate::store::Connection,
    plan_id: &Id,
    kind: Option<&str>,
) -> Result<Vec<String>, StoreError> {
    let mut stmt = conn.prepare(
        "SELECT approval_id FROM approvals WHERE plan_id = ?1 AND status = 'pending' AND (kind = ?2 OR ?2 IS NULL) ORDER BY created_at, approval_id",
    )?;
    let ids = stmt
        .query_map(params![plan_id.to_string(), kind], |r| r.get(0))?
        .collect::<Result<Vec<String>, _>>()?;
    Ok(ids)
}

impl Store {
    /// Every approval of a plan (any status), oldest first.
    ///
    /// # Errors
    /// [`StoreError`].
    pub fn approvals_of(&self, plan_id: &Id) -> Result<Vec<Approval>, StoreError> {
        let mut stmt = self.conn().prepare(&format!(
            "SELECT {COLUMNS} FROM approvals WHERE plan_id = ?1 ORDER BY created_at, approval_id"
        ))?;
        let rows = stmt
            .query_map([plan_id.to_string()], raw)?
            .collect::<Result<Vec<_>, _>>()?;
        rows.into_iter().map(convert).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::approval::ApprovalKind;
    use crate::domain::event::EventType;
    use crate::domain::plan::Plan;
    use serde_json::json;

    #[test]
    fn approvals_are_raised_listed_and_resolved_once() {
        let dir = tempfile::tempdir().unwrap();
        let mut store = Store::open(&dir.path().join("db")).unwrap();
        let plan = Plan::new("local/a", "a", Timestamp::now());
        store.insert_plan(&plan).unwrap();
        let mut apr = Approval::new(
            plan.plan_id,
            ApprovalKind::Decision,
            "Which test runner?",
            Timestamp::now(),
        );
        apr.options = vec!["cargo test".into(), "nextest".into()];
        store.insert_approval(&apr).unwrap();
        assert_eq!(store.pending_approvals(None).unwrap(), [apr.clone()]);
        assert!(
            store
                .resolve_approval(
                    &apr.approval_id,
                    ApprovalStatus::Answered,
                    &json!({"option": 2})
                )
                .unwrap()
        );
        assert!(
            !store
                .resolve_approval(&apr.approval_id, ApprovalStatus::Rejected, &json!({}))
                .unwrap(),
            "only once"
        );
        assert!(
            store
                .pending_approvals(Some(&plan.plan_id))
                .unwrap()
                .is_empty()
        );
        let stored = store.approval(&apr.approval_id).unwrap().unwrap();
        assert_eq!(
            (stored.status, stored.answer),
            (ApprovalStatus::Answered, Some(json!({"option": 2})))
        );
        let kinds: Vec<EventType> = events::after(&store, 0, None, 10)
            .unwrap()
            .into_iter()
            .map(|e| e.kind.event_type())
            .collect();
        assert_eq!(
            kinds,
            [EventType::ApprovalRequested, EventType::ApprovalResolved]
        );
    }
}
