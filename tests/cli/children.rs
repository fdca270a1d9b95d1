//! Child plans (issue 7 item 6) through the real binary on real git repositories: spawn steps
//! of the offline actors, sequential chains, parallel groups, merge-back, approvals,
//! cancellation.

use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::support::{Env, db_file, git_repo};

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
    run: "{{ before }}"
  - name: write
    run: printf '{{ text }}\n' > {{ file }}
"#;

struct Setup {
    env: Env,
    repo: PathBuf,
}

fn ok(env: &Env, args: &[&str]) -> Value {
    let (doc, code) = env.json(args);
    assert_eq!(code, 0, "{args:?}: {doc:#}");
    doc
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

/// `plan use ACTION app --automation-profile PROFILE`: (doc, exit, plan id).
fn use_plan(s: &Setup, action: &str, profile: &str) -> (Value, i32, String) {
    let (doc, code) = s.env.json(&[
        "plan",
        "use",
        action,
        "app",
        "--automation-profile",
        profile,
    ]);
    let id = doc["data"]["plan_id"]
        .as_str()
        .unwrap_or_else(|| panic!("no plan id: {doc:#}"))
        .to_string();
    (doc, code, id)
}

fn store(env: &Env) -> cleveragents::engine::store::Store {
    cleveragents::engine::store::Store::open(&db_file(env)).unwrap()
}

fn children(env: &Env, plan: &str) -> Vec<Value> {
    let doc = ok(env, &["plan", "status", plan]);
    doc["data"]["children"].as_array().unwrap().clone()
}

fn sandbox_file(env: &Env, plan: &str, path: &str) -> Option<String> {
    let id: cleveragents::engine::domain::Id = plan.parse().unwrap();
    let st = store(env);
    let sb = st.sandboxes_of_plan(&id).unwrap().into_iter().next()?;
    std::fs::read_to_string(sb.root_dir.join("work").join(path)).ok()
}

fn event_kinds(env: &Env, plan: &str) -> Vec<String> {
    let id: cleveragents::engine::domain::Id = plan.parse().unwrap();
    cleveragents::engine::events::after(&store(env), 0, Some(&id), 10_000)
        .unwrap()
        .into_iter()
        .map(|e| e.kind.as_str().to_string())
        .collect()
}

fn repo_file(repo: &Path, path: &str) -> Option<String> {
    std::fs::read_to_string(repo.join(path)).ok()
}

fn git_out(repo: &Path, args: &[&str]) -> String {
    let out = std::process::Command::new("git")
        .args(args)
        .current_dir(repo)
        .output()
        .unwrap();
    String::from_utf8(out.stdout).unwrap()
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
    let (doc, code, id) = use_plan(&s, "local/parent", "trusted");
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
        assert_eq!((k["phase"].as_str(), k["state"].as_str()), (Some("execute"), Some("complete")));
        assert!(k["parallel_group"].is_null());
    }
    // Each child is a full plan: parent and root ids, its own decisions, the parent's
    // invariants inherited without reconciling, linked to its spawn decision.
    let st = store(&s.env);
    let parent_id: cleveragents::engine::domain::Id = id.parse().unwrap();
    let parent_invariants: Vec<String> = st
        .decisions(&parent_id)
        .unwrap()
        .into_iter()
        .filter(|d| d.decision_type.as_str() == "invariant_enforced")
        .map(|d| d.chosen_option)
        .collect();
    assert_eq!(parent_invariants, ["Keep the public API stable"]);
    for k in &kids {
        let child_id: cleveragents::engine::domain::Id =
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
        let link: (String, String, String) = rusqlite::Connection::open(db_file(&s.env))
            .unwrap()
            .query_row(
                "SELECT upstream_decision_id, downstream_decision_id, dependency_type FROM decision_dependencies WHERE downstream_ref = ?1",
                [child_id.to_string()],
                |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
            )
            .unwrap();
        assert_eq!(link.0, k["spawn_decision_id"].as_str().unwrap());
        assert_eq!(link.1, root.decision_id.to_string());
        assert_eq!(link.2, "plan");
        let spawn = st.decision(&link.0.parse().unwrap()).unwrap().unwrap();
        assert_eq!(spawn.decision_type.as_str(), "subplan_spawn");
        assert_eq!(spawn.plan_id, parent_id);
        // A child is never applied by itself.
        let (doc, code) = s.env.json(&["plan", "apply", "--yes", &child_id.to_string()]);
        assert_ne!(code, 0, "{doc:#}");
        assert!(
            doc["error"]["message"].as_str().unwrap().contains("child plan"),
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
    for kind in ["child_spawned", "child_started", "child_finished", "child_merged"] {
        assert_eq!(
            kinds.iter().filter(|k| **k == kind).count(),
            2,
            "{kind} in {kinds:?}"
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
    let files = git_out(&s.repo, &["show", "--name-only", "--format=", "HEAD"]);
    let mut files: Vec<&str> = files.lines().collect();
    files.sort();
    assert_eq!(files, ["A.md", "ALL.md", "B.md", "PREP.md"]);
    assert_eq!(repo_file(&s.repo, "B.md").as_deref(), Some("beta\n"));
}
