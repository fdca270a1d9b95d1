//! Sessions through the real binary and the scripted model server: the orchestrator lists,
//! writes and creates an action and plans it on a project under the session's profile; the
//! history reaches the next turn and older turns are summarised; export, delete and import
//! round-trip; Apply under a gating profile is refused; every command in all six formats.

use serde_json::{Value, json};

use crate::support::provider_server::{ProviderServer, Turn};
use crate::support::{Env, git, git_out, git_repo};

/// The action the orchestrator writes (offline actors, one step).
const ACTION: &str = "name: local/refresh-locks\ndescription: Refresh the lock files\ndefinition-of-done: LOCKS.md lists the refreshed locks\nstrategy-actor: builtin/checklist-strategist\nexecution-actor: builtin/script-executor\narguments:\n  - name: scope\n    type: string\n    required: true\nscript:\n  - name: write\n    run: printf 'refreshed %s\\n' {{ scope }} > LOCKS.md\n";

pub(crate) struct Setup {
    pub(crate) env: Env,
    repo: std::path::PathBuf,
    pub(crate) server: ProviderServer,
}

/// A git checkout `local/repo` in project `local/app`, and a config whose only model is
/// `scripted/m` on the scripted server (the orchestrator's default model).
pub(crate) fn setup(script: Vec<Turn>) -> Setup {
    let env = Env::new();
    let repo = git_repo(env.root(), "repo");
    let server = ProviderServer::start(script);
    std::fs::create_dir_all(env.config_path.parent().unwrap()).unwrap();
    std::fs::write(
        &env.config_path,
        format!(
            "[providers.scripted]\nkind = \"openai\"\nbase_url = \"{}\"\napi_key_env = \"SCRIPTED_API_KEY\"\n\n[providers.scripted.models.\"m\"]\ninput_usd_per_mtok = 1.0\noutput_usd_per_mtok = 2.0\n",
            server.openai_base()
        ),
    )
    .unwrap();
    let s = Setup { env, repo, server };
    ok(
        &s,
        &[
            "resource",
            "add",
            "git-checkout",
            "local/repo",
            "--path",
            s.repo.to_str().unwrap(),
        ],
    );
    ok(
        &s,
        &["project", "create", "--resource", "local/repo", "app"],
    );
    s
}

pub(crate) fn run(s: &Setup, args: &[&str]) -> (Value, i32) {
    let mut all = vec!["--format", "json"];
    all.extend_from_slice(args);
    let out = s
        .env
        .command(&all)
        .env("SCRIPTED_API_KEY", "sk-test")
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    let doc: Value = serde_json::from_str(&text)
        .or_else(|_| serde_json::from_str(text.lines().last().unwrap_or("")))
        .unwrap_or_else(|e| panic!("not JSON ({e}): {text}"));
    let code = out.status.code().unwrap();
    crate::support::through_server::record(&s.env, args, &doc, code);
    (doc, code)
}

pub(crate) fn ok(s: &Setup, args: &[&str]) -> Value {
    let (doc, code) = run(s, args);
    assert_eq!(code, 0, "{args:?}: {doc:#}");
    doc
}

pub(crate) fn create(s: &Setup, extra: &[&str]) -> String {
    let mut args = vec!["session", "create"];
    args.extend_from_slice(extra);
    ok(s, &args)["data"]["session"]["session_id"]
        .as_str()
        .unwrap()
        .to_string()
}

/// The text of every message of a recorded request (system prompt included).
fn request_text(body: &Value) -> String {
    body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["content"].to_string())
        .collect::<Vec<_>>()
        .join("\n")
}

pub(crate) fn orchestration_script() -> Vec<Turn> {
    let create = json!({"yaml": ACTION, "available": true}).to_string();
    let use_plan =
        json!({"action": "local/refresh-locks", "project": "app", "arguments": {"scope": "all"}})
            .to_string();
    vec![
        Turn::tools("", &[("list_projects", "{}")], (100, 10)),
        Turn::tools("", &[("create_action", &create)], (200, 80)),
        Turn::tools("", &[("use_plan", &use_plan)], (300, 20)),
        Turn::text(
            "Created local/refresh-locks and a plan on local/app; it waits at its gate.",
            (400, 30),
        ),
    ]
}

#[test]
fn the_orchestrator_lists_projects_creates_an_action_and_plans_it_under_the_session_profile() {
    let s = setup(orchestration_script());
    let id = create(&s, &["--name", "ops"]);
    let prompt = "Create an action that refreshes the lock files and add it to the app project";
    let doc = ok(&s, &["session", "tell", "--session", "ops", prompt]);
    let data = &doc["data"];
    assert_eq!(data["session_id"], id.as_str());
    let commands: Vec<&str> = data["commands"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["command"].as_str().unwrap())
        .collect();
    assert_eq!(commands.len(), 2, "{doc:#}");
    assert!(
        commands[0].starts_with("agents action create --available --config "),
        "{commands:?}"
    );
    assert_eq!(
        commands[1],
        "agents plan use local/refresh-locks app --automation-profile manual --arg 'scope=all'"
    );
    // The model saw the project list.
    let reqs = s.server.requests();
    assert_eq!(reqs.len(), 4);
    assert!(
        request_text(&reqs[1].body).contains("local/app"),
        "{:#}",
        reqs[1].body
    );
    // The action exists, and the plan stops at its Strategize gate under `manual`.
    ok(&s, &["action", "show", "local/refresh-locks"]);
    let plan = data["plans"][0].as_str().unwrap().to_string();
    let approvals = ok(&s, &["plan", "approvals", &plan]);
    assert_eq!(
        approvals["data"]["approvals"].as_array().unwrap().len(),
        1,
        "{approvals:#}"
    );
    assert_eq!(approvals["data"]["approvals"][0]["kind"], "phase_gate");
    // Tokens and cost of the turn: 1000 in, 140 out at $1 / $2 per million.
    assert_eq!(data["usage"]["input_tokens"], 1000);
    assert_eq!(data["usage"]["output_tokens"], 140);
    let cost = data["cost_usd"].as_f64().unwrap();
    assert!((cost - 0.00128).abs() < 1e-9, "{cost}");
    // `session show` has the message, the commands and the linked plan.
    let show = ok(&s, &["session", "show", &id[..8]]);
    let messages = show["data"]["messages"].as_array().unwrap();
    assert_eq!(messages.len(), 2);
    assert_eq!(messages[0]["content"], prompt);
    assert_eq!(messages[1]["commands"].as_array().unwrap().len(), 2);
    assert_eq!(show["data"]["plans"][0]["plan_id"], plan.as_str());
    assert_eq!(show["data"]["plans"][0]["phase"], "strategize");
    assert_eq!(show["data"]["usage"]["input_tokens"], 1000);
    // Nothing was written to the project.
    let status = git_out(&s.repo, &["status", "--porcelain"]);
    assert!(status.is_empty(), "{status}");
}

#[test]
fn a_second_turn_sees_the_first_and_max_history_summarises_older_turns() {
    let s = setup(vec![
        Turn::text("first answer", (10, 2)),
        Turn::text("second answer", (10, 2)),
        Turn::text("third answer", (10, 2)),
    ]);
    let id = create(&s, &["--max-history", "1"]);
    ok(&s, &["session", "tell", "--session", &id, "first question"]);
    ok(
        &s,
        &["session", "tell", "--session", &id, "second question"],
    );
    let reqs = s.server.requests();
    let second = request_text(&reqs[1].body);
    assert!(
        second.contains("first question") && second.contains("first answer"),
        "{second}"
    );
    // After two turns with max-history 1, turn 1 is summarised: the third request has it
    // only in the system prompt's summary, turn 2 in full.
    let doc = ok(&s, &["session", "tell", "--session", &id, "third question"]);
    assert_eq!(doc["data"]["summarized"], true);
    let third = &s.server.requests()[2].body;
    let msgs = third["messages"].as_array().unwrap();
    let system = msgs[0]["content"].as_str().unwrap();
    assert!(system.contains("turn 1 user: first question"), "{system}");
    let rest: Vec<&Value> = msgs[1..].iter().collect();
    assert_eq!(rest.len(), 3, "{third:#}");
    assert_eq!(rest[0]["content"], "second question");
    let show = ok(&s, &["session", "show", &id]);
    assert_eq!(show["data"]["session"]["summarized_turns"], 2);
    assert!(
        show["data"]["session"]["summary"]
            .as_str()
            .unwrap()
            .contains("second answer")
    );
    assert_eq!(show["data"]["messages"].as_array().unwrap().len(), 6);
}

#[test]
fn export_delete_import_round_trips_and_a_tampered_file_is_refused_naming_the_checksum() {
    let s = setup(vec![Turn::text("hello", (5, 1))]);
    let id = create(&s, &["--name", "weekly"]);
    ok(&s, &["session", "tell", "--session", &id, "hi"]);
    let before = ok(&s, &["session", "show", &id])["data"].clone();
    let file = s.env.root().join("weekly.json");
    let exported = ok(
        &s,
        &["session", "export", "-o", file.to_str().unwrap(), &id],
    );
    assert!(
        exported["data"]["checksum"]
            .as_str()
            .unwrap()
            .starts_with("sha256:")
    );
    ok(&s, &["session", "delete", "--yes", &id]);
    let (gone, code) = run(&s, &["session", "show", &id]);
    assert_eq!(code, 1, "{gone:#}");
    let imported = ok(&s, &["session", "import", "-i", file.to_str().unwrap()]);
    let new_id = imported["data"]["session_id"].as_str().unwrap();
    assert_ne!(new_id, id);
    assert_eq!(imported["data"]["imported_from"], id.as_str());
    assert_eq!(imported["data"]["actor_ref"], "resolved");
    let after = ok(&s, &["session", "show", new_id])["data"].clone();
    assert_eq!(after["messages"], before["messages"]);
    assert_eq!(after["session"]["name"], "weekly");
    // A changed message fails the checksum.
    let text = std::fs::read_to_string(&file)
        .unwrap()
        .replace("\"hello\"", "\"HELLO\"");
    let tampered = s.env.root().join("tampered.json");
    std::fs::write(&tampered, text).unwrap();
    let (doc, code) = run(&s, &["session", "import", "-i", tampered.to_str().unwrap()]);
    assert_eq!(code, 1, "{doc:#}");
    let message = doc["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("checksum mismatch") && message.contains("tampered.json"),
        "{message}"
    );
    // Another schema version is refused by name.
    let mut v: Value = serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
    v["schema_version"] = json!(9);
    std::fs::write(&tampered, v.to_string()).unwrap();
    let (doc, _) = run(&s, &["session", "import", "-i", tampered.to_str().unwrap()]);
    assert!(
        doc["error"]["message"]
            .as_str()
            .unwrap()
            .contains("schema version 9"),
        "{doc:#}"
    );
}

#[test]
fn an_apply_under_a_profile_that_gates_apply_is_refused_and_reported_to_the_model() {
    let s = setup(vec![
        Turn::tools(
            "",
            &[("apply_plan", r#"{"plan_id": "01HXM8C2ZK4Q7C2B3F2R4VYV6J"}"#)],
            (10, 5),
        ),
        Turn::text("I cannot apply it; please review it.", (20, 5)),
    ]);
    let head = |repo: &std::path::Path| git_out(repo, &["rev-parse", "HEAD"]);
    let before = head(&s.repo);
    let id = create(&s, &["--automation-profile", "manual"]);
    let doc = ok(
        &s,
        &["session", "tell", "--session", &id, "apply the last plan"],
    );
    let cmd = &doc["data"]["commands"][0];
    assert_eq!(cmd["status"], "refused", "{doc:#}");
    assert_eq!(
        cmd["command"],
        "agents plan apply --yes 01HXM8C2ZK4Q7C2B3F2R4VYV6J"
    );
    let reqs = s.server.requests();
    let told = request_text(&reqs[1].body);
    assert!(
        told.contains("refused") && told.contains("manual"),
        "{told}"
    );
    assert_eq!(head(&s.repo), before);
    git(&s.repo, &["diff", "--quiet"]);
}

#[test]
fn stream_prints_the_answer_as_it_arrives_or_json_lines_events() {
    let s = setup(vec![
        Turn::text("streamed words", (5, 2)),
        Turn::text("again", (5, 1)),
    ]);
    let id = create(&s, &[]);
    let out = s
        .env
        .command(&[
            "--format",
            "plain",
            "session",
            "tell",
            "--stream",
            "--session",
            &id,
            "hi",
        ])
        .env("SCRIPTED_API_KEY", "sk-test")
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{text}");
    assert!(
        text.contains("Mode: streaming") && text.contains("streamed words"),
        "{text}"
    );
    assert!(text.contains("Stream complete"), "{text}");
    let out = s
        .env
        .command(&[
            "--format",
            "json",
            "session",
            "tell",
            "--stream",
            "--session",
            &id,
            "again",
        ])
        .env("SCRIPTED_API_KEY", "sk-test")
        .output()
        .unwrap();
    let lines: Vec<Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert!(
        lines.iter().any(|l| l["type"] == "text_delta"),
        "{lines:#?}"
    );
    assert_eq!(lines.last().unwrap()["command"], "session tell");
}

#[test]
fn bad_inputs_name_what_is_wrong() {
    let s = setup(vec![]);
    let (doc, code) = run(&s, &["session", "show", "nope"]);
    assert_eq!(code, 1);
    assert_eq!(doc["error"]["code"], "NOT_FOUND", "{doc:#}");
    let (doc, code) = run(
        &s,
        &["session", "create", "--actor", "builtin/script-executor"],
    );
    assert_eq!(code, 1);
    assert!(
        doc["error"]["message"]
            .as_str()
            .unwrap()
            .contains("offline built-in"),
        "{doc:#}"
    );
    create(&s, &["--name", "dup"]);
    let (doc, _) = run(&s, &["session", "create", "--name", "dup"]);
    assert_eq!(doc["error"]["code"], "CONFLICT", "{doc:#}");
    let missing = s.env.root().join("missing.json");
    let (doc, _) = run(&s, &["session", "import", "-i", missing.to_str().unwrap()]);
    assert!(
        doc["error"]["message"]
            .as_str()
            .unwrap()
            .contains("missing.json"),
        "{doc:#}"
    );
}

#[test]
fn a_session_name_that_does_not_exist_is_reported_as_no_such_session() {
    let s = setup(vec![]);
    for name in ["ops", "release-train"] {
        let (doc, code) = run(&s, &["session", "tell", "--session", name, "hi"]);
        assert_eq!(code, 1, "{doc:#}");
        assert_eq!(doc["error"]["code"], "NOT_FOUND", "{doc:#}");
        let message = doc["error"]["message"].as_str().unwrap();
        assert!(
            message.contains(&format!("no session is named `{name}`")),
            "{doc:#}"
        );
        assert!(!message.contains("too short"), "{doc:#}");
    }
}

/// Every session command in every format, with ids, times, paths and sizes masked.
#[test]
fn every_session_command_in_all_six_formats() {
    let ulid = regex::Regex::new(r"[0-9A-HJKMNP-TV-Z]{26}").unwrap();
    for format in ["rich", "color", "table", "plain", "json", "yaml"] {
        let s = setup(vec![Turn::text("Nothing to do yet.", (12, 4))]);
        let id = create(&s, &["--name", "weekly"]);
        let file = s.env.root().join("export.json");
        let file = file.to_str().unwrap();
        let steps: Vec<(&str, Vec<&str>)> = vec![
            (
                "tell",
                vec!["session", "tell", "--session", "weekly", "What is there?"],
            ),
            ("list", vec!["session", "list"]),
            ("show", vec!["session", "show", "weekly"]),
            ("export", vec!["session", "export", "-o", file, "weekly"]),
            ("delete", vec!["session", "delete", "--yes", "weekly"]),
            ("import", vec!["session", "import", "-i", file]),
        ];
        let mut masks = vec![id.clone()];
        let mut outputs = Vec::new();
        let out = s
            .env
            .run(&["--format", format, "session", "create", "--name", "other"]);
        outputs.push(("create", out));
        for (name, args) in steps {
            let mut all = vec!["--format", format];
            all.extend_from_slice(&args);
            let out = s
                .env
                .command(&all)
                .env("SCRIPTED_API_KEY", "sk-test")
                .output()
                .unwrap();
            outputs.push((name, out));
        }
        for (name, out) in outputs {
            let text = super::snapshots::output_text(&out);
            for m in ulid.find_iter(&text) {
                masks.push(m.as_str().to_string());
            }
            let mut settings =
                super::snapshots::settings(&s.env, &["session", name, "--format", format]);
            // Whole ids first: ids made in the same moment share their first characters.
            for m in &masks {
                settings.add_filter(&regex::escape(m), "[ID]");
            }
            for m in &masks {
                settings.add_filter(&regex::escape(&m[..8]), "[SHORT]");
            }
            settings.add_filter(
                r"\d{4}-\d{2}-\d{2}[ T]\d{2}:\d{2}(:\d{2}(\.\d+)?Z?)?",
                "[TIME]",
            );
            settings.add_filter(r"sha256:[0-9a-f]{64}", "sha256:[SUM]");
            settings.add_filter(r"duration_ms: \d+", "duration_ms: [MS]");
            settings.add_filter(r"(Duration(?:\x1b\[0m)?: )\d+\.\ds", "${1}[S]s");
            settings.add_filter(r"\d+ (B|KB)\b", "[SIZE]");
            // An export holds times whose fractional seconds vary in length.
            settings.add_filter(r"size_bytes: \d+", "size_bytes: [SIZE]");
            settings.add_filter(r"session-\d+\.json|action-\d+\.yaml", "[FILE]");
            settings.bind(|| insta::assert_snapshot!(format!("session_{name}_{format}"), text));
        }
    }
}

/// `text`'s checksum as `session export` writes it, computed by `sha256sum`: anyone can.
fn resealed(mut doc: Value) -> String {
    let content = doc["content"].to_string();
    let out = std::process::Command::new("sh")
        .args(["-c", "printf '%s' \"$1\" | sha256sum", "sh", &content])
        .output()
        .unwrap();
    let hex = String::from_utf8(out.stdout).unwrap();
    doc["checksum"] = json!(format!("sha256:{}", hex.split_whitespace().next().unwrap()));
    doc.to_string()
}

#[test]
fn an_imported_session_edited_to_full_auto_gets_the_importers_default_profile() {
    let s = setup(vec![Turn::text("hello", (5, 1))]);
    let id = create(&s, &["--name", "shared"]);
    let file = s.env.root().join("shared.json");
    ok(
        &s,
        &["session", "export", "-o", file.to_str().unwrap(), &id],
    );
    let mut doc: Value = serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
    assert_eq!(doc["content"]["session"]["automation_profile"], "manual");
    doc["content"]["session"]["automation_profile"] = json!("full-auto");
    ok(&s, &["session", "delete", "--yes", &id]);
    let edited = s.env.root().join("edited.json");
    std::fs::write(&edited, resealed(doc)).unwrap();
    // The recomputed checksum matches: it is no protection against an edit.
    let imported = ok(&s, &["session", "import", "-i", edited.to_str().unwrap()]);
    let new_id = imported["data"]["session_id"].as_str().unwrap().to_string();
    let shown = ok(&s, &["session", "show", &new_id]);
    assert_eq!(
        shown["data"]["session"]["automation_profile"], "manual",
        "{shown:#}"
    );
    let said = imported["messages"].to_string();
    assert!(
        said.contains("full-auto") && said.contains("--keep-profile"),
        "{imported:#}"
    );
    // Kept only when the importer says so.
    ok(&s, &["session", "delete", "--yes", &new_id]);
    let kept = ok(
        &s,
        &[
            "session",
            "import",
            "--keep-profile",
            "-i",
            edited.to_str().unwrap(),
        ],
    );
    let kept_id = kept["data"]["session_id"].as_str().unwrap();
    let shown = ok(&s, &["session", "show", kept_id]);
    assert_eq!(shown["data"]["session"]["automation_profile"], "full-auto");
}

#[test]
fn an_imported_session_whose_name_holds_terminal_escapes_is_refused_and_the_name_shown_escaped() {
    let s = setup(vec![]);
    let id = create(&s, &["--name", "shared"]);
    let file = s.env.root().join("shared.json");
    ok(
        &s,
        &["session", "export", "-o", file.to_str().unwrap(), &id],
    );
    let mut doc: Value = serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
    doc["content"]["session"]["name"] = json!("\u{1b}]0;owned\u{7}\u{1b}[31mred\u{9b}2J");
    ok(&s, &["session", "delete", "--yes", &id]);
    let edited = s.env.root().join("edited.json");
    std::fs::write(&edited, resealed(doc)).unwrap();
    let path = edited.to_str().unwrap();
    for format in ["rich", "color", "table", "plain", "json", "yaml"] {
        let out = s
            .env
            .run(&["--format", format, "session", "import", "-i", path]);
        let text = String::from_utf8_lossy(&out.stdout).to_string()
            + &String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{format}: {text}");
        assert!(text.contains("session create --name"), "{format}: {text:?}");
        assert!(
            !text.contains("\u{1b}]0;")
                && !text.contains("\u{1b}[31mred")
                && !text.contains('\u{7}')
                && !text.contains('\u{9b}'),
            "{format} prints the name's control characters raw: {text:?}"
        );
    }
    // Nothing was stored, so no list can print it.
    let listed = ok(&s, &["session", "list"]);
    assert_eq!(
        listed["data"]["sessions"].as_array().unwrap().len(),
        0,
        "{listed:#}"
    );
}

#[test]
fn session_import_refuses_a_device_and_a_file_over_the_cap_before_reading_it() {
    let s = setup(vec![]);
    let (doc, code) = run(&s, &["session", "import", "-i", "/dev/zero"]);
    assert_eq!(code, 1, "{doc:#}");
    assert_eq!(doc["error"]["code"], "INVALID_INPUT", "{doc:#}");
    assert!(
        doc["error"]["message"]
            .as_str()
            .unwrap()
            .contains("not a regular file"),
        "{doc:#}"
    );
    // A sparse file: its length is over the cap, its blocks are not on disk.
    let huge = s.env.root().join("huge.json");
    std::fs::File::create(&huge)
        .unwrap()
        .set_len(64 * 1024 * 1024 + 1)
        .unwrap();
    let (doc, code) = run(&s, &["session", "import", "-i", huge.to_str().unwrap()]);
    assert_eq!(code, 1, "{doc:#}");
    assert!(
        doc["error"]["message"]
            .as_str()
            .unwrap()
            .contains("67108865 bytes is more than"),
        "{doc:#}"
    );
    let (doc, code) = run(&s, &["actor", "context", "import", "--input", "/dev/zero"]);
    assert_eq!(code, 1, "{doc:#}");
    assert!(
        doc["error"]["message"]
            .as_str()
            .unwrap()
            .contains("not a regular file"),
        "{doc:#}"
    );
}
