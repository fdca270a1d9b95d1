//! Sessions and direct runs through a server (spec sections 19 and 21): every `session`
//! command, `actor run`, `actor context ...` and `tool run` give the same `data` and exit code
//! in process and through `--server` (the server makes the model calls and runs the tools),
//! and the client's data directory holds no database afterwards.

use serde_json::Value;

use crate::cli::sessions::{create, ok, orchestration_script, run, setup};
use crate::support::Env;
use crate::support::provider_server::Turn;
use crate::support::server::Server;

/// `data` of a JSON envelope with what differs between two machines masked: suggested
/// commands repeat their own global options.
fn masked(mut data: Value) -> Value {
    fn walk(v: &mut Value) {
        match v {
            Value::String(s) if s.starts_with("agents ") => {
                if let Some(i) = s.find(" session ") {
                    *s = format!("agents{}", &s[i..]);
                }
            }
            Value::Array(a) => a.iter_mut().for_each(walk),
            Value::Object(o) => o.values_mut().for_each(walk),
            _ => {}
        }
    }
    walk(&mut data);
    data
}

#[test]
fn session_list_and_show_through_a_server_print_what_they_print_in_process() {
    let s = setup(orchestration_script());
    let id = create(&s, &["--name", "ops"]);
    create(&s, &["--name", "idle"]);
    ok(
        &s,
        &[
            "session",
            "tell",
            "--session",
            "ops",
            "Create an action that refreshes the lock files and add it to the app project",
        ],
    );
    let calls: [&[&str]; 5] = [
        &["session", "list"],
        &["session", "show", "ops"],
        &["session", "show", &id[..8]],
        &["session", "show", "idle"],
        &["session", "show", "nope"],
    ];
    let local: Vec<(Value, i32)> = calls.iter().map(|args| s.env.json(args)).collect();
    assert_eq!(
        local[1].0["data"]["plans"].as_array().map(Vec::len),
        Some(1),
        "the session linked its plan: {:#}",
        local[1].0
    );
    assert_eq!(local[4].1, 1, "an unknown session: {:#}", local[4].0);
    let _provider = s.server;
    let server = Server::start(s.env);
    let client = Env::new();
    for (args, (doc, code)) in calls.iter().zip(local) {
        let (remote, remote_code) = server.client_json(&client, args);
        assert_eq!(remote_code, code, "{args:?}: {remote:#}");
        if code == 0 {
            assert_eq!(
                masked(remote["data"].clone()),
                masked(doc["data"].clone()),
                "{args:?}"
            );
        } else {
            assert_eq!(remote["error"]["code"], doc["error"]["code"], "{args:?}");
            assert_eq!(
                remote["error"]["message"], doc["error"]["message"],
                "{args:?}"
            );
        }
    }
    assert!(
        !client.data_dir.join("cleveragents.db").exists(),
        "the client's data directory holds no database"
    );
}

/// Runs the commands `steps` makes (given the environment and a directory for files) on one
/// setup in process and on another through a server, and asserts that every answer has the
/// same exit code and the same `data`, with what differs between two runs masked (ids,
/// times, the temporary roots). The client's data directory holds no database afterwards.
/// Returns the answers through the server.
fn same_in_process_and_through_a_server(
    script: fn() -> Vec<Turn>,
    steps: &dyn Fn(&Env, &std::path::Path) -> Vec<Vec<String>>,
) -> Vec<(Value, i32)> {
    use crate::support::through_server::masked;
    let local = setup(script());
    let local_steps = steps(&local.env, local.env.root());
    let local_answers: Vec<(Value, i32)> = local_steps
        .iter()
        .map(|args| run(&local, &args.iter().map(String::as_str).collect::<Vec<_>>()))
        .collect();
    let remote = setup(script());
    let remote_steps = steps(&remote.env, remote.env.root());
    let _provider = remote.server;
    let server = Server::start(remote.env);
    let client = Env::new();
    let mut answers = Vec::new();
    for ((args, (doc, code)), remote_args) in
        local_steps.iter().zip(local_answers).zip(&remote_steps)
    {
        let remote_args: Vec<&str> = remote_args.iter().map(String::as_str).collect();
        let (got, got_code) = server.client_json(&client, &remote_args);
        assert_eq!(got_code, code, "{args:?}: {got:#}\nin process: {doc:#}");
        // An export's size varies with the length of the fractional seconds of its times.
        let sized = |mut data: Value| {
            if args.iter().any(|a| a == "export") && data.get("bytes").is_some() {
                data["bytes"] = Value::from(0);
            }
            data
        };
        assert_eq!(
            sized(masked(&server.env, got["data"].clone())),
            sized(masked(&local.env, doc["data"].clone())),
            "{args:?}"
        );
        if code != 0 {
            assert_eq!(got["error"]["code"], doc["error"]["code"], "{args:?}");
        }
        answers.push((got, got_code));
    }
    assert!(
        !client.data_dir.join("cleveragents.db").exists(),
        "the client's data directory holds no database"
    );
    answers
}

/// The exit codes of `answers`.
fn codes(answers: &[(Value, i32)]) -> Vec<i32> {
    answers.iter().map(|(_, c)| *c).collect()
}

fn words(args: &[&str]) -> Vec<String> {
    args.iter().map(|a| a.to_string()).collect()
}

#[test]
fn session_create_tell_export_delete_and_import_through_a_server_answer_as_in_process() {
    let answers = same_in_process_and_through_a_server(
        || vec![Turn::text("Nothing to do yet.", (12, 4))],
        &|_, root| {
            let file = root.join("weekly.json").display().to_string();
            vec![
                words(&[
                    "session",
                    "create",
                    "--name",
                    "weekly",
                    "--max-history",
                    "5",
                ]),
                words(&["session", "create", "--name", "weekly"]),
                words(&["session", "tell", "--session", "weekly", "What is there?"]),
                words(&["session", "show", "weekly"]),
                words(&["session", "export", "-o", &file, "weekly"]),
                words(&["session", "delete", "--yes", "weekly"]),
                words(&["session", "delete", "--yes", "weekly"]),
                words(&["session", "import", "-i", &file]),
                words(&["session", "list"]),
            ]
        },
    );
    assert_eq!(codes(&answers), [0, 1, 0, 0, 0, 0, 1, 0, 0]);
    assert_eq!(answers[1].0["error"]["code"], "CONFLICT");
    assert_eq!(answers[2].0["data"]["answer"], "Nothing to do yet.");
    assert_eq!(
        answers[3].0["data"]["messages"].as_array().map(Vec::len),
        Some(2)
    );
    assert_eq!(answers[7].0["data"]["messages"], 2, "{:#}", answers[7].0);
}

#[test]
fn actor_run_and_actor_contexts_through_a_server_answer_as_in_process() {
    let answers = same_in_process_and_through_a_server(
        || {
            vec![
                Turn::text("First answer.", (7, 3)),
                Turn::text("Second answer.", (9, 2)),
            ]
        },
        &|_, root| {
            let file = root.join("notes.json").display().to_string();
            vec![
                words(&[
                    "actor",
                    "run",
                    "--context",
                    "notes",
                    "scripted/m",
                    "Say hello",
                ]),
                words(&["actor", "run", "--context", "notes", "scripted/m", "Again"]),
                words(&["actor", "run", "nope/m", "hi"]),
                words(&["actor", "context", "list"]),
                words(&["actor", "context", "show", "notes"]),
                words(&["actor", "context", "export", "-o", &file, "notes"]),
                words(&["actor", "context", "delete", "--yes", "notes"]),
                words(&["actor", "context", "show", "notes"]),
                words(&["actor", "context", "import", "-i", &file]),
                words(&["actor", "context", "import", "-i", &file]),
                words(&["actor", "context", "clear", "--yes", "notes"]),
                words(&["actor", "context", "list"]),
            ]
        },
    );
    assert_eq!(codes(&answers), [0, 0, 1, 0, 0, 0, 0, 1, 0, 1, 0, 0]);
    assert_eq!(answers[1].0["data"]["answer"], "Second answer.");
    assert_eq!(answers[7].0["error"]["code"], "NOT_FOUND");
    assert_eq!(answers[9].0["error"]["code"], "CONFLICT");
}

#[test]
fn tool_run_through_a_server_runs_in_the_servers_sandbox_and_answers_as_in_process() {
    let answers = same_in_process_and_through_a_server(Vec::new, &|env, root| {
        let target = root.join("target");
        std::fs::create_dir_all(&target).unwrap();
        std::fs::write(target.join("a.txt"), "alpha\n").unwrap();
        let mut store =
            cleveragents_engine::store::Store::open(&env.data_dir.join("cleveragents.db")).unwrap();
        let mut plan = cleveragents_engine::domain::plan::Plan::new(
            "local/refactor",
            "refactor",
            jiff::Timestamp::now(),
        );
        plan.status.phase = cleveragents_engine::domain::lifecycle::Phase::Execute;
        store.insert_plan(&plan).unwrap();
        let plan = plan.plan_id.to_string();
        let target = target.display().to_string();
        let run = |tool: &str, args: &str| {
            words(&[
                "tool",
                "run",
                tool,
                "--plan",
                &plan,
                "--target-path",
                &target,
                "--args",
                args,
            ])
        };
        vec![
            run("read_file", r#"{"path": "a.txt"}"#),
            run("write_file", r#"{"path": "b.txt", "content": "bravo\n"}"#),
            run("read_file", r#"{"path": "b.txt"}"#),
            run("read_file", r#"{"nope": 1}"#),
            words(&["tool", "run", "read_file", "--plan", "nope", "--args", "{}"]),
        ]
    });
    assert_eq!(codes(&answers), [0, 0, 0, 1, 1]);
    assert_eq!(answers[2].0["data"]["result"]["content"], "bravo\n");
    assert_eq!(answers[3].0["error"]["code"], "INVALID_INPUT");
    assert!(
        answers[3].0["data"]["call"]["seq"].is_number(),
        "{:#}",
        answers[3].0
    );
}
