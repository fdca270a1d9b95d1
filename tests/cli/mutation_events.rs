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
        rusqlite::params![id, std::process::id(), cleveragents_engine::lease::host_name()],
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
    // The status says what the rejection left and what to do next.
    let out = env.run(&["--format", "plain", "plan", "status", &id]);
    let text = crate::support::stdout(&out);
    assert!(
        text.contains("its gate was rejected") && text.contains(&format!("plan apply {id}")),
        "{text}"
    );

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
    // Its gate is withdrawn with it, as `plan cancel` does: nothing is left to approve.
    assert!(
        ev.iter()
            .any(|(k, d)| k == "approval_resolved" && d["status"] == "withdrawn"),
        "{ev:?}"
    );
    let (doc, _) = env.json(&["plan", "approvals", &other]);
    assert_eq!(doc["data"]["approvals"], serde_json::json!([]), "{doc:#}");
}

#[test]
fn review_export_correct_apply_and_cleanup_each_write_their_events() {
    let s = setup();
    let env = &s.env;
    let (_, code, id) = use_plan(&s, "trusted");
    assert_eq!(code, 3, "trusted stops at the apply gate");

    let ev = mutate(env, &id, &["plan", "review", &id, "--accept", "README"], 0);
    assert!(
        ev.iter()
            .any(|(k, d)| k == "review_marked" && d["mark"] == "accepted"),
        "{ev:?}"
    );

    let ev = mutate(
        env,
        &id,
        &["plan", "export", &id, "--branch", "try-notes"],
        0,
    );
    let exported: Vec<_> = ev.iter().filter(|(k, _)| k == "plan_exported").collect();
    assert_eq!(exported.len(), 1, "{ev:?}");
    assert_eq!(exported[0].1["branch"], "try-notes");
    let patch = env.root().join("notes.patch");
    let ev = mutate(
        env,
        &id,
        &["plan", "export", &id, "--patch", patch.to_str().unwrap()],
        0,
    );
    assert!(
        ev.iter()
            .any(|(k, d)| k == "plan_exported" && d["patch"] == patch.to_str().unwrap()),
        "{ev:?}"
    );

    let step = {
        let st = cleveragents_engine::store::Store::open(&db_file(env)).unwrap();
        let pid = id.parse().unwrap();
        st.decisions(&pid)
            .unwrap()
            .into_iter()
            .find(|d| d.is_current() && d.step.is_some())
            .expect("a step decision")
            .decision_id
            .to_string()
    };
    let ev = mutate(
        env,
        &id,
        &[
            "plan",
            "correct",
            "--mode",
            "revert",
            "-g",
            "same again",
            "--yes",
            &step,
        ],
        0,
    );
    assert!(
        ev.iter()
            .any(|(k, d)| k == "state_changed" && d["reason"] == "correction"),
        "{ev:?}"
    );

    let ev = mutate(env, &id, &["plan", "apply", "--yes", &id], 0);
    assert!(
        has(&ev, "approval_resolved") && has(&ev, "apply_complete"),
        "{ev:?}"
    );
    // Only the accepted README was applied; the rest stays in the sandbox, so its work tree
    // is kept (no `sandbox_cleaned` yet).
    assert!(!has(&ev, "sandbox_cleaned"), "{ev:?}");
    // A cancelled plan's sandbox is removed by `plan cleanup`, with its event.
    let (_, _, other) = use_plan(&s, "trusted");
    mutate(env, &other, &["plan", "cancel", &other], 0);
    let ev = mutate(env, &other, &["plan", "cleanup", "--yes"], 0);
    assert!(
        ev.iter()
            .any(|(k, d)| k == "sandbox_cleaned" && d["action"] == "removed"),
        "{ev:?}"
    );
}

/// Every `registry_changed` event, oldest first, as `(registry, name, change)`.
fn registry_events(env: &Env) -> Vec<(String, String, String)> {
    let conn = rusqlite::Connection::open(db_file(env)).unwrap();
    let mut stmt = conn
        .prepare(
            "SELECT data FROM events WHERE type = 'registry_changed' AND plan_id IS NULL \
             ORDER BY seq",
        )
        .unwrap();
    stmt.query_map([], |r| r.get::<_, String>(0))
        .unwrap()
        .map(|d| {
            let v: Value = serde_json::from_str(&d.unwrap()).unwrap();
            let s = |k: &str| v[k].as_str().unwrap().to_string();
            (s("registry"), s("name"), s("change"))
        })
        .collect()
}

#[test]
fn every_registry_change_writes_an_event_naming_the_item() {
    let s = setup();
    let env = &s.env;
    let seen = |registry: &str, name: &str, change: &str| {
        let events = registry_events(env);
        assert!(
            events
                .iter()
                .any(|(r, n, c)| r == registry && n == name && c == change),
            "no {registry} {name} {change} in {events:?}"
        );
    };
    // What `setup` registered.
    seen("resource", "local/repo", "added");
    seen("project", "local/app", "added");
    seen("action", "local/notes", "added");

    let ok = |args: &[&str]| {
        let before = registry_events(env).len();
        let (doc, code) = env.json(args);
        assert_eq!(code, 0, "{args:?}: {doc:#}");
        assert!(
            registry_events(env).len() > before,
            "{args:?} wrote no event"
        );
        doc
    };
    let inv = ok(&["invariant", "add", "--project", "app", "Keep the changelog"]);
    let inv_id = inv["data"]["invariants"][0]["invariant_id"]
        .as_str()
        .unwrap_or_else(|| panic!("{inv:#}"))
        .to_string();
    seen("invariant", &inv_id, "added");
    ok(&["invariant", "remove", "--yes", &inv_id]);
    seen("invariant", &inv_id, "removed");

    let v = ok(&["project", "validation", "add", "app", "true"]);
    let v_id = v["data"]["validation"]["validation_id"]
        .as_str()
        .unwrap_or_else(|| panic!("{v:#}"))
        .to_string();
    seen("validation", &v_id, "added");
    ok(&["project", "validation", "remove", "--yes", "app", &v_id]);
    seen("validation", &v_id, "removed");

    ok(&["action", "delete", "--yes", "local/notes"]);
    seen("action", "local/notes", "removed");
    ok(&["project", "delete", "--yes", "app"]);
    seen("project", "local/app", "removed");
    ok(&["resource", "remove", "--yes", "local/repo"]);
    seen("resource", "local/repo", "removed");
}

#[test]
fn plan_events_lists_the_log_filters_by_type_and_names_an_unknown_type() {
    let s = setup();
    let env = &s.env;
    let (_, code, id) = use_plan(&s, "trusted");
    assert_eq!(code, 3);
    mutate(env, &id, &["plan", "export", &id, "--branch", "look"], 0);
    let stored = events_of(env, &id);
    let (doc, code) = env.json(&["plan", "events", &id]);
    assert_eq!(code, 0, "{doc:#}");
    let shown: Vec<(String, Value)> = doc["data"]["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| (e["type"].as_str().unwrap().to_string(), e["data"].clone()))
        .collect();
    assert_eq!(
        shown.iter().map(|(k, _)| k).collect::<Vec<_>>(),
        stored.iter().map(|(k, _)| k).collect::<Vec<_>>(),
        "every stored event of the plan, in order"
    );
    let (doc, _) = env.json(&["plan", "events", &id, "--type", "plan_exported"]);
    let only: Vec<&str> = doc["data"]["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["type"].as_str().unwrap())
        .collect();
    assert_eq!(only, ["plan_exported"]);
    let out = env.run(&["--format", "plain", "plan", "events", &id]);
    let text = crate::support::stdout(&out);
    assert!(
        text.contains("exported 1 file(s) to branch look") || text.contains("to branch look"),
        "{text}"
    );
    let (doc, code) = env.json(&["plan", "events", &id, "--type", "nope"]);
    assert_eq!(
        (code, doc["error"]["code"].as_str()),
        (1, Some("INVALID_INPUT"))
    );
    assert!(
        doc["error"]["message"]
            .as_str()
            .unwrap()
            .contains("--type nope"),
        "{doc:#}"
    );
}
