//! A scripted model server on 127.0.0.1 speaking the OpenAI Chat Completions
//! (`POST /v1/chat/completions`) and Anthropic Messages (`POST /v1/messages`) wire formats,
//! streaming (SSE) and not, as each request asks.
//!
//! Each request consumes the next [`Turn`] of the script, whichever endpoint it hits: a reply
//! (text, tool calls, usage), an HTTP error (429 with `retry-after`, 500, 401 echoing the key
//! like real providers do), a connection dropped mid-body, malformed JSON, or a stall. Every
//! request is recorded (path, headers, JSON body, time) for assertions. The server runs on
//! its own thread and runtime, so sync tests (driving the real binary) and async tests can
//! both use it; it stops when dropped.

use std::collections::{BTreeMap, VecDeque};
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, Uri};
use axum::response::sse::{Event, Sse};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use futures_util::stream;
use serde_json::{Value, json};

/// One scripted tool call.
#[derive(Debug, Clone)]
pub struct ScriptedCall {
    /// Call id.
    pub id: String,
    /// Tool name (may name no offered tool).
    pub name: String,
    /// Arguments as JSON text (may be invalid on purpose).
    pub arguments: String,
}

/// What the server does for one request.
#[derive(Debug, Clone)]
pub enum Turn {
    /// A reply.
    Reply {
        /// Text (may be empty).
        text: String,
        /// Tool calls.
        calls: Vec<ScriptedCall>,
        /// (input, output) tokens reported.
        usage: (u64, u64),
    },
    /// An HTTP error with the wire format's error body.
    Status {
        /// Status code.
        status: u16,
        /// `retry-after` header value.
        retry_after: Option<String>,
        /// Error type/code.
        code: String,
        /// Error message.
        message: String,
    },
    /// 401 whose message echoes the key the request carried (as OpenAI does).
    Unauthorized,
    /// A 200 whose body breaks off mid-way (connection dropped).
    Drop,
    /// A 200 whose body is not valid JSON (or, streaming, an SSE event whose data is not).
    Malformed,
    /// A 200 that never sends its body.
    Stall,
}

impl Turn {
    /// A text-only reply.
    pub fn text(text: &str, usage: (u64, u64)) -> Self {
        Turn::Reply {
            text: text.into(),
            calls: vec![],
            usage,
        }
    }

    /// A reply with optional text and tool calls `(name, arguments JSON text)`; ids are
    /// `call_<turn-unique suffix>`.
    pub fn tools(text: &str, calls: &[(&str, &str)], usage: (u64, u64)) -> Self {
        Turn::Reply {
            text: text.into(),
            calls: calls
                .iter()
                .enumerate()
                .map(|(i, (name, args))| ScriptedCall {
                    id: format!("call_{}_{i}", ulid_suffix()),
                    name: (*name).into(),
                    arguments: (*args).into(),
                })
                .collect(),
            usage,
        }
    }

    /// An HTTP error.
    pub fn status(status: u16, message: &str) -> Self {
        Turn::Status {
            status,
            retry_after: None,
            code: match status {
                429 => "rate_limit_error",
                500..=599 => "server_error",
                _ => "invalid_request_error",
            }
            .into(),
            message: message.into(),
        }
    }

    /// 429 with `retry-after: secs`.
    pub fn rate_limited(retry_after: &str) -> Self {
        Turn::Status {
            status: 429,
            retry_after: Some(retry_after.into()),
            code: "rate_limit_error".into(),
            message: "Rate limit reached; slow down".into(),
        }
    }
}

fn ulid_suffix() -> String {
    use std::sync::atomic::{AtomicU64, Ordering};
    static N: AtomicU64 = AtomicU64::new(1);
    N.fetch_add(1, Ordering::Relaxed).to_string()
}

/// A request the server received.
#[derive(Debug, Clone)]
pub struct Recorded {
    /// Path (`/v1/chat/completions` or `/v1/messages`).
    pub path: String,
    /// Headers, lowercase names.
    pub headers: BTreeMap<String, String>,
    /// The JSON body (`Null` if it was not JSON).
    pub body: Value,
    /// When it arrived.
    pub at: Instant,
}

#[derive(Default)]
struct Shared {
    script: Mutex<VecDeque<Turn>>,
    requests: Mutex<Vec<Recorded>>,
}

/// The running server.
pub struct ProviderServer {
    addr: SocketAddr,
    shared: Arc<Shared>,
    shutdown: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl ProviderServer {
    /// Starts a server replaying `script`, one turn per request.
    pub fn start(script: Vec<Turn>) -> Self {
        let shared = Arc::new(Shared {
            script: Mutex::new(script.into()),
            requests: Mutex::new(Vec::new()),
        });
        let (addr_tx, addr_rx) = std::sync::mpsc::channel();
        let (shutdown, shutdown_rx) = tokio::sync::oneshot::channel::<()>();
        let state = shared.clone();
        let thread = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("server runtime");
            rt.block_on(async move {
                let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
                    .await
                    .expect("bind 127.0.0.1");
                addr_tx.send(listener.local_addr().unwrap()).unwrap();
                let app = Router::new()
                    .route("/v1/chat/completions", post(handle))
                    .route("/v1/messages", post(handle))
                    .with_state(state);
                axum::serve(listener, app)
                    .with_graceful_shutdown(async {
                        let _ = shutdown_rx.await;
                    })
                    .await
                    .expect("serve");
            });
        });
        let addr = addr_rx.recv().expect("server address");
        Self {
            addr,
            shared,
            shutdown: Some(shutdown),
            thread: Some(thread),
        }
    }

    /// Base URL for an `openai` kind provider.
    pub fn openai_base(&self) -> String {
        format!("http://{}/v1", self.addr)
    }

    /// Base URL for an `anthropic` kind provider.
    pub fn anthropic_base(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Requests received so far.
    pub fn requests(&self) -> Vec<Recorded> {
        self.shared.requests.lock().unwrap().clone()
    }

    /// Turns not yet used.
    pub fn remaining(&self) -> usize {
        self.shared.script.lock().unwrap().len()
    }
}

impl Drop for ProviderServer {
    fn drop(&mut self) {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
        // Stalled connections keep graceful shutdown waiting; the thread is detached then.
        drop(self.thread.take());
    }
}

#[derive(Clone, Copy, PartialEq)]
enum Wire {
    OpenAi,
    Anthropic,
}

async fn handle(
    State(shared): State<Arc<Shared>>,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let wire = if uri.path().ends_with("/messages") {
        Wire::Anthropic
    } else {
        Wire::OpenAi
    };
    let body: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let stream = body["stream"] == true;
    let include_usage = body["stream_options"]["include_usage"] == true;
    let model = body["model"].as_str().unwrap_or("scripted").to_string();
    let header_map: BTreeMap<String, String> = headers
        .iter()
        .map(|(k, v)| (k.as_str().to_string(), v.to_str().unwrap_or("").to_string()))
        .collect();
    let key = header_map
        .get("authorization")
        .map(|v| v.trim_start_matches("Bearer ").to_string())
        .or_else(|| header_map.get("x-api-key").cloned())
        .unwrap_or_default();
    shared.requests.lock().unwrap().push(Recorded {
        path: uri.path().to_string(),
        headers: header_map,
        body,
        at: Instant::now(),
    });
    let turn = shared.script.lock().unwrap().pop_front();
    let Some(turn) = turn else {
        return error_response(
            wire,
            400,
            None,
            "invalid_request_error",
            "scripted server: the script has no turn left for this request",
        );
    };
    match turn {
        Turn::Reply { text, calls, usage } => {
            if stream {
                match wire {
                    Wire::OpenAi => sse(openai_chunks(&model, &text, &calls, usage, include_usage)),
                    Wire::Anthropic => sse(anthropic_events(&model, &text, &calls, usage)),
                }
            } else {
                let v = match wire {
                    Wire::OpenAi => openai_message(&model, &text, &calls, usage),
                    Wire::Anthropic => anthropic_message(&model, &text, &calls, usage),
                };
                (StatusCode::OK, axum::Json(v)).into_response()
            }
        }
        Turn::Status {
            status,
            retry_after,
            code,
            message,
        } => error_response(wire, status, retry_after, &code, &message),
        Turn::Unauthorized => error_response(
            wire,
            401,
            None,
            "invalid_api_key",
            &format!(
                "Incorrect API key provided: {key}. You can find your API key in your account settings."
            ),
        ),
        Turn::Drop => {
            let partial = if stream {
                match wire {
                    Wire::OpenAi => "data: {\"choices\":[{\"delta\":{\"content\":\"Partial \"}}]}\n\ndata: {\"choices\":[{\"delta\":{\"content\":\"rep\"}}]}\n\n".to_string(),
                    Wire::Anthropic => "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"usage\":{\"input_tokens\":3,\"output_tokens\":0}}}\n\nevent: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\nevent: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"Partial \"}}\n\n".to_string(),
                }
            } else {
                "{\"id\":\"x\",\"choices\":[{\"message\":{\"content\":\"Par".to_string()
            };
            let chunks: Vec<Result<Bytes, std::io::Error>> = vec![
                Ok(Bytes::from(partial)),
                Err(std::io::Error::other("scripted drop")),
            ];
            Response::builder()
                .status(200)
                .header(
                    "content-type",
                    if stream {
                        "text/event-stream"
                    } else {
                        "application/json"
                    },
                )
                .body(Body::from_stream(stream::iter(chunks)))
                .unwrap()
        }
        Turn::Malformed => {
            if stream {
                let events: Vec<Result<Event, Infallible>> = vec![Ok(Event::default()
                    .event("message_start")
                    .data("{this is not json"))];
                sse(events)
            } else {
                Response::builder()
                    .status(200)
                    .header("content-type", "application/json")
                    .body(Body::from("{\"choices\": [ this is not json"))
                    .unwrap()
            }
        }
        Turn::Stall => Response::builder()
            .status(200)
            .header(
                "content-type",
                if stream {
                    "text/event-stream"
                } else {
                    "application/json"
                },
            )
            .body(Body::from_stream(stream::pending::<
                Result<Bytes, std::io::Error>,
            >()))
            .unwrap(),
    }
}

fn sse(events: Vec<Result<Event, Infallible>>) -> Response {
    Sse::new(stream::iter(events)).into_response()
}

fn error_response(
    wire: Wire,
    status: u16,
    retry_after: Option<String>,
    code: &str,
    message: &str,
) -> Response {
    let body = match wire {
        Wire::OpenAi => json!({"error": {"message": message, "type": code, "code": code}}),
        Wire::Anthropic => json!({"type": "error", "error": {"type": code, "message": message}}),
    };
    let mut r = Response::builder()
        .status(status)
        .header("content-type", "application/json");
    if let Some(ra) = retry_after {
        r = r.header("retry-after", ra);
    }
    r.body(Body::from(body.to_string())).unwrap()
}

/// Splits `s` into pieces of `n` characters.
fn pieces(s: &str, n: usize) -> Vec<String> {
    let chars: Vec<char> = s.chars().collect();
    chars.chunks(n).map(|c| c.iter().collect()).collect()
}

fn openai_message(model: &str, text: &str, calls: &[ScriptedCall], usage: (u64, u64)) -> Value {
    let mut message = json!({"role": "assistant", "content": if text.is_empty() { Value::Null } else { json!(text) }});
    if !calls.is_empty() {
        message["tool_calls"] = calls
            .iter()
            .map(|c| json!({"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}))
            .collect();
    }
    json!({
        "id": "chatcmpl-scripted",
        "object": "chat.completion",
        "model": model,
        "choices": [{"index": 0, "message": message, "finish_reason": if calls.is_empty() { "stop" } else { "tool_calls" }}],
        "usage": {"prompt_tokens": usage.0, "completion_tokens": usage.1, "total_tokens": usage.0 + usage.1},
    })
}

fn openai_chunks(
    model: &str,
    text: &str,
    calls: &[ScriptedCall],
    usage: (u64, u64),
    include_usage: bool,
) -> Vec<Result<Event, Infallible>> {
    let chunk = |delta: Value, finish: Value| {
        json!({"id": "chatcmpl-scripted", "object": "chat.completion.chunk", "model": model,
               "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})
    };
    let mut out = vec![chunk(
        json!({"role": "assistant", "content": ""}),
        Value::Null,
    )];
    for p in pieces(text, 4) {
        out.push(chunk(json!({"content": p}), Value::Null));
    }
    for (i, c) in calls.iter().enumerate() {
        out.push(chunk(
            json!({"tool_calls": [{"index": i, "id": c.id, "type": "function", "function": {"name": c.name, "arguments": ""}}]}),
            Value::Null,
        ));
        for p in pieces(&c.arguments, 3) {
            out.push(chunk(
                json!({"tool_calls": [{"index": i, "function": {"arguments": p}}]}),
                Value::Null,
            ));
        }
    }
    out.push(chunk(
        json!({}),
        json!(if calls.is_empty() {
            "stop"
        } else {
            "tool_calls"
        }),
    ));
    if include_usage {
        out.push(json!({"id": "chatcmpl-scripted", "object": "chat.completion.chunk", "model": model, "choices": [],
            "usage": {"prompt_tokens": usage.0, "completion_tokens": usage.1, "total_tokens": usage.0 + usage.1}}));
    }
    let mut events: Vec<Result<Event, Infallible>> = out
        .into_iter()
        .map(|v| Ok(Event::default().data(v.to_string())))
        .collect();
    events.push(Ok(Event::default().data("[DONE]")));
    events
}

fn anthropic_input(arguments: &str) -> Value {
    serde_json::from_str(arguments).unwrap_or_else(|_| json!(arguments))
}

fn anthropic_message(model: &str, text: &str, calls: &[ScriptedCall], usage: (u64, u64)) -> Value {
    let mut content = Vec::new();
    if !text.is_empty() {
        content.push(json!({"type": "text", "text": text}));
    }
    for c in calls {
        content.push(json!({"type": "tool_use", "id": c.id, "name": c.name, "input": anthropic_input(&c.arguments)}));
    }
    json!({
        "id": "msg_scripted", "type": "message", "role": "assistant", "model": model,
        "content": content,
        "stop_reason": if calls.is_empty() { "end_turn" } else { "tool_use" },
        "usage": {"input_tokens": usage.0, "output_tokens": usage.1},
    })
}

fn anthropic_events(
    model: &str,
    text: &str,
    calls: &[ScriptedCall],
    usage: (u64, u64),
) -> Vec<Result<Event, Infallible>> {
    let mut out: Vec<(&str, Value)> = vec![(
        "message_start",
        json!({"type": "message_start", "message": {"id": "msg_scripted", "type": "message", "role": "assistant",
            "model": model, "content": [], "stop_reason": null, "usage": {"input_tokens": usage.0, "output_tokens": 1}}}),
    )];
    let mut index = 0;
    if !text.is_empty() {
        out.push(("content_block_start", json!({"type": "content_block_start", "index": index, "content_block": {"type": "text", "text": ""}})));
        for p in pieces(text, 4) {
            out.push(("content_block_delta", json!({"type": "content_block_delta", "index": index, "delta": {"type": "text_delta", "text": p}})));
        }
        out.push((
            "content_block_stop",
            json!({"type": "content_block_stop", "index": index}),
        ));
        index += 1;
    }
    out.push(("ping", json!({"type": "ping"})));
    for c in calls {
        out.push((
            "content_block_start",
            json!({"type": "content_block_start", "index": index,
            "content_block": {"type": "tool_use", "id": c.id, "name": c.name, "input": {}}}),
        ));
        for p in pieces(&c.arguments, 3) {
            out.push((
                "content_block_delta",
                json!({"type": "content_block_delta", "index": index,
                "delta": {"type": "input_json_delta", "partial_json": p}}),
            ));
        }
        out.push((
            "content_block_stop",
            json!({"type": "content_block_stop", "index": index}),
        ));
        index += 1;
    }
    out.push((
        "message_delta",
        json!({"type": "message_delta",
        "delta": {"stop_reason": if calls.is_empty() { "end_turn" } else { "tool_use" }},
        "usage": {"output_tokens": usage.1}}),
    ));
    out.push(("message_stop", json!({"type": "message_stop"})));
    out.into_iter()
        .map(|(name, v)| Ok(Event::default().event(name).data(v.to_string())))
        .collect()
}
