//! `agents actor run` through the real binary against the scripted server, and the proof that
//! the API key appears nowhere: not in the log file, the database files, or the output.

use std::path::Path;
use std::process::Output;

use serde_json::Value;

use super::KEY;
use crate::support::Env;
use crate::support::provider_server::{ProviderServer, Turn};

/// An environment whose config has a `scripted` provider of `kind` pointing at `server`, with
/// prices for model `m`.
fn env_for(server: &ProviderServer, kind: &str) -> Env {
    let env = Env::new();
    let base = if kind == "openai" {
        server.openai_base()
    } else {
        server.anthropic_base()
    };
    std::fs::create_dir_all(env.config_path.parent().unwrap()).unwrap();
    std::fs::write(
        &env.config_path,
        format!(
            "[providers.scripted]\nkind = \"{kind}\"\nbase_url = \"{base}\"\napi_key_env = \"SCRIPTED_API_KEY\"\n\n\
             [providers.scripted.models.\"m\"]\ninput_usd_per_mtok = 1.0\noutput_usd_per_mtok = 2.0\n"
        ),
    )
    .unwrap();
    env
}

/// Runs the binary with the key in its environment and logging at trace level.
fn run(env: &Env, args: &[&str]) -> Output {
    env.command(args)
        .env("SCRIPTED_API_KEY", KEY)
        .env("AGENTS_LOG", "trace")
        .output()
        .unwrap()
}

fn json(out: &Output) -> Value {
    serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("not JSON ({e}): {}", String::from_utf8_lossy(&out.stdout)))
}

/// Every byte of every file under `dir`.
fn all_bytes_under(dir: &Path) -> Vec<(String, Vec<u8>)> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            out.extend(all_bytes_under(&path));
        } else {
            out.push((path.display().to_string(), std::fs::read(&path).unwrap()));
        }
    }
    out
}

fn contains(haystack: &[u8], needle: &str) -> bool {
    haystack
        .windows(needle.len())
        .any(|w| w == needle.as_bytes())
}

#[test]
fn actor_run_prints_the_answer_and_usage_in_json_and_plain_and_records_the_calls() {
    let server = ProviderServer::start(vec![
        Turn::text("Paris is the capital of France.", (1000, 500)),
        Turn::text("Lyon is the third-largest city.", (10, 5)),
    ]);
    let env = env_for(&server, "openai");
    let out = run(
        &env,
        &[
            "--format",
            "json",
            "actor",
            "run",
            "scripted/m",
            "Capital of France?",
        ],
    );
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    let doc = json(&out);
    let data = &doc["data"];
    assert_eq!(data["answer"], "Paris is the capital of France.");
    assert_eq!(data["actor"], "scripted/m");
    assert_eq!(data["stop"]["reason"], "answered");
    assert_eq!(data["usage"]["input_tokens"], 1000);
    assert_eq!(data["usage"]["output_tokens"], 500);
    assert_eq!(data["cost_usd"], 0.002);
    assert_eq!(data["tool_calls"], serde_json::json!([]));
    assert_eq!(
        server.requests()[0].body["messages"][0]["content"],
        "Capital of France?"
    );
    assert_eq!(server.requests()[0].body["stream"], true);

    let answer_file = env.root().join("answer.txt");
    let out = run(
        &env,
        &[
            "--format",
            "plain",
            "actor",
            "run",
            "-o",
            answer_file.to_str().unwrap(),
            "scripted/m",
            "And Lyon?",
        ],
    );
    let text = String::from_utf8(out.stdout).unwrap();
    assert_eq!(out.status.code(), Some(0), "{text}");
    assert!(text.contains("Lyon is the third-largest city."), "{text}");
    assert!(text.contains("10 tokens in, 5 out"), "{text}");
    assert_eq!(
        std::fs::read_to_string(&answer_file).unwrap(),
        "Lyon is the third-largest city."
    );

    let db = rusqlite::Connection::open(env.data_dir.join("cleveragents.db")).unwrap();
    let rows: Vec<(String, i64, i64, Option<f64>)> = db
        .prepare("SELECT actor, input_tokens, output_tokens, cost_usd FROM model_calls ORDER BY started_at")
        .unwrap()
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    assert_eq!(
        rows,
        [
            ("scripted/m".to_string(), 1000, 500, Some(0.002)),
            ("scripted/m".to_string(), 10, 5, Some(0.00002))
        ]
    );
}

#[test]
fn the_api_key_appears_nowhere_in_log_database_or_output_even_after_a_401() {
    for kind in ["openai", "anthropic"] {
        let server = ProviderServer::start(vec![
            Turn::text("fine", (3, 1)),
            Turn::Unauthorized,
            Turn::rate_limited("0"),
            Turn::Unauthorized,
        ]);
        let env = env_for(&server, kind);
        let mut outputs = Vec::new();
        let ok = run(
            &env,
            &["--format", "json", "actor", "run", "scripted/m", "hi"],
        );
        assert_eq!(ok.status.code(), Some(0));
        for format in ["json", "plain"] {
            let failed = run(
                &env,
                &["--format", format, "actor", "run", "scripted/m", "hi"],
            );
            assert_eq!(
                failed.status.code(),
                Some(1),
                "{}",
                String::from_utf8_lossy(&failed.stdout)
            );
            outputs.push(failed);
        }
        outputs.push(ok);

        // The key really was sent, and the server echoed it in its 401 message.
        let requests = server.requests();
        assert_eq!(requests.len(), 4);
        let header = if kind == "openai" {
            "authorization"
        } else {
            "x-api-key"
        };
        assert!(requests.iter().all(|r| r.headers[header].contains(KEY)));

        // The failure names the provider and the variable.
        let doc = json(&outputs[0]);
        assert_eq!(doc["error"]["code"], "PROVIDER_AUTH");
        let message = doc["error"]["message"].as_str().unwrap();
        assert!(
            message.contains("provider `scripted`") && message.contains("SCRIPTED_API_KEY"),
            "{message}"
        );

        for out in &outputs {
            for stream in [&out.stdout, &out.stderr] {
                assert!(
                    !contains(stream, KEY) && !contains(stream, "TOPSECRET"),
                    "{}",
                    String::from_utf8_lossy(stream)
                );
            }
        }
        let files = all_bytes_under(&env.data_dir);
        let log = files
            .iter()
            .find(|(p, _)| p.ends_with(".log"))
            .expect("a log file was written");
        assert!(
            contains(&log.1, "model call"),
            "the log has the call records"
        );
        assert!(files.iter().any(|(p, _)| p.ends_with("cleveragents.db")));
        for (path, bytes) in &files {
            assert!(!contains(bytes, KEY), "the key is in {path}");
            assert!(
                !contains(bytes, "TOPSECRET"),
                "part of the key is in {path}"
            );
        }
    }
}

#[test]
fn actor_run_says_what_is_not_supported_and_what_is_missing() {
    let server = ProviderServer::start(vec![]);
    let env = env_for(&server, "openai");
    let out = run(
        &env,
        &[
            "--format",
            "json",
            "actor",
            "run",
            "--skill",
            "local/file-ops",
            "scripted/m",
            "hi",
        ],
    );
    let doc = json(&out);
    assert_eq!(doc["error"]["code"], "NOT_SUPPORTED");
    assert!(
        doc["error"]["message"]
            .as_str()
            .unwrap()
            .contains("--skill")
    );

    let doc = json(&run(
        &env,
        &["--format", "json", "actor", "run", "local/reviewer", "hi"],
    ));
    assert_eq!(doc["error"]["code"], "NOT_SUPPORTED");
    assert!(
        doc["error"]["message"]
            .as_str()
            .unwrap()
            .contains("custom actors is not yet supported")
    );

    let out = env
        .command(&["--format", "json", "actor", "run", "scripted/m", "hi"])
        .output()
        .unwrap();
    let doc = json(&out);
    assert_eq!(doc["error"]["code"], "PROVIDER_AUTH");
    assert_eq!(
        doc["error"]["message"],
        "provider `scripted` needs an API key: set the environment variable SCRIPTED_API_KEY"
    );
    assert!(server.requests().is_empty());
}

#[test]
fn actor_run_output_snapshots() {
    let server = ProviderServer::start(vec![
        Turn::rate_limited("0"),
        Turn::text("Paris.\nIt has been the capital since 987.", (1200, 34)),
        Turn::text("Lyon.", (12, 3)),
    ]);
    let env = env_for(&server, "anthropic");
    for (name, format) in [("actor_run_plain", "plain"), ("actor_run_json", "json")] {
        let args = [
            "--format",
            format,
            "actor",
            "run",
            "scripted/m",
            "Capital of France?",
        ];
        let out = run(&env, &args);
        let text = format!(
            "exit: {}\n--- stdout\n{}--- stderr\n{}",
            out.status.code().unwrap_or(-1),
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        let mut settings = insta::Settings::clone_current();
        settings.set_snapshot_path("../../snapshots/cli");
        settings.set_prepend_module_to_snapshot(false);
        settings.set_omit_expression(true);
        settings.set_description(format!("agents {}", args.join(" ")));
        settings.add_filter(r"[0-9A-HJKMNP-TV-Z]{26}", "[ULID]");
        settings.add_filter(r#""duration_ms": \d+"#, r#""duration_ms": "[MS]""#);
        settings.add_filter(r"Duration: \d+ ms", "Duration: [MS] ms");
        settings.add_filter(r"(?m)^(\s+\d+\s+\d+\s+\d+\s+\d+)\s+\d+$", "$1  [MS]");
        settings.add_filter(&regex::escape(env!("CARGO_PKG_VERSION")), "[VERSION]");
        settings.bind(|| insta::assert_snapshot!(name, text));
    }
}
