//! Enforced invariants (spec section 12, `docs/invariants.md`): after each step and before
//! Apply the plan's effective invariants are checked against the changes, and a violation
//! stops the plan with an `invariant_violation` approval showing the evidence.

use std::path::{Path, PathBuf};

use serde_json::Value;

use super::apply::repo_with;
use super::lifecycle::{Setup, scripted_env};
use crate::support::provider_server::{ProviderServer, Turn};
use crate::support::{Env, db_file, run_keyed, use_plan};

const MIGRATIONS: &str = r#"paths-unchanged: "migrations/**""#;

/// A repository with a migration and a README, registered as project `app`, and an action
/// `local/change` running `steps` with the script executor.
fn project(env: &Env, steps: &[&str]) -> PathBuf {
    let repo = repo_with(
        env.root(),
        "repo",
        &[
            ("migrations/000.sql", "create table a;\n"),
            ("README.md", "hello\n"),
            ("a.txt", "one\n"),
        ],
    );
    let ok = |args: &[&str]| {
        let (doc, code) = env.json(args);
        assert_eq!(code, 0, "{args:?}: {doc:#}");
    };
    ok(&[
        "resource",
        "add",
        "git-checkout",
        "local/repo",
        "--path",
        repo.to_str().unwrap(),
    ]);
    ok(&["project", "create", "--resource", "local/repo", "app"]);
    let mut yaml = String::from(
        "name: local/change\ndefinition-of-done: the change is made\nstrategy-actor: builtin/checklist-strategist\nexecution-actor: builtin/script-executor\nscript:\n",
    );
    for (i, s) in steps.iter().enumerate() {
        yaml.push_str(&format!(
            "  - name: s{i}\n    run: {}\n",
            serde_json::json!(s)
        ));
    }
    let file = env.root().join("action.yaml");
    std::fs::write(&file, yaml).unwrap();
    ok(&[
        "action",
        "create",
        "--available",
        "--config",
        file.to_str().unwrap(),
    ]);
    repo
}

/// `plan use local/change app` under `profile`, with `invariants` for this plan.
fn use_change(env: &Env, profile: &str, invariants: &[&str]) -> (Value, i32, String) {
    let extra: Vec<&str> = invariants.iter().flat_map(|i| ["--invariant", i]).collect();
    use_plan(env, "local/change", profile, &extra)
}

/// The approval a stopped command reports.
fn stopped_approval(doc: &Value) -> &Value {
    &doc["data"]["approval"]
}

fn status(env: &Env, id: &str) -> Value {
    let (st, code) = env.json(&["plan", "status", id]);
    assert_eq!(code, 0, "{st:#}");
    st
}

fn events(env: &Env, id: &str, kind: &str) -> Vec<Value> {
    let store = cleveragents_engine::store::Store::open(&db_file(env)).unwrap();
    let plan: cleveragents_engine::domain::Id = id.parse().unwrap();
    cleveragents_engine::store::events::after(&store, 0, Some(&plan), 10_000)
        .unwrap()
        .into_iter()
        .filter(|e| e.kind.event_type().as_str() == kind)
        .map(|e| e.kind.data())
        .collect()
}

fn file(repo: &Path, p: &str) -> Option<String> {
    std::fs::read_to_string(repo.join(p)).ok()
}

#[test]
fn a_step_touching_a_protected_path_stops_the_plan_and_accepting_once_continues() {
    let env = Env::new();
    let repo = project(
        &env,
        &[
            "echo two > a.txt",
            "echo 'create table b;' > migrations/001.sql",
            "echo three > a.txt",
        ],
    );
    let (doc, code, id) = use_change(&env, "full-auto", &[MIGRATIONS]);
    assert_eq!(code, 3, "a violation stops even full-auto: {doc:#}");
    let a = stopped_approval(&doc);
    assert_eq!(a["kind"], "invariant_violation", "{doc:#}");
    assert_eq!(a["context"]["check"], "paths-unchanged");
    assert_eq!(a["context"]["invariant"], MIGRATIONS);
    assert_eq!(
        a["context"]["evidence"]["paths"],
        serde_json::json!(["migrations/001.sql"])
    );
    assert!(
        a["context"]["step"]
            .as_str()
            .unwrap()
            .starts_with("step 2 of 3"),
        "{a:#}"
    );
    assert!(
        a["summary"]
            .as_str()
            .unwrap()
            .contains("migrations/001.sql"),
        "{a:#}"
    );
    // The offline script executor cannot act on guidance: a correction would re-run the same
    // script to the same violation, so it is not offered.
    assert_eq!(a["options"], serde_json::json!(["accept", "cancel"]));
    assert!(
        a["context"]["correct_unavailable"]
            .as_str()
            .unwrap_or_default()
            .contains("cannot act on guidance"),
        "{a:#}"
    );
    let apr = a["approval_id"].as_str().unwrap().to_string();

    // The first step passed its check; the second is recorded as violating it.
    let checked = events(&env, &id, "invariant_checked");
    assert_eq!(checked.len(), 2, "{checked:#?}");
    assert_eq!(checked[0]["checked"][0]["held"], true);
    assert_eq!(checked[1]["checked"][0]["held"], false);
    assert_eq!(events(&env, &id, "invariant_violated").len(), 1);

    // Status and the approvals list show it with its evidence; nothing reached the repo.
    let st = status(&env, &id);
    assert_eq!(
        (st["data"]["phase"].as_str(), st["data"]["state"].as_str()),
        (Some("execute"), Some("queued")),
        "{st:#}"
    );
    assert_eq!(st["data"]["state_reason"], "invariant_violation");
    assert_eq!(
        st["data"]["pending_approvals"][0]["context"]["evidence"]["paths"][0],
        "migrations/001.sql"
    );
    let (list, _) = env.json(&["plan", "approvals", &id]);
    assert_eq!(list["data"]["approvals"][0]["approval_id"], apr.as_str());
    let out = env.command(&["plan", "approvals", &id]).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("migrations/001.sql"), "{text}");
    assert_eq!(file(&repo, "a.txt").as_deref(), Some("one\n"));

    // `correct` is refused, naming the options there are; the approval stays.
    let (doc, code) = env.json(&["plan", "decide", &apr, "--option", "correct"]);
    assert_eq!(code, 1, "{doc:#}");
    assert_eq!(doc["error"]["code"], "INVALID_INPUT", "{doc:#}");
    assert!(doc.to_string().contains("accept, cancel"), "{doc:#}");
    let (list, _) = env.json(&["plan", "approvals", &id]);
    assert_eq!(list["data"]["approvals"][0]["approval_id"], apr.as_str());
    assert!(
        list["data"]["approvals"][0]["context"]["correct_command"].is_null(),
        "{list:#}"
    );

    // Accepted once: the plan goes on and (full-auto) applies; the accepted path is not
    // raised again before Apply.
    let (doc, code) = env.json(&["plan", "decide", &apr, "--option", "accept"]);
    assert_eq!(code, 0, "{doc:#}");
    let st = status(&env, &id);
    assert_eq!(st["data"]["phase"], "applied", "{st:#}");
    assert_eq!(file(&repo, "a.txt").as_deref(), Some("three\n"));
    assert_eq!(
        file(&repo, "migrations/001.sql").as_deref(),
        Some("create table b;\n")
    );
    let checked = events(&env, &id, "invariant_checked");
    let last = checked.last().unwrap();
    assert_eq!(last["at"], "apply", "{checked:#?}");
    assert_eq!(last["checked"][0]["held"], true);
    assert_eq!(last["checked"][0]["evidence"]["accepted_earlier"], true);
}

#[test]
fn cancelling_at_a_violation_cancels_the_plan_and_a_step_elsewhere_passes() {
    let env = Env::new();
    let repo = project(&env, &["echo 'drop table a;' > migrations/000.sql"]);
    let (doc, code, id) = use_change(&env, "trusted", &[MIGRATIONS]);
    assert_eq!(code, 3, "{doc:#}");
    let apr = stopped_approval(&doc)["approval_id"]
        .as_str()
        .unwrap()
        .to_string();
    assert_eq!(
        stopped_approval(&doc)["context"]["evidence"]["paths"][0],
        "migrations/000.sql"
    );
    let (doc, code) = env.json(&["plan", "decide", &apr, "--option", "cancel"]);
    assert_eq!(code, 0, "{doc:#}");
    assert_eq!(status(&env, &id)["data"]["state"], "cancelled");
    assert_eq!(
        file(&repo, "migrations/000.sql").as_deref(),
        Some("create table a;\n")
    );

    // A plan whose step stays away from migrations/ reaches the apply gate.
    let env = Env::new();
    project(&env, &["echo two > a.txt"]);
    let (doc, code, id) = use_change(&env, "trusted", &[MIGRATIONS]);
    assert_eq!(code, 3, "{doc:#}");
    assert_eq!(stopped_approval(&doc)["kind"], "phase_gate", "{doc:#}");
    assert_eq!(
        events(&env, &id, "invariant_checked")[0]["checked"][0]["held"],
        true
    );
}

#[test]
fn a_command_invariant_must_exit_zero_on_the_changed_tree() {
    let env = Env::new();
    project(&env, &["rm README.md"]);
    let (doc, code, _) = use_change(&env, "trusted", &["command: test -f README.md"]);
    assert_eq!(code, 3, "{doc:#}");
    let a = stopped_approval(&doc);
    assert_eq!(a["kind"], "invariant_violation", "{doc:#}");
    assert_eq!(a["context"]["check"], "command");
    assert_eq!(a["context"]["evidence"]["runs"][0]["exit_code"], 1, "{a:#}");
    assert_eq!(a["context"]["evidence"]["runs"][0]["result"], "exit 1");

    let env = Env::new();
    project(&env, &["echo two > a.txt"]);
    let (doc, code, id) = use_change(&env, "trusted", &["command: test -f README.md"]);
    assert_eq!(code, 3, "{doc:#}");
    assert_eq!(stopped_approval(&doc)["kind"], "phase_gate", "{doc:#}");
    let checked = events(&env, &id, "invariant_checked");
    assert_eq!(checked[0]["checked"][0]["check"], "command");
    assert_eq!(checked[0]["checked"][0]["held"], true, "{checked:#?}");
}

#[test]
fn the_check_before_apply_catches_a_change_made_in_the_sandbox_by_hand() {
    let env = Env::new();
    let repo = project(&env, &["rm README.md"]);
    let (doc, code, id) = use_change(&env, "trusted", &[MIGRATIONS, "command: test -f README.md"]);
    assert_eq!(code, 3, "{doc:#}");
    let apr = stopped_approval(&doc)["approval_id"]
        .as_str()
        .unwrap()
        .to_string();
    // While the plan waits, someone writes a migration in its sandbox.
    crate::support::sandbox::write(&env, &id, "migrations/001.sql", "by hand\n");
    let (doc, code) = env.json(&["plan", "decide", &apr, "--option", "accept"]);
    assert_eq!(code, 3, "the apply gate: {doc:#}");
    let (doc, code) = env.json(&["plan", "apply", "--yes", &id]);
    assert_eq!(code, 3, "{doc:#}");
    let a = stopped_approval(&doc);
    assert_eq!(a["kind"], "invariant_violation", "{doc:#}");
    assert_eq!(a["context"]["at"], "apply");
    assert_eq!(a["context"]["evidence"]["paths"][0], "migrations/001.sql");
    assert_eq!(
        doc["data"]["approvals"].as_array().unwrap().len(),
        1,
        "the command violation was accepted earlier: {doc:#}"
    );
    assert_eq!(file(&repo, "README.md").as_deref(), Some("hello\n"));
    assert!(file(&repo, "migrations/001.sql").is_none());
    // Asking again returns the same pending violation instead of raising another.
    let (again, code) = env.json(&["plan", "apply", "--yes", &id]);
    assert_eq!(code, 3, "{again:#}");
    assert_eq!(
        stopped_approval(&again)["approval_id"],
        a["approval_id"],
        "{again:#}"
    );
}

#[test]
fn a_bad_machine_form_is_refused_at_invariant_add_naming_the_text_and_the_fix() {
    let env = Env::new();
    for (text, fix) in [
        ("paths-unchanged:", "one or more globs"),
        ("paths-unchanged: src/[abc", "is not a valid glob"),
        ("command:  ", "must exit 0"),
        ("Paths-Unchanged: migrations/", "spelled another way"),
        (
            "paths_unchanged: migrations/",
            "write `paths-unchanged:` exactly",
        ),
        (r#"paths-unchanged: "migrations/**"#, "unbalanced quote"),
    ] {
        let (doc, code) = env.json(&["invariant", "add", "--global", text]);
        assert_eq!(
            (code, doc["error"]["code"].as_str()),
            (1, Some("INVALID_INPUT")),
            "{doc:#}"
        );
        let message = doc["error"]["message"].as_str().unwrap();
        assert!(
            message.contains(&format!("invariant `{}`", text.trim())),
            "{message}"
        );
        assert!(message.contains(fix), "{message}");
    }
    let (list, _) = env.json(&["invariant", "list"]);
    assert_eq!(
        list["data"]["invariants"].as_array().map(Vec::len),
        Some(0),
        "{list:#}"
    );
}

#[test]
fn a_free_text_invariant_the_invariant_actor_judges_violated_stops_the_plan_with_its_evidence() {
    let env = Env::new();
    let repo = project(&env, &["echo 'pub fn renamed() {}' > api.rs"]);
    let s = Setup {
        env,
        repo: repo.clone(),
    };
    scripted_env(&s, &ProviderServer::start(vec![]), "openai");
    let (doc, code) = run_keyed(
        &s.env,
        &[
            "plan",
            "use",
            "local/change",
            "app",
            "--automation-profile",
            "manual",
            "--invariant-actor",
            "scripted/m",
            "--invariant",
            "The public API must not change",
        ],
    );
    assert_eq!(code, 3, "{doc:#}");
    let id = doc["data"]["plan_id"].as_str().unwrap().to_string();
    let store = cleveragents_engine::store::Store::open(&db_file(&s.env)).unwrap();
    let inv = store
        .invariants()
        .unwrap()
        .into_iter()
        .find(|i| i.text == "The public API must not change")
        .unwrap()
        .invariant_id;
    let reconciled = format!(r#"{{"effective": ["{inv}"], "dropped": []}}"#);
    let verdict = format!(
        r#"{{"invariant_id": "{inv}", "held": false, "evidence": "api.rs replaces the public fn `get` with `renamed`"}}"#
    );
    let server = ProviderServer::start(vec![
        Turn::tools("", &[("reconcile_invariants", &reconciled)], (10, 5)),
        Turn::tools("", &[("report_invariant_check", &verdict)], (20, 5)),
    ]);
    scripted_env(&s, &server, "openai");
    let (doc, code) = run_keyed(&s.env, &["plan", "execute", &id]);
    assert_eq!(code, 3, "the execute gate: {doc:#}");
    let (doc, code) = run_keyed(&s.env, &["plan", "execute", &id]);
    assert_eq!(code, 3, "{doc:#}");
    let a = stopped_approval(&doc);
    assert_eq!(a["kind"], "invariant_violation", "{doc:#}");
    assert_eq!(a["context"]["check"], "invariant_actor");
    assert_eq!(
        a["context"]["evidence"]["evidence"],
        "api.rs replaces the public fn `get` with `renamed`"
    );
    assert!(
        a["summary"]
            .as_str()
            .unwrap()
            .contains("replaces the public fn"),
        "{a:#}"
    );
    // The actor saw the diff of the step.
    let requests = server.requests();
    assert_eq!(requests.len(), 2);
    let system = requests[1].body["messages"][0]["content"].as_str().unwrap();
    assert!(system.contains("+pub fn renamed() {}"), "{system}");
    assert!(system.contains(&inv), "{system}");
    let (st, _) = run_keyed(&s.env, &["plan", "status", &id]);
    assert_eq!(st["data"]["state_reason"], "invariant_violation", "{st:#}");
}

#[test]
fn without_an_invariant_actor_plan_status_says_free_text_is_not_machine_checked() {
    let env = Env::new();
    project(&env, &["echo two > a.txt"]);
    let (doc, code, id) = use_change(&env, "trusted", &[MIGRATIONS, "Keep the tone friendly"]);
    assert_eq!(code, 3, "{doc:#}");
    let st = status(&env, &id);
    let summary = st["data"]["invariant_checks"]["summary"].as_str().unwrap();
    assert!(
        summary.starts_with("1 machine-checked after each step"),
        "{summary}"
    );
    assert!(
        summary.contains("1 free-text not machine-checked"),
        "{summary}"
    );
    let checked = events(&env, &id, "invariant_checked");
    assert_eq!(
        checked[0]["not_checked"][0]["text"], "Keep the tone friendly",
        "{checked:#?}"
    );
}

#[test]
fn a_bad_machine_form_in_an_action_file_or_flag_is_refused_naming_the_field() {
    let env = Env::new();
    let file = env.root().join("bad.yaml");
    std::fs::write(
        &file,
        "name: local/bad\ndefinition-of-done: done\nstrategy-actor: builtin/checklist-strategist\nexecution-actor: builtin/script-executor\ninvariants:\n  - \"paths-unchanged:\"\nscript:\n  - name: s0\n    run: \"true\"\n",
    )
    .unwrap();
    let (doc, code) = env.json(&["action", "create", "--config", file.to_str().unwrap()]);
    assert_eq!(code, 1, "{doc:#}");
    let message = doc["error"]["message"].as_str().unwrap();
    assert!(message.contains("bad.yaml"), "{message}");
    assert!(message.contains("invariants[0]"), "{message}");
    assert!(message.contains("one or more globs"), "{message}");

    std::fs::write(
        &file,
        "name: local/bad\ndefinition-of-done: done\nstrategy-actor: builtin/checklist-strategist\nexecution-actor: builtin/script-executor\nscript:\n  - name: s0\n    run: \"true\"\n",
    )
    .unwrap();
    let (doc, code) = env.json(&[
        "action",
        "create",
        "--config",
        file.to_str().unwrap(),
        "--invariant",
        "Command: make check",
    ]);
    assert_eq!(code, 1, "{doc:#}");
    let message = doc["error"]["message"].as_str().unwrap();
    assert!(message.contains("--invariant"), "{doc:#}");
    assert!(message.contains("spelled another way"), "{message}");
    let (list, _) = env.json(&["action", "list"]);
    assert!(!list.to_string().contains("local/bad"), "{list:#}");
}

#[test]
fn accepting_one_of_two_violations_names_the_one_still_waiting() {
    let env = Env::new();
    project(
        &env,
        &["echo 'create table b;' > migrations/001.sql && rm README.md"],
    );
    let (doc, code, id) = use_change(
        &env,
        "full-auto",
        &[MIGRATIONS, "command: test -f README.md"],
    );
    assert_eq!(code, 3, "{doc:#}");
    let st = status(&env, &id);
    let waiting: Vec<String> = st["data"]["pending_approvals"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["approval_id"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(waiting.len(), 2, "{st:#}");
    let (doc, code) = env.json(&["plan", "decide", &waiting[0], "--option", "accept"]);
    assert_eq!(code, 0, "{doc:#}");
    let text = doc.to_string();
    assert!(text.contains("1 more waiting violation"), "{doc:#}");
    assert!(text.contains(&waiting[1]), "{doc:#}");
    assert_eq!(status(&env, &id)["data"]["phase"], "execute");
}
