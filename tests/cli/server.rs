//! `agents server` (spec section 21): the engine's protocol over HTTP, tried through the real
//! binary as a server host and as its clients would.

use std::io::{BufRead, BufReader};
use std::process::Stdio;

use serde_json::Value;

use crate::support::server::{Server, masked, server_with_a_plan};
use crate::support::{Env, db_file};

/// The number of events in the server's log, read in process on the server host.
fn event_count(server: &Server, plan: &str) -> usize {
    let (doc, code) = server.env.json(&["plan", "events", plan]);
    assert_eq!(code, 0, "{doc:#}");
    doc["data"]["events"].as_array().unwrap().len()
}

#[test]
fn a_request_without_a_valid_token_gets_401_and_changes_nothing() {
    let (server, plan) = server_with_a_plan();
    let before = event_count(&server, &plan);
    let call = format!(r#"{{"call":"plan_status","plan":"{plan}"}}"#);
    for token in [None, Some("agt_0000"), Some("not-even-a-token")] {
        let (status, body) = server.http("POST", "/v1/call", token, &call);
        assert_eq!(status, 401, "token {token:?}: {body}");
        let err: Value = serde_json::from_str(&body).unwrap();
        assert_eq!(err["error"]["code"], "UNAUTHENTICATED");
        let hints = err["error"]["hints"].to_string();
        assert!(hints.contains("agents server token create"), "{hints}");
    }
    let (status, _) = server.http("POST", "/v1/call", Some(&server.token), &call);
    assert_eq!(status, 200);

    // A revoked token stops working at its next request.
    let (doc, code) = server.env.json(&["server", "token", "revoke", "tests"]);
    assert_eq!(code, 0, "{doc:#}");
    let (status, _) = server.http("POST", "/v1/call", Some(&server.token), &call);
    assert_eq!(status, 401);
    let client = Env::new();
    let (doc, code) = server.client_json(&client, &["plan", "status", &plan]);
    assert_eq!(code, 1, "{doc:#}");
    assert_eq!(doc["error"]["code"], "UNAUTHENTICATED");
    assert_eq!(event_count(&server, &plan), before);
}

#[test]
fn health_checks_answer_without_a_token() {
    let server = Server::start(Env::new());
    assert_eq!(server.http("GET", "/healthz", None, "").0, 200);
    let (status, body) = server.http("GET", "/readyz", None, "");
    assert_eq!(status, 200, "{body}");
    assert_eq!(serde_json::from_str::<Value>(&body).unwrap()["ready"], true);
    let (status, body) = server.http("GET", "/v2/call", Some(&server.token), "");
    assert_eq!(status, 404, "{body}");
}

#[test]
fn an_unknown_call_is_refused_by_name() {
    let server = Server::start(Env::new());
    let (status, body) = server.http(
        "POST",
        "/v1/call",
        Some(&server.token),
        r#"{"call":"drop_everything"}"#,
    );
    assert_eq!(status, 400, "{body}");
    assert!(body.contains("drop_everything"), "{body}");
}

#[test]
fn plain_http_on_a_non_loopback_address_is_refused() {
    let env = Env::new();
    let out = env.run(&[
        "--format",
        "json",
        "server",
        "start",
        "--listen",
        "0.0.0.0:0",
    ]);
    assert_eq!(out.status.code(), Some(1));
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(doc["error"]["code"], "INVALID_INPUT");
    assert!(
        doc["error"]["message"]
            .as_str()
            .unwrap()
            .contains("0.0.0.0:0"),
        "{doc:#}"
    );
    assert!(doc.to_string().contains("--insecure-http"), "{doc:#}");
}

#[test]
fn plan_status_through_a_server_equals_the_in_process_view_and_the_client_keeps_no_database() {
    let (server, plan) = server_with_a_plan();
    let (local, code) = server.env.json(&["plan", "status", &plan]);
    assert_eq!(code, 0, "{local:#}");
    let client = Env::new();
    let (remote, code) = server.client_json(&client, &["plan", "status", &plan[..10]]);
    assert_eq!(code, 0, "{remote:#}");
    assert_eq!(
        masked(remote["data"].clone()),
        masked(local["data"].clone())
    );
    assert!(
        !db_file(&client).exists(),
        "the client made a database at {}",
        db_file(&client).display()
    );
    // A suggested command goes to the same server.
    let answer = remote["data"]["pending_approvals"][0]["answer_command"]
        .as_str()
        .unwrap();
    assert!(
        answer.contains(&format!("--server {}", server.url)),
        "{answer}"
    );
}

#[test]
fn plan_list_through_a_server_equals_the_in_process_list_with_the_same_filters() {
    let (server, plan) = server_with_a_plan();
    let client = Env::new();
    for filters in [
        &[][..],
        &["--state", "complete"][..],
        &["--phase", "applied"][..],
        &["--action", "quickstart-format"][..],
        &["quickstart"][..],
    ] {
        let args: Vec<&str> = ["plan", "list"].iter().chain(filters).copied().collect();
        let (local, code) = server.env.json(&args);
        assert_eq!(code, 0, "{local:#}");
        let (remote, code) = server.client_json(&client, &args);
        assert_eq!(code, 0, "{remote:#}");
        assert_eq!(remote["data"], local["data"], "plan list {filters:?}");
    }
    let (remote, _) = server.client_json(&client, &["plan", "list"]);
    assert_eq!(remote["data"]["plans"][0]["plan_id"], plan.as_str());
    let (doc, code) = server.client_json(&client, &["plan", "list", "--project", "nope"]);
    assert_eq!(code, 1, "{doc:#}");
    assert_eq!(doc["error"]["code"], "NOT_FOUND");
    assert!(!db_file(&client).exists());
}

#[test]
fn info_names_the_server_in_its_server_mode_line() {
    let server = Server::start(Env::new());
    let client = Env::new();
    let (doc, code) = client.json(&["info"]);
    assert_eq!(code, 0, "{doc:#}");
    assert_eq!(doc["data"]["server_mode"], "disabled");
    let (doc, code) = server.client_json(&client, &["info"]);
    assert_eq!(code, 0, "{doc:#}");
    assert_eq!(doc["data"]["server_mode"], server.url.as_str());
}

#[test]
fn a_command_not_served_yet_refuses_the_server_and_touches_nothing() {
    let server = Server::start(Env::new());
    let client = Env::new();
    let (doc, code) = server.client_json(&client, &["quickstart", "--headless"]);
    assert_eq!(code, 1, "{doc:#}");
    assert_eq!(doc["error"]["code"], "NOT_SUPPORTED");
    assert!(!db_file(&client).exists());
}

#[test]
fn an_unreachable_server_is_an_io_error_naming_its_url() {
    let client = Env::new();
    let (doc, code) = client.json(&["--server", "http://127.0.0.1:9", "plan", "status", "01"]);
    assert_eq!(code, 1, "{doc:#}");
    assert_eq!(doc["error"]["code"], "IO_ERROR");
    assert!(
        doc["error"]["message"]
            .as_str()
            .unwrap()
            .contains("http://127.0.0.1:9"),
        "{doc:#}"
    );
}

#[test]
fn login_keeps_the_token_in_a_private_credentials_file_and_server_status_answers_by_name() {
    use std::io::Write;
    use std::os::unix::fs::PermissionsExt;
    let server = Server::start(Env::new());
    let client = Env::new();
    let mut login = client
        .command(&["server", "login", "team", &server.url, "--token-stdin"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    writeln!(login.stdin.take().unwrap(), "{}", server.token).unwrap();
    let out = login.wait_with_output().unwrap();
    assert!(out.status.success(), "{out:?}");
    let credentials = client
        .config_path
        .parent()
        .unwrap()
        .join("credentials.toml");
    let mode = std::fs::metadata(&credentials)
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o600);
    let config = std::fs::read_to_string(&client.config_path).unwrap();
    assert!(config.contains(&server.url), "{config}");
    assert!(
        !config.contains(&server.token),
        "the token leaked into config.toml"
    );

    let (doc, code) = client.json(&["--server", "team", "server", "status"]);
    assert_eq!(code, 0, "{doc:#}");
    assert_eq!(doc["data"]["server"]["protocol"], "v1");
    assert_eq!(doc["data"]["server"]["mode"], "server");
    let (doc, code) = client.json(&["--server", "nobody", "server", "status"]);
    assert_eq!(code, 1, "{doc:#}");
    assert_eq!(doc["error"]["code"], "NOT_FOUND");
    assert!(doc.to_string().contains("known servers: team"), "{doc:#}");
}

/// Reads `plan events --follow --format json` lines through the server until `stop` says so
/// or the follower ends; the `seq` of each event line.
fn follow_seqs(
    server: &Server,
    client: &Env,
    plan: &str,
    after: i64,
    mut stop: impl FnMut(&[i64]) -> bool,
) -> Vec<i64> {
    let after = after.to_string();
    let mut child = server
        .client(
            client,
            &[
                "--format", "json", "plan", "events", "--follow", "--after", &after, plan,
            ],
        )
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut seqs = Vec::new();
    let lines = BufReader::new(child.stdout.take().unwrap()).lines();
    for line in lines {
        // Events are JSON Lines; the closing envelope spans several lines.
        let event: Option<Value> = serde_json::from_str(&line.unwrap()).ok();
        if let Some(seq) = event.as_ref().and_then(|e| e["seq"].as_i64()) {
            seqs.push(seq);
        }
        if stop(&seqs) {
            break;
        }
    }
    let _ = child.kill();
    let _ = child.wait();
    seqs
}

#[test]
fn a_follower_through_the_server_sees_another_clients_work_in_order_and_resumes_without_gap() {
    let (server, plan) = server_with_a_plan();
    let client = Env::new();
    let history = event_count(&server, &plan);
    assert!(history > 4, "{history}");
    // The first follower is killed after four events.
    let first = follow_seqs(&server, &client, &plan, 0, |s| s.len() == 4);
    assert_eq!(first.len(), 4);
    // Another client (the server host's own CLI) applies the plan meanwhile.
    let (doc, code) = server.env.json(&["plan", "apply", "--yes", &plan]);
    assert_eq!(code, 0, "{doc:#}");
    // The restarted follower goes on from the last seq it printed, to the plan's end.
    let rest = follow_seqs(&server, &client, &plan, *first.last().unwrap(), |_| false);
    let (all, _) = server.env.json(&["plan", "events", &plan]);
    let expected: Vec<i64> = all["data"]["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["seq"].as_i64().unwrap())
        .collect();
    assert!(expected.len() > history, "Apply wrote no events");
    let seen: Vec<i64> = first.into_iter().chain(rest).collect();
    assert_eq!(seen, expected, "lost, repeated or out of order");
}

#[test]
fn a_plan_is_answered_applied_and_cancelled_through_a_server_as_in_process() {
    let (server, plan) = server_with_a_plan();
    let client = Env::new();
    let (local, _) = server.env.json(&["plan", "approvals"]);
    let (remote, code) = server.client_json(&client, &["plan", "approvals"]);
    assert_eq!(code, 0, "{remote:#}");
    assert_eq!(
        masked(remote["data"].clone()),
        masked(local["data"].clone())
    );
    assert_eq!(remote["data"]["approvals"].as_array().unwrap().len(), 1);

    // Apply through the server: the server's checkout gets the commit.
    let (doc, code) = server.client_json(&client, &["plan", "apply", "--yes", &plan]);
    assert_eq!(code, 0, "{doc:#}");
    let (status, _) = server.env.json(&["plan", "status", &plan]);
    assert_eq!(status["data"]["phase"], "applied", "{status:#}");
    let (doc, code) = server.client_json(&client, &["plan", "apply", "--yes", &plan]);
    assert_eq!(code, 1, "{doc:#}");
    assert_eq!(doc["error"]["code"], "CONFLICT");

    // A second plan, cancelled from the client.
    let (doc, code) = server.env.json(&["quickstart", "--headless"]);
    assert_eq!(code, 3, "{doc:#}");
    let second = doc["data"]["plan_id"].as_str().unwrap().to_string();
    let (doc, code) = server.client_json(&client, &["plan", "cancel", &second]);
    assert_eq!(code, 0, "{doc:#}");
    assert_eq!(doc["data"]["cancelled"], true);
    let (status, _) = server.env.json(&["plan", "status", &second]);
    assert_eq!(status["data"]["state"], "cancelled", "{status:#}");
    assert!(!db_file(&client).exists());
}

#[test]
fn a_streamed_apply_through_a_server_prints_the_plans_events_in_order_then_the_envelope() {
    let (server, plan) = server_with_a_plan();
    let client = Env::new();
    let before = event_count(&server, &plan);
    let out = server
        .client(
            &client,
            &[
                "--format", "json", "plan", "apply", "--yes", "--stream", &plan,
            ],
        )
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let lines: Vec<Value> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let (envelope, events) = lines.split_last().unwrap();
    assert_eq!(envelope["command"], "plan apply", "{envelope:#}");
    let seqs: Vec<i64> = events.iter().map(|e| e["seq"].as_i64().unwrap()).collect();
    let (all, _) = server.env.json(&["plan", "events", &plan]);
    let expected: Vec<i64> = all["data"]["events"].as_array().unwrap()[before..]
        .iter()
        .map(|e| e["seq"].as_i64().unwrap())
        .collect();
    assert!(!expected.is_empty());
    assert_eq!(seqs, expected, "lost, repeated or out of order");
    assert!(
        events
            .iter()
            .any(|e| e["type"] == "apply_complete" || e["kind"]["type"] == "apply_complete"),
        "{events:#?}"
    );
}

#[test]
fn hunks_are_reviewed_through_a_server_and_the_marks_land_on_the_server() {
    let (server, plan) = server_with_a_plan();
    let client = Env::new();
    let (local, code) = server.env.json(&["plan", "review", &plan]);
    assert_eq!(code, 0, "{local:#}");
    let (remote, code) = server.client_json(&client, &["plan", "review", &plan]);
    assert_eq!(code, 0, "{remote:#}");
    assert_eq!(remote["data"], local["data"]);
    let first = remote["data"]["files"][0]["path"]
        .as_str()
        .unwrap()
        .to_string();
    let (doc, code) = server.client_json(
        &client,
        &[
            "plan",
            "review",
            &plan,
            "--reject",
            &first,
            "--reason",
            "not this one",
        ],
    );
    assert_eq!(code, 0, "{doc:#}");
    let (after, _) = server.env.json(&["plan", "review", &plan]);
    assert_eq!(after["data"]["files"][0]["mark"], "rejected", "{after:#}");
    assert!(after["data"]["counts"]["rejected"].as_u64().unwrap() >= 1);
    assert!(!db_file(&client).exists());
}

/// An action a client keeps in its own file.
/// An action whose one script step writes NOTES.md (shared with the PostgreSQL server tests).
pub(crate) const NOTES_ACTION: &str = "name: local/notes\ndefinition-of-done: NOTES.md says hello\nstrategy-actor: builtin/checklist-strategist\nexecution-actor: builtin/script-executor\nscript:\n  - name: write\n    run: printf 'hello\\n' > NOTES.md\n";

#[test]
fn a_client_defines_an_action_and_a_project_and_runs_a_plan_on_the_server_to_one_commit() {
    let host = Env::new();
    let repo = crate::support::git_repo(host.root(), "repo");
    let (doc, code) = host.json(&[
        "resource",
        "add",
        "git-checkout",
        "local/repo",
        "--path",
        repo.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{doc:#}");
    let server = Server::start(host);
    let client = Env::new();
    // The action file exists only on the client: its text is sent.
    let file = client.root().join("notes.yaml");
    std::fs::write(&file, NOTES_ACTION).unwrap();
    let (doc, code) = server.client_json(
        &client,
        &[
            "action",
            "create",
            "--available",
            "--config",
            file.to_str().unwrap(),
        ],
    );
    assert_eq!(code, 0, "{doc:#}");
    let (doc, code) = server.client_json(&client, &["project", "create", "app"]);
    assert_eq!(code, 0, "{doc:#}");
    let (doc, code) =
        server.client_json(&client, &["project", "link-resource", "app", "local/repo"]);
    assert_eq!(code, 0, "{doc:#}");
    let (doc, code) = server.client_json(
        &client,
        &[
            "plan",
            "use",
            "local/notes",
            "app",
            "--automation-profile",
            "trusted",
        ],
    );
    assert_eq!(code, 3, "{doc:#}");
    let plan = doc["data"]["plan_id"].as_str().unwrap().to_string();
    let (doc, code) = server.client_json(&client, &["plan", "apply", "--yes", &plan]);
    assert_eq!(code, 0, "{doc:#}");
    let notes = std::fs::read_to_string(repo.join("NOTES.md")).unwrap();
    assert_eq!(notes, "hello\n");
    assert!(!db_file(&client).exists());

    // A registry read is answered by the server, not from this machine's data.
    let (doc, code) = server.client_json(&client, &["project", "list"]);
    assert_eq!(code, 0, "{doc:#}");
    assert_eq!(doc["data"]["projects"][0]["name"], "local/app");
    assert!(!db_file(&client).exists());
}

#[test]
fn sigterm_stops_the_server_promptly_even_with_a_follower_connected() {
    let (mut server, plan) = server_with_a_plan();
    let client = Env::new();
    let mut follower = server
        .client(&client, &["plan", "events", "--follow", &plan])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // The follower is connected once it has printed the history.
    let mut first = String::new();
    BufReader::new(follower.stdout.take().unwrap())
        .read_line(&mut first)
        .unwrap();
    assert!(!first.is_empty());
    let status = server.terminate(std::time::Duration::from_secs(10));
    let _ = follower.kill();
    let _ = follower.wait();
    let status = status.expect("the server was still running 10 s after SIGTERM");
    assert!(status.success(), "{status:?}");
}

#[test]
fn commands_about_this_machine_ignore_the_server_and_host_commands_refuse_it() {
    let server = Server::start(Env::new());
    let client = Env::new();
    let (doc, code) = server.client_json(&client, &["server", "migrate"]);
    assert_eq!(code, 1, "{doc:#}");
    assert_eq!(doc["error"]["code"], "INVALID_INPUT");
    assert!(!db_file(&client).exists());
    let (doc, code) = server.client_json(&client, &["version"]);
    assert_eq!(code, 0, "{doc:#}");
    let (doc, code) = client.json(&["--server", "127.0.0.1:7420", "plan", "list"]);
    assert_eq!(code, 1, "{doc:#}");
    assert!(doc.to_string().contains("http://127.0.0.1:7420"), "{doc:#}");
}

#[test]
fn the_protocol_is_published_as_openapi_generated_from_its_types() {
    let server = Server::start(Env::new());
    let (status, body) = server.http("GET", "/v1/openapi.json", None, "");
    assert_eq!(status, 200, "{body}");
    let doc: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(doc["openapi"], "3.1.0");
    assert_eq!(doc["info"]["version"], "v1");
    let schemas = doc["components"]["schemas"].as_object().unwrap();
    for name in [
        "Request",
        "Response",
        "ErrorEnvelope",
        "EngineEvent",
        "Op",
        "PlanStatusView",
    ] {
        assert!(schemas.contains_key(name), "{name} is not published");
    }
    assert!(doc["paths"]["/v1/call"]["post"].is_object(), "{doc:#}");
    assert!(doc["paths"]["/v1/events"]["get"].is_object(), "{doc:#}");
}

#[test]
fn a_refusal_through_a_server_carries_the_data_the_command_line_shows_beside_it() {
    let (server, plan) = server_with_a_plan();
    let client = Env::new();
    let (doc, code) = server.client_json(&client, &["plan", "apply", "--yes", &plan]);
    assert_eq!(code, 0, "{doc:#}");
    // Executing an applied plan is refused with its phase and state as the envelope's data.
    let (remote, remote_code) = server.client_json(&client, &["plan", "execute", &plan]);
    let (local, local_code) = server.env.json(&["plan", "execute", &plan]);
    assert_eq!(remote_code, local_code, "{remote:#}\n{local:#}");
    assert_eq!(
        remote["error"]["code"], local["error"]["code"],
        "{remote:#}"
    );
    assert!(!local["data"].is_null(), "{local:#}");
    assert_eq!(remote["data"], local["data"], "{remote:#}\n{local:#}");
}

/// Runs `client` with `--format json ARGS` in `dir`: the parsed stdout and the exit code.
fn json_in(cmd: &mut std::process::Command, dir: &std::path::Path) -> (Value, i32) {
    let out = cmd.current_dir(dir).output().expect("the client runs");
    let doc = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "stdout is not JSON ({e}): {}\nstderr: {}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    });
    (doc, out.status.code().expect("exit code"))
}

#[test]
fn relative_paths_through_a_server_name_places_where_the_client_typed_them() {
    let server = Server::start(Env::new());
    let client = Env::new();
    let repo = crate::support::git_repo(client.root(), "here");
    let repo_text = repo.to_str().unwrap();
    let add = |args: &[&str]| {
        let all = [&["--format", "json", "resource", "add"][..], args].concat();
        json_in(&mut server.client(&client, &all), &repo)
    };
    let (doc, code) = add(&["git-checkout", "local/here", "--path", "."]);
    assert_eq!(code, 0, "{doc:#}");
    let (doc, code) = add(&["fs-directory", "local/docs", "--path", "docs"]);
    assert_eq!(code, 0, "{doc:#}");
    let (doc, code) = add(&["git", "local/here-git", "--url", "."]);
    assert_eq!(code, 0, "{doc:#}");
    for (name, place) in [
        ("local/here", repo_text.to_string()),
        ("local/docs", repo.join("docs").display().to_string()),
        ("local/here-git", repo_text.to_string()),
    ] {
        let (shown, code) = server.env.json(&["resource", "show", name]);
        assert_eq!(code, 0, "{shown:#}");
        assert!(
            shown["data"].to_string().contains(&format!("\"{place}\"")),
            "{name} does not name {place}: {shown:#}"
        );
    }
}

/// The scripted provider's table, as a server host would add it to its config.toml.
const SCRIPTED_PROVIDER: &str = "[providers.scripted]\nkind = \"openai\"\nbase_url = \"http://127.0.0.1:9/v1\"\napi_key_env = \"SCRIPTED_API_KEY\"\n\n[providers.scripted.models.\"m\"]\ninput_usd_per_mtok = 1.0\noutput_usd_per_mtok = 2.0\n";

#[test]
fn a_provider_added_to_the_server_hosts_config_is_used_without_a_restart() {
    let server = Server::start(Env::new());
    let client = Env::new();
    let create = ["session", "create", "--actor", "scripted/m"];
    let (doc, code) = server.client_json(&client, &create);
    assert_eq!(code, 1, "{doc:#}");
    assert_eq!(doc["error"]["code"], "NOT_FOUND", "{doc:#}");
    let config = &server.env.config_path;
    std::fs::create_dir_all(config.parent().unwrap()).unwrap();
    std::fs::write(config, SCRIPTED_PROVIDER).unwrap();
    let (doc, code) = server.client_json(&client, &create);
    assert_eq!(code, 0, "{doc:#}");
    assert_eq!(doc["data"]["session"]["actor"], "scripted/m", "{doc:#}");
}

#[test]
fn config_set_through_a_server_says_it_changed_this_machines_file_not_the_servers() {
    let server = Server::start(Env::new());
    let client = Env::new();
    let (doc, code) = server.client_json(&client, &["config", "set", "log-level", "debug"]);
    assert_eq!(code, 0, "{doc:#}");
    let text = doc.to_string();
    assert!(
        text.contains("set in this machine's config")
            && text.contains(&format!("the server at {} is unchanged", server.url)),
        "{doc:#}"
    );
    let written = std::fs::read_to_string(&client.config_path).unwrap();
    assert!(written.contains("debug"), "{written}");
    // In process nothing is said about a server.
    let (doc, code) = client.json(&["config", "set", "log-level", "info"]);
    assert_eq!(code, 0, "{doc:#}");
    assert!(!doc.to_string().contains("the server at"), "{doc:#}");
}

/// `client` logged in to `server` as `name`.
fn login(server: &Server, client: &Env, name: &str) {
    use std::io::Write;
    let mut login = client
        .command(&["server", "login", name, &server.url, "--token-stdin"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    writeln!(login.stdin.take().unwrap(), "{}", server.token).unwrap();
    let out = login.wait_with_output().unwrap();
    assert!(out.status.success(), "{out:?}");
}

/// Every suggested `agents ...` command of an error envelope, without the `--data-dir` and
/// `--config-path` every test environment gives.
fn suggested_commands(doc: &Value) -> Vec<String> {
    doc["error"]["suggestions"]
        .as_array()
        .unwrap_or_else(|| panic!("no suggestions: {doc:#}"))
        .iter()
        .filter_map(Value::as_str)
        .filter(|h| h.starts_with("agents "))
        .map(|h| {
            let mut words = h.split_whitespace();
            let mut kept = Vec::new();
            while let Some(w) = words.next() {
                if w == "--data-dir" || w == "--config-path" {
                    words.next();
                } else {
                    kept.push(w);
                }
            }
            kept.join(" ")
        })
        .collect()
}

#[test]
fn hints_of_a_failure_through_a_server_repeat_the_server_as_the_user_named_it() {
    let (server, plan) = server_with_a_plan();
    let client = Env::new();
    login(&server, &client, "team");
    let (doc, code) = client.json(&[
        "--server",
        "team",
        "plan",
        "review",
        &plan,
        "--accept",
        "nonexistent.txt",
    ]);
    assert_ne!(code, 0, "{doc:#}");
    let hints = doc["error"]["suggestions"].as_array().unwrap();
    assert!(!hints.is_empty(), "{doc:#}");
    for h in hints {
        let h = h.as_str().unwrap();
        if h.contains("agents ") {
            assert!(
                h.contains("agents --data-dir") && h.contains(" --server team "),
                "{h}: {doc:#}"
            );
            assert!(!h.contains(&server.url), "{h}: {doc:#}");
        }
    }

    // A named server that does not answer: the hint names it, not its URL.
    std::fs::write(
        &client.config_path,
        "[servers.gone]\nurl = \"http://127.0.0.1:9\"\n",
    )
    .unwrap();
    let mut cmd = client.command(&["--format", "json", "--server", "gone", "plan", "list"]);
    cmd.env("AGENTS_TOKEN", "agt_whatever");
    let (doc, code) = json_in(&mut cmd, client.root());
    assert_eq!(code, 1, "{doc:#}");
    assert_eq!(doc["error"]["code"], "IO_ERROR", "{doc:#}");
    let commands = suggested_commands(&doc);
    assert_eq!(
        commands,
        vec!["agents --server gone server status".to_string()],
        "{doc:#}"
    );
}

#[test]
fn protocol_errors_are_the_json_error_body_whatever_layer_answers() {
    let server = Server::start(Env::new());
    let too_big = 1024 * 1024 + 1;
    let (status, body) = server.raw(
        &format!(
            "POST /v1/call HTTP/1.1\r\nAuthorization: Bearer {}\r\nContent-Type: application/json\r\nContent-Length: {too_big}",
            server.token
        ),
        &vec![b' '; too_big],
    );
    assert_eq!(status, 413, "{body}");
    let err: Value = serde_json::from_str(&body).unwrap_or_else(|e| panic!("{e}: {body:?}"));
    assert_eq!(err["error"]["code"], "INVALID_INPUT", "{err:#}");
    assert!(
        err["error"]["message"].as_str().unwrap().contains("1 MiB"),
        "{err:#}"
    );

    let (status, body) = server.http("GET", "/v1/call", Some(&server.token), "");
    assert_eq!(status, 405, "{body}");
    let err: Value = serde_json::from_str(&body).unwrap_or_else(|e| panic!("{e}: {body:?}"));
    assert_eq!(err["error"]["code"], "INVALID_INPUT", "{err:#}");
    assert!(err.to_string().contains("POST /v1/call"), "{err:#}");
}

#[test]
fn server_start_in_json_prints_one_document() {
    let env = Env::new();
    let mut child = env
        .local_command(&[
            "--format",
            "json",
            "server",
            "start",
            "--listen",
            "127.0.0.1:0",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    let mut first = String::new();
    stdout.read_line(&mut first).unwrap();
    let listening: Value = serde_json::from_str(&first).unwrap();
    assert!(
        listening["listening"]
            .as_str()
            .unwrap()
            .starts_with("http://127.0.0.1:"),
        "{listening:#}"
    );
    let pid = child.id().to_string();
    assert!(
        std::process::Command::new("kill")
            .args(["-TERM", &pid])
            .status()
            .unwrap()
            .success()
    );
    let mut rest = String::new();
    std::io::Read::read_to_string(&mut stdout, &mut rest).unwrap();
    let status = child.wait().unwrap();
    assert!(status.success(), "{status:?}");
    assert_eq!(rest.trim(), "", "a second document after {first}");
}

#[test]
fn a_follower_cut_off_by_a_server_stop_is_told_the_last_seq_and_how_to_go_on() {
    let (mut server, plan) = server_with_a_plan();
    let client = Env::new();
    let mut follower = server
        .client(
            &client,
            &["--format", "json", "plan", "events", "--follow", &plan],
        )
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut stdout = BufReader::new(follower.stdout.take().unwrap());
    let mut first = String::new();
    stdout.read_line(&mut first).unwrap();
    assert!(!first.is_empty());
    let history = event_count(&server, &plan);
    // Every event of the history was printed before the server stops.
    let mut lines = vec![first];
    while lines.len() < history {
        let mut line = String::new();
        stdout.read_line(&mut line).unwrap();
        lines.push(line);
    }
    let last: Value = serde_json::from_str(lines.last().unwrap()).unwrap();
    let last_seq = last["seq"].as_i64().unwrap();
    server
        .terminate(std::time::Duration::from_secs(10))
        .expect("the server stops");
    let mut rest = String::new();
    std::io::Read::read_to_string(&mut stdout, &mut rest).unwrap();
    let status = follower.wait().unwrap();
    assert_eq!(status.code(), Some(1), "{rest}");
    let doc: Value = serde_json::from_str(&rest).unwrap_or_else(|e| panic!("{e}: {rest}"));
    assert_eq!(doc["error"]["code"], "IO_ERROR", "{doc:#}");
    assert!(
        doc["error"]["message"]
            .as_str()
            .unwrap()
            .contains(&format!("seq {last_seq}")),
        "{doc:#}"
    );
    let commands = suggested_commands(&doc);
    assert_eq!(
        commands,
        vec![format!(
            "agents --server {} plan events --follow --after {last_seq} {plan}",
            server.url
        )],
        "{doc:#}"
    );
}

/// An action whose one step takes a few seconds.
const SLOW_ACTION: &str = "name: local/slow\ndefinition-of-done: NOTES.md says hello\nstrategy-actor: builtin/checklist-strategist\nexecution-actor: builtin/script-executor\nscript:\n  - name: write\n    run: sleep 3 && printf 'hello\\n' > NOTES.md\n";

/// A server host with a repository, a project `app` on it and the slow action; the client
/// starts `plan use local/slow app` through the server and gets it back once the plan is in
/// Execute: the running client and the plan's id.
#[allow(
    clippy::zombie_processes,
    reason = "the running client is handed to the caller, which waits for it"
)]
fn a_plan_executing_for_a_client(server: &Server, client: &Env) -> (std::process::Child, String) {
    let file = client.root().join("slow.yaml");
    std::fs::write(&file, SLOW_ACTION).unwrap();
    for args in [
        &[
            "action",
            "create",
            "--available",
            "--config",
            file.to_str().unwrap(),
        ][..],
        &["project", "create", "--resource", "local/repo", "app"][..],
    ] {
        let (doc, code) = server.client_json(client, args);
        assert_eq!(code, 0, "{doc:#}");
    }
    let mut running = server
        .client(
            client,
            &[
                "--format",
                "json",
                "plan",
                "use",
                "local/slow",
                "app",
                "--automation-profile",
                "trusted",
            ],
        )
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    loop {
        let (doc, _) = server.env.json(&["plan", "list"]);
        let executing = doc["data"]["plans"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|p| p["phase"] == "execute" && p["state"] == "processing");
        if let Some(p) = executing {
            return (running, p["plan_id"].as_str().unwrap().to_string());
        }
        if std::time::Instant::now() >= deadline {
            let _ = running.kill();
            let _ = running.wait();
            panic!("no plan reached Execute: {doc:#}");
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
}

/// A server host with a repository registered as `local/repo`.
fn host_with_a_repository() -> Server {
    let host = Env::new();
    let repo = crate::support::git_repo(host.root(), "repo");
    let (doc, code) = host.json(&[
        "resource",
        "add",
        "git-checkout",
        "local/repo",
        "--path",
        repo.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{doc:#}");
    Server::start(host)
}

#[test]
fn a_server_stopped_while_it_runs_a_clients_plan_says_so_and_how_to_resume() {
    let mut server = host_with_a_repository();
    let client = Env::new();
    let (running, plan) = a_plan_executing_for_a_client(&server, &client);
    server
        .terminate(std::time::Duration::from_secs(30))
        .expect("the server stops");
    let out = running.wait_with_output().unwrap();
    let doc: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stdout)));
    assert_eq!(out.status.code(), Some(1), "{doc:#}");
    assert_ne!(doc["error"]["code"], "INTERRUPTED", "{doc:#}");
    assert!(
        doc["error"]["message"]
            .as_str()
            .unwrap()
            .contains("the server stopped while running plan"),
        "{doc:#}"
    );
    let resume = format!("agents --server {} plan execute {plan}", server.url);
    assert!(suggested_commands(&doc).contains(&resume), "{doc:#}");
    // The plan waits to be resumed on the server host.
    let (status, code) = server.env.json(&["plan", "status", &plan]);
    assert_eq!(code, 0, "{status:#}");
    assert_eq!(status["data"]["phase"], "execute", "{status:#}");
    let (doc, code) = server.env.json(&["plan", "execute", &plan]);
    assert_eq!(code, 3, "resumed to its apply gate: {doc:#}");
}

#[test]
fn a_server_killed_while_it_runs_a_clients_plan_is_not_called_unreachable() {
    let mut server = host_with_a_repository();
    let client = Env::new();
    let (running, plan) = a_plan_executing_for_a_client(&server, &client);
    server.kill_hard();
    let out = running.wait_with_output().unwrap();
    let doc: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stdout)));
    assert_eq!(out.status.code(), Some(1), "{doc:#}");
    assert_eq!(doc["error"]["code"], "IO_ERROR", "{doc:#}");
    let message = doc["error"]["message"].as_str().unwrap();
    assert!(!message.contains("cannot reach"), "{doc:#}");
    assert!(message.contains("stopped answering"), "{doc:#}");
    assert!(
        suggested_commands(&doc).contains(&format!("agents --server {} plan list", server.url)),
        "{doc:#} (plan {plan})"
    );
}

#[test]
fn a_plan_the_server_runs_for_one_request_is_refused_to_another_as_the_servers_own_work() {
    let server = host_with_a_repository();
    let client = Env::new();
    let (running, plan) = a_plan_executing_for_a_client(&server, &client);
    let (doc, code) = server.client_json(&client, &["plan", "execute", &plan]);
    let _ = running.wait_with_output();
    assert_eq!(code, 1, "{doc:#}");
    assert_eq!(doc["error"]["code"], "CONFLICT", "{doc:#}");
    assert!(
        doc["error"]["message"]
            .as_str()
            .unwrap()
            .contains("the server is running this plan"),
        "{doc:#}"
    );
    let commands = suggested_commands(&doc);
    assert!(
        commands.iter().all(|c| !c.contains("plan cancel")),
        "{doc:#}"
    );
    assert!(
        commands.contains(&format!(
            "agents --server {} plan status {plan}",
            server.url
        )),
        "{doc:#}"
    );
}

#[test]
fn logout_forgets_the_server_and_its_token_and_a_second_logout_changes_nothing() {
    let server = Server::start(Env::new());
    let client = Env::new();
    login(&server, &client, "team");
    let credentials = client
        .config_path
        .parent()
        .unwrap()
        .join("credentials.toml");
    let (doc, code) = client.json(&["server", "logout", "team"]);
    assert_eq!(code, 0, "{doc:#}");
    let config = std::fs::read_to_string(&client.config_path).unwrap();
    assert!(!config.contains(&server.url), "{config}");
    let stored = std::fs::read_to_string(&credentials).unwrap();
    assert!(!stored.contains(&server.token), "the token is still stored");
    // The name no longer means a server.
    let (doc, code) = client.json(&["--server", "team", "project", "list"]);
    assert_ne!(code, 0, "{doc:#}");
    let (doc, code) = client.json(&["server", "logout", "team"]);
    assert_eq!(doc["error"]["code"], "NOT_FOUND", "{doc:#}");
    assert_ne!(code, 0);
    assert_eq!(
        std::fs::read_to_string(&client.config_path).unwrap(),
        config
    );
}
