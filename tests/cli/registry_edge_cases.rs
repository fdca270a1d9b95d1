//! The registries' edge cases, found by using them from a fresh data directory: refusals,
//! id prefixes, did-you-mean and hints, rule and YAML errors, and how items show; each test
//! named after what broke.

use serde_json::Value;

use super::registries::ok_or_gated;
use crate::support::{Env, fails};

/// The hints of an error envelope, joined with newlines.
fn hints(doc: &Value) -> String {
    doc["error"]["suggestions"]
        .as_array()
        .map(|h| {
            h.iter()
                .filter_map(Value::as_str)
                .collect::<Vec<_>>()
                .join("\n")
        })
        .unwrap_or_default()
}

const CAREFUL: &str = "name: local/careful\nflags:\n  auto_strategize: true\n  auto_execute: false\n  auto_apply: false\n  auto_decisions_strategize: true\n  auto_decisions_execute: false\n  auto_validation_fix: false\n  auto_strategy_revision: false\n  auto_child_plans: false\n  auto_retry_transient: true\n  auto_checkpoint_restore: false\n  require_sandbox: true\n  require_checkpoints: true\n  allow_unsafe_tools: false\n";

const MINIMAL_ACTION: &str = "definition-of-done: done\nstrategy-actor: builtin/checklist-strategist\nexecution-actor: builtin/script-executor\n";

/// Writes `text` to `<root>/<file>` and returns its path.
fn file(env: &Env, name: &str, text: &str) -> String {
    let path = env.root().join(name);
    std::fs::write(&path, text).unwrap();
    path.to_str().unwrap().to_string()
}

fn add_careful(env: &Env) {
    let path = file(env, "careful.yaml", CAREFUL);
    ok_or_gated(env, &["automation-profile", "add", "--config", &path]);
}

#[test]
fn removing_a_profile_still_used_globally_by_a_project_or_an_action_is_refused() {
    let env = Env::new();
    add_careful(&env);
    ok_or_gated(
        &env,
        &["config", "set", "automation-profile", "local/careful"],
    );
    ok_or_gated(&env, &["project", "create", "p"]);
    ok_or_gated(
        &env,
        &[
            "config",
            "set",
            "automation-profile",
            "--project",
            "p",
            "local/careful",
        ],
    );
    let action = file(
        &env,
        "a.yaml",
        &format!("name: a\nautomation-profile: careful\n{MINIMAL_ACTION}"),
    );
    ok_or_gated(&env, &["action", "create", "--config", &action]);

    let doc = fails(
        &env,
        &["automation-profile", "remove", "--yes", "careful"],
        "CONFLICT",
    );
    let message = doc["error"]["message"].as_str().unwrap();
    for who in ["global default", "project local/p", "action local/a"] {
        assert!(message.contains(who), "{who} in {message}");
    }
    let hints = hints(&doc);
    assert!(hints.contains("config unset automation-profile"), "{hints}");
    assert!(
        hints.contains("config set automation-profile --project local/p inherit"),
        "{hints}"
    );
    assert!(hints.contains("action archive local/a"), "{hints}");
    // Nothing was removed.
    ok_or_gated(&env, &["automation-profile", "show", "careful"]);

    // Once nobody uses it, it goes.
    ok_or_gated(&env, &["config", "unset", "automation-profile"]);
    ok_or_gated(
        &env,
        &[
            "config",
            "set",
            "automation-profile",
            "--project",
            "p",
            "inherit",
        ],
    );
    ok_or_gated(&env, &["action", "archive", "a"]);
    ok_or_gated(&env, &["automation-profile", "remove", "--yes", "careful"]);
}

#[test]
fn diagnostics_report_a_global_profile_that_is_not_registered() {
    let env = Env::new();
    add_careful(&env);
    ok_or_gated(
        &env,
        &["config", "set", "automation-profile", "local/careful"],
    );
    // The database row disappears behind the CLI's back (an older version allowed this).
    let db = crate::support::db_file(&env);
    let conn = rusqlite::Connection::open(db).unwrap();
    conn.execute("DELETE FROM automation_profiles", []).unwrap();
    drop(conn);
    let (doc, code) = env.json(&["diagnostics"]);
    assert_eq!(code, 1, "{doc:#}");
    let check = doc["data"]["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == "Automation profile")
        .expect("an automation profile check");
    assert_eq!(check["status"], "error");
    assert!(
        check["fix"]
            .as_str()
            .unwrap()
            .contains("config unset automation-profile"),
        "{check:#}"
    );
}

#[test]
fn config_unset_removes_a_key_and_a_whole_provider() {
    let env = Env::new();
    ok_or_gated(&env, &["config", "set", "format", "json"]);
    ok_or_gated(&env, &["config", "set", "providers.corp.kind", "openai"]);
    ok_or_gated(
        &env,
        &[
            "config",
            "set",
            "providers.corp.base_url",
            "http://127.0.0.1:9/v1",
        ],
    );
    let doc = ok_or_gated(&env, &["config", "unset", "format"]);
    assert_eq!(doc["data"]["previous"], "json");
    assert_eq!(
        ok_or_gated(&env, &["config", "get", "format"])["data"]["source"],
        "default"
    );
    // Unsetting again changes nothing and says so.
    let doc = ok_or_gated(&env, &["config", "unset", "format"]);
    assert_eq!(doc["data"]["previous"], Value::Null);
    ok_or_gated(&env, &["config", "unset", "providers.corp.base_url"]);
    let text = std::fs::read_to_string(&env.config_path).unwrap();
    assert!(
        text.contains("[providers.corp]") && !text.contains("base_url"),
        "{text}"
    );
    ok_or_gated(&env, &["config", "unset", "providers.corp"]);
    let text = std::fs::read_to_string(&env.config_path).unwrap();
    assert!(!text.contains("corp"), "{text}");
    // Unknown keys are named, as for `config set`.
    fails(&env, &["config", "unset", "formt"], "NOT_FOUND");
}

#[test]
fn config_set_global_profile_inherit_points_to_config_unset() {
    let env = Env::new();
    let doc = fails(
        &env,
        &["config", "set", "automation-profile", "inherit"],
        "INVALID_INPUT",
    );
    assert!(
        hints(&doc).contains("config unset automation-profile"),
        "{doc:#}"
    );
}

const REVIEWER: &str =
    "name: corp/rev\nmodel: anthropic/claude-sonnet-4-5\nsystem-prompt: You review.\n";

#[test]
fn configuring_a_provider_named_like_a_custom_namespace_is_refused() {
    let env = Env::new();
    let actor = file(&env, "rev.yaml", REVIEWER);
    ok_or_gated(&env, &["actor", "add", "--config", &actor]);
    ok_or_gated(&env, &["project", "create", "acme/p"]);
    for (key, who) in [
        ("providers.corp.kind", "actor corp/rev"),
        ("providers.acme.kind", "project acme/p"),
    ] {
        let doc = fails(&env, &["config", "set", key, "openai"], "CONFLICT");
        let message = doc["error"]["message"].as_str().unwrap();
        assert!(message.contains(who), "{who} in {message}");
        assert!(hints(&doc).contains("-llm."), "{doc:#}");
    }
    assert!(
        !env.config_path.exists()
            || !std::fs::read_to_string(&env.config_path)
                .unwrap()
                .contains("corp"),
        "nothing written"
    );
    // Unrelated providers are fine.
    ok_or_gated(&env, &["config", "set", "providers.ollama.kind", "openai"]);
}

#[test]
fn a_custom_actor_stays_custom_and_removable_when_a_provider_takes_its_namespace() {
    let env = Env::new();
    let actor = file(&env, "rev.yaml", REVIEWER);
    ok_or_gated(&env, &["actor", "add", "--config", &actor]);
    // The provider appears by hand-editing config.toml, past the `config set` check.
    std::fs::create_dir_all(env.config_path.parent().unwrap()).unwrap();
    std::fs::write(
        &env.config_path,
        "[providers.corp]\nkind = \"openai\"\nbase_url = \"http://127.0.0.1:9/v1\"\n",
    )
    .unwrap();
    let shown = ok_or_gated(&env, &["actor", "show", "corp/rev"]);
    assert_eq!(shown["data"]["actor"]["name"], "corp/rev", "{shown:#}");
    // A provider model is not an actor; the message does not call it built-in.
    let doc = fails(&env, &["actor", "remove", "corp/other"], "CONFLICT");
    let message = doc["error"]["message"].as_str().unwrap();
    assert!(!message.contains("built-in"), "{message}");
    assert!(message.contains("not a registered actor"), "{message}");
    ok_or_gated(&env, &["actor", "remove", "corp/rev"]);
}

/// `(parent, child)` names of `resource show NAME`'s children.
fn child_names(env: &Env, name: &str) -> Vec<String> {
    ok_or_gated(env, &["resource", "show", name])["data"]["children"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap().to_string())
        .collect()
}

#[test]
fn resource_add_update_keeps_manual_links_to_discovered_children() {
    let env = Env::new();
    let repo = crate::support::git_repo(env.root(), "api");
    let repo = repo.to_str().unwrap();
    let d1 = env.root().join("d1");
    std::fs::create_dir(&d1).unwrap();
    ok_or_gated(
        &env,
        &["resource", "add", "git-checkout", "api", "--path", repo],
    );
    ok_or_gated(
        &env,
        &[
            "resource",
            "add",
            "fs-directory",
            "d1",
            "--path",
            d1.to_str().unwrap(),
        ],
    );
    ok_or_gated(
        &env,
        &[
            "resource",
            "link-child",
            "-p",
            "local/api:worktree",
            "-c",
            "d1",
        ],
    );
    let before = ok_or_gated(&env, &["resource", "show", "local/api:worktree"]);
    let doc = ok_or_gated(
        &env,
        &[
            "resource",
            "add",
            "--update",
            "git-checkout",
            "api",
            "--path",
            repo,
        ],
    );
    assert_eq!(doc["data"]["dropped_links"], serde_json::json!([]));
    assert!(
        child_names(&env, "local/api:worktree").contains(&"local/d1".to_string()),
        "manual link kept"
    );
    // The child kept its identity.
    let after = ok_or_gated(&env, &["resource", "show", "local/api:worktree"]);
    assert!(before["data"]["resource"]["resource_id"].is_string());
    assert_eq!(
        before["data"]["resource"]["resource_id"],
        after["data"]["resource"]["resource_id"]
    );
}

#[test]
fn resource_add_update_reports_manual_links_to_children_that_are_gone() {
    let env = Env::new();
    let repo = crate::support::git_repo(env.root(), "api");
    let d1 = env.root().join("d1");
    std::fs::create_dir(&d1).unwrap();
    let repo_s = repo.to_str().unwrap();
    ok_or_gated(
        &env,
        &["resource", "add", "git-checkout", "api", "--path", repo_s],
    );
    ok_or_gated(
        &env,
        &[
            "resource",
            "add",
            "fs-directory",
            "d1",
            "--path",
            d1.to_str().unwrap(),
        ],
    );
    ok_or_gated(
        &env,
        &[
            "resource",
            "link-child",
            "-p",
            "local/api:worktree",
            "-c",
            "d1",
        ],
    );
    // The work tree is now a registered directory, so the update links that one instead and
    // the discovered local/api:worktree (with its manual link) is gone.
    ok_or_gated(
        &env,
        &["resource", "add", "fs-directory", "wt", "--path", repo_s],
    );
    let doc = ok_or_gated(
        &env,
        &[
            "resource",
            "add",
            "--update",
            "git-checkout",
            "api",
            "--path",
            repo_s,
        ],
    );
    assert_eq!(
        doc["data"]["dropped_links"],
        serde_json::json!([{"parent": "local/api:worktree", "child": "local/d1"}])
    );
    assert!(
        doc["messages"]
            .to_string()
            .contains("local/api:worktree -> local/d1"),
        "{doc:#}"
    );
}

#[test]
fn the_same_checkout_or_directory_cannot_be_registered_twice() {
    let env = Env::new();
    let repo = crate::support::git_repo(env.root(), "api");
    let repo = repo.to_str().unwrap();
    ok_or_gated(
        &env,
        &["resource", "add", "git-checkout", "api", "--path", repo],
    );
    let doc = fails(
        &env,
        &["resource", "add", "git-checkout", "api2", "--path", repo],
        "CONFLICT",
    );
    assert!(
        doc["error"]["message"]
            .as_str()
            .unwrap()
            .contains("local/api"),
        "{doc:#}"
    );
    assert!(
        hints(&doc).contains("resource add --update git-checkout local/api"),
        "{doc:#}"
    );
    fails(&env, &["resource", "show", "api2"], "NOT_FOUND");
    // Updating the original under its own name still works.
    ok_or_gated(
        &env,
        &[
            "resource",
            "add",
            "--update",
            "git-checkout",
            "api",
            "--path",
            repo,
        ],
    );
    let d = env.root().join("d");
    std::fs::create_dir(&d).unwrap();
    let d = d.to_str().unwrap();
    ok_or_gated(&env, &["resource", "add", "fs-directory", "d", "--path", d]);
    fails(
        &env,
        &["resource", "add", "fs-directory", "d2", "--path", d],
        "CONFLICT",
    );
}

/// Gives two rows of `table` ids that share their first 10 characters (as rows created in the
/// same millisecond-range do), so lists and prefixes can be checked deterministically.
fn collide_ids(env: &Env, table: &str, column: &str, prefix: &str) -> [String; 2] {
    let conn = rusqlite::Connection::open(crate::support::db_file(env)).unwrap();
    let ids: Vec<String> = conn
        .prepare(&format!("SELECT {column} FROM {table} ORDER BY {column}"))
        .unwrap()
        .query_map([], |r| r.get(0))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    assert_eq!(ids.len(), 2, "{ids:?}");
    let new = [
        format!("{prefix}01M8MK9C00AAAAAAAAAAAAAAAA"),
        format!("{prefix}01M8MK9C00BBBBBBBBBBBBBBBB"),
    ];
    for (old, new) in ids.iter().zip(&new) {
        conn.execute(
            &format!("UPDATE {table} SET {column} = ?2 WHERE {column} = ?1"),
            [old, new],
        )
        .unwrap();
    }
    new
}

#[test]
fn list_ids_of_items_created_in_the_same_second_are_unique_and_resolve() {
    let env = Env::new();
    ok_or_gated(&env, &["project", "create", "p1"]);
    ok_or_gated(&env, &["project", "create", "p2"]);
    let [a, b] = collide_ids(&env, "projects", "project_id", "");
    let plain = crate::support::stdout(&env.run(&["--format", "plain", "project", "list"]));
    assert!(
        plain.contains("01M8MK9C00A ") && plain.contains("01M8MK9C00B "),
        "{plain}"
    );
    assert_eq!(
        ok_or_gated(&env, &["project", "show", "01M8MK9C00A"])["data"]["project"]["project_id"],
        a.as_str()
    );
    assert_eq!(
        ok_or_gated(&env, &["project", "show", "01m8mk9c00b"])["data"]["project"]["project_id"],
        b.as_str()
    );
}

#[test]
fn an_ambiguous_id_prefix_is_ambiguous_for_every_registry() {
    let env = Env::new();
    ok_or_gated(&env, &["project", "create", "p1"]);
    ok_or_gated(&env, &["project", "create", "p2"]);
    collide_ids(&env, "projects", "project_id", "");
    let doc = fails(&env, &["project", "show", "01M8MK9C"], "AMBIGUOUS");
    let message = doc["error"]["message"].as_str().unwrap();
    assert!(message.contains("01M8MK9C00AAAAAAAAAAAAAAAA"), "{message}");

    for name in ["a1", "a2"] {
        let path = file(
            &env,
            &format!("{name}.yaml"),
            &format!("name: {name}\n{MINIMAL_ACTION}"),
        );
        ok_or_gated(&env, &["action", "create", "--config", &path]);
    }
    collide_ids(&env, "actions", "action_id", "");
    fails(&env, &["action", "show", "01M8MK9C"], "AMBIGUOUS");
    ok_or_gated(&env, &["action", "show", "01M8MK9C00A"]);

    ok_or_gated(&env, &["invariant", "add", "--global", "one"]);
    ok_or_gated(&env, &["invariant", "add", "--global", "two"]);
    collide_ids(&env, "invariants", "invariant_id", "inv_");
    fails(
        &env,
        &["invariant", "remove", "--yes", "inv_01M8MK9C"],
        "AMBIGUOUS",
    );
}

#[test]
fn a_resource_is_found_by_its_full_id_and_by_a_unique_prefix() {
    let env = Env::new();
    let d = env.root().join("d");
    std::fs::create_dir(&d).unwrap();
    let added = ok_or_gated(
        &env,
        &[
            "resource",
            "add",
            "fs-directory",
            "d",
            "--path",
            d.to_str().unwrap(),
        ],
    );
    let id = added["data"]["resource"]["resource_id"].as_str().unwrap();
    for given in [id, &id[..12]] {
        assert_eq!(
            ok_or_gated(&env, &["resource", "show", given])["data"]["resource"]["name"],
            "local/d"
        );
    }
}

#[test]
fn a_misspelt_name_gets_a_did_you_mean_for_every_registry() {
    let env = Env::new();
    ok_or_gated(&env, &["project", "create", "api-service"]);
    let d = env.root().join("d");
    std::fs::create_dir(&d).unwrap();
    ok_or_gated(
        &env,
        &[
            "resource",
            "add",
            "fs-directory",
            "api",
            "--path",
            d.to_str().unwrap(),
        ],
    );
    let action = file(
        &env,
        "a.yaml",
        &format!("name: add-license\n{MINIMAL_ACTION}"),
    );
    ok_or_gated(
        &env,
        &["action", "create", "--available", "--config", &action],
    );
    let actor = file(
        &env,
        "r.yaml",
        "name: reviewer\nmodel: anthropic/claude-sonnet-4-5\n",
    );
    ok_or_gated(&env, &["actor", "add", "--config", &actor]);
    for (args, code, wanted) in [
        (
            vec!["project", "show", "local/api-servic"],
            "NOT_FOUND",
            "local/api-service",
        ),
        (
            vec!["resource", "show", "local/apii"],
            "NOT_FOUND",
            "local/api",
        ),
        (
            vec!["action", "show", "local/add-licence"],
            "NOT_FOUND",
            "local/add-license",
        ),
        (
            vec!["plan", "use", "local/add-licence", "api-service"],
            "NOT_FOUND",
            "local/add-license",
        ),
        (
            vec!["automation-profile", "show", "supervized"],
            "NOT_FOUND",
            "supervised",
        ),
    ] {
        let doc = fails(&env, &args, code);
        assert!(
            hints(&doc).contains(&format!("did you mean `{wanted}`?")),
            "{args:?}: {doc:#}"
        );
    }
    let (doc, code) = env.json(&["actor", "show", "local/reviewr"]);
    assert_ne!(code, 0);
    assert!(
        doc["error"]["message"]
            .as_str()
            .unwrap()
            .contains("did you mean `local/reviewer`?"),
        "{doc:#}"
    );
}

#[test]
fn action_available_refuses_unknown_spawn_targets_tools_and_undeclared_spawn_args() {
    let env = Env::new();
    let action = file(
        &env,
        "a.yaml",
        &format!(
            "name: a\n{MINIMAL_ACTION}script:\n  - name: t\n    tool: read_fil\n  - name: s\n    spawn: {{action: local/does-not-exist}}\n"
        ),
    );
    ok_or_gated(&env, &["action", "create", "--config", &action]);
    let doc = fails(&env, &["action", "available", "a"], "INVALID_INPUT");
    let detail = doc["error"]["detail"].as_str().unwrap();
    assert!(detail.contains("unknown tool `read_fil`"), "{detail}");
    assert!(detail.contains("did you mean `read_file`?"), "{detail}");
    assert!(
        detail.contains("no action `local/does-not-exist`"),
        "{detail}"
    );

    crate::support::register_update_docs(&env);
    let action = file(
        &env,
        "b.yaml",
        &format!(
            "name: b\n{MINIMAL_ACTION}script:\n  - name: s\n    spawn: {{action: local/update-docs, args: {{topik: x}}}}\n"
        ),
    );
    let doc = fails(
        &env,
        &["action", "create", "--available", "--config", &action],
        "INVALID_INPUT",
    );
    let detail = doc["error"]["detail"].as_str().unwrap();
    assert!(
        detail.contains("local/update-docs declares no argument `topik` (declared: topic)"),
        "{detail}"
    );
    assert!(detail.contains("requires argument `topic`"), "{detail}");

    // Known tools, an existing target with its declared arguments, and self-spawn pass.
    let action = file(
        &env,
        "c.yaml",
        &format!(
            "name: c\n{MINIMAL_ACTION}script:\n  - name: t\n    tool: read_file\n    args: {{path: README}}\n  - name: s\n    spawn: {{action: local/update-docs, args: {{topic: x}}}}\n  - name: again\n    spawn: {{action: c}}\n"
        ),
    );
    ok_or_gated(
        &env,
        &["action", "create", "--available", "--config", &action],
    );
}

#[test]
fn a_template_that_can_never_render_is_refused_at_create_with_a_clean_message() {
    let env = Env::new();
    for (name, text, needle) in [
        ("attr", "{{ check.attr }}", "`check.attr`"),
        ("filter", "{{ check | nosuchfilter }}", "nosuchfilter"),
    ] {
        let action = file(
            &env,
            &format!("{name}.yaml"),
            &format!(
                "name: {name}\ndefinition-of-done: \"run {text}\"\nstrategy-actor: builtin/checklist-strategist\nexecution-actor: builtin/script-executor\narguments:\n  - name: check\n    type: string\n    default: make test\n"
            ),
        );
        let doc = fails(
            &env,
            &["action", "create", "--available", "--config", &action],
            "INVALID_INPUT",
        );
        let message = doc["error"]["message"].as_str().unwrap();
        assert!(message.contains("definition-of-done"), "{message}");
        assert!(message.contains(needle), "{message}");
        assert!(
            !message.contains("undefined value") && !message.contains("<string>"),
            "{message}"
        );
    }
}

#[test]
fn hints_are_runnable_commands_with_real_names_and_the_environment_flags() {
    let env = Env::new();
    let d = env.root().join("d");
    std::fs::create_dir(&d).unwrap();
    ok_or_gated(
        &env,
        &[
            "resource",
            "add",
            "fs-directory",
            "api",
            "--path",
            d.to_str().unwrap(),
        ],
    );
    ok_or_gated(&env, &["project", "create", "--resource", "api", "p"]);
    let data_dir = env.data_dir.to_str().unwrap().to_string();
    let every_hint_is_a_command = |doc: &Value| {
        for h in doc["error"]["suggestions"].as_array().unwrap() {
            let h = h.as_str().unwrap();
            assert!(h.starts_with("agents "), "{h} in {doc:#}");
            assert!(h.contains(&data_dir), "{h} repeats --data-dir");
            assert!(!h.contains("PROJECT") && !h.contains("NAME"), "{h}");
        }
    };
    let doc = fails(&env, &["resource", "remove", "--yes", "api"], "CONFLICT");
    every_hint_is_a_command(&doc);
    assert!(
        hints(&doc).contains("project unlink-resource local/p local/api"),
        "{doc:#}"
    );

    let action = file(&env, "a.yaml", &format!("name: a\n{MINIMAL_ACTION}"));
    ok_or_gated(
        &env,
        &["action", "create", "--available", "--config", &action],
    );
    ok_or_gated(&env, &["plan", "use", "a", "p"]);
    let doc = fails(&env, &["project", "delete", "--yes", "p"], "CONFLICT");
    every_hint_is_a_command(&doc);
    assert!(
        hints(&doc).contains("project delete --force --yes local/p"),
        "{doc:#}"
    );

    let bad = file(
        &env,
        "b.yaml",
        "name: b\ndefinition-of-done: d\nstrategy-actor: local/nobody\nexecution-actor: builtin/script-executor\n",
    );
    ok_or_gated(&env, &["action", "create", "--config", &bad]);
    let doc = fails(&env, &["action", "available", "b"], "INVALID_INPUT");
    every_hint_is_a_command(&doc);
    assert!(hints(&doc).contains("action available local/b"), "{doc:#}");
}

#[test]
fn the_duplicate_action_hint_suggests_a_new_name_that_works_after_archiving() {
    let env = Env::new();
    let action = file(&env, "a.yaml", &format!("name: a\n{MINIMAL_ACTION}"));
    ok_or_gated(&env, &["action", "create", "--config", &action]);
    ok_or_gated(&env, &["action", "archive", "a"]);
    let doc = fails(&env, &["action", "create", "--config", &action], "CONFLICT");
    let hints = hints(&doc);
    assert!(!hints.contains("archive"), "{hints}");
    // Run each create suggestion as given (they already carry --data-dir and --config-path):
    // a new name, and --update of the existing action.
    let mut made = Vec::new();
    for suggested in hints
        .lines()
        .filter(|h| h.contains("action create"))
        .collect::<Vec<_>>()
        .into_iter()
        .rev()
    {
        let words = shell_words::split(suggested).unwrap();
        let (doc, code) = env.json(&words[5..].iter().map(String::as_str).collect::<Vec<_>>());
        assert_eq!(code, 0, "{suggested}: {doc:#}");
        made.push((
            doc["data"]["action"]["name"].as_str().unwrap().to_string(),
            doc["data"]["action"]["version"].as_u64().unwrap(),
        ));
    }
    made.sort();
    assert_eq!(
        made,
        [("local/a".to_string(), 2), ("local/a-v2".to_string(), 1)]
    );
}

#[test]
fn reusable_and_no_reusable_together_are_refused_and_overrides_list_name_and_invariants() {
    let env = Env::new();
    let action = file(&env, "a.yaml", &format!("name: a\n{MINIMAL_ACTION}"));
    let out = env.run(&[
        "action",
        "create",
        "--reusable",
        "--no-reusable",
        "--config",
        &action,
    ]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("cannot be used with"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let doc = ok_or_gated(
        &env,
        &[
            "action",
            "create",
            "--invariant",
            "Keep it small",
            "--definition-of-done",
            "other",
            "--config",
            &action,
            "renamed",
        ],
    );
    let fields: Vec<&str> = doc["data"]["overrides"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o["field"].as_str().unwrap())
        .collect();
    assert_eq!(
        fields,
        ["name", "invariants", "definition-of-done"],
        "{doc:#}"
    );
}

#[test]
fn action_rule_errors_report_the_line_of_the_field_and_flag_values_name_the_flag() {
    let env = Env::new();
    let path = file(
        &env,
        "e3.yaml",
        &format!(
            "name: e3\n{MINIMAL_ACTION}arguments:\n  - name: ok\n    type: string\n  - name: 9bad\n    type: string\n"
        ),
    );
    let doc = fails(
        &env,
        &["action", "create", "--config", &path],
        "INVALID_INPUT",
    );
    let message = doc["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("e3.yaml:8: field `arguments[1].name`"),
        "{message}"
    );
    let path = file(&env, "ok.yaml", &format!("name: ok\n{MINIMAL_ACTION}"));
    let doc = fails(
        &env,
        &[
            "action",
            "create",
            "--definition-of-done",
            "{{ nope }}",
            "--config",
            &path,
        ],
        "INVALID_INPUT",
    );
    let message = doc["error"]["message"].as_str().unwrap();
    assert!(message.starts_with("--definition-of-done:"), "{message}");
    assert!(!message.contains("ok.yaml"), "{message}");
}

#[test]
fn yaml_syntax_errors_are_plain_and_name_no_internal_types() {
    let env = Env::new();
    for (text, wanted, unwanted) in [
        (
            "name: a\ndefinition-of-done: d\n  strategy-actor: x\n",
            "YAML syntax error",
            "field `?`",
        ),
        (
            "- name: a\n",
            "expected a mapping of action fields",
            "ActionFile",
        ),
        (
            "name: a\ndescription: [unclosed\n",
            "YAML syntax error",
            "expected a string",
        ),
    ] {
        let path = file(&env, "s.yaml", text);
        let doc = fails(
            &env,
            &["action", "create", "--config", &path],
            "INVALID_INPUT",
        );
        let message = doc["error"]["message"].as_str().unwrap();
        assert!(message.contains(wanted), "{text:?}: {message}");
        assert!(!message.contains(unwanted), "{text:?}: {message}");
    }
    let path = file(
        &env,
        "actor.yaml",
        "name: r\nmodel: anthropic/claude-sonnet-4-5\nlimits: {max-turns: -1}\n",
    );
    let doc = fails(&env, &["actor", "add", "--config", &path], "INVALID_INPUT");
    let message = doc["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("expected a whole number >= 0"),
        "{message}"
    );
}

#[test]
fn plan_use_shows_the_automatic_phases_instead_of_a_contradicting_level() {
    let env = Env::new();
    ok_or_gated(&env, &["project", "create", "p"]);
    let action = file(&env, "a.yaml", &format!("name: a\n{MINIMAL_ACTION}"));
    ok_or_gated(
        &env,
        &["action", "create", "--available", "--config", &action],
    );
    let plain = crate::support::stdout(&env.run(&[
        "--format",
        "plain",
        "plan",
        "use",
        "--automation-profile",
        "supervised",
        "a",
        "p",
    ]));
    assert!(plain.contains("Profile: supervised"), "{plain}");
    assert!(plain.contains("Automatic Phases: strategize"), "{plain}");
    assert!(!plain.contains("Level: manual"), "{plain}");
}

#[test]
fn children_counts_agree_between_list_and_show_and_a_branch_is_not_sandboxable_without_strategy() {
    let env = Env::new();
    let repo = crate::support::git_repo(env.root(), "api");
    ok_or_gated(
        &env,
        &[
            "resource",
            "add",
            "git-checkout",
            "api",
            "--path",
            repo.to_str().unwrap(),
        ],
    );
    let d1 = env.root().join("d1");
    let d2 = env.root().join("d2");
    std::fs::create_dir(&d1).unwrap();
    std::fs::create_dir(&d2).unwrap();
    ok_or_gated(
        &env,
        &[
            "resource",
            "add",
            "fs-directory",
            "d1",
            "--path",
            d1.to_str().unwrap(),
        ],
    );
    ok_or_gated(
        &env,
        &[
            "resource",
            "add",
            "fs-directory",
            "d2",
            "--path",
            d2.to_str().unwrap(),
        ],
    );
    ok_or_gated(&env, &["resource", "link-child", "-p", "d1", "-c", "d2"]);
    let list = ok_or_gated(&env, &["resource", "list", "--all"]);
    for r in list["data"]["resources"].as_array().unwrap() {
        let name = r["name"].as_str().unwrap();
        let shown = child_names(&env, name).len();
        assert_eq!(r["children"], shown, "{name}");
    }
    let count = |name: &str| {
        list["data"]["resources"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["name"] == name)
            .unwrap()["children"]
            .clone()
    };
    assert_eq!(count("local/d1"), 1);
    assert_eq!(count("local/api"), 2, "repository and work tree");
    let branch = ok_or_gated(&env, &["resource", "show", "local/api:repo:dev"]);
    assert_eq!(branch["data"]["sandbox_strategy"], "none");
    assert_eq!(branch["data"]["sandboxable"], false);
    let plain = crate::support::stdout(&env.run(&[
        "--format",
        "plain",
        "resource",
        "show",
        "local/api:repo:dev",
    ]));
    assert!(plain.contains("Sandboxable: no"), "{plain}");
}

#[test]
fn action_show_displays_sandbox_settings_and_create_refuses_root_or_escaping_writable_paths() {
    let env = Env::new();
    for (name, path, wanted) in [
        ("root", "/", "whole filesystem"),
        ("escape", "../../etc", "`..`"),
    ] {
        let action = file(
            &env,
            &format!("{name}.yaml"),
            &format!(
                "name: {name}\n{MINIMAL_ACTION}sandbox:\n  network: true\n  writable-paths: [\"/tmp/ok\", \"{path}\"]\n"
            ),
        );
        let doc = fails(
            &env,
            &["action", "create", "--config", &action],
            "INVALID_INPUT",
        );
        let message = doc["error"]["message"].as_str().unwrap();
        assert!(message.contains("sandbox.writable-paths[1]"), "{message}");
        assert!(message.contains(wanted), "{message}");
    }
    let action = file(
        &env,
        "ok.yaml",
        &format!(
            "name: ok\n{MINIMAL_ACTION}sandbox:\n  network: true\n  writable-paths: [/tmp/cache]\n"
        ),
    );
    ok_or_gated(&env, &["action", "create", "--config", &action]);
    let plain = crate::support::stdout(&env.run(&["--format", "plain", "action", "show", "ok"]));
    assert!(plain.contains("Sandbox"), "{plain}");
    assert!(plain.contains("Network: yes"), "{plain}");
    assert!(plain.contains("Writable Paths: /tmp/cache"), "{plain}");
}

#[test]
fn linking_a_read_only_resource_type_never_shows_read_only_no() {
    let env = Env::new();
    let repo = crate::support::git_repo(env.root(), "api");
    ok_or_gated(
        &env,
        &[
            "resource",
            "add",
            "git-checkout",
            "api",
            "--path",
            repo.to_str().unwrap(),
        ],
    );
    ok_or_gated(&env, &["project", "create", "p"]);
    let plain = crate::support::stdout(&env.run(&[
        "--format",
        "plain",
        "project",
        "link-resource",
        "p",
        "local/api:repo:origin",
    ]));
    assert!(plain.contains("Write: denied"), "{plain}");
    assert!(!plain.contains("Read-Only: no"), "{plain}");
    assert!(plain.contains("Read-Only: yes"), "{plain}");
}

#[test]
fn a_wrong_integer_default_says_an_integer() {
    let env = Env::new();
    let action = file(
        &env,
        "a.yaml",
        &format!(
            "name: a\n{MINIMAL_ACTION}arguments:\n  - name: n\n    type: integer\n    default: many\n"
        ),
    );
    let doc = fails(
        &env,
        &["action", "create", "--config", &action],
        "INVALID_INPUT",
    );
    let message = doc["error"]["message"].as_str().unwrap();
    assert!(message.contains("is not an integer"), "{message}");
}

#[test]
fn action_list_summary_does_not_count_hidden_archived_actions_as_listed() {
    let env = Env::new();
    for name in ["a", "b"] {
        let action = file(
            &env,
            &format!("{name}.yaml"),
            &format!("name: {name}\n{MINIMAL_ACTION}"),
        );
        ok_or_gated(&env, &["action", "create", "--config", &action]);
    }
    ok_or_gated(&env, &["action", "archive", "b"]);
    let plain = crate::support::stdout(&env.run(&["--format", "plain", "action", "list"]));
    assert!(plain.contains("Listed: 1"), "{plain}");
    assert!(plain.contains("Registered: 2"), "{plain}");
    assert!(!plain.contains("Total: 2"), "{plain}");
}

#[test]
fn a_regex_error_keeps_its_reason_in_the_message_and_the_diagram_in_the_detail() {
    let env = Env::new();
    let doc = fails(&env, &["project", "list", "("], "INVALID_INPUT");
    assert_eq!(doc["error"]["message"], "invalid REGEX: unclosed group");
    assert!(
        doc["error"]["detail"].as_str().unwrap().contains('\n'),
        "{doc:#}"
    );
}

#[test]
fn a_relative_config_path_is_stored_absolute() {
    let env = Env::new();
    std::fs::write(
        env.root().join("add-license.yaml"),
        format!("name: a\n{MINIMAL_ACTION}"),
    )
    .unwrap();
    let out = env
        .command(&[
            "--format",
            "json",
            "action",
            "create",
            "--config",
            "add-license.yaml",
        ])
        .current_dir(env.root())
        .output()
        .unwrap();
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    let stored = doc["data"]["action"]["config_path"].as_str().unwrap();
    assert!(std::path::Path::new(stored).is_absolute(), "{stored}");
    assert!(stored.ends_with("add-license.yaml"), "{stored}");
}

#[test]
fn the_project_backup_ends_with_a_newline() {
    let env = Env::new();
    ok_or_gated(&env, &["project", "create", "p"]);
    let doc = ok_or_gated(&env, &["project", "delete", "--yes", "p"]);
    let backup = doc["data"]["backup"].as_str().unwrap();
    let text = std::fs::read_to_string(backup).unwrap();
    assert!(text.ends_with("}\n"), "{text}");
}

#[test]
fn actor_show_spells_options_as_in_yaml() {
    let env = Env::new();
    let actor = file(
        &env,
        "r.yaml",
        "name: r\nmodel: anthropic/claude-sonnet-4-5\noptions: {max-tokens: 100}\nlimits: {max-turns: 5}\n",
    );
    ok_or_gated(&env, &["actor", "add", "--config", &actor]);
    let plain = crate::support::stdout(&env.run(&["--format", "plain", "actor", "show", "r"]));
    assert!(plain.contains("max-tokens: 100"), "{plain}");
    assert!(!plain.contains("max_tokens"), "{plain}");
}

const COUNT_TOOL: &str = "tool:\n  name: local/count-lines\n  description: Count the lines of a file\n  input_schema:\n    type: object\n    properties:\n      path: {type: string}\n    required: [path]\n  capability:\n    read_only: true\n  command: \"wc -l < {{ path }}\"\n";

const COUNTING_SKILL: &str =
    "skill:\n  name: local/counting\n  description: Counts lines\n  tools: [local/count-lines]\n";

/// The names `tool list` and `skill list` print, in order.
fn listed(env: &Env, registry: &str) -> Vec<String> {
    let doc = ok_or_gated(env, &[registry, "list"]);
    let rows = doc["data"]
        .as_array()
        .or_else(|| doc["data"][format!("{registry}s")].as_array())
        .cloned()
        .unwrap_or_default();
    rows.iter()
        .filter_map(|r| r["name"].as_str().map(str::to_string))
        .filter(|n| n.starts_with("local/"))
        .collect()
}

#[test]
fn bare_tool_and_skill_names_mean_local_as_in_every_other_registry() {
    let env = Env::new();
    ok_or_gated(
        &env,
        &[
            "tool",
            "add",
            "--config",
            &file(&env, "count.yaml", COUNT_TOOL),
        ],
    );
    ok_or_gated(
        &env,
        &[
            "skill",
            "add",
            "--config",
            &file(&env, "counting.yaml", COUNTING_SKILL),
        ],
    );
    assert_eq!(
        ok_or_gated(&env, &["tool", "show", "count-lines"])["data"]["tool"]["name"],
        "local/count-lines"
    );

    // A skill still names the tool: the bare name is refused as the full one is.
    let refused = fails(
        &env,
        &["tool", "remove", "--yes", "count-lines"],
        "CONFLICT",
    );
    assert!(
        refused["error"]["message"]
            .as_str()
            .unwrap()
            .contains("local/counting"),
        "{refused:#}"
    );

    let removed = ok_or_gated(&env, &["skill", "remove", "--yes", "counting"]);
    assert_eq!(removed["data"]["skill"], "local/counting", "{removed:#}");
    assert_eq!(listed(&env, "skill"), Vec::<String>::new());

    let removed = ok_or_gated(&env, &["tool", "remove", "--yes", "count-lines"]);
    assert_eq!(
        removed["data"]["tool"]["name"], "local/count-lines",
        "{removed:#}"
    );
    assert_eq!(listed(&env, "tool"), Vec::<String>::new());
}
