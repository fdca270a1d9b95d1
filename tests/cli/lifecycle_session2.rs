//! Lifecycle, session 2: diff hunks that name their decisions, `request_decision` from a model
//! executor, the invariant actor, the apply journal's crash path, `--no-commit`, Ctrl-C during
//! a run, and the findings of the last new-user trial.

use serde_json::{Value, json};

use super::lifecycle::{Setup, run_keyed, scripted_env, setup, use_plan};
use crate::support::db_file;
use crate::support::provider_server::{ProviderServer, Turn};

fn store(s: &Setup) -> cleveragents::engine::store::Store {
    cleveragents::engine::store::Store::open(&db_file(&s.env)).unwrap()
}

/// A plan of the three-step script action executed to (execute, complete) under `trusted`.
fn executed() -> (Setup, String) {
    let s = setup();
    let (doc, code, id) = use_plan(&s, "trusted");
    assert_eq!(code, 3, "{doc:#}");
    (s, id)
}

/// The decision ids of the plan's steps, in execution order.
fn step_decisions(s: &Setup, id: &str) -> Vec<String> {
    store(s)
        .plan_steps(&id.parse().unwrap())
        .unwrap()
        .into_iter()
        .map(|st| st.decision_id.to_string())
        .collect()
}

fn files_of(diff: &Value) -> Vec<Value> {
    diff["data"]["resources"][0]["files"]
        .as_array()
        .unwrap()
        .clone()
}

#[test]
fn every_json_diff_hunk_names_the_decisions_whose_steps_produced_its_lines() {
    let (s, id) = executed();
    let steps = step_decisions(&s, &id);
    assert_eq!(steps.len(), 3);
    let (write, extend, readme) = (&steps[0], &steps[1], &steps[2]);
    let (diff, code) = s.env.json(&["plan", "diff", &id]);
    assert_eq!(code, 0, "{diff:#}");
    let files = files_of(&diff);
    let hunk_ids = |path: &str| -> Vec<Vec<String>> {
        files
            .iter()
            .find(|f| f["path"] == path)
            .unwrap_or_else(|| panic!("{path} not in {diff:#}"))["hunks"]
            .as_array()
            .unwrap()
            .iter()
            .map(|h| {
                h["decision_ids"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|d| d.as_str().unwrap().to_string())
                    .collect()
            })
            .collect()
    };
    // NOTES.md: "Release 1.2" from step `write`, "More" from step `extend`.
    assert_eq!(hunk_ids("NOTES.md"), [vec![write.clone(), extend.clone()]]);
    // README: one appended line from step `readme`.
    assert_eq!(hunk_ids("README"), [vec![readme.clone()]]);
}

/// An action with one step from its definition of done (for a model execution actor).
const ONE_STEP: &str = "name: local/notes\ndescription: Write release notes\ndefinition-of-done: NOTES.md names the release\nstrategy-actor: builtin/checklist-strategist\nexecution-actor: builtin/script-executor\narguments:\n  - name: version\n    type: string\n    required: true\n";

fn use_with_model_executor(s: &Setup, profile: &str) -> (Value, i32, String) {
    let (doc, code) = run_keyed(
        &s.env,
        &[
            "plan",
            "use",
            "--execution-actor",
            "scripted/m",
            "--automation-profile",
            profile,
            "local/notes",
            "app",
            "--arg",
            "version=1.2",
        ],
    );
    let id = doc["data"]["plan_id"]
        .as_str()
        .unwrap_or_else(|| panic!("{doc:#}"))
        .to_string();
    (doc, code, id)
}

#[test]
fn a_model_executor_asks_the_user_and_resumes_its_transcript_with_the_answer_in_another_process() {
    for kind in ["openai", "anthropic"] {
        let question = r##"{"question": "Which heading style?", "options": ["# Release 1.2", "Release 1.2 (plain)"], "recommended": "# Release 1.2", "context": "The README uses no markdown headings."}"##;
        let server = ProviderServer::start(vec![
            Turn::tools(
                "",
                &[(
                    "write_file",
                    r#"{"path": "DRAFT.md", "content": "draft\n"}"#,
                )],
                (20, 5),
            ),
            Turn::tools(
                "I need a choice.",
                &[("request_decision", question)],
                (30, 6),
            ),
            Turn::tools(
                "",
                &[(
                    "write_file",
                    r#"{"path": "NOTES.md", "content": "Release 1.2 (plain)\n"}"#,
                )],
                (40, 7),
            ),
            Turn::text("Wrote NOTES.md in the plain style.", (50, 8)),
        ]);
        let s = super::lifecycle::setup_with(ONE_STEP);
        scripted_env(&s, &server, kind);
        let (doc, code, id) = use_with_model_executor(&s, "trusted");
        // The plan stops for the question: exit 3 naming the decision approval.
        assert_eq!(code, 3, "{kind}: {doc:#}");
        assert_eq!(doc["status"], "needs_approval", "{doc:#}");
        let plan = {
            let (p, _) = run_keyed(&s.env, &["plan", "status", &id]);
            p
        };
        assert_eq!(
            (&plan["data"]["phase"], &plan["data"]["state"]),
            (&json!("execute"), &json!("queued")),
            "{plan:#}"
        );
        let (approvals, _) = run_keyed(&s.env, &["plan", "approvals", &id]);
        let pending: Vec<&Value> = approvals["data"]["approvals"]
            .as_array()
            .unwrap_or_else(|| panic!("{approvals:#}"))
            .iter()
            .filter(|a| a["status"] == "pending")
            .collect();
        assert_eq!(pending.len(), 1, "{approvals:#}");
        let apr = pending[0]["approval_id"].as_str().unwrap().to_string();
        assert_eq!(pending[0]["kind"], "decision");
        assert_eq!(
            pending[0]["options"],
            json!(["# Release 1.2", "Release 1.2 (plain)"])
        );
        assert_eq!(pending[0]["context"]["phase"], "execute");
        // The transcript is persisted with the approval.
        let st = store(&s);
        let plan_id = id.parse().unwrap();
        let steps = st.plan_steps(&plan_id).unwrap();
        let pause = st
            .open_pause(&plan_id, &steps[0].decision_id)
            .unwrap()
            .expect("the paused transcript is stored");
        assert_eq!(pause.approval_id, apr);
        assert_eq!(
            server.requests().len(),
            2,
            "{kind}: no model call while waiting"
        );

        // `plan execute` before the answer does not run the step again.
        let (doc, code) = run_keyed(&s.env, &["plan", "execute", &id]);
        assert_eq!(code, 3, "{doc:#}");
        assert_eq!(server.requests().len(), 2);

        // Another process answers; execution resumes with the answer in the transcript.
        let (doc, code) = run_keyed(&s.env, &["plan", "decide", &apr, "--option", "2"]);
        assert_eq!(code, 3, "{kind}: {doc:#}");
        assert_eq!(
            doc["data"]["approval"]["context"]["gate"], "apply",
            "{doc:#}"
        );
        let requests = server.requests();
        assert_eq!(requests.len(), 4);
        let resumed = requests[2].body.to_string();
        assert!(
            resumed.contains("The user chose option 2: Release 1.2 (plain)"),
            "{kind}: {resumed}"
        );
        assert!(
            resumed.contains("Carry out this step now"),
            "the original prompt: {resumed}"
        );
        assert!(
            resumed.contains("draft"),
            "the work before the pause: {resumed}"
        );
        // The work before the pause survived; the decision records the user's choice.
        let (diff, _) = run_keyed(&s.env, &["plan", "diff", "--stat", &id]);
        let paths: Vec<&str> = diff["data"]["resources"][0]["files"]
            .as_array()
            .unwrap()
            .iter()
            .map(|f| f["path"].as_str().unwrap())
            .collect();
        assert_eq!(paths, ["DRAFT.md", "NOTES.md"], "{diff:#}");
        let asked = st
            .decisions(&plan_id)
            .unwrap()
            .into_iter()
            .find(|d| d.question.as_deref() == Some("Which heading style?"))
            .expect("the question is a decision");
        assert_eq!(asked.chosen_option, "Release 1.2 (plain)");
        assert_eq!(asked.parent_decision_id, Some(steps[0].decision_id));
        assert!(
            st.open_pause(&plan_id, &steps[0].decision_id)
                .unwrap()
                .is_none(),
            "the pause was used"
        );
        let (doc, code) = run_keyed(&s.env, &["plan", "apply", "--yes", &id]);
        assert_eq!(code, 0, "{doc:#}");
        assert_eq!(
            std::fs::read_to_string(s.repo.join("NOTES.md")).unwrap(),
            "Release 1.2 (plain)\n"
        );
    }
}

/// `plan use` under `manual` with a plan-level invariant that repeats the project's in other
/// words, and `scripted/m` as the invariant actor.
fn use_with_invariant_actor(s: &Setup) -> String {
    let (doc, code) = run_keyed(
        &s.env,
        &[
            "plan",
            "use",
            "--invariant-actor",
            "scripted/m",
            "--invariant",
            "The public API must not change",
            "local/notes",
            "app",
            "--arg",
            "version=1.2",
        ],
    );
    assert_eq!(code, 0, "{doc:#}");
    doc["data"]["plan_id"].as_str().unwrap().to_string()
}

/// The id of the plan's candidate invariant with `text` (for an action invariant, the row
/// carried into the plan, not the action's own).
fn invariant_id(s: &Setup, text: &str) -> String {
    store(s)
        .invariants()
        .unwrap()
        .into_iter()
        .filter(|i| i.text == text)
        .max_by_key(|i| i.plan_id.is_some())
        .unwrap_or_else(|| panic!("no invariant `{text}`"))
        .invariant_id
}

#[test]
fn the_plans_invariant_actor_reconciles_the_invariants_instead_of_the_deterministic_reconciler() {
    let s = setup();
    // The provider must exist at `plan use`; the server with its script comes after, once
    // the invariant ids are known.
    scripted_env(&s, &ProviderServer::start(vec![]), "openai");
    let id = use_with_invariant_actor(&s);
    let project = invariant_id(&s, "Keep the public API stable");
    let plan_level = invariant_id(&s, "The public API must not change");
    let action = invariant_id(&s, "Never rewrite git history");
    let incomplete = format!(r#"{{"effective": ["{plan_level}"], "dropped": []}}"#);
    let answer = format!(
        r#"{{"effective": ["{action}", "{plan_level}"], "dropped": [{{"invariant_id": "{project}", "kept": "{plan_level}", "reason": "duplicate", "why": "same constraint in other words"}}]}}"#
    );
    let server = ProviderServer::start(vec![
        Turn::tools("", &[("reconcile_invariants", &incomplete)], (30, 10)),
        Turn::tools("", &[("reconcile_invariants", &answer)], (40, 20)),
    ]);
    scripted_env(&s, &server, "openai");
    let (doc, code) = run_keyed(&s.env, &["plan", "execute", &id]);
    assert_eq!(code, 3, "manual stops at the execute gate: {doc:#}");
    assert_eq!(
        doc["data"]["approval"]["context"]["gate"], "execute",
        "{doc:#}"
    );

    // The actor saw every candidate, and its invalid first answer came back as an error.
    let requests = server.requests();
    assert_eq!(requests.len(), 2);
    let system = requests[0].body["messages"][0]["content"].as_str().unwrap();
    for inv in [&project, &plan_level, &action] {
        assert!(system.contains(inv.as_str()), "{system}");
    }
    let second = requests[1].body.to_string();
    assert!(
        second.contains("every candidate must be effective or dropped; missing: "),
        "{second}"
    );

    // Its answer, not the deterministic one, decides the invariant_enforced decisions.
    let decisions = store(&s).decisions(&id.parse().unwrap()).unwrap();
    let enforced: Vec<&str> = decisions
        .iter()
        .filter(|d| d.decision_type.as_str() == "invariant_enforced")
        .map(|d| d.chosen_option.as_str())
        .collect();
    assert_eq!(
        enforced,
        [
            "Never rewrite git history",
            "The public API must not change"
        ]
    );
    let root = decisions
        .iter()
        .find(|d| d.decision_type.as_str() == "prompt_definition")
        .unwrap();
    let reconciler = &root.context_snapshot["reconciler"];
    assert_eq!(reconciler["used"], "invariant_actor", "{reconciler:#}");
    assert_eq!(reconciler["invariant_actor"], "scripted/m");
    assert_eq!(reconciler["dropped"][0]["invariant_id"], project.as_str());
    assert_eq!(reconciler["dropped"][0]["reason"], "duplicate");
    let usage = store(&s).usage_for_plan(&id.parse().unwrap()).unwrap();
    assert_eq!((usage.calls, usage.input_tokens), (2, 70));
}

#[test]
fn an_invariant_actor_that_never_answers_errors_strategize_instead_of_guessing() {
    let s = setup();
    scripted_env(&s, &ProviderServer::start(vec![]), "anthropic");
    let id = use_with_invariant_actor(&s);
    let server = ProviderServer::start(vec![Turn::text("They all look fine to me.", (5, 5))]);
    scripted_env(&s, &server, "anthropic");
    let (doc, code) = run_keyed(&s.env, &["plan", "execute", &id]);
    assert_eq!(code, 1, "{doc:#}");
    let (status, _) = run_keyed(&s.env, &["plan", "status", &id]);
    assert_eq!(
        (&status["data"]["phase"], &status["data"]["state"]),
        (&json!("strategize"), &json!("errored")),
        "{status:#}"
    );
    assert_eq!(status["data"]["error_code"], "ACTOR_FAILED", "{status:#}");
    assert!(
        status["data"]["error_message"]
            .as_str()
            .unwrap()
            .contains("did not reconcile the invariants"),
        "{status:#}"
    );
    assert!(
        store(&s)
            .decisions(&id.parse().unwrap())
            .unwrap()
            .is_empty(),
        "no strategy was recorded on unreconciled invariants"
    );
}
