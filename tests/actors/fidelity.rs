//! Wire fidelity: what the actor sets reaches the provider, field by field, on both wire
//! formats, and what the provider would refuse is never sent (spec section 16).

use std::time::Duration;

use cleveragents_engine::actors::messages::{Message, Sampling, ToolCall, ToolResult, ToolSpec};
use cleveragents_engine::actors::providers::{ClientOptions, ProviderError};
use cleveragents_engine::actors::runtime::{
    ActorEvent, ActorRun, NoTools, RunRequest, Stop, ToolHost, ToolOutcome, run_actor,
};
use cleveragents_engine::config::{MaxTokensField, ModelPrice, Provider, ProviderKind};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use super::{Events, MODES, client, fast, provider, rt};
use crate::support::provider_server::{ProviderServer, Turn};

/// One tool whose schema is what schemars generates for a Rust type: `$schema`, `$defs`,
/// `$ref` and `format: uint64`.
struct GeneratedSchemaTool;

impl ToolHost for GeneratedSchemaTool {
    fn specs(&self) -> Vec<ToolSpec> {
        vec![ToolSpec {
            name: "count_lines".into(),
            description: "counts".into(),
            input_schema: json!({
                "$schema": "https://json-schema.org/draft/2020-12/schema",
                "type": "object",
                "properties": {
                    "limit": {"type": "integer", "format": "uint64", "minimum": 0},
                    "target": {"$ref": "#/$defs/Target"}
                },
                "required": ["target"],
                "$defs": {"Target": {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}}
            }),
        }]
    }

    async fn call(&self, _name: &str, _args: Value) -> ToolOutcome {
        ToolOutcome::ok("3")
    }
}

fn run_with<H: ToolHost>(
    p: Provider,
    options: ClientOptions,
    request: &RunRequest,
    tools: &H,
) -> (ActorRun, Events) {
    let client = client(p, options);
    let events = Events::default();
    let run = rt()
        .block_on(async {
            tokio::time::timeout(
                Duration::from_secs(30),
                run_actor(
                    &client,
                    request,
                    tools,
                    &CancellationToken::new(),
                    &events.sink(),
                ),
            )
            .await
            .expect("the run must never hang")
        })
        .unwrap();
    (run, events)
}

fn sampling() -> Sampling {
    Sampling {
        temperature: Some(0.7),
        top_p: Some(0.9),
        seed: Some(42),
        stop: vec!["END".into(), "\n\n".into()],
    }
}

#[test]
fn top_p_seed_and_stop_are_sent_on_both_wire_formats() {
    for (kind, stream) in MODES {
        let server = ProviderServer::start(vec![Turn::text("ok", (5, 1))]);
        let request = RunRequest {
            prompt: "hello".into(),
            stream,
            sampling: sampling(),
            max_tokens: Some(77),
            ..RunRequest::default()
        };
        let (run, _) = run_with(provider(&server, kind), fast(), &request, &NoTools);
        assert!(matches!(run.stop, Stop::Answered), "{:?}", run.stop);
        let body = &server.requests()[0].body;
        assert_eq!(body["temperature"], 0.7, "{kind:?}");
        assert_eq!(body["top_p"], 0.9, "{kind:?}");
        match kind {
            ProviderKind::Openai => {
                assert_eq!(body["seed"], 42);
                assert_eq!(body["stop"], json!(["END", "\n\n"]));
                // A compatible server (not api.openai.com) gets the older field.
                assert_eq!(body["max_tokens"], 77);
                assert!(body.get("max_completion_tokens").is_none());
            }
            ProviderKind::Anthropic => {
                assert!(body.get("seed").is_none(), "Anthropic has no seed");
                assert_eq!(body["stop_sequences"], json!(["END", "\n\n"]));
                assert!(body.get("stop").is_none());
                assert_eq!(body["max_tokens"], 77);
            }
        }
    }
}

#[test]
fn unset_options_are_not_sent() {
    for (kind, stream) in MODES {
        let server = ProviderServer::start(vec![Turn::text("ok", (5, 1))]);
        let request = RunRequest {
            prompt: "hello".into(),
            stream,
            ..RunRequest::default()
        };
        run_with(provider(&server, kind), fast(), &request, &NoTools);
        let body = &server.requests()[0].body;
        for field in ["temperature", "top_p", "seed", "stop", "stop_sequences"] {
            assert!(body.get(field).is_none(), "{kind:?} sent {field}: {body}");
        }
    }
}

#[test]
fn the_completion_cap_field_is_max_completion_tokens_for_openai_itself_and_configurable() {
    assert_eq!(
        MaxTokensField::default_for("https://api.openai.com/v1"),
        MaxTokensField::MaxCompletionTokens
    );
    assert_eq!(
        MaxTokensField::default_for("http://127.0.0.1:11434/v1"),
        MaxTokensField::MaxTokens
    );
    let server = ProviderServer::start(vec![Turn::text("ok", (5, 1))]);
    let mut p = provider(&server, ProviderKind::Openai);
    p.max_tokens_field = Some(MaxTokensField::MaxCompletionTokens);
    let request = RunRequest {
        prompt: "hello".into(),
        max_tokens: Some(500),
        ..RunRequest::default()
    };
    run_with(p, fast(), &request, &NoTools);
    let body = &server.requests()[0].body;
    assert_eq!(body["max_completion_tokens"], 500);
    assert!(body.get("max_tokens").is_none());
}

#[test]
fn anthropics_default_max_tokens_stays_within_the_models_limit_and_the_table_can_be_overridden() {
    let server = ProviderServer::start(vec![Turn::text("ok", (5, 1)), Turn::text("ok", (5, 1))]);
    let request = RunRequest {
        prompt: "hello".into(),
        ..RunRequest::default()
    };
    let p = provider(&server, ProviderKind::Anthropic);
    let old = cleveragents_engine::actors::providers::ProviderClient::new(
        p.clone(),
        "claude-3-haiku-20240307",
        None,
        fast(),
    )
    .unwrap();
    rt().block_on(run_actor(
        &old,
        &request,
        &NoTools,
        &CancellationToken::new(),
        &|_| {},
    ))
    .unwrap();
    let mut p = p;
    p.models.insert(
        "m".into(),
        ModelPrice {
            max_output_tokens: Some(1024),
            ..ModelPrice::default()
        },
    );
    run_with(p, fast(), &request, &NoTools);
    let requests = server.requests();
    assert_eq!(requests[0].body["model"], "claude-3-haiku-20240307");
    assert_eq!(requests[0].body["max_tokens"], 4096);
    assert_eq!(requests[1].body["max_tokens"], 1024);
}

#[test]
fn a_temperature_outside_the_providers_range_is_refused_before_anything_is_sent() {
    for (kind, t, ok) in [
        (ProviderKind::Anthropic, 1.5, false),
        (ProviderKind::Anthropic, 1.0, true),
        (ProviderKind::Openai, 1.5, true),
        (ProviderKind::Openai, 2.5, false),
        (ProviderKind::Openai, -0.1, false),
    ] {
        let server = ProviderServer::start(vec![Turn::text("ok", (5, 1))]);
        let request = RunRequest {
            prompt: "hello".into(),
            sampling: Sampling {
                temperature: Some(t),
                ..Sampling::default()
            },
            ..RunRequest::default()
        };
        let (run, _) = run_with(provider(&server, kind), fast(), &request, &NoTools);
        if ok {
            assert!(
                matches!(run.stop, Stop::Answered),
                "{kind:?} {t}: {:?}",
                run.stop
            );
            continue;
        }
        let Stop::Failed { error } = &run.stop else {
            panic!("{kind:?} {t}: {:?}", run.stop);
        };
        assert!(matches!(error, ProviderError::Invalid { .. }), "{error:?}");
        let max = if kind == ProviderKind::Anthropic {
            "1"
        } else {
            "2"
        };
        assert!(
            error.to_string().contains(&format!("outside 0 to {max}")),
            "{error}"
        );
        assert!(server.requests().is_empty(), "nothing may be sent");
    }
}

#[test]
fn whitespace_only_text_and_an_empty_prompt_are_never_sent_to_anthropic() {
    let server = ProviderServer::start(vec![Turn::text("done", (5, 1))]);
    let history = vec![
        Message::User { text: "go".into() },
        Message::Assistant {
            text: "\n\n  ".into(),
            tool_calls: vec![ToolCall {
                id: "t1".into(),
                name: "count_lines".into(),
                arguments: "{}".into(),
            }],
        },
        Message::ToolResults {
            results: vec![ToolResult {
                call_id: "t1".into(),
                content: "3".into(),
                is_error: false,
                images: Vec::new(),
            }],
        },
        Message::User { text: " ".into() },
    ];
    let request = RunRequest {
        history,
        ..RunRequest::default()
    };
    let (run, _) = run_with(
        provider(&server, ProviderKind::Anthropic),
        fast(),
        &request,
        &GeneratedSchemaTool,
    );
    assert!(matches!(run.stop, Stop::Answered), "{:?}", run.stop);
    let body = &server.requests()[0].body;
    for message in body["messages"].as_array().unwrap() {
        for block in message["content"].as_array().unwrap() {
            if block["type"] == "text" {
                assert!(!block["text"].as_str().unwrap().trim().is_empty(), "{body}");
            }
        }
    }
    assert_eq!(body["messages"][1]["content"][0]["type"], "tool_use");
    assert_eq!(body["messages"].as_array().unwrap().len(), 3);

    let server = ProviderServer::start(vec![Turn::text("never", (5, 1))]);
    let request = RunRequest {
        prompt: "   ".into(),
        ..RunRequest::default()
    };
    let (run, _) = run_with(
        provider(&server, ProviderKind::Anthropic),
        fast(),
        &request,
        &NoTools,
    );
    let Stop::Failed { error } = &run.stop else {
        panic!("{:?}", run.stop);
    };
    assert!(error.to_string().contains("the prompt is empty"), "{error}");
    assert!(server.requests().is_empty());
}

#[test]
fn a_reply_cut_by_the_token_limit_is_recorded_warned_and_ends_the_run_clearly() {
    for (kind, stream) in MODES {
        let server = ProviderServer::start(vec![Turn::text("The answer is", (5, 9)).cut()]);
        let request = RunRequest {
            prompt: "hello".into(),
            stream,
            max_tokens: Some(9),
            ..RunRequest::default()
        };
        let (run, events) = run_with(provider(&server, kind), fast(), &request, &NoTools);
        assert!(
            matches!(
                run.stop,
                Stop::Truncated {
                    max_tokens: Some(9)
                }
            ),
            "{kind:?} {stream}: {:?}",
            run.stop
        );
        assert!(
            run.stop
                .describe()
                .contains("cut by the completion token limit (9 tokens)")
        );
        let reason = run.model_calls[0].stop_reason.as_deref();
        assert!(
            matches!(reason, Some("length" | "max_tokens")),
            "{reason:?}"
        );
        assert!(events.all().iter().any(|e| matches!(
            e,
            ActorEvent::Truncated {
                with_tool_calls: false,
                ..
            }
        )));
    }
}

#[test]
fn a_tool_call_cut_by_the_token_limit_is_answered_with_an_error_that_says_so() {
    for (kind, stream) in MODES {
        let server = ProviderServer::start(vec![
            Turn::tools("", &[("count_lines", r#"{"target": {"pa"#)], (5, 9)).cut(),
            Turn::text("retrying smaller", (5, 1)),
        ]);
        let request = RunRequest {
            prompt: "hello".into(),
            stream,
            ..RunRequest::default()
        };
        let (run, _) = run_with(
            provider(&server, kind),
            fast(),
            &request,
            &GeneratedSchemaTool,
        );
        assert!(
            matches!(run.stop, Stop::Answered),
            "{kind:?}: {:?}",
            run.stop
        );
        let result = &run.tool_calls[0];
        assert!(result.is_error);
        assert!(
            result.result.contains("cut by the completion token limit"),
            "{kind:?} {stream}: {}",
            result.result
        );
    }
}

#[test]
fn a_provider_reporting_no_usage_leaves_usage_and_cost_unknown() {
    for (kind, stream) in MODES {
        let server = ProviderServer::start(vec![Turn::text("hi", (5, 1)).without_usage()]);
        let mut p = provider(&server, kind);
        p.models.insert(
            "m".into(),
            ModelPrice {
                input_usd_per_mtok: Some(1.0),
                output_usd_per_mtok: Some(1.0),
                ..ModelPrice::default()
            },
        );
        let request = RunRequest {
            prompt: "hello".into(),
            stream,
            ..RunRequest::default()
        };
        let (run, _) = run_with(p.clone(), fast(), &request, &NoTools);
        assert!(matches!(run.stop, Stop::Answered), "{:?}", run.stop);
        assert!(!run.model_calls[0].usage_reported, "{kind:?} {stream}");
        assert!(!cleveragents_engine::actors::accounting::usage_known(&run));
        assert_eq!(
            cleveragents_engine::actors::accounting::run_cost_usd(&p, &run),
            None,
            "no usage means an unknown cost, not $0"
        );
    }
}

#[test]
fn the_404_hint_for_an_anthropic_base_url_ending_in_v1_says_to_remove_it() {
    let server = ProviderServer::start(vec![]);
    let mut p = provider(&server, ProviderKind::Anthropic);
    p.base_url = format!("{}/v1", server.anthropic_base());
    let request = RunRequest {
        prompt: "hello".into(),
        ..RunRequest::default()
    };
    let (run, _) = run_with(p, fast(), &request, &NoTools);
    let Stop::Failed { error } = &run.stop else {
        panic!("{:?}", run.stop);
    };
    let text = error.to_string();
    assert!(text.contains("HTTP 404"), "{text}");
    assert!(text.contains("remove the trailing /v1"), "{text}");
    assert!(!text.contains("usually end in /v1"), "{text}");
}

#[test]
fn tool_schemas_are_sent_flattened_and_standard_on_both_wire_formats() {
    for (kind, stream) in MODES {
        let server = ProviderServer::start(vec![Turn::text("ok", (5, 1))]);
        let request = RunRequest {
            prompt: "hello".into(),
            stream,
            ..RunRequest::default()
        };
        run_with(
            provider(&server, kind),
            fast(),
            &request,
            &GeneratedSchemaTool,
        );
        let body = &server.requests()[0].body;
        let schema = match kind {
            ProviderKind::Openai => &body["tools"][0]["function"]["parameters"],
            ProviderKind::Anthropic => &body["tools"][0]["input_schema"],
        };
        assert_eq!(
            schema,
            &json!({
                "type": "object",
                "properties": {
                    "limit": {"type": "integer", "minimum": 0},
                    "target": {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}
                },
                "required": ["target"]
            }),
            "{kind:?}"
        );
    }
}
