//! The lifecycle with model actors and the apply gate: diff hunks that name their decisions,
//! `request_decision` from a model executor, the invariant actor, `--no-commit`, Ctrl-C during
//! a run, and what a new user found confusing in the plan loop.

use serde_json::{Value, json};

use super::lifecycle::{Setup, scripted_env, setup, use_plan};
use crate::support::provider_server::{ProviderServer, Turn};
use crate::support::{db_file, git_out, run_keyed, use_plan_keyed};

fn store(s: &Setup) -> cleveragents_engine::store::Store {
    cleveragents_engine::store::Store::open(&db_file(&s.env)).unwrap()
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

/// `plan use local/notes app --arg version=1.2` under `profile`, `scripted/m` executing.
fn use_with_model_executor(s: &Setup, profile: &str) -> (Value, i32, String) {
    use_plan_keyed(
        &s.env,
        "local/notes",
        profile,
        &["--execution-actor", "scripted/m", "--arg", "version=1.2"],
    )
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
    assert_eq!(code, 3, "{doc:#}");
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

// An Apply killed in the middle is rolled back by the next command: `cli::apply` kills real
// applies at many points (the journal's shape is the engine's own business).

#[test]
fn apply_with_no_commit_leaves_the_changes_in_the_working_tree_and_makes_no_commit() {
    let (s, id) = executed();
    let tip = git_out(&s.repo, &["rev-parse", "HEAD"]);
    let (doc, code) = s.env.json(&["plan", "apply", "--yes", "--no-commit", &id]);
    assert_eq!(code, 0, "{doc:#}");
    assert_eq!(git_out(&s.repo, &["rev-parse", "HEAD"]), tip, "no commit");
    assert_eq!(
        std::fs::read_to_string(s.repo.join("NOTES.md")).unwrap(),
        "Release 1.2\nMore\n"
    );
    assert_eq!(
        std::fs::read_to_string(s.repo.join("README")).unwrap(),
        "demo\nsee NOTES.md\n"
    );
    assert_eq!(
        git_out(&s.repo, &["status", "--porcelain"]),
        " M README\n?? NOTES.md\n",
        "changed in the working tree, nothing staged"
    );
    let (status, _) = s.env.json(&["plan", "status", &id]);
    assert_eq!(status["data"]["phase"], "applied", "{status:#}");
}

/// Three steps; the second appends, waits and appends again.
const SLOW: &str = r#"name: local/notes
description: Write release notes for {{ version }}
definition-of-done: NOTES.md names version {{ version }}
strategy-actor: builtin/checklist-strategist
execution-actor: builtin/script-executor
arguments:
  - name: version
    type: string
    required: true
script:
  - name: write
    run: printf 'Release %s\n' {{ version }} > NOTES.md
  - name: slow
    run: printf 'partial\n' >> NOTES.md; sleep 6; printf 'More\n' >> NOTES.md
  - name: readme
    run: printf 'see NOTES.md\n' >> README
"#;

#[test]
fn ctrl_c_during_execute_exits_130_and_leaves_the_plan_resumable() {
    use std::time::{Duration, Instant};
    let s = super::lifecycle::setup_with(SLOW);
    let (_, _, id) = use_plan(&s, "supervised");
    let driver = s
        .env
        .command(&["--format", "json", "plan", "execute", &id])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let (status, _) = s.env.json(&["plan", "status", &id]);
        if status["data"]["steps"][1]["status"] == "running" {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the slow step never started: {status:#}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    std::thread::sleep(Duration::from_millis(300));
    let sent = Instant::now();
    let ok = std::process::Command::new("kill")
        .args(["-INT", &driver.id().to_string()])
        .status()
        .unwrap();
    assert!(ok.success());
    let out = driver.wait_with_output().unwrap();
    let waited = sent.elapsed();
    assert_eq!(
        out.status.code(),
        Some(130),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    assert!(
        waited < Duration::from_secs(5),
        "stopped after {waited:?}, not at once"
    );
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(doc["status"], "cancelled", "{doc:#}");
    let (status, _) = s.env.json(&["plan", "status", &id]);
    assert_eq!(
        (
            &status["data"]["phase"],
            &status["data"]["state"],
            &status["data"]["state_reason"]
        ),
        (&json!("execute"), &json!("queued"), &json!("interrupted")),
        "{status:#}"
    );
    // Nothing runs the step now: the status says it was interrupted, not running.
    let out = s.env.run(&["--format", "plain", "plan", "status", &id]);
    let text = crate::support::stdout(&out);
    let row = text
        .lines()
        .find(|l| l.trim_start().starts_with("2 ") && l.contains("slow"))
        .unwrap_or_default();
    assert!(
        row.contains("interrupted") && !row.contains("running"),
        "{row}\n{text}"
    );
    // Resumable: the next `plan execute` runs the interrupted step again from its start.
    let (doc, code) = s.env.json(&["plan", "execute", &id]);
    assert_eq!(code, 3, "{doc:#}");
    assert_eq!(
        doc["data"]["approval"]["context"]["gate"], "apply",
        "{doc:#}"
    );
    let (doc, code) = s.env.json(&["plan", "apply", "--yes", &id]);
    assert_eq!(code, 0, "{doc:#}");
    assert_eq!(
        git_out(&s.repo, &["show", "HEAD:NOTES.md"]),
        "Release 1.2\npartial\nMore\n"
    );
}

// Regressions found by using the lifecycle from a fresh data directory, each named after what broke.

#[test]
fn conflict_hints_name_the_real_plan_id_with_the_data_dir_flags() {
    let s = setup();
    let (_, _, id) = use_plan(&s, "manual");
    // A live process (this test) holds the plan's lease.
    let conn = rusqlite::Connection::open(db_file(&s.env)).unwrap();
    let now = jiff::Timestamp::now().to_string();
    conn.execute(
        "INSERT INTO plan_leases (plan_id, pid, host, kind, acquired_at, heartbeat_at) VALUES (?1, ?2, ?3, 'execute', ?4, ?4)",
        rusqlite::params![
            id,
            std::process::id(),
            cleveragents_engine::lease::host_name(),
            now
        ],
    )
    .unwrap();
    let (doc, code) = s.env.json(&["plan", "execute", &id]);
    assert_eq!(
        (code, doc["error"]["code"].as_str()),
        (1, Some("CONFLICT")),
        "{doc:#}"
    );
    let hints: Vec<&str> = doc["error"]["suggestions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| h.as_str().unwrap())
        .collect();
    assert!(hints.iter().all(|h| !h.contains('<')), "{hints:?}");
    let data_dir = s.env.data_dir.display().to_string();
    for cmd in [format!("plan status {id}"), format!("plan cancel {id}")] {
        assert!(
            hints
                .iter()
                .any(|h| h.ends_with(&cmd) && h.contains(&data_dir)),
            "{cmd} in {hints:?}"
        );
    }
}

#[test]
fn answer_commands_in_json_repeat_the_data_dir_so_they_run_as_printed() {
    let s = setup();
    let (doc, code, id) = use_plan(&s, "supervised");
    assert_eq!(code, 3, "{doc:#}");
    let data_dir = s.env.data_dir.display().to_string();
    let command = doc["data"]["approval"]["answer_command"].as_str().unwrap();
    assert!(
        command.contains(&format!("--data-dir {data_dir}"))
            && command.ends_with(&format!("plan execute {id}")),
        "{command}"
    );
    for a in doc["data"]["approvals"].as_array().unwrap() {
        assert!(
            a["answer_command"].as_str().unwrap().contains(&data_dir),
            "{a:#}"
        );
    }
    let (approvals, _) = s.env.json(&["plan", "approvals", &id]);
    assert!(
        approvals["data"]["approvals"][0]["answer_command"]
            .as_str()
            .unwrap()
            .contains(&data_dir),
        "{approvals:#}"
    );
}

#[test]
fn plan_status_names_every_step_in_the_table_and_in_json() {
    let (s, id) = executed();
    let (doc, _) = s.env.json(&["plan", "status", &id]);
    let names: Vec<&str> = doc["data"]["steps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|st| st["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["write", "extend", "readme"], "{doc:#}");
    let out = s.env.run(&["--format", "plain", "plan", "status", &id]);
    let text = String::from_utf8(out.stdout).unwrap();
    let table: Vec<&str> = text
        .lines()
        .skip_while(|l| l.trim() != "Steps")
        .skip(3)
        .take(3)
        .collect();
    for (line, name) in table.iter().zip(["write", "extend", "readme"]) {
        let cells: Vec<&str> = line.split_whitespace().collect();
        assert_eq!(cells.get(1), Some(&name), "{text}");
    }
}

/// (author, committer, trailers) of a commit.
fn identity_and_trailers(repo: &std::path::Path, rev: &str) -> (String, String, String) {
    let show = |fmt: &str| git_out(repo, &["log", "-1", &format!("--format={fmt}"), rev]);
    let trailers: String = show("%B")
        .lines()
        .filter(|l| l.starts_with("Plan-Id: ") || l.starts_with("Action: "))
        .collect::<Vec<_>>()
        .join("\n");
    (show("%an <%ae>"), show("%cn <%ce>"), trailers)
}

#[test]
fn plan_export_branch_commits_with_the_same_author_and_trailers_as_apply() {
    let (s, id) = executed();
    crate::support::git(&s.repo, &["config", "user.name", "Ada Lovelace"]);
    crate::support::git(&s.repo, &["config", "user.email", "ada@example.invalid"]);
    let (doc, code) = s.env.json(&["plan", "export", "--branch", "review", &id]);
    assert_eq!(code, 0, "{doc:#}");
    let (doc, code) = s.env.json(&["plan", "apply", "--yes", &id]);
    assert_eq!(code, 0, "{doc:#}");
    let exported = identity_and_trailers(&s.repo, "review");
    let applied = identity_and_trailers(&s.repo, "HEAD");
    assert_eq!(exported, applied);
    assert_eq!(applied.0, "Ada Lovelace <ada@example.invalid>\n");
    assert_eq!(applied.2, format!("Plan-Id: {id}\nAction: local/notes"));
    // Same subject; and the same tree (export is what apply commits).
    assert_eq!(
        git_out(&s.repo, &["log", "-1", "--format=%s", "review"]),
        git_out(&s.repo, &["log", "-1", "--format=%s", "HEAD"])
    );
    assert_eq!(
        git_out(&s.repo, &["rev-parse", "review^{tree}"]),
        git_out(&s.repo, &["rev-parse", "HEAD^{tree}"])
    );
}

#[test]
fn a_suggested_export_names_its_branch_as_a_placeholder_that_is_refused_as_is() {
    let (s, id) = executed();
    let (doc, code) = s.env.json(&["plan", "export", "--branch", "<branch>", &id]);
    assert_eq!(code, 1, "{doc:#}");
    assert_eq!(doc["error"]["code"], "INVALID_INPUT", "{doc:#}");
    let text = doc["error"].to_string();
    assert!(
        text.contains("--branch") && text.contains("placeholder"),
        "{text}"
    );
    assert_eq!(
        git_out(&s.repo, &["branch", "--list", "<branch>"]),
        "",
        "no branch was made"
    );
    let out = s.env.run(&["plan", "export", "--branch", "review", &id]);
    let text = crate::support::stdout(&out);
    let review = format!("git -C {} log -p review", s.repo.display());
    assert!(
        text.contains(&review),
        "a command that runs from anywhere: {text}"
    );
}

#[test]
fn rejecting_the_apply_gate_says_what_can_be_done_next() {
    let (s, id) = executed();
    let (approvals, _) = s.env.json(&["plan", "approvals", &id]);
    let apr = approvals["data"]["approvals"][0]["approval_id"]
        .as_str()
        .unwrap()
        .to_string();
    let (doc, code) = s.env.json(&["plan", "reject", &apr, "--reason", "not now"]);
    assert_eq!(code, 0, "{doc:#}");
    let next: Vec<&str> = doc["data"]["next"]
        .as_array()
        .unwrap_or_else(|| panic!("{doc:#}"))
        .iter()
        .map(|n| n.as_str().unwrap())
        .collect();
    for cmd in [
        format!("plan diff {id}"),
        format!("plan apply {id}"),
        format!("plan cancel {id}"),
        format!("plan export --branch <branch> {id}"),
    ] {
        assert!(next.iter().any(|n| n.ends_with(&cmd)), "{cmd} in {next:?}");
    }
    let out = s.env.run(&[
        "--format", "plain", "plan", "reject", &apr, "--reason", "again",
    ]);
    // Already rejected: the approval is no longer pending.
    assert_eq!(out.status.code(), Some(1));
}

#[test]
fn every_profile_stops_at_its_gates_with_a_model_strategist_and_executor_in_both_wire_formats() {
    let decision = r#"{"key": "notes", "decision_type": "implementation_choice", "question": "Where do the notes go?", "chosen_option": "NOTES.md", "confidence_score": 0.9, "rationale": "the convention", "step": {"instructions": "write NOTES.md naming release 1.2"}}"#;
    for kind in ["openai", "anthropic"] {
        for profile in ["manual", "supervised", "trusted", "full-auto"] {
            let server = ProviderServer::start(vec![
                Turn::tools("", &[("record_decision", decision)], (10, 5)),
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
            ]);
            let s = super::lifecycle::setup_with(ONE_STEP);
            scripted_env(&s, &server, kind);
            let before = git_out(&s.repo, &["rev-parse", "HEAD"]).trim().to_string();
            std::fs::write(s.repo.join("src/lib.rs"), "pub fn f() {}\n// wip\n").unwrap();
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
                    profile,
                    "local/notes",
                    "app",
                    "--arg",
                    "version=1.2",
                ],
            );
            let id = doc["data"]["plan_id"].as_str().unwrap().to_string();
            let gate = |doc: &Value| {
                doc["data"]["approval"]["context"]["gate"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string()
            };
            let mut trail = vec![(code, gate(&doc))];
            if profile == "manual" {
                let (doc, code) = run_keyed(&s.env, &["plan", "execute", &id]);
                trail.push((code, gate(&doc)));
            }
            if matches!(profile, "manual" | "supervised") {
                let (doc, code) = run_keyed(&s.env, &["plan", "execute", &id]);
                trail.push((code, gate(&doc)));
            }
            if profile != "full-auto" {
                let (doc, code) = run_keyed(&s.env, &["plan", "apply", "--yes", &id]);
                assert_eq!(code, 0, "{kind} {profile}: {doc:#}");
                trail.push((code, "applied".into()));
            } else {
                trail.push((
                    code,
                    doc["data"]["phase"]
                        .as_str()
                        .unwrap_or_default()
                        .to_string(),
                ));
            }
            let expected: Vec<(i32, &str)> = match profile {
                "manual" => vec![
                    (3, "strategize"),
                    (3, "execute"),
                    (3, "apply"),
                    (0, "applied"),
                ],
                "supervised" => vec![(3, "execute"), (3, "apply"), (0, "applied")],
                "trusted" => vec![(3, "apply"), (0, "applied")],
                _ => vec![(0, ""), (0, "applied")],
            };
            let expected: Vec<(i32, String)> = expected
                .into_iter()
                .map(|(c, g)| (c, g.to_string()))
                .collect();
            assert_eq!(trail, expected, "{kind} {profile}");
            assert_eq!(server.requests().len(), 4, "{kind} {profile}");
            assert_eq!(
                git_out(&s.repo, &["rev-list", &format!("{before}..HEAD")])
                    .lines()
                    .count(),
                1,
                "{kind} {profile}: exactly one commit"
            );
            let message = git_out(&s.repo, &["log", "-1", "--format=%B"]);
            assert!(message.contains(&format!("Plan-Id: {id}\n")), "{message}");
            assert!(message.contains("Action: local/notes\n"), "{message}");
            assert_eq!(
                git_out(&s.repo, &["show", "HEAD:NOTES.md"]),
                "Release 1.2\n"
            );
            assert_eq!(
                std::fs::read_to_string(s.repo.join("src/lib.rs")).unwrap(),
                "pub fn f() {}\n// wip\n",
                "{kind} {profile}: the user's unrelated edit survives"
            );
        }
    }
}

#[test]
fn guidance_instead_of_an_option_reaches_the_paused_executor_as_the_answer() {
    let question = r#"{"question": "Which file?", "options": ["NOTES.md", "CHANGES.md"]}"#;
    let server = ProviderServer::start(vec![
        Turn::tools("", &[("request_decision", question)], (10, 2)),
        Turn::tools(
            "",
            &[(
                "write_file",
                r#"{"path": "RELEASE.txt", "content": "1.2\n"}"#,
            )],
            (10, 2),
        ),
        Turn::text("Wrote RELEASE.txt as told.", (10, 2)),
    ]);
    let s = super::lifecycle::setup_with(ONE_STEP);
    scripted_env(&s, &server, "openai");
    let (doc, code, id) = use_with_model_executor(&s, "trusted");
    assert_eq!(code, 3, "{doc:#}");
    let apr = doc["data"]["approval"]["approval_id"]
        .as_str()
        .unwrap()
        .to_string();
    assert_eq!(doc["data"]["approval"]["kind"], "decision", "{doc:#}");
    let (doc, code) = run_keyed(
        &s.env,
        &[
            "plan",
            "decide",
            &apr,
            "--guidance",
            "neither: write RELEASE.txt",
        ],
    );
    assert_eq!(code, 3, "{doc:#}");
    assert_eq!(
        doc["data"]["approval"]["context"]["gate"], "apply",
        "{doc:#}"
    );
    let resumed = server.requests()[1].body.to_string();
    assert!(
        resumed.contains("The user chose none of the options and said: neither: write RELEASE.txt"),
        "{resumed}"
    );
    let (diff, _) = run_keyed(&s.env, &["plan", "diff", "--stat", &id]);
    assert_eq!(
        diff["data"]["resources"][0]["files"][0]["path"], "RELEASE.txt",
        "{diff:#}"
    );
}

#[test]
fn an_invalid_request_decision_goes_back_to_the_model_and_the_step_carries_on() {
    let server = ProviderServer::start(vec![
        Turn::tools(
            "",
            &[(
                "request_decision",
                r#"{"question": "Proceed?", "options": ["yes"]}"#,
            )],
            (10, 2),
        ),
        Turn::tools(
            "",
            &[(
                "write_file",
                r#"{"path": "NOTES.md", "content": "Release 1.2\n"}"#,
            )],
            (10, 2),
        ),
        Turn::text("Done without asking.", (10, 2)),
    ]);
    let s = super::lifecycle::setup_with(ONE_STEP);
    scripted_env(&s, &server, "anthropic");
    let (doc, code, _) = use_with_model_executor(&s, "trusted");
    assert_eq!(code, 3, "{doc:#}");
    assert_eq!(
        doc["data"]["approval"]["context"]["gate"], "apply",
        "no question was raised: {doc:#}"
    );
    let second = server.requests()[1].body.to_string();
    assert!(
        second.contains("at least two non-empty strings"),
        "the model was told why: {second}"
    );
}

#[test]
fn a_one_step_plan_names_its_step_on_every_hunk_and_a_later_outside_change_on_none() {
    const ONE_RUN_STEP: &str = "name: local/notes\ndefinition-of-done: NOTES.md names the release\nstrategy-actor: builtin/checklist-strategist\nexecution-actor: builtin/script-executor\narguments:\n  - name: version\n    type: string\n    required: true\nscript:\n  - name: write\n    run: printf 'Release %s\\n' {{ version }} > NOTES.md && printf 'see NOTES.md\\n' >> README\n";
    let s = super::lifecycle::setup_with(ONE_RUN_STEP);
    let (doc, code, id) = use_plan(&s, "trusted");
    assert_eq!(code, 3, "{doc:#}");
    let steps = step_decisions(&s, &id);
    assert_eq!(steps.len(), 1);
    let hunk_ids = |diff: &Value| -> Vec<(String, Vec<Value>)> {
        files_of(diff)
            .iter()
            .flat_map(|f| {
                f["hunks"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|h| {
                        let ids = h["decision_ids"].as_array().unwrap().clone();
                        (f["path"].as_str().unwrap().to_string(), ids)
                    })
                    .collect::<Vec<_>>()
            })
            .collect()
    };
    let (diff, code) = s.env.json(&["plan", "diff", &id]);
    assert_eq!(code, 0, "{diff:#}");
    let step = json!(steps[0]);
    assert_eq!(
        hunk_ids(&diff),
        [
            ("NOTES.md".to_string(), vec![step.clone()]),
            ("README".to_string(), vec![step.clone()])
        ]
    );
    // A change made after the step, outside it: the step's own changes are no longer the
    // whole diff, and the new hunk names no decision.
    crate::support::sandbox::write(&s.env, &id, "OUTSIDE.md", "by hand\n");
    let (diff, code) = s.env.json(&["plan", "diff", &id]);
    assert_eq!(code, 0, "{diff:#}");
    assert_eq!(
        hunk_ids(&diff),
        [
            ("NOTES.md".to_string(), vec![step.clone()]),
            ("OUTSIDE.md".to_string(), vec![]),
            ("README".to_string(), vec![step])
        ]
    );
}
