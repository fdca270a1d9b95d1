//! The Anthropic Messages wire format (`POST {base_url}/v1/messages`).
//!
//! Translates a [`ChatRequest`] into the request body (`system`, `tools` with
//! `input_schema`, assistant `tool_use` blocks, user `tool_result` blocks; consecutive
//! user-role turns are merged), parses a whole response, and assembles a streamed one from
//! its events (`message_start`, `content_block_start`, `content_block_delta` with
//! `text_delta` / `input_json_delta`, `message_delta`, `message_stop`, `error`).

use std::collections::BTreeMap;

use serde_json::{Value, json};

use super::wire::{StreamFailure, StreamStep, number};
use crate::engine::actors::messages::{
    ChatRequest, ChatResponse, DEFAULT_MAX_TOKENS, Message, ToolCall, Usage,
};

/// The API version header value sent with every request.
pub const API_VERSION: &str = "2023-06-01";

/// The endpoint for a base URL such as `https://api.anthropic.com`.
pub fn endpoint(base_url: &str) -> String {
    format!("{}/v1/messages", base_url.trim_end_matches('/'))
}

/// Arguments text as an `input` object: invalid or non-object JSON becomes `{}` (the
/// runtime has already answered such a call with an error result).
fn input_object(arguments: &str) -> Value {
    match serde_json::from_str::<Value>(arguments) {
        Ok(v @ Value::Object(_)) => v,
        _ => json!({}),
    }
}

/// The JSON request body.
pub fn request_body(req: &ChatRequest) -> Value {
    let mut messages: Vec<Value> = Vec::new();
    let mut push = |role: &str, blocks: Vec<Value>| {
        if let Some(last) = messages.last_mut()
            && last["role"] == role
            && let Some(content) = last["content"].as_array_mut()
        {
            content.extend(blocks);
            return;
        }
        messages.push(json!({"role": role, "content": blocks}));
    };
    for message in &req.messages {
        match message {
            Message::User { text } => push("user", vec![json!({"type": "text", "text": text})]),
            Message::Assistant { text, tool_calls } => {
                let mut blocks = Vec::new();
                if !text.is_empty() {
                    blocks.push(json!({"type": "text", "text": text}));
                }
                for c in tool_calls {
                    blocks.push(json!({
                        "type": "tool_use",
                        "id": c.id,
                        "name": c.name,
                        "input": input_object(&c.arguments),
                    }));
                }
                push("assistant", blocks);
            }
            Message::ToolResults { results } => push(
                "user",
                results
                    .iter()
                    .map(|r| {
                        json!({
                            "type": "tool_result",
                            "tool_use_id": r.call_id,
                            "content": r.content,
                            "is_error": r.is_error,
                        })
                    })
                    .collect(),
            ),
        }
    }
    let mut body = json!({
        "model": req.model,
        "max_tokens": req.max_tokens.unwrap_or(DEFAULT_MAX_TOKENS),
        "messages": messages,
    });
    if let Some(system) = &req.system {
        body["system"] = json!(system);
    }
    if !req.tools.is_empty() {
        body["tools"] = req
            .tools
            .iter()
            .map(|t| json!({"name": t.name, "description": t.description, "input_schema": t.input_schema}))
            .collect();
    }
    if let Some(t) = req.temperature {
        body["temperature"] = json!(super::wire::temperature(t));
    }
    if req.stream {
        body["stream"] = json!(true);
    }
    body
}

/// Input tokens including cache reads and writes (Anthropic reports them separately).
fn input_tokens(u: &Value) -> u64 {
    number(u, "input_tokens")
        + number(u, "cache_creation_input_tokens")
        + number(u, "cache_read_input_tokens")
}

/// Parses a whole (non-streamed) response body.
///
/// # Errors
/// A description of what is missing or malformed.
pub fn parse_response(body: &Value) -> Result<ChatResponse, String> {
    let content = body
        .get("content")
        .and_then(Value::as_array)
        .ok_or("the response has no `content` list")?;
    let mut text = String::new();
    let mut tool_calls = Vec::new();
    for (i, block) in content.iter().enumerate() {
        match block.get("type").and_then(Value::as_str) {
            Some("text") => text.push_str(block.get("text").and_then(Value::as_str).unwrap_or("")),
            Some("tool_use") => {
                let name = block
                    .get("name")
                    .and_then(Value::as_str)
                    .ok_or(format!("content block {i} (tool_use) has no `name`"))?;
                tool_calls.push(ToolCall {
                    id: block
                        .get("id")
                        .and_then(Value::as_str)
                        .unwrap_or_default()
                        .to_string(),
                    name: name.to_string(),
                    arguments: block.get("input").cloned().unwrap_or(json!({})).to_string(),
                });
            }
            // Thinking and other block types carry nothing the runtime uses.
            Some(_) => {}
            None => return Err(format!("content block {i} has no `type`")),
        }
    }
    let usage = body.get("usage").filter(|u| u.is_object());
    Ok(ChatResponse {
        text,
        tool_calls,
        usage: usage
            .map(|u| Usage {
                input_tokens: input_tokens(u),
                output_tokens: number(u, "output_tokens"),
            })
            .unwrap_or_default(),
        usage_reported: usage.is_some(),
        stop_reason: body
            .get("stop_reason")
            .and_then(Value::as_str)
            .map(str::to_string),
    })
}

#[derive(Debug)]
enum Block {
    Text,
    ToolUse {
        id: String,
        name: String,
        json: String,
    },
    Other,
}

/// Assembles a streamed response from its SSE events.
#[derive(Debug, Default)]
pub struct StreamAssembler {
    text: String,
    blocks: BTreeMap<u64, Block>,
    usage: Option<Usage>,
    stop_reason: Option<String>,
    done: bool,
}

impl StreamAssembler {
    /// Feeds one SSE event (`event:` name and `data:` payload).
    ///
    /// # Errors
    /// [`StreamFailure::Malformed`] for a payload that is not JSON or lacks a required field;
    /// [`StreamFailure::Provider`] for an `error` event.
    pub fn feed(&mut self, event: &str, data: &str) -> Result<StreamStep, StreamFailure> {
        let v: Value = serde_json::from_str(data).map_err(|e| {
            StreamFailure::Malformed(format!("the data of a `{event}` event is not JSON ({e})"))
        })?;
        let kind = v
            .get("type")
            .and_then(Value::as_str)
            .unwrap_or(event)
            .to_string();
        let index = || {
            v.get("index")
                .and_then(Value::as_u64)
                .ok_or_else(|| StreamFailure::Malformed(format!("a `{kind}` event has no `index`")))
        };
        match kind.as_str() {
            "message_start" => {
                if let Some(u) = v.pointer("/message/usage") {
                    self.usage = Some(Usage {
                        input_tokens: input_tokens(u),
                        output_tokens: number(u, "output_tokens"),
                    });
                }
            }
            "content_block_start" => {
                let i = index()?;
                let block = v.get("content_block").ok_or_else(|| {
                    StreamFailure::Malformed("`content_block_start` has no `content_block`".into())
                })?;
                let b = match block.get("type").and_then(Value::as_str) {
                    Some("text") => {
                        let t = block.get("text").and_then(Value::as_str).unwrap_or("");
                        self.text.push_str(t);
                        Block::Text
                    }
                    Some("tool_use") => Block::ToolUse {
                        id: block.get("id").and_then(Value::as_str).unwrap_or("").into(),
                        name: block
                            .get("name")
                            .and_then(Value::as_str)
                            .unwrap_or("")
                            .into(),
                        json: String::new(),
                    },
                    _ => Block::Other,
                };
                self.blocks.insert(i, b);
            }
            "content_block_delta" => {
                let i = index()?;
                let delta = v.get("delta").ok_or_else(|| {
                    StreamFailure::Malformed("`content_block_delta` has no `delta`".into())
                })?;
                match (
                    delta.get("type").and_then(Value::as_str),
                    self.blocks.get_mut(&i),
                ) {
                    (Some("text_delta"), _) => {
                        let t = delta.get("text").and_then(Value::as_str).unwrap_or("");
                        self.text.push_str(t);
                        if !t.is_empty() {
                            return Ok(StreamStep::Text(t.to_string()));
                        }
                    }
                    (Some("input_json_delta"), Some(Block::ToolUse { json, .. })) => {
                        json.push_str(
                            delta
                                .get("partial_json")
                                .and_then(Value::as_str)
                                .unwrap_or(""),
                        );
                    }
                    (Some("input_json_delta"), _) => {
                        return Err(StreamFailure::Malformed(format!(
                            "`input_json_delta` for block {i}, which is not a tool_use block"
                        )));
                    }
                    _ => {}
                }
            }
            "message_delta" => {
                if let Some(r) = v.pointer("/delta/stop_reason").and_then(Value::as_str) {
                    self.stop_reason = Some(r.to_string());
                }
                if let Some(u) = v.get("usage") {
                    let usage = self.usage.get_or_insert_with(Usage::default);
                    if let Some(out) = u.get("output_tokens").and_then(Value::as_u64) {
                        usage.output_tokens = out;
                    }
                    if u.get("input_tokens").is_some() {
                        usage.input_tokens = input_tokens(u);
                    }
                }
            }
            "message_stop" => {
                self.done = true;
                return Ok(StreamStep::Done);
            }
            "error" => {
                return Err(StreamFailure::Provider(
                    v.get("error").cloned().unwrap_or(v.clone()),
                ));
            }
            _ => {} // ping, content_block_stop, future event types
        }
        Ok(StreamStep::Nothing)
    }

    /// The assembled response, if `message_stop` arrived.
    ///
    /// `None` when the stream ended before `message_stop`.
    pub fn finish(self) -> Option<ChatResponse> {
        if !self.done {
            return None;
        }
        let tool_calls = self
            .blocks
            .into_values()
            .filter_map(|b| match b {
                Block::ToolUse { id, name, json } => Some(ToolCall {
                    id,
                    name,
                    // An empty input streams no deltas at all: it is the empty object.
                    arguments: if json.is_empty() { "{}".into() } else { json },
                }),
                Block::Text | Block::Other => None,
            })
            .collect();
        Some(ChatResponse {
            text: self.text,
            tool_calls,
            usage: self.usage.unwrap_or_default(),
            usage_reported: self.usage.is_some(),
            stop_reason: self.stop_reason,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::actors::messages::ToolResult;

    #[test]
    fn tool_results_and_a_following_user_turn_merge_into_one_user_message() {
        let req = ChatRequest {
            model: "claude".into(),
            system: Some("sys".into()),
            messages: vec![
                Message::User { text: "go".into() },
                Message::Assistant {
                    text: "ok".into(),
                    tool_calls: vec![ToolCall {
                        id: "t1".into(),
                        name: "write_file".into(),
                        arguments: "not json".into(),
                    }],
                },
                Message::ToolResults {
                    results: vec![ToolResult {
                        call_id: "t1".into(),
                        content: "bad arguments".into(),
                        is_error: true,
                    }],
                },
                Message::User {
                    text: "try again".into(),
                },
            ],
            tools: vec![],
            max_tokens: None,
            temperature: Some(0.2),
            stream: false,
        };
        let body = request_body(&req);
        assert_eq!(body["system"], "sys");
        assert_eq!(body["max_tokens"], DEFAULT_MAX_TOKENS);
        let msgs = body["messages"].as_array().unwrap();
        assert_eq!(msgs.len(), 3);
        assert_eq!(msgs[1]["content"][1]["input"], json!({}));
        assert_eq!(msgs[2]["content"][0]["type"], "tool_result");
        assert_eq!(msgs[2]["content"][0]["is_error"], true);
        assert_eq!(msgs[2]["content"][1]["text"], "try again");
    }

    #[test]
    fn stream_assembles_input_json_deltas_and_usage() {
        let mut a = StreamAssembler::default();
        let events = [
            (
                "message_start",
                r#"{"type":"message_start","message":{"usage":{"input_tokens":20,"output_tokens":1}}}"#,
            ),
            (
                "content_block_start",
                r#"{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}"#,
            ),
            (
                "content_block_delta",
                r#"{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Editing"}}"#,
            ),
            (
                "content_block_stop",
                r#"{"type":"content_block_stop","index":0}"#,
            ),
            (
                "content_block_start",
                r#"{"type":"content_block_start","index":1,"content_block":{"type":"tool_use","id":"toolu_1","name":"edit_file","input":{}}}"#,
            ),
            (
                "content_block_delta",
                r#"{"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"{\"path\": \"a"}}"#,
            ),
            ("ping", r#"{"type":"ping"}"#),
            (
                "content_block_delta",
                r#"{"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":".txt\"}"}}"#,
            ),
            (
                "message_delta",
                r#"{"type":"message_delta","delta":{"stop_reason":"tool_use"},"usage":{"output_tokens":9}}"#,
            ),
            ("message_stop", r#"{"type":"message_stop"}"#),
        ];
        for (e, d) in events {
            a.feed(e, d).unwrap();
        }
        let r = a.finish().unwrap();
        assert_eq!(r.text, "Editing");
        assert_eq!(r.tool_calls[0].arguments, "{\"path\": \"a.txt\"}");
        assert_eq!(
            r.usage,
            Usage {
                input_tokens: 20,
                output_tokens: 9
            }
        );
        assert_eq!(r.stop_reason.as_deref(), Some("tool_use"));
    }

    #[test]
    fn an_error_event_is_reported_and_an_unfinished_stream_is_incomplete() {
        let mut a = StreamAssembler::default();
        let err = a
            .feed(
                "error",
                r#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#,
            )
            .unwrap_err();
        assert!(matches!(err, StreamFailure::Provider(_)));
        assert!(a.finish().is_none());
    }
}
