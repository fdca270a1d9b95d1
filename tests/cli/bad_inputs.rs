//! Bad input is refused with a clear message naming the file, field or argument, a non-zero
//! exit code, and a database file that is byte-identical before and after.

use std::fs;

use serde_json::Value;

use crate::support::{Env, LICENSE_ACTION, db_file, git, git_repo};

/// Runs `args` (json), expects a failure whose message or detail contains every needle, and
/// checks that the database file did not change.
fn rejected(env: &Env, args: &[&str], needles: &[&str]) -> Value {
    let db = db_file(env);
    let before = fs::read(&db).expect("the database exists before the bad command");
    let (doc, code) = env.json(args);
    assert_ne!(code, 0, "{args:?} succeeded: {doc:#}");
    assert_eq!(doc["status"], "error", "{doc:#}");
    let text = format!(
        "{} | {}",
        doc["error"]["message"].as_str().unwrap_or(""),
        doc["error"]["detail"].as_str().unwrap_or("")
    );
    for n in needles {
        assert!(text.contains(n), "{args:?}: `{n}` not in: {text}");
    }
    assert_eq!(
        fs::read(&db).unwrap(),
        before,
        "{args:?} changed the database"
    );
    doc
}

/// A fresh environment with its database created.
fn env() -> Env {
    let env = Env::new();
    assert_eq!(env.json(&["info"]).1, 0);
    env
}

fn action_file(env: &Env, text: &str) -> String {
    let path = env.root().join("action.yaml");
    fs::write(&path, text).unwrap();
    path.to_str().unwrap().to_string()
}

#[test]
fn a_yaml_syntax_error_names_the_file_line_and_column() {
    let env = env();
    let file = action_file(
        &env,
        "name: x\ndefinition-of-done: [unclosed\nstrategy-actor: a\n",
    );
    let doc = rejected(
        &env,
        &["action", "create", "--config", &file],
        &["action.yaml:"],
    );
    let msg = doc["error"]["message"].as_str().unwrap();
    let re = regex::Regex::new(r"action\.yaml:\d+:\d+: ").unwrap();
    assert!(re.is_match(msg), "line and column: {msg}");
}

#[test]
fn an_unknown_field_is_named_with_its_path() {
    let env = env();
    let file = action_file(
        &env,
        &LICENSE_ACTION.replace("    run: \"{{ check | raw }}\"", "    rn: \"{{ check }}\""),
    );
    let doc = rejected(
        &env,
        &["action", "create", "--config", &file],
        &["unknown field `rn`", "script[1]"],
    );
    assert!(
        doc["error"]["message"]
            .as_str()
            .unwrap()
            .contains("action.yaml:")
    );
}

#[test]
fn a_missing_required_field_is_named() {
    let env = env();
    let file = action_file(
        &env,
        &LICENSE_ACTION.replace("definition-of-done:", "# definition-of-done:"),
    );
    let doc = rejected(
        &env,
        &["action", "create", "--config", &file],
        &["definition-of-done", "action.yaml"],
    );
    assert!(
        doc["error"]["message"]
            .as_str()
            .unwrap()
            .contains("--definition-of-done"),
        "suggests the flag"
    );
}

#[test]
fn a_wrongly_typed_value_is_named() {
    let env = env();
    let file = action_file(
        &env,
        &LICENSE_ACTION.replace("reusable: true", "reusable: sometimes"),
    );
    rejected(
        &env,
        &["action", "create", "--config", &file],
        &["reusable", "action.yaml:6:11:", "expected true or false"],
    );
}

#[test]
fn an_undefined_placeholder_is_named_with_its_field() {
    let env = env();
    let file = action_file(
        &env,
        &LICENSE_ACTION.replace("{{ check }}` passes", "{{ chek }}` passes"),
    );
    rejected(
        &env,
        &["action", "create", "--config", &file],
        &["{{ chek }}", "definition-of-done", "license, year, check"],
    );
}

#[test]
fn a_path_that_does_not_exist_is_refused() {
    let env = env();
    let missing = env.root().join("no-such-dir");
    let doc = rejected(
        &env,
        &[
            "resource",
            "add",
            "git-checkout",
            "local/x",
            "--path",
            missing.to_str().unwrap(),
        ],
        &["--path", "does not exist"],
    );
    let hint = doc["error"]["suggestions"][0].as_str().unwrap_or_default();
    assert!(hint.contains("typo"), "{doc:#}");
}

#[test]
fn a_directory_that_is_not_a_git_work_tree_is_refused() {
    let env = env();
    let plain = env.root().join("plain");
    fs::create_dir_all(&plain).unwrap();
    rejected(
        &env,
        &[
            "resource",
            "add",
            "git-checkout",
            "local/x",
            "--path",
            plain.to_str().unwrap(),
        ],
        &["--path", "not a git work tree"],
    );
    let repo = git_repo(env.root(), "repo");
    rejected(
        &env,
        &[
            "resource",
            "add",
            "git-checkout",
            "local/x",
            "--path",
            repo.join("src").to_str().unwrap(),
        ],
        &["not its top"],
    );
}

#[test]
fn a_branch_that_is_not_checked_out_is_refused() {
    let env = env();
    let repo = git_repo(env.root(), "repo");
    let doc = rejected(
        &env,
        &[
            "resource",
            "add",
            "git-checkout",
            "local/x",
            "--path",
            repo.to_str().unwrap(),
            "--branch",
            "dev",
        ],
        &["--branch dev", "`main` checked out"],
    );
    assert!(
        doc["error"]["suggestions"][0]
            .as_str()
            .unwrap()
            .contains("omit --branch")
    );
    git(&repo, &["checkout", "-q", "--detach"]);
    rejected(
        &env,
        &[
            "resource",
            "add",
            "git-checkout",
            "local/x",
            "--path",
            repo.to_str().unwrap(),
        ],
        &["detached"],
    );
}

#[test]
fn a_duplicate_name_without_update_is_refused_for_resources_actors_and_profiles() {
    let env = env();
    let repo = git_repo(env.root(), "repo");
    let path = repo.to_str().unwrap();
    assert_eq!(
        env.json(&["resource", "add", "git-checkout", "local/x", "--path", path])
            .1,
        0
    );
    let doc = rejected(
        &env,
        &["resource", "add", "git-checkout", "local/x", "--path", path],
        &["local/x already exists"],
    );
    assert!(
        doc["error"]["suggestions"][0]
            .as_str()
            .unwrap()
            .contains("resource add --update git-checkout local/x"),
        "{doc:#}"
    );
    let (doc, code) = env.json(&[
        "resource",
        "add",
        "--update",
        "git-checkout",
        "local/x",
        "--path",
        path,
    ]);
    assert_eq!(code, 0, "{doc:#}");
    assert_eq!(doc["data"]["replaced"], true);

    let actor = env.root().join("actor.yaml");
    fs::write(&actor, "name: local/reviewer\nmodel: openai/gpt-4o\n").unwrap();
    let actor = actor.to_str().unwrap();
    assert_eq!(env.json(&["actor", "add", "--config", actor]).1, 0);
    let doc = rejected(
        &env,
        &["actor", "add", "--config", actor],
        &["already registered", "local/reviewer"],
    );
    assert!(
        doc["error"]["suggestions"][0]
            .as_str()
            .unwrap()
            .contains("--update")
    );

    let profile = env.root().join("p.yaml");
    fs::write(
        &profile,
        "name: local/p\nflags: {auto_strategize: false, auto_execute: false, auto_apply: false, auto_decisions_strategize: false, auto_decisions_execute: false, auto_validation_fix: false, auto_strategy_revision: false, auto_child_plans: false, auto_retry_transient: false, auto_checkpoint_restore: false, require_sandbox: true, require_checkpoints: true, allow_unsafe_tools: false}\n",
    )
    .unwrap();
    let profile = profile.to_str().unwrap();
    assert_eq!(
        env.json(&["automation-profile", "add", "--config", profile])
            .1,
        0
    );
    rejected(
        &env,
        &["automation-profile", "add", "--config", profile],
        &["local/p already exists"],
    );
}

#[test]
fn a_name_in_a_reserved_namespace_is_refused() {
    let env = env();
    let actor = env.root().join("actor.yaml");
    fs::write(&actor, "name: openai/my-gpt\nmodel: openai/gpt-4o\n").unwrap();
    rejected(
        &env,
        &["actor", "add", "--config", actor.to_str().unwrap()],
        &["openai/my-gpt", "reserved"],
    );
    rejected(
        &env,
        &[
            "actor",
            "add",
            "--config",
            actor.to_str().unwrap(),
            "builtin/mine",
        ],
        &["builtin/mine", "reserved"],
    );
    rejected(&env, &["project", "create", "anthropic/p"], &["reserved"]);
}

#[test]
fn a_link_child_that_would_make_a_cycle_is_refused() {
    let env = env();
    for d in ["a", "b"] {
        let dir = env.root().join(d);
        fs::create_dir_all(&dir).unwrap();
        assert_eq!(
            env.json(&[
                "resource",
                "add",
                "fs-directory",
                d,
                "--path",
                dir.to_str().unwrap()
            ])
            .1,
            0
        );
    }
    assert_eq!(
        env.json(&["resource", "link-child", "--parent", "a", "--child", "b"])
            .1,
        0
    );
    rejected(
        &env,
        &["resource", "link-child", "--parent", "b", "--child", "a"],
        &["cycle", "local/a", "local/b"],
    );
}

#[test]
fn removing_a_builtin_profile_is_refused() {
    let env = env();
    let doc = rejected(
        &env,
        &["automation-profile", "remove", "--yes", "trusted"],
        &["trusted", "built-in"],
    );
    assert_eq!(doc["error"]["code"], "CONFLICT");
    // Without --yes and without a terminal it is refused the same way, before any prompt.
    rejected(
        &env,
        &["automation-profile", "remove", "manual"],
        &["built-in"],
    );
}

fn with_draft_action(env: &Env) {
    let file = action_file(env, LICENSE_ACTION);
    assert_eq!(env.json(&["action", "create", "--config", &file]).1, 0);
    assert_eq!(env.json(&["project", "create", "p"]).1, 0);
}

#[test]
fn plan_use_of_a_draft_action_is_refused_with_the_available_hint() {
    let env = env();
    with_draft_action(&env);
    let doc = rejected(
        &env,
        &[
            "plan",
            "use",
            "local/add-license",
            "p",
            "--arg",
            "license=MIT",
        ],
        &["local/add-license is draft"],
    );
    let hint = doc["error"]["suggestions"][0].as_str().unwrap();
    assert!(
        hint.starts_with("agents --data-dir ")
            && hint.ends_with(" action available local/add-license"),
        "the hint repeats the data directory: {hint}"
    );
}

#[test]
fn plan_use_without_a_required_arg_is_refused() {
    let env = env();
    with_draft_action(&env);
    crate::support::register_update_docs(&env);
    assert_eq!(env.json(&["action", "available", "local/add-license"]).1, 0);
    let plan_use = |args: &[&str], needles: &[&str]| {
        let mut all = vec!["plan", "use", "local/add-license", "p"];
        all.extend_from_slice(args);
        rejected(&env, &all, needles);
    };
    plan_use(
        &[],
        &["missing required argument `license`", "--arg license=VALUE"],
    );
    plan_use(
        &["--arg", "license=MIT", "--arg", "year=soon"],
        &["--arg `year`", "whole number"],
    );
    plan_use(
        &["--arg", "licence=MIT"],
        &["licence", "license, year, check"],
    );
    plan_use(
        &["--arg", "license= "],
        &[
            "required argument `license`",
            "is blank",
            "--arg license=VALUE",
        ],
    );
}

#[test]
fn a_config_file_that_is_not_a_regular_file_or_is_too_large_is_refused_before_reading() {
    let env = env();
    // A device is refused without being read (reading `/dev/zero` would never end).
    let doc = rejected(
        &env,
        &["action", "create", "--config", "/dev/null"],
        &["/dev/null", "not a regular file"],
    );
    assert_eq!(doc["error"]["code"], "INVALID_INPUT", "{doc:#}");

    let big = env.root().join("big.yaml");
    let mut text = String::from("name: local/big\n");
    text.push_str(&format!(
        "description: \"{}\"\n",
        "x".repeat(2 * 1024 * 1024)
    ));
    fs::write(&big, text).unwrap();
    let big = big.to_str().unwrap();
    let doc = rejected(
        &env,
        &["action", "create", "--config", big],
        &[big, "more than"],
    );
    assert_eq!(doc["error"]["code"], "INVALID_INPUT", "{doc:#}");
}
