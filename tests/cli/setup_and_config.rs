//! Setting up and configuring: `config` (permissions, symlinks, providers, headers, path
//! variables), `init`, an unusable data directory, diagnostics, usage errors, completions and
//! the binary's own name; each test named after what broke.

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::process::Stdio;

use crate::support::{Env, stdout};

#[test]
fn show_completion_into_a_full_or_closed_output_does_not_panic() {
    let env = Env::new();
    let full = fs::OpenOptions::new()
        .write(true)
        .open("/dev/full")
        .unwrap();
    let out = env
        .command(&["--show-completion", "zsh"])
        .stdout(full)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert_eq!(out.status.code(), Some(1));

    let mut child = env
        .command(&["--show-completion", "zsh"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stdout.take());
    let out = child.wait_with_output().unwrap();
    assert!(!String::from_utf8_lossy(&out.stderr).contains("panicked"));
    assert_eq!(out.status.code(), Some(0));
}

#[test]
fn config_set_keeps_permissions_and_writes_through_a_symlink() {
    let env = Env::new();
    let real = env.root().join("dotfiles/agents.toml");
    fs::create_dir_all(real.parent().unwrap()).unwrap();
    fs::write(&real, "# mine\n").unwrap();
    fs::set_permissions(&real, fs::Permissions::from_mode(0o600)).unwrap();
    fs::create_dir_all(env.config_path.parent().unwrap()).unwrap();
    std::os::unix::fs::symlink(&real, &env.config_path).unwrap();
    let (doc, code) = env.json(&["config", "set", "log-level", "debug"]);
    assert_eq!(code, 0, "{doc}");
    assert!(
        fs::symlink_metadata(&env.config_path)
            .unwrap()
            .file_type()
            .is_symlink()
    );
    let text = fs::read_to_string(&real).unwrap();
    assert!(
        text.contains("# mine") && text.contains("log-level = \"debug\""),
        "{text}"
    );
    assert_eq!(
        fs::metadata(&real).unwrap().permissions().mode() & 0o777,
        0o600
    );
    assert!(
        fs::read_dir(real.parent().unwrap()).unwrap().count() == 1,
        "no lock or temp file left"
    );
}

#[test]
fn init_refuses_to_move_a_directory_that_is_not_a_data_directory() {
    let env = Env::new();
    let project = env.root().join("my-project");
    fs::create_dir_all(project.join("src")).unwrap();
    fs::write(project.join("src/main.rs"), "fn main() {}").unwrap();
    let out = env
        .command(&["--format", "json", "init", "--yes"])
        .args(["--data-dir", project.to_str().unwrap()])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(
        doc["error"]["message"]
            .as_str()
            .unwrap()
            .contains("does not look like a CleverAgents data directory")
    );
    assert!(project.join("src/main.rs").exists(), "nothing was moved");
    assert_eq!(
        fs::read_dir(env.root())
            .unwrap()
            .filter(|e| e
                .as_ref()
                .unwrap()
                .file_name()
                .to_string_lossy()
                .contains("backup"))
            .count(),
        0
    );
}

#[test]
fn suggested_commands_repeat_the_data_dir_and_config_path() {
    let env = Env::new();
    let (doc, _) = env.json(&["config", "get", "nope"]);
    let hint = doc["error"]["suggestions"]
        .as_array()
        .unwrap()
        .last()
        .unwrap()
        .as_str()
        .unwrap()
        .to_string();
    assert_eq!(
        hint,
        format!(
            "agents --data-dir {} --config-path {} config list",
            env.data_dir.display(),
            env.config_path.display()
        )
    );
    env.run(&[
        "config",
        "set",
        "providers.local1.base_url",
        "http://127.0.0.1:1/v1",
    ]);
    let (doc, _) = env.json(&["diagnostics"]);
    let fixes = doc["error"]["suggestions"].as_array().unwrap();
    assert!(
        fixes.iter().any(|f| f
            .as_str()
            .unwrap()
            .contains(&format!("--data-dir {}", env.data_dir.display()))),
        "{doc}"
    );
}

#[test]
fn version_and_config_work_when_the_data_directory_is_unusable() {
    let env = Env::new();
    fs::write(&env.data_dir, "i am a file").unwrap();
    assert_eq!(env.run(&["version"]).status.code(), Some(0));
    assert_eq!(
        env.run(&["config", "set", "format", "plain"]).status.code(),
        Some(0)
    );
    let (doc, code) = env.json(&["info"]);
    assert_eq!(code, 1);
    assert!(
        doc["error"]["message"]
            .as_str()
            .unwrap()
            .contains("it is a file, not a directory"),
        "{doc}"
    );
}

#[test]
fn config_list_shows_providers_that_are_not_complete_yet() {
    let env = Env::new();
    env.run(&["config", "set", "providers.y.timeout_secs", "30"]);
    let (doc, _) = env.json(&["config", "list", "^providers\\.y\\."]);
    let keys: Vec<&str> = doc["data"]["settings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["key"].as_str().unwrap())
        .collect();
    assert!(keys.contains(&"providers.y.timeout_secs"), "{keys:?}");
}

#[test]
fn header_values_with_control_characters_are_refused() {
    let env = Env::new();
    let (doc, code) = env.json(&[
        "config",
        "set",
        "providers.x.headers.X-A",
        "a\r\nInjected: 1",
    ]);
    assert_eq!(code, 1);
    assert_eq!(doc["error"]["code"], "INVALID_INPUT");
    let (_, code) = env.json(&["config", "set", "providers.x.headers.Bad Name", "v"]);
    assert_eq!(code, 1);
    assert!(!env.config_path.exists());
}

#[test]
fn an_inline_provider_table_keeps_its_comments() {
    let env = Env::new();
    fs::create_dir_all(env.config_path.parent().unwrap()).unwrap();
    fs::write(
        &env.config_path,
        "# top\nproviders.ollama = { kind = \"openai\" }  # inline\n",
    )
    .unwrap();
    let (doc, code) = env.json(&[
        "config",
        "set",
        "providers.ollama.base_url",
        "http://localhost:11434/v1",
    ]);
    assert_eq!(code, 0, "{doc}");
    let text = fs::read_to_string(&env.config_path).unwrap();
    assert!(
        text.contains("# top") && text.contains("# inline"),
        "{text}"
    );
    assert!(
        !text.contains("[providers"),
        "no empty table headers: {text}"
    );
}

#[test]
fn diagnostics_with_errors_carry_an_error_object_and_keep_warnings_apart() {
    let env = Env::new();
    env.run(&[
        "config",
        "set",
        "providers.local1.base_url",
        "http://127.0.0.1:1/v1",
    ]);
    let (doc, code) = env.json(&["diagnostics"]);
    assert_eq!(code, 1);
    assert_eq!(doc["status"], "error");
    assert_eq!(doc["error"]["code"], "CHECKS_FAILED");
    assert_eq!(
        doc["error"]["message"],
        "1 error must be resolved before CleverAgents can operate"
    );
    let text = stdout(&env.run(&["--format", "plain", "diagnostics"]));
    let errors = text
        .split("Errors (must fix)")
        .nth(1)
        .unwrap()
        .split("Recommendations")
        .next()
        .unwrap();
    assert!(
        !errors.contains("API_KEY"),
        "warnings are not listed as errors:\n{text}"
    );
}

#[test]
fn a_usage_error_follows_the_configured_json_format() {
    let env = Env::new();
    env.run(&["config", "set", "format", "json"]);
    let out = env.run(&["bogus"]);
    assert_eq!(out.status.code(), Some(2));
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(doc["error"]["code"], "USAGE");
}

#[test]
fn empty_path_variables_count_as_unset() {
    let env = Env::new();
    let out = env
        .command(&["version"])
        .env("AGENTS_DATA_DIR", "")
        .env("AGENTS_CONFIG", "")
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn a_bad_provider_name_is_named_as_the_problem() {
    let env = Env::new();
    let (doc, _) = env.json(&["config", "set", "providers.Bad_Name.kind", "openai"]);
    assert!(
        doc["error"]["message"]
            .as_str()
            .unwrap()
            .contains("providers.Bad_Name"),
        "{doc}"
    );
    let (doc, _) = env.json(&["config", "set", "providers.ollama.kind", "ollama"]);
    assert!(
        doc["error"]["message"]
            .as_str()
            .unwrap()
            .contains("OpenAI-compatible"),
        "{doc}"
    );
    let (doc, _) = env.json(&[
        "config",
        "set",
        "providers.ollama.models.gpt-4.1.output_usd_per_mtok",
        "1",
    ]);
    let hint = doc["error"]["suggestions"][0].as_str().unwrap();
    assert!(
        hint.contains("models.\\\"gpt-4.1\\\"") || hint.contains("models.\"gpt-4.1\""),
        "{hint}"
    );
}

#[test]
fn the_cleveragents_binary_names_itself() {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_cleveragents"))
        .arg("-V")
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&out.stdout).starts_with("cleveragents "));
}
