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

/// The plans another process should resume now, oldest first. A stale lease is first
/// recovered as any command would ([`lease::recover_if_stale`]): a plan left `processing` goes
/// back to (phase, queued), one its driver left between two pieces of work (just created, or
/// a phase done) keeps its state; both are marked `interrupted` by the vanished owner. A plan
/// that waits for a human (a pending approval) is not abandoned.
///
/// # Errors
/// [`StoreError`].
pub fn abandoned(store: &mut Store) -> Result<Vec<Id>, StoreError> {
    for plan in plans_where(
        store,
        "state = 'processing' OR plan_id IN (SELECT plan_id FROM plan_leases)",
    )? {
        lease::recover_if_stale(store, &plan)?;
    }
    let mut out = Vec::new();
    for plan in plans_where(
        store,
        "state IN ('queued', 'complete') AND state_reason = 'interrupted' AND phase <> 'applied'",
    )? {
        if store.is_actor_run(&plan)? || store.child_link(&plan)?.is_some() {
            continue;
        }
        if !store.pending_approvals(Some(&plan))?.is_empty() {
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

#[cfg(test)]
mod tests {
    use jiff::Timestamp;

    use super::*;
    use crate::domain::approval::{Approval, ApprovalKind};
    use crate::domain::plan::Plan;

    /// A plan in (`phase`, `state`) whose driver, a process that has exited, still holds its
    /// lease: the plan as a killed instance leaves it.
    fn left_by_a_dead_driver(phase: &str, state: &str) -> (tempfile::TempDir, Store, Id) {
        let dir = tempfile::tempdir().unwrap();
        let mut store = Store::open(&dir.path().join("db")).unwrap();
        let plan = Plan::new("local/a", "a", Timestamp::now());
        store.insert_plan(&plan).unwrap();
        store
            .conn()
            .execute(
                "UPDATE plans SET phase = ?2, state = ?3 WHERE plan_id = ?1",
                rusqlite::params![plan.plan_id.to_string(), phase, state],
            )
            .unwrap();
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let dead = child.id();
        child.wait().unwrap();
        store
            .conn()
            .execute(
                "INSERT INTO plan_leases (plan_id, pid, host, kind, acquired_at, heartbeat_at) VALUES (?1, ?2, ?3, ?4, ?5, ?5)",
                rusqlite::params![
                    plan.plan_id.to_string(),
                    dead,
                    lease::host_name(),
                    phase,
                    Timestamp::now().to_string()
                ],
            )
            .unwrap();
        (dir, store, plan.plan_id)
    }

    #[test]
    fn a_plan_whose_creator_died_before_driving_it_is_abandoned_and_stays_queued() {
        let (_dir, mut store, plan) = left_by_a_dead_driver("strategize", "queued");
        assert_eq!(abandoned(&mut store).unwrap(), [plan]);
        let p = store.plan(&plan).unwrap().unwrap();
        assert_eq!((p.phase().as_str(), p.state().as_str()), ("strategize", "queued"));
        assert!(lease::holder(&store, &plan).unwrap().is_none());
    }

    #[test]
    fn a_plan_left_between_two_phases_is_abandoned_and_keeps_its_finished_phase() {
        let (_dir, mut store, plan) = left_by_a_dead_driver("strategize", "complete");
        assert_eq!(abandoned(&mut store).unwrap(), [plan]);
        let p = store.plan(&plan).unwrap().unwrap();
        assert_eq!((p.phase().as_str(), p.state().as_str()), ("strategize", "complete"));
        // It stays abandoned for whoever looks next, until a driver moves it on.
        assert_eq!(abandoned(&mut store).unwrap(), [plan]);
    }

    #[test]
    fn a_plan_waiting_for_a_human_is_not_abandoned_when_its_driver_dies() {
        let (_dir, mut store, plan) = left_by_a_dead_driver("execute", "complete");
        let gate = Approval::new(plan, ApprovalKind::PhaseGate, "Apply?", Timestamp::now());
        store.insert_approval(&gate).unwrap();
        assert!(abandoned(&mut store).unwrap().is_empty());
        assert!(lease::holder(&store, &plan).unwrap().is_none());
    }

    #[test]
    fn a_plan_queued_without_a_lease_is_nobodys_to_take_over() {
        let (_dir, mut store, _) = left_by_a_dead_driver("strategize", "queued");
        store
            .conn()
            .execute("DELETE FROM plan_leases", [])
            .unwrap();
        assert!(abandoned(&mut store).unwrap().is_empty());
    }
}
