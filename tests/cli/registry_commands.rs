//! The registry commands beyond the acceptance scenario: validations, aliases, actors, the
//! other resource types, and the parts that say "not yet supported".

use serde_json::json;

use super::registries::ok_or_gated;
use crate::support::{Env, fails, git_repo};

#[test]
fn validations_default_to_required_with_a_300_second_timeout_and_can_be_scoped() {
    let env = Env::new();
    let repo = git_repo(env.root(), "api");
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
    let linked = ok_or_gated(
        &env,
        &[
            "project",
            "link-resource",
            "--alias",
            "Repo",
            "--read-only",
            "p",
            "api",
        ],
    );
    assert_eq!(
        linked["data"]["link"],
        json!({"resource_id": linked["data"]["link"]["resource_id"], "resource": "local/api", "type": "git-checkout", "alias": "repo", "read_only": true})
    );
    fails(&env, &["project", "link-resource", "p", "api"], "CONFLICT");

    let v = ok_or_gated(&env, &["project", "validation", "add", "p", "cargo test"]);
    assert_eq!(v["data"]["validation"]["mode"], "required");
    assert_eq!(v["data"]["validation"]["timeout_secs"], 300);
    assert!(
        v["data"]["validation"]["validation_id"]
            .as_str()
            .unwrap()
            .starts_with("val_")
    );
    let scoped = ok_or_gated(
        &env,
        &[
            "project",
            "validation",
            "add",
            "--informational",
            "--timeout",
            "60",
            "--resource",
            "repo",
            "-d",
            "lint",
            "p",
            "cargo clippy",
        ],
    );
    assert_eq!(scoped["data"]["validation"]["resource"], "local/api");
    assert_eq!(scoped["data"]["validation"]["mode"], "informational");
    fails(
        &env,
        &["project", "validation", "add", "--timeout", "0", "p", "x"],
        "INVALID_INPUT",
    );
    fails(
        &env,
        &[
            "project",
            "validation",
            "add",
            "--resource",
            "nope",
            "p",
            "x",
        ],
        "NOT_FOUND",
    );

    let list = ok_or_gated(&env, &["project", "validation", "list", "p"]);
    assert_eq!(list["data"]["validations"].as_array().unwrap().len(), 2);
    // A resource a validation is scoped to cannot be unlinked until the validation is gone.
    let id = scoped["data"]["validation"]["validation_id"]
        .as_str()
        .unwrap();
    fails(
        &env,
        &["project", "unlink-resource", "--yes", "p", "repo"],
        "CONFLICT",
    );
    ok_or_gated(&env, &["project", "validation", "remove", "--yes", "p", id]);
    ok_or_gated(&env, &["project", "unlink-resource", "--yes", "p", "repo"]);
    assert_eq!(
        ok_or_gated(&env, &["project", "show", "p"])["data"]["resources"],
        json!([])
    );
}

#[test]
fn actors_register_show_and_remove_with_their_impact() {
    let env = Env::new();
    let file = env.root().join("reviewer.yaml");
    std::fs::write(
        &file,
        "name: reviewer\nmodel: anthropic/claude-sonnet-4-5\nsystem-prompt: You review.\nskills: [git_operations]\noptions: {temperature: 0.2, max-tokens: 2048}\nlimits: {max-turns: 5}\n",
    )
    .unwrap();
    let added = ok_or_gated(
        &env,
        &[
            "actor",
            "add",
            "--config",
            file.to_str().unwrap(),
            "-o",
            "temperature=0.1",
        ],
    );
    assert_eq!(added["data"]["actor"]["name"], "local/reviewer");
    assert_eq!(
        added["data"]["actor"]["options"],
        json!({"temperature": 0.1, "max_tokens": 2048})
    );
    let list = ok_or_gated(&env, &["actor", "list"]);
    let names: Vec<&str> = list["data"]["actors"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        [
            "local/reviewer",
            "builtin/checklist-strategist",
            "builtin/script-executor",
            "anthropic/*",
            "openai/*"
        ]
    );
    let provider = ok_or_gated(&env, &["actor", "show", "openai/gpt-4o"]);
    assert_eq!(provider["data"]["actor"]["resolved_as"], "provider");
    assert_eq!(provider["data"]["actor"]["api_key_env"], "OPENAI_API_KEY");
    fails(&env, &["actor", "show", "nobody"], "NOT_FOUND");
    fails(
        &env,
        &["actor", "remove", "builtin/script-executor"],
        "CONFLICT",
    );

    let action = env.root().join("a.yaml");
    std::fs::write(&action, "name: review\ndefinition-of-done: reviewed\nstrategy-actor: reviewer\nexecution-actor: reviewer\n").unwrap();
    ok_or_gated(
        &env,
        &[
            "action",
            "create",
            "--available",
            "--config",
            action.to_str().unwrap(),
        ],
    );
    let removed = ok_or_gated(&env, &["actor", "remove", "reviewer"]);
    assert_eq!(
        removed["data"]["impact"]["actions"],
        json!(["local/review"])
    );
    assert_eq!(removed["messages"][0]["level"], "warn");
    // The action no longer passes its checks.
    let doc = fails(&env, &["action", "available", "review"], "INVALID_INPUT");
    assert!(
        doc["error"]["detail"]
            .as_str()
            .unwrap()
            .contains("Strategy Actor"),
        "{doc:#}"
    );
}

#[test]
fn a_configured_provider_makes_its_models_resolve() {
    let env = Env::new();
    let action = env.root().join("a.yaml");
    std::fs::write(&action, "name: x\ndefinition-of-done: d\nstrategy-actor: ollama/llama3.1:8b\nexecution-actor: builtin/script-executor\n").unwrap();
    fails(
        &env,
        &[
            "action",
            "create",
            "--available",
            "--config",
            action.to_str().unwrap(),
        ],
        "INVALID_INPUT",
    );
    ok_or_gated(&env, &["config", "set", "providers.ollama.kind", "openai"]);
    ok_or_gated(
        &env,
        &[
            "config",
            "set",
            "providers.ollama.base_url",
            "http://127.0.0.1:11434/v1",
        ],
    );
    let doc = ok_or_gated(
        &env,
        &[
            "action",
            "create",
            "--available",
            "--config",
            action.to_str().unwrap(),
        ],
    );
    assert_eq!(doc["data"]["action"]["state"], "available");
    let names: Vec<String> = ok_or_gated(&env, &["actor", "list"])["data"]["actors"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["name"].as_str().unwrap().to_string())
        .collect();
    assert!(names.contains(&"ollama/*".to_string()), "{names:?}");
}

#[test]
fn git_directories_and_mounts_register_and_other_types_are_refused() {
    let env = Env::new();
    let repo = git_repo(env.root(), "api");
    let git = ok_or_gated(
        &env,
        &[
            "resource",
            "add",
            "git",
            "mirror",
            "--url",
            &format!("file://{}", repo.display()),
        ],
    );
    let names: Vec<&str> = git["data"]["children"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        [
            "local/mirror:origin",
            "local/mirror:dev",
            "local/mirror:main"
        ]
    );
    assert_eq!(git["data"]["resource"]["properties"]["commits"], 2);
    fails(
        &env,
        &[
            "resource",
            "add",
            "git",
            "remote",
            "--url",
            "https://example.invalid/x.git",
        ],
        "INVALID_INPUT",
    );

    let docs = env.root().join("docs");
    std::fs::create_dir_all(docs.join("a/b")).unwrap();
    std::fs::write(docs.join("a/b/c.md"), "x").unwrap();
    let dir = ok_or_gated(
        &env,
        &[
            "resource",
            "add",
            "fs-directory",
            "docs",
            "--path",
            docs.to_str().unwrap(),
        ],
    );
    assert_eq!(dir["data"]["resource"]["properties"]["files"], 1);
    assert_eq!(dir["data"]["resource"]["properties"]["directories"], 2);
    let mount = ok_or_gated(
        &env,
        &[
            "resource",
            "add",
            "fs-mount",
            "m",
            "--mount-path",
            docs.to_str().unwrap(),
        ],
    );
    assert_eq!(
        mount["data"]["children"][0]["name"], "local/docs",
        "the registered directory is reused"
    );
    assert_eq!(mount["data"]["children"][0]["status"], "reused");
    // Removing the mount keeps the reused directory.
    ok_or_gated(&env, &["resource", "remove", "--yes", "m"]);
    ok_or_gated(&env, &["resource", "show", "docs"]);

    let doc = fails(
        &env,
        &["resource", "add", "git-branch", "x"],
        "INVALID_INPUT",
    );
    assert!(
        doc["error"]["message"]
            .as_str()
            .unwrap()
            .contains("discovered from its parent")
    );
    fails(
        &env,
        &["resource", "add", "local/svn", "x"],
        "INVALID_INPUT",
    );
    fails(
        &env,
        &[
            "resource",
            "add",
            "fs-directory",
            "local/a:b",
            "--path",
            docs.to_str().unwrap(),
        ],
        "INVALID_INPUT",
    );
    fails(
        &env,
        &["resource", "remove", "--yes", "local/mirror:main"],
        "CONFLICT",
    );
    let types = ok_or_gated(&env, &["resource", "type", "list"]);
    assert_eq!(
        types["data"]["resource_types"].as_array().unwrap().len(),
        24
    );
    let doc = fails(
        &env,
        &["resource", "type", "add", "--config", "svn.yaml"],
        "NOT_FOUND",
    );
    assert!(
        doc["error"]["message"]
            .as_str()
            .unwrap()
            .contains("svn.yaml"),
        "a missing type file is named: {doc:#}"
    );
    fails(
        &env,
        &["resource", "type", "remove", "--yes", "git"],
        "CONFLICT",
    );
}

#[test]
fn removals_without_a_terminal_ask_for_yes_and_change_nothing() {
    let env = Env::new();
    let docs = env.root().join("docs");
    std::fs::create_dir_all(&docs).unwrap();
    ok_or_gated(
        &env,
        &[
            "resource",
            "add",
            "fs-directory",
            "docs",
            "--path",
            docs.to_str().unwrap(),
        ],
    );
    let (doc, code) = env.json(&["resource", "remove", "docs"]);
    assert_eq!(code, 3, "{doc:#}");
    assert_eq!(doc["status"], "needs_approval");
    assert!(
        doc["data"]["approval"]["answer_with"]
            .as_str()
            .unwrap()
            .ends_with("resource remove --yes local/docs")
    );
    ok_or_gated(&env, &["resource", "show", "docs"]);
}

#[test]
fn plan_use_actor_overrides_must_resolve_and_are_recorded() {
    let env = Env::new();
    let action = env.root().join("a.yaml");
    std::fs::write(&action, "name: x\ndefinition-of-done: d\nstrategy-actor: builtin/checklist-strategist\nexecution-actor: builtin/script-executor\n").unwrap();
    ok_or_gated(&env, &["project", "create", "p"]);
    ok_or_gated(
        &env,
        &[
            "action",
            "create",
            "--available",
            "--config",
            action.to_str().unwrap(),
        ],
    );
    let doc = fails(
        &env,
        &["plan", "use", "x", "p", "--strategy-actor", "nobody"],
        "NOT_FOUND",
    );
    assert!(
        doc["error"]["message"]
            .as_str()
            .unwrap()
            .starts_with("--strategy-actor: actor `nobody` does not resolve"),
        "{doc:#}"
    );
    let plan = ok_or_gated(
        &env,
        &[
            "plan",
            "use",
            "x",
            "p",
            "--execution-actor",
            "openai/gpt-4o",
            "--estimation-actor",
            "anthropic/claude-haiku-4-5",
        ],
    );
    assert_eq!(plan["data"]["execution_actor"], "openai/gpt-4o");
    assert_eq!(
        plan["data"]["strategy_actor"],
        "builtin/checklist-strategist"
    );
    assert_eq!(
        plan["data"]["estimation_actor"],
        "anthropic/claude-haiku-4-5"
    );
    fails(&env, &["plan", "use", "x", "p", "p"], "INVALID_INPUT");
    fails(&env, &["plan", "use", "x", "nowhere"], "NOT_FOUND");
}
