//! Semantic escalation (spec section 27): a decision whose confidence is below the threshold
//! waits for a human under every profile but `full-auto`, even when the profile takes
//! decisions automatically.

use serde_json::Value;

use super::lifecycle::{Setup, scripted_env, setup_with};
use crate::support::provider_server::{ProviderServer, Turn};
use crate::support::{run_keyed, use_plan_keyed};

const ONE_STEP: &str = "name: local/notes\ndescription: Write release notes\ndefinition-of-done: NOTES.md names the release\nstrategy-actor: builtin/checklist-strategist\nexecution-actor: builtin/script-executor\narguments:\n  - name: version\n    type: string\n    required: true\n";

/// A strategist recording one decision with `confidence`, then an executor writing NOTES.md.
fn server(confidence: f64) -> ProviderServer {
    let decision = format!(
        r#"{{"key": "notes", "decision_type": "implementation_choice", "question": "Where do the notes go?", "chosen_option": "NOTES.md", "confidence_score": {confidence}, "rationale": "a guess", "step": {{"instructions": "write NOTES.md naming release 1.2"}}}}"#
    );
    ProviderServer::start(vec![
        Turn::tools("", &[("record_decision", decision.as_str())], (10, 5)),
        Turn::tools(
            "",
            &[("finish_strategy", r#"{"summary": "one step"}"#)],
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
    ])
}

/// `plan use local/notes app --arg version=1.2` with the scripted model as strategist and
/// executor.
const BY_MODELS: &[&str] = &[
    "--strategy-actor",
    "scripted/m",
    "--execution-actor",
    "scripted/m",
    "--arg",
    "version=1.2",
];

fn pending(s: &Setup, id: &str) -> Vec<Value> {
    let (doc, code) = run_keyed(&s.env, &["plan", "status", id]);
    assert_eq!(code, 0, "{doc:#}");
    doc["data"]["pending_approvals"].as_array().unwrap().clone()
}

#[test]
fn a_low_confidence_decision_asks_under_trusted_and_resumes_once_decided() {
    let server = server(0.3);
    let s = setup_with(ONE_STEP);
    scripted_env(&s, &server, "openai");
    let (doc, code, id) = use_plan_keyed(&s.env, "local/notes", "trusted", BY_MODELS);
    assert_eq!(code, 3, "{doc:#}");
    let waiting = pending(&s, &id);
    assert_eq!(waiting.len(), 1, "{waiting:#?}");
    assert_eq!(waiting[0]["kind"], "decision");
    assert_eq!(
        waiting[0]["summary"],
        "Where do the notes go? (confidence 0.30 is below the escalation threshold 0.50)"
    );
    assert_eq!(server.requests().len(), 2, "Execute has not started");
    let apr = waiting[0]["approval_id"].as_str().unwrap().to_string();
    let (shown, code) = run_keyed(&s.env, &["plan", "approvals", &id]);
    assert_eq!(code, 0, "{shown:#}");
    let context = &shown["data"]["approvals"][0]["context"]["escalation"];
    assert_eq!(context["reason"], "low_confidence", "{shown:#}");
    assert_eq!(context["confidence"], 0.3, "{shown:#}");
    assert_eq!(context["threshold"], 0.5, "{shown:#}");
    // The plain `plan status` says why it waits.
    let out = s
        .env
        .command(&["--format", "plain", "plan", "status", &id])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("confidence 0.30 is below the escalation threshold 0.50"),
        "{text}"
    );
    // Deciding lets the trusted plan carry on to its apply gate.
    let (doc, code) = run_keyed(&s.env, &["plan", "decide", &apr, "--option", "1"]);
    assert_eq!(code, 3, "{doc:#}");
    assert_eq!(server.requests().len(), 4, "{doc:#}");
    let waiting = pending(&s, &id);
    assert_eq!(waiting[0]["kind"], "phase_gate", "{waiting:#?}");
}

#[test]
fn full_auto_does_not_escalate_and_a_confident_decision_does_not_ask_under_trusted() {
    let server = server(0.3);
    let s = setup_with(ONE_STEP);
    scripted_env(&s, &server, "openai");
    let (doc, code, id) = use_plan_keyed(&s.env, "local/notes", "full-auto", BY_MODELS);
    assert_eq!(code, 0, "{doc:#}");
    assert_eq!(doc["data"]["phase"], "applied", "{doc:#}");
    assert!(pending(&s, &id).is_empty());

    let server = server_confident();
    let s = setup_with(ONE_STEP);
    scripted_env(&s, &server, "openai");
    let (doc, code, id) = use_plan_keyed(&s.env, "local/notes", "trusted", BY_MODELS);
    assert_eq!(code, 3, "{doc:#}");
    let waiting = pending(&s, &id);
    assert_eq!(waiting.len(), 1, "{waiting:#?}");
    assert_eq!(
        waiting[0]["kind"], "phase_gate",
        "the apply gate, no decision"
    );
    assert_eq!(server.requests().len(), 4);
}

fn server_confident() -> ProviderServer {
    server(0.8)
}
