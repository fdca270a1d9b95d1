//! The registries acceptance scenario, driven through `--format json` as a script would: a
//! real git repository made in a temp dir is registered, linked to a project, an action with a
//! script and arguments is created and made available, invariants are added at every scope,
//! the action is used, and the plan's effective invariants are shown. Each step is a row of
//! data: arguments, expected exit code, and JSON pointers with their expected values.

use serde_json::{Value, json};

use crate::support::{Env, LICENSE_ACTION, git_repo};

/// One step: arguments, expected exit code, `(JSON pointer, expected value)` checks.
struct Step {
    args: Vec<String>,
    exit: i32,
    checks: Vec<(&'static str, Value)>,
}

fn step(args: &[&str], exit: i32, checks: Vec<(&'static str, Value)>) -> Step {
    Step {
        args: args.iter().map(|s| s.to_string()).collect(),
        exit,
        checks,
    }
}

fn run(env: &Env, s: &Step) -> Value {
    let args: Vec<&str> = s.args.iter().map(String::as_str).collect();
    let (doc, code) = env.json(&args);
    assert_eq!(code, s.exit, "agents {}: {doc:#}", s.args.join(" "));
    for (pointer, expected) in &s.checks {
        assert_eq!(
            doc.pointer(pointer),
            Some(expected),
            "agents {}: {pointer} in {doc:#}",
            s.args.join(" ")
        );
    }
    doc
}

#[test]
fn the_registries_acceptance_session() {
    let env = Env::new();
    let repo = git_repo(env.root(), "api");
    let repo_path = repo.to_str().unwrap();
    let action_file = env.root().join("add-license.yaml");
    std::fs::write(&action_file, LICENSE_ACTION).unwrap();
    let action_path = action_file.to_str().unwrap();
    // The action spawned by add-license must exist before add-license becomes available.
    crate::support::register_update_docs(&env);

    // Register the checkout: the repository, its remote, both branches and the work tree are
    // discovered; commits and files are counted.
    let add = run(
        &env,
        &step(
            &[
                "resource",
                "add",
                "git-checkout",
                "local/api-repo",
                "--path",
                repo_path,
            ],
            0,
            vec![
                ("/status", json!("ok")),
                ("/data/resource/name", json!("local/api-repo")),
                ("/data/resource/type", json!("git-checkout")),
                ("/data/resource/properties/branch", json!("main")),
                ("/data/children/0/name", json!("local/api-repo:repo")),
                ("/data/children/0/properties/commits", json!(2)),
                ("/data/children/1/name", json!("local/api-repo:repo:origin")),
                (
                    "/data/children/1/properties/url",
                    json!("https://example.invalid/demo.git"),
                ),
                ("/data/children/2/name", json!("local/api-repo:repo:dev")),
                ("/data/children/3/name", json!("local/api-repo:repo:main")),
                ("/data/children/3/properties/checked_out", json!(true)),
                ("/data/children/4/name", json!("local/api-repo:worktree")),
                ("/data/children/4/properties/files", json!(3)),
                ("/data/children/4/properties/directories", json!(2)),
            ],
        ),
    );
    assert_eq!(add["data"]["children"].as_array().unwrap().len(), 5);

    // The tree shows the discovered children and the counted commits and files.
    let tree = run(
        &env,
        &step(
            &["resource", "tree", "local/api-repo"],
            0,
            vec![
                ("/data/tree/name", json!("local/api-repo")),
                ("/data/tree/children/0/name", json!("local/api-repo:repo")),
                ("/data/tree/children/0/counted/git-commit", json!(2)),
                (
                    "/data/tree/children/0/children/0/type_name",
                    json!("git-remote"),
                ),
                (
                    "/data/tree/children/1/name",
                    json!("local/api-repo:worktree"),
                ),
                ("/data/tree/children/1/counted/fs-file", json!(3)),
            ],
        ),
    );
    assert!(
        tree["data"]["tree"]["children"][0]["children"]
            .as_array()
            .unwrap()
            .iter()
            .all(|c| c["auto"] == json!(true))
    );

    run(
        &env,
        &step(
            &[
                "project",
                "create",
                "-d",
                "Backend API",
                "--resource",
                "local/api-repo",
                "--invariant",
                "Keep the public API stable",
                "local/api-service",
            ],
            0,
            vec![
                ("/data/project/name", json!("local/api-service")),
                ("/data/resources/0/resource", json!("local/api-repo")),
                ("/data/resources/0/read_only", json!(false)),
                ("/data/invariants/0/scope", json!("project")),
            ],
        ),
    );
    run(
        &env,
        &step(
            &["action", "create", "--config", action_path],
            0,
            vec![
                ("/data/action/name", json!("local/add-license")),
                ("/data/action/state", json!("draft")),
                ("/data/action/arguments/0/name", json!("license")),
                ("/data/action/arguments/1/default", json!(2026)),
                (
                    "/data/action/script/2/spawn/action",
                    json!("local/update-docs"),
                ),
                (
                    "/data/invariants/0/text",
                    json!("Never rewrite git history"),
                ),
            ],
        ),
    );
    run(
        &env,
        &step(
            &["action", "available", "local/add-license"],
            0,
            vec![
                ("/data/previous_state", json!("draft")),
                ("/data/action/state", json!("available")),
                ("/data/checks/0/ok", json!(true)),
                ("/data/checks/1/ok", json!(true)),
            ],
        ),
    );
    run(
        &env,
        &step(
            &["invariant", "add", "--global", "All tests must pass"],
            0,
            vec![("/data/invariants/0/scope", json!("global"))],
        ),
    );
    run(
        &env,
        &step(
            &[
                "invariant",
                "add",
                "--project",
                "local/api-service",
                "--key",
                "style",
                "Use tabs",
            ],
            0,
            vec![
                ("/data/invariants/0/scope", json!("project")),
                ("/data/invariants/0/key", json!("style")),
            ],
        ),
    );
    run(
        &env,
        &step(
            &[
                "invariant",
                "add",
                "--action",
                "local/add-license",
                "Keep the license header short",
            ],
            0,
            vec![("/data/invariants/0/scope", json!("action"))],
        ),
    );

    let plan = run(
        &env,
        &step(
            &[
                "plan",
                "use",
                "local/add-license",
                "local/api-service",
                "--arg",
                "license=MIT",
                "--invariant",
                "Only touch LICENSE",
                "--automation-profile",
                "supervised",
            ],
            3,
            vec![
                // supervised: Strategize runs at once, then the plan waits at the execute gate.
                ("/status", json!("needs_approval")),
                ("/error/code", json!("NEEDS_APPROVAL")),
                ("/data/approval/kind", json!("phase_gate")),
                ("/data/phase", json!("strategize")),
                ("/data/state", json!("complete")),
                ("/data/attempt", json!(1)),
                ("/data/ran", json!(true)),
                ("/data/automation_profile", json!("supervised")),
                ("/data/profile_source", json!("plan")),
                ("/data/projects/0/project_name", json!("local/api-service")),
                (
                    "/data/arguments",
                    json!({"license": "MIT", "year": 2026, "check": "test -f LICENSE"}),
                ),
                (
                    "/data/definition_of_done",
                    json!("A LICENSE file with the MIT text exists and `test -f LICENSE` passes"),
                ),
                (
                    "/data/strategy_actor",
                    json!("builtin/checklist-strategist"),
                ),
                ("/data/invariants/0/text", json!("Only touch LICENSE")),
                ("/data/invariants/0/scope", json!("plan")),
                ("/data/invariants/1/scope", json!("action")),
                ("/data/invariants/2/scope", json!("action")),
            ],
        ),
    );
    let plan_id = plan["data"]["plan_id"].as_str().unwrap().to_string();

    let eff = run(
        &env,
        &step(
            &["invariant", "list", "--plan", &plan_id, "--effective"],
            0,
            vec![
                ("/data/plan_id", json!(plan_id)),
                ("/data/semantic_check", json!("not_checked")),
                ("/data/invariant_actor", Value::Null),
            ],
        ),
    );
    let texts: Vec<(&str, &str)> = eff["data"]["effective"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| (i["scope"].as_str().unwrap(), i["text"].as_str().unwrap()))
        .collect();
    assert_eq!(
        texts,
        [
            ("global", "All tests must pass"),
            ("project", "Keep the public API stable"),
            ("project", "Use tabs"),
            ("action", "Never rewrite git history"),
            ("action", "Keep the license header short"),
            ("plan", "Only touch LICENSE"),
        ]
    );
    assert!(
        eff["messages"]
            .as_array()
            .unwrap()
            .iter()
            .any(|m| m["text"] == "semantic conflicts not checked (no invariant actor)")
    );

    run(
        &env,
        &step(
            &["plan", "status", &plan_id[..10]],
            0,
            vec![
                ("/data/plan_id", json!(plan_id)),
                ("/data/script/0/run", json!("echo MIT 2026 > LICENSE")),
            ],
        ),
    );
    run(
        &env,
        &step(
            &["plan", "list", "--project", "local/api-service"],
            0,
            vec![("/data/plans/0/plan_id", json!(plan_id))],
        ),
    );

    // Removal is refused while the project links the checkout, and works after unlinking.
    let refused = run(
        &env,
        &step(
            &["resource", "remove", "--yes", "local/api-repo"],
            1,
            vec![("/error/code", json!("CONFLICT"))],
        ),
    );
    assert!(
        refused["error"]["message"]
            .as_str()
            .unwrap()
            .contains("local/api-service")
    );
    run(
        &env,
        &step(
            &[
                "project",
                "unlink-resource",
                "--yes",
                "local/api-service",
                "local/api-repo",
            ],
            0,
            vec![("/data/remaining_resources", json!(0))],
        ),
    );
    run(
        &env,
        &step(
            &["resource", "remove", "--yes", "local/api-repo"],
            0,
            vec![("/data/children_removed", json!(5))],
        ),
    );
    run(
        &env,
        &step(
            &["resource", "list", "--all"],
            0,
            vec![("/data/resources", json!([]))],
        ),
    );
}

#[test]
fn effective_invariants_resolve_key_conflicts_by_the_narrowest_scope() {
    let env = Env::new();
    let action = env.root().join("a.yaml");
    std::fs::write(&action, "name: x\ndefinition-of-done: done\nstrategy-actor: builtin/checklist-strategist\nexecution-actor: builtin/script-executor\n").unwrap();
    let ok = |args: &[&str]| {
        let (doc, code) = env.json(args);
        assert_eq!(code, expected_exit(args), "{args:?}: {doc:#}");
        doc
    };
    ok(&["project", "create", "p"]);
    ok(&[
        "action",
        "create",
        "--available",
        "--config",
        action.to_str().unwrap(),
    ]);
    ok(&[
        "invariant",
        "add",
        "--global",
        "--key",
        "db",
        "Use the shared DB pool",
    ]);
    ok(&[
        "invariant",
        "add",
        "-p",
        "p",
        "--key",
        "db",
        "Open one connection per request",
    ]);
    ok(&["invariant", "add", "--global", "Tests must pass."]);
    let plan = ok(&["plan", "use", "x", "p", "--invariant", "tests must pass"]);
    let id = plan["data"]["plan_id"].as_str().unwrap();
    let eff = ok(&["invariant", "list", "--plan", id, "--effective"]);
    let d = &eff["data"];
    assert_eq!(d["effective"].as_array().unwrap().len(), 2, "{d:#}");
    assert_eq!(
        d["conflicts"][0]["dropped"]["text"],
        "Use the shared DB pool"
    );
    assert_eq!(d["conflicts"][0]["kept"]["scope"], "project");
    assert_eq!(d["duplicates"][0]["dropped"]["scope"], "global");
    assert_eq!(d["duplicates"][0]["kept"]["scope"], "plan");
    assert!(
        eff["messages"][1]["text"]
            .as_str()
            .unwrap()
            .contains("1 conflict resolved")
    );
}

#[test]
fn project_delete_with_a_queued_plan_is_refused_without_force() {
    let env = Env::new();
    let action = env.root().join("a.yaml");
    std::fs::write(&action, "name: x\ndefinition-of-done: done\nstrategy-actor: builtin/checklist-strategist\nexecution-actor: builtin/script-executor\n").unwrap();
    env.json(&[
        "project",
        "create",
        "--invariant",
        "kept in the backup",
        "p",
    ]);
    env.json(&[
        "action",
        "create",
        "--available",
        "--config",
        action.to_str().unwrap(),
    ]);
    let (plan, code) = env.json(&["plan", "use", "x", "p"]);
    assert_eq!(code, 3, "waits at the strategize gate: {plan:#}");
    let before = crate::support::database_state(&env);
    let (doc, code) = env.json(&["project", "delete", "--yes", "p"]);
    assert_eq!(code, 1);
    assert_eq!(doc["error"]["code"], "CONFLICT");
    assert!(
        doc["error"]["detail"]
            .as_str()
            .unwrap()
            .contains("strategize/queued"),
        "{doc:#}"
    );
    assert!(
        doc["error"]["suggestions"][1]
            .as_str()
            .unwrap()
            .contains("--force")
    );
    assert_eq!(
        crate::support::database_state(&env),
        before,
        "nothing was written"
    );

    let (doc, code) = env.json(&["project", "delete", "--force", "--yes", "p"]);
    assert_eq!(code, 0, "{doc:#}");
    assert_eq!(
        doc["data"]["plans_cancelled"][0]["was"],
        "strategize/queued"
    );
    let backup = std::fs::read_to_string(doc["data"]["backup"].as_str().unwrap()).unwrap();
    assert!(backup.contains("kept in the backup"));
    let (status, _) = env.json(&["plan", "status", plan["data"]["plan_id"].as_str().unwrap()]);
    assert_eq!(status["data"]["state"], "cancelled");
    assert_eq!(
        env.json(&["project", "list"]).0["data"]["projects"],
        json!([])
    );
}

#[test]
fn a_non_reusable_action_is_archived_by_its_first_use() {
    let env = Env::new();
    let action = env.root().join("a.yaml");
    std::fs::write(&action, "name: once\nreusable: false\ndefinition-of-done: done\nstrategy-actor: builtin/checklist-strategist\nexecution-actor: openai/gpt-4o\n").unwrap();
    env.json(&["project", "create", "p"]);
    env.json(&[
        "action",
        "create",
        "--available",
        "--config",
        action.to_str().unwrap(),
    ]);
    let (doc, code) = env.json(&["plan", "use", "once", "p"]);
    assert_eq!(code, 3, "waits at the strategize gate: {doc:#}");
    assert_eq!(doc["data"]["action_archived"], true);
    assert_eq!(
        env.json(&["action", "show", "once"]).0["data"]["action"]["state"],
        "archived"
    );
    let (doc, code) = env.json(&["plan", "use", "once", "p"]);
    assert_eq!(code, 1);
    assert!(
        doc["error"]["message"]
            .as_str()
            .unwrap()
            .contains("archived")
    );
}

#[test]
fn the_profile_resolves_plan_then_action_then_project_then_global_and_is_frozen() {
    let env = Env::new();
    let action = env.root().join("a.yaml");
    std::fs::write(&action, "name: x\ndefinition-of-done: done\nstrategy-actor: builtin/checklist-strategist\nexecution-actor: builtin/script-executor\n").unwrap();
    env.json(&["project", "create", "p"]);
    env.json(&[
        "action",
        "create",
        "--available",
        "--config",
        action.to_str().unwrap(),
    ]);
    let profile = |args: &[&str]| {
        let mut all = vec!["plan", "use", "x", "p"];
        all.extend_from_slice(args);
        let (doc, code) = env.json(&all);
        // manual plans wait for `plan execute` (exit 0); the other profiles run Strategize and
        // stop at a gate (exit 3), or run Execute, where this script-less action's step errors
        // (exit 1): the plan exists either way.
        assert!(matches!(code, 0 | 1 | 3), "{doc:#}");
        (
            doc["data"]["automation_profile"]
                .as_str()
                .unwrap()
                .to_string(),
            doc["data"]["profile_source"].as_str().unwrap().to_string(),
            doc,
        )
    };
    assert_eq!(profile(&[]).0, "manual");
    assert_eq!(profile(&[]).1, "default");
    env.json(&["config", "set", "automation-profile", "trusted"]);
    assert_eq!(profile(&[]).1, "global");
    let (doc, code) = env.json(&[
        "config",
        "set",
        "automation-profile",
        "--project",
        "p",
        "supervised",
    ]);
    assert_eq!(code, 0, "{doc:#}");
    let (name, source, frozen) = profile(&[]);
    assert_eq!((name.as_str(), source.as_str()), ("supervised", "project"));
    assert_eq!(frozen["data"]["automation_level"], "manual");
    assert_eq!(profile(&["--automation-profile", "full-auto"]).1, "plan");
    // Later changes do not touch existing plans.
    env.json(&[
        "config",
        "set",
        "automation-profile",
        "--project",
        "p",
        "inherit",
    ]);
    let id = frozen["data"]["plan_id"].as_str().unwrap();
    assert_eq!(
        env.json(&["plan", "status", id]).0["data"]["automation_profile"],
        "supervised"
    );
    let (doc, code) = env.json(&[
        "config",
        "set",
        "automation-profile",
        "--project",
        "p",
        "local/missing",
    ]);
    assert_eq!(code, 1);
    assert_eq!(doc["error"]["code"], "NOT_FOUND");
}

#[test]
fn every_registry_command_renders_in_all_six_formats() {
    let env = Env::new();
    let repo = git_repo(env.root(), "api");
    let action = env.root().join("a.yaml");
    std::fs::write(&action, LICENSE_ACTION).unwrap();
    crate::support::register_update_docs(&env);
    assert_eq!(
        env.json(&[
            "resource",
            "add",
            "git-checkout",
            "r",
            "--path",
            repo.to_str().unwrap()
        ])
        .1,
        0
    );
    assert_eq!(
        env.json(&["project", "create", "--resource", "r", "p"]).1,
        0
    );
    assert_eq!(
        env.json(&[
            "action",
            "create",
            "--available",
            "--config",
            action.to_str().unwrap()
        ])
        .1,
        0
    );
    let (plan, _) = env.json(&["plan", "use", "add-license", "p", "--arg", "license=MIT"]);
    let id = plan["data"]["plan_id"].as_str().unwrap().to_string();
    let commands: Vec<Vec<&str>> = vec![
        vec!["resource", "list"],
        vec!["resource", "show", "r"],
        vec!["resource", "tree", "r", "--depth", "1"],
        vec!["resource", "type", "list"],
        vec!["resource", "type", "show", "fs-directory"],
        vec!["project", "list"],
        vec!["project", "show", "p"],
        vec!["project", "validation", "list", "p"],
        vec!["action", "list"],
        vec!["action", "show", "add-license"],
        vec!["actor", "list"],
        vec!["actor", "show", "builtin/script-executor"],
        vec!["actor", "show", "openai/gpt-4o"],
        vec!["invariant", "list"],
        vec!["invariant", "list", "--plan", &id, "--effective"],
        vec!["automation-profile", "list"],
        vec!["automation-profile", "show", "autonomous"],
        vec!["plan", "list"],
        vec!["plan", "status", &id],
    ];
    for args in &commands {
        for format in ["rich", "color", "table", "plain", "json", "yaml"] {
            let mut all = vec!["--format", format];
            all.extend_from_slice(args);
            let out = env.run(&all);
            let text = String::from_utf8(out.stdout).unwrap();
            assert_eq!(out.status.code(), Some(0), "{all:?}:\n{text}");
            match format {
                "json" => {
                    let doc: Value = serde_json::from_str(&text).unwrap();
                    assert_eq!(doc["status"], "ok");
                }
                "yaml" => {
                    let doc: serde_json::Value = serde_yaml::from_str(&text).unwrap();
                    assert_eq!(doc["status"], "ok");
                }
                "plain" => assert!(
                    text.is_ascii() || text.contains(env.root().to_str().unwrap()),
                    "{all:?}:\n{text}"
                ),
                _ => assert!(text.lines().count() > 2, "{all:?}:\n{text}"),
            }
        }
    }
}

/// The exit code of a command that works: 0, but 3 for `plan use` under the default
/// (`manual`) profile, whose new plan waits at its strategize gate.
pub fn expected_exit(args: &[&str]) -> i32 {
    let profile = args
        .iter()
        .position(|a| *a == "--automation-profile")
        .and_then(|i| args.get(i + 1));
    if args.starts_with(&["plan", "use"]) && profile.is_none_or(|p| *p == "manual") {
        3
    } else {
        0
    }
}

/// Runs with `--format json` and expects the exit [`expected_exit`] gives: the answer.
pub fn ok_or_gated(env: &Env, args: &[&str]) -> Value {
    let (doc, code) = env.json(args);
    assert_eq!(code, expected_exit(args), "{args:?}: {doc:#}");
    doc
}
