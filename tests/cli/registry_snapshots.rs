//! Snapshots (plain and json) of the registry commands' output, on a real git repository.
//! Ids, times, commit hashes and temp paths are masked.

use crate::cli::snapshots::{output_text, settings};
use crate::support::{Env, LICENSE_ACTION, git_repo};

fn check(name: &str, env: &Env, args: &[&str]) {
    let out = env.run(args);
    let text = output_text(&out);
    let mut s = settings(env, args);
    s.add_filter(r"inv_[0-9A-HJKMNP-TV-Z]{26}", "inv_[ULID]");
    s.add_filter(r"apr_[0-9A-HJKMNP-TV-Z]{26}", "apr_[ULID]");
    s.add_filter(r"\b[0-9A-HJKMNP-TV-Z]{26}\b", "[ULID]");
    s.add_filter(r"\b01[0-9A-HJKMNP-TV-Z]{6}\b", "[SHORT]");
    s.add_filter(r"\b[0-9a-f]{40}\b", "[SHA]");
    s.add_filter(
        r#""config_hash": "[0-9a-f]{16}""#,
        r#""config_hash": "[HASH]""#,
    );
    s.add_filter(
        r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?Z",
        "[TIMESTAMP]",
    );
    s.add_filter(r"\d{4}-\d{2}-\d{2} \d{2}:\d{2}", "[TIME]");
    s.add_filter(r"\d{8}T\d{6}Z", "[STAMP]");
    s.bind(|| insta::assert_snapshot!(name, text));
}

fn both(name: &str, env: &Env, args: &[&str]) {
    let mut plain = vec!["--format", "plain"];
    plain.extend_from_slice(args);
    check(&format!("{name}_plain"), env, &plain);
    let mut json = vec!["--format", "json"];
    json.extend_from_slice(args);
    check(&format!("{name}_json"), env, &json);
}

#[test]
fn registry_commands() {
    let env = Env::new();
    let repo = git_repo(env.root(), "api");
    let action = env.root().join("add-license.yaml");
    std::fs::write(&action, LICENSE_ACTION).unwrap();
    crate::support::register_update_docs(&env);
    check(
        "resource_add_git_checkout_plain",
        &env,
        &[
            "--format",
            "plain",
            "resource",
            "add",
            "git-checkout",
            "local/api-repo",
            "--path",
            repo.to_str().unwrap(),
        ],
    );
    both(
        "resource_show",
        &env,
        &["resource", "show", "local/api-repo"],
    );
    both(
        "resource_tree",
        &env,
        &["resource", "tree", "local/api-repo"],
    );
    check(
        "resource_type_show_plain",
        &env,
        &[
            "--format",
            "plain",
            "resource",
            "type",
            "show",
            "git-checkout",
        ],
    );
    check(
        "resource_type_list_plain",
        &env,
        &["--format", "plain", "resource", "type", "list"],
    );
    check(
        "project_create_plain",
        &env,
        &[
            "--format",
            "plain",
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
    );
    check(
        "action_create_plain",
        &env,
        &[
            "--format",
            "plain",
            "action",
            "create",
            "--config",
            action.to_str().unwrap(),
        ],
    );
    both(
        "action_available",
        &env,
        &["action", "available", "local/add-license"],
    );
    env.run(&["invariant", "add", "--global", "All tests must pass"]);
    check(
        "plan_use_plain",
        &env,
        &[
            "--format",
            "plain",
            "plan",
            "use",
            "local/add-license",
            "local/api-service",
            "--arg",
            "license=MIT",
            "--invariant",
            "Only touch LICENSE",
        ],
    );
    let (doc, _) = env.json(&["plan", "list"]);
    let id = doc["data"]["plans"][0]["plan_id"]
        .as_str()
        .unwrap()
        .to_string();
    both(
        "invariant_effective",
        &env,
        &["invariant", "list", "--plan", &id, "--effective"],
    );
    both("plan_status", &env, &["plan", "status", &id]);
    both(
        "project_show",
        &env,
        &["project", "show", "local/api-service"],
    );
    both(
        "automation_profile_list",
        &env,
        &["automation-profile", "list"],
    );
    both("actor_list", &env, &["actor", "list"]);
    both("action_list", &env, &["action", "list"]);
}

#[test]
fn registry_errors() {
    let env = Env::new();
    env.run(&["info"]);
    let bad = env.root().join("bad.yaml");
    std::fs::write(
        &bad,
        LICENSE_ACTION.replace("    run: \"{{ check | raw }}\"", "    rn: \"{{ check }}\""),
    )
    .unwrap();
    both(
        "action_create_unknown_field",
        &env,
        &["action", "create", "--config", bad.to_str().unwrap()],
    );
    both(
        "automation_profile_remove_builtin",
        &env,
        &["automation-profile", "remove", "--yes", "trusted"],
    );
}
