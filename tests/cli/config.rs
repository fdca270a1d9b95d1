//! `agents config set|get|list`.

use std::fs;

use crate::support::{Env, stdout};

#[test]
fn yaml_and_json_config_get_are_the_same_document() {
    let env = Env::new();
    for setup in [None, Some("table")] {
        if let Some(value) = setup {
            env.run(&["config", "set", "format", value]);
        }
        let (mut json, _) = env.json(&["config", "get", "format"]);
        let yaml_out = env.run(&["--format", "yaml", "config", "get", "format"]);
        assert_eq!(yaml_out.status.code(), Some(0));
        let mut yaml: serde_json::Value = serde_yaml::from_slice(&yaml_out.stdout).unwrap();
        yaml.as_object_mut().unwrap().remove("timing");
        json.as_object_mut().unwrap().remove("timing");
        assert_eq!(yaml, json);
        assert_eq!(
            json["data"]["value"],
            setup.unwrap_or("rich"),
            "the answer is the configured format"
        );
    }
}

#[test]
fn yaml_equals_json_for_a_key_no_flag_touches() {
    let env = Env::new();
    env.run(&["config", "set", "automation-profile", "trusted"]);
    let (mut json, _) = env.json(&["config", "get", "automation-profile"]);
    let out = env.run(&["--format", "yaml", "config", "get", "automation-profile"]);
    let mut yaml: serde_json::Value = serde_yaml::from_slice(&out.stdout).unwrap();
    json.as_object_mut().unwrap().remove("timing");
    yaml.as_object_mut().unwrap().remove("timing");
    assert_eq!(yaml, json);
    assert_eq!(json["data"]["value"], "trusted");
    assert_eq!(json["data"]["source"], "file");
    assert_eq!(json["data"]["line"], 1);
}

#[test]
fn unknown_keys_fail_with_a_code_and_the_nearest_key() {
    let env = Env::new();
    let (doc, code) = env.json(&["config", "get", "no-such-key"]);
    assert_eq!(code, 1);
    assert_eq!(doc["status"], "error");
    assert_eq!(doc["error"]["code"], "NOT_FOUND");
    let (doc, _) = env.json(&["config", "get", "fromat"]);
    assert_eq!(doc["error"]["suggestions"][0], "did you mean `format`?");
}

#[test]
fn invalid_values_are_refused_and_nothing_is_written() {
    let env = Env::new();
    let (doc, code) = env.json(&["config", "set", "format", "html"]);
    assert_eq!(code, 1);
    assert_eq!(doc["error"]["code"], "INVALID_INPUT");
    assert!(doc["error"]["message"].as_str().unwrap().contains("plain"));
    assert!(!env.config_path.exists());
}

#[test]
fn set_keeps_comments_and_get_shows_the_resolution_chain() {
    let env = Env::new();
    fs::create_dir_all(env.config_path.parent().unwrap()).unwrap();
    fs::write(
        &env.config_path,
        "# my settings\n\n# output\nformat = \"plain\"  # for logs\n",
    )
    .unwrap();
    let (doc, code) = env.json(&["config", "set", "log-level", "debug"]);
    assert_eq!(code, 0, "{doc}");
    let (doc, _) = env.json(&["config", "set", "format", "table"]);
    assert_eq!(doc["data"]["previous"], "plain");
    assert_eq!(doc["data"]["line"], 4);
    let text = fs::read_to_string(&env.config_path).unwrap();
    assert!(
        text.starts_with("# my settings\n\n# output\nformat = \"table\"  # for logs\n"),
        "{text}"
    );
    assert!(text.contains("log-level = \"debug\""));

    let out = env
        .command(&["--format", "plain", "config", "get", "format"])
        .env("AGENTS_FORMAT", "yaml")
        .output()
        .unwrap();
    let text = stdout(&out);
    assert!(
        text.contains("1. CLI flag (--format): (not set)"),
        "this command's own --format only renders: {text}"
    );
    assert!(text.contains("2. env var (AGENTS_FORMAT): yaml"), "{text}");
    assert!(text.contains("3. config file ("), "{text}");
    assert!(text.contains("4. default (default): rich"), "{text}");
    assert!(text.contains("Winner: env var (level 2)"), "{text}");

    let out = env.run(&["--format", "plain", "-vv", "config", "get", "log-level"]);
    let text = stdout(&out);
    assert!(text.contains("1. CLI flag (-v): trace"), "{text}");
    assert!(text.contains("Winner: CLI flag (level 1)"), "{text}");
}

#[test]
fn provider_tables_can_be_set_and_listed() {
    let env = Env::new();
    for (k, v) in [
        ("providers.ollama.kind", "openai"),
        ("providers.ollama.base_url", "http://127.0.0.1:11434/v1"),
        (
            "providers.openai.models.\"gpt-4.1\".input_usd_per_mtok",
            "2",
        ),
    ] {
        let (doc, code) = env.json(&["config", "set", k, v]);
        assert_eq!(code, 0, "{k}: {doc}");
    }
    let (doc, _) = env.json(&["config", "list", "^providers\\.ollama"]);
    let keys: Vec<&str> = doc["data"]["settings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["key"].as_str().unwrap())
        .collect();
    assert_eq!(
        keys,
        [
            "providers.ollama.kind",
            "providers.ollama.base_url",
            "providers.ollama.timeout_secs",
            "providers.ollama.max_retries"
        ]
    );
    let (doc, code) = env.json(&[
        "config",
        "set",
        "providers.ollama.api_key_env",
        "sk-live-123",
    ]);
    assert_eq!(code, 1);
    assert!(
        doc["error"]["message"]
            .as_str()
            .unwrap()
            .contains("never the key itself")
    );
    assert!(
        !fs::read_to_string(&env.config_path)
            .unwrap()
            .contains("sk-live")
    );
}

#[test]
fn a_broken_config_file_is_reported_with_its_line() {
    let env = Env::new();
    fs::create_dir_all(env.config_path.parent().unwrap()).unwrap();
    fs::write(&env.config_path, "format = \"json\"\nformat-x = 1\n").unwrap();
    let out = env.run(&["--format", "json", "info"]);
    assert_eq!(out.status.code(), Some(1));
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(doc["error"]["code"], "CONFIG_INVALID");
    assert!(
        doc["error"]["message"].as_str().unwrap().contains("line 2"),
        "{doc}"
    );
}

#[test]
fn two_processes_setting_different_keys_fifty_times_lose_nothing() {
    let env = Env::new();
    env.run(&["version"]);
    let spawn = |key: &'static str, values: [&'static str; 2]| {
        let mut cmds: Vec<_> = (0..50)
            .map(|i| env.command(&["config", "set", key, values[i % 2]]))
            .collect();
        std::thread::spawn(move || {
            for cmd in &mut cmds {
                let out = cmd.output().unwrap();
                assert_eq!(
                    out.status.code(),
                    Some(0),
                    "{}",
                    String::from_utf8_lossy(&out.stdout)
                );
            }
        })
    };
    let a = spawn("format", ["json", "table"]);
    let b = spawn("log-level", ["debug", "warn"]);
    a.join().unwrap();
    b.join().unwrap();
    let text = fs::read_to_string(&env.config_path).unwrap();
    let parsed: toml::Table = toml::from_str(&text).unwrap();
    assert_eq!(parsed["format"].as_str(), Some("table"), "{text}");
    assert_eq!(parsed["log-level"].as_str(), Some("warn"), "{text}");
}

#[test]
fn config_list_filters_by_value_as_well_as_by_key() {
    let env = Env::new();
    env.run(&["config", "set", "format", "table"]);
    let keys = |args: &[&str]| -> Vec<String> {
        let (doc, code) = env.json(args);
        assert_eq!(code, 0, "{doc:#}");
        doc["data"]["settings"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s["key"].as_str().unwrap().to_string())
            .collect()
    };
    assert_eq!(
        keys(&["config", "list", "--filter-values", "^table$"]),
        ["format"]
    );
    let anthropic = keys(&["config", "list", "--filter-values", "anthropic"]);
    assert!(!anthropic.is_empty());
    assert!(
        anthropic
            .iter()
            .all(|k| k.starts_with("providers.anthropic")),
        "{anthropic:?}"
    );
    assert_eq!(
        keys(&["config", "list", "--filter-values", "anthropic", "base_url"]),
        ["providers.anthropic.base_url"]
    );
    let (doc, code) = env.json(&["config", "list", "--filter-values", "("]);
    assert_ne!(code, 0);
    assert!(
        doc["error"]["message"]
            .as_str()
            .unwrap()
            .contains("--filter-values"),
        "{doc:#}"
    );
}

#[test]
fn diagnostics_reports_the_free_disk_space_of_the_data_directory() {
    let env = Env::new();
    let (doc, _) = env.json(&["diagnostics"]);
    let disk = doc["data"]["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == "Disk space")
        .unwrap_or_else(|| panic!("no disk check: {doc:#}"))
        .clone();
    assert!(
        disk["details"].as_str().unwrap().contains("GiB free of"),
        "{disk:#}"
    );
}

/// `config set` on the file `init` wrote (comments only) keeps its header comments at the top:
/// a new key or table goes after them, a new table at the end.
#[test]
fn config_set_on_the_file_init_wrote_adds_after_its_comments_not_above_them() {
    let env = crate::support::Env::new();
    let (doc, code) = env.json(&["init", "--yes"]);
    assert_eq!(code, 0, "{doc:#}");
    let template = std::fs::read_to_string(&env.config_path).unwrap();
    for (key, value) in [
        ("providers.ollama.base_url", "http://127.0.0.1:11434/v1"),
        ("format", "plain"),
    ] {
        let (doc, code) = env.json(&["config", "set", key, value]);
        assert_eq!(code, 0, "{doc:#}");
    }
    let text = std::fs::read_to_string(&env.config_path).unwrap();
    assert!(
        text.starts_with(&template),
        "the template's comments stay first, unchanged:\n{text}"
    );
    let added = &text[template.len()..];
    let format_at = added.find("format = \"plain\"").expect(&text);
    let table_at = added.find("[providers.ollama]").expect(&text);
    assert!(format_at < table_at, "the new table is last:\n{text}");
    let (doc, code) = env.json(&["config", "list"]);
    assert_eq!(code, 0, "{doc:#}");
}
