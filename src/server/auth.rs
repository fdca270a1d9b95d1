//! The bearer credential every call but the health checks carries: a token of this server,
//! looked up by the SHA-256 of its secret ([`cleveragents_engine::api::tokens`]), or a JWT of a
//! configured OIDC issuer ([`super::oidc`]). A request without a valid one is answered 401
//! naming why (expired, revoked or unknown, the JWT's fault) and nothing runs.

use std::net::SocketAddr;
use std::sync::Arc;

use axum::extract::{ConnectInfo, Request, State};
use axum::http::{StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use cleveragents_engine::api;

use super::{Shared, errors, oidc};

/// What a refused request is told: how to get a token.
const HOW: [&str; 2] = [
    "create a token on the server host: agents server token create --user USER",
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

/// Lets the request through with its [`cleveragents_engine::api::Principal`] (its user,
/// credential and the client's address) when it carries an active token of this server or a
/// JWT of a configured OIDC issuer whose user the server has; answers 401 naming the reason
/// otherwise.
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
    let address = request
        .extensions()
        .get::<ConnectInfo<SocketAddr>>()
        .map(|ConnectInfo(a)| a.to_string());
    let (engine, verifier) = shared.engine.current();
    let secret = secret.to_string();
    let answer = if !secret.starts_with(api::tokens::SECRET_PREFIX) && oidc::looks_like_jwt(&secret)
    {
        if verifier.is_empty() {
            return refused("the token is a JWT, and this server trusts no OIDC issuer");
        }
        let accepted = match verifier.verify(&secret).await {
            Ok(a) => a,
            Err(why) => return refused(&why),
        };
        let user = accepted.user.clone();
        let credential = api::Credential::Jwt {
            issuer: accepted.issuer,
        };
        tokio::task::spawn_blocking(move || {
            engine.principal_of(&user, credential, address).map(|p| {
                p.ok_or_else(|| format!("the JWT's user `{user}` has no account on this server"))
            })
        })
        .await
    } else {
        tokio::task::spawn_blocking(move || {
            engine
                .authenticate(&secret, address)
                .map(|r| r.map_err(|why| why.to_string()))
        })
        .await
    };
    match answer {
        Ok(Ok(Ok(principal))) => {
            request.extensions_mut().insert(principal);
            next.run(request).await
        }
        Ok(Ok(Err(why))) => refused(&why),
        Ok(Err(e)) => errors::api_failure(shared.render, e),
        Err(e) => errors::internal(&format!("checking the token failed: {e}")),
    }
}
