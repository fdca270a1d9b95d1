//! The remote [`Client`]: the protocol over HTTP to `agents server` (spec section 21). Calls
//! are `POST /v1/call` with a [`Request`] as JSON; the event stream is Server-Sent Events
//! from `GET /v1/events?plan=ID&after=SEQ`, each event's `id` its `seq`, so a follower that
//! reconnects with the last `seq` it saw repeats and loses nothing.

use std::ops::ControlFlow;
use std::time::Duration;

use futures_util::StreamExt;

mod pinned;

use super::client::{Client, Followed};
use super::protocol::{ErrorEnvelope, Request, Response, VERSION};
use super::{ApiError, LiveEvent};
use crate::domain::Id;
use crate::domain::event::EngineEvent;

/// How long one call may take before the client gives up.
const CALL_TIMEOUT: Duration = Duration::from_secs(120);

/// How long connecting may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// How long the follower waits for the next event before it tells its sink it is idle.
const IDLE_TICK: Duration = Duration::from_millis(200);

/// How many times in a row a follower reconnects after its stream broke.
const RECONNECTS: u32 = 5;

/// A client of one server.
#[derive(Debug)]
pub struct Remote {
    base: String,
    token: Option<String>,
    http: reqwest::Client,
    runtime: tokio::runtime::Runtime,
}

impl Remote {
    /// A client of the server at `base` (`http://host:port`, no path), sending `token` as
    /// `Authorization: Bearer`.
    ///
    /// # Errors
    /// [`ApiError::Unreachable`] when the HTTP client or its runtime cannot be built.
    pub fn new(base: &str, token: Option<String>) -> Result<Self, ApiError> {
        Self::trusting(base, token, None)
    }

    /// [`Remote::new`] that also trusts the certificate authorities of `roots_pem` (a PEM
    /// bundle), for a server whose certificate no system authority signed.
    ///
    /// # Errors
    /// [`ApiError::InvalidInput`] when `roots_pem` holds no usable certificate;
    /// [`ApiError::Unreachable`] when the HTTP client or its runtime cannot be built.
    pub fn trusting(
        base: &str,
        token: Option<String>,
        roots_pem: Option<&[u8]>,
    ) -> Result<Self, ApiError> {
        let base = base.trim_end_matches('/').to_string();
        let fail = |e: String| ApiError::Unreachable {
            url: base.clone(),
            reason: e,
        };
        let mut builder = reqwest::Client::builder()
            .connect_timeout(CONNECT_TIMEOUT)
            .user_agent(concat!("cleveragents/", env!("CARGO_PKG_VERSION")));
        if let Some(pem) = roots_pem {
            let tls = pinned::client_config(pem)?;
            builder = builder.tls_backend_preconfigured(tls);
        }
        let http = builder.build().map_err(|e| fail(e.to_string()))?;
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| fail(e.to_string()))?;
        Ok(Self {
            base,
            token,
            http,
            runtime,
        })
    }

    fn url(&self, path: &str) -> String {
        format!("{}/{VERSION}/{path}", self.base)
    }

    fn unreachable(&self, e: &reqwest::Error) -> ApiError {
        ApiError::Unreachable {
            url: self.base.clone(),
            reason: reason(e),
        }
    }

    /// The connection broke after `op` was sent: the server stopped (or the network failed)
    /// while it ran the operation; the plan stays where the server left it.
    fn lost_during(&self, op: &super::Op, e: &reqwest::Error) -> ApiError {
        use super::Op;
        let plan = match op {
            Op::Execute { plan }
            | Op::Apply { plan, .. }
            | Op::Prompt { plan, .. }
            | Op::Rollback { plan, .. }
            | Op::Cancel { plan, .. } => Some(*plan),
            _ => None,
        };
        let resume = match op {
            Op::Apply { .. } => "apply",
            _ => "execute",
        };
        let (what, hints) = match plan {
            Some(p) => (
                format!("plan {p}"),
                vec![
                    format!("agents plan status {p}"),
                    format!("agents plan {resume} {p}"),
                ],
            ),
            None => (
                "the operation".to_string(),
                vec!["agents plan list".to_string()],
            ),
        };
        ApiError::Failed {
            code: super::ErrorCode::IoError,
            message: format!(
                "the server at {} stopped answering while it ran {what}: {}",
                self.base,
                reason(e)
            ),
            detail: Some(
                "the server was reached and had the operation; it stopped or the connection broke. A plan it drove stays where it was left and resumes once the server runs again".to_string(),
            ),
            hints,
            data: Box::new(serde_json::Value::Null),
        }
    }

    fn authorized(&self, req: reqwest::RequestBuilder) -> reqwest::RequestBuilder {
        match &self.token {
            Some(t) => req.bearer_auth(t),
            None => req,
        }
    }

    /// The failure a non-2xx answer carries, or a protocol error naming its status.
    async fn failure(&self, response: reqwest::Response) -> ApiError {
        let status = response.status();
        match response.json::<ErrorEnvelope>().await {
            Ok(body) => ApiError::Remote(body.error),
            Err(_) => ApiError::Protocol {
                message: format!("HTTP {status} without an error body from {}", self.base),
            },
        }
    }

    async fn call_async(&self, request: &Request) -> Result<Response, ApiError> {
        let mut post = self.authorized(self.http.post(self.url("call")));
        // An operation runs as long as its plan's steps do (each bounded by its own
        // deadlines); a question is answered at once or not at all.
        if !matches!(request, Request::Run(_)) {
            post = post.timeout(CALL_TIMEOUT);
        }
        let sent = post.json(request).send().await.map_err(|e| match request {
            // Reached, then lost while it drove a plan: not "cannot reach".
            Request::Run(op) if !e.is_connect() && !e.is_builder() && !e.is_timeout() => {
                self.lost_during(op, &e)
            }
            _ => self.unreachable(&e),
        })?;
        if !sent.status().is_success() {
            return Err(self.failure(sent).await);
        }
        sent.json::<Response>()
            .await
            .map_err(|e| ApiError::Protocol {
                message: format!("cannot read the answer to `{}`: {e}", request.name()),
            })
    }

    /// Streams events after `after` until the server ends the stream (the plan is final:
    /// `Ok(true)`), the sink breaks (`Ok(true)`) or the connection breaks (`Ok(false)`, with
    /// `after` moved to the last event handed on).
    async fn stream_once<'f>(
        &self,
        plan: Option<&Id>,
        after: &mut i64,
        sink: &mut dyn FnMut(Followed) -> ControlFlow<()>,
        mut live: Option<&mut (dyn FnMut(LiveEvent) + 'f)>,
    ) -> Result<bool, ApiError> {
        let mut url = format!("{}?after={after}", self.url("events"));
        if let Some(p) = plan {
            url.push_str(&format!("&plan={p}"));
        }
        if live.is_some() {
            url.push_str("&live=true");
        }
        let sent = self
            .authorized(self.http.get(url))
            .header(reqwest::header::ACCEPT, "text/event-stream")
            .send()
            .await
            .map_err(|e| self.unreachable(&e))?;
        if !sent.status().is_success() {
            return Err(self.failure(sent).await);
        }
        let mut events = sse_stream::SseStream::from_bytes_stream(sent.bytes_stream());
        loop {
            let next = match tokio::time::timeout(IDLE_TICK, events.next()).await {
                Err(_) => {
                    if sink(Followed::Idle).is_break() {
                        return Ok(true);
                    }
                    continue;
                }
                Ok(None) | Ok(Some(Err(_))) => return Ok(false),
                Ok(Some(Ok(sse))) => sse,
            };
            match next.event.as_deref() {
                Some("end") => return Ok(true),
                Some("error") => {
                    let body: ErrorEnvelope = parse(next.data.as_deref())?;
                    return Err(ApiError::Remote(body.error));
                }
                Some("live") => {
                    if let Some(live) = live.as_mut() {
                        live(parse(next.data.as_deref())?);
                    }
                    continue;
                }
                _ => {}
            }
            let Some(data) = next.data.as_deref() else {
                continue;
            };
            let event: EngineEvent = parse(Some(data))?;
            if event.seq <= *after {
                continue;
            }
            *after = event.seq;
            if sink(Followed::Event(Box::new(event))).is_break() {
                return Ok(true);
            }
        }
    }
}

fn parse<T: serde::de::DeserializeOwned>(data: Option<&str>) -> Result<T, ApiError> {
    serde_json::from_str(data.unwrap_or_default()).map_err(|e| ApiError::Protocol {
        message: format!("an event of the stream cannot be read: {e}"),
    })
}

/// A transport failure in a few words, with its cause (reqwest's own text stops at "error
/// sending request").
fn reason(e: &reqwest::Error) -> String {
    let mut text = if e.is_timeout() {
        "timed out".to_string()
    } else if e.is_connect() {
        "connection failed".to_string()
    } else {
        e.to_string()
    };
    let mut source = std::error::Error::source(e);
    while let Some(s) = source {
        text.push_str(": ");
        text.push_str(&s.to_string());
        source = s.source();
    }
    text
}

impl Client for Remote {
    fn call(&self, request: Request) -> Result<Response, ApiError> {
        self.runtime.block_on(self.call_async(&request))
    }

    fn follow(
        &self,
        plan: Option<&Id>,
        after: i64,
        sink: &mut dyn FnMut(Followed) -> ControlFlow<()>,
    ) -> Result<(), ApiError> {
        self.stream(plan, after, sink, None)
    }

    fn location(&self) -> String {
        self.base.clone()
    }

    fn follow_live(
        &self,
        after: i64,
        sink: &mut dyn FnMut(Followed) -> ControlFlow<()>,
        live: &mut dyn FnMut(LiveEvent),
    ) -> Result<(), ApiError> {
        self.stream(None, after, sink, Some(live))
    }
}

impl Remote {
    /// Follows the event stream, reconnecting after `after` when it breaks (see
    /// [`Client::follow`]); live events go to `live` when given.
    fn stream<'f>(
        &self,
        plan: Option<&Id>,
        after: i64,
        sink: &mut dyn FnMut(Followed) -> ControlFlow<()>,
        mut live: Option<&mut (dyn FnMut(LiveEvent) + 'f)>,
    ) -> Result<(), ApiError> {
        let mut after = after;
        let mut broken = 0;
        let mut connected = false;
        loop {
            let seen = after;
            match self.runtime.block_on(self.stream_once(
                plan,
                &mut after,
                sink,
                live.as_deref_mut(),
            )) {
                Ok(true) => return Ok(()),
                Ok(false) if broken < RECONNECTS => {
                    connected = true;
                    broken = if after > seen { 0 } else { broken + 1 };
                    std::thread::sleep(IDLE_TICK);
                }
                Ok(false) => {
                    return Err(self.stream_cut(
                        plan,
                        after,
                        &format!("it broke {RECONNECTS} times in a row"),
                    ));
                }
                Err(ApiError::Unreachable { reason, .. }) if connected => {
                    return Err(self.stream_cut(plan, after, &reason));
                }
                Err(e) => return Err(e),
            }
        }
    }

    /// The event stream ended before its plan did and could not be opened again (the server
    /// stopped): the last `seq` handed on, and how to go on from it.
    fn stream_cut(&self, plan: Option<&Id>, after: i64, reason: &str) -> ApiError {
        let hint = match plan {
            Some(p) => format!("agents plan events --follow --after {after} {p}"),
            None => format!("agents plan events --follow --after {after} PLAN"),
        };
        ApiError::Failed {
            code: super::ErrorCode::IoError,
            message: format!(
                "the event stream of the server at {} ended (the server stopped or the connection broke: {reason}); the last event seen is seq {after}",
                self.base
            ),
            detail: Some(
                "once the server runs again, follow on from that seq: nothing is lost or repeated"
                    .to_string(),
            ),
            hints: vec![hint],
            data: Box::new(serde_json::json!({"last_seq": after})),
        }
    }
}
