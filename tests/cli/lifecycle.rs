//! The lifecycle engine driven through the real binary on real git repositories: gates per
//! automation profile, decisions and approvals, leases, cancellation, streaming.

use std::io::BufRead;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::support::provider_server::{ProviderServer, Turn};
use crate::support::{Env, db_file, git_repo, ok, run_keyed};

/// An action whose steps write files in the sandbox.
pub const SCRIPT_ACTION: &str = r#"name: local/notes
description: Write release notes for {{ version }}
definition-of-done: NOTES.md names version {{ version }}
strategy-actor: builtin/checklist-strategist
execution-actor: builtin/script-executor
invariants:
  - Never rewrite git history
arguments:
  - name: version
    type: string
    required: true
script:
  - name: write
    run: printf 'Release %s\n' {{ version }} > NOTES.md
  - name: extend
    run: printf 'More\n' >> NOTES.md
  - name: readme
    depends-on: [write]
    run: printf 'see NOTES.md\n' >> README
"#;

/// A registered git checkout `local/repo` in project `local/app`, and the action above.
pub struct Setup {
    pub env: Env,
    pub repo: PathBuf,
}

pub fn setup() -> Setup {
    setup_with(SCRIPT_ACTION)
}

pub fn setup_with(action: &str) -> Setup {
    let env = Env::new();
    let repo = git_repo(env.root(), "repo");
    ok(
        &env,
        &[
            "resource",
            "add",
            "git-checkout",
            "local/repo",
            "--path",
            repo.to_str().unwrap(),
        ],
    );
    ok(
        &env,
        &[
            "project",
            "create",
            "--resource",
            "local/repo",
            "--invariant",
            "Keep the public API stable",
            "app",
        ],
    );
    let file = env.root().join("action.yaml");
    std::fs::write(&file, action).unwrap();
    ok(
        &env,
        &[
            "action",
            "create",
            "--available",
            "--config",
            file.to_str().unwrap(),
        ],
    );
    Setup { env, repo }
}

/// `plan use local/notes app --arg version=1.2 --automation-profile PROFILE`: the answer,
/// the exit code and the plan's id.
pub fn use_plan(s: &Setup, profile: &str) -> (Value, i32, String) {
    crate::support::use_plan(&s.env, "local/notes", profile, &["--arg", "version=1.2"])
}

fn store(env: &Env) -> cleveragents_engine::store::Store {
    cleveragents_engine::store::Store::open(&db_file(env)).unwrap()
}

fn kinds(events: &[Value]) -> Vec<String> {
    events
        .iter()
        .map(|e| e["type"].as_str().unwrap().to_string())
        .collect()
}

#[test]
fn plan_use_under_the_default_profile_exits_3_while_its_gate_is_pending() {
    let s = setup();
    let (doc, code) = s
        .env
        .json(&["plan", "use", "local/notes", "app", "--arg", "version=1.2"]);
    assert_eq!(code, 3, "{doc:#}");
    assert_eq!(doc["status"], "needs_approval", "{doc:#}");
    assert_eq!(doc["data"]["automation_profile"], "manual", "{doc:#}");
    let id = doc["data"]["plan_id"].as_str().unwrap();
    let (list, _) = s.env.json(&["plan", "approvals", id]);
    let pending = list["data"]["approvals"].as_array().unwrap();
    assert_eq!(pending.len(), 1, "{list:#}");
    assert_eq!(pending[0]["kind"], "phase_gate");
    assert_eq!(
        doc["data"]["approval"]["approval_id"],
        pending[0]["approval_id"]
    );
}

#[test]
fn manual_plans_wait_for_plan_execute_and_stop_at_the_execute_gate() {
    let s = setup();
    let (doc, code, id) = use_plan(&s, "manual");
    assert_eq!(code, 3, "a human must answer the strategize gate: {doc:#}");
    assert_eq!(doc["status"], "needs_approval");
    assert_eq!(
        (&doc["data"]["phase"], &doc["data"]["state"]),
        (&json!("strategize"), &json!("queued"))
    );
    assert_eq!(doc["data"]["approval"]["kind"], "phase_gate");
    assert!(
        doc["data"]["next"]
            .as_str()
            .unwrap()
            .ends_with(&format!("plan execute {id}"))
    );
    let (list, _) = s.env.json(&["plan", "approvals", &id]);
    assert_eq!(list["data"]["approvals"].as_array().unwrap().len(), 1);
    assert_eq!(
        list["data"]["approvals"][0]["context"]["gate"],
        "strategize"
    );

    // `plan execute` answers the strategize gate, runs Strategize, and stops at the next gate
    // (manual: auto_execute is false) with exit 3 naming the approval and its command.
    let (doc, code) = s.env.json(&["plan", "execute", &id]);
    assert_eq!(code, 3, "{doc:#}");
    assert_eq!(doc["status"], "needs_approval");
    assert_eq!(doc["error"]["code"], "NEEDS_APPROVAL");
    assert_eq!(
        (&doc["data"]["phase"], &doc["data"]["state"]),
        (&json!("strategize"), &json!("complete"))
    );
    let apr = doc["data"]["approval"]["approval_id"].as_str().unwrap();
    assert!(apr.starts_with("apr_"));
    assert!(doc["error"]["message"].as_str().unwrap().contains(apr));
    assert!(
        doc["error"]["suggestions"][0]
            .as_str()
            .unwrap()
            .ends_with(&format!("plan execute {id}"))
    );
    let (list, _) = s.env.json(&["plan", "approvals"]);
    let pending = list["data"]["approvals"].as_array().unwrap();
    assert_eq!(pending.len(), 1, "the strategize gate was resolved");
    assert_eq!(pending[0]["context"]["gate"], "execute");
    let st = store(&s.env);
    let all = st.approvals_of(&id.parse().unwrap()).unwrap();
    assert_eq!(all[0].status.as_str(), "approved");
}

#[test]
fn strategize_records_the_root_the_invariants_and_one_decision_per_script_step() {
    use cleveragents_engine::domain::decision::DecisionType;
    let s = setup();
    let (_, code, id) = use_plan(&s, "supervised");
    assert_eq!(code, 3);
    let st = store(&s.env);
    let plan_id = id.parse().unwrap();
    let plan = st.plan(&plan_id).unwrap().unwrap();
    let decisions = st.decisions(&plan_id).unwrap();
    let root = &decisions[0];
    assert_eq!(root.decision_type, DecisionType::PromptDefinition);
    assert_eq!(root.chosen_option, "Write release notes for 1.2");
    assert_eq!(plan.decision_root_id, Some(root.decision_id));
    assert!(root.context_snapshot["hash"].is_string());
    let invariants: Vec<_> = decisions
        .iter()
        .filter(|d| d.decision_type == DecisionType::InvariantEnforced)
        .collect();
    let texts: Vec<&str> = invariants
        .iter()
        .map(|d| d.chosen_option.as_str())
        .collect();
    assert_eq!(
        texts,
        ["Keep the public API stable", "Never rewrite git history"],
        "one per effective invariant"
    );
    let steps: Vec<_> = decisions.iter().filter(|d| d.step.is_some()).collect();
    assert_eq!(steps.len(), 3);
    assert_eq!(
        steps[0].chosen_option,
        "run `printf 'Release %s\\n' 1.2 > NOTES.md`"
    );
    for d in invariants.iter().chain(steps.iter()) {
        assert_eq!(d.parent_decision_id, Some(root.decision_id));
    }
    let deps = |d: &cleveragents_engine::domain::decision::Decision| {
        let mut v = st.dependencies_of(&d.decision_id).unwrap();
        v.sort();
        v
    };
    let mut base = vec![
        root.decision_id,
        invariants[0].decision_id,
        invariants[1].decision_id,
    ];
    base.sort();
    assert_eq!(deps(steps[0]), base);
    let mut second = base.clone();
    second.push(steps[0].decision_id);
    second.sort();
    assert_eq!(deps(steps[1]), second, "default: the step before");
    assert_eq!(deps(steps[2]), second, "depends-on: write");
    assert_eq!(
        steps[0].context_snapshot["script_step"]["name"], "write",
        "the script executor finds its step in the snapshot"
    );
}

#[test]
fn supervised_plan_use_runs_strategize_and_exits_3_at_the_execute_gate() {
    let s = setup();
    let (doc, code, _) = use_plan(&s, "supervised");
    assert_eq!(code, 3, "{doc:#}");
    assert_eq!(doc["data"]["state"], "complete");
    assert_eq!(doc["data"]["approval"]["context"]["gate"], "execute");
    assert_eq!(doc["data"]["profile_source"], "plan");
}

#[test]
fn a_headless_command_at_a_gate_exits_3_without_reading_stdin() {
    let s = setup();
    let (_, _, id) = use_plan(&s, "manual");
    // stdin is a pipe that stays open and idle: the command must not wait on it.
    let mut child = s
        .env
        .command(&["--format", "json", "plan", "execute", &id])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let _stdin = child.stdin.take().unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("plan execute hung at a gate with stdin open");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    assert_eq!(status.code(), Some(3));
}

#[test]
fn streamed_events_follow_the_seed_order_and_a_follower_sees_the_same_sequence() {
    use cleveragents_engine::events;
    let s = setup();
    let (_, _, id) = use_plan(&s, "manual");
    let plan_id: cleveragents_engine::domain::Id = id.parse().unwrap();
    let reader = store(&s.env);
    let start = events::last_seq(&reader).unwrap();
    let mut follower = events::Follower::new(start, Some(plan_id));
    let out = s.env.run(&["plan", "execute", "--stream", &id]);
    assert_eq!(out.status.code(), Some(3));
    let lines: Vec<Value> = out
        .stdout
        .lines()
        .map(|l| serde_json::from_str(&l.unwrap()).unwrap())
        .collect();
    let (envelope, streamed) = lines.split_last().unwrap();
    assert_eq!(envelope["command"], "plan execute");
    assert_eq!(envelope["exit_code"], 3);
    for e in streamed {
        let keys: Vec<&String> = e.as_object().unwrap().keys().collect();
        assert_eq!(keys, ["seq", "ts", "plan_id", "type", "data"]);
    }
    let seen = kinds(streamed);
    let seed: Vec<&str> = seen
        .iter()
        .map(String::as_str)
        .filter(|k| k.starts_with("strategize_") || k.starts_with("execute_"))
        .collect();
    assert_eq!(
        seed,
        [
            "strategize_started",
            "strategize_decisions",
            "strategize_complete"
        ]
    );
    assert_eq!(seen.last().unwrap(), "approval_requested");
    let followed: Vec<(i64, String)> = follower
        .poll(&reader)
        .unwrap()
        .into_iter()
        .map(|e| (e.seq, e.kind.event_type().as_str().to_string()))
        .collect();
    let streamed_pairs: Vec<(i64, String)> = streamed
        .iter()
        .map(|e| {
            (
                e["seq"].as_i64().unwrap(),
                e["type"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    assert_eq!(
        followed, streamed_pairs,
        "the follower sees the same sequence"
    );
}

fn insert_lease(env: &Env, plan: &str, pid: u32) {
    let conn = rusqlite::Connection::open(db_file(env)).unwrap();
    let now = jiff::Timestamp::now().to_string();
    conn.execute(
        "INSERT INTO plan_leases (plan_id, pid, host, kind, acquired_at, heartbeat_at) VALUES (?1, ?2, ?3, 'execute', ?4, ?4)",
        rusqlite::params![plan, pid, cleveragents_engine::lease::host_name(), now],
    )
    .unwrap();
}

#[test]
fn a_second_process_cannot_drive_a_plan_another_live_process_holds() {
    let s = setup();
    let (_, _, id) = use_plan(&s, "manual");
    let mut owner = std::process::Command::new("sleep")
        .arg("30")
        .spawn()
        .unwrap();
    insert_lease(&s.env, &id, owner.id());
    let (doc, code) = s.env.json(&["plan", "execute", &id]);
    assert_eq!(code, 1, "{doc:#}");
    assert_eq!(doc["error"]["code"], "CONFLICT");
    let message = doc["error"]["message"].as_str().unwrap();
    assert!(
        message.contains(&format!("plan is being run by pid {}", owner.id())),
        "{message}"
    );
    // Reading is fine while another process drives it.
    let (status, code) = s.env.json(&["plan", "status", &id]);
    assert_eq!(code, 0);
    assert_eq!(status["data"]["running_in"]["pid"], owner.id());
    owner.kill().unwrap();
    owner.wait().unwrap();
    // Its owner gone, the lease is stale and the next command takes over.
    let (doc, code) = s.env.json(&["plan", "execute", &id]);
    assert_eq!(code, 3, "{doc:#}");
}

#[test]
fn cancelling_a_plan_nobody_runs_is_immediate_and_final() {
    let s = setup();
    let (_, _, id) = use_plan(&s, "supervised");
    let (doc, code) = s.env.json(&["plan", "cancel", "-r", "wrong approach", &id]);
    assert_eq!(code, 0, "{doc:#}");
    assert_eq!(doc["data"]["cancelled"], true);
    assert_eq!(doc["data"]["plan"]["state"], "cancelled");
    let (list, _) = s.env.json(&["plan", "approvals", &id]);
    assert!(
        list["data"]["approvals"].as_array().unwrap().is_empty(),
        "withdrawn"
    );
    let (doc, code) = s.env.json(&["plan", "execute", &id]);
    assert_eq!((code, doc["error"]["code"].as_str()), (1, Some("CONFLICT")));
    let (doc, code) = s.env.json(&["plan", "cancel", &id]);
    assert_eq!((code, doc["error"]["code"].as_str()), (1, Some("CONFLICT")));
    let (list, _) = s.env.json(&["plan", "list", "--state", "cancelled"]);
    assert_eq!(list["data"]["plans"].as_array().unwrap().len(), 1);
}

#[test]
fn rejecting_a_gate_keeps_the_plan_complete_and_records_the_reason() {
    let s = setup();
    let (doc, _, id) = use_plan(&s, "supervised");
    let apr = doc["data"]["approval"]["approval_id"]
        .as_str()
        .unwrap()
        .to_string();
    let (doc, code) = s.env.json(&["plan", "decide", &apr, "--option", "1"]);
    assert_eq!(
        (code, doc["error"]["code"].as_str()),
        (1, Some("INVALID_INPUT")),
        "{doc:#}"
    );
    let (doc, code) = s.env.json(&["plan", "reject", &apr, "--reason", "not now"]);
    assert_eq!(code, 0, "{doc:#}");
    assert_eq!(doc["data"]["approval"]["status"], "rejected");
    let (status, _) = s.env.json(&["plan", "status", &id]);
    assert_eq!(status["data"]["state"], "complete");
    assert_eq!(status["data"]["state_reason"], "gate_rejected");
    let (doc, code) = s.env.json(&["plan", "reject", &apr, "--reason", "again"]);
    assert_eq!(
        (code, doc["error"]["code"].as_str()),
        (1, Some("INVALID_INPUT"))
    );
}

pub fn scripted_env(s: &Setup, server: &ProviderServer, kind: &str) {
    let base = if kind == "openai" {
        server.openai_base()
    } else {
        server.anthropic_base()
    };
    std::fs::create_dir_all(s.env.config_path.parent().unwrap()).unwrap();
    std::fs::write(
        &s.env.config_path,
        format!(
            "[providers.scripted]\nkind = \"{kind}\"\nbase_url = \"{base}\"\napi_key_env = \"SCRIPTED_API_KEY\"\n"
        ),
    )
    .unwrap();
}

fn tree_bytes(dir: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let p = entry.unwrap().path();
        if p.is_dir() {
            out.extend(tree_bytes(&p));
        } else {
            out.push((p.clone(), std::fs::read(&p).unwrap()));
        }
    }
    out.sort();
    out
}

#[test]
fn a_model_strategist_cannot_write_and_its_open_choices_wait_for_a_human() {
    for kind in ["openai", "anthropic"] {
        let decision = r#"{"key":"d1","decision_type":"implementation_choice","question":"Where do the notes go?","chosen_option":"NOTES.md","alternatives_considered":["CHANGELOG.md"],"confidence_score":0.7,"rationale":"short","step":{"instructions":"write NOTES.md"}}"#;
        let server = ProviderServer::start(vec![
            Turn::tools(
                "",
                &[("write_file", r#"{"path":"NOTES.md","content":"x"}"#)],
                (10, 5),
            ),
            Turn::tools("", &[("record_decision", decision)], (10, 5)),
            Turn::tools(
                "",
                &[("finish_strategy", r#"{"summary":"one step"}"#)],
                (10, 5),
            ),
        ]);
        let s = setup();
        scripted_env(&s, &server, kind);
        let before = tree_bytes(&s.repo);
        let (doc, code) = run_keyed(
            &s.env,
            &[
                "plan",
                "use",
                "--strategy-actor",
                "scripted/m",
                "local/notes",
                "app",
                "--arg",
                "version=1.2",
            ],
        );
        assert_eq!(code, 3, "{doc:#}");
        let id = doc["data"]["plan_id"].as_str().unwrap().to_string();
        // manual: auto_decisions_strategize is false, so the two-option decision waits.
        let (doc, code) = run_keyed(&s.env, &["plan", "execute", &id]);
        assert_eq!(code, 3, "{kind}: {doc:#}");
        let apr = doc["data"]["approval"]["approval_id"]
            .as_str()
            .unwrap()
            .to_string();
        assert_eq!(doc["data"]["approval"]["kind"], "decision");
        assert_eq!(
            doc["data"]["approval"]["options"],
            json!(["NOTES.md", "CHANGELOG.md"])
        );
        let st = store(&s.env);
        let plan_id = id.parse().unwrap();
        let root = &st.decisions(&plan_id).unwrap()[0];
        let refused = &root.context_snapshot["strategist"]["refused_tool_calls"];
        assert_eq!(
            refused[0]["tool"], "write_file",
            "{kind}: refused and recorded"
        );
        assert_eq!(tree_bytes(&s.repo), before, "nothing was written");
        assert!(
            !s.env.data_dir.join("sandboxes").join(&id).exists(),
            "strategize creates no sandbox"
        );
        // Choosing option 2 records it and Strategize completes; then the execute gate.
        let (doc, code) = run_keyed(&s.env, &["plan", "decide", &apr, "--option", "2"]);
        assert_eq!(code, 3, "{doc:#}");
        assert_eq!(doc["data"]["approval"]["context"]["gate"], "execute");
        let chosen = st
            .decisions(&plan_id)
            .unwrap()
            .into_iter()
            .find(|d| d.step.is_some())
            .unwrap();
        assert_eq!(chosen.chosen_option, "CHANGELOG.md");
        assert_eq!(chosen.alternatives_considered, ["NOTES.md"]);
        let usage = st.usage_for_plan(&plan_id).unwrap();
        assert_eq!(usage.calls, 3);
    }
}

#[test]
fn a_model_execution_actor_writes_through_the_tool_runner_and_the_plan_applies() {
    for kind in ["openai", "anthropic"] {
        let server = ProviderServer::start(vec![
            Turn::tools(
                "",
                &[(
                    "write_file",
                    r#"{"path":"NOTES.md","content":"Release 1.2\n"}"#,
                )],
                (20, 10),
            ),
            Turn::text("Wrote NOTES.md.", (30, 5)),
        ]);
        let s = setup_with(
            "name: local/notes\ndescription: Write release notes\ndefinition-of-done: NOTES.md names the release\nstrategy-actor: builtin/checklist-strategist\nexecution-actor: builtin/script-executor\narguments:\n  - name: version\n    type: string\n    required: true\n",
        );
        scripted_env(&s, &server, kind);
        let (doc, code) = run_keyed(
            &s.env,
            &[
                "plan",
                "use",
                "--execution-actor",
                "scripted/m",
                "--automation-profile",
                "trusted",
                "local/notes",
                "app",
                "--arg",
                "version=1.2",
            ],
        );
        assert_eq!(code, 3, "{kind}: {doc:#}");
        assert_eq!(
            doc["data"]["approval"]["context"]["gate"], "apply",
            "{doc:#}"
        );
        let id = doc["data"]["plan_id"].as_str().unwrap().to_string();
        let st = store(&s.env);
        let plan_id = id.parse().unwrap();
        let calls = st.tool_calls(&plan_id).unwrap();
        assert_eq!(calls.len(), 1);
        assert_eq!(
            (calls[0].tool.as_str(), calls[0].outcome.as_str()),
            ("write_file", "ok")
        );
        let usage = st.usage_for_plan(&plan_id).unwrap();
        assert_eq!((usage.calls, usage.input_tokens), (2, 50));
        assert!(!s.repo.join("NOTES.md").exists(), "nothing before Apply");
        let (doc, code) = run_keyed(&s.env, &["plan", "apply", "--yes", &id]);
        assert_eq!(code, 0, "{doc:#}");
        assert_eq!(
            std::fs::read_to_string(s.repo.join("NOTES.md")).unwrap(),
            "Release 1.2\n"
        );
    }
}

#[test]
fn a_failing_required_validation_goes_back_to_the_model_executor_under_auto_validation_fix() {
    let server = ProviderServer::start(vec![
        Turn::tools(
            "",
            &[("write_file", r#"{"path":"NOTES.md","content":"Release\n"}"#)],
            (10, 5),
        ),
        Turn::text("done", (10, 5)),
        Turn::tools(
            "",
            &[(
                "write_file",
                r#"{"path":"NOTES.md","content":"Release FIXED\n"}"#,
            )],
            (10, 5),
        ),
        Turn::text("fixed", (10, 5)),
    ]);
    let s = setup_with(
        "name: local/notes\ndescription: Write release notes\ndefinition-of-done: NOTES.md says FIXED\nstrategy-actor: builtin/checklist-strategist\nexecution-actor: builtin/script-executor\narguments:\n  - name: version\n    type: string\n    required: true\n",
    );
    scripted_env(&s, &server, "openai");
    let (doc, code) = s.env.json(&[
        "project",
        "validation",
        "add",
        "app",
        "grep -q FIXED NOTES.md",
    ]);
    assert_eq!(code, 0, "{doc:#}");
    let (doc, code) = run_keyed(
        &s.env,
        &[
            "plan",
            "use",
            "--execution-actor",
            "scripted/m",
            "--automation-profile",
            "trusted",
            "local/notes",
            "app",
            "--arg",
            "version=1",
        ],
    );
    assert_eq!(code, 3, "{doc:#}");
    assert_eq!(
        doc["data"]["approval"]["context"]["gate"], "apply",
        "{doc:#}"
    );
    assert_eq!(server.remaining(), 0, "the fix round ran");
    let results = &doc["data"]["validation_summary"]["execute"];
    assert_eq!(results[0]["passed"], true, "{doc:#}");
    let st = store(&s.env);
    let fixes = st
        .decisions(&doc["data"]["plan_id"].as_str().unwrap().parse().unwrap())
        .unwrap()
        .into_iter()
        .filter(|d| d.decision_type.as_str() == "validation_response")
        .count();
    assert_eq!(fixes, 1);
}

#[test]
fn plan_use_warns_that_uncommitted_files_are_not_visible_to_the_plan() {
    let s = setup();
    std::fs::write(s.repo.join("scratch.txt"), "work in progress\n").unwrap();
    let (doc, _, _) = use_plan(&s, "manual");
    let warnings: Vec<&str> = doc["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["level"] == "warn")
        .map(|m| m["text"].as_str().unwrap())
        .collect();
    assert!(
        warnings.iter().any(|w| w.contains("local/repo")
            && w.contains("1 uncommitted files are not visible to this plan")),
        "{doc:#}"
    );
}

#[test]
fn a_transient_failure_under_a_profile_that_does_not_retry_asks_to_retry_or_abort() {
    let decision = r#"{"key":"d1","decision_type":"implementation_choice","question":"Where?","chosen_option":"NOTES.md","confidence_score":0.9,"rationale":"only option","step":{"instructions":"write NOTES.md"}}"#;
    let server = ProviderServer::start(vec![
        Turn::status(503, "overloaded"),
        Turn::tools("", &[("record_decision", decision)], (10, 5)),
        Turn::tools(
            "",
            &[("finish_strategy", r#"{"summary":"one step"}"#)],
            (10, 5),
        ),
    ]);
    let s = setup();
    scripted_env(&s, &server, "openai");
    let (doc, code) = run_keyed(
        &s.env,
        &[
            "plan",
            "use",
            "--strategy-actor",
            "scripted/m",
            "local/notes",
            "app",
            "--arg",
            "version=1.2",
        ],
    );
    assert_eq!(code, 3, "{doc:#}");
    let id = doc["data"]["plan_id"].as_str().unwrap().to_string();
    // manual: auto_retry_transient is false, so the 503 is not retried by the client.
    let (doc, code) = run_keyed(&s.env, &["plan", "execute", &id]);
    assert_ne!(code, 0, "{doc:#}");
    assert_eq!(server.requests().len(), 1, "no automatic retry");
    let (doc, _) = run_keyed(&s.env, &["plan", "approvals", &id]);
    let approvals = doc["data"]["approvals"].as_array().unwrap();
    assert_eq!(approvals.len(), 1, "{doc:#}");
    assert_eq!(approvals[0]["kind"], "transient_failure");
    assert_eq!(approvals[0]["options"], json!(["retry", "abort"]));
    let apr = approvals[0]["approval_id"].as_str().unwrap().to_string();
    // Retry: Strategize runs again and completes; manual then stops at the execute gate.
    let (doc, code) = run_keyed(&s.env, &["plan", "decide", &apr, "--option", "1"]);
    assert_eq!(code, 3, "{doc:#}");
    assert_eq!(
        doc["data"]["approval"]["context"]["gate"], "execute",
        "{doc:#}"
    );
    assert_eq!(server.requests().len(), 3);
}

/// The paths `plan diff` shows for a plan.
fn diff_paths(env: &Env, id: &str) -> Vec<String> {
    let (doc, code) = env.json(&["plan", "diff", id]);
    assert_eq!(code, 0, "{doc:#}");
    let mut paths: Vec<String> = doc["data"]["resources"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|r| {
            r["files"]
                .as_array()
                .unwrap()
                .iter()
                .map(|f| f["path"].as_str().unwrap().to_string())
        })
        .collect();
    paths.sort();
    paths
}

#[test]
fn steps_rolled_back_run_again_at_the_next_execute_and_their_work_is_applied() {
    let s = setup();
    let (doc, code, id) = use_plan(&s, "trusted");
    assert_eq!(code, 3, "trusted stops at the apply gate: {doc:#}");
    let complete = diff_paths(&s.env, &id);
    assert_eq!(complete, ["NOTES.md", "README"]);
    // Roll back to the end of the first step: the later steps' work is discarded.
    let (doc, _) = s.env.json(&["plan", "checkpoints", &id]);
    let first_end = doc["data"]["checkpoints"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| {
            c["step"]
                .as_str()
                .is_some_and(|st| st.starts_with("step 1 "))
                && c["label"] == "end"
        })
        .unwrap_or_else(|| panic!("no end checkpoint of step 1: {doc:#}"))["checkpoint_id"]
        .as_str()
        .unwrap()
        .to_string();
    let (doc, code) = s.env.json(&["plan", "rollback", "--yes", &id, &first_end]);
    assert_eq!(code, 0, "{doc:#}");
    assert_eq!(doc["data"]["steps_to_run_again"], 2);
    assert_eq!(
        diff_paths(&s.env, &id),
        ["NOTES.md"],
        "only the first step's work remains"
    );
    // The next execute runs the discarded steps again (regression: they were skipped as done).
    let (doc, code) = s.env.json(&["plan", "execute", &id]);
    assert_eq!(code, 3, "back at the apply gate: {doc:#}");
    assert_eq!(
        diff_paths(&s.env, &id),
        complete,
        "the discarded work was redone"
    );
    let (doc, code) = s.env.json(&["plan", "apply", "--yes", &id]);
    assert_eq!(code, 0, "{doc:#}");
    let notes = std::fs::read_to_string(s.repo.join("NOTES.md")).unwrap();
    assert_eq!(notes, "Release 1.2\nMore\n");
}

/// A rollback leaves the plan at execute/queued: its report suggests `plan execute`, which
/// runs the discarded steps again.
#[test]
fn a_rollback_suggests_plan_execute_to_run_the_discarded_steps_again() {
    let s = setup();
    let (doc, code, id) = use_plan(&s, "trusted");
    assert_eq!(code, 3, "trusted stops at the apply gate: {doc:#}");
    let (doc, _) = s.env.json(&["plan", "checkpoints", &id]);
    let first = doc["data"]["checkpoints"][0]["checkpoint_id"]
        .as_str()
        .unwrap_or_else(|| panic!("{doc:#}"))
        .to_string();
    let out = s.env.run(&[
        "--format", "plain", "plan", "rollback", "--yes", &id, &first,
    ]);
    let text = crate::support::stdout(&out);
    assert_eq!(out.status.code(), Some(0), "{text}");
    let next: Vec<&str> = text
        .lines()
        .skip_while(|l| !l.starts_with("Next Steps"))
        .skip(1)
        .take_while(|l| !l.trim().is_empty())
        .collect();
    assert!(
        next.iter()
            .any(|l| l.trim_end().ends_with(&format!("plan execute {id}"))),
        "{text}"
    );
}

#[test]
fn an_errored_plan_rolled_back_before_its_failed_step_runs_again_instead_of_sticking() {
    // The second step fails until a guard file exists in the sandbox.
    let action = r#"name: local/notes
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
  - name: flaky
    run: if [ -f .second-try ]; then printf 'ok\n' >> NOTES.md; else touch .second-try-pending; exit 7; fi
"#;
    let s = setup_with(action);
    let (doc, code, id) = use_plan(&s, "trusted");
    assert_ne!(code, 0, "the flaky step fails: {doc:#}");
    let (doc, _) = s.env.json(&["plan", "checkpoints", &id]);
    let first_end = doc["data"]["checkpoints"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| {
            c["step"]
                .as_str()
                .is_some_and(|st| st.starts_with("step 1 "))
                && c["label"] == "end"
        })
        .unwrap_or_else(|| panic!("{doc:#}"))["checkpoint_id"]
        .as_str()
        .unwrap()
        .to_string();
    let (doc, code) = s.env.json(&["plan", "rollback", "--yes", &id, &first_end]);
    assert_eq!(code, 0, "{doc:#}");
    // Make the retry succeed: the guard file goes into the sandbox through a tool.
    let (doc, code) = s.env.json(&[
        "tool",
        "run",
        "write_file",
        "--plan",
        &id,
        "--args",
        r#"{"path":".second-try","content":""}"#,
    ]);
    assert_eq!(code, 0, "{doc:#}");
    // Regression: this failed with "checkpoint ... was discarded by an earlier rollback".
    let (doc, code) = s.env.json(&["plan", "execute", &id]);
    assert_eq!(
        code, 3,
        "the failed step ran again and the plan reached the apply gate: {doc:#}"
    );
}

/// `plan status` renders the engine's status view: for a plan waiting for approval, an errored
/// one and an applied one, the JSON carries the view's fields and its headline in words.
#[test]
fn plan_status_renders_the_engines_status_view() {
    use cleveragents_engine::api::{Engine, PlanStatusView, Settings, StatusHeadline};
    use cleveragents_engine::domain::{Phase, ProcessingState};
    fn both(s: &Setup, id: &str) -> (Value, PlanStatusView) {
        let (doc, code) = s.env.json(&["plan", "status", id]);
        assert_eq!(code, 0, "{doc:#}");
        let paths = cleveragents_engine::Paths::at(&s.env.data_dir, &s.env.config_path);
        let view = Engine::new(paths, Settings::default())
            .plan_status(&id.parse().unwrap())
            .unwrap();
        let headline = doc["messages"].as_array().unwrap().last().unwrap().clone();
        (json!({"data": doc["data"], "headline": headline}), view)
    }
    fn same_fields(doc: &Value, v: &PlanStatusView) {
        let data = &doc["data"];
        assert_eq!(data["phase"], json!(v.plan.phase()), "{doc:#}");
        assert_eq!(data["state"], json!(v.plan.state()));
        assert_eq!(data["state_reason"], json!(v.state_reason));
        assert_eq!(data["apply_journal_pending"], v.apply_journal_pending);
        assert_eq!(data["decisions"]["current"], v.decisions);
        assert_eq!(data["decisions"]["superseded"], v.superseded_decisions);
        let names: Vec<&str> = v.steps.iter().map(|s| s.name.as_str()).collect();
        let shown: Vec<&str> = data["steps"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s["name"].as_str().unwrap())
            .collect();
        assert_eq!(shown, names);
        assert_eq!(data["errors"].as_array().unwrap().len(), v.errors.len());
        let level = if v.headline.needs_attention() {
            "warn"
        } else {
            "ok"
        };
        assert_eq!(doc["headline"]["level"], level, "{doc:#}");
    }

    let s = setup();
    let (_, code, id) = use_plan(&s, "supervised");
    assert_eq!(code, 3);
    let (doc, v) = both(&s, &id);
    same_fields(&doc, &v);
    let StatusHeadline::WaitingForApproval { approval, .. } = &v.headline else {
        panic!("{:?}", v.headline);
    };
    assert_eq!(
        doc["data"]["pending_approvals"][0]["approval_id"],
        approval.approval_id
    );
    let text = doc["headline"]["text"].as_str().unwrap();
    assert!(
        text.contains(&format!("waiting for approval {}", approval.approval_id)),
        "{text}"
    );

    let failing = SCRIPT_ACTION.replace(
        "run: printf 'More\\n' >> NOTES.md",
        "run: echo broken >&2; exit 7",
    );
    let s = setup_with(&failing);
    let (doc, code, id) = use_plan(&s, "trusted");
    assert_ne!(code, 0, "{doc:#}");
    let (doc, v) = both(&s, &id);
    same_fields(&doc, &v);
    assert_eq!(
        v.headline,
        StatusHeadline::Errored {
            phase: Phase::Execute
        }
    );
    assert_eq!(doc["headline"]["text"], "Plan errored in execute");
    assert!(!v.errors.is_empty());
    assert_eq!(v.steps[1].name, "extend", "{:?}", v.steps);

    let s = setup();
    let (doc, code, id) = use_plan(&s, "full-auto");
    assert_eq!(code, 0, "{doc:#}");
    let (doc, v) = both(&s, &id);
    same_fields(&doc, &v);
    assert_eq!(v.headline, StatusHeadline::Applied);
    assert_eq!(v.plan.state(), ProcessingState::Complete);
    assert_eq!(doc["headline"]["text"], "Plan applied");
}

#[test]
fn plan_list_counts_plans_waiting_at_a_gate_apart_from_applied_ones() {
    let s = setup();
    // Waits at the execute gate, and at the apply gate.
    let (_, code, _) = use_plan(&s, "supervised");
    assert_eq!(code, 3);
    let (_, code, at_apply) = use_plan(&s, "supervised");
    assert_eq!(code, 3);
    let (_, code) = s.env.json(&["plan", "execute", &at_apply]);
    assert_eq!(code, 3, "stops at the apply gate");
    // Applied.
    let (_, _, applied) = use_plan(&s, "supervised");
    s.env.json(&["plan", "execute", &applied]);
    ok(&s.env, &["plan", "apply", "--yes", &applied]);

    let out = s.env.run(&["--format", "plain", "plan", "list"]);
    let text = crate::support::stdout(&out);
    let summary: Vec<&str> = text
        .lines()
        .skip_while(|l| !l.starts_with("Summary"))
        .collect();
    let row = |name: &str| {
        summary
            .iter()
            .find(|l| l.trim_start().starts_with(&format!("{name}:")))
            .map(|l| l.split(':').nth(1).unwrap().trim().to_string())
            .unwrap_or_else(|| panic!("no {name} row in:\n{text}"))
    };
    assert_eq!(row("Total"), "3", "{text}");
    assert_eq!(row("Waiting"), "2", "{text}");
    assert_eq!(row("Applied"), "1", "{text}");
    assert!(
        !summary.iter().any(|l| l.contains("Completed")),
        "a plan waiting at a gate is not completed:\n{text}"
    );
}

/// Gives the data directory's two plans ids that share their first 10 characters (as plans
/// made within the same quarter second do), in every table that names a plan.
fn collide_plan_ids(env: &Env) -> [String; 2] {
    let conn = rusqlite::Connection::open(crate::support::db_file(env)).unwrap();
    conn.execute_batch("PRAGMA foreign_keys = OFF").unwrap();
    let ids: Vec<String> = conn
        .prepare("SELECT plan_id FROM plans ORDER BY plan_id")
        .unwrap()
        .query_map([], |r| r.get(0))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    assert_eq!(ids.len(), 2, "{ids:?}");
    let tables: Vec<String> = conn
        .prepare("SELECT name FROM sqlite_master WHERE type = 'table'")
        .unwrap()
        .query_map([], |r| r.get(0))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    let new = [
        "01M8MK9C00AAAAAAAAAAAAAAAA".to_string(),
        "01M8MK9C00BBBBBBBBBBBBBBBB".to_string(),
    ];
    for table in &tables {
        let columns: Vec<String> = conn
            .prepare(&format!("SELECT name FROM pragma_table_info('{table}')"))
            .unwrap()
            .query_map([], |r| r.get(0))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap();
        for column in columns.iter().filter(|c| c.ends_with("plan_id")) {
            for (old, new) in ids.iter().zip(&new) {
                conn.execute(
                    &format!("UPDATE \"{table}\" SET {column} = ?2 WHERE {column} = ?1"),
                    [old, new],
                )
                .unwrap();
            }
        }
    }
    new
}

#[test]
fn approvals_name_plans_made_within_a_moment_by_prefixes_that_resolve() {
    let s = setup();
    for _ in 0..2 {
        let (_, code, _) = use_plan(&s, "supervised");
        assert_eq!(code, 3);
    }
    let [a, b] = collide_plan_ids(&s.env);
    let text = crate::support::stdout(&s.env.run(&["--format", "plain", "plan", "approvals"]));
    for (full, short) in [(&a, "01M8MK9C00A"), (&b, "01M8MK9C00B")] {
        assert!(text.contains(&format!("{short} ")), "{text}");
        let (doc, code) = s.env.json(&["plan", "status", short]);
        assert_eq!(code, 0, "{doc:#}");
        assert_eq!(doc["data"]["plan_id"], full.as_str(), "{doc:#}");
    }
}
