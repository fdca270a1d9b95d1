//! `auto_strategy_revision` (spec section 27): a step that fails after its retries sends the
//! plan back to re-decide the failed step's decision and its subtree, with the failure as
//! guidance, at most twice; past that the plan errors as without the flag.

use serde_json::Value;

use super::lifecycle::{Setup, scripted_env, setup_with};
use crate::support::provider_server::{ProviderServer, Turn};
use crate::support::{Env, db_file, run_keyed};

const FAILING: &str = "name: local/notes\ndescription: Write release notes\ndefinition-of-done: NOTES.md names the release\nstrategy-actor: builtin/checklist-strategist\nexecution-actor: builtin/script-executor\narguments:\n  - name: version\n    type: string\n    required: true\nscript:\n  - name: broken\n    run: exit 3\n";

const ONE_STEP: &str = "name: local/notes\ndescription: Write release notes\ndefinition-of-done: NOTES.md names the release\nstrategy-actor: builtin/checklist-strategist\nexecution-actor: builtin/script-executor\narguments:\n  - name: version\n    type: string\n    required: true\n";

/// The data of the plan's `state_changed` events with `reason`, oldest first.
fn revisions(env: &Env, plan: &str, reason: &str) -> Vec<Value> {
    let conn = rusqlite::Connection::open(db_file(env)).unwrap();
    let mut stmt = conn
        .prepare(
            "SELECT data FROM events WHERE plan_id = ?1 AND type = 'state_changed' ORDER BY seq",
        )
        .unwrap();
    stmt.query_map([plan], |r| {
        let data: String = r.get(0)?;
        Ok(serde_json::from_str::<Value>(&data).unwrap())
    })
    .unwrap()
    .map(Result::unwrap)
    .filter(|d| d["reason"] == reason)
    .collect()
}

fn status(s: &Setup, id: &str) -> Value {
    let (doc, code) = run_keyed(&s.env, &["plan", "status", id]);
    assert_eq!(code, 0, "{doc:#}");
    doc["data"].clone()
}

#[test]
fn a_step_that_keeps_failing_is_revised_twice_then_the_plan_errors() {
    let s = setup_with(FAILING);
    let (doc, code) = s.env.json(&[
        "plan",
        "use",
        "local/notes",
        "app",
        "--arg",
        "version=1.2",
        "--automation-profile",
        "autonomous",
    ]);
    assert_ne!(code, 0, "{doc:#}");
    let id = doc["data"]["plan_id"].as_str().unwrap().to_string();
    let data = status(&s, &id);
    assert_eq!(data["phase"], "execute", "{data:#}");
    assert_eq!(data["state"], "errored", "{data:#}");
    let revised = revisions(&s.env, &id, "strategy_revision");
    assert_eq!(revised.len(), 2, "{revised:#?}");
    assert_eq!(revised[0]["revision"], 1);
    assert_eq!(revised[1]["revision"], 2);
    assert_eq!(revised[0]["limit"], 2);
    assert_eq!(revisions(&s.env, &id, "strategy_revision_limit").len(), 1);
    // Both revisions' re-runs failed: neither correction is left "executing".
    let statuses: Vec<&str> = data["corrections"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["status"].as_str().unwrap())
        .collect();
    assert_eq!(statuses, ["failed", "failed"], "{data:#}");
    assert_eq!(revisions(&s.env, &id, "correction").len(), 2);
    // Nothing in plan status calls the flag unsupported any more.
    assert_eq!(data["not_yet_supported"], serde_json::json!([]), "{data:#}");
}

#[test]
fn without_the_flag_a_failed_step_errors_the_plan_at_once() {
    let s = setup_with(FAILING);
    let (doc, code) = s.env.json(&[
        "plan",
        "use",
        "local/notes",
        "app",
        "--arg",
        "version=1.2",
        "--automation-profile",
        "trusted",
    ]);
    assert_ne!(code, 0, "{doc:#}");
    let id = doc["data"]["plan_id"].as_str().unwrap().to_string();
    assert_eq!(status(&s, &id)["state"], "errored");
    assert!(revisions(&s.env, &id, "strategy_revision").is_empty());
}

#[test]
fn a_failed_model_step_is_revised_with_the_failure_and_the_revised_step_passes() {
    let first = r#"{"key": "notes", "decision_type": "implementation_choice", "question": "Where do the notes go?", "chosen_option": "NOTES.md via the broken tool", "confidence_score": 0.9, "rationale": "a guess", "step": {"instructions": "write NOTES.md"}}"#;
    let second = r#"{"key": "notes", "decision_type": "implementation_choice", "question": "Where do the notes go?", "chosen_option": "NOTES.md with write_file", "confidence_score": 0.9, "rationale": "the first try failed", "step": {"instructions": "write NOTES.md with write_file"}}"#;
    let server = ProviderServer::start(vec![
        Turn::tools("", &[("record_decision", first)], (10, 5)),
        Turn::tools(
            "",
            &[("finish_strategy", r#"{"summary": "one step"}"#)],
            (10, 5),
        ),
        // The step and its one retry (autonomous: auto_checkpoint_restore) fail.
        Turn::status(400, "the model refused the request"),
        Turn::status(400, "the model refused the request"),
        // The revision: the strategist re-decides the failed step.
        Turn::tools("", &[("record_decision", second)], (10, 5)),
        Turn::tools(
            "",
            &[("finish_strategy", r#"{"summary": "revised"}"#)],
            (10, 5),
        ),
        Turn::tools(
            "",
            &[(
                "write_file",
                r#"{"path": "NOTES.md", "content": "Release 1.2\n"}"#,
            )],
            (20, 5),
        ),
        Turn::text("Wrote NOTES.md.", (20, 5)),
    ]);
    let s = setup_with(ONE_STEP);
    scripted_env(&s, &server, "openai");
    let (doc, code) = run_keyed(
        &s.env,
        &[
            "plan",
            "use",
            "--strategy-actor",
            "scripted/m",
            "--execution-actor",
            "scripted/m",
            "--automation-profile",
            "autonomous",
            "local/notes",
            "app",
            "--arg",
            "version=1.2",
        ],
    );
    let id = doc["data"]["plan_id"].as_str().unwrap().to_string();
    assert_eq!(code, 3, "the plan waits at the apply gate: {doc:#}");
    let data = status(&s, &id);
    assert_eq!(data["phase"], "execute", "{data:#}");
    assert_eq!(data["state"], "complete", "{data:#}");
    assert_eq!(
        data["pending_approvals"][0]["kind"], "phase_gate",
        "{data:#}"
    );
    assert_eq!(server.requests().len(), 8);
    let revised = revisions(&s.env, &id, "strategy_revision");
    assert_eq!(revised.len(), 1, "{revised:#?}");
    assert_eq!(revised[0]["error_code"], "ACTOR_FAILED", "{revised:#?}");
    // The strategist was told what failed.
    let prompt = serde_json::to_string(&server.requests()[4].body).unwrap();
    assert!(
        prompt.contains("strategy revision after a failed step"),
        "{prompt}"
    );
    assert!(prompt.contains("the model refused the request"), "{prompt}");
}
