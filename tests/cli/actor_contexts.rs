//! Actor contexts (spec sections 05 and 06) through the real binary: a run saved with
//! `--context` is seen by a later `--load-context` run (as the scripted server receives it),
//! export and import round-trip, bad inputs are named, and every `actor context` command in
//! all six formats.

use serde_json::Value;

use crate::support::Env;
use crate::support::provider_server::{ProviderServer, Turn};

fn env_for(server: &ProviderServer) -> Env {
    let env = Env::new();
    std::fs::create_dir_all(env.config_path.parent().unwrap()).unwrap();
    std::fs::write(
        &env.config_path,
        format!(
            "[providers.scripted]\nkind = \"openai\"\nbase_url = \"{}\"\napi_key_env = \"SCRIPTED_API_KEY\"\n",
            server.openai_base()
        ),
    )
    .unwrap();
    env
}

fn run(env: &Env, args: &[&str]) -> (Value, i32) {
    let mut all = vec!["--format", "json"];
    all.extend_from_slice(args);
    let out = env
        .command(&all)
        .env("SCRIPTED_API_KEY", "sk-test")
        .output()
        .unwrap();
    let doc: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("not JSON ({e}): {}", String::from_utf8_lossy(&out.stdout)));
    (doc, out.status.code().unwrap())
}

#[test]
fn a_second_run_with_load_context_sees_the_first_runs_conversation() {
    let server = ProviderServer::start(vec![
        Turn::text("Nice to meet you, Ada.", (10, 5)),
        Turn::text("Your name is Ada.", (20, 5)),
        Turn::text("I do not know your name.", (5, 5)),
    ]);
    let env = env_for(&server);
    let (doc, code) = run(
        &env,
        &[
            "actor",
            "run",
            "--context",
            "intro",
            "scripted/m",
            "My name is Ada.",
        ],
    );
    assert_eq!(code, 0, "{doc:#}");
    assert_eq!(doc["data"]["context"], "intro");
    let (doc, code) = run(
        &env,
        &[
            "actor",
            "run",
            "--load-context",
            "intro",
            "scripted/m",
            "What is my name?",
        ],
    );
    assert_eq!(code, 0, "{doc:#}");
    let requests = server.requests();
    let messages = requests[1].body["messages"].as_array().unwrap().clone();
    let turns: Vec<(&str, &str)> = messages
        .iter()
        .filter(|m| m["role"] != "system")
        .map(|m| {
            (
                m["role"].as_str().unwrap(),
                m["content"].as_str().unwrap_or(""),
            )
        })
        .collect();
    assert_eq!(
        turns,
        [
            ("user", "My name is Ada."),
            ("assistant", "Nice to meet you, Ada."),
            ("user", "What is my name?"),
        ]
    );
    // --load-context does not change the context; a run without one starts fresh.
    let (show, _) = run(&env, &["actor", "context", "show", "intro"]);
    assert_eq!(show["data"]["context"]["messages"], 2, "{show:#}");
    run(&env, &["actor", "run", "scripted/m", "What is my name?"]);
    let fresh = server.requests()[2].body["messages"].to_string();
    assert!(!fresh.contains("Ada"), "{fresh}");
}

#[test]
fn export_and_import_round_trip_and_bad_inputs_are_named() {
    let server = ProviderServer::start(vec![Turn::text("Noted.", (1, 1))]);
    let env = env_for(&server);
    let docs = env.root().join("docs");
    std::fs::create_dir_all(&docs).unwrap();
    std::fs::write(docs.join("README.md"), "# Project\n").unwrap();
    let (doc, code) = run(
        &env,
        &[
            "actor",
            "run",
            "--context",
            "docs",
            "--context-dir",
            docs.to_str().unwrap(),
            "scripted/m",
            "Remember the readme.",
        ],
    );
    assert_eq!(code, 0, "{doc:#}");
    let sent = server.requests()[0].body["messages"].to_string();
    assert!(
        sent.contains("--- README.md ---") && sent.contains("# Project"),
        "{sent}"
    );

    let file = env.root().join("docs.json");
    let file = file.to_str().unwrap();
    let (exported, code) = run(&env, &["actor", "context", "export", "-o", file, "docs"]);
    assert_eq!(code, 0, "{exported:#}");
    assert!(
        exported["data"]["checksum"]
            .as_str()
            .unwrap()
            .starts_with("sha256:")
    );
    let (before, _) = run(&env, &["actor", "context", "show", "docs"]);
    // Over an existing context without --update: a conflict that says how to replace it.
    let (doc, code) = run(&env, &["actor", "context", "import", "-i", file]);
    assert_ne!(code, 0);
    assert_eq!(doc["error"]["code"], "CONFLICT", "{doc:#}");
    let (doc, code) = run(&env, &["actor", "context", "import", "-i", file, "copy"]);
    assert_eq!(code, 0, "{doc:#}");
    let (after, _) = run(&env, &["actor", "context", "show", "copy"]);
    assert_eq!(after["data"]["items"], before["data"]["items"]);
    let (doc, code) = run(
        &env,
        &["actor", "context", "import", "--update", "-i", file],
    );
    assert_eq!(code, 0, "{doc:#}");
    assert_eq!(doc["data"]["replaced"], true);

    // A changed file, a missing file, an unknown context and a bad name are all named.
    let text = std::fs::read_to_string(file)
        .unwrap()
        .replace("# Project", "# Changed");
    let changed = env.root().join("changed.json");
    std::fs::write(&changed, text).unwrap();
    let (doc, code) = run(
        &env,
        &[
            "actor",
            "context",
            "import",
            "-i",
            changed.to_str().unwrap(),
            "x",
        ],
    );
    assert_ne!(code, 0);
    let m = doc["error"]["message"].as_str().unwrap();
    assert!(
        m.contains("changed.json") && m.contains("checksum mismatch"),
        "{m}"
    );
    let (doc, _) = run(
        &env,
        &["actor", "context", "import", "-i", "/nonexistent.json"],
    );
    assert!(
        doc["error"]["message"]
            .as_str()
            .unwrap()
            .contains("--input /nonexistent.json"),
        "{doc:#}"
    );
    let (doc, _) = run(&env, &["actor", "context", "show", "doc"]);
    assert_eq!(doc["error"]["code"], "NOT_FOUND");
    assert!(
        doc["error"]["message"]
            .as_str()
            .unwrap()
            .contains("did you mean `docs`?"),
        "{doc:#}"
    );
    let (doc, _) = run(
        &env,
        &["actor", "run", "--context", "a b", "scripted/m", "hi"],
    );
    assert_eq!(doc["error"]["code"], "INVALID_INPUT", "{doc:#}");
    assert!(
        doc["error"]["message"]
            .as_str()
            .unwrap()
            .starts_with("--context"),
        "{doc:#}"
    );

    // rm drops the files and keeps the conversation; clear empties it; delete removes it.
    let (doc, _) = run(&env, &["actor", "context", "rm", "--yes", "docs"]);
    assert_eq!(doc["data"]["removed"][0]["items"], 1, "{doc:#}");
    let (show, _) = run(&env, &["actor", "context", "show", "docs"]);
    assert_eq!(
        (
            show["data"]["context"]["files"].as_u64(),
            show["data"]["context"]["messages"].as_u64()
        ),
        (Some(0), Some(2))
    );
    run(&env, &["actor", "context", "clear", "--yes", "docs"]);
    let (show, _) = run(&env, &["actor", "context", "show", "docs"]);
    assert_eq!(show["data"]["context"]["messages"], 0);
    let (doc, code) = run(&env, &["actor", "context", "delete", "--all"]);
    assert_eq!(code, 3, "no terminal and no --yes: {doc:#}");
    run(&env, &["actor", "context", "delete", "--yes", "--all"]);
    let (list, _) = run(&env, &["actor", "context", "list"]);
    assert_eq!(list["data"]["contexts"], serde_json::json!([]));
}

/// Every `actor context` command in every format, with times, sums and paths masked.
#[test]
fn every_actor_context_command_in_all_six_formats() {
    for format in ["rich", "color", "table", "plain", "json", "yaml"] {
        let server = ProviderServer::start(vec![Turn::text("Noted: the sky is blue.", (3, 4))]);
        let env = env_for(&server);
        let (doc, code) = run(
            &env,
            &[
                "actor",
                "run",
                "--context",
                "facts",
                "scripted/m",
                "The sky is blue.",
            ],
        );
        assert_eq!(code, 0, "{doc:#}");
        let file = env.root().join("facts.json");
        let file = file.to_str().unwrap();
        let steps: Vec<(&str, Vec<&str>)> = vec![
            ("list", vec!["actor", "context", "list"]),
            ("show", vec!["actor", "context", "show", "facts"]),
            (
                "export",
                vec!["actor", "context", "export", "-o", file, "facts"],
            ),
            (
                "import",
                vec!["actor", "context", "import", "-i", file, "copy"],
            ),
            ("rm", vec!["actor", "context", "rm", "--yes", "copy"]),
            ("clear", vec!["actor", "context", "clear", "--yes", "copy"]),
            (
                "delete",
                vec!["actor", "context", "delete", "--yes", "--all"],
            ),
        ];
        for (name, args) in steps {
            let mut all = vec!["--format", format];
            all.extend_from_slice(&args);
            let out = env.run(&all);
            let text = super::snapshots::output_text(&out);
            let mut settings = super::snapshots::settings(&env, &all);
            settings.add_filter(
                r"\d{4}-\d{2}-\d{2}[ T]\d{2}:\d{2}(:\d{2}(\.\d+)?Z?)?",
                "[TIME]",
            );
            settings.add_filter(r"\b[0-9A-HJKMNP-TV-Z]{26}\b", "[ULID]");
            settings.add_filter(r"sha256:[0-9a-f]{64}", "sha256:[SUM]");
            settings.add_filter(r#""bytes": \d+"#, r#""bytes": "[N]""#);
            settings.add_filter(r"\bbytes: \d+", "bytes: [N]");
            settings.add_filter(r"duration_ms: \d+", "duration_ms: [MS]");
            settings.add_filter(r"\d+(\.\d)? (B|KiB)\b", "[SIZE]");
            settings
                .bind(|| insta::assert_snapshot!(format!("actor_context_{name}_{format}"), text));
        }
    }
}
