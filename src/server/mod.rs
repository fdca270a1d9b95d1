//! `agents server start` (spec section 21): the engine's protocol over HTTP. Handlers are
//! thin: they take the principal from the bearer token, hand the request to
//! [`api::serve`], the function the in-process client calls, and map a failure to its status
//! and the error body the CLI prints.
//!
//! - `GET /healthz`: the process answers (no token).
//! - `GET /readyz`: the database opens and is migrated (no token).
//! - `POST /v1/call`: one [`api::protocol::Request`] as JSON, its `Response` back.
//! - `GET /v1/events?plan=ID&after=SEQ`: the event log as Server-Sent Events (see [`events`]).

mod auth;
mod errors;
mod events;

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
    /// The engine of the server's data directory.
    pub engine: Engine,
    /// How failures are worded.
    pub render: Render,
    /// Set when the server is asked to stop: event streams end, so that it can.
    pub stopping: Stopping,
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
        .fallback(not_found)
        .layer(DefaultBodyLimit::max(BODY_LIMIT))
        .with_state(shared)
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
pub struct Stopping(Arc<std::sync::atomic::AtomicBool>);

impl Stopping {
    /// Whether the server was asked to stop.
    pub fn is_set(&self) -> bool {
        self.0.load(std::sync::atomic::Ordering::SeqCst)
    }
}

impl api::Observer for Stopping {
    fn interrupted(&self) -> bool {
        self.is_set()
    }
}

async fn shutdown_signal(stopping: Stopping) {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    tokio::select! {
        () = ctrl_c => {},
        () = term => {},
    }
    tracing::info!("server stopping: signal received");
    stopping.0.store(true, std::sync::atomic::Ordering::SeqCst);
}

async fn ready(State(shared): State<Arc<Shared>>) -> Response {
    let engine = shared.engine.clone();
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
    axum::Extension(principal): axum::Extension<api::tokens::Principal>,
    body: axum::body::Bytes,
) -> Response {
    let request: protocol::Request = match serde_json::from_slice(&body) {
        Ok(r) => r,
        Err(e) => return errors::bad_request(&format!("the request is not a v1 call: {e}")),
    };
    tracing::info!(call = request.name(), token = %principal.token_id, "call");
    let runs_an_operation = matches!(request, protocol::Request::Run(_));
    let engine = shared.engine.clone();
    let work = tokio::task::spawn_blocking(move || {
        api::serve(&engine, request).map(|mut r| {
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
