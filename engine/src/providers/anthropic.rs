//! The Anthropic Messages wire format (`POST {base_url}/v1/messages`).
//!
//! Translates a [`ChatRequest`] into the request body (`system`, `tools` with
//! `input_schema`, assistant `tool_use` blocks, user `tool_result` blocks; consecutive
//! user-role turns are merged), parses a whole response, and assembles a streamed one from
//! its events (`message_start`, `content_block_start`, `content_block_delta` with
//! `text_delta` / `input_json_delta`, `message_delta`, `message_stop`, `error`).

use std::collections::BTreeMap;

use serde_json::{Value, json};

use super::wire::{StreamFailure, StreamStep, number, standard_schema};
use crate::domain::messages::{
    ChatRequest, ChatResponse, DEFAULT_MAX_TOKENS, Message, ToolCall, ToolResult, Usage,
};

/// The API version header value sent with every request.
pub const API_VERSION: &str = "2023-06-01";

/// The endpoint for a base URL such as `https://api.anthropic.com`.
pub fn endpoint(base_url: &str) -> String {
    format!("{}/v1/messages", base_url.trim_end_matches('/'))
}

/// The largest completion of Anthropic models, in tokens, by model-name prefix (longest
/// prefix first). Models not listed are taken to allow at least [`DEFAULT_MAX_TOKENS`].
const MODEL_MAX_OUTPUT: [(&str, u32); 8] = [
    ("claude-3-5-sonnet", 8192),
    ("claude-3-5-haiku", 8192),
    ("claude-3-haiku", 4096),
    ("claude-3-opus", 4096),
    ("claude-3-sonnet", 4096),
    ("claude-2", 4096),
    ("claude-instant", 4096),
    ("claude-3-7-sonnet", 64_000),
];

/// The `max_tokens` sent when the actor sets none: [`DEFAULT_MAX_TOKENS`], lowered to the
/// model's limit (`configured`, from `models."M".max_output_tokens`, else the built-in
/// table) so that older models do not refuse the request.
pub fn default_max_tokens(model: &str, configured: Option<u32>) -> u32 {
    let limit = configured.or_else(|| {
        MODEL_MAX_OUTPUT
            .iter()
            .filter(|(prefix, _)| model.starts_with(prefix))
            .max_by_key(|(prefix, _)| prefix.len())
            .map(|(_, max)| *max)
    });
    limit.map_or(DEFAULT_MAX_TOKENS, |l| l.min(DEFAULT_MAX_TOKENS))
}

/// The prompt-cache marker: the prefix up to and including the marked block is cached for
/// five minutes and read back at the cache price by the next request that repeats it.
fn cache_marker() -> Value {
    json!({"type": "ephemeral"})
}

/// Whether a text block would be refused (Anthropic rejects empty and whitespace-only text).
fn blank(text: &str) -> bool {
    text.trim().is_empty()
}

/// Arguments text as an `input` object: invalid or non-object JSON becomes `{}` (the
/// runtime has already answered such a call with an error result).
fn input_object(arguments: &str) -> Value {
    match serde_json::from_str::<Value>(arguments) {
        Ok(v @ Value::Object(_)) => v,
        _ => json!({}),
    }
}

/// A `tool_result`'s `content`: its text, or, when the tool returned images, an array of
/// the text block and one base64 `image` block per image.
fn tool_result_content(r: &ToolResult) -> Value {
    if r.images.is_empty() {
        return json!(r.content);
    }
    let mut blocks = Vec::with_capacity(r.images.len() + 1);
    if !blank(&r.content) {
        blocks.push(json!({"type": "text", "text": r.content}));
    }
    blocks.extend(r.images.iter().map(|i| {
        json!({
            "type": "image",
            "source": {"type": "base64", "media_type": i.mime_type, "data": i.data},
        })
    }));
    Value::Array(blocks)
}

/// The JSON request body. `default_max` is sent as `max_tokens` when the request sets none
/// (see [`default_max_tokens`]).
///
/// Prompt caching: the stable prefix is marked with `cache_control` at three breakpoints
/// (of the four allowed): the last tool, the system prompt, and the last block of the
/// conversation, so that each turn of a tool loop reads everything before it from the cache.
/// Empty and whitespace-only text blocks are left out; a turn left with no blocks is dropped.
pub fn request_body(req: &ChatRequest, default_max: u32) -> Value {
    let mut messages: Vec<Value> = Vec::new();
    let mut push = |role: &str, blocks: Vec<Value>| {
        if blocks.is_empty() {
            return;
        }
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
            Message::User { text } if blank(text) => {}
            Message::User { text } => push("user", vec![json!({"type": "text", "text": text})]),
            Message::Assistant { text, tool_calls } => {
                let mut blocks = Vec::new();
                if !blank(text) {
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
                            "content": tool_result_content(r),
                            "is_error": r.is_error,
                        })
                    })
                    .collect(),
            ),
        }
    }
    if let Some(last) = messages
        .last_mut()
        .and_then(|m| m["content"].as_array_mut())
        .and_then(|c| c.last_mut())
    {
        last["cache_control"] = cache_marker();
    }
    let mut body = json!({
        "model": req.model,
        "max_tokens": req.max_tokens.unwrap_or(default_max),
        "messages": messages,
    });
    if let Some(system) = req.system.as_deref().filter(|s| !blank(s)) {
        body["system"] = json!([{"type": "text", "text": system, "cache_control": cache_marker()}]);
    }
    if !req.tools.is_empty() {
        let mut tools: Vec<Value> = req
            .tools
            .iter()
            .map(|t| json!({"name": t.name, "description": t.description, "input_schema": standard_schema(&t.input_schema)}))
            .collect();
        if let Some(last) = tools.last_mut() {
            last["cache_control"] = cache_marker();
        }
        body["tools"] = Value::Array(tools);
    }
    let sampling = &req.sampling;
    if let Some(t) = sampling.temperature {
        body["temperature"] = json!(super::wire::temperature(t));
    }
    if let Some(p) = sampling.top_p {
        body["top_p"] = json!(super::wire::temperature(p));
    }
    if !sampling.stop.is_empty() {
        body["stop_sequences"] = json!(sampling.stop);
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

/// The count fields of Anthropic's usage object.
const COUNT_FIELDS: [&str; 4] = [
    "input_tokens",
    "output_tokens",
    "cache_read_input_tokens",
    "cache_creation_input_tokens",
];

/// The usage object's counts: input including the cache, and the cache's share.
fn usage_of(u: &Value) -> Usage {
    Usage {
        input_tokens: input_tokens(u),
        output_tokens: number(u, "output_tokens"),
        cache_read_tokens: number(u, "cache_read_input_tokens"),
        cache_write_tokens: number(u, "cache_creation_input_tokens"),
    }
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
    let usage = body
        .get("usage")
        .filter(|u| u.is_object() && super::wire::counts_valid(u, &COUNT_FIELDS));
    Ok(ChatResponse {
        text,
        tool_calls,
        usage: usage.map(usage_of).unwrap_or_default(),
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
    /// A usage object had a negative or non-integer count: usage counts as unreported.
    bad_usage: bool,
}

impl StreamAssembler {
    /// Bytes of reply assembled so far: text plus tool-call input JSON.
    pub fn assembled_bytes(&self) -> usize {
        self.text.len()
            + self
                .blocks
                .values()
                .map(|b| match b {
                    Block::ToolUse { json, .. } => json.len(),
                    Block::Text | Block::Other => 0,
                })
                .sum::<usize>()
    }

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
                    self.bad_usage |= !super::wire::counts_valid(u, &COUNT_FIELDS);
                    self.usage = Some(usage_of(u));
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
                    self.bad_usage |= !super::wire::counts_valid(u, &COUNT_FIELDS);
                    let usage = self.usage.get_or_insert_with(Usage::default);
                    if let Some(out) = u.get("output_tokens").and_then(Value::as_u64) {
                        usage.output_tokens = out;
                    }
                    if u.get("input_tokens").is_some() {
                        let counted = usage_of(u);
                        usage.input_tokens = counted.input_tokens;
                        usage.cache_read_tokens = counted.cache_read_tokens;
                        usage.cache_write_tokens = counted.cache_write_tokens;
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
            usage: self.usage.filter(|_| !self.bad_usage).unwrap_or_default(),
            usage_reported: self.usage.is_some() && !self.bad_usage,
            stop_reason: self.stop_reason,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::messages::ToolResult;


    #[test]
    fn a_tool_result_with_images_is_its_text_block_then_one_base64_image_block_each() {
        let body = request_body(&super::super::test_turns::image_turn(), DEFAULT_MAX_TOKENS);
        let results = body["messages"][2]["content"].as_array().unwrap();
        assert_eq!(
            results[0]["content"],
            json!([
                {"type": "text", "text": "output of c1"},
                {"type": "image", "source": {
                    "type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo=",
                }},
            ])
        );
        // A result without images keeps its plain string content.
        assert_eq!(results[1]["content"], "output of c2");
        assert_eq!(results[1]["tool_use_id"], "c2");
    }

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
                        images: Vec::new(),
                    }],
                },
                Message::User {
                    text: "try again".into(),
                },
            ],
            sampling: crate::domain::messages::Sampling {
                temperature: Some(0.2),
                ..Default::default()
            },
            ..ChatRequest::default()
        };
        let body = request_body(&req, DEFAULT_MAX_TOKENS);
        assert_eq!(body["system"][0]["text"], "sys");
        assert_eq!(body["max_tokens"], DEFAULT_MAX_TOKENS);
        let msgs = body["messages"].as_array().unwrap();
        assert_eq!(msgs.len(), 3);
        assert_eq!(msgs[1]["content"][1]["input"], json!({}));
        assert_eq!(msgs[2]["content"][0]["type"], "tool_result");
        assert_eq!(msgs[2]["content"][0]["is_error"], true);
        assert_eq!(msgs[2]["content"][1]["text"], "try again");
    }

    #[test]
    fn the_default_max_tokens_stays_within_the_models_limit() {
        assert_eq!(default_max_tokens("claude-3-haiku-20240307", None), 4096);
        assert_eq!(default_max_tokens("claude-3-5-haiku-latest", None), 8192);
        assert_eq!(
            default_max_tokens("claude-sonnet-4-5", None),
            DEFAULT_MAX_TOKENS
        );
        assert_eq!(default_max_tokens("claude-sonnet-4-5", Some(2000)), 2000);
        assert_eq!(
            default_max_tokens("my-proxy-model", Some(100_000)),
            DEFAULT_MAX_TOKENS
        );
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
                output_tokens: 9,
                ..Usage::default()
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
