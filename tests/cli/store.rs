//! The database as the binary sees it.

use std::fs;

use crate::support::Env;

#[test]
fn a_database_from_a_newer_version_is_refused_and_left_byte_identical() {
    let env = Env::new();
    fs::create_dir_all(&env.data_dir).unwrap();
    let db = env.data_dir.join("cleveragents.db");
    {
        let conn = rusqlite::Connection::open(&db).unwrap();
        conn.execute_batch("PRAGMA journal_mode = WAL; CREATE TABLE t(x); INSERT INTO t VALUES (1); PRAGMA user_version = 999;")
            .unwrap();
    }
    let before = fs::read(&db).unwrap();
    let (doc, code) = env.json(&["info"]);
    assert_eq!(code, 1);
    assert_eq!(doc["error"]["code"], "SCHEMA_TOO_NEW");
    assert!(doc["error"]["message"].as_str().unwrap().contains("999"));
    assert_eq!(fs::read(&db).unwrap(), before);
    let out = env.run(&["--format", "plain", "info"]);
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        text.contains("newer than this CleverAgents understands"),
        "{text}"
    );
    assert_eq!(fs::read(&db).unwrap(), before);
}

#[test]
fn diagnostics_flag_a_broken_database_and_exit_one() {
    let env = Env::new();
    fs::create_dir_all(&env.data_dir).unwrap();
    fs::write(env.data_dir.join("cleveragents.db"), vec![b'x'; 4096]).unwrap();
    let (doc, code) = env.json(&["diagnostics"]);
    assert_eq!(code, 1);
    let db = doc["data"]["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == "Database")
        .unwrap();
    assert_eq!(db["status"], "error");
    assert!(db["fix"].is_string());
}
