//! Server items in local plans (spec section 21): a server-qualified action
//! (`SERVER:namespace/item`) given to a local `plan use` is fetched from `[servers.SERVER]`
//! with its version and cached; with the server unreachable, the cached copy is used and the
//! report says so.

use std::io::Write;
use std::process::Stdio;

use serde_json::Value;

use crate::support::server::Server;
use crate::support::{Env, git_repo};

/// An action the server's administrator defines (their items are in `local/`).
const NOTES: &str = r#"name: local/notes
description: Write the notes file
definition-of-done: NOTES.md exists
strategy-actor: builtin/checklist-strategist
execution-actor: builtin/script-executor
script:
  - name: write
    run: "echo notes > NOTES.md"
"#;

/// Runs a command of `env` on this machine (never through a server) with `--format json`.
fn local_json(env: &Env, args: &[&str]) -> (Value, i32) {
    let mut all = vec!["--format", "json"];
    all.extend_from_slice(args);
    let out = env.local_command(&all).output().unwrap();
    let doc = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "not JSON ({e}): {}\nstderr: {}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    });
    (doc, out.status.code().unwrap())
}

fn local_ok(env: &Env, args: &[&str]) -> Value {
    let (doc, code) = local_json(env, args);
    assert_eq!(code, 0, "{args:?}: {doc:#}");
    doc
}

/// `agents server login NAME URL --token-stdin` on `client`.
fn login(server: &Server, client: &Env, name: &str) {
    let mut login = client
        .local_command(&["server", "login", name, &server.url, "--token-stdin"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    writeln!(login.stdin.take().unwrap(), "{}", server.token).unwrap();
    let out = login.wait_with_output().unwrap();
    assert!(out.status.success(), "{out:?}");
}

/// A server holding the available action `local/notes`.
fn server_with_notes() -> Server {
    server_with_action(NOTES)
}

/// A server holding the available action `definition` defines.
fn server_with_action(definition: &str) -> Server {
    let server = Server::start(Env::new());
    let admin = Env::new();
    let file = admin.root().join("action.yaml");
    std::fs::write(&file, definition).unwrap();
    let (doc, code) = server.client_json(
        &admin,
        &[
            "action",
            "create",
            "--available",
            "--config",
            file.to_str().unwrap(),
        ],
    );
    assert_eq!(code, 0, "{doc:#}");
    server
}

/// A client with a local project `app` on a git repository.
fn client_with_project() -> Env {
    let client = Env::new();
    let repo = git_repo(client.root(), "repo");
    local_ok(
        &client,
        &[
            "resource",
            "add",
            "git-checkout",
            "local/repo",
            "--path",
            repo.to_str().unwrap(),
        ],
    );
    local_ok(
        &client,
        &["project", "create", "--resource", "local/repo", "app"],
    );
    client
}

fn use_notes(client: &Env) -> (Value, i32) {
    local_json(
        client,
        &[
            "plan",
            "use",
            "dev:local/notes",
            "app",
            "--automation-profile",
            "trusted",
        ],
    )
}

fn messages(doc: &Value) -> String {
    doc["messages"].to_string()
}

#[test]
fn a_server_action_runs_in_a_local_plan_and_its_cached_copy_serves_when_the_server_is_gone() {
    let mut server = server_with_notes();
    let client = client_with_project();
    login(&server, &client, "dev");

    let (doc, code) = use_notes(&client);
    assert_eq!(code, 3, "stops at the local apply gate: {doc:#}");
    assert_eq!(doc["data"]["action_name"], "dev:local/notes", "{doc:#}");
    assert!(
        messages(&doc).contains("fetched dev:local/notes version 1 from dev"),
        "{doc:#}"
    );
    // The plan is this machine's: the server knows nothing of it.
    let plan = doc["data"]["plan_id"].as_str().unwrap().to_string();
    local_ok(&client, &["plan", "status", &plan]);
    let shown = local_ok(&client, &["action", "show", "dev:local/notes"]);
    assert_eq!(
        shown["data"]["action"]["name"], "dev:local/notes",
        "{shown:#}"
    );
    let cache = client.data_dir.join("server-cache/dev.json");
    let cached: Value = serde_json::from_slice(&std::fs::read(&cache).unwrap()).unwrap();
    assert_eq!(cached["actions"]["local/notes"]["version"], 1, "{cached:#}");

    // The server's administrator replaces the action: the next use fetches version 2.
    let admin = Env::new();
    let file = admin.root().join("notes.yaml");
    std::fs::write(
        &file,
        NOTES.replace("Write the notes", "Write the new notes"),
    )
    .unwrap();
    let (doc, code) = server.client_json(
        &admin,
        &[
            "action",
            "create",
            "--update",
            "--config",
            file.to_str().unwrap(),
        ],
    );
    assert_eq!(code, 0, "{doc:#}");
    let (doc, code) = use_notes(&client);
    assert_eq!(code, 3, "{doc:#}");
    assert!(
        messages(&doc).contains("fetched dev:local/notes version 2 from dev"),
        "{doc:#}"
    );
    let shown = local_ok(&client, &["action", "show", "dev:local/notes"]);
    assert_eq!(
        shown["data"]["action"]["description"], "Write the new notes file",
        "{shown:#}"
    );

    server.kill_hard();
    let (doc, code) = use_notes(&client);
    assert_eq!(code, 3, "the cached copy still makes a plan: {doc:#}");
    let said = messages(&doc);
    assert!(
        said.contains("server dev unreachable: using the cached copy of dev:local/notes (version 2, fetched at"),
        "{doc:#}"
    );
}

#[test]
fn an_unreachable_server_without_a_cached_copy_is_an_io_error() {
    let mut server = server_with_notes();
    let client = client_with_project();
    login(&server, &client, "dev");
    server.kill_hard();
    let (doc, code) = use_notes(&client);
    assert_eq!(code, 1, "{doc:#}");
    assert_eq!(doc["error"]["code"], "IO_ERROR", "{doc:#}");
    let message = doc["error"]["message"].as_str().unwrap();
    assert!(message.contains("server dev unreachable"), "{message}");
    assert!(
        message.contains("no cached copy of dev:local/notes"),
        "{message}"
    );
}

#[test]
fn a_server_name_not_in_the_servers_table_is_refused_with_the_login_command() {
    let client = client_with_project();
    let (doc, code) = use_notes(&client);
    assert_eq!(doc["error"]["code"], "INVALID_INPUT", "{doc:#}");
    assert_ne!(code, 0);
    assert!(
        doc["error"]["message"].as_str().unwrap().contains("`dev`"),
        "{doc:#}"
    );
    assert!(
        doc["error"]["suggestions"]
            .to_string()
            .contains("server login dev URL --token-stdin"),
        "{doc:#}"
    );
}

/// An action using every part of an action file a local copy must keep.
const FULL: &str = r#"name: local/full
description: Write {{ title }}
long-description: A longer text
definition-of-done: "{{ title }} exists"
strategy-actor: builtin/checklist-strategist
execution-actor: builtin/script-executor
reusable: true
read-only: false
invariants:
  - Never rewrite git history
arguments:
  - name: title
    type: string
    default: NOTES.md
  - name: lines
    type: integer
    default: 2
shell: bash
script:
  - name: write
    run: "echo {{ lines }} > {{ title }}"
  - name: check
    run: "test -f {{ title }}"
    depends-on: [write]
sandbox:
  network: false
  writable-paths: []
  env: [LANG]
"#;

#[test]
fn a_fetched_action_keeps_its_arguments_script_sandbox_and_invariants() {
    let server = server_with_action(FULL);
    let client = client_with_project();
    login(&server, &client, "dev");
    let (doc, code) = local_json(
        &client,
        &[
            "plan",
            "use",
            "dev:local/full",
            "app",
            "--automation-profile",
            "trusted",
        ],
    );
    assert_eq!(code, 3, "{doc:#}");
    let (there, code) = server.client_json(&Env::new(), &["action", "show", "local/full"]);
    assert_eq!(code, 0, "{there:#}");
    let here = local_ok(&client, &["action", "show", "dev:local/full"]);
    for key in [
        "description",
        "long_description",
        "definition_of_done",
        "strategy_actor",
        "execution_actor",
        "reusable",
        "read_only",
        "arguments",
        "script",
        "sandbox",
    ] {
        assert_eq!(
            here["data"]["action"][key], there["data"]["action"][key],
            "{key}: {here:#}"
        );
    }
    assert!(
        here["data"]["invariants"]
            .to_string()
            .contains("Never rewrite git history"),
        "{here:#}"
    );
}

#[test]
fn an_action_the_server_does_not_have_is_not_found_there_and_nothing_is_cached() {
    let server = server_with_notes();
    let client = client_with_project();
    login(&server, &client, "dev");
    let (doc, code) = local_json(&client, &["plan", "use", "dev:local/absent", "app"]);
    assert_eq!(code, 1, "{doc:#}");
    assert_eq!(doc["error"]["code"], "NOT_FOUND", "{doc:#}");
    let message = doc["error"]["message"].as_str().unwrap();
    assert!(message.starts_with("server dev: "), "{message}");
    assert!(message.contains("local/absent"), "{message}");
    assert!(!client.data_dir.join("server-cache/dev.json").exists());
    let (doc, code) = local_json(&client, &["action", "show", "dev:local/absent"]);
    assert_eq!(code, 1, "{doc:#}");
}
