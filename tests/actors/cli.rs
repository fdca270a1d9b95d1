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
    let messages = &server.requests()[0].body["messages"];
    assert_eq!(messages[0]["role"], "system");
    assert_eq!(messages[1]["content"], "Capital of France?");
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
    assert_eq!(doc["error"]["code"], "NOT_FOUND", "{doc:#}");
    let message = doc["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("local/file-ops")
            && message.contains("no custom skill of that name is registered"),
        "{message}"
    );

    let doc = json(&run(
        &env,
        &[
            "--format",
            "json",
            "actor",
            "run",
            "--resource",
            "local/nowhere",
            "scripted/m",
            "hi",
        ],
    ));
    assert_eq!(doc["error"]["code"], "NOT_FOUND", "{doc:#}");
    assert!(
        doc["error"]["message"]
            .as_str()
            .unwrap()
            .contains("local/nowhere")
    );

    let doc = json(&run(
        &env,
        &["--format", "json", "actor", "run", "local/reviewer", "hi"],
    ));
    assert_eq!(doc["error"]["code"], "NOT_FOUND", "{doc:#}");
    assert!(
        doc["error"]["message"]
            .as_str()
            .unwrap()
            .contains("no custom actor local/reviewer is registered"),
        "{doc:#}"
    );
    let doc = json(&run(
        &env,
        &[
            "--format",
            "json",
            "actor",
            "run",
            "builtin/script-executor",
            "hi",
        ],
    ));
    assert_eq!(doc["error"]["code"], "NOT_SUPPORTED", "{doc:#}");

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
    // Nothing was started: no run rows, no sandboxes.
    let db = rusqlite::Connection::open(env.data_dir.join("cleveragents.db")).unwrap();
    let runs: i64 = db
        .query_row("SELECT count(*) FROM plans", [], |r| r.get(0))
        .unwrap();
    assert_eq!(runs, 0);
}

/// A script that edits `notes.txt` over several tool-call turns with the real file tools.
fn edit_script() -> Vec<Turn> {
    vec![
        Turn::tools(
            "Reading the notes first.",
            &[("read_file", r#"{"path": "notes.txt"}"#)],
            (120, 15),
        ),
        Turn::tools(
            "",
            &[
                (
                    "edit_file",
                    r#"{"path": "notes.txt", "edits": [{"old_text": "colour", "new_text": "color"}]}"#,
                ),
                (
                    "write_file",
                    r#"{"path": "docs/CHANGES.md", "content": "- spelling: color\n"}"#,
                ),
            ],
            (180, 42),
        ),
        Turn::tools(
            "Checking.",
            &[("read_file", r#"{"path": "notes.txt"}"#)],
            (260, 11),
        ),
        Turn::text("Done: notes.txt says color now.", (300, 17)),
    ]
}

#[test]
fn actor_run_edits_a_resource_sandbox_over_several_tool_turns_and_never_the_resource() {
    for kind in ["openai", "anthropic"] {
        let server = ProviderServer::start(edit_script());
        let env = env_for(&server, kind);
        let repo = crate::support::git_repo(env.root(), "repo");
        std::fs::write(repo.join("notes.txt"), "The colour of the sky.\n").unwrap();
        crate::support::git(&repo, &["add", "notes.txt"]);
        crate::support::git(&repo, &["commit", "-qm", "notes"]);
        let (doc, code) = env.json(&[
            "resource",
            "add",
            "git-checkout",
            "local/repo",
            "--path",
            repo.to_str().unwrap(),
        ]);
        assert_eq!(code, 0, "{doc:#}");
        let before = all_bytes_under(&repo);

        let out = run(
            &env,
            &[
                "--format",
                "json",
                "actor",
                "run",
                "--resource",
                "local/repo",
                "--skill",
                "file_operations",
                "scripted/m",
                "Use American spelling in notes.txt",
            ],
        );
        let doc = json(&out);
        assert_eq!(out.status.code(), Some(0), "{kind}: {doc:#}");
        let data = &doc["data"];
        assert_eq!(data["answer"], "Done: notes.txt says color now.");
        assert_eq!(data["turns"], 4);
        let calls: Vec<(&str, bool)> = data["tool_calls"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| {
                (
                    c["name"].as_str().unwrap(),
                    c["is_error"].as_bool().unwrap(),
                )
            })
            .collect();
        assert_eq!(
            calls,
            [
                ("read_file", false),
                ("edit_file", false),
                ("write_file", false),
                ("read_file", false)
            ],
            "{kind}"
        );
        assert!(
            data["tool_calls"][3]["result"]
                .as_str()
                .unwrap()
                .contains("The color of the sky."),
            "{kind}: the last read saw the edit"
        );
        assert_eq!(data["usage"]["input_tokens"], 860);
        assert_eq!(data["usage"]["output_tokens"], 85);
        // Only the skill's tools were offered, in the provider's format.
        let tools = data["tools"].as_array().unwrap();
        assert!(tools.iter().any(|t| t == "edit_file"));
        assert!(!tools.iter().any(|t| t == "shell_execute"), "{tools:?}");
        let offered = &server.requests()[0].body["tools"];
        assert_eq!(offered.as_array().unwrap().len(), tools.len(), "{kind}");

        // The sandbox has the change; the user's checkout is byte-identical.
        let sandbox = std::path::PathBuf::from(data["sandbox"]["path"].as_str().unwrap());
        assert!(sandbox.starts_with(&env.data_dir), "{sandbox:?}");
        assert_eq!(data["sandbox"]["resource"], "local/repo");
        assert_eq!(data["sandbox"]["strategy"], "git_worktree");
        let run = data["run_id"].as_str().unwrap();
        let read = |path| crate::support::sandbox::read(&env, run, path);
        assert_eq!(
            read("notes.txt").as_deref(),
            Some("The color of the sky.\n")
        );
        assert_eq!(
            read("docs/CHANGES.md").as_deref(),
            Some("- spelling: color\n")
        );
        assert_eq!(
            all_bytes_under(&repo),
            before,
            "{kind}: the resource was written"
        );
        let changed: Vec<(&str, &str)> = data["files_changed"]
            .as_array()
            .unwrap()
            .iter()
            .map(|f| (f["path"].as_str().unwrap(), f["status"].as_str().unwrap()))
            .collect();
        assert_eq!(
            changed,
            [("docs/CHANGES.md", "added"), ("notes.txt", "modified")]
        );

        // The tool runner logged every call, and `plan diff` shows the run's changes.
        let run_id = data["run_id"].as_str().unwrap();
        let db = rusqlite::Connection::open(env.data_dir.join("cleveragents.db")).unwrap();
        let logged: Vec<(String, String)> = db
            .prepare("SELECT tool, outcome FROM tool_calls WHERE plan_id = ?1 ORDER BY seq")
            .unwrap()
            .query_map([run_id], |r| Ok((r.get(0)?, r.get(1)?)))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap();
        assert_eq!(
            logged,
            [
                ("read_file", "ok"),
                ("edit_file", "ok"),
                ("write_file", "ok"),
                ("read_file", "ok")
            ]
            .map(|(a, b)| (a.to_string(), b.to_string()))
        );
        let (diff, code) = env.json(&["plan", "diff", run_id]);
        assert_eq!(code, 0, "{diff:#}");
        let notes = &diff["data"]["resources"][0]["files"][1];
        assert_eq!(notes["path"], "notes.txt", "{diff:#}");
        let added: Vec<&str> = notes["hunks"][0]["lines"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|l| l["kind"] == "added")
            .map(|l| l["text"].as_str().unwrap())
            .collect();
        assert_eq!(added, ["The color of the sky."], "{notes:#}");
        // Changes made outside a plan's steps are attributed to no decision.
        assert_eq!(notes["hunks"][0]["decision_ids"], serde_json::json!([]));
        // An actor run is not a plan: not listed, never executed or applied.
        let (list, _) = env.json(&["plan", "list"]);
        assert!(!list.to_string().contains(run_id), "{list:#}");
        let (refused, code) = env.json(&["plan", "apply", "--yes", run_id]);
        assert_eq!(code, 1, "{refused:#}");
        assert!(
            refused["error"]["message"]
                .as_str()
                .unwrap()
                .contains("isolated actor run"),
            "{refused:#}"
        );
    }
}

#[test]
fn actor_run_without_a_resource_works_in_a_fresh_empty_sandbox() {
    let server = ProviderServer::start(vec![
        Turn::tools("", &[("list_directory", r#"{"path": "."}"#)], (10, 2)),
        Turn::tools(
            "",
            &[("write_file", r#"{"path": "hello.txt", "content": "hi\n"}"#)],
            (12, 3),
        ),
        Turn::text("Wrote hello.txt.", (14, 4)),
    ]);
    let env = env_for(&server, "openai");
    let out = run(
        &env,
        &[
            "--format",
            "plain",
            "actor",
            "run",
            "scripted/m",
            "Write hello.txt",
        ],
    );
    let text = String::from_utf8(out.stdout).unwrap();
    assert_eq!(out.status.code(), Some(0), "{text}");
    assert!(text.contains("Wrote hello.txt."), "{text}");
    assert!(text.contains("write_file"), "{text}");
    assert!(text.contains("a fresh empty directory"), "{text}");
    assert!(
        text.lines()
            .any(|l| l.trim_start().starts_with("A ") && l.trim_end().ends_with(" hello.txt")),
        "{text}"
    );
    // The first listing saw an empty directory.
    let listed = server.requests()[1].body["messages"].to_string();
    assert!(!listed.contains("hello.txt\\\""), "{listed}");
    let sandboxes = env.data_dir.join("sandboxes");
    let written: Vec<_> = walk(&sandboxes)
        .into_iter()
        .filter(|p| p.ends_with("work/hello.txt"))
        .collect();
    assert_eq!(written.len(), 1, "{written:?}");
    assert!(
        text.contains(&written[0].parent().unwrap().display().to_string()),
        "{text}"
    );
    // The finished run's sandbox goes with `plan cleanup`.
    let (doc, code) = env.json(&["plan", "cleanup", "--yes"]);
    assert_eq!(code, 0, "{doc:#}");
    assert!(!written[0].exists(), "{doc:#}");
}

#[test]
fn ctrl_c_during_actor_run_exits_130_and_records_the_run_as_cancelled() {
    let server = ProviderServer::start(vec![Turn::Stall]);
    let env = env_for(&server, "openai");
    let child = env
        .command(&["--format", "json", "actor", "run", "scripted/m", "hi"])
        .env("SCRIPTED_API_KEY", KEY)
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while server.requests().is_empty() {
        assert!(std::time::Instant::now() < deadline, "no model call");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let sent = std::time::Instant::now();
    assert!(
        std::process::Command::new("kill")
            .args(["-INT", &child.id().to_string()])
            .status()
            .unwrap()
            .success()
    );
    let out = child.wait_with_output().unwrap();
    assert!(
        sent.elapsed() < std::time::Duration::from_secs(3),
        "{:?}",
        sent.elapsed()
    );
    assert_eq!(out.status.code(), Some(130));
    let doc = json(&out);
    assert_eq!(doc["status"], "cancelled", "{doc:#}");
    assert_eq!(doc["data"]["stop"]["reason"], "cancelled", "{doc:#}");
    let db = rusqlite::Connection::open(env.data_dir.join("cleveragents.db")).unwrap();
    let state: String = db
        .query_row(
            "SELECT state FROM plans WHERE kind = 'actor_run'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(state, "cancelled");
}

fn walk(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            out.extend(walk(&path));
        } else {
            out.push(path);
        }
    }
    out
}

#[test]
fn actor_run_output_snapshots() {
    let write = r#"{"path": "capital.txt", "content": "Paris\n"}"#;
    let server = ProviderServer::start(vec![
        Turn::rate_limited("0"),
        Turn::tools("Noting it down.", &[("write_file", write)], (1000, 20)),
        Turn::text("Paris.\nIt has been the capital since 987.", (1200, 34)),
        Turn::tools("", &[("write_file", write)], (10, 2)),
        Turn::text("Paris.", (12, 3)),
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
        settings.add_filter(&regex::escape(&env.root().display().to_string()), "[ROOT]");
        settings.add_filter(r"[0-9A-HJKMNP-TV-Z]{26}", "[ULID]");
        settings.add_filter(r"call_\d+_\d+", "call_[N]");
        settings.add_filter(r#""duration_ms": \d+"#, r#""duration_ms": "[MS]""#);
        settings.add_filter(r"Duration: \d+ ms", "Duration: [MS] ms");
        settings.add_filter(r"(?m)^(\s+\d+\s+\d+\s+\d+\s+\d+)\s+\d+$", "$1  [MS]");
        settings.add_filter(&regex::escape(env!("CARGO_PKG_VERSION")), "[VERSION]");
        settings.bind(|| insta::assert_snapshot!(name, text));
    }
}

#[test]
fn a_registered_actor_runs_with_its_own_prompt_skills_and_limits() {
    let server = ProviderServer::start(vec![
        Turn::tools("", &[("search_files", r#"{"pattern": "TODO"}"#)], (10, 2)),
        Turn::tools("", &[("search_files", r#"{"pattern": "FIXME"}"#)], (10, 2)),
        Turn::text("never reached", (10, 2)),
    ]);
    let env = env_for(&server, "anthropic");
    let file = env.root().join("reviewer.yaml");
    std::fs::write(
        &file,
        "name: reviewer\nmodel: scripted/m\nsystem-prompt: \"You are {{ actor }}; you only read.\"\nskills: [search_operations]\noptions: {temperature: 0.3, max-tokens: 321}\nlimits: {max-turns: 2}\n",
    )
    .unwrap();
    let (doc, code) = env.json(&["actor", "add", "--config", file.to_str().unwrap()]);
    assert_eq!(code, 0, "{doc:#}");
    let out = run(
        &env,
        &[
            "--format",
            "json",
            "actor",
            "run",
            "local/reviewer",
            "Find the TODOs",
        ],
    );
    let doc = json(&out);
    assert_eq!(out.status.code(), Some(0), "{doc:#}");
    let data = &doc["data"];
    assert_eq!(data["actor"], "local/reviewer");
    assert_eq!(data["stop"]["reason"], "turn_limit", "{doc:#}");
    assert_eq!(doc["messages"][0]["level"], "warn", "{doc:#}");
    assert_eq!(data["turns"], 2);
    // The skill's tools only, the actor's prompt and options.
    let tools: Vec<&str> = data["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t.as_str().unwrap())
        .collect();
    assert!(
        tools.contains(&"search_files") && !tools.contains(&"write_file"),
        "{tools:?}"
    );
    let first = &server.requests()[0].body;
    assert_eq!(
        first["system"][0]["text"],
        "You are local/reviewer; you only read."
    );
    assert_eq!(first["max_tokens"], 321);
    assert_eq!(first["temperature"], 0.3);
    assert_eq!(server.requests().len(), 2, "max-turns 2 stopped the run");
    let db = rusqlite::Connection::open(env.data_dir.join("cleveragents.db")).unwrap();
    let actors: Vec<String> = db
        .prepare("SELECT actor FROM model_calls")
        .unwrap()
        .query_map([], |r| r.get(0))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    assert_eq!(actors, ["local/reviewer", "local/reviewer"]);
}

#[test]
fn actor_run_refuses_a_temperature_outside_the_providers_range_before_sending_anything() {
    let server = ProviderServer::start(vec![Turn::text("never", (1, 1))]);
    let env = env_for(&server, "anthropic");
    let out = run(
        &env,
        &[
            "--format",
            "json",
            "actor",
            "run",
            "--temperature",
            "1.5",
            "scripted/m",
            "hi",
        ],
    );
    let doc = json(&out);
    assert_eq!(doc["error"]["code"], "INVALID_INPUT", "{doc:#}");
    let message = doc["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("temperature 1.5 is outside 0 to 1"),
        "{message}"
    );
    assert!(server.requests().is_empty());
}

#[test]
fn actor_run_stopped_by_its_step_deadline_fails_with_unknown_usage_and_records_the_call() {
    let server = ProviderServer::start(vec![Turn::Drip {
        every: std::time::Duration::from_millis(100),
        tokens: true,
    }]);
    let env = env_for(&server, "openai");
    let mut config = std::fs::read_to_string(&env.config_path).unwrap();
    config = config.replace(
        "api_key_env = \"SCRIPTED_API_KEY\"\n",
        "api_key_env = \"SCRIPTED_API_KEY\"\nstep_deadline_secs = 1\n",
    );
    std::fs::write(&env.config_path, config).unwrap();
    let out = run(
        &env,
        &["--format", "json", "actor", "run", "scripted/m", "Count."],
    );
    let doc = json(&out);
    assert_ne!(out.status.code(), Some(0), "{doc:#}");
    let text = doc.to_string();
    assert!(text.contains("still working after 1 s"), "{doc:#}");
    assert!(!text.contains("answered"), "{doc:#}");
    assert!(!text.contains("-0.000000"), "{doc:#}");
    let db = rusqlite::Connection::open(env.data_dir.join("cleveragents.db")).unwrap();
    let rows: Vec<(i64, String)> = db
        .prepare("SELECT usage_reported, outcome FROM model_calls")
        .unwrap()
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    assert_eq!(
        rows,
        [(0, "error".to_string())],
        "the abandoned call is recorded, its usage not reported"
    );
}

#[test]
fn an_openai_compatible_call_carries_a_default_completion_cap_and_one_abandoned_at_its_deadline_has_unknown_usage()
 {
    let server = ProviderServer::start(vec![
        Turn::text("Short.", (10, 5)),
        Turn::Drip {
            every: std::time::Duration::from_millis(100),
            tokens: true,
        },
    ]);
    let env = env_for(&server, "openai");
    let out = run(
        &env,
        &["--format", "json", "actor", "run", "scripted/m", "Hi."],
    );
    assert_eq!(out.status.code(), Some(0), "{}", json(&out));
    let body = &server.requests()[0].body;
    assert_eq!(body["max_tokens"], 8192, "{body:#}");
    // The model's own limit lowers it; the actor's `options.max-tokens` would replace it.
    let mut config = std::fs::read_to_string(&env.config_path).unwrap();
    config = config.replace(
        "api_key_env = \"SCRIPTED_API_KEY\"\n",
        "api_key_env = \"SCRIPTED_API_KEY\"\ncall_deadline_secs = 1\n",
    );
    config.push_str("max_output_tokens = 300\n");
    std::fs::write(&env.config_path, config).unwrap();
    let out = run(
        &env,
        &["--format", "json", "actor", "run", "scripted/m", "Count."],
    );
    let doc = json(&out);
    assert_eq!(server.requests()[1].body["max_tokens"], 300, "{doc:#}");
    // A call abandoned at its deadline was being worked on: its usage is unknown, not 0.
    assert_ne!(out.status.code(), Some(0), "{doc:#}");
    assert_eq!(doc["data"]["usage_known"], false, "{doc:#}");
    let db = rusqlite::Connection::open(env.data_dir.join("cleveragents.db")).unwrap();
    let rows: Vec<(i64, Option<f64>)> = db
        .prepare("SELECT usage_reported, cost_usd FROM model_calls ORDER BY started_at")
        .unwrap()
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    assert_eq!(rows[1], (0, None), "{rows:?}");
}

#[test]
fn negative_token_counts_from_a_provider_count_as_unreported_not_as_a_free_call() {
    let server = ProviderServer::start(vec![Turn::text("Paris.", (1000, 500)).negative_usage()]);
    let env = env_for(&server, "openai");
    let out = run(
        &env,
        &["--format", "json", "actor", "run", "scripted/m", "Capital?"],
    );
    let doc = json(&out);
    assert_eq!(out.status.code(), Some(0), "{doc:#}");
    assert_eq!(doc["data"]["usage_known"], false, "{doc:#}");
    assert!(doc["data"]["cost_usd"].is_null(), "{doc:#}");
    let db = rusqlite::Connection::open(env.data_dir.join("cleveragents.db")).unwrap();
    let reported: i64 = db
        .query_row("SELECT usage_reported FROM model_calls", [], |r| r.get(0))
        .unwrap();
    assert_eq!(reported, 0);
}
