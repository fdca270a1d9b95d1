//! `agents server audit` and `agents server audit verify` (spec sections 21 and 28,
//! "auditing"): the log is read with filters in every output format, the check passes on an
//! untouched log, and after one row is edited in the database by hand it fails naming that
//! row; on the server host (SQLite file or PostgreSQL) and through a server.

use std::process::Command;

use cleveragents_engine::api::{AuditEntry, AuditOutcome, DatabaseLocation, Engine, Settings};
use serde_json::Value;

use crate::support::postgres::{fresh_database, sql};
use crate::support::server::Server;
use crate::support::{Env, db_file};

/// The engine of `env`'s data directory (the server host's), on `database` when given: the
/// test appends through it as the server's permission checks do.
fn host_engine(env: &Env, database: Option<&str>) -> Engine {
    let engine = Engine::new(
        cleveragents_engine::paths::Paths::at(env.data_dir.clone(), env.config_path.clone()),
        Settings::default(),
    );
    match database {
        Some(url) => engine.with_database(DatabaseLocation::Postgres(url.to_string())),
        None => engine,
    }
}

/// Appends four rows: alice's allowed requests in `acme`, bob's denied one, one of the host.
fn append_rows(engine: &Engine) {
    let entry = |user: Option<&str>, operation: &str, outcome| AuditEntry {
        user: user.map(str::to_string),
        operation: operation.into(),
        namespace: Some("acme".into()),
        target: Some("acme/deploy".into()),
        address: Some("192.0.2.7".into()),
        outcome,
    };
    for e in [
        entry(Some("alice"), "action.create", AuditOutcome::Allowed),
        entry(
            Some("bob"),
            "plan.apply",
            AuditOutcome::Denied {
                reason: "viewers may not apply; maintainer or owner may".into(),
            },
        ),
        entry(Some("alice"), "plan.apply", AuditOutcome::Allowed),
        entry(None, "org.member.add", AuditOutcome::Allowed),
    ] {
        engine.audit(&e).unwrap();
    }
}

/// `agents ARGS` on the server host: its data directory, or `database` (always named, so the
/// SQLite case stays on the file even when the suite's servers run on PostgreSQL).
fn host(env: &Env, database: Option<&str>, args: &[&str]) -> Command {
    let mut cmd = env.local_command(args);
    cmd.env_remove("AGENTS_DATABASE_URL");
    if let Some(url) = database {
        cmd.env("AGENTS_DATABASE_URL", url);
    }
    cmd
}

fn run_json(mut cmd: Command) -> (Value, i32) {
    let out = cmd.output().expect("the binary runs");
    let doc = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "stdout is not JSON ({e}): {}\nstderr: {}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    });
    (doc, out.status.code().expect("exit code"))
}

fn host_json(env: &Env, database: Option<&str>, args: &[&str]) -> (Value, i32) {
    run_json(host(env, database, &[&["--format", "json"], args].concat()))
}

/// The acceptance scenario on the server host: verify passes, one row is edited by hand with
/// `edit`, verify fails naming it.
fn verify_names_the_row_edited_by_hand(env: &Env, database: Option<&str>, edit: impl Fn(&str)) {
    append_rows(&host_engine(env, database));
    let out = host(
        env,
        database,
        &["--format", "plain", "server", "audit", "verify"],
    )
    .output()
    .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{text}");
    assert!(text.contains("audit log intact: 4 rows"), "{text}");
    let (doc, code) = host_json(env, database, &["server", "audit", "verify"]);
    assert_eq!(code, 0, "{doc:#}");
    assert_eq!(doc["data"]["intact"], true);
    assert_eq!(doc["data"]["head"]["seq"], 4);
    let head = format!("4:{}", doc["data"]["head"]["hash"].as_str().unwrap());
    let (doc, code) = host_json(
        env,
        database,
        &[
            "server", "audit", "--user", "alice", "--org", "acme", "--since", "1h",
        ],
    );
    assert_eq!(code, 0, "{doc:#}");
    let seqs: Vec<&Value> = doc["data"]["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| &r["seq"])
        .collect();
    assert_eq!(seqs, [&Value::from(1), &Value::from(3)], "{doc:#}");
    let (doc, code) = host_json(env, database, &["server", "audit"]);
    assert_eq!(code, 0, "{doc:#}");
    assert_eq!(doc["data"]["rows"].as_array().unwrap().len(), 4);

    edit("UPDATE audit_log SET allowed = 1, reason = NULL WHERE seq = 2");

    let (doc, code) = host_json(env, database, &["server", "audit", "verify"]);
    assert_eq!(code, 1, "{doc:#}");
    assert_eq!(doc["error"]["code"], "CHECKS_FAILED", "{doc:#}");
    let message = doc["error"]["message"].as_str().unwrap();
    assert!(message.contains("row 2 was altered"), "{message}");
    assert_eq!(doc["data"]["first_break"]["seq"], 2);
    assert_eq!(doc["data"]["first_break"]["kind"], "altered");
    assert!(
        doc["error"]["detail"]
            .as_str()
            .unwrap()
            .contains("rows 1 to 1 are intact"),
        "{doc:#}"
    );
    assert!(!doc["error"]["suggestions"].as_array().unwrap().is_empty());
    let out = host(
        env,
        database,
        &["--format", "plain", "server", "audit", "verify"],
    )
    .output()
    .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stdout).contains("row 2"));

    // Deleting the last row leaves a whole chain: the head printed before finds it.
    edit(
        "UPDATE audit_log SET allowed = 0, reason = 'viewers may not apply; maintainer or owner may' WHERE seq = 2",
    );
    edit("DELETE FROM audit_log WHERE seq = 4");
    let (doc, code) = host_json(env, database, &["server", "audit", "verify"]);
    assert_eq!(
        (code, &doc["data"]["rows"]),
        (0, &Value::from(3)),
        "{doc:#}"
    );
    let (doc, code) = host_json(
        env,
        database,
        &["server", "audit", "verify", "--head", &head],
    );
    assert_eq!(code, 1, "{doc:#}");
    assert_eq!(doc["data"]["first_break"]["kind"], "truncated", "{doc:#}");
    assert!(
        doc["error"]["message"].as_str().unwrap().contains("row 4"),
        "{doc:#}"
    );
}

#[test]
fn verify_passes_on_an_untouched_sqlite_log_and_names_the_row_edited_by_hand() {
    let env = Env::new();
    verify_names_the_row_edited_by_hand(&env, None, |statement| {
        let conn = rusqlite::Connection::open(db_file(&env)).unwrap();
        assert_eq!(conn.execute(statement, []).unwrap(), 1, "{statement}");
    });
}

#[test]
fn verify_passes_on_an_untouched_postgres_log_and_names_the_row_edited_by_hand() {
    let database = fresh_database();
    let env = Env::new();
    verify_names_the_row_edited_by_hand(&env, Some(&database), |statement| {
        sql(&database, statement);
    });
    assert!(!db_file(&env).exists(), "the records went to SQLite");
}

#[test]
fn appends_from_two_threads_on_postgres_keep_one_chain() {
    let database = fresh_database();
    let env = Env::new();
    let engine = host_engine(&env, Some(&database));
    std::thread::scope(|s| {
        for t in 0..2 {
            let engine = &engine;
            s.spawn(move || {
                for i in 0..25 {
                    engine
                        .audit(&AuditEntry {
                            user: Some(format!("instance{t}")),
                            operation: format!("op{i}"),
                            namespace: None,
                            target: None,
                            address: None,
                            outcome: AuditOutcome::Allowed,
                        })
                        .unwrap();
                }
            });
        }
    });
    let (doc, code) = host_json(&env, Some(&database), &["server", "audit", "verify"]);
    assert_eq!(code, 0, "{doc:#}");
    assert_eq!(doc["data"]["rows"], 50);
    assert_eq!(
        sql(&database, "SELECT count(DISTINCT prev_hash) FROM audit_log"),
        "50",
        "no two rows follow the same row"
    );
}

#[test]
fn the_log_is_listed_with_filters_in_every_output_format() {
    let env = Env::new();
    append_rows(&host_engine(&env, None));
    let (doc, code) = host_json(&env, None, &["server", "audit"]);
    assert_eq!(code, 0, "{doc:#}");
    let rows = doc["data"]["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 4);
    assert_eq!(rows[1]["user"], "bob");
    assert_eq!(rows[1]["allowed"], false);
    assert_eq!(rows[1]["address"], "192.0.2.7");
    assert!(rows[3]["user"].is_null());

    let seqs = |args: &[&str]| -> Vec<i64> {
        let (doc, code) = host_json(&env, None, &[&["server", "audit"], args].concat());
        assert_eq!(code, 0, "{args:?}: {doc:#}");
        doc["data"]["rows"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["seq"].as_i64().unwrap())
            .collect()
    };
    assert_eq!(seqs(&["--user", "alice"]), [1, 3]);
    assert_eq!(seqs(&["--org", "acme", "--limit", "2"]), [3, 4]);
    assert_eq!(seqs(&["--org", "globex"]), Vec::<i64>::new());
    assert_eq!(seqs(&["--since", "1h"]), [1, 2, 3, 4]);
    assert_eq!(
        seqs(&["--since", "2000-01-01T00:00:00Z", "--user", "bob"]),
        [2]
    );
    let future = (jiff::Timestamp::now() + jiff::SignedDuration::from_hours(1)).to_string();
    assert_eq!(seqs(&["--since", &future]), Vec::<i64>::new());

    for format in ["rich", "color", "table", "plain", "yaml"] {
        let out = host(&env, None, &["--format", format, "server", "audit"])
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        assert_eq!(out.status.code(), Some(0), "{format}: {text}");
        for shown in [
            "bob",
            "plan.apply",
            "viewers may not apply",
            "4 audit row(s)",
        ] {
            assert!(text.contains(shown), "{format} lacks {shown}: {text}");
        }
    }

    let (doc, code) = host_json(&env, None, &["server", "audit", "--since", "yesterday"]);
    assert_eq!(code, 1, "{doc:#}");
    assert_eq!(doc["error"]["code"], "INVALID_INPUT");
    let (doc, code) = host_json(&env, None, &["server", "audit", "--limit", "0"]);
    assert_eq!(
        (code, &doc["error"]["code"]),
        (1, &Value::from("INVALID_INPUT"))
    );
}

#[test]
fn a_client_reads_and_verifies_the_servers_log_through_the_protocol() {
    let server_env = Env::new();
    let database = crate::support::server::server_database(&server_env);
    let engine = host_engine(&server_env, database.as_deref());
    append_rows(&engine);
    let server = Server::start(server_env);
    let client = Env::new();
    let (doc, code) = server.client_json(&client, &["server", "audit", "--user", "alice"]);
    assert_eq!(code, 0, "{doc:#}");
    assert_eq!(doc["data"]["rows"].as_array().unwrap().len(), 2, "{doc:#}");
    let (doc, code) = server.client_json(&client, &["server", "audit", "verify"]);
    assert_eq!(code, 0, "{doc:#}");
    // The four appended, then the host's `server token create` for the test's token.
    assert_eq!(doc["data"]["rows"], 5);

    match &database {
        Some(url) => {
            sql(
                url,
                "UPDATE audit_log SET target = 'acme/other' WHERE seq = 3",
            );
        }
        None => {
            let conn = rusqlite::Connection::open(db_file(&server.env)).unwrap();
            conn.execute(
                "UPDATE audit_log SET target = 'acme/other' WHERE seq = 3",
                [],
            )
            .unwrap();
        }
    }
    let (doc, code) = server.client_json(&client, &["server", "audit", "verify"]);
    assert_eq!(code, 1, "{doc:#}");
    assert_eq!(doc["error"]["code"], "CHECKS_FAILED");
    assert_eq!(doc["data"]["first_break"]["seq"], 3, "{doc:#}");

    // The server reads its own database: a client's --database is refused, not ignored.
    let (doc, code) = server.client_json(
        &client,
        &[
            "server",
            "audit",
            "--database",
            "postgres://x@127.0.0.1:1/x",
        ],
    );
    assert_eq!(
        (code, &doc["error"]["code"]),
        (1, &Value::from("INVALID_INPUT"))
    );
    // A client's AGENTS_DATABASE_URL is ignored, as by every command sent to a server.
    let out = server
        .client(&client, &["--format", "json", "server", "audit"])
        .env("AGENTS_DATABASE_URL", "postgres://x@127.0.0.1:1/x")
        .output()
        .unwrap();
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(out.status.code(), Some(0), "{doc:#}");
    // The four appended and the host's `server token create`.
    assert_eq!(doc["data"]["rows"].as_array().unwrap().len(), 5);
    assert!(!db_file(&client).exists(), "the client wrote a database");
}
