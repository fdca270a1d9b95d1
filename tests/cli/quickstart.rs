//! `agents quickstart`: the main job on a real git repository with no network and no key
//!. Each run goes through the real binary on a temp data directory.

use std::process::Command;

use serde_json::Value;

use crate::support::{Env, git, git_out, git_repo};

fn changed_paths(doc: &Value) -> Vec<String> {
    let mut paths: Vec<String> = doc["data"]["diff"]["resources"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|r| r["files"].as_array().unwrap().iter())
        .map(|f| f["path"].as_str().unwrap().to_string())
        .collect();
    paths.sort();
    paths
}

/// Whether rustfmt works with the environment the tests pass on (rustup needs RUSTUP_HOME
/// once HOME points elsewhere); the format example skips Rust files otherwise.
fn rustfmt_usable(env: &Env) -> bool {
    Command::new("rustfmt")
        .arg("--version")
        .env("HOME", env.root())
        .output()
        .is_ok_and(|o| o.status.success())
}

#[test]
fn headless_quickstart_runs_twice_reusing_its_items_and_apply_makes_one_commit() {
    let env = Env::new();
    let (first, code) = env.json(&["quickstart", "--headless"]);
    assert_eq!(code, 3, "waits for the apply approval: {first:#}");
    assert_eq!(first["status"], "needs_approval");
    assert_eq!(first["error"]["code"], "NEEDS_APPROVAL");
    let plan1 = first["data"]["plan_id"].as_str().unwrap().to_string();
    let next = first["error"]["suggestions"][0].as_str().unwrap();
    assert!(
        next.ends_with(&format!("plan apply --yes {plan1}")),
        "{next}"
    );
    assert_eq!(first["data"]["sample_project"], true);
    assert_eq!(first["data"]["action"], "local/quickstart-format");
    assert_eq!(
        (&first["data"]["phase"], &first["data"]["state"]),
        (&Value::from("execute"), &Value::from("complete"))
    );
    let created: Vec<&str> = first["data"]["created"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    assert_eq!(
        created.len(),
        7,
        "sample, resource, project, 4 actions: {created:?}"
    );
    assert!(first["data"]["reused"].as_array().unwrap().is_empty());
    // The decision tree: the root prompt, the action's invariant, one decision per step.
    let decisions = first["data"]["decisions"].as_array().unwrap();
    assert_eq!(decisions[0]["decision_type"], "prompt_definition");
    assert_eq!(
        decisions
            .iter()
            .filter(|d| d["decision_type"] == "implementation_choice")
            .count(),
        4
    );
    let mut expected = vec!["src/summary.py", "tests/run.sh"];
    if rustfmt_usable(&env) {
        expected.insert(0, "src/lib.rs");
    }
    assert_eq!(changed_paths(&first), expected);

    // The sample project is a real repository, untouched before Apply.
    let repo = env.data_dir.join("quickstart/sample-project");
    assert_eq!(
        first["data"]["repository"],
        repo.canonicalize().unwrap().display().to_string()
    );
    assert_eq!(git_out(&repo, &["rev-list", "--count", "HEAD"]).trim(), "1");
    assert_eq!(git_out(&repo, &["status", "--porcelain"]), "");
    let untidy = std::fs::read_to_string(repo.join("src/summary.py")).unwrap();
    assert!(untidy.lines().next().unwrap().ends_with("   "));

    // Again: everything is reused, a new plan runs.
    let (second, code) = env.json(&["quickstart", "--headless"]);
    assert_eq!(code, 3, "{second:#}");
    let plan2 = second["data"]["plan_id"].as_str().unwrap().to_string();
    assert_ne!(plan1, plan2);
    assert!(
        second["data"]["created"].as_array().unwrap().is_empty(),
        "{second:#}"
    );
    assert_eq!(second["data"]["reused"].as_array().unwrap().len(), 7);
    assert_eq!(changed_paths(&second), expected);
    let (resources, _) = env.json(&["resource", "list"]);
    let checkouts = resources["data"]["resources"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["type"] == "git-checkout" || r["type_name"] == "git-checkout")
        .count();
    assert_eq!(checkouts, 1, "{resources:#}");
    let (actions, _) = env.json(&["action", "list", "quickstart"]);
    assert_eq!(actions["data"]["actions"].as_array().unwrap().len(), 4);

    // Applying the second plan makes exactly one commit with the tidied files.
    let (applied, code) = env.json(&["plan", "apply", "--yes", &plan2]);
    assert_eq!(code, 0, "{applied:#}");
    assert_eq!(git_out(&repo, &["rev-list", "--count", "HEAD"]).trim(), "2");
    assert_eq!(git_out(&repo, &["status", "--porcelain"]), "");
    let mut touched: Vec<String> = git_out(&repo, &["diff", "--name-only", "HEAD~1", "HEAD"])
        .lines()
        .map(str::to_string)
        .collect();
    touched.sort();
    assert_eq!(touched, expected);
    let tidy = std::fs::read_to_string(repo.join("src/summary.py")).unwrap();
    assert!(tidy.lines().all(|l| l == l.trim_end()), "{tidy}");
    assert!(
        std::fs::read_to_string(repo.join("tests/run.sh"))
            .unwrap()
            .ends_with("echo ok\n")
    );
    let message = git_out(&repo, &["log", "-1", "--format=%B"]);
    assert!(message.contains(&format!("Plan-Id: {plan2}")), "{message}");

    // The first plan made the same change, which the branch now has: applying it writes
    // nothing and makes no empty commit (a regression test).
    let (again, code) = env.json(&["plan", "apply", "--yes", &plan1]);
    assert_eq!(code, 0, "{again:#}");
    assert_eq!(git_out(&repo, &["rev-list", "--count", "HEAD"]).trim(), "2");
    assert_eq!(git_out(&repo, &["status", "--porcelain"]), "");
    let (status, _) = env.json(&["plan", "status", &plan1]);
    assert_eq!(status["data"]["phase"], "applied", "{status:#}");
}

#[test]
fn quickstart_on_a_checkout_registers_it_once_and_reuses_an_existing_registration() {
    let env = Env::new();
    let repo = git_repo(env.root(), "My Repo");
    std::fs::write(repo.join("src/lib.rs"), "pub fn f() {}   \n").unwrap();
    git(&repo, &["commit", "-qam", "untidy"]);
    let path = repo.to_str().unwrap();
    let (doc, code) = env.json(&[
        "quickstart",
        "--headless",
        "--example",
        "license-header",
        path,
    ]);
    assert_eq!(code, 3, "{doc:#}");
    assert_eq!(doc["data"]["resource"], "local/quickstart-my-repo");
    assert_eq!(doc["data"]["project"], "local/quickstart-my-repo");
    assert_eq!(doc["data"]["sample_project"], false);
    assert_eq!(changed_paths(&doc), ["src/lib.rs"]);
    let diff = doc["data"]["diff"].to_string();
    assert!(
        diff.contains("SPDX-License-Identifier: Apache-2.0"),
        "{diff}"
    );

    // A checkout registered by hand under another name is reused, not registered twice.
    let other = git_repo(env.root(), "other");
    let (doc, code) = env.json(&[
        "resource",
        "add",
        "git-checkout",
        "local/mine",
        "--path",
        other.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{doc:#}");
    let (doc, code) = env.json(&["quickstart", "--headless", other.to_str().unwrap()]);
    assert_eq!(code, 3, "{doc:#}");
    assert_eq!(doc["data"]["resource"], "local/mine");
    assert_eq!(doc["data"]["project"], "local/quickstart-other");
    // The first checkout again: reused.
    let (doc, code) = env.json(&["quickstart", "--headless", path]);
    assert_eq!(code, 3, "{doc:#}");
    assert!(
        doc["data"]["created"].as_array().unwrap().is_empty(),
        "{doc:#}"
    );
}

#[test]
fn quickstart_refuses_a_path_that_is_not_the_top_of_a_checkout_and_saves_nothing() {
    let env = Env::new();
    let plain = env.root().join("plain");
    std::fs::create_dir_all(&plain).unwrap();
    let (doc, code) = env.json(&["quickstart", "--headless", plain.to_str().unwrap()]);
    assert_eq!(code, 1, "{doc:#}");
    assert_eq!(doc["error"]["code"], "INVALID_INPUT");
    assert!(
        doc["error"]["message"]
            .as_str()
            .unwrap()
            .contains("is not a git checkout")
    );

    let repo = git_repo(env.root(), "repo");
    let (doc, code) = env.json(&[
        "quickstart",
        "--headless",
        repo.join("src").to_str().unwrap(),
    ]);
    assert_eq!(code, 1, "{doc:#}");
    assert!(
        doc["error"]["message"]
            .as_str()
            .unwrap()
            .contains("not the top directory")
    );
    let hint = doc["error"]["suggestions"][0].as_str().unwrap();
    assert!(
        hint.ends_with(&repo.canonicalize().unwrap().display().to_string()),
        "{hint}"
    );

    let (doc, code) = env.json(&[
        "quickstart",
        "--headless",
        env.root().join("missing").to_str().unwrap(),
    ]);
    assert_eq!(code, 1, "{doc:#}");
    let (resources, _) = env.json(&["resource", "list"]);
    assert!(
        resources["data"]["resources"]
            .as_array()
            .unwrap()
            .is_empty(),
        "{resources:#}"
    );
}

#[test]
fn quickstart_output_in_plain_and_json() {
    let env = Env::new();
    for (name, format) in [("quickstart_plain", "plain"), ("quickstart_json", "json")] {
        let args = [
            "--format",
            format,
            "quickstart",
            "--headless",
            "--example",
            "license-header",
        ];
        let out = env.run(&args);
        let text = super::snapshots::output_text(&out);
        let mut settings = super::snapshots::settings(&env, &args);
        settings.add_filter(r"[0-9A-HJKMNP-TV-Z]{26}", "[ULID]");
        settings.add_filter(r"\b[0-9a-f]{40}\b", "[SHA]");
        settings.add_filter(r#""(created_at|updated_at)": "[^"]*""#, r#""$1": "[TIME]""#);
        settings.bind(|| insta::assert_snapshot!(name, text));
    }
}

#[test]
fn in_a_terminal_the_quickstart_opens_the_tui_at_the_approval_queue_and_approving_applies() {
    use crate::support::Tmux;
    let env = Env::new();
    let command = env
        .terminal_command("quickstart --example license-header; echo quickstart-exit=$?; sleep 30");
    let tmux = Tmux::new("quickstart");
    tmux.open(140, 45, &command);
    tmux.wait_for("the apply gate in the approval queue", |sc| {
        sc.contains("1 pending")
    });
    tmux.keys(&["a"]);
    std::thread::sleep(std::time::Duration::from_millis(300));
    tmux.keys(&["y"]);
    // The plan reads applied as soon as Apply commits; the `plan apply` this TUI started
    // ends a moment later (under load, seconds), and `q` before that asks first.
    tmux.wait_for("the plan applied and its command ended", |sc| {
        sc.contains("applied") && sc.contains("0 pending") && !sc.contains("● plan apply")
    });
    tmux.keys(&["q"]);
    tmux.wait_for("the quickstart's exit", |sc| {
        sc.contains("quickstart-exit=0")
    });
    let repo = env.data_dir.join("quickstart/sample-project");
    assert_eq!(git_out(&repo, &["rev-list", "--count", "HEAD"]).trim(), "2");
    assert!(
        std::fs::read_to_string(repo.join("src/lib.rs"))
            .unwrap()
            .starts_with("// SPDX-License-Identifier: Apache-2.0")
    );
}
