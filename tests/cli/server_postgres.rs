//! `agents server start --database postgres://…` (spec section 21): a server keeps its records
//! in PostgreSQL, several instances share them, and the database's schema is versioned as the
//! SQLite file's is. The cluster is a real one (tests/support/postgres.rs).

use std::io::{BufRead, BufReader};
use std::process::Stdio;

use super::server::NOTES_ACTION;
use crate::support::postgres::{fresh_database, rows, sql};
use crate::support::server::Server;
use crate::support::{Env, db_file};

/// Registers a repository, the notes action and a project through `server` from `client`,
/// and starts a plan that stops at its apply gate; the repository and the plan id.
fn plan_through(server: &Server, client: &Env) -> (std::path::PathBuf, String) {
    let repo = crate::support::git_repo(server.env.root(), "repo");
    let file = client.root().join("notes.yaml");
    std::fs::write(&file, NOTES_ACTION).unwrap();
    let repo_arg = repo.to_str().unwrap();
    let file_arg = file.to_str().unwrap();
    for args in [
        &[
            "resource",
            "add",
            "git-checkout",
            "local/repo",
            "--path",
            repo_arg,
        ][..],
        &["action", "create", "--available", "--config", file_arg],
        &["project", "create", "app"],
        &["project", "link-resource", "app", "local/repo"],
    ] {
        let (doc, code) = server.client_json(client, args);
        assert_eq!(code, 0, "{args:?}: {doc:#}");
    }
    let (doc, code) = server.client_json(
        client,
        &[
            "plan",
            "use",
            "local/notes",
            "app",
            "--automation-profile",
            "trusted",
        ],
    );
    assert_eq!(code, 3, "{doc:#}");
    (repo, doc["data"]["plan_id"].as_str().unwrap().to_string())
}

#[test]
fn a_server_on_postgres_runs_a_clients_plan_to_one_commit_and_writes_no_sqlite_file() {
    let database = fresh_database();
    let server = Server::start_on_postgres(Env::new(), &database);
    let client = Env::new();
    let (repo, plan) = plan_through(&server, &client);
    let (diff, code) = server.client_json(&client, &["plan", "diff", &plan]);
    assert_eq!(code, 0, "{diff:#}");
    assert!(diff.to_string().contains("NOTES.md"), "{diff:#}");
    let (doc, code) = server.client_json(&client, &["plan", "apply", "--yes", &plan]);
    assert_eq!(code, 0, "{doc:#}");
    assert_eq!(
        std::fs::read_to_string(repo.join("NOTES.md")).unwrap(),
        "hello\n"
    );
    // The records are in PostgreSQL, not in either machine's data directory.
    assert_eq!(
        sql(
            &database,
            &format!("SELECT phase FROM plans WHERE plan_id = '{plan}'")
        ),
        "applied"
    );
    assert!(!db_file(&server.env).exists(), "the server wrote SQLite");
    assert!(!db_file(&client).exists());
}

#[test]
fn two_instances_on_one_database_answer_for_each_other_in_the_same_event_order() {
    let database = fresh_database();
    let a = Server::start_on_postgres(Env::new(), &database);
    let b = Server::start_on_postgres(Env::new(), &database);
    let client = Env::new();
    let (_, plan) = plan_through(&a, &client);
    // What A created, B lists and shows.
    for args in [
        &["project", "list"][..],
        &["action", "list"],
        &["plan", "list"],
    ] {
        let (from_a, code) = a.client_json(&client, args);
        assert_eq!(code, 0, "{from_a:#}");
        let (from_b, code) = b.client_json(&client, args);
        assert_eq!(code, 0, "{from_b:#}");
        assert_eq!(from_a["data"], from_b["data"], "{args:?}");
    }
    // The same status from either, but for the command each suggests (its own --server).
    let status = |server: &Server| {
        let (mut doc, code) = server.client_json(&client, &["plan", "status", &plan]);
        assert_eq!(code, 0, "{doc:#}");
        doc["data"]["pending_approvals"][0]["answer_command"].take();
        doc["data"].take()
    };
    let from_b = status(&b);
    assert_eq!(status(&a), from_b);
    assert_eq!(from_b["pending_approvals"][0]["kind"], "phase_gate");
    // The sandbox is on A's disk: its diff is A's to show (docs/server.md).
    let (diff, code) = a.client_json(&client, &["plan", "diff", &plan]);
    assert_eq!(code, 0, "{diff:#}");
    assert!(diff.to_string().contains("NOTES.md"), "{diff:#}");
    // B's events of A's plan: every one, in seq order, without a gap in the plan's history.
    let (from_a, _) = a.client_json(&client, &["plan", "events", &plan]);
    let (from_b, _) = b.client_json(&client, &["plan", "events", &plan]);
    assert_eq!(from_a["data"]["events"], from_b["data"]["events"]);
    let seqs: Vec<i64> = from_b["data"]["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["seq"].as_i64().unwrap())
        .collect();
    assert!(seqs.len() > 4, "{seqs:?}");
    assert!(seqs.windows(2).all(|w| w[0] < w[1]), "{seqs:?}");
}

#[test]
fn a_server_on_postgres_serves_more_open_event_streams_than_it_keeps_database_connections() {
    let database = fresh_database();
    let server = Server::start_on_postgres(Env::new(), &database);
    // Each stream is followed by a store of its own; idle between polls, none may keep a
    // connection, or a few dozen watchers would starve the plans they watch.
    let streams: Vec<_> = (0..40)
        .map(|_| server.open_event_stream("?live=true"))
        .collect();
    let client = Env::new();
    let started = std::time::Instant::now();
    let (_, plan) = plan_through(&server, &client);
    assert!(
        started.elapsed() < std::time::Duration::from_secs(60),
        "a plan took {:?} beside 40 streams",
        started.elapsed()
    );
    // Every stream still carries the plan's events.
    for mut stream in streams {
        let mut line = String::new();
        let mut saw_plan = false;
        while !saw_plan && stream.read_line(&mut line).unwrap() > 0 {
            saw_plan = line.contains(&plan);
            line.clear();
        }
        assert!(saw_plan, "a stream ended without the plan's events");
    }
}

#[test]
fn a_database_migrated_by_a_newer_release_is_refused_by_name_and_left_unchanged() {
    let database = fresh_database();
    let host = Env::new();
    let migrate = |host: &Env| {
        host.local_command(&["--format", "json", "server", "migrate"])
            .env("AGENTS_DATABASE_URL", &database)
            .output()
            .unwrap()
    };
    let out = migrate(&host);
    assert!(out.status.success(), "{out:?}");
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        doc["data"]["schema"],
        cleveragents_engine::store::latest_schema_version(),
        "the schema SQLite's migrations build: {doc:#}"
    );
    sql(
        &database,
        "INSERT INTO refinery_schema_history (version, name, applied_on, checksum) VALUES (999, 'future', 'now', '0')",
    );
    let before = rows(&database);
    let out = migrate(&host);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let message = doc["error"]["message"].as_str().unwrap();
    assert!(message.contains("schema version 999"), "{message}");
    let shown = database.rsplit_once('/').unwrap().1;
    assert!(message.contains(shown), "{message}");
    assert_eq!(rows(&database), before);
}

#[test]
fn server_start_says_which_database_it_serves_and_never_prints_its_password() {
    let database = fresh_database().replacen("agents@", "agents:s3cret-pw@", 1);
    let host = Env::new();
    let mut child = host
        .local_command(&[
            "server",
            "start",
            "--listen",
            "127.0.0.1:0",
            "--database",
            &database,
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let _ = child.kill();
    let out = child.wait_with_output().unwrap();
    let name = database.rsplit_once('/').unwrap().1;
    let schema = format!(
        "schema v{}",
        cleveragents_engine::store::latest_schema_version()
    );
    assert!(line.contains(&schema), "{line}");
    assert!(line.contains("agents@127.0.0.1"), "{line}");
    assert!(line.contains(name), "{line}");
    assert!(!line.contains("s3cret"), "{line}");
    assert!(!String::from_utf8_lossy(&out.stderr).contains("s3cret"));
}

#[test]
fn a_database_url_that_is_not_postgres_is_refused_naming_the_flag() {
    let host = Env::new();
    let out = host
        .local_command(&[
            "--format",
            "json",
            "server",
            "migrate",
            "--database",
            "mysql://x@y/z",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(
        doc["error"]["message"]
            .as_str()
            .unwrap()
            .contains("--database"),
        "{doc:#}"
    );
}
