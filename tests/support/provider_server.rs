//! A scripted model server on 127.0.0.1 speaking the OpenAI Chat Completions
//! (`POST /v1/chat/completions`) and Anthropic Messages (`POST /v1/messages`) wire formats,
//! streaming (SSE) and not, as each request asks.
//!
//! Each request consumes the next [`Turn`] of the script, whichever endpoint it hits: a reply
//! (text, tool calls, usage; or no usage, cached tokens, a reply cut by the token limit), an
//! HTTP error (429 with `retry-after`, 500, 401 echoing the key like real providers do), a
//! connection dropped mid-body, malformed JSON, a stall, a stream that drips keep-alives or
//! tokens for ever, or one huge event. Every
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
        /// Details beyond text, calls and usage.
        extra: ReplyExtra,
    },
    /// A 200 stream that sends `: keep-alive` comments (or, with `tokens`, one text token)
    /// every `every`, for ever.
    Drip {
        /// Time between pieces.
        every: std::time::Duration,
        /// Tokens instead of comments.
        tokens: bool,
    },
    /// A reply whose text is `bytes` bytes long: one SSE event when streaming (sent in
    /// 16 KiB chunks), one JSON body otherwise.
    Huge {
        /// The text's length.
        bytes: usize,
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

/// What a scripted reply reports besides its text and calls.
#[derive(Debug, Clone, Default)]
pub struct ReplyExtra {
    /// Report no usage at all.
    pub no_usage: bool,
    /// (read, written) input tokens of the prompt cache, part of the input tokens.
    pub cached: (u64, u64),
    /// The reply was cut by the token limit (`length` / `max_tokens`).
    pub cut: bool,
    /// Report the token counts negated (a broken server).
    pub negative: bool,
}

impl Turn {
    /// A text-only reply.
    pub fn text(text: &str, usage: (u64, u64)) -> Self {
        Turn::Reply {
            text: text.into(),
            calls: vec![],
            usage,
            extra: ReplyExtra::default(),
        }
    }

    /// This reply, reporting no usage.
    pub fn without_usage(self) -> Self {
        self.extra(|e| e.no_usage = true)
    }

    /// This reply, with `read` input tokens read from and `written` written to the cache.
    pub fn cached(self, read: u64, written: u64) -> Self {
        self.extra(|e| e.cached = (read, written))
    }

    /// This reply, cut by the completion token limit.
    pub fn cut(self) -> Self {
        self.extra(|e| e.cut = true)
    }

    /// This reply, reporting its token counts negated.
    pub fn negative_usage(self) -> Self {
        self.extra(|e| e.negative = true)
    }

    fn extra(mut self, f: impl FnOnce(&mut ReplyExtra)) -> Self {
        if let Turn::Reply { extra, .. } = &mut self {
            f(extra);
        }
        self
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
            extra: ReplyExtra::default(),
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

/// Picks the turn for a request from its JSON body, like a model that reads its conversation.
pub type Responder = Box<dyn Fn(&Value) -> Turn + Send + Sync>;

#[derive(Default)]
struct Shared {
    script: Mutex<VecDeque<Turn>>,
    requests: Mutex<Vec<Recorded>>,
    responder: Option<Responder>,
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
        Self::serve(Shared {
            script: Mutex::new(script.into()),
            requests: Mutex::new(Vec::new()),
            responder: None,
        })
    }

    /// Starts a server that answers each chat request with `responder`'s turn for its body
    /// (no fixed script): a process that is killed and resumed gets the answers its
    /// conversation calls for, whatever requests the killed one made.
    pub fn responding(responder: impl Fn(&Value) -> Turn + Send + Sync + 'static) -> Self {
        Self::serve(Shared {
            responder: Some(Box::new(responder)),
            ..Shared::default()
        })
    }

    fn serve(shared: Shared) -> Self {
        let shared = Arc::new(shared);
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
                    .route("/v1/embeddings", post(embeddings))
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

    /// The `/v1/embeddings` requests received so far (they use no turn of the script).
    pub fn embedding_requests(&self) -> Vec<Recorded> {
        self.requests()
            .into_iter()
            .filter(|r| r.path == "/v1/embeddings")
            .collect()
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

/// Dimensions of the test vectors.
pub const EMBEDDING_DIMS: usize = 64;

/// The deterministic test vector of `text`: a bag of its lowercase words (letters and
/// digits; `snake_case` and `camelCase` split), each counted in the dimension its FNV-1a
/// hash picks. Texts sharing words are close; texts sharing none are orthogonal.
pub fn test_vector(text: &str) -> Vec<f32> {
    let mut v = vec![0.0f32; EMBEDDING_DIMS];
    let mut spaced = String::new();
    let mut prev_lower = false;
    for c in text.chars() {
        if c.is_uppercase() && prev_lower {
            spaced.push(' ');
        }
        prev_lower = c.is_lowercase();
        spaced.push(if c.is_alphanumeric() { c } else { ' ' });
    }
    for word in spaced.to_lowercase().split_whitespace() {
        let mut h: u32 = 0x811c_9dc5;
        for b in word.bytes() {
            h = (h ^ u32::from(b)).wrapping_mul(0x0100_0193);
        }
        v[h as usize % EMBEDDING_DIMS] += 1.0;
    }
    v
}

/// `POST /v1/embeddings`: one [`test_vector`] per input, recorded like every request.
async fn embeddings(
    State(shared): State<Arc<Shared>>,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let body: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let inputs: Vec<String> = match &body["input"] {
        Value::String(s) => vec![s.clone()],
        Value::Array(a) => a
            .iter()
            .map(|v| v.as_str().unwrap_or_default().to_string())
            .collect(),
        _ => Vec::new(),
    };
    let model = body["model"].as_str().unwrap_or("scripted").to_string();
    shared.requests.lock().unwrap().push(Recorded {
        path: uri.path().to_string(),
        headers: headers
            .iter()
            .map(|(k, v)| (k.as_str().to_string(), v.to_str().unwrap_or("").to_string()))
            .collect(),
        body,
        at: Instant::now(),
    });
    let data: Vec<Value> = inputs
        .iter()
        .enumerate()
        .map(|(i, t)| json!({"object": "embedding", "index": i, "embedding": test_vector(t)}))
        .collect();
    axum::Json(json!({
        "object": "list",
        "data": data,
        "model": model,
        "usage": {"prompt_tokens": 0, "total_tokens": 0},
    }))
    .into_response()
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
    let responded = shared.responder.as_ref().map(|r| r(&body));
    shared.requests.lock().unwrap().push(Recorded {
        path: uri.path().to_string(),
        headers: header_map,
        body,
        at: Instant::now(),
    });
    let turn = responded.or_else(|| shared.script.lock().unwrap().pop_front());
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
        Turn::Reply {
            text,
            calls,
            usage,
            extra,
        } => {
            let r = Scripted {
                model: &model,
                text: &text,
                calls: &calls,
                usage,
                extra: &extra,
            };
            if stream {
                match wire {
                    Wire::OpenAi => sse(openai_chunks(&r, include_usage)),
                    Wire::Anthropic => sse(anthropic_events(&r)),
                }
            } else {
                let v = match wire {
                    Wire::OpenAi => openai_message(&r),
                    Wire::Anthropic => anthropic_message(&r),
                };
                (StatusCode::OK, axum::Json(v)).into_response()
            }
        }
        Turn::Drip { every, tokens } => {
            let piece: &'static str = match (tokens, wire) {
                (false, _) => ": keep-alive\n\n",
                (true, Wire::OpenAi) => "data: {\"choices\":[{\"delta\":{\"content\":\"a\"}}]}\n\n",
                (true, Wire::Anthropic) => {
                    "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"a\"}}\n\n"
                }
            };
            let head: &'static str = match wire {
                Wire::OpenAi => "",
                Wire::Anthropic => {
                    "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"usage\":{\"input_tokens\":3,\"output_tokens\":0}}}\n\nevent: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n"
                }
            };
            let first = stream::once(async move { Ok::<_, std::io::Error>(Bytes::from(head)) });
            let drip = stream::unfold((), move |()| async move {
                tokio::time::sleep(every).await;
                Some((Ok::<_, std::io::Error>(Bytes::from(piece)), ()))
            });
            Response::builder()
                .status(200)
                .header("content-type", "text/event-stream")
                .body(Body::from_stream(futures_util::StreamExt::chain(
                    first, drip,
                )))
                .unwrap()
        }
        Turn::Huge { bytes } => huge(wire, stream, &model, bytes),
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

/// A scripted reply being rendered.
struct Scripted<'a> {
    model: &'a str,
    text: &'a str,
    calls: &'a [ScriptedCall],
    usage: (u64, u64),
    extra: &'a ReplyExtra,
}

impl Scripted<'_> {
    fn openai_finish(&self) -> &'static str {
        match (self.extra.cut, self.calls.is_empty()) {
            (true, _) => "length",
            (false, true) => "stop",
            (false, false) => "tool_calls",
        }
    }

    fn anthropic_stop(&self) -> &'static str {
        match (self.extra.cut, self.calls.is_empty()) {
            (true, _) => "max_tokens",
            (false, true) => "end_turn",
            (false, false) => "tool_use",
        }
    }

    fn openai_usage(&self) -> Value {
        let sign = if self.extra.negative { -1 } else { 1 };
        let (i, o) = (sign * self.usage.0 as i64, sign * self.usage.1 as i64);
        let mut u = json!({"prompt_tokens": i, "completion_tokens": o, "total_tokens": i + o});
        if self.extra.cached.0 > 0 {
            u["prompt_tokens_details"] = json!({"cached_tokens": self.extra.cached.0});
        }
        u
    }

    /// Anthropic counts input outside the cache in `input_tokens`.
    fn anthropic_usage(&self, output: u64) -> Value {
        let (read, write) = self.extra.cached;
        json!({"input_tokens": self.usage.0.saturating_sub(read + write), "output_tokens": output,
               "cache_read_input_tokens": read, "cache_creation_input_tokens": write})
    }
}

fn openai_message(r: &Scripted<'_>) -> Value {
    let mut message = json!({"role": "assistant", "content": if r.text.is_empty() { Value::Null } else { json!(r.text) }});
    if !r.calls.is_empty() {
        message["tool_calls"] = r
            .calls
            .iter()
            .map(|c| json!({"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}))
            .collect();
    }
    let mut v = json!({
        "id": "chatcmpl-scripted",
        "object": "chat.completion",
        "model": r.model,
        "choices": [{"index": 0, "message": message, "finish_reason": r.openai_finish()}],
    });
    if !r.extra.no_usage {
        v["usage"] = r.openai_usage();
    }
    v
}

fn openai_chunks(r: &Scripted<'_>, include_usage: bool) -> Vec<Result<Event, Infallible>> {
    let model = r.model;
    let chunk = |delta: Value, finish: Value| {
        json!({"id": "chatcmpl-scripted", "object": "chat.completion.chunk", "model": model,
               "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})
    };
    let mut out = vec![chunk(
        json!({"role": "assistant", "content": ""}),
        Value::Null,
    )];
    for p in pieces(r.text, 4) {
        out.push(chunk(json!({"content": p}), Value::Null));
    }
    for (i, c) in r.calls.iter().enumerate() {
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
    out.push(chunk(json!({}), json!(r.openai_finish())));
    if include_usage && !r.extra.no_usage {
        out.push(json!({"id": "chatcmpl-scripted", "object": "chat.completion.chunk", "model": model, "choices": [],
            "usage": r.openai_usage()}));
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

fn anthropic_message(r: &Scripted<'_>) -> Value {
    let mut content = Vec::new();
    if !r.text.is_empty() {
        content.push(json!({"type": "text", "text": r.text}));
    }
    for c in r.calls {
        content.push(json!({"type": "tool_use", "id": c.id, "name": c.name, "input": anthropic_input(&c.arguments)}));
    }
    let mut v = json!({
        "id": "msg_scripted", "type": "message", "role": "assistant", "model": r.model,
        "content": content,
        "stop_reason": r.anthropic_stop(),
    });
    if !r.extra.no_usage {
        v["usage"] = r.anthropic_usage(r.usage.1);
    }
    v
}

fn anthropic_events(r: &Scripted<'_>) -> Vec<Result<Event, Infallible>> {
    let mut start = json!({"type": "message_start", "message": {"id": "msg_scripted", "type": "message", "role": "assistant",
        "model": r.model, "content": [], "stop_reason": null}});
    if !r.extra.no_usage {
        start["message"]["usage"] = r.anthropic_usage(1);
    }
    let mut out: Vec<(&str, Value)> = vec![("message_start", start)];
    let mut index = 0;
    if !r.text.is_empty() {
        out.push(("content_block_start", json!({"type": "content_block_start", "index": index, "content_block": {"type": "text", "text": ""}})));
        for p in pieces(r.text, 4) {
            out.push(("content_block_delta", json!({"type": "content_block_delta", "index": index, "delta": {"type": "text_delta", "text": p}})));
        }
        out.push((
            "content_block_stop",
            json!({"type": "content_block_stop", "index": index}),
        ));
        index += 1;
    }
    out.push(("ping", json!({"type": "ping"})));
    for c in r.calls {
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
    let mut delta = json!({"type": "message_delta", "delta": {"stop_reason": r.anthropic_stop()}});
    if !r.extra.no_usage {
        delta["usage"] = json!({"output_tokens": r.usage.1});
    }
    out.push(("message_delta", delta));
    out.push(("message_stop", json!({"type": "message_stop"})));
    out.into_iter()
        .map(|(name, v)| Ok(Event::default().event(name).data(v.to_string())))
        .collect()
}

/// A reply of `bytes` bytes of text: one event (streamed in 16 KiB chunks) or one body.
fn huge(wire: Wire, stream: bool, model: &str, bytes: usize) -> Response {
    let text = "x".repeat(bytes);
    let (content_type, body) = match (stream, wire) {
        (false, _) => {
            let extra = ReplyExtra::default();
            let r = Scripted {
                model,
                text: &text,
                calls: &[],
                usage: (1, 1),
                extra: &extra,
            };
            let v = match wire {
                Wire::OpenAi => openai_message(&r),
                Wire::Anthropic => anthropic_message(&r),
            };
            ("application/json", v.to_string())
        }
        (true, Wire::OpenAi) => (
            "text/event-stream",
            format!(
                "data: {}\n\ndata: [DONE]\n\n",
                json!({"choices": [{"index": 0, "delta": {"content": text}, "finish_reason": "stop"}]})
            ),
        ),
        (true, Wire::Anthropic) => (
            "text/event-stream",
            format!(
                "event: message_start\ndata: {}\n\nevent: content_block_start\ndata: {}\n\nevent: content_block_delta\ndata: {}\n\nevent: message_stop\ndata: {{\"type\":\"message_stop\"}}\n\n",
                json!({"type": "message_start", "message": {"usage": {"input_tokens": 1, "output_tokens": 1}}}),
                json!({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}),
                json!({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": text}}),
            ),
        ),
    };
    let chunks: Vec<Result<Bytes, std::io::Error>> = body
        .into_bytes()
        .chunks(16 << 10)
        .map(|c| Ok(Bytes::copy_from_slice(c)))
        .collect();
    Response::builder()
        .status(200)
        .header("content-type", content_type)
        .body(Body::from_stream(stream::iter(chunks)))
        .unwrap()
}
