//! Automation profiles: the six built-ins match the spec's table flag by flag (spec 27), custom
//! profiles register from YAML.

use serde_json::json;

use crate::support::Env;

const FLAGS: [&str; 13] = [
    "auto_strategize",
    "auto_execute",
    "auto_apply",
    "auto_decisions_strategize",
    "auto_decisions_execute",
    "auto_validation_fix",
    "auto_strategy_revision",
    "auto_child_plans",
    "auto_retry_transient",
    "auto_checkpoint_restore",
    "require_sandbox",
    "require_checkpoints",
    "allow_unsafe_tools",
];

/// Spec 27, "Built-in profiles": one column per profile, rows in `FLAGS` order (1 = true).
const TABLE: [(&str, [u8; 13]); 6] = [
    ("locked-down", [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 0]),
    ("manual", [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 0]),
    ("supervised", [1, 0, 0, 1, 0, 0, 0, 0, 1, 0, 1, 1, 0]),
    ("trusted", [1, 1, 0, 1, 1, 1, 0, 1, 1, 0, 1, 1, 0]),
    ("autonomous", [1, 1, 0, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0]),
    ("full-auto", [1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 1]),
];

#[test]
fn show_of_each_builtin_matches_the_spec_table_for_all_13_flags() {
    let env = Env::new();
    for (name, row) in TABLE {
        let (doc, code) = env.json(&["automation-profile", "show", name]);
        assert_eq!(code, 0, "{doc:#}");
        let flags = doc["data"]["profile"]["flags"].as_object().unwrap();
        assert_eq!(flags.len(), 13, "{name}");
        for (flag, expected) in FLAGS.iter().zip(row) {
            assert_eq!(flags[*flag], json!(expected == 1), "{name}.{flag}");
        }
        assert_eq!(doc["data"]["profile"]["source"], "built-in");
        // The human formats show the same 13 values.
        let plain = String::from_utf8(
            env.run(&["--format", "plain", "automation-profile", "show", name])
                .stdout,
        )
        .unwrap();
        for (flag, expected) in FLAGS.iter().zip(row) {
            assert!(
                plain.contains(&format!("{flag}: {}", expected == 1)),
                "{name}.{flag} in\n{plain}"
            );
        }
    }
}

#[test]
fn list_has_the_six_builtins_first_and_custom_profiles_after() {
    let env = Env::new();
    let file = env.root().join("careful.yaml");
    std::fs::write(
        &file,
        "name: local/careful-auto\ndescription: Careful\nflags:\n  auto_strategize: true\n  auto_execute: true\n  auto_apply: false\n  auto_decisions_strategize: true\n  auto_decisions_execute: true\n  auto_validation_fix: true\n  auto_strategy_revision: false\n  auto_child_plans: true\n  auto_retry_transient: true\n  auto_checkpoint_restore: true\n  require_sandbox: true\n  require_checkpoints: true\n  allow_unsafe_tools: false\n",
    )
    .unwrap();
    let (doc, code) = env.json(&[
        "automation-profile",
        "add",
        "--config",
        file.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{doc:#}");
    let (doc, _) = env.json(&["automation-profile", "list"]);
    let names: Vec<&str> = doc["data"]["profiles"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        [
            "locked-down",
            "manual",
            "supervised",
            "trusted",
            "autonomous",
            "full-auto",
            "local/careful-auto"
        ]
    );
    let (doc, code) = env.json(&[
        "automation-profile",
        "add",
        "--update",
        "--config",
        file.to_str().unwrap(),
    ]);
    assert_eq!((code, doc["data"]["replaced"].clone()), (0, json!(true)));
    let (doc, code) = env.json(&["automation-profile", "remove", "--yes", "careful-auto"]);
    assert_eq!(code, 0, "{doc:#}");
    assert_eq!(doc["data"]["profile"]["name"], "local/careful-auto");
}
