//! The bearer token every call but the health checks carries. The token is looked up by the
//! SHA-256 of its secret ([`cleveragents_engine::api::tokens`]); a request without a valid one is answered 401 and
//! nothing runs.

use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::{StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use super::{Shared, errors};

/// What a refused request is told: how to get a token.
const HOW: [&str; 2] = [
    "create a token on the server host: agents server token create NAME",
    "then on this machine: agents server login NAME URL --token-stdin (or set AGENTS_TOKEN)",
];

fn refused(message: &str) -> Response {
    (
        StatusCode::UNAUTHORIZED,
        [(header::WWW_AUTHENTICATE, "Bearer")],
        errors::body(
            "UNAUTHENTICATED",
            message.to_string(),
            HOW.iter().map(|h| (*h).to_string()).collect(),
        ),
    )
        .into_response()
}

/// Lets the request through with its [`cleveragents_engine::api::tokens::Principal`] when it carries an active
/// token; answers 401 otherwise.
pub async fn require_token(
    State(shared): State<Arc<Shared>>,
    mut request: Request,
    next: Next,
) -> Response {
    let given = request
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    let Some(given) = given else {
        return refused("this server needs a token: send Authorization: Bearer TOKEN");
    };
    let Some(secret) = given
        .strip_prefix("Bearer ")
        .map(str::trim)
        .filter(|s| !s.is_empty())
    else {
        return refused("the Authorization header is not `Bearer TOKEN`");
    };
    let engine = shared.engine.engine();
    let secret = secret.to_string();
    match tokio::task::spawn_blocking(move || engine.authenticate(&secret)).await {
        Ok(Ok(Some(principal))) => {
            request.extensions_mut().insert(principal);
            next.run(request).await
        }
        Ok(Ok(None)) => refused("the token is not valid (unknown, mistyped or revoked)"),
        Ok(Err(e)) => errors::api_failure(shared.render, e),
        Err(e) => errors::internal(&format!("checking the token failed: {e}")),
    }
}
