//! A model that calls an unknown tool, sends invalid arguments, loops past the turn limit,
//! exceeds its token budget or is cancelled gets a clear outcome, and the directory stays
//! consistent.

use cleveragents_engine::actors::runtime::{ActorRun, Limits, RunRequest, Stop, run_actor};
use tokio_util::sync::CancellationToken;

use super::{Events, MODES, client, fast, provider, rt};
use crate::support::file_tools::FileTools;
use crate::support::provider_server::{ProviderServer, Turn};

fn run_with(
    kind: cleveragents_engine::config::ProviderKind,
    stream: bool,
    script: Vec<Turn>,
    tools: &FileTools,
    limits: Limits,
    cancel: &CancellationToken,
) -> (ActorRun, ProviderServer) {
    let server = ProviderServer::start(script);
    let client = client(provider(&server, kind), fast());
    let request = RunRequest {
        prompt: "work".into(),
        stream,
        limits,
        ..RunRequest::default()
    };
    let events = Events::default();
    let run = rt()
        .block_on(run_actor(&client, &request, tools, cancel, &events.sink()))
        .unwrap();
    (run, server)
}

/// The text of every tool result in the `n`th request, whatever the wire format.
fn tool_results_sent(server: &ProviderServer, n: usize) -> Vec<String> {
    let body = &server.requests()[n].body;
    let mut out = Vec::new();
    for m in body["messages"].as_array().unwrap() {
        if m["role"] == "tool" {
            out.push(m["content"].as_str().unwrap().to_string());
        }
        if let Some(blocks) = m["content"].as_array() {
            for b in blocks {
                if b["type"] == "tool_result" {
                    assert_eq!(b["is_error"], true);
                    out.push(b["content"].as_str().unwrap().to_string());
                }
            }
        }
    }
    out
}

#[test]
fn an_unknown_tool_goes_back_to_the_model_as_an_error_and_the_run_continues() {
    for (kind, stream) in MODES {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("a.txt"), "keep").unwrap();
        let tools = FileTools::new(dir.path());
        let (run, server) = run_with(
            kind,
            stream,
            vec![
                Turn::tools(
                    "",
                    &[("delete_everything", r#"{"path": "a.txt"}"#)],
                    (10, 3),
                ),
                Turn::text("Sorry, I cannot delete.", (20, 4)),
            ],
            &tools,
            Limits::default(),
            &CancellationToken::new(),
        );
        assert!(matches!(run.stop, Stop::Answered), "{:?}", run.stop);
        assert!(run.tool_calls[0].is_error);
        assert!(
            run.tool_calls[0]
                .result
                .contains("unknown tool `delete_everything`")
        );
        assert!(
            run.tool_calls[0]
                .result
                .contains("edit_file, list_directory, read_file, write_file")
        );
        let sent = tool_results_sent(&server, 1);
        assert_eq!(sent.len(), 1);
        assert!(
            sent[0].contains("unknown tool `delete_everything`"),
            "{sent:?}"
        );
        assert!(
            tools.calls().is_empty(),
            "the unknown tool reached the tools"
        );
        assert_eq!(
            std::fs::read_to_string(dir.path().join("a.txt")).unwrap(),
            "keep"
        );
    }
}

#[test]
fn invalid_json_arguments_are_refused_before_the_tool_runs_and_the_model_can_retry() {
    for (kind, stream) in MODES {
        let dir = tempfile::tempdir().unwrap();
        let tools = FileTools::new(dir.path());
        let (run, server) = run_with(
            kind,
            stream,
            vec![
                Turn::tools(
                    "",
                    &[("write_file", r#"{"path": "a.txt", "content": "x"#)],
                    (10, 3),
                ),
                Turn::tools(
                    "",
                    &[("write_file", r#"{"path": "a.txt", "content": "fixed"}"#)],
                    (20, 4),
                ),
                Turn::text("Written.", (30, 2)),
            ],
            &tools,
            Limits::default(),
            &CancellationToken::new(),
        );
        assert!(
            matches!(run.stop, Stop::Answered),
            "{kind:?} {stream}: {:?}",
            run.stop
        );
        assert!(run.tool_calls[0].is_error);
        // Anthropic's non-streamed format cannot carry invalid JSON: it arrives as a string.
        let r = &run.tool_calls[0].result;
        assert!(
            r.contains("not valid JSON") || r.contains("must be a JSON object"),
            "{r}"
        );
        assert!(tool_results_sent(&server, 1)[0].contains("call it again"));
        assert_eq!(
            tools.calls().len(),
            1,
            "only the valid call reached the tools"
        );
        assert_eq!(
            std::fs::read_to_string(dir.path().join("a.txt")).unwrap(),
            "fixed"
        );
    }
}

#[test]
fn a_model_looping_past_the_turn_limit_stops_with_every_finished_call_applied() {
    let dir = tempfile::tempdir().unwrap();
    let tools = FileTools::new(dir.path());
    let script = (0..6)
        .map(|i| {
            Turn::tools(
                "",
                &[(
                    "write_file",
                    &format!(r#"{{"path": "f{i}.txt", "content": "{i}"}}"#),
                )],
                (10, 1),
            )
        })
        .collect();
    let (run, server) = run_with(
        cleveragents_engine::config::ProviderKind::Openai,
        true,
        script,
        &tools,
        Limits {
            max_turns: 3,
            token_budget: None,
            deadline: None,
            budget: None,
        },
        &CancellationToken::new(),
    );
    assert!(
        matches!(run.stop, Stop::TurnLimit { turns: 3 }),
        "{:?}",
        run.stop
    );
    assert!(run.stop.describe().contains("after 3 model calls"));
    assert_eq!(server.requests().len(), 3);
    let mut files: Vec<String> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    files.sort();
    assert_eq!(files, ["f0.txt", "f1.txt", "f2.txt"]);
}

#[test]
fn the_token_budget_stops_the_run_before_the_next_model_call() {
    let dir = tempfile::tempdir().unwrap();
    let tools = FileTools::new(dir.path());
    let script = (0..4)
        .map(|_| Turn::tools("", &[("list_directory", "{}")], (70, 10)))
        .collect();
    let (run, server) = run_with(
        cleveragents_engine::config::ProviderKind::Anthropic,
        false,
        script,
        &tools,
        Limits {
            max_turns: 40,
            token_budget: Some(150),
            deadline: None,
            budget: None,
        },
        &CancellationToken::new(),
    );
    assert!(
        matches!(
            run.stop,
            Stop::TokenBudget {
                used: 160,
                budget: 150
            }
        ),
        "{:?}",
        run.stop
    );
    assert_eq!(server.requests().len(), 2);
    assert_eq!(
        run.tool_calls.len(),
        2,
        "the calls of the last reply still ran"
    );
}

#[test]
fn cancellation_is_checked_before_each_tool_call_and_model_call() {
    let dir = tempfile::tempdir().unwrap();
    let cancel = CancellationToken::new();
    let tools = FileTools::new(dir.path()).cancelling_after(1, cancel.clone());
    let (run, server) = run_with(
        cleveragents_engine::config::ProviderKind::Openai,
        false,
        vec![
            Turn::tools(
                "",
                &[
                    ("write_file", r#"{"path": "first.txt", "content": "1"}"#),
                    ("write_file", r#"{"path": "second.txt", "content": "2"}"#),
                ],
                (10, 1),
            ),
            Turn::text("never asked", (1, 1)),
        ],
        &tools,
        Limits::default(),
        &cancel,
    );
    assert!(matches!(run.stop, Stop::Cancelled), "{:?}", run.stop);
    assert!(dir.path().join("first.txt").exists());
    assert!(!dir.path().join("second.txt").exists());
    assert_eq!(server.requests().len(), 1);
    assert_eq!(server.remaining(), 1);
}
