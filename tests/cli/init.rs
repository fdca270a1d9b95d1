//! `agents init`: confirmation, backup and re-creation.

use std::fs;
use std::time::{Duration, Instant};

use crate::support::Env;

fn snapshot_dir(env: &Env) -> Vec<(String, Vec<u8>)> {
    let mut files = Vec::new();
    for entry in walk(env.root()) {
        if entry.is_file() {
            files.push((entry.display().to_string(), fs::read(&entry).unwrap()));
        }
    }
    files.sort();
    files
}

fn walk(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for e in fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            out.extend(walk(&p));
        }
        out.push(p);
    }
    out
}

#[test]
fn init_without_a_terminal_and_without_yes_exits_3_at_once_and_touches_nothing() {
    let env = Env::new();
    env.run(&["config", "set", "format", "table"]);
    let before = snapshot_dir(&env);
    let started = Instant::now();
    let (doc, code) = env.json(&["init"]);
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "it does not wait for input"
    );
    assert_eq!(code, 3);
    assert_eq!(doc["status"], "needs_approval");
    assert_eq!(doc["error"]["code"], "NEEDS_APPROVAL");
    let answer = doc["data"]["approval"]["answer_with"].as_str().unwrap();
    let expected = format!(
        "agents --data-dir {} --config-path {} init --yes",
        env.data_dir.display(),
        env.config_path.display()
    );
    assert_eq!(answer, expected, "the answer acts on the same environment");
    assert_eq!(
        snapshot_dir(&env),
        before,
        "no file was created, changed or removed"
    );
}

#[test]
fn init_on_a_fresh_machine_without_yes_creates_nothing() {
    let env = Env::new();
    let out = env.run(&["init"]);
    assert_eq!(out.status.code(), Some(3));
    assert!(!env.data_dir.exists());
    assert!(!env.config_path.exists());
}

#[test]
fn init_yes_backs_up_then_recreates_data_and_config() {
    let env = Env::new();
    env.run(&["config", "set", "format", "yaml"]);
    let (doc, code) = env.json(&["init", "--yes"]);
    assert_eq!(code, 0, "{doc}");
    let data_backup = std::path::PathBuf::from(doc["data"]["data_backup"].as_str().unwrap());
    let config_backup = std::path::PathBuf::from(doc["data"]["config_backup"].as_str().unwrap());
    assert!(data_backup.join("cleveragents.db").exists());
    assert!(
        fs::read_to_string(&config_backup)
            .unwrap()
            .contains("format = \"yaml\"")
    );
    assert!(env.data_dir.join("cleveragents.db").exists());
    let fresh = fs::read_to_string(&env.config_path).unwrap();
    assert!(!fresh.contains("format = \"yaml\""));
    assert!(
        fresh.contains("# format = \"rich\""),
        "the new file documents the keys"
    );
    assert!(doc["data"]["next"].as_str().unwrap().ends_with(" info"));
}

#[test]
fn the_suggested_answer_quotes_paths_and_works_when_run() {
    let env = Env::with_data_dir("my data");
    env.run(&["config", "set", "format", "yaml"]);
    let (doc, code) = env.json(&["init"]);
    assert_eq!(code, 3);
    let answer = doc["data"]["approval"]["answer_with"].as_str().unwrap();
    assert!(
        answer.contains("'"),
        "a path with a space is quoted: {answer}"
    );
    let words = shell_words::split(answer).unwrap();
    assert_eq!(words[0], "agents");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_agents"))
        .args(&words[1..])
        .env("HOME", env.root())
        .env_remove("AGENTS_DATA_DIR")
        .env_remove("AGENTS_CONFIG")
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    assert!(
        !fs::read_to_string(&env.config_path)
            .unwrap()
            .contains("format = \"yaml\"")
    );
}

#[test]
fn ctrl_c_at_the_prompt_exits_130_with_a_cancelled_result() {
    use crate::support::{Tmux, shell_quote};
    let env = Env::new();
    env.run(&["config", "set", "format", "yaml"]);
    let before = fs::read(&env.config_path).unwrap();
    let out_file = env.root().join("out.json");
    let command = env.terminal_command(&format!(
        "--format json init > {out}; echo $? >> {out}.code",
        out = shell_quote(&out_file)
    ));
    let tmux = Tmux::new("init");
    tmux.open(120, 20, &command);
    tmux.wait_for("the prompt", |s| s.contains("[y/N]"));
    tmux.keys(&["C-c"]);
    let code_file = env.root().join("out.json.code");
    assert_eq!(tmux.exit_code(&code_file, Duration::from_secs(10)), "130");
    let doc: serde_json::Value = serde_json::from_slice(&fs::read(&out_file).unwrap()).unwrap();
    assert_eq!(doc["status"], "cancelled");
    assert_eq!(doc["exit_code"], 130);
    assert_eq!(
        fs::read(&env.config_path).unwrap(),
        before,
        "nothing changed"
    );
}

/// Every commented-out `key = value` example of the file `init` writes loads when uncommented
/// on its own (with the commented table header it sits under, if any): each example has a
/// value of its key's own type.
#[test]
fn every_commented_example_in_the_config_init_writes_loads_when_uncommented() {
    let env = Env::new();
    let (doc, code) = env.json(&["init", "--yes"]);
    assert_eq!(code, 0, "{doc}");
    let template = fs::read_to_string(&env.config_path).unwrap();
    let lines: Vec<&str> = template.lines().collect();
    let is_key_line = |line: &str| {
        line.strip_prefix("# ").is_some_and(|rest| {
            rest.split_once(" = ")
                .is_some_and(|(key, _)| !key.is_empty() && !key.contains(' '))
        })
    };
    let mut tried = 0;
    let mut table_header: Option<usize> = None;
    for (i, line) in lines.iter().enumerate() {
        if line.starts_with("# [") && line.ends_with(']') {
            table_header = Some(i);
            continue;
        }
        if line.is_empty() {
            table_header = None;
        }
        if !is_key_line(line) {
            continue;
        }
        let mut edited: Vec<String> = lines.iter().map(|l| l.to_string()).collect();
        edited[i] = line[2..].to_string();
        if let Some(h) = table_header {
            edited[h] = lines[h][2..].to_string();
        }
        fs::write(&env.config_path, edited.join("\n") + "\n").unwrap();
        let (doc, code) = env.json(&["config", "list"]);
        assert_eq!(
            code,
            0,
            "uncommenting `{}` breaks the config: {doc:#}",
            &line[2..]
        );
        tried += 1;
    }
    assert!(
        tried >= 12,
        "every top-level key has an example ({tried} tried)"
    );
}
