//! The registry commands through a server (spec section 21, "Client-only vs server mode"):
//! resources, resource types, projects (with their context and validations), invariants and
//! the code index answer through `--server` with the `data` they give in process, and the
//! client keeps no database.

use serde_json::Value;

use crate::support::server::Server;
use crate::support::{Env, db_file, git_repo};

/// `data` with what differs between two environments masked: each environment's temporary
/// root, ids (ULIDs), commit hashes, times, durations and index sizes on disk (the index
/// holds the paths), and the global options a suggested command repeats (`--server URL`,
/// `--data-dir DIR`, `--config-path FILE`).
fn masked(data: &Value, roots: &[&str]) -> Value {
    let id = regex::Regex::new(r"[0-9A-HJKMNP-TV-Z]{26}").unwrap();
    let commit = regex::Regex::new(r"\b[0-9a-f]{40}\b").unwrap();
    let time = regex::Regex::new(r"\d{4}-\d{2}-\d{2}[T ][0-9:.]+Z?|\d{8}T\d{6}Z").unwrap();
    let globals = regex::Regex::new(r" --(server|data-dir|config-path) \S+").unwrap();
    fn walk(v: &mut Value, f: &dyn Fn(&str) -> String) {
        match v {
            Value::String(s) => *s = f(s),
            Value::Array(a) => a.iter_mut().for_each(|v| walk(v, f)),
            Value::Object(o) => {
                for (k, v) in o.iter_mut() {
                    if k == "duration_ms" || k == "size_bytes" {
                        *v = Value::Null;
                    } else {
                        walk(v, f);
                    }
                }
            }
            _ => {}
        }
    }
    let mut out = data.clone();
    walk(&mut out, &|s| {
        let mut s = s.to_string();
        for root in roots {
            s = s.replace(root, "<root>");
        }
        let s = id.replace_all(&s, "<id>");
        let s = commit.replace_all(&s, "<commit>");
        let s = time.replace_all(&s, "<time>");
        globals.replace_all(&s, "").into_owned()
    });
    out
}

/// A git checkout registered as `local/app-repo`, linked to project `app` with a validation,
/// a project invariant, a global one and an execute context policy; a custom type
/// `local/notes` with one resource.
fn registries(env: &Env) {
    let repo = git_repo(env.root(), "repo");
    let notes = env.root().join("notes");
    std::fs::create_dir_all(&notes).unwrap();
    std::fs::write(notes.join("a.md"), "# A\n").unwrap();
    for args in [
        &[
            "resource",
            "add",
            "git-checkout",
            "local/app-repo",
            "--path",
            repo.to_str().unwrap(),
        ][..],
        &["project", "create", "--resource", "local/app-repo", "app"],
        &["project", "validation", "add", "app", "true"],
        &[
            "invariant",
            "add",
            "--project",
            "app",
            "Keep the API stable",
        ],
        &[
            "invariant",
            "add",
            "--global",
            "--key",
            "style",
            "Use rustfmt",
        ],
        &[
            "project",
            "context",
            "set",
            "--view",
            "execute",
            "--hot-max-tokens",
            "500",
            "app",
        ],
        &[
            "resource",
            "type",
            "add",
            "--handler",
            "fs-directory",
            "--cli-arg",
            "path:path:required:The notes directory",
            "local/notes",
        ],
        &[
            "resource",
            "add",
            "local/notes",
            "local/my-notes",
            "--path",
            notes.to_str().unwrap(),
        ],
    ] {
        let (doc, code) = env.json(args);
        assert_eq!(code, 0, "{args:?}: {doc:#}");
    }
}

#[test]
fn registry_reads_through_a_server_equal_the_in_process_reads_and_the_client_keeps_no_database() {
    let host = Env::new();
    registries(&host);
    let server = Server::start(host);
    let client = Env::new();
    let (validations, _) = server.env.json(&["project", "validation", "list", "app"]);
    let validation = validations["data"]["validations"][0]["validation_id"]
        .as_str()
        .unwrap_or_else(|| panic!("{validations:#}"))
        .to_string();
    let reads: Vec<Vec<&str>> = vec![
        vec!["resource", "list"],
        vec!["resource", "list", "--all"],
        vec!["resource", "list", "--type", "git-branch"],
        vec!["resource", "list", "app"],
        vec!["resource", "show", "local/app-repo"],
        vec!["resource", "show", "local/my-notes"],
        vec!["resource", "tree", "local/app-repo"],
        vec!["resource", "tree", "--depth", "1", "local/app-repo"],
        vec!["resource", "type", "list"],
        vec!["resource", "type", "list", "^local"],
        vec!["resource", "type", "show", "git-checkout"],
        vec!["resource", "type", "show", "local/notes"],
        vec!["project", "list"],
        vec!["project", "list", "ap"],
        vec!["project", "show", "app"],
        vec!["project", "validation", "list", "app"],
        vec!["project", "context", "show", "--view", "execute", "app"],
        vec!["project", "context", "show", "--view", "apply", "app"],
        vec!["invariant", "list"],
        vec!["invariant", "list", "--project", "app"],
        vec!["invariant", "list", "--global", "rustfmt"],
        // Refusals cross with the same code, message and hints.
        vec!["resource", "show", "local/nope"],
        vec!["resource", "type", "show", "local/nope"],
        vec!["project", "show", "nope"],
        vec![
            "project",
            "validation",
            "remove",
            "--yes",
            "app",
            "val_nope",
        ],
        vec!["invariant", "remove", "--yes", "inv_nope"],
        vec!["resource", "remove", "--yes", "local/app-repo"],
        vec![
            "resource",
            "unlink-child",
            "--yes",
            "local/app-repo",
            "local/my-notes",
        ],
    ];
    for args in &reads {
        let (local, local_code) = server.env.json(args);
        let (remote, remote_code) = server.client_json(&client, args);
        assert_eq!(remote_code, local_code, "{args:?}: {remote:#}");
        let key = if local_code == 0 { "data" } else { "error" };
        assert_eq!(
            masked(&remote[key], &[]),
            masked(&local[key], &[]),
            "agents {}",
            args.join(" ")
        );
    }
    let (shown, _) = server.client_json(&client, &["project", "show", "app"]);
    assert_eq!(
        shown["data"]["indexing"][0]["text_index"], "ready",
        "{shown:#}"
    );
    let (one, code) = server.client_json(
        &client,
        &[
            "project",
            "validation",
            "remove",
            "--yes",
            "app",
            &validation,
        ],
    );
    assert_eq!(code, 0, "{one:#}");
    assert!(
        !db_file(&client).exists(),
        "the client made a database at {}",
        db_file(&client).display()
    );
}

/// The registry changes a session makes, in order: registering, linking, indexing,
/// unlinking and removing.
fn changes(repo: &str, notes: &str) -> Vec<Vec<String>> {
    let words = |s: &str| s.split(' ').map(str::to_string).collect::<Vec<_>>();
    vec![
        words(&format!(
            "resource add git-checkout local/app-repo --path {repo}"
        )),
        words(&format!(
            "resource add fs-directory local/notes --path {notes}"
        )),
        words("resource reindex local/app-repo"),
        words("project create app"),
        words("project link-resource app local/app-repo"),
        words("project link-resource --read-only app local/notes"),
        words("project validation add app true"),
        words("invariant add --project app Keep-the-API-stable"),
        words("project context set --view strategize --query-limit 7 app"),
        words("resource type add --handler fs-directory --cli-arg path:path:required local/docs"),
        words(&format!(
            "resource add local/docs local/guide --path {notes}"
        )),
        words("project unlink-resource --yes app local/notes"),
        words("resource remove --yes local/notes"),
        words("resource remove --yes local/guide"),
        words("resource type remove --yes local/docs"),
        words("project delete --yes app"),
        words("resource show local/app-repo"),
    ]
}

#[test]
fn registry_changes_through_a_server_answer_as_in_process_and_index_on_the_server() {
    let local = Env::new();
    let host = Env::new();
    let setups: Vec<(String, String)> = [&local, &host]
        .iter()
        .map(|env| {
            let repo = git_repo(env.root(), "repo");
            let notes = env.root().join("notes");
            std::fs::create_dir_all(&notes).unwrap();
            std::fs::write(notes.join("a.md"), "# A\n").unwrap();
            (
                repo.to_str().unwrap().to_string(),
                notes.to_str().unwrap().to_string(),
            )
        })
        .collect();
    let roots = [
        local.root().to_str().unwrap().to_string(),
        host.root().to_str().unwrap().to_string(),
    ];
    let roots: Vec<&str> = roots.iter().map(String::as_str).collect();
    let in_process = changes(&setups[0].0, &setups[0].1);
    let served = changes(&setups[1].0, &setups[1].1);
    let server = Server::start(host);
    let client = Env::new();
    for (a, b) in in_process.iter().zip(&served) {
        let a: Vec<&str> = a.iter().map(String::as_str).collect();
        let b: Vec<&str> = b.iter().map(String::as_str).collect();
        let (expected, expected_code) = local.json(&a);
        let (got, code) = server.client_json(&client, &b);
        assert_eq!(code, expected_code, "{a:?}: {got:#}");
        assert_eq!(
            masked(&got["data"], &roots),
            masked(&expected["data"], &roots),
            "agents {}",
            a.join(" ")
        );
    }
    // The index was built on the server host, in its data directory.
    assert!(
        server.env.data_dir.join("indexes").exists(),
        "no index on the server host"
    );
    assert!(
        !client.data_dir.exists() || !client.data_dir.join("indexes").exists(),
        "the client indexed its own disk"
    );
    assert!(!db_file(&client).exists());
}

#[test]
fn registering_a_path_the_server_host_does_not_have_is_refused_naming_the_host_and_nothing_is_stored()
 {
    let server = Server::start(Env::new());
    let client = Env::new();
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .unwrap()
        .trim()
        .to_string();
    let elsewhere = "/nonexistent/checkout/of/the/client";
    for (ty, flag) in [("git-checkout", "--path"), ("fs-directory", "--path")] {
        let (doc, code) = server.client_json(
            &client,
            &["resource", "add", ty, "local/here", flag, elsewhere],
        );
        assert_eq!(
            (code, doc["error"]["code"].as_str()),
            (1, Some("INVALID_INPUT")),
            "{doc:#}"
        );
        let message = doc["error"]["message"].as_str().unwrap_or_default();
        assert!(message.contains(elsewhere), "names the path: {message}");
        assert!(
            message.contains(&format!("server host {host}")),
            "names the server host: {message}"
        );
    }
    let (doc, code) = server.client_json(&client, &["resource", "list"]);
    assert_eq!(code, 0, "{doc:#}");
    assert_eq!(doc["data"]["resources"], serde_json::json!([]), "{doc:#}");
}
