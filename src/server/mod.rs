//! `agents server start` (spec section 21): the engine's protocol over HTTP. Handlers are
//! thin: they take the principal from the bearer token or OIDC JWT, hand the request to
//! [`api::serve`], the function the in-process client calls, and map a failure to its status
//! and the error body the CLI prints.
//!
//! - `GET /healthz`: the process answers (no token).
//! - `GET /readyz`: the database opens and is migrated (no token).
//! - `POST /v1/call`: one [`api::protocol::Request`] as JSON, its `Response` back.
//! - `GET /v1/events?plan=ID&after=SEQ`: the event log as Server-Sent Events (see [`events`]).
//! - `GET /` and the page's other routes: the web page, signed in with a token (see [`web`]).

mod auth;
mod errors;
mod events;
pub mod oidc;
pub mod takeover;
mod web;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::extract::{DefaultBodyLimit, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};

use cleveragents_engine::api::{self, Engine, protocol};

pub use errors::status_of;

/// Largest request body the server reads.
pub const BODY_LIMIT: usize = 1024 * 1024;

/// How long one call may run before the server answers with a timeout.
pub const CALL_TIMEOUT: Duration = Duration::from_secs(110);

/// The default address: loopback only.
pub const DEFAULT_LISTEN: &str = "127.0.0.1:7420";

/// Renders an engine failure as the protocol's error: the same code, message and hints the
/// command line prints (handed in by the face that starts the server, which owns them).
pub type Render = fn(api::ApiError) -> protocol::RemoteError;

/// What the handlers share.
#[derive(Debug)]
pub struct Shared {
    /// The engine of the server's data directory, with the configuration as it is now.
    pub engine: Live,
    /// How failures are worded.
    pub render: Render,
    /// Set when the server is asked to stop: event streams end, so that it can.
    pub stopping: Stopping,
    /// Whether the server answers over TLS (the web page's session cookie is then `Secure`).
    pub tls: bool,
}

/// When a file was last changed and its size: a change of either is a new file.
type Stamp = Option<(std::time::SystemTime, u64)>;

fn stamp(path: &std::path::Path) -> Stamp {
    let meta = std::fs::metadata(path).ok()?;
    Some((meta.modified().ok()?, meta.len()))
}

/// The server's engine, made again from `config.toml` when the file changes (compared by
/// modification time and size at each request), so that a provider or setting added on the
/// server host is used without a restart. A file that no longer loads keeps the engine made
/// from the last one that did, and says why in the server's log.
pub struct Live {
    current: std::sync::Mutex<(Engine, Arc<oidc::Verifier>, Stamp)>,
    config_path: std::path::PathBuf,
    rebuild: Box<dyn Fn() -> Result<(Engine, oidc::Verifier), String> + Send + Sync>,
}

impl std::fmt::Debug for Live {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Live")
            .field("config_path", &self.config_path)
            .finish_non_exhaustive()
    }
}

impl Live {
    /// `engine` and the OIDC `verifier`, made from `config_path` as it is now; `rebuild`
    /// makes them again.
    pub fn new(
        engine: Engine,
        verifier: oidc::Verifier,
        config_path: std::path::PathBuf,
        rebuild: impl Fn() -> Result<(Engine, oidc::Verifier), String> + Send + Sync + 'static,
    ) -> Self {
        let stamp = stamp(&config_path);
        Self {
            current: std::sync::Mutex::new((engine, Arc::new(verifier), stamp)),
            config_path,
            rebuild: Box::new(rebuild),
        }
    }

    /// The engine with the configuration file as it is now.
    pub fn engine(&self) -> Engine {
        self.current().0
    }

    /// The engine and the OIDC issuers' verifier with the configuration file as it is now.
    pub fn current(&self) -> (Engine, Arc<oidc::Verifier>) {
        let now = stamp(&self.config_path);
        let mut current = self
            .current
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if current.2 != now {
            current.2 = now;
            match (self.rebuild)() {
                Ok((engine, verifier)) => {
                    tracing::info!(config = %self.config_path.display(), "configuration reloaded");
                    current.0 = engine;
                    current.1 = Arc::new(verifier);
                }
                Err(why) => tracing::warn!(
                    config = %self.config_path.display(),
                    error = %why,
                    "the changed configuration cannot be used; the last one stays in force"
                ),
            }
        }
        (current.0.clone(), Arc::clone(&current.1))
    }
}

/// The protocol's OpenAPI document, generated once (it is public: it holds no data).
static OPENAPI_DOCUMENT: std::sync::OnceLock<serde_json::Value> = std::sync::OnceLock::new();

/// The router of the protocol's version 1, its OpenAPI document and the health checks.
pub fn router(shared: Arc<Shared>) -> Router {
    let v1 = Router::new()
        .route("/call", post(call))
        .route("/events", get(events::stream))
        .route_layer(axum::middleware::from_fn_with_state(
            Arc::clone(&shared),
            auth::require_token,
        ));
    let published = OPENAPI_DOCUMENT.get_or_init(api::openapi::document).clone();
    Router::new()
        .route("/healthz", get(|| async { "ok\n" }))
        .route("/readyz", get(ready))
        .route(
            &format!("/{}/openapi.json", protocol::VERSION),
            get(move || async move { axum::Json(published) }),
        )
        .nest(&format!("/{}", protocol::VERSION), v1)
        .merge(web::router(Arc::clone(&shared)))
        .fallback(not_found)
        .layer(DefaultBodyLimit::max(BODY_LIMIT))
        .layer(axum::middleware::from_fn(json_errors))
        .with_state(shared)
}

/// Every failure is the protocol's error body, also those the HTTP layers answer by
/// themselves with plain text or nothing (a body over the limit: `413`; a route asked with
/// the wrong method: `405`).
async fn json_errors(request: axum::extract::Request, next: axum::middleware::Next) -> Response {
    use axum::http::header::{ALLOW, CONTENT_TYPE};
    let method = request.method().clone();
    let path = request.uri().path().to_string();
    let response = next.run(request).await;
    let status = response.status();
    // The web page's own answers are pages (its errors too).
    let is_json_or_page = response
        .headers()
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("application/json") || v.starts_with("text/html"));
    if is_json_or_page || !(status.is_client_error() || status.is_server_error()) {
        return response;
    }
    let v = protocol::VERSION;
    let routes = format!(
        "the protocol: POST /{v}/call, GET /{v}/events, GET /{v}/openapi.json, GET /healthz, GET /readyz"
    );
    let (code, message, hints) = match status {
        StatusCode::PAYLOAD_TOO_LARGE => (
            "INVALID_INPUT",
            format!(
                "the request body is larger than the {BODY_LIMIT} bytes (1 MiB) a call may carry"
            ),
            vec![
                "send a file's text in smaller parts, or keep the file on the server host"
                    .to_string(),
            ],
        ),
        StatusCode::METHOD_NOT_ALLOWED => (
            "INVALID_INPUT",
            format!("{method} is not answered on {path}"),
            vec![routes],
        ),
        s if s.is_server_error() => ("INTERNAL", format!("{path}: {s}"), vec![]),
        s => (
            "INVALID_INPUT",
            format!("{method} {path}: {s}"),
            vec![routes],
        ),
    };
    let allow = response.headers().get(ALLOW).cloned();
    let mut answer = (status, errors::body(code, message, hints)).into_response();
    if let Some(allow) = allow {
        answer.headers_mut().insert(ALLOW, allow);
    }
    answer
}

/// Serves `router` on `listener` until SIGTERM or Ctrl-C, then sets `stopping` (the plans the
/// engine drives stop at their next safe point) and lets calls in flight finish.
///
/// # Errors
/// I/O errors of the listener.
pub async fn serve(
    listener: tokio::net::TcpListener,
    router: Router,
    stopping: Stopping,
) -> std::io::Result<()> {
    axum::serve(
        listener,
        router.into_make_service_with_connect_info::<SocketAddr>(),
    )
    .with_graceful_shutdown(shutdown_signal(stopping))
    .await
}

/// [`serve`] over TLS (rustls) with `tls`: the same router, the same graceful stop.
///
/// # Errors
/// I/O errors of the listener.
pub async fn serve_tls(
    listener: tokio::net::TcpListener,
    router: Router,
    tls: axum_server::tls_rustls::RustlsConfig,
    stopping: Stopping,
) -> std::io::Result<()> {
    let handle = axum_server::Handle::new();
    let stopper = handle.clone();
    tokio::spawn(async move {
        shutdown_signal(stopping).await;
        stopper.graceful_shutdown(None);
    });
    axum_server::from_tcp_rustls(listener.into_std()?, tls)?
        .handle(handle)
        .serve(router.into_make_service_with_connect_info::<SocketAddr>())
        .await
}

/// Tells the plans this server drives to stop at their next safe point once it is asked to
/// stop (they stay resumable, as after Ctrl-C).
#[derive(Debug, Clone, Default)]
pub struct Stopping(Arc<StopFlag>);

#[derive(Debug, Default)]
struct StopFlag {
    set: std::sync::atomic::AtomicBool,
    notify: tokio::sync::Notify,
}

impl Stopping {
    /// Whether the server was asked to stop.
    pub fn is_set(&self) -> bool {
        self.0.set.load(std::sync::atomic::Ordering::SeqCst)
    }

    fn set(&self) {
        self.0.set.store(true, std::sync::atomic::Ordering::SeqCst);
        self.0.notify.notify_waiters();
    }

    /// Sets this flag on SIGTERM or Ctrl-C from now on: call it (inside the server's runtime)
    /// before saying where the server listens, so that a script that stops the server as soon
    /// as it has read that line stops it gracefully.
    ///
    /// # Errors
    /// When the signal handlers cannot be installed.
    pub fn watch_signals(&self) -> std::io::Result<()> {
        use tokio::signal::unix::{SignalKind, signal};
        let mut term = signal(SignalKind::terminate())?;
        let mut interrupt = signal(SignalKind::interrupt())?;
        let stopping = self.clone();
        tokio::spawn(async move {
            tokio::select! {
                _ = term.recv() => {},
                _ = interrupt.recv() => {},
            }
            tracing::info!("server stopping: signal received");
            stopping.set();
        });
        Ok(())
    }
}

impl api::Observer for Stopping {
    fn interrupted(&self) -> bool {
        self.is_set()
    }

    fn interrupted_by(&self) -> String {
        format!("the server stopping (pid {})", std::process::id())
    }

    fn hands_over(&self) -> bool {
        true
    }
}

impl Stopping {
    /// Waits until the server is asked to stop ([`Stopping::watch_signals`]).
    pub async fn wait(&self) {
        let notified = self.0.notify.notified();
        if !self.is_set() {
            notified.await;
        }
    }
}

async fn shutdown_signal(stopping: Stopping) {
    stopping.wait().await;
}

async fn ready(State(shared): State<Arc<Shared>>) -> Response {
    let engine = shared.engine.engine();
    let checked = tokio::task::spawn_blocking(move || engine.schema_version()).await;
    match checked {
        Ok(Ok(schema)) => {
            axum::Json(serde_json::json!({"ready": true, "schema": schema})).into_response()
        }
        Ok(Err(e)) => errors::api_failure(shared.render, e),
        Err(e) => errors::internal(&format!("readiness check failed: {e}")),
    }
}

async fn call(
    State(shared): State<Arc<Shared>>,
    axum::Extension(principal): axum::Extension<api::Principal>,
    body: axum::body::Bytes,
) -> Response {
    let request: protocol::Request = match serde_json::from_slice(&body) {
        Ok(r) => r,
        Err(e) => return errors::bad_request(&format!("the request is not a v1 call: {e}")),
    };
    let credential = match &principal.credential {
        api::Credential::Token { token_id } => token_id.clone(),
        api::Credential::Jwt { issuer } => format!("jwt:{issuer}"),
        api::Credential::Local => "local".to_string(),
    };
    tracing::info!(
        call = request.name(),
        user = %principal.user,
        credential = %credential,
        address = principal.address.as_deref().unwrap_or("-"),
        "call"
    );
    let runs_an_operation = matches!(request, protocol::Request::Run(_));
    let engine = shared.engine.engine();
    let work = tokio::task::spawn_blocking(move || {
        api::access::serve_as(&engine, &principal, request).map(|mut r| {
            if let protocol::Response::Hello(h) = &mut r {
                h.mode = "server".to_string();
            }
            r
        })
    });
    // An operation runs as long as its plan's steps (each bounded by its own deadlines).
    let limit = if runs_an_operation {
        Duration::MAX
    } else {
        CALL_TIMEOUT
    };
    match tokio::time::timeout(limit, work).await {
        Ok(Ok(Ok(response))) => axum::Json(response).into_response(),
        Ok(Ok(Err(e))) => errors::api_failure(shared.render, e),
        Ok(Err(e)) => errors::internal(&format!("the call failed: {e}")),
        Err(_) => (
            StatusCode::GATEWAY_TIMEOUT,
            errors::body(
                "IO_ERROR",
                format!("the call ran longer than {} s", CALL_TIMEOUT.as_secs()),
                vec![],
            ),
        )
            .into_response(),
    }
}

async fn not_found(uri: axum::http::Uri) -> Response {
    (
        StatusCode::NOT_FOUND,
        errors::body(
            "NOT_FOUND",
            format!("no such path: {}", uri.path()),
            vec![format!(
                "the protocol lives under /{}/ (POST /{}/call, GET /{}/events)",
                protocol::VERSION,
                protocol::VERSION,
                protocol::VERSION
            )],
        ),
    )
        .into_response()
}
