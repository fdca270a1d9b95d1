//! What a process killed with SIGKILL leaves behind does not block or dirty anything
//! (regressions found by `scripts/reliability.sh`): a sandbox's stale `index.lock`, and an
//! apply's unfinished write (rolled back by the next command: `cli::apply` kills real applies).

use std::path::PathBuf;

use crate::support::{Env, git_repo};

const ACTION: &str = "name: local/two\ndefinition-of-done: a and b\nstrategy-actor: builtin/checklist-strategist\nexecution-actor: builtin/script-executor\nscript:\n  - name: a\n    run: echo a > a.txt\n  - name: b\n    run: echo b > b.txt\n";

fn setup() -> (Env, PathBuf, String) {
    let env = Env::new();
    let repo = git_repo(env.root(), "repo");
    let file = env.root().join("a.yaml");
    std::fs::write(&file, ACTION).unwrap();
    for args in [
        vec![
            "resource",
            "add",
            "git-checkout",
            "local/repo",
            "--path",
            repo.to_str().unwrap(),
        ],
        vec!["project", "create", "--resource", "local/repo", "app"],
        vec![
            "action",
            "create",
            "--available",
            "--config",
            file.to_str().unwrap(),
        ],
    ] {
        let (doc, code) = env.json(&args);
        assert_eq!(code, 0, "{doc:#}");
    }
    let (doc, code) = env.json(&[
        "plan",
        "use",
        "local/two",
        "app",
        "--automation-profile",
        "trusted",
    ]);
    assert_eq!(code, 3, "{doc:#}");
    (
        env,
        repo,
        doc["data"]["plan_id"].as_str().unwrap().to_string(),
    )
}

/// The private git directories of a plan's sandboxes.
fn git_dirs(env: &Env, plan: &str) -> Vec<PathBuf> {
    let dir = env.data_dir.join("sandboxes").join(plan);
    std::fs::read_dir(&dir)
        .unwrap()
        .flatten()
        .map(|e| e.path().join("git"))
        .filter(|p| p.join("HEAD").exists())
        .collect()
}

#[test]
fn a_stale_index_lock_in_a_sandbox_does_not_block_the_plan() {
    let (env, _repo, plan) = setup();
    let dirs = git_dirs(&env, &plan);
    assert_eq!(dirs.len(), 1);
    let lock = dirs[0].join("index.lock");
    std::fs::write(&lock, b"").unwrap();
    // Rolling back to the first checkpoint rewrites the index.
    let (doc, code) = env.json(&["plan", "rollback", "--yes", &plan, "1"]);
    assert_eq!(code, 0, "{doc:#}");
    assert!(!lock.exists());
    let (doc, code) = env.json(&["plan", "execute", &plan]);
    assert_eq!(
        code, 3,
        "runs the rolled-back step again and waits at the gate: {doc:#}"
    );
}
