//! Custom resource types (spec 23 "Custom Resource Types", spec 06 `resource type add|remove`):
//! a type from YAML gets its own `resource add <type>` subcommand with its declared
//! arguments, and its resources are registered, linked to projects and sandboxed through the
//! built-in handler it names.

use std::fs;

use serde_json::Value;

use crate::support::{Env, fails, git_repo, ok};

const NOTES: &str = r#"cleveragents:
  version: "3.0"
resource_type:
  name: local/notes
  description: "A folder of notes"
  physical_or_virtual: physical
  user_addable: true
  handler: FilesystemHandler
  cli_arguments:
    - name: root
      type: path
      required: true
      maps_to: path
      description: "The notes folder"
    - name: owner
      type: string
      description: "Who keeps the notes"
      validation:
        pattern: "^[a-z]+$"
  child_types:
    - type: fs-directory
      manual_link: true
"#;

fn notes_type(env: &Env) {
    let file = env.root().join("notes.yaml");
    fs::write(&file, NOTES).unwrap();
    let doc = ok(
        env,
        &[
            "resource",
            "type",
            "add",
            "--config",
            file.to_str().unwrap(),
        ],
    );
    assert_eq!(doc["data"]["resource_type"]["handler"], "fs-directory");
    assert_eq!(
        doc["data"]["resource_type"]["sandbox_strategy"],
        "copy_on_write"
    );
}

#[test]
fn a_custom_type_adds_a_resource_add_subcommand_whose_help_lists_its_arguments() {
    let env = Env::new();
    notes_type(&env);
    let help = env.run(&["resource", "add", "local/notes", "--help"]);
    assert!(help.status.success(), "{help:?}");
    let text = String::from_utf8_lossy(&help.stdout);
    for wanted in [
        "--root <PATH>",
        "The notes folder",
        "--owner <STRING>",
        "<NAME>",
    ] {
        assert!(text.contains(wanted), "{wanted} missing from:\n{text}");
    }
    let listed = ok(&env, &["resource", "type", "list"]);
    let custom: Vec<&Value> = listed["data"]["resource_types"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|t| t["source"] == "custom")
        .collect();
    assert_eq!(custom.len(), 1);
    assert_eq!(custom[0]["name"], "local/notes");
    let shown = ok(&env, &["resource", "type", "show", "local/notes"]);
    assert_eq!(
        shown["data"]["resource_type"]["cli_args"][0]["name"],
        "root"
    );

    // Arguments are checked against the declaration: required, pattern.
    let dir = env.root().join("notes");
    fs::create_dir_all(&dir).unwrap();
    let missing = env.run(&["resource", "add", "local/notes", "local/n"]);
    assert_eq!(missing.status.code(), Some(2), "{missing:?}");
    let doc = fails(
        &env,
        &[
            "resource",
            "add",
            "local/notes",
            "local/n",
            "--root",
            "no-such-folder",
        ],
        "INVALID_INPUT",
    );
    let message = doc["error"]["message"].as_str().unwrap();
    assert!(
        message.starts_with("--root") && message.contains("no-such-folder"),
        "the type's own flag is named, not the handler's --path: {doc:#}"
    );
    let doc = fails(
        &env,
        &[
            "resource",
            "add",
            "local/notes",
            "local/n",
            "--root",
            dir.to_str().unwrap(),
            "--owner",
            "Not Lower",
        ],
        "INVALID_INPUT",
    );
    assert!(
        doc["error"]["message"]
            .as_str()
            .unwrap()
            .contains("--owner"),
        "{doc:#}"
    );
}

#[test]
fn a_resource_of_a_custom_type_is_registered_linked_and_sandboxed_and_its_type_cannot_be_removed_while_used()
 {
    let env = Env::new();
    notes_type(&env);
    let dir = env.root().join("notes");
    fs::create_dir_all(&dir).unwrap();
    fs::write(dir.join("todo.md"), "buy milk\n").unwrap();
    let added = ok(
        &env,
        &[
            "resource",
            "add",
            "local/notes",
            "local/mine",
            "--root",
            dir.to_str().unwrap(),
            "--owner",
            "ana",
        ],
    );
    let r = &added["data"]["resource"];
    assert_eq!(r["type"], "local/notes", "{added:#}");
    assert_eq!(r["properties"]["owner"], "ana");
    assert_eq!(r["properties"]["handler"], "fs-directory");

    // Linked by hand under the type's rules, in the positional form of spec 05.
    let other = env.root().join("archive");
    fs::create_dir_all(&other).unwrap();
    ok(
        &env,
        &[
            "resource",
            "add",
            "fs-directory",
            "local/archive",
            "--path",
            other.to_str().unwrap(),
        ],
    );
    ok(
        &env,
        &["resource", "link-child", "local/mine", "local/archive"],
    );
    ok(
        &env,
        &[
            "resource",
            "unlink-child",
            "--yes",
            "local/mine",
            "local/archive",
        ],
    );
    let doc = fails(
        &env,
        &["resource", "link-child", "local/archive", "local/mine"],
        "INVALID_INPUT",
    );
    assert!(
        doc["error"]["message"]
            .as_str()
            .unwrap()
            .contains("top-level"),
        "{doc:#}"
    );
    ok(
        &env,
        &["project", "create", "--resource", "local/mine", "app"],
    );
    let action = env.root().join("edit.yaml");
    fs::write(
        &action,
        "name: local/edit\ndefinition-of-done: done\nstrategy-actor: builtin/checklist-strategist\nexecution-actor: builtin/script-executor\nscript:\n  - name: edit\n    run: echo 'call mum' >> todo.md\n",
    )
    .unwrap();
    ok(
        &env,
        &[
            "action",
            "create",
            "--available",
            "--config",
            action.to_str().unwrap(),
        ],
    );
    let (doc, code) = env.json(&[
        "plan",
        "use",
        "local/edit",
        "app",
        "--automation-profile",
        "trusted",
    ]);
    assert_eq!(code, 3, "the plan waits at Apply: {doc:#}");
    let plan = doc["data"]["plan_id"].as_str().unwrap().to_string();
    assert_eq!(
        fs::read_to_string(dir.join("todo.md")).unwrap(),
        "buy milk\n",
        "Execute changed only the sandbox"
    );
    let diff = ok(&env, &["plan", "diff", &plan]);
    let text = diff.to_string();
    assert!(text.contains("call mum"), "{diff:#}");

    // The type stays while a resource uses it.
    let doc = fails(
        &env,
        &["resource", "type", "remove", "--yes", "local/notes"],
        "CONFLICT",
    );
    assert!(
        doc["error"]["message"]
            .as_str()
            .unwrap()
            .contains("local/mine")
    );
    // Re-discovery of a linked resource is refused only while a plan that is not finished uses it.
    let update = [
        "resource",
        "add",
        "local/notes",
        "local/mine",
        "--update",
        "--root",
        dir.to_str().unwrap(),
    ];
    fails(&env, &update, "CONFLICT");
    ok(&env, &["plan", "cancel", &plan]);
    let again = ok(&env, &update);
    assert_eq!(again["data"]["replaced"], true, "{again:#}");
    assert_eq!(
        again["data"]["resource"]["resource_id"], r["resource_id"],
        "the resource keeps its id, so the project link stays"
    );
}

#[test]
fn bad_type_definitions_name_the_field_and_nothing_is_stored() {
    let env = Env::new();
    let file = env.root().join("bad.yaml");
    for (yaml, field) in [
        (
            "resource_type:\n  name: local/db\n  handler: DatabaseHandler\n  cli_arguments:\n    - {name: url, required: true}\n",
            "handler",
        ),
        (
            "resource_type:\n  name: local/d\n  handler: fs-directory\n  cli_arguments:\n    - {name: owner}\n",
            "cli_arguments",
        ),
        (
            "resource_type:\n  name: local/d\n  handler: fs-directory\n  sandbox_strategy: transaction_rollback\n  cli_arguments:\n    - {name: path, type: path, required: true}\n",
            "sandbox_strategy",
        ),
        (
            "resource_type:\n  name: local/d\n  handler: fs-directory\n  cli_arguments:\n    - {name: path, type: path, required: true}\n  child_types:\n    - {type: local/nothing}\n",
            "child_types[0].type",
        ),
        (
            "resource_type:\n  name: local/d\n  handler: fs-directory\n  cli_arguments:\n    - {name: path, type: path, required: true, colour: red}\n",
            "colour",
        ),
    ] {
        fs::write(&file, yaml).unwrap();
        let doc = fails(
            &env,
            &["resource", "type", "add", "-c", file.to_str().unwrap()],
            "INVALID_INPUT",
        );
        let message = doc["error"]["message"].as_str().unwrap();
        assert!(message.contains("bad.yaml"), "{message}");
        assert!(message.contains(field), "{field} not named in: {message}");
    }
    fails(
        &env,
        &[
            "resource",
            "type",
            "add",
            "--handler",
            "fs-directory",
            "git-checkout",
        ],
        "CONFLICT",
    );
    fails(
        &env,
        &["resource", "type", "remove", "-y", "git"],
        "CONFLICT",
    );
    let listed = ok(&env, &["resource", "type", "list"]);
    assert!(
        listed["data"]["resource_types"]
            .as_array()
            .unwrap()
            .iter()
            .all(|t| t["source"] == "built-in")
    );
}

#[test]
fn a_type_defined_from_options_alone_runs_on_the_git_checkout_handler_and_none_means_read_only() {
    let env = Env::new();
    let repo = git_repo(env.root(), "wiki");
    let define = |arg: &str| {
        env.json(&[
            "resource",
            "type",
            "add",
            "--handler",
            "git-checkout",
            "--sandbox-strategy",
            "none",
            "--cli-arg",
            arg,
            "local/wiki",
        ])
    };
    // The handler reads `path`; an argument that provides neither it nor `maps_to` is refused.
    let (doc, code) = define("checkout:path:required:The wiki checkout");
    assert_ne!(code, 0, "{doc:#}");
    assert!(
        doc["error"]["message"].as_str().unwrap().contains("`path`"),
        "{doc:#}"
    );
    let (doc, code) = define("path:path:required:The wiki checkout");
    assert_eq!(code, 0, "{doc:#}");
    ok(
        &env,
        &[
            "resource",
            "add",
            "local/wiki",
            "local/w",
            "--path",
            repo.to_str().unwrap(),
        ],
    );
    ok(
        &env,
        &["project", "create", "--resource", "local/w", "docs"],
    );
    let shown = ok(&env, &["resource", "show", "local/w"]);
    assert_eq!(shown["data"]["sandbox_strategy"], "none", "{shown:#}");
    assert_eq!(
        shown["data"]["capabilities"]["writable"], false,
        "{shown:#}"
    );
}
