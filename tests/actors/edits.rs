//! Acceptance: an actor with file tools edits a file over several tool-call turns, for both
//! wire formats, streaming and not; the recorded tool calls and usage match the script.

use cleveragents_engine::actors::messages::Usage;
use cleveragents_engine::actors::runtime::{ActorEvent, RunRequest, Stop, run_actor};
use cleveragents_engine::config::ProviderKind;
use serde_json::json;
use tokio_util::sync::CancellationToken;

use super::{Events, MODES, client, fast, provider, rt};
use crate::support::file_tools::FileTools;
use crate::support::provider_server::{ProviderServer, Turn};

fn script() -> Vec<Turn> {
    vec![
        Turn::tools(
            "Let me read the notes first.",
            &[("read_file", r#"{"path": "notes.txt"}"#)],
            (120, 15),
        ),
        Turn::tools(
            "",
            &[
                (
                    "edit_file",
                    r#"{"path": "notes.txt", "old": "colour", "new": "color"}"#,
                ),
                (
                    "write_file",
                    r#"{"path": "docs/CHANGES.md", "content": "- spelling: color\n"}"#,
                ),
            ],
            (180, 42),
        ),
        Turn::tools(
            "Checking the result.",
            &[("read_file", r#"{"path": "notes.txt"}"#)],
            (260, 11),
        ),
        Turn::text(
            "Done: notes.txt now says color, and CHANGES.md records it.",
            (300, 17),
        ),
    ]
}

#[test]
fn an_actor_edits_a_file_over_several_tool_turns_in_every_wire_mode() {
    for (kind, stream) in MODES {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("notes.txt"), "The colour of the sky.\n").unwrap();
        let server = ProviderServer::start(script());
        let client = client(provider(&server, kind), fast());
        let tools = FileTools::new(dir.path());
        let events = Events::default();
        let request = RunRequest {
            system_template: Some("You edit files in {{ context.project }}.".into()),
            context: json!({"context": {"project": "the sky book"}}),
            prompt: "Use American spelling in notes.txt".into(),
            stream,
            ..RunRequest::default()
        };
        let run = rt()
            .block_on(run_actor(
                &client,
                &request,
                &tools,
                &CancellationToken::new(),
                &events.sink(),
            ))
            .unwrap();
        let mode = format!("{kind:?} stream={stream}");

        assert!(matches!(run.stop, Stop::Answered), "{mode}: {:?}", run.stop);
        assert_eq!(
            std::fs::read_to_string(dir.path().join("notes.txt")).unwrap(),
            "The color of the sky.\n",
            "{mode}"
        );
        assert_eq!(
            std::fs::read_to_string(dir.path().join("docs/CHANGES.md")).unwrap(),
            "- spelling: color\n"
        );
        assert_eq!(
            run.answer,
            "Done: notes.txt now says color, and CHANGES.md records it."
        );
        assert_eq!(run.turns, 4);
        assert_eq!(server.requests().len(), 4, "{mode}");

        // Tool calls as scripted, arguments reassembled exactly (in streams from 3-char pieces).
        let recorded: Vec<(u32, &str, serde_json::Value)> = run
            .tool_calls
            .iter()
            .map(|c| {
                (
                    c.turn,
                    c.name.as_str(),
                    serde_json::from_str(&c.arguments).unwrap(),
                )
            })
            .collect();
        assert_eq!(
            recorded,
            vec![
                (1, "read_file", json!({"path": "notes.txt"})),
                (
                    2,
                    "edit_file",
                    json!({"path": "notes.txt", "old": "colour", "new": "color"})
                ),
                (
                    2,
                    "write_file",
                    json!({"path": "docs/CHANGES.md", "content": "- spelling: color\n"})
                ),
                (3, "read_file", json!({"path": "notes.txt"})),
            ],
            "{mode}"
        );
        assert!(
            run.tool_calls.iter().all(|c| !c.is_error),
            "{mode}: {:?}",
            run.tool_calls
        );
        assert_eq!(run.tool_calls[0].result, "The colour of the sky.\n");
        assert_eq!(run.tool_calls[3].result, "The color of the sky.\n");
        assert_eq!(tools.calls().len(), 4);

        // Usage per call and in total, as scripted.
        let per_call: Vec<(u64, u64)> = run
            .model_calls
            .iter()
            .map(|c| (c.usage.input_tokens, c.usage.output_tokens))
            .collect();
        assert_eq!(
            per_call,
            [(120, 15), (180, 42), (260, 11), (300, 17)],
            "{mode}"
        );
        assert!(
            run.model_calls
                .iter()
                .all(|c| c.usage_reported && c.attempts == 1 && c.error.is_none())
        );
        assert_eq!(
            run.usage,
            Usage {
                input_tokens: 860,
                output_tokens: 85,
                ..Usage::default()
            }
        );

        // What the model was sent: system prompt, tools, and the real tool results.
        let requests = server.requests();
        let first = &requests[0].body;
        let last = &requests[3].body;
        match kind {
            ProviderKind::Openai => {
                assert_eq!(requests[0].path, "/v1/chat/completions");
                assert_eq!(
                    requests[0].headers["authorization"],
                    format!("Bearer {}", super::KEY)
                );
                assert_eq!(
                    first["messages"][0]["content"],
                    "You edit files in the sky book."
                );
                assert_eq!(first["tools"].as_array().unwrap().len(), 4);
                let tool_msgs: Vec<&serde_json::Value> = last["messages"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .filter(|m| m["role"] == "tool")
                    .collect();
                assert_eq!(tool_msgs.len(), 4);
                assert_eq!(tool_msgs[0]["content"], "The colour of the sky.\n");
                assert_eq!(
                    tool_msgs[0]["tool_call_id"],
                    last["messages"][2]["tool_calls"][0]["id"]
                );
                assert_eq!(first["stream"] == true, stream);
            }
            ProviderKind::Anthropic => {
                assert_eq!(requests[0].path, "/v1/messages");
                assert_eq!(requests[0].headers["x-api-key"], super::KEY);
                assert_eq!(requests[0].headers["anthropic-version"], "2023-06-01");
                assert_eq!(
                    first["system"][0]["text"],
                    "You edit files in the sky book."
                );
                assert_eq!(first["tools"][0]["input_schema"]["type"], "object");
                let msgs = last["messages"].as_array().unwrap();
                // user, assistant, user(results), assistant, user(results), assistant, user(results)
                assert_eq!(msgs.len(), 7);
                assert_eq!(msgs[2]["content"][0]["type"], "tool_result");
                assert_eq!(msgs[2]["content"][0]["content"], "The colour of the sky.\n");
                assert_eq!(
                    msgs[2]["content"][0]["tool_use_id"],
                    msgs[1]["content"][1]["id"]
                );
                assert_eq!(msgs[4]["content"].as_array().unwrap().len(), 2);
            }
        }

        // Events: text deltas rebuild each turn's text; tool calls start and finish in order.
        assert_eq!(events.text_of(1), "Let me read the notes first.", "{mode}");
        assert_eq!(events.text_of(4), run.answer);
        let tool_events: Vec<String> = events
            .all()
            .into_iter()
            .filter_map(|e| match e {
                ActorEvent::ToolCallStarted { name, .. } => Some(format!("start {name}")),
                ActorEvent::ToolCallFinished { name, is_error, .. } => {
                    Some(format!("finish {name} {is_error}"))
                }
                _ => None,
            })
            .collect();
        assert_eq!(
            tool_events,
            [
                "start read_file",
                "finish read_file false",
                "start edit_file",
                "finish edit_file false",
                "start write_file",
                "finish write_file false",
                "start read_file",
                "finish read_file false",
            ]
        );
        if stream {
            let deltas = events
                .all()
                .iter()
                .filter(|e| matches!(e, ActorEvent::TextDelta { turn: 1, .. }))
                .count();
            assert!(
                deltas > 3,
                "{mode}: the first reply arrived in {deltas} deltas"
            );
        }
        let usage_events = events
            .all()
            .iter()
            .filter(|e| matches!(e, ActorEvent::Usage { .. }))
            .count();
        assert_eq!(usage_events, 4);
    }
}

/// The same edit through the real tool runner ([`RunnerHost`]) on a sandbox of a directory,
/// in all four modes: the calls are validated, logged with their changes and confined to the
/// sandbox; the source directory is untouched.
#[test]
fn through_the_real_tool_runner_the_edit_lands_in_the_sandbox_and_is_logged_in_every_wire_mode() {
    use cleveragents_engine::domain::lifecycle::{Phase, ProcessingState};
    use cleveragents_engine::domain::plan::Plan;
    use cleveragents_engine::lifecycle::host::RunnerHost;
    use cleveragents_engine::sandbox::{SandboxTarget, Sandboxes, TargetKind};
    use cleveragents_engine::store::Store;
    use cleveragents_engine::tools::runner::Policy;
    use std::sync::Arc;
    use std::sync::atomic::AtomicBool;

    let real_script = || {
        vec![
            Turn::tools("", &[("read_file", r#"{"path": "notes.txt"}"#)], (120, 15)),
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
            Turn::tools("", &[("read_file", r#"{"path": "notes.txt"}"#)], (260, 11)),
            Turn::text("Done.", (300, 17)),
        ]
    };
    for (kind, stream) in MODES {
        let mode = format!("{kind:?} stream={stream}");
        let dir = tempfile::tempdir().unwrap();
        let source = dir.path().join("project");
        std::fs::create_dir_all(&source).unwrap();
        std::fs::write(source.join("notes.txt"), "The colour of the sky.\n").unwrap();
        let db = dir.path().join("db.sqlite");
        let mut store = Store::open(&db).unwrap();
        let mut plan = Plan::new("local/edit", "edit", jiff::Timestamp::now());
        plan.status.phase = Phase::Execute;
        plan.status.state = ProcessingState::Processing;
        store.insert_plan(&plan).unwrap();
        let sandboxes = Sandboxes::at(dir.path().join("sandboxes"));
        sandboxes
            .register_target(
                &mut store,
                &SandboxTarget {
                    plan_id: plan.plan_id,
                    resource_name: "local/project".into(),
                    alias: None,
                    kind: TargetKind::Directory {
                        root: source.clone(),
                    },
                    read_only: false,
                },
            )
            .unwrap();
        let host = RunnerHost::new(
            Store::open(&db).unwrap(),
            sandboxes.clone(),
            plan.plan_id,
            Policy::for_plan(&plan),
            Arc::new(AtomicBool::new(false)),
        )
        .only(vec![
            "read_file".into(),
            "edit_file".into(),
            "write_file".into(),
        ]);
        let server = ProviderServer::start(real_script());
        let client = client(provider(&server, kind), fast());
        let request = RunRequest {
            prompt: "Use American spelling in notes.txt".into(),
            stream,
            ..RunRequest::default()
        };
        let run = rt()
            .block_on(run_actor(
                &client,
                &request,
                &host,
                &CancellationToken::new(),
                &|_| {},
            ))
            .unwrap();
        assert!(matches!(run.stop, Stop::Answered), "{mode}: {:?}", run.stop);
        assert!(
            run.tool_calls.iter().all(|c| !c.is_error),
            "{mode}: {:?}",
            run.tool_calls
        );
        assert!(
            run.tool_calls[3].result.contains("The color of the sky."),
            "{mode}: {}",
            run.tool_calls[3].result
        );
        assert_eq!(
            server.requests()[0].body["tools"].as_array().unwrap().len(),
            3,
            "{mode}"
        );
        let sandbox = sandboxes
            .existing(&store, &plan.plan_id, "local/project")
            .unwrap()
            .expect("the first call created the sandbox");
        assert_eq!(
            std::fs::read_to_string(sandbox.work_dir().join("notes.txt")).unwrap(),
            "The color of the sky.\n",
            "{mode}"
        );
        assert_eq!(
            std::fs::read_to_string(source.join("notes.txt")).unwrap(),
            "The colour of the sky.\n",
            "{mode}: the source directory was written"
        );
        assert!(!source.join("docs").exists(), "{mode}");
        let logged: Vec<String> = store
            .tool_calls(&plan.plan_id)
            .unwrap()
            .iter()
            .map(|c| format!("{} {}", c.tool, c.outcome))
            .collect();
        assert_eq!(
            logged,
            [
                "read_file ok",
                "edit_file ok",
                "write_file ok",
                "read_file ok"
            ],
            "{mode}"
        );
        assert_eq!(
            run.usage,
            Usage {
                input_tokens: 860,
                output_tokens: 85,
                ..Usage::default()
            }
        );
    }
}
