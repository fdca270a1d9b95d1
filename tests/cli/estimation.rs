//! A model `--estimation-actor` (spec section 10): it runs when Strategize completes with the
//! decision tree and `report_estimate`; invalid answers go back as tool errors; an actor that
//! fails is replaced by `builtin/usage-estimator` with a warning.

use serde_json::Value;

use super::lifecycle::{Setup, scripted_env, setup_with};
use crate::support::provider_server::{ProviderServer, Turn};
use crate::support::{run_keyed, use_plan_keyed};

const ONE_STEP: &str = "name: local/notes\ndescription: Write release notes\ndefinition-of-done: NOTES.md names the release\nstrategy-actor: builtin/checklist-strategist\nexecution-actor: builtin/script-executor\narguments:\n  - name: version\n    type: string\n    required: true\n";

const DECISION: &str = r#"{"key": "notes", "decision_type": "implementation_choice", "question": "Where do the notes go?", "chosen_option": "NOTES.md", "confidence_score": 0.9, "rationale": "the convention", "step": {"instructions": "write NOTES.md naming release 1.2"}}"#;

fn strategize_then(estimator: Vec<Turn>) -> ProviderServer {
    let mut turns = vec![
        Turn::tools("", &[("record_decision", DECISION)], (10, 5)),
        Turn::tools(
            "",
            &[("finish_strategy", r#"{"summary": "one step"}"#)],
            (10, 5),
        ),
    ];
    turns.extend(estimator);
    ProviderServer::start(turns)
}

/// `plan use local/notes app` under `supervised`, the scripted model strategizing and
/// estimating: the plan's status at the execute gate, and its id.
fn estimated_plan(s: &Setup) -> (Value, String) {
    let (doc, code, id) = use_plan_keyed(
        &s.env,
        "local/notes",
        "supervised",
        &[
            "--strategy-actor",
            "scripted/m",
            "--estimation-actor",
            "scripted/m",
            "--arg",
            "version=1.2",
        ],
    );
    assert_eq!(code, 3, "the execute gate: {doc:#}");
    let (status, code) = run_keyed(&s.env, &["plan", "status", &id]);
    assert_eq!(code, 0, "{status:#}");
    (status["data"].clone(), id)
}

#[test]
fn a_model_estimator_reports_the_estimate_after_a_refused_answer() {
    let server = strategize_then(vec![
        Turn::tools(
            "",
            &[(
                "report_estimate",
                r#"{"plan_tokens": {"median": 900, "min": 1200, "max": 2000}, "summary": "wrong"}"#,
            )],
            (10, 5),
        ),
        Turn::tools(
            "",
            &[(
                "report_estimate",
                r#"{"plan_tokens": {"median": 1200, "min": 900, "max": 2000}, "risk": 0.25, "summary": "about 1.2k tokens for one step"}"#,
            )],
            (10, 5),
        ),
    ]);
    let s = setup_with(ONE_STEP);
    scripted_env(&s, &server, "openai");
    let (data, id) = estimated_plan(&s);
    let e = &data["estimate"];
    assert_eq!(e["estimator"], "scripted/m", "{data:#}");
    assert_eq!(e["plan_tokens"]["median"], 1200.0, "{e:#}");
    assert_eq!(e["risk"], 0.25, "{e:#}");
    assert_eq!(e["steps"], 1, "{e:#}");
    assert!(e.get("warning").is_none(), "{e:#}");
    assert_eq!(server.requests().len(), 4);
    // The refused answer went back to the model as a tool error naming what was wrong.
    let retry = serde_json::to_string(&server.requests()[3].body).unwrap();
    assert!(retry.contains("min <= median <= max"), "{retry}");
    // The decision tree was the estimator's input.
    let first = serde_json::to_string(&server.requests()[2].body).unwrap();
    assert!(
        first.contains("write NOTES.md naming release 1.2"),
        "{first}"
    );
    // The execute gate and the plain status show it.
    assert_eq!(
        data["pending_approvals"][0]["kind"], "phase_gate",
        "{data:#}"
    );
    let (approvals, _) = run_keyed(&s.env, &["plan", "approvals", &id]);
    assert_eq!(
        approvals["data"]["approvals"][0]["context"]["estimate"]["estimator"], "scripted/m",
        "{approvals:#}"
    );
    let out = s
        .env
        .command(&["--format", "plain", "plan", "status", &id])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("Estimate (scripted/m): about 1.2k tokens for one step"),
        "{text}"
    );
    assert!(!text.contains("not yet supported"), "{text}");
}

#[test]
fn an_estimator_that_fails_falls_back_to_the_builtin_with_a_warning() {
    let server = strategize_then(vec![Turn::status(400, "no such model")]);
    let s = setup_with(ONE_STEP);
    scripted_env(&s, &server, "openai");
    let (data, id) = estimated_plan(&s);
    let e = &data["estimate"];
    assert_eq!(e["estimator"], "builtin/usage-estimator", "{data:#}");
    let warning = e["warning"].as_str().unwrap_or_default();
    assert!(
        warning.contains("the estimation actor scripted/m failed"),
        "{e:#}"
    );
    assert_eq!(server.requests().len(), 3);
    let out = s
        .env
        .command(&["--format", "plain", "plan", "status", &id])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("Estimate warning: the estimation actor scripted/m failed"),
        "{text}"
    );
}
