//! Expected outputs are checked (spec section 11): after a step, every file its decision
//! lists in `expected_outputs` must exist in the sandbox. A missing one fails the step with a
//! message naming the file — retried, revised or escalated as the automation profile says,
//! like any step failure — and one the strategist marked optional (`optional_outputs`) is
//! only a warning.

use serde_json::{Value, json};

use super::correction::{by_key, store};
use super::execute_context::{model_plan, step_decision, strategist};
use crate::support::provider_server::{ProviderServer, Turn};

/// A step that must leave `notes.txt` and `summary.txt` (`optional` lists those it may
/// leave out).
fn two_outputs(optional: &[&str]) -> String {
    step_decision(
        "d1",
        &[],
        json!({
            "instructions": "Write notes.txt and summary.txt",
            "expected_outputs": ["notes.txt", "summary.txt", "a summary a human can read"],
            "optional_outputs": optional,
        }),
    )
}

/// The executor's two turns writing `files`.
fn writes(files: &[&str]) -> Vec<Turn> {
    let calls: Vec<String> = files
        .iter()
        .map(|f| json!({"path": f, "content": format!("{f}\n")}).to_string())
        .collect();
    let calls: Vec<(&str, &str)> = calls.iter().map(|c| ("write_file", c.as_str())).collect();
    vec![
        Turn::tools("", &calls, (10, 5)),
        Turn::text("done", (10, 2)),
    ]
}

fn step_output(s: &super::lifecycle::Setup, plan: &str) -> (Option<String>, Value) {
    let st = store(&s.env);
    let pid = plan.parse().unwrap();
    let d1 = by_key(&st, &pid)["d1"].decision_id;
    let step = st
        .plan_steps(&pid)
        .unwrap()
        .into_iter()
        .find(|p| p.decision_id == d1)
        .unwrap();
    let output = serde_json::from_str(step.output.as_deref().unwrap_or("null")).unwrap();
    (step.error, output)
}

#[test]
fn a_missing_expected_output_fails_the_step_naming_the_file() {
    let mut script = strategist(&[two_outputs(&[])]);
    script.extend(writes(&["notes.txt"]));
    let server = ProviderServer::start(script);
    let (s, doc, code) = model_plan(&server, "trusted");
    assert_ne!(code, 0, "{doc:#}");
    assert_eq!(server.remaining(), 0, "trusted does not retry the step");
    let id = doc["data"]["plan_id"].as_str().unwrap().to_string();
    let (status, _) = s.env.json(&["plan", "status", &id]);
    assert_eq!(status["data"]["state"], "errored", "{status:#}");
    let (error, _) = step_output(&s, &id);
    let error = error.expect("the step failed");
    assert!(
        error.contains("expected output `summary.txt`"),
        "the failure names the missing file: {error}"
    );
    assert!(
        !error.contains("notes.txt"),
        "notes.txt was written: {error}"
    );
    let text = doc.to_string();
    assert!(
        text.contains("EXPECTED_OUTPUT_MISSING") && text.contains("summary.txt"),
        "the answer says why: {doc:#}"
    );
}

#[test]
fn a_missing_expected_output_is_retried_as_the_profile_says() {
    let mut script = strategist(&[two_outputs(&[])]);
    script.extend(writes(&["notes.txt"]));
    // autonomous: auto_checkpoint_restore rolls the step back and runs it once more.
    script.extend(writes(&["notes.txt", "summary.txt"]));
    let server = ProviderServer::start(script);
    let (s, doc, code) = model_plan(&server, "autonomous");
    assert_eq!(
        code, 3,
        "the retry passed; the plan waits at the apply gate: {doc:#}"
    );
    assert_eq!(server.remaining(), 0);
    let id = doc["data"]["plan_id"].as_str().unwrap().to_string();
    let (error, _) = step_output(&s, &id);
    assert_eq!(error, None);
    assert!(crate::support::sandbox::read(&s.env, &id, "summary.txt").is_some());
}

#[test]
fn a_missing_optional_output_is_only_a_warning() {
    let mut script = strategist(&[two_outputs(&["summary.txt"])]);
    script.extend(writes(&["notes.txt"]));
    let server = ProviderServer::start(script);
    let (s, doc, code) = model_plan(&server, "trusted");
    assert_eq!(code, 3, "the plan goes on to the apply gate: {doc:#}");
    let id = doc["data"]["plan_id"].as_str().unwrap().to_string();
    let (error, output) = step_output(&s, &id);
    assert_eq!(error, None);
    assert_eq!(
        output["warnings"],
        json!(["optional output `summary.txt` was not produced"]),
        "{output:#}"
    );
    let st = store(&s.env);
    let d1 = &by_key(&st, &id.parse().unwrap())["d1"];
    assert_eq!(
        d1.step.as_ref().unwrap().optional_outputs,
        ["summary.txt"],
        "the marker is recorded with the decision"
    );
}
