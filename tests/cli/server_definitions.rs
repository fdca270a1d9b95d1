//! The definition commands (actions, actors, automation profiles, tools, skills) through a
//! server (spec section 21): the same `data` and exit code as in process, `--config` files
//! read on the client, and no database on the client.

use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::support::server::Server;
use crate::support::{Env, db_file};

const ACTION: &str = "name: local/tidy\ndefinition-of-done: The code is tidy\nstrategy-actor: builtin/checklist-strategist\nexecution-actor: builtin/script-executor\narguments:\n  - name: topic\n    type: string\n    required: true\n";

const ACTOR: &str =
    "name: reviewer\nmodel: openai/gpt-4o\nskills: [file_operations, git_operations]\n";

const PROFILE: &str = "name: local/careful-auto\ndescription: Careful\nflags:\n  auto_strategize: true\n  auto_execute: true\n  auto_apply: false\n  auto_decisions_strategize: true\n  auto_decisions_execute: true\n  auto_validation_fix: true\n  auto_strategy_revision: false\n  auto_child_plans: true\n  auto_retry_transient: true\n  auto_checkpoint_restore: true\n  require_sandbox: true\n  require_checkpoints: true\n  allow_unsafe_tools: false\n";

const TOOL: &str = "tool:\n  name: local/stamp\n  description: Write a stamp file\n  source: command\n  input_schema:\n    type: object\n    properties:\n      text: {type: string}\n    required: [text]\n  capability:\n    writes: true\n    checkpointable: true\n  command: cat > STAMP.txt\n";

const SKILL: &str = "skill:\n  name: local/stamping\n  description: Stamps releases\n  tools: [local/stamp]\n  includes: [file_operations]\n";

/// The five definition files, written under `dir`; their paths by kind.
fn write_files(dir: &Path) -> [(&'static str, PathBuf); 5] {
    [
        ("action", ACTION),
        ("actor", ACTOR),
        ("profile", PROFILE),
        ("tool", TOOL),
        ("skill", SKILL),
    ]
    .map(|(kind, text)| {
        let path = dir.join(format!("{kind}.yaml"));
        std::fs::write(&path, text).unwrap();
        (kind, path)
    })
}

/// The commands that register the five definitions from their files.
fn registrations(files: &[(&'static str, PathBuf); 5]) -> Vec<Vec<String>> {
    let path = |kind: &str| {
        files
            .iter()
            .find(|(k, _)| *k == kind)
            .unwrap()
            .1
            .display()
            .to_string()
    };
    [
        vec!["action", "create", "--config", &path("action")],
        vec!["actor", "add", "--config", &path("actor")],
        vec!["automation-profile", "add", "--config", &path("profile")],
        vec!["tool", "add", "--config", &path("tool")],
        vec!["skill", "add", "--config", &path("skill")],
    ]
    .iter()
    .map(|args| args.iter().map(|a| a.to_string()).collect())
    .collect()
}

/// `data` (or `error`) with what differs between two environments masked: ids, times and
/// the paths of the files, and the global options suggested commands repeat.
fn masked(doc: &Value) -> Value {
    fn walk(key: &str, v: &mut Value) {
        match v {
            Value::String(_) if key.ends_with("_id") || key.ends_with("_at") => {
                *v = Value::from(format!("<{key}>"));
            }
            Value::String(_) if key == "config_path" || key == "base_dir" => {
                *v = Value::from("<path>");
            }
            Value::String(s) if s.starts_with("agents ") => {
                let words = [
                    " action ",
                    " actor ",
                    " automation-profile ",
                    " tool ",
                    " skill ",
                    " plan ",
                ];
                if let Some(i) = words.iter().filter_map(|w| s.find(w)).min() {
                    *s = format!("agents{}", &s[i..]);
                }
            }
            // A command quoted in a sentence repeats each side's global options.
            Value::String(s) if s.contains("`agents ") => {
                *s = crate::support::server::without_globals(s);
            }
            Value::Array(a) => a.iter_mut().for_each(|x| walk(key, x)),
            Value::Object(o) => o.iter_mut().for_each(|(k, x)| walk(k, x)),
            _ => {}
        }
    }
    let mut out = if doc.get("error").is_some_and(|e| !e.is_null()) {
        doc["error"].clone()
    } else {
        doc["data"].clone()
    };
    walk("", &mut out);
    out
}

/// A server whose definitions were registered through it from files on `client`'s machine.
fn served_definitions() -> (Server, Env) {
    let server = Server::start(Env::new());
    let client = Env::new();
    let files = write_files(client.root());
    for args in registrations(&files) {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let (doc, code) = server.client_json(&client, &args);
        assert_eq!(code, 0, "{args:?} through the server: {doc:#}");
    }
    (server, client)
}

/// Runs `args` in process on the server host and through the server; both answers.
fn both(server: &Server, client: &Env, args: &[&str]) -> ((Value, i32), (Value, i32)) {
    (server.env.json(args), server.client_json(client, args))
}

#[test]
fn every_definition_read_through_a_server_equals_the_in_process_read() {
    let (server, client) = served_definitions();
    let reads: &[&[&str]] = &[
        &["action", "list"],
        &["action", "list", "--state", "all"],
        &["action", "show", "local/tidy"],
        &["actor", "list"],
        &["actor", "show", "local/reviewer"],
        &["actor", "show", "builtin/checklist-strategist"],
        &["actor", "show", "openai/gpt-4o"],
        &["automation-profile", "list"],
        &["automation-profile", "show", "local/careful-auto"],
        &["automation-profile", "show", "supervised"],
        &["tool", "list"],
        &["tool", "list", "--source", "command"],
        &["tool", "show", "read_file"],
        &["tool", "show", "local/stamp"],
        &["tool", "show", "stamp"],
        &["skill", "list"],
        &["skill", "show", "file_operations"],
        &["skill", "show", "local/stamping"],
        &["skill", "tools", "local/stamping"],
    ];
    for args in reads {
        let ((local, local_code), (remote, remote_code)) = both(&server, &client, args);
        assert_eq!(local_code, 0, "{args:?} in process: {local:#}");
        assert_eq!(remote_code, 0, "{args:?} through the server: {remote:#}");
        assert_eq!(masked(&remote), masked(&local), "{args:?}");
    }
    assert!(
        !db_file(&client).exists(),
        "the client keeps no database: {}",
        db_file(&client).display()
    );
}

#[test]
fn a_refused_definition_read_fails_the_same_way_through_a_server() {
    let (server, client) = served_definitions();
    let refusals: &[(&[&str], &str)] = &[
        (&["action", "show", "local/nope"], "NOT_FOUND"),
        (&["actor", "show", "local/nope"], "NOT_FOUND"),
        (&["automation-profile", "show", "local/nope"], "NOT_FOUND"),
        (&["tool", "show", "read_fil"], "NOT_FOUND"),
        (&["tool", "show", "local/stam"], "NOT_FOUND"),
        (&["skill", "show", "local/nope"], "NOT_FOUND"),
        (&["tool", "remove", "--yes", "read_file"], "CONFLICT"),
        (&["skill", "remove", "--yes", "local/nope"], "NOT_FOUND"),
        (
            &["automation-profile", "remove", "--yes", "supervised"],
            "CONFLICT",
        ),
    ];
    for (args, code) in refusals {
        let ((local, local_code), (remote, remote_code)) = both(&server, &client, args);
        assert_eq!(
            local["error"]["code"], *code,
            "{args:?} in process: {local:#}"
        );
        assert_eq!(remote_code, local_code, "{args:?}: {remote:#}");
        assert_eq!(masked(&remote), masked(&local), "{args:?}");
    }
    assert!(!db_file(&client).exists());
}

#[test]
fn definitions_registered_and_removed_through_a_server_report_what_they_do_in_process() {
    let server = Server::start(Env::new());
    let client = Env::new();
    let local = Env::new();
    let remote_files = write_files(client.root());
    let local_files = write_files(local.root());
    let changes = registrations(&remote_files)
        .into_iter()
        .zip(registrations(&local_files));
    let removals: Vec<Vec<String>> = [
        &["skill", "remove", "--yes", "local/stamping"][..],
        &["tool", "remove", "--yes", "local/stamp"],
        &["actor", "remove", "local/reviewer"],
        &[
            "automation-profile",
            "remove",
            "--yes",
            "local/careful-auto",
        ],
        &["action", "archive", "local/tidy"],
        &["action", "available", "local/tidy"],
        &["action", "delete", "--yes", "local/tidy"],
    ]
    .iter()
    .map(|a| a.iter().map(|s| s.to_string()).collect())
    .collect();
    let steps = changes.chain(removals.iter().map(|r| (r.clone(), r.clone())));
    for (remote_args, local_args) in steps {
        let remote_args: Vec<&str> = remote_args.iter().map(String::as_str).collect();
        let local_args: Vec<&str> = local_args.iter().map(String::as_str).collect();
        let (remote, remote_code) = server.client_json(&client, &remote_args);
        let (here, here_code) = local.json(&local_args);
        assert_eq!(here_code, 0, "{local_args:?} in process: {here:#}");
        assert_eq!(
            remote_code, 0,
            "{remote_args:?} through the server: {remote:#}"
        );
        assert_eq!(masked(&remote), masked(&here), "{remote_args:?}");
    }
    // The server holds what was registered through it, and the client nothing.
    let (doc, code) = server.env.json(&["action", "list", "--state", "all"]);
    assert_eq!(code, 0, "{doc:#}");
    assert_eq!(doc["data"]["actions"], Value::Array(Vec::new()), "deleted");
    assert!(!db_file(&client).exists());
}

#[test]
fn an_agent_skill_folder_is_not_sent_to_a_server_and_nothing_is_registered() {
    let server = Server::start(Env::new());
    let client = Env::new();
    let folder = client.root().join("pdf");
    std::fs::create_dir_all(&folder).unwrap();
    std::fs::write(
        folder.join("SKILL.md"),
        "---\nname: pdf\ndescription: Reads PDFs\n---\nUse it.\n",
    )
    .unwrap();
    let (doc, code) = server.client_json(
        &client,
        &["skill", "add", "--agent-skill", folder.to_str().unwrap()],
    );
    assert_eq!(code, 1, "{doc:#}");
    assert_eq!(doc["error"]["code"], "NOT_SUPPORTED");
    let message = doc["error"]["message"].as_str().unwrap();
    assert!(message.contains("--agent-skill"), "{message}");
    let (list, _) = server.env.json(&["skill", "list", "-n", "local"]);
    assert_eq!(list["data"]["skills"], Value::Array(Vec::new()));
    assert!(!db_file(&client).exists());
}
