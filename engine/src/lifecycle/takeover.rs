//! Taking over plans whose driver is gone (spec section 21: a server that dies loses
//! nothing). A plan is abandoned when its driver vanished (its lease went stale: the process
//! died, or its heartbeat stopped for longer than the expiry it declared) or when the server
//! instance driving it stopped and handed it over; nothing has happened to it since. A user's
//! Ctrl-C is not abandonment: that plan waits for its user.
//!
//! Spawned children are left to their parent (resuming the parent resumes them), and isolated
//! actor runs are never driven.

use rusqlite::OptionalExtension;

use crate::domain::Id;
use crate::domain::event::PlanInterrupted;
use crate::events::EventKind;
use crate::lease;
use crate::store::{Store, StoreError};

/// The plans another process should resume now, oldest first. Plans left `processing` by a
/// driver whose lease is stale are first moved back to (phase, queued) with reason
/// `interrupted`, as any command would.
///
/// # Errors
/// [`StoreError`].
pub fn abandoned(store: &mut Store) -> Result<Vec<Id>, StoreError> {
    for plan in plans_where(store, "state = 'processing'")? {
        lease::recover_if_stale(store, &plan)?;
    }
    let mut out = Vec::new();
    for plan in plans_where(
        store,
        "state = 'queued' AND state_reason = 'interrupted' AND phase <> 'applied'",
    )? {
        if store.is_actor_run(&plan)? || store.child_link(&plan)?.is_some() {
            continue;
        }
        if last_event_hands_over(store, &plan)? {
            out.push(plan);
        }
    }
    Ok(out)
}

fn plans_where(store: &Store, condition: &str) -> Result<Vec<Id>, StoreError> {
    let mut stmt = store.conn().prepare(&format!(
        "SELECT plan_id FROM plans WHERE {condition} ORDER BY created_at, plan_id"
    ))?;
    let ids = stmt
        .query_map([], |r| r.get::<_, String>(0))?
        .collect::<Result<Vec<_>, _>>()?;
    ids.into_iter()
        .map(|id| {
            id.parse().map_err(|e: ulid::DecodeError| StoreError::Corrupt {
                table: "plans",
                column: "plan_id",
                message: e.to_string(),
            })
        })
        .collect()
}

/// Whether the plan's newest event says its driver vanished or handed it over.
fn last_event_hands_over(store: &Store, plan: &Id) -> Result<bool, StoreError> {
    let last: Option<(String, String)> = store
        .conn()
        .query_row(
            "SELECT type, data FROM events WHERE plan_id = ?1 ORDER BY seq DESC LIMIT 1",
            [plan.to_string()],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .optional()?;
    let Some((kind, data)) = last else {
        return Ok(false);
    };
    let Ok(kind) = kind.parse() else {
        return Ok(false);
    };
    let data = serde_json::from_str(&data).unwrap_or(serde_json::Value::Null);
    Ok(match EventKind::from_stored(kind, data) {
        EventKind::PlanInterrupted(PlanInterrupted {
            previous_owner,
            handover,
            ..
        }) => previous_owner.is_some() || handover,
        _ => false,
    })
}
