//! The OpenAI-compatible Chat Completions wire format (`POST {base_url}/chat/completions`),
//! spoken by OpenAI, Ollama, llama.cpp's server, vLLM and LM Studio.
//!
//! Translates a [`ChatRequest`] into the request body (messages with `tool_calls` and `tool`
//! role results, `tools` as functions, `stream` with `stream_options.include_usage`), parses
//! a whole response, and assembles a streamed one from its SSE chunks, including tool-call
//! arguments split across many `delta.tool_calls[i].function.arguments` pieces.

use std::collections::BTreeMap;

use serde_json::{Value, json};

use super::wire::{StreamFailure, StreamStep, number, pointer_number, standard_schema};
use crate::config::MaxTokensField;
use crate::domain::messages::{ChatRequest, ChatResponse, Message, ToolCall, Usage};

/// The endpoint for a base URL such as `https://api.openai.com/v1`.
pub fn endpoint(base_url: &str) -> String {
    format!("{}/chat/completions", base_url.trim_end_matches('/'))
}

/// The JSON request body. The completion cap (the request's, else `default_max`) goes in
/// `max_field` (`max_completion_tokens` for OpenAI itself, `max_tokens` for most compatible
/// servers); sampling options are sent
/// only when set; tool schemas are flattened ([`standard_schema`]).
pub fn request_body(req: &ChatRequest, max_field: MaxTokensField, default_max: u32) -> Value {
    let mut messages = Vec::new();
    if let Some(system) = &req.system {
        messages.push(json!({"role": "system", "content": system}));
    }
    for message in &req.messages {
        match message {
            Message::User { text } => messages.push(json!({"role": "user", "content": text})),
            Message::Assistant { text, tool_calls } => {
                let mut m = json!({
                    "role": "assistant",
                    "content": if text.is_empty() { Value::Null } else { json!(text) },
                });
                if !tool_calls.is_empty() {
                    m["tool_calls"] = tool_calls
                        .iter()
                        .map(|c| {
                            json!({
                                "id": c.id,
                                "type": "function",
                                "function": {"name": c.name, "arguments": c.arguments},
                            })
                        })
                        .collect();
                }
                messages.push(m);
            }
            Message::ToolResults { results } => {
                for r in results {
                    let content = if r.is_error {
                        format!("ERROR: {}", r.content)
                    } else {
                        r.content.clone()
                    };
                    messages.push(
                        json!({"role": "tool", "tool_call_id": r.call_id, "content": content}),
                    );
                }
                // Tool messages carry text only: the turn's images follow in one user message.
                let mut images = Vec::new();
                for r in results.iter().filter(|r| !r.images.is_empty()) {
                    let tool = tool_name(&req.messages, &r.call_id).unwrap_or("?");
                    images.push(json!({
                        "type": "text",
                        "text": format!("Images returned by tool {tool} ({}):", r.call_id),
                    }));
                    images.extend(r.images.iter().map(|i| {
                        json!({
                            "type": "image_url",
                            "image_url": {"url": format!("data:{};base64,{}", i.mime_type, i.data)},
                        })
                    }));
                }
                if !images.is_empty() {
                    messages.push(json!({"role": "user", "content": images}));
                }
            }
        }
    }
    let mut body = json!({"model": req.model, "messages": messages});
    if !req.tools.is_empty() {
        body["tools"] = req
            .tools
            .iter()
            .map(|t| {
                json!({
                    "type": "function",
                    "function": {
                        "name": t.name,
                        "description": t.description,
                        "parameters": standard_schema(&t.input_schema),
                    },
                })
            })
            .collect();
    }
    body[max_field.as_str()] = json!(req.max_tokens.unwrap_or(default_max));
    let sampling = &req.sampling;
    if let Some(t) = sampling.temperature {
        body["temperature"] = json!(super::wire::temperature(t));
    }
    if let Some(p) = sampling.top_p {
        body["top_p"] = json!(super::wire::temperature(p));
    }
    if let Some(seed) = sampling.seed {
        body["seed"] = json!(seed);
    }
    if !sampling.stop.is_empty() {
        body["stop"] = json!(sampling.stop);
    }
    if req.stream {
        body["stream"] = json!(true);
        body["stream_options"] = json!({"include_usage": true});
    }
    body
}

/// The name of the tool that call `call_id` invoked, from the assistant message that made it.
fn tool_name<'m>(messages: &'m [Message], call_id: &str) -> Option<&'m str> {
    messages.iter().rev().find_map(|m| match m {
        Message::Assistant { tool_calls, .. } => tool_calls
            .iter()
            .find(|c| c.id == call_id)
            .map(|c| c.name.as_str()),
        _ => None,
    })
}

fn usage_of(v: &Value) -> Option<Usage> {
    let u = v.get("usage").filter(|u| {
        u.is_object() && super::wire::counts_valid(u, &["prompt_tokens", "completion_tokens"])
    })?;
    Some(Usage {
        input_tokens: number(u, "prompt_tokens"),
        output_tokens: number(u, "completion_tokens"),
        cache_read_tokens: pointer_number(u, "/prompt_tokens_details/cached_tokens"),
        cache_write_tokens: 0,
    })
}

/// Arguments as JSON text: a string is taken as written; some servers send an object.
fn arguments_text(v: Option<&Value>) -> String {
    match v {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Null) | None => String::new(),
        Some(other) => other.to_string(),
    }
}

/// Parses a whole (non-streamed) response body.
///
/// # Errors
/// A description of what is missing or malformed.
pub fn parse_response(body: &Value) -> Result<ChatResponse, String> {
    let choice = body
        .get("choices")
        .and_then(|c| c.get(0))
        .ok_or("the response has no `choices[0]`")?;
    let message = choice
        .get("message")
        .ok_or("`choices[0]` has no `message`")?;
    let text = match message.get("content") {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Null) | None => String::new(),
        Some(other) => return Err(format!("`message.content` is not text: {other}")),
    };
    let mut tool_calls = Vec::new();
    if let Some(calls) = message.get("tool_calls").filter(|c| !c.is_null()) {
        let calls = calls
            .as_array()
            .ok_or("`message.tool_calls` is not a list")?;
        for (i, call) in calls.iter().enumerate() {
            let function = call
                .get("function")
                .ok_or(format!("tool call {i} has no `function`"))?;
            let name = function
                .get("name")
                .and_then(Value::as_str)
                .ok_or(format!("tool call {i} has no `function.name`"))?;
            tool_calls.push(ToolCall {
                id: call
                    .get("id")
                    .and_then(Value::as_str)
                    .map(str::to_string)
                    .unwrap_or_else(|| format!("call_{i}")),
                name: name.to_string(),
                arguments: arguments_text(function.get("arguments")),
            });
        }
    }
    let usage = usage_of(body);
    Ok(ChatResponse {
        text,
        tool_calls,
        usage: usage.unwrap_or_default(),
        usage_reported: usage.is_some(),
        stop_reason: choice
            .get("finish_reason")
            .and_then(Value::as_str)
            .map(str::to_string),
    })
}

#[derive(Debug, Default)]
struct PartialCall {
    id: String,
    name: String,
    arguments: String,
}

/// Assembles a streamed response from its SSE `data:` payloads.
#[derive(Debug, Default)]
pub struct StreamAssembler {
    text: String,
    calls: BTreeMap<u64, PartialCall>,
    usage: Option<Usage>,
    finish_reason: Option<String>,
    done: bool,
}

impl StreamAssembler {
    /// Bytes of reply assembled so far: text plus tool-call arguments.
    pub fn assembled_bytes(&self) -> usize {
        self.text.len()
            + self
                .calls
                .values()
                .map(|c| c.arguments.len())
                .sum::<usize>()
    }

    /// Feeds one SSE event's data.
    ///
    /// # Errors
    /// [`StreamFailure::Malformed`] for a payload that is not a chunk;
    /// [`StreamFailure::Provider`] for an error object sent inside the stream.
    pub fn feed(&mut self, data: &str) -> Result<StreamStep, StreamFailure> {
        let data = data.trim();
        if data == "[DONE]" {
            self.done = true;
            return Ok(StreamStep::Done);
        }
        if data.is_empty() {
            return Ok(StreamStep::Nothing);
        }
        let chunk: Value = serde_json::from_str(data)
            .map_err(|e| StreamFailure::Malformed(format!("a stream chunk is not JSON ({e})")))?;
        if let Some(err) = chunk.get("error") {
            return Err(StreamFailure::Provider(err.clone()));
        }
        if let Some(u) = usage_of(&chunk) {
            self.usage = Some(u);
        }
        let Some(choice) = chunk.get("choices").and_then(|c| c.get(0)) else {
            return Ok(StreamStep::Nothing);
        };
        if let Some(reason) = choice.get("finish_reason").and_then(Value::as_str) {
            self.finish_reason = Some(reason.to_string());
        }
        let Some(delta) = choice.get("delta") else {
            return Ok(StreamStep::Nothing);
        };
        if let Some(calls) = delta.get("tool_calls").and_then(Value::as_array) {
            for (position, call) in calls.iter().enumerate() {
                let index = call
                    .get("index")
                    .and_then(Value::as_u64)
                    .unwrap_or(position as u64);
                let entry = self.calls.entry(index).or_default();
                if let Some(id) = call.get("id").and_then(Value::as_str) {
                    entry.id.push_str(id);
                }
                if let Some(f) = call.get("function") {
                    if let Some(name) = f.get("name").and_then(Value::as_str) {
                        entry.name.push_str(name);
                    }
                    entry
                        .arguments
                        .push_str(&arguments_text(f.get("arguments")));
                }
            }
        }
        match delta.get("content").and_then(Value::as_str) {
            Some(text) if !text.is_empty() => {
                self.text.push_str(text);
                Ok(StreamStep::Text(text.to_string()))
            }
            _ => Ok(StreamStep::Nothing),
        }
    }

    /// The assembled response, if the stream was complete (`[DONE]` or a finish reason).
    ///
    /// `None` when the stream ended before the reply was complete.
    pub fn finish(self) -> Option<ChatResponse> {
        if !self.done && self.finish_reason.is_none() {
            return None;
        }
        Some(ChatResponse {
            text: self.text,
            tool_calls: self
                .calls
                .into_iter()
                .map(|(i, c)| ToolCall {
                    id: if c.id.is_empty() {
                        format!("call_{i}")
                    } else {
                        c.id
                    },
                    name: c.name,
                    arguments: c.arguments,
                })
                .collect(),
            usage: self.usage.unwrap_or_default(),
            usage_reported: self.usage.is_some(),
            stop_reason: self.finish_reason,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::messages::{ToolResult, ToolSpec};


    #[test]
    fn a_turns_tool_images_follow_its_tool_messages_in_one_user_message() {
        let body = request_body(&super::super::test_turns::image_turn(), MaxTokensField::MaxTokens, 100);
        let msgs = body["messages"].as_array().unwrap();
        assert_eq!(msgs.len(), 5);
        assert_eq!(msgs[2]["role"], "tool");
        assert_eq!(msgs[2]["content"], "output of c1");
        assert_eq!(msgs[3]["role"], "tool");
        assert_eq!(msgs[3]["tool_call_id"], "c2");
        assert_eq!(
            msgs[4],
            json!({"role": "user", "content": [
                {"type": "text", "text": "Images returned by tool srv.shot (c1):"},
                {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}},
            ]})
        );
    }

    #[test]
    fn tool_results_without_images_add_no_user_message() {
        let mut req = super::super::test_turns::image_turn();
        if let Message::ToolResults { results } = &mut req.messages[2] {
            results[0].images.clear();
        }
        let body = request_body(&req, MaxTokensField::MaxTokens, 100);
        let roles: Vec<&str> = body["messages"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| m["role"].as_str().unwrap())
            .collect();
        assert_eq!(roles, ["user", "assistant", "tool", "tool"]);
    }

    #[test]
    fn request_carries_system_tools_tool_calls_and_results() {
        let req = ChatRequest {
            model: "m".into(),
            system: Some("be brief".into()),
            messages: vec![
                Message::User { text: "hi".into() },
                Message::Assistant {
                    text: String::new(),
                    tool_calls: vec![ToolCall {
                        id: "c1".into(),
                        name: "read_file".into(),
                        arguments: "{\"path\":\"a\"}".into(),
                    }],
                },
                Message::ToolResults {
                    results: vec![ToolResult {
                        call_id: "c1".into(),
                        content: "no such file".into(),
                        is_error: true,
                        images: Vec::new(),
                    }],
                },
            ],
            tools: vec![ToolSpec {
                name: "read_file".into(),
                description: "reads".into(),
                input_schema: json!({"type": "object"}),
            }],
            max_tokens: Some(100),
            stream: true,
            ..ChatRequest::default()
        };
        let body = request_body(&req, MaxTokensField::MaxCompletionTokens, 8192);
        assert_eq!(body["messages"][0]["role"], "system");
        assert_eq!(body["messages"][2]["content"], Value::Null);
        assert_eq!(
            body["messages"][2]["tool_calls"][0]["function"]["arguments"],
            "{\"path\":\"a\"}"
        );
        assert_eq!(body["messages"][3]["role"], "tool");
        assert_eq!(body["messages"][3]["content"], "ERROR: no such file");
        assert_eq!(body["tools"][0]["function"]["parameters"]["type"], "object");
        assert_eq!(body["stream_options"]["include_usage"], true);
        assert!(body.get("max_tokens").is_none());
        assert_eq!(body["max_completion_tokens"], 100);
        assert!(body.get("temperature").is_none() && body.get("seed").is_none());
        assert_eq!(
            request_body(&req, MaxTokensField::MaxTokens, 8192)["max_tokens"],
            100
        );
    }

    #[test]
    fn stream_assembles_tool_call_arguments_split_across_chunks() {
        let mut a = StreamAssembler::default();
        let chunks = [
            r#"{"choices":[{"delta":{"role":"assistant","content":"Let me "}}]}"#,
            r#"{"choices":[{"delta":{"content":"look."}}]}"#,
            r#"{"choices":[{"delta":{"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"read_","arguments":""}}]}}]}"#,
            r#"{"choices":[{"delta":{"tool_calls":[{"index":0,"function":{"name":"file","arguments":"{\"pa"}}]}}]}"#,
            r#"{"choices":[{"delta":{"tool_calls":[{"index":0,"function":{"arguments":"th\":\"a.txt\"}"}}]}}]}"#,
            r#"{"choices":[{"delta":{},"finish_reason":"tool_calls"}]}"#,
            r#"{"choices":[],"usage":{"prompt_tokens":12,"completion_tokens":7}}"#,
            "[DONE]",
        ];
        let mut text = String::new();
        for c in chunks {
            if let StreamStep::Text(t) = a.feed(c).unwrap() {
                text.push_str(&t);
            }
        }
        let r = a.finish().unwrap();
        assert_eq!(text, "Let me look.");
        assert_eq!(r.text, "Let me look.");
        assert_eq!(r.tool_calls.len(), 1);
        assert_eq!(r.tool_calls[0].name, "read_file");
        assert_eq!(r.tool_calls[0].arguments, "{\"path\":\"a.txt\"}");
        assert_eq!(r.usage.total(), 19);
        assert!(r.usage_reported);
    }

    #[test]
    fn a_stream_cut_before_the_finish_is_incomplete() {
        let mut a = StreamAssembler::default();
        a.feed(r#"{"choices":[{"delta":{"content":"par"}}]}"#)
            .unwrap();
        assert!(a.finish().is_none());
    }

    #[test]
    fn a_response_without_choices_is_malformed() {
        let err = parse_response(&json!({"id": "x"})).unwrap_err();
        assert!(err.contains("choices"), "{err}");
    }
}
