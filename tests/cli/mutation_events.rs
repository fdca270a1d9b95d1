//! Every command that changes a plan leaves its trace in the event log (spec section 27):
//! the log is read after each mutation, and a plan another live process holds is refused.

use serde_json::Value;

use super::lifecycle::{setup, use_plan};
use crate::support::{Env, db_file};

/// The plan's events as `(type, data)`, oldest first.
fn events_of(env: &Env, plan: &str) -> Vec<(String, Value)> {
    let conn = rusqlite::Connection::open(db_file(env)).unwrap();
    let mut stmt = conn
        .prepare("SELECT type, data FROM events WHERE plan_id = ?1 ORDER BY seq")
        .unwrap();
    stmt.query_map([plan], |r| {
        let data: String = r.get(1)?;
        Ok((r.get(0)?, serde_json::from_str(&data).unwrap()))
    })
    .unwrap()
    .map(Result::unwrap)
    .collect()
}

/// Runs `args`, asserts the exit code, and returns the events the command added.
fn mutate(env: &Env, plan: &str, args: &[&str], exit: i32) -> Vec<(String, Value)> {
    let before = events_of(env, plan).len();
    let (doc, code) = env.json(args);
    assert_eq!(code, exit, "{args:?}: {doc:#}");
    let after = events_of(env, plan);
    assert!(after.len() > before, "{args:?} wrote no event");
    after[before..].to_vec()
}

fn has(events: &[(String, Value)], kind: &str) -> bool {
    events.iter().any(|(k, _)| k == kind)
}

#[test]
fn every_plan_mutation_writes_events_and_rollback_takes_the_lease() {
    let s = setup();
    let env = &s.env;
    let (_, code, id) = use_plan(&s, "trusted");
    assert_eq!(code, 3, "trusted stops at the apply gate");
    let log = events_of(env, &id);
    assert!(has(&log, "plan_created") && has(&log, "approval_requested"));

    let ev = mutate(env, &id, &["plan", "prompt", &id, "keep it short"], 0);
    assert!(!ev.is_empty());

    let (cps, _) = env.json(&["plan", "checkpoints", &id]);
    let cp = cps["data"]["checkpoints"][0]["checkpoint_id"]
        .as_str()
        .unwrap()
        .to_string();
    // A live process holding the plan's lease keeps a rollback out.
    let conn = rusqlite::Connection::open(db_file(env)).unwrap();
    conn.execute(
        "INSERT INTO plan_leases (plan_id, pid, host, kind, acquired_at, heartbeat_at) \
         VALUES (?1, ?2, ?3, 'execute', strftime('%Y-%m-%dT%H:%M:%SZ','now'), strftime('%Y-%m-%dT%H:%M:%SZ','now'))",
        rusqlite::params![id, std::process::id(), cleveragents::engine::lease::host_name()],
    )
    .unwrap();
    let before = events_of(env, &id).len();
    let (doc, code) = env.json(&["plan", "rollback", "--yes", &id, &cp]);
    assert_eq!(
        (code, doc["error"]["code"].as_str()),
        (1, Some("CONFLICT")),
        "{doc:#}"
    );
    assert_eq!(
        events_of(env, &id).len(),
        before,
        "a refused rollback writes nothing"
    );
    conn.execute("DELETE FROM plan_leases WHERE plan_id = ?1", [&id])
        .unwrap();

    let ev = mutate(env, &id, &["plan", "rollback", "--yes", &id, &cp], 0);
    assert!(
        ev.iter()
            .any(|(k, d)| k == "state_changed" && d["reason"] == "rollback"),
        "{ev:?}"
    );

    let ev = mutate(env, &id, &["plan", "execute", &id], 3);
    assert!(
        has(&ev, "execute_started") && has(&ev, "approval_requested"),
        "{ev:?}"
    );

    let apr = env.json(&["plan", "approvals", &id]).0["data"]["approvals"][0]["approval_id"]
        .as_str()
        .unwrap()
        .to_string();
    let ev = mutate(
        env,
        &id,
        &["plan", "reject", &apr, "--reason", "not yet"],
        0,
    );
    assert!(has(&ev, "approval_resolved"), "{ev:?}");

    let ev = mutate(env, &id, &["plan", "cancel", &id], 0);
    assert!(has(&ev, "plan_cancelled"), "{ev:?}");

    // `project delete --force` cancels the project's active plans, each with its event.
    let (_, _, other) = use_plan(&s, "manual");
    let ev = mutate(
        env,
        &other,
        &["project", "delete", "--force", "--yes", "app"],
        0,
    );
    let cancelled: Vec<_> = ev.iter().filter(|(k, _)| k == "plan_cancelled").collect();
    assert_eq!(cancelled.len(), 1, "{ev:?}");
    assert_eq!(cancelled[0].1["project_deleted"], "local/app", "{ev:?}");
}
