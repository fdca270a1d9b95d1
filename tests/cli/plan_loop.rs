//! The plan loop as a new user meets it on real repositories: what misled or broke, each
//! test named after the behaviour that broke.

use std::fs;

use serde_json::Value;

use crate::support::Env;

fn check<'a>(diagnostics: &'a Value, name: &str) -> &'a Value {
    diagnostics["data"]["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == name)
        .unwrap_or_else(|| panic!("no check {name}: {diagnostics:#}"))
}

#[test]
fn a_log_file_that_cannot_be_opened_turns_file_logging_off_with_a_warning_instead_of_a_panic() {
    let env = Env::new();
    // A directory where the log file goes cannot be opened for appending, even by root (for
    // whom a read-only data directory is still writable).
    fs::create_dir_all(env.data_dir.join("logs/agents.log")).unwrap();
    for args in [
        &["diagnostics"][..],
        &["info"],
        &["plan", "list"],
        &["action", "list"],
    ] {
        let out = env
            .command(&["--format", "json"])
            .args(args)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!stderr.contains("panicked"), "{args:?}: {stderr}");
        assert_ne!(out.status.code(), Some(101), "{args:?}: {stderr}");
        assert!(
            stderr.contains("logging to a file is off") && stderr.contains("agents.log"),
            "{args:?} warns once on stderr: {stderr}"
        );
        let doc: Value = serde_json::from_slice(&out.stdout).expect("stdout stays JSON");
        assert!(doc["status"].is_string(), "{doc:#}");
    }
    let (doc, _) = env.json(&["diagnostics"]);
    let log = check(&doc, "Log file");
    assert_eq!(log["status"], "warn", "{log:#}");
    assert!(
        log["details"]
            .as_str()
            .unwrap()
            .contains("without a log file"),
        "{log:#}"
    );
    assert!(
        log["fix"].as_str().unwrap().contains("--data-dir"),
        "{log:#}"
    );
}

#[test]
fn diagnostics_reports_a_writable_log_file_as_ok() {
    let env = Env::new();
    let (doc, _) = env.json(&["diagnostics"]);
    assert_eq!(check(&doc, "Log file")["status"], "ok", "{doc:#}");
    assert!(env.data_dir.join("logs/agents.log").is_file());
}
