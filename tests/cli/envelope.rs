//! Output formats and the json/yaml envelope.

use crate::support::{Env, stdout};

#[test]
fn json_info_prints_one_envelope_and_exits_zero() {
    let env = Env::new();
    let (doc, code) = env.json(&["info"]);
    assert_eq!(code, 0);
    let keys: Vec<&String> = doc.as_object().unwrap().keys().collect();
    assert_eq!(
        keys,
        [
            "command",
            "status",
            "exit_code",
            "data",
            "timing",
            "messages"
        ]
    );
    assert_eq!(doc["command"], "info");
    assert_eq!(doc["status"], "ok");
    assert_eq!(doc["exit_code"], 0);
    assert!(doc["timing"]["duration_ms"].is_u64());
    assert_eq!(
        doc["data"]["schema_version"],
        doc["data"]["latest_schema_version"]
    );
    assert_eq!(doc["messages"][0]["level"], "ok");
}

#[test]
fn any_command_creates_the_data_directory_and_database() {
    let env = Env::new();
    assert!(!env.data_dir.exists());
    assert_eq!(env.run(&["config", "list"]).status.code(), Some(0));
    assert!(env.data_dir.join("cleveragents.db").exists());
    assert!(
        env.data_dir.join("logs").join("agents.log").exists(),
        "logs go to the data directory"
    );
}

#[test]
fn plain_info_is_printable_ascii_except_the_user_path() {
    let env = Env::with_data_dir("d\u{e4}t\u{e4}-\u{6570}\u{636e}");
    let out = env.run(&["--format", "plain", "info"]);
    assert_eq!(out.status.code(), Some(0));
    let text = stdout(&out);
    let data_dir = env.data_dir.to_str().unwrap();
    assert!(text.contains(data_dir), "the path is reproduced unchanged");
    let rest = text.replace(data_dir, "");
    for (i, byte) in rest.bytes().enumerate() {
        assert!(
            byte == b'\n' || (0x20..0x7f).contains(&byte),
            "byte {i} is {byte:#04x} in:\n{text}"
        );
    }
    assert!(text.ends_with("[OK] Environment details ready\n"));
}

#[test]
fn color_is_plain_plus_escapes_and_no_color_removes_them() {
    let env = Env::new();
    let plain = stdout(&env.run(&["--format", "plain", "info"]));
    let color = stdout(&env.run(&["--format", "color", "info"]));
    assert!(color.contains('\u{1b}'));
    let stripped = regex::Regex::new("\u{1b}\\[[0-9;]*m")
        .unwrap()
        .replace_all(&color, "");
    assert_eq!(mask_timing(&stripped), mask_timing(&plain));
    let no_color = stdout(
        &env.command(&["--format", "color", "info"])
            .env("NO_COLOR", "1")
            .output()
            .unwrap(),
    );
    assert!(!no_color.contains('\u{1b}'));
    let table = stdout(
        &env.command(&["--format", "table", "info"])
            .env("NO_COLOR", "")
            .output()
            .unwrap(),
    );
    assert!(!table.contains('\u{1b}'), "NO_COLOR counts even when empty");
    assert!(
        table.contains('\u{256d}'),
        "table keeps its boxes without colour"
    );
}

/// The DB size can change between two runs (WAL checkpoints) and the format line names the
/// format itself; mask both.
fn mask_timing(s: &str) -> String {
    let s = regex::Regex::new("DB Size: .*")
        .unwrap()
        .replace_all(s, "DB Size: X");
    regex::Regex::new("Output Format: .*")
        .unwrap()
        .replace_all(&s, "Output Format: X")
        .into_owned()
}

#[test]
fn format_precedence_is_flag_env_config_then_plain_off_a_terminal() {
    let env = Env::new();
    assert!(
        stdout(&env.run(&["version"])).ends_with("[OK] Version reported\n"),
        "not a terminal: plain"
    );
    assert_eq!(
        env.run(&["config", "set", "format", "table"]).status.code(),
        Some(0)
    );
    let table = stdout(&env.run(&["version"]));
    assert!(
        table.contains('\u{256d}') && table.contains("Version reported"),
        "config: table\n{table}"
    );
    let from_env = env
        .command(&["version"])
        .env("AGENTS_FORMAT", "json")
        .output()
        .unwrap();
    assert_eq!(
        serde_json::from_slice::<serde_json::Value>(&from_env.stdout).unwrap()["command"],
        "version"
    );
    let flag = env
        .command(&["--format", "yaml", "version"])
        .env("AGENTS_FORMAT", "json")
        .output()
        .unwrap();
    assert!(stdout(&flag).starts_with("command: version"));
    let rich = stdout(&env.run(&["--format", "rich", "version"]));
    assert!(
        rich.contains('\u{256d}'),
        "explicit rich on a pipe renders as table"
    );
}

#[test]
fn a_bad_agents_format_is_named_in_the_error() {
    let env = Env::new();
    let out = env
        .command(&["version"])
        .env("AGENTS_FORMAT", "html")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(stdout(&out).contains("AGENTS_FORMAT"), "{}", stdout(&out));
}

#[test]
fn usage_errors_exit_two_and_are_enveloped_when_json_was_asked() {
    let env = Env::new();
    let (doc, code) = env.json(&["config", "get"]);
    assert_eq!(code, 2);
    assert_eq!(doc["status"], "error");
    assert_eq!(doc["exit_code"], 2);
    assert_eq!(doc["command"], "config get");
    assert_eq!(doc["error"]["code"], "USAGE");
    let out = env.run(&["no-such-command"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(out.stdout.is_empty(), "human usage errors go to stderr");
    assert!(String::from_utf8_lossy(&out.stderr).contains("no-such-command"));
}

#[test]
fn help_and_version_flags_exit_zero() {
    let env = Env::new();
    for flag in ["--help", "-h", "--version", "-V"] {
        let out = env.run(&[flag]);
        assert_eq!(out.status.code(), Some(0), "{flag}");
        assert!(!out.stdout.is_empty(), "{flag}");
    }
    assert!(stdout(&env.run(&["-V"])).contains(env!("CARGO_PKG_VERSION")));
}

#[test]
fn completion_scripts_are_printed_and_installed() {
    let env = Env::new();
    let out = env.run(&["--show-completion", "bash"]);
    assert_eq!(out.status.code(), Some(0));
    assert!(stdout(&out).contains("_agents"));
    let out = env.run(&["--install-completion", "fish"]);
    assert_eq!(out.status.code(), Some(0), "{}", stdout(&out));
    assert!(
        env.root()
            .join(".config/fish/completions/agents.fish")
            .exists()
    );
    let out = env.run(&["--show-completion", "tcsh"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(stdout(&out).contains("unsupported shell"));
}
