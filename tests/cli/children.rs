//! Child plans through the real binary on real git repositories: spawn steps
//! of the offline actors, sequential chains, parallel groups, merge-back, approvals,
//! cancellation.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::support::{Env, git_out, git_repo, ok, use_plan};

/// A child action that writes `text` into `file` (after an optional shell `before`).
const ADD_FILE: &str = r#"name: local/add-file
description: Write {{ file }}
definition-of-done: "{{ file }} holds {{ text }}"
strategy-actor: builtin/checklist-strategist
execution-actor: builtin/script-executor
reusable: true
arguments:
  - name: file
    type: string
    required: true
  - name: text
    type: string
    required: true
  - name: before
    type: string
    default: "true"
script:
  - name: before
    run: "{{ before | raw }}"
  - name: write
    run: printf '%s\n' {{ text }} > {{ file }}
"#;

struct Setup {
    env: Env,
    repo: PathBuf,
}

/// A git checkout `local/repo` in project `local/app` (with a project invariant), and the
/// given actions registered in order and made available.
fn setup(actions: &[&str]) -> Setup {
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
    for (i, a) in actions.iter().enumerate() {
        let file = env.root().join(format!("action-{i}.yaml"));
        std::fs::write(&file, a).unwrap();
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
    }
    Setup { env, repo }
}

fn store(env: &Env) -> cleveragents_engine::store::Store {
    crate::support::open_store(env)
}

fn children(env: &Env, plan: &str) -> Vec<Value> {
    let doc = ok(env, &["plan", "status", plan]);
    doc["data"]["children"].as_array().unwrap().clone()
}

fn sandbox_file(env: &Env, plan: &str, path: &str) -> Option<String> {
    crate::support::sandbox::read(env, plan, path)
}

fn event_kinds(env: &Env, plan: &str) -> Vec<String> {
    let id: cleveragents_engine::domain::Id = plan.parse().unwrap();
    cleveragents_engine::events::after(&store(env), 0, Some(&id), 10_000)
        .unwrap()
        .into_iter()
        .map(|e| e.kind.event_type().as_str().to_string())
        .collect()
}

fn repo_file(repo: &Path, path: &str) -> Option<String> {
    std::fs::read_to_string(repo.join(path)).ok()
}

const SEQUENTIAL: &str = r#"name: local/parent
description: Prepare, let two children write, then combine
definition-of-done: ALL.md combines the children's files
strategy-actor: builtin/checklist-strategist
execution-actor: builtin/script-executor
script:
  - name: prep
    run: printf 'prep\n' > PREP.md
  - name: first
    spawn:
      action: local/add-file
      args: {file: A.md, text: alpha, before: "test -f PREP.md"}
  - name: second
    spawn:
      action: local/add-file
      args: {file: B.md, text: beta, before: "test -f A.md"}
  - name: combine
    run: cat PREP.md A.md B.md > ALL.md
"#;

#[test]
fn sequential_children_branch_from_the_parents_sandbox_merge_back_and_apply_in_one_commit() {
    let s = setup(&[ADD_FILE, SEQUENTIAL]);
    let (doc, code, id) = use_plan(&s.env, "local/parent", "trusted", &[]);
    assert_eq!(code, 3, "trusted stops at the apply gate: {doc:#}");
    // Each child saw the parent's state at its spawn (its `before` check passed) and its file
    // was merged before the next step ran.
    assert_eq!(
        sandbox_file(&s.env, &id, "ALL.md").as_deref(),
        Some("prep\nalpha\nbeta\n")
    );
    let kids = children(&s.env, &id);
    assert_eq!(kids.len(), 2, "{kids:#?}");
    for k in &kids {
        assert_eq!(k["status"], "merged", "{k:#}");
        assert_eq!(k["action"], "local/add-file");
        assert_eq!(
            (k["phase"].as_str(), k["state"].as_str()),
            (Some("execute"), Some("complete"))
        );
        assert!(k["parallel_group"].is_null());
    }
    // Each child is a full plan: parent and root ids, its own decisions, the parent's
    // invariants inherited without reconciling, linked to its spawn decision.
    let st = store(&s.env);
    let parent_id: cleveragents_engine::domain::Id = id.parse().unwrap();
    let parent_invariants: Vec<String> = st
        .decisions(&parent_id)
        .unwrap()
        .into_iter()
        .filter(|d| d.decision_type.as_str() == "invariant_enforced")
        .map(|d| d.chosen_option)
        .collect();
    assert_eq!(parent_invariants, ["Keep the public API stable"]);
    for k in &kids {
        let child_id: cleveragents_engine::domain::Id =
            k["plan_id"].as_str().unwrap().parse().unwrap();
        let child = st.plan(&child_id).unwrap().unwrap();
        assert_eq!(child.parent_plan_id, Some(parent_id));
        assert_eq!(child.root_plan_id, Some(parent_id));
        assert_eq!(child.automation_profile.as_deref(), Some("trusted"));
        let decisions = st.decisions(&child_id).unwrap();
        let root = decisions
            .iter()
            .find(|d| d.decision_type.as_str() == "prompt_definition")
            .unwrap();
        assert_eq!(root.context_snapshot["reconciler"]["used"], "inherited");
        let inherited: Vec<&str> = decisions
            .iter()
            .filter(|d| d.decision_type.as_str() == "invariant_enforced")
            .map(|d| d.chosen_option.as_str())
            .collect();
        assert_eq!(inherited, parent_invariants);
        let link = crate::support::query_rows(
            &s.env,
            &format!(
                "SELECT upstream_decision_id, downstream_decision_id, dependency_type FROM decision_dependencies WHERE downstream_ref = '{child_id}'"
            ),
        );
        assert_eq!(link.len(), 1, "{link:?}");
        let link = (link[0][0].clone(), link[0][1].clone(), link[0][2].clone());
        assert_eq!(link.0, k["spawn_decision_id"].as_str().unwrap());
        assert_eq!(link.1, root.decision_id.to_string());
        assert_eq!(link.2, "plan");
        let spawn = st.decision(&link.0.parse().unwrap()).unwrap().unwrap();
        assert_eq!(spawn.decision_type.as_str(), "subplan_spawn");
        assert_eq!(spawn.plan_id, parent_id);
        // A child is never applied by itself.
        let (doc, code) = s
            .env
            .json(&["plan", "apply", "--yes", &child_id.to_string()]);
        assert_ne!(code, 0, "{doc:#}");
        assert!(
            doc["error"]["message"]
                .as_str()
                .unwrap()
                .contains("child plan"),
            "{doc:#}"
        );
    }
    // The list shows the children with their parent.
    let doc = ok(&s.env, &["plan", "list"]);
    let with_parent = doc["data"]["plans"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|p| p["parent_plan_id"] == id.as_str())
        .count();
    assert_eq!(with_parent, 2);
    // Events on the parent: spawned, started, finished, merged per child.
    let kinds = event_kinds(&s.env, &id);
    for kind in [
        "child_spawned",
        "child_started",
        "child_finished",
        "child_merged",
    ] {
        assert_eq!(
            kinds.iter().filter(|k| **k == kind).count(),
            2,
            "{kind} in {kinds:?}"
        );
    }
    // Each child's sandbox branched after `prep`.
    for k in &kids {
        assert_eq!(
            sandbox_file(&s.env, k["plan_id"].as_str().unwrap(), "PREP.md").as_deref(),
            Some("prep\n")
        );
    }
    // Apply: everything in one commit on the user's branch.
    let before = git_out(&s.repo, &["rev-list", "--count", "HEAD"]);
    let (doc, code) = s.env.json(&["plan", "apply", "--yes", &id]);
    assert_eq!(code, 0, "{doc:#}");
    let after = git_out(&s.repo, &["rev-list", "--count", "HEAD"]);
    assert_eq!(
        after.trim().parse::<u32>().unwrap(),
        before.trim().parse::<u32>().unwrap() + 1
    );
    // The children's work trees are released with the parent's.
    for k in &kids {
        let read = crate::support::sandbox::read_of(
            &s.env,
            k["plan_id"].as_str().unwrap(),
            None,
            "PREP.md",
        );
        assert!(
            read.as_ref().is_err_and(|e| e.contains("were released")),
            "child work tree released: {read:?}"
        );
    }
    let files = git_out(&s.repo, &["show", "--name-only", "--format=", "HEAD"]);
    let mut files: Vec<&str> = files.lines().collect();
    files.sort();
    assert_eq!(files, ["A.md", "ALL.md", "B.md", "PREP.md"]);
    assert_eq!(repo_file(&s.repo, "B.md").as_deref(), Some("beta\n"));
}

fn status(env: &Env, plan: &str) -> Value {
    ok(env, &["plan", "status", plan])["data"].clone()
}

const CHAIN: &str = r#"name: local/chain
description: Three children in a row; the second fails
definition-of-done: the chain stops at the failure
strategy-actor: builtin/checklist-strategist
execution-actor: builtin/script-executor
script:
  - name: first
    spawn:
      action: local/add-file
      args: {file: A.md, text: alpha}
  - name: second
    spawn:
      action: local/add-file
      args: {file: B.md, text: beta, before: "exit 3"}
  - name: third
    spawn:
      action: local/add-file
      args: {file: C.md, text: gamma}
"#;

#[test]
fn in_a_sequential_chain_a_failing_child_stops_the_later_spawns() {
    let s = setup(&[ADD_FILE, CHAIN]);
    let (doc, code, id) = use_plan(&s.env, "local/chain", "trusted", &[]);
    assert_ne!(code, 0, "{doc:#}");
    assert_eq!(doc["error"]["code"], "PLAN_ERRORED", "{doc:#}");
    let st = status(&s.env, &id);
    assert_eq!(
        (st["phase"].as_str(), st["state"].as_str()),
        (Some("execute"), Some("errored"))
    );
    assert_eq!(st["error_code"], "CHILD_FAILED");
    let kids = st["children"].as_array().unwrap();
    assert_eq!(kids.len(), 2, "the third spawn never ran: {kids:#?}");
    assert_eq!(kids[0]["status"], "merged");
    assert_eq!(kids[1]["status"], "failed");
    assert_eq!(kids[1]["state"], "errored");
    let message = st["error_message"].as_str().unwrap();
    assert!(
        message.contains(kids[1]["plan_id"].as_str().unwrap()) && message.contains("exit 3"),
        "the error names the failed child and why: {message}"
    );
    assert_eq!(
        sandbox_file(&s.env, &id, "A.md").as_deref(),
        Some("alpha\n")
    );
    assert_eq!(sandbox_file(&s.env, &id, "C.md"), None);
}

/// Two children that each wait for a file the other creates: they can only both succeed when
/// they run at the same time. The flag directory is outside every sandbox and writable through
/// the actions' `sandbox.writable-paths`.
fn rendezvous_actions(flags: &Path) -> (String, String) {
    let dir = flags.display();
    let waiter = |name: &str, mine: &str, other: &str| {
        format!(
            r#"name: local/{name}
description: Meet the other child
definition-of-done: both children ran at once
strategy-actor: builtin/checklist-strategist
execution-actor: builtin/script-executor
reusable: true
arguments:
  - name: tries
    type: integer
    default: 300
sandbox:
  writable-paths: ["{dir}"]
script:
  - name: meet
    run: "printf here > {dir}/{mine}; i=0; while [ ! -f {dir}/{other} ]; do i=$((i+1)); if [ $i -gt {{{{ tries }}}} ]; then echo 'the other child never ran' >&2; exit 7; fi; sleep 0.1; done"
  - name: write
    run: printf 'met\n' > {name}.md
"#
        )
    };
    (
        waiter("left", "left.flag", "right.flag"),
        waiter("right", "right.flag", "left.flag"),
    )
}

/// The parent of the two waiters; its sandbox allows what theirs do (the flag directory), so
/// spawning them widens nothing and needs no approval under `trusted`.
fn rendezvous_parent(tries: u32, dir: &std::path::Path) -> String {
    let dir = dir.display();
    format!(
        r#"name: local/meet
description: Two children in one parallel group
definition-of-done: both met
strategy-actor: builtin/checklist-strategist
execution-actor: builtin/script-executor
reusable: true
sandbox:
  writable-paths: ["{dir}"]
script:
  - name: left
    parallel-group: both
    spawn:
      action: local/left
      args: {{tries: {tries}}}
  - name: right
    parallel-group: both
    spawn:
      action: local/right
      args: {{tries: {tries}}}
  - name: after
    run: cat left.md right.md > BOTH.md
"#
    )
}

#[test]
fn children_of_one_parallel_group_run_at_the_same_time_up_to_max_parallel_children() {
    let flags = tempfile::tempdir().unwrap();
    let (left, right) = rendezvous_actions(flags.path());
    // 30 s guard: 300 tries of 0.1 s.
    let s = setup(&[&left, &right, &rendezvous_parent(300, flags.path())]);
    let (doc, code, id) = use_plan(&s.env, "local/meet", "trusted", &[]);
    assert_eq!(
        code, 3,
        "both children met and the plan reached the apply gate: {doc:#}"
    );
    assert_eq!(
        sandbox_file(&s.env, &id, "BOTH.md").as_deref(),
        Some("met\nmet\n")
    );
    let kids = children(&s.env, &id);
    assert_eq!(kids.len(), 2);
    assert!(
        kids.iter()
            .all(|k| k["status"] == "merged" && k["parallel_group"] == "both"),
        "{kids:#?}"
    );
    let st = store(&s.env);
    let group = st
        .decisions(&id.parse().unwrap())
        .unwrap()
        .into_iter()
        .find(|d| d.decision_type.as_str() == "subplan_parallel_spawn")
        .expect("the group is a subplan_parallel_spawn decision");
    for k in &kids {
        let spawn = st
            .decision(&k["spawn_decision_id"].as_str().unwrap().parse().unwrap())
            .unwrap()
            .unwrap();
        assert_eq!(spawn.decision_type.as_str(), "subplan_spawn");
        assert_eq!(spawn.parent_decision_id, Some(group.decision_id));
    }

    // With max-parallel-children = 1 the same group cannot meet (short guard: 2 s).
    for f in ["left.flag", "right.flag"] {
        let _ = std::fs::remove_file(flags.path().join(f));
    }
    ok(&s.env, &["config", "set", "max-parallel-children", "1"]);
    let file = s.env.root().join("meet-short.yaml");
    std::fs::write(
        &file,
        rendezvous_parent(20, flags.path()).replace("local/meet", "local/meet-short"),
    )
    .unwrap();
    ok(
        &s.env,
        &[
            "action",
            "create",
            "--available",
            "--config",
            file.to_str().unwrap(),
        ],
    );
    let (doc, code, id) = use_plan(&s.env, "local/meet-short", "trusted", &[]);
    assert_ne!(code, 0, "{doc:#}");
    let st = status(&s.env, &id);
    assert_eq!(st["error_code"], "CHILD_FAILED", "{st:#}");
    let kids = st["children"].as_array().unwrap();
    assert_eq!(kids.len(), 2);
    assert_eq!(
        kids[0]["status"], "failed",
        "the first child waited alone: {kids:#?}"
    );
}

#[test]
fn a_failing_child_of_a_parallel_group_does_not_stop_its_siblings_and_nothing_is_merged() {
    let parent = r#"name: local/pair
description: One child fails at once, its sibling takes a second
definition-of-done: the sibling finished
strategy-actor: builtin/checklist-strategist
execution-actor: builtin/script-executor
script:
  - name: bad
    parallel-group: pair
    spawn:
      action: local/add-file
      args: {file: BAD.md, text: bad, before: "exit 3"}
  - name: good
    parallel-group: pair
    spawn:
      action: local/add-file
      args: {file: GOOD.md, text: good, before: "sleep 1"}
"#;
    let s = setup(&[ADD_FILE, parent]);
    let (doc, code, id) = use_plan(&s.env, "local/pair", "trusted", &[]);
    assert_ne!(code, 0, "{doc:#}");
    let st = status(&s.env, &id);
    assert_eq!(st["error_code"], "CHILD_FAILED");
    assert!(
        st["error_message"]
            .as_str()
            .unwrap()
            .contains("1 of 2 child plans did not succeed"),
        "{st:#}"
    );
    let kids = st["children"].as_array().unwrap();
    assert_eq!(kids[0]["status"], "failed");
    assert_eq!(
        kids[1]["status"], "succeeded",
        "the sibling ran to its end: {kids:#?}"
    );
    assert_eq!(
        (kids[1]["phase"].as_str(), kids[1]["state"].as_str()),
        (Some("execute"), Some("complete"))
    );
    assert_eq!(
        sandbox_file(&s.env, kids[1]["plan_id"].as_str().unwrap(), "GOOD.md").as_deref(),
        Some("good\n"),
        "the sibling's work is in its own sandbox"
    );
    assert_eq!(
        sandbox_file(&s.env, &id, "GOOD.md"),
        None,
        "nothing was merged"
    );
}

#[test]
fn children_whose_results_conflict_raise_an_error_recovery_approval_naming_the_paths() {
    let parent = r#"name: local/clash
description: Two children write the same file differently
definition-of-done: never
strategy-actor: builtin/checklist-strategist
execution-actor: builtin/script-executor
script:
  - name: one
    parallel-group: clash
    spawn:
      action: local/add-file
      args: {file: SAME.md, text: one}
  - name: two
    parallel-group: clash
    spawn:
      action: local/add-file
      args: {file: SAME.md, text: two}
"#;
    let s = setup(&[ADD_FILE, parent]);
    let (doc, code, id) = use_plan(&s.env, "local/clash", "trusted", &[]);
    assert_ne!(code, 0, "{doc:#}");
    let st = status(&s.env, &id);
    assert_eq!(st["error_code"], "MERGE_CONFLICT", "{st:#}");
    let message = st["error_message"].as_str().unwrap();
    assert!(message.contains("SAME.md"), "{message}");
    let kids = st["children"].as_array().unwrap();
    assert_eq!(kids[0]["status"], "merged");
    assert_eq!(kids[1]["status"], "conflict");
    assert!(
        message.contains(kids[1]["plan_id"].as_str().unwrap()),
        "{message}"
    );
    let pending = st["pending_approvals"].as_array().unwrap();
    assert_eq!(pending.len(), 1, "{pending:#?}");
    assert_eq!(pending[0]["kind"], "error_recovery");
    assert_eq!(
        pending[0]["options"],
        serde_json::json!(["retry", "cancel"])
    );
    let apr = pending[0]["approval_id"].as_str().unwrap();
    let (doc, code) = s.env.json(&["plan", "decide", apr, "--option", "cancel"]);
    assert_eq!(code, 0, "{doc:#}");
    assert_eq!(status(&s.env, &id)["state"], "cancelled");
}

#[test]
fn without_auto_child_plans_each_spawn_waits_for_a_child_spawn_approval() {
    let parent = r#"name: local/ask
description: Two spawns under supervision
definition-of-done: the approved child's file exists
strategy-actor: builtin/checklist-strategist
execution-actor: builtin/script-executor
script:
  - name: first
    spawn:
      action: local/add-file
      args: {file: A.md, text: alpha}
  - name: second
    spawn:
      action: local/add-file
      args: {file: B.md, text: beta}
"#;
    let s = setup(&[ADD_FILE, parent]);
    let (doc, code, id) = use_plan(&s.env, "local/ask", "supervised", &[]);
    assert_eq!(code, 3, "the execute gate: {doc:#}");
    let (doc, code) = s.env.json(&["plan", "execute", &id]);
    assert_eq!(code, 3, "{doc:#}");
    let first = &doc["data"]["approval"];
    assert_eq!(first["kind"], "child_spawn", "{doc:#}");
    assert_eq!(first["options"], serde_json::json!(["spawn", "skip"]));
    assert_eq!(first["context"]["action"], "local/add-file");
    assert!(
        children(&s.env, &id).is_empty(),
        "nothing spawned before the answer"
    );
    let st = status(&s.env, &id);
    assert_eq!(
        (st["phase"].as_str(), st["state"].as_str()),
        (Some("execute"), Some("queued"))
    );
    // `plan execute` again does not spawn around the pending approval.
    let (doc, code) = s.env.json(&["plan", "execute", &id]);
    assert_eq!(code, 3, "{doc:#}");
    assert!(children(&s.env, &id).is_empty());
    let (doc, code) = s.env.json(&[
        "plan",
        "decide",
        first["approval_id"].as_str().unwrap(),
        "--option",
        "spawn",
    ]);
    assert_eq!(code, 3, "the second spawn asks next: {doc:#}");
    let second = &doc["data"]["approval"];
    assert_eq!(second["kind"], "child_spawn");
    assert_ne!(second["approval_id"], first["approval_id"]);
    assert_eq!(children(&s.env, &id).len(), 1);
    // A name that is not an option is refused with the options listed.
    let (doc, code) = s.env.json(&[
        "plan",
        "decide",
        second["approval_id"].as_str().unwrap(),
        "--option",
        "later",
    ]);
    assert_eq!(code, 1, "{doc:#}");
    assert!(
        doc["error"]["suggestions"]
            .to_string()
            .contains("spawn, skip"),
        "{doc:#}"
    );
    // `plan reject` skips the spawn; the plan goes on to the apply gate.
    let (doc, code) = s.env.json(&[
        "plan",
        "reject",
        second["approval_id"].as_str().unwrap(),
        "--reason",
        "not needed",
    ]);
    assert_eq!(code, 3, "the apply gate: {doc:#}");
    assert_eq!(doc["data"]["approval"]["kind"], "phase_gate", "{doc:#}");
    let kids = children(&s.env, &id);
    assert_eq!(kids.len(), 1, "the skipped spawn made no child");
    assert_eq!(kids[0]["status"], "merged");
    assert_eq!(
        sandbox_file(&s.env, &id, "A.md").as_deref(),
        Some("alpha\n")
    );
    assert_eq!(sandbox_file(&s.env, &id, "B.md"), None);
}

#[test]
fn cancelling_a_parent_cancels_its_running_children() {
    let parent = r#"name: local/slow
description: A child that takes long
definition-of-done: never
strategy-actor: builtin/checklist-strategist
execution-actor: builtin/script-executor
script:
  - name: slow
    spawn:
      action: local/add-file
      args: {file: SLOW.md, text: slow, before: "sleep 60"}
"#;
    let s = setup(&[ADD_FILE, parent]);
    let mut cmd = s.env.command(&[
        "--format",
        "json",
        "plan",
        "use",
        "local/slow",
        "app",
        "--automation-profile",
        "trusted",
    ]);
    let mut running = cmd
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    // Wait until the child runs its long step.
    let deadline = Instant::now() + Duration::from_secs(30);
    let (parent_id, child_id) = loop {
        assert!(Instant::now() < deadline, "the child never started");
        let st = store(&s.env);
        let found = st
            .plans()
            .unwrap()
            .into_iter()
            .find(|p| p.parent_plan_id.is_some());
        if let Some(child) = found
            && child.phase().as_str() == "execute"
            && child.state().as_str() == "processing"
        {
            break (
                child.parent_plan_id.unwrap().to_string(),
                child.plan_id.to_string(),
            );
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    let started = Instant::now();
    let (doc, code) = s.env.json(&["plan", "cancel", &parent_id]);
    assert_eq!(code, 0, "{doc:#}");
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let p = status(&s.env, &parent_id);
        let c = status(&s.env, &child_id);
        if p["state"] == "cancelled" && c["state"] == "cancelled" {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "parent {} / child {}",
            p["state"],
            c["state"]
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(started.elapsed() < Duration::from_secs(10));
    let _ = running.wait();
    assert_eq!(children(&s.env, &parent_id)[0]["status"], "cancelled");
}

#[test]
fn a_model_executor_spawns_children_with_create_subplan_sequentially_and_in_a_parallel_group() {
    use crate::support::provider_server::{ProviderServer, Turn};
    let server = ProviderServer::start(vec![
        Turn::tools(
            "",
            &[(
                "create_subplan",
                r#"{"action":"local/add-file","args":{"file":"A.md","text":"alpha"}}"#,
            )],
            (10, 5),
        ),
        Turn::tools(
            "",
            &[
                (
                    "create_subplan",
                    r#"{"action":"local/add-file","args":{"file":"B.md","text":"beta"},"parallel_group":"g"}"#,
                ),
                (
                    "create_subplan",
                    r#"{"action":"local/add-file","args":{"file":"C.md","text":"gamma","before":"test -f A.md"},"parallel_group":"g"}"#,
                ),
            ],
            (10, 5),
        ),
        Turn::tools("", &[("read_file", r#"{"path":"C.md"}"#)], (10, 5)),
        Turn::text("Delegated the three files.", (10, 5)),
    ]);
    let delegate = "name: local/delegate\ndescription: Delegate the files to child plans\ndefinition-of-done: A.md, B.md and C.md exist\nstrategy-actor: builtin/checklist-strategist\nexecution-actor: scripted/m\n";
    let s = setup(&[ADD_FILE]);
    std::fs::create_dir_all(s.env.config_path.parent().unwrap()).unwrap();
    std::fs::write(
        &s.env.config_path,
        format!(
            "[providers.scripted]\nkind = \"openai\"\nbase_url = \"{}\"\napi_key_env = \"SCRIPTED_API_KEY\"\n",
            server.openai_base()
        ),
    )
    .unwrap();
    let file = s.env.root().join("delegate.yaml");
    std::fs::write(&file, delegate).unwrap();
    ok(
        &s.env,
        &[
            "action",
            "create",
            "--available",
            "--config",
            file.to_str().unwrap(),
        ],
    );
    let out = s
        .env
        .command(&[
            "--format",
            "json",
            "plan",
            "use",
            "local/delegate",
            "app",
            "--automation-profile",
            "trusted",
        ])
        .env("SCRIPTED_API_KEY", "sk-test")
        .output()
        .unwrap();
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(out.status.code(), Some(3), "the apply gate: {doc:#}");
    let id = doc["data"]["plan_id"].as_str().unwrap().to_string();
    assert_eq!(server.remaining(), 0);
    for (f, t) in [("A.md", "alpha\n"), ("B.md", "beta\n"), ("C.md", "gamma\n")] {
        assert_eq!(sandbox_file(&s.env, &id, f).as_deref(), Some(t), "{f}");
    }
    // The first child's result was returned to the model; the group ran before read_file.
    let requests = server.requests();
    let second = requests[1].body.to_string();
    assert!(second.contains("merged"), "{second}");
    let fourth = requests[3].body.to_string();
    assert!(
        fourth.contains("gamma"),
        "read_file saw the group's merged work: {fourth}"
    );
    let kids = children(&s.env, &id);
    assert_eq!(kids.len(), 3, "{kids:#?}");
    assert!(kids.iter().all(|k| k["status"] == "merged"));
    assert_eq!(kids[0]["parallel_group"], Value::Null);
    assert_eq!(kids[1]["parallel_group"], "g");
    let st = store(&s.env);
    let decisions = st.decisions(&id.parse().unwrap()).unwrap();
    let step = decisions.iter().find(|d| d.step.is_some()).unwrap();
    let group = decisions
        .iter()
        .find(|d| d.decision_type.as_str() == "subplan_parallel_spawn")
        .unwrap();
    assert_eq!(group.parent_decision_id, Some(step.decision_id));
    let spawns: Vec<_> = decisions
        .iter()
        .filter(|d| d.decision_type.as_str() == "subplan_spawn")
        .collect();
    assert_eq!(spawns.len(), 3);
    assert_eq!(spawns[0].parent_decision_id, Some(step.decision_id));
    assert_eq!(spawns[1].parent_decision_id, Some(group.decision_id));
}

pub(crate) fn snapshot(name: &str, env: &Env, args: &[&str]) {
    let out = env.run(args);
    let text = crate::cli::snapshots::output_text(&out);
    let mut s = crate::cli::snapshots::settings(env, args);
    s.add_filter(r"inv_[0-9A-HJKMNP-TV-Z]{26}", "inv_[ULID]");
    s.add_filter(r"apr_[0-9A-HJKMNP-TV-Z]{26}", "apr_[ULID]");
    s.add_filter(r"cp_[0-9A-HJKMNP-TV-Z]{26}", "cp_[ULID]");
    s.add_filter(r"\b[0-9A-HJKMNP-TV-Z]{26}\b", "[ULID]");
    // Timestamps first: their fraction of a second may look like a short id.
    s.add_filter(
        r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?Z",
        "[TIMESTAMP]",
    );
    // Short ids grow by a character when two plans share a prefix, and table columns with
    // them: mask the ids, then collapse column padding and rules.
    s.add_filter(r"\b01[0-9A-HJKMNP-TV-Z]{6,24}\b", "[SHORT]");
    s.add_filter(r"\b[0-9a-f]{40}\b", "[SHA]");
    s.add_filter(r"\d{4}-\d{2}-\d{2} \d{2}:\d{2}", "[TIME]");
    s.add_filter(r#""(duration|elapsed)_ms": ?\d+"#, r#""${1}_ms": "[MS]""#);
    s.add_filter(r"(\S)  +", "$1  ");
    s.add_filter(r"-{4,}", "----");
    s.bind(|| insta::assert_snapshot!(name, text));
}

#[test]
fn plan_status_and_list_show_a_parents_children_and_a_childs_parent() {
    let parent = r#"name: local/one-child
description: Prepare, then let one child write
definition-of-done: A.md exists
strategy-actor: builtin/checklist-strategist
execution-actor: builtin/script-executor
script:
  - name: prep
    run: printf 'prep\n' > PREP.md
  - name: child
    spawn:
      action: local/add-file
      args: {file: A.md, text: alpha}
"#;
    let s = setup(&[ADD_FILE, parent]);
    let (doc, code, id) = use_plan(&s.env, "local/one-child", "trusted", &[]);
    assert_eq!(code, 3, "{doc:#}");
    let child = children(&s.env, &id)[0]["plan_id"]
        .as_str()
        .unwrap()
        .to_string();
    snapshot(
        "plan_status_with_children_plain",
        &s.env,
        &["--format", "plain", "plan", "status", &id],
    );
    snapshot(
        "plan_status_of_a_child_plain",
        &s.env,
        &["--format", "plain", "plan", "status", &child],
    );
    snapshot(
        "plan_list_with_children_plain",
        &s.env,
        &["--format", "plain", "plan", "list"],
    );
    // json: the children list (the rest of the status document is covered elsewhere).
    let doc = ok(&s.env, &["plan", "status", &id]);
    let mut kids = doc["data"]["children"].clone();
    let text = serde_json::to_string_pretty(&kids.take()).unwrap();
    let mut settings =
        crate::cli::snapshots::settings(&s.env, &["plan", "status", "--format", "json"]);
    settings.add_filter(r"\b[0-9A-HJKMNP-TV-Z]{26}\b", "[ULID]");
    settings.add_filter(r"\b[0-9a-f]{40}\b", "[SHA]");
    settings.bind(|| insta::assert_snapshot!("plan_status_children_json", text));
}

#[test]
fn a_retried_group_reuses_the_children_that_completed_and_runs_the_failed_one_again() {
    let flags = tempfile::tempdir().unwrap();
    let ok_flag = flags.path().join("ok");
    let parent = format!(
        r#"name: local/retry
description: A flaky child and a solid one
definition-of-done: both files, README gone
strategy-actor: builtin/checklist-strategist
execution-actor: builtin/script-executor
script:
  - name: flaky
    parallel-group: pair
    spawn:
      action: local/add-file
      args: {{file: FLAKY.md, text: flaky, before: "test -f {}"}}
  - name: solid
    parallel-group: pair
    spawn:
      action: local/add-file
      args: {{file: SOLID.md, text: solid, before: "rm README"}}
"#,
        ok_flag.display()
    );
    let s = setup(&[ADD_FILE, &parent]);
    let (doc, code, id) = use_plan(&s.env, "local/retry", "trusted", &[]);
    assert_ne!(code, 0, "{doc:#}");
    let first = children(&s.env, &id);
    assert_eq!(
        (first[0]["status"].as_str(), first[1]["status"].as_str()),
        (Some("failed"), Some("succeeded"))
    );
    std::fs::write(&ok_flag, "").unwrap();
    let (doc, code) = s.env.json(&["plan", "execute", &id]);
    assert_eq!(code, 3, "the apply gate after the retry: {doc:#}");
    let kids = children(&s.env, &id);
    assert_eq!(
        kids.len(),
        3,
        "one new child for the failed spawn only: {kids:#?}"
    );
    assert_eq!(
        kids[0]["status"], "failed",
        "the first attempt stays recorded"
    );
    assert_eq!(
        kids[1]["plan_id"], first[1]["plan_id"],
        "the solid child is reused"
    );
    assert_eq!(kids[1]["status"], "merged");
    assert_eq!(kids[2]["status"], "merged");
    assert_eq!(kids[2]["spawn_decision_id"], first[0]["spawn_decision_id"]);
    assert_eq!(
        sandbox_file(&s.env, &id, "FLAKY.md").as_deref(),
        Some("flaky\n")
    );
    assert_eq!(
        sandbox_file(&s.env, &id, "SOLID.md").as_deref(),
        Some("solid\n")
    );
    assert_eq!(
        sandbox_file(&s.env, &id, "README"),
        None,
        "a child's deletion is merged too"
    );
    let (doc, code) = s.env.json(&["plan", "apply", "--yes", &id]);
    assert_eq!(code, 0, "{doc:#}");
    assert!(!s.repo.join("README").exists());
    assert_eq!(repo_file(&s.repo, "FLAKY.md").as_deref(), Some("flaky\n"));
}

#[test]
fn after_the_parent_process_is_killed_resuming_continues_the_orphaned_child() {
    if crate::support::through_server::in_process_only(
        "it kills the process that drives the plan; through a server that is the server, and killing the client only ends its wait",
    ) {
        return;
    }
    let flags = tempfile::tempdir().unwrap();
    let ok_flag = flags.path().join("ok");
    let parent = format!(
        r#"name: local/killed
description: A child that hangs until a flag exists
definition-of-done: HANG.md exists
strategy-actor: builtin/checklist-strategist
execution-actor: builtin/script-executor
script:
  - name: hang
    spawn:
      action: local/add-file
      args: {{file: HANG.md, text: done, before: "test -f {0} || sleep 60"}}
"#,
        ok_flag.display()
    );
    let s = setup(&[ADD_FILE, &parent]);
    let mut running = s
        .env
        .command(&[
            "plan",
            "use",
            "local/killed",
            "app",
            "--automation-profile",
            "trusted",
        ])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    let (parent_id, orphan) = loop {
        assert!(Instant::now() < deadline, "the child never started");
        let found = store(&s.env)
            .plans()
            .unwrap()
            .into_iter()
            .find(|p| p.parent_plan_id.is_some());
        if let Some(child) = found
            && child.phase().as_str() == "execute"
            && child.state().as_str() == "processing"
        {
            break (
                child.parent_plan_id.unwrap().to_string(),
                child.plan_id.to_string(),
            );
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    running.kill().unwrap();
    running.wait().unwrap();
    std::fs::write(&ok_flag, "").unwrap();
    let (doc, code) = s.env.json(&["plan", "execute", &parent_id]);
    assert_eq!(code, 3, "resumed to the apply gate: {doc:#}");
    let kids = children(&s.env, &parent_id);
    assert_eq!(
        kids.len(),
        1,
        "the orphan continues, no child is spawned anew: {kids:#?}"
    );
    assert_eq!(kids[0]["plan_id"], orphan.as_str());
    assert_eq!(kids[0]["status"], "merged", "{kids:#?}");
    assert_eq!(
        sandbox_file(&s.env, &parent_id, "HANG.md").as_deref(),
        Some("done\n")
    );
}

#[test]
fn ctrl_c_interrupts_the_parent_with_its_children_and_the_plan_resumes() {
    if crate::support::through_server::in_process_only(
        "it interrupts the process that drives the plan; through a server Ctrl-C on the client only ends its wait",
    ) {
        return;
    }
    let flags = tempfile::tempdir().unwrap();
    let ok_flag = flags.path().join("ok");
    let parent = format!(
        r#"name: local/paused
description: A child that waits until a flag exists
definition-of-done: WAIT.md exists
strategy-actor: builtin/checklist-strategist
execution-actor: builtin/script-executor
script:
  - name: wait
    spawn:
      action: local/add-file
      args: {{file: WAIT.md, text: done, before: "test -f {0} || sleep 60"}}
"#,
        ok_flag.display()
    );
    let s = setup(&[ADD_FILE, &parent]);
    let mut running = s
        .env
        .command(&[
            "plan",
            "use",
            "local/paused",
            "app",
            "--automation-profile",
            "trusted",
        ])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    let (parent_id, first) = loop {
        assert!(Instant::now() < deadline, "the child never started");
        let found = store(&s.env)
            .plans()
            .unwrap()
            .into_iter()
            .find(|p| p.parent_plan_id.is_some());
        if let Some(child) = found
            && child.phase().as_str() == "execute"
            && child.state().as_str() == "processing"
        {
            break (
                child.parent_plan_id.unwrap().to_string(),
                child.plan_id.to_string(),
            );
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    let sent = std::process::Command::new("kill")
        .args(["-INT", &running.id().to_string()])
        .status()
        .unwrap();
    assert!(sent.success());
    let code = running.wait().unwrap().code();
    assert_eq!(code, Some(130), "Ctrl-C exits 130");
    let p = status(&s.env, &parent_id);
    let c = status(&s.env, &first);
    assert_eq!(
        (p["phase"].as_str(), p["state"].as_str()),
        (Some("execute"), Some("queued"))
    );
    assert_eq!(p["state_reason"], "interrupted");
    assert_eq!(
        c["state"], "queued",
        "the child was interrupted with its parent: {c:#}"
    );
    std::fs::write(&ok_flag, "").unwrap();
    let (doc, code) = s.env.json(&["plan", "execute", &parent_id]);
    assert_eq!(code, 3, "resumed to the apply gate: {doc:#}");
    let kids = children(&s.env, &parent_id);
    assert_eq!(kids.len(), 1, "the interrupted child continues: {kids:#?}");
    assert_eq!(kids[0]["plan_id"], first.as_str());
    assert_eq!(kids[0]["status"], "merged", "{kids:#?}");
    assert_eq!(
        status(&s.env, &first)["state"],
        "complete",
        "the interrupted child is not left queued"
    );
    assert_eq!(
        sandbox_file(&s.env, &parent_id, "WAIT.md").as_deref(),
        Some("done\n")
    );
}

#[test]
fn grandchildren_nest_through_their_parents_sandboxes_and_endless_recursion_stops_at_four_levels() {
    let recurse = r#"name: local/recurse
description: Write a file at this level, then spawn the next level
definition-of-done: every level wrote its file
strategy-actor: builtin/checklist-strategist
execution-actor: builtin/script-executor
reusable: true
arguments:
  - name: level
    type: integer
    default: 0
script:
  - name: write
    run: printf '%s\n' {{ level }} > level-{{ level }}.md
  - name: deeper
    spawn:
      action: local/recurse
      args: {level: "{{ level + 1 }}"}
"#;
    let s = setup(&[recurse]);
    let (doc, code, id) = use_plan(&s.env, "local/recurse", "trusted", &[]);
    assert_ne!(code, 0, "{doc:#}");
    let st = store(&s.env);
    let plans = st.plans().unwrap();
    let mut chain = vec![plans.iter().find(|p| p.plan_id.to_string() == id).unwrap()];
    while let Some(next) = plans
        .iter()
        .find(|p| p.parent_plan_id == Some(chain.last().unwrap().plan_id))
    {
        assert_eq!(next.root_plan_id, Some(chain[0].plan_id));
        chain.push(next);
    }
    assert_eq!(chain.len(), 5, "the root and four levels of children");
    let deepest = status(&s.env, &chain[4].plan_id.to_string());
    assert_eq!(deepest["state"], "errored");
    assert!(
        deepest["error_message"]
            .as_str()
            .unwrap()
            .contains("nest at most 4 levels"),
        "{deepest:#}"
    );
    // The deepest level branched through every level above it.
    let files: Vec<Option<String>> = (0..5)
        .map(|l| {
            sandbox_file(
                &s.env,
                &chain[4].plan_id.to_string(),
                &format!("level-{l}.md"),
            )
        })
        .collect();
    assert_eq!(
        files,
        (0..5).map(|l| Some(format!("{l}\n"))).collect::<Vec<_>>()
    );
}

#[test]
fn a_failed_child_completed_on_its_own_is_merged_when_the_parent_runs_again() {
    let flags = tempfile::tempdir().unwrap();
    let ok_flag = flags.path().join("ok");
    let parent = format!(
        r#"name: local/fixable
description: A child that fails until a flag exists
definition-of-done: FIX.md exists
strategy-actor: builtin/checklist-strategist
execution-actor: builtin/script-executor
script:
  - name: fix
    spawn:
      action: local/add-file
      args: {{file: FIX.md, text: fixed, before: "test -f {}"}}
"#,
        ok_flag.display()
    );
    let s = setup(&[ADD_FILE, &parent]);
    let (doc, code, id) = use_plan(&s.env, "local/fixable", "trusted", &[]);
    assert_ne!(code, 0, "{doc:#}");
    let child = children(&s.env, &id)[0]["plan_id"]
        .as_str()
        .unwrap()
        .to_string();
    std::fs::write(&ok_flag, "").unwrap();
    let (doc, code) = s.env.json(&["plan", "execute", &child]);
    assert_eq!(code, 0, "{doc:#}");
    assert_eq!(
        (doc["data"]["phase"].as_str(), doc["data"]["state"].as_str()),
        (Some("execute"), Some("complete"))
    );
    assert!(
        doc["data"]["next"]
            .as_str()
            .unwrap()
            .ends_with(&format!("plan execute {id}")),
        "the child points at its parent, not at apply: {doc:#}"
    );
    let (doc, code) = s.env.json(&["plan", "execute", &id]);
    assert_eq!(code, 3, "{doc:#}");
    let kids = children(&s.env, &id);
    assert_eq!(kids.len(), 1, "the completed child was reused: {kids:#?}");
    assert_eq!(kids[0]["status"], "merged");
    assert_eq!(
        sandbox_file(&s.env, &id, "FIX.md").as_deref(),
        Some("fixed\n")
    );
}

/// Correcting a spawn decision spawns its child again in the new attempt; `plan status` then
/// lists only the current children (the old attempt's are counted apart, still in json with
/// `superseded: true`), so the table agrees with `plan tree`.
#[test]
fn after_correcting_a_spawn_plan_status_lists_only_the_current_children() {
    let parent = r#"name: local/one-child
description: Prepare, then let one child write
definition-of-done: A.md exists
strategy-actor: builtin/checklist-strategist
execution-actor: builtin/script-executor
script:
  - name: prep
    run: printf 'prep\n' > PREP.md
  - name: child
    spawn:
      action: local/add-file
      args: {file: A.md, text: alpha}
"#;
    let s = setup(&[ADD_FILE, parent]);
    let (doc, code, id) = use_plan(&s.env, "local/one-child", "trusted", &[]);
    assert_eq!(code, 3, "{doc:#}");
    let old = children(&s.env, &id)[0].clone();
    let spawn = old["spawn_decision_id"].as_str().unwrap().to_string();
    let (doc, code) = s.env.json(&[
        "plan",
        "correct",
        "--mode",
        "revert",
        "-g",
        "spawn again",
        "--yes",
        &spawn,
    ]);
    assert_eq!(code, 0, "{doc:#}");

    let all = children(&s.env, &id);
    assert_eq!(all.len(), 2, "{all:#?}");
    let current: Vec<_> = all.iter().filter(|c| c["superseded"] == false).collect();
    assert_eq!(current.len(), 1, "{all:#?}");
    assert_ne!(current[0]["plan_id"], old["plan_id"]);
    let out = s.env.run(&["--format", "plain", "plan", "status", &id]);
    let text = crate::support::stdout(&out);
    let rows: Vec<&str> = text
        .lines()
        .skip_while(|l| !l.starts_with("Child Plans"))
        .skip(3)
        .take_while(|l| !l.trim().is_empty())
        .collect();
    assert_eq!(rows.len(), 1, "{text}");
    let shown = rows[0].split_whitespace().next().unwrap();
    assert!(
        current[0]["plan_id"].as_str().unwrap().starts_with(shown),
        "the current child: {text}"
    );
    assert!(text.contains("Superseded Child Plans: 1"), "{text}");
}

#[test]
fn a_child_whose_action_asks_for_network_waits_for_an_approval_showing_the_difference_even_under_trusted()
 {
    let networked = r#"name: local/fetcher
description: Needs the network
definition-of-done: fetched
strategy-actor: builtin/checklist-strategist
execution-actor: builtin/script-executor
reusable: true
sandbox:
  network: true
  env: [GITHUB_TOKEN]
script:
  - name: fetch
    run: printf 'fetched\n' > FETCHED.md
"#;
    let parent = r#"name: local/offline-parent
description: Has no network itself
definition-of-done: the child ran
strategy-actor: builtin/checklist-strategist
execution-actor: builtin/script-executor
script:
  - name: child
    spawn:
      action: local/fetcher
"#;
    let s = setup(&[networked, parent]);
    let (doc, code, id) = use_plan(&s.env, "local/offline-parent", "trusted", &[]);
    assert_eq!(code, 3, "{doc:#}");
    assert!(
        children(&s.env, &id).is_empty(),
        "nothing spawned before the answer: {doc:#}"
    );
    let approval = &doc["data"]["approval"];
    assert_eq!(approval["kind"], "child_spawn", "{doc:#}");
    assert_eq!(approval["context"]["flag"], "sandbox_widening", "{doc:#}");
    let shown = approval.to_string();
    assert!(shown.contains("network: false -> true"), "{shown}");
    assert!(shown.contains("env: + GITHUB_TOKEN"), "{shown}");
}
