//! Signing in with a token and out: `GET /login`, `POST /login`, `POST /logout`.

use std::net::SocketAddr;
use std::sync::Arc;

use axum::Form;
use axum::extract::rejection::FormRejection;
use axum::extract::{ConnectInfo, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Redirect, Response};
use minijinja::context;

use super::super::{Web, session, templates};
use super::{Fields, field};

/// What a refused sign-in is told, whatever the reason: it never says whether a user or a
/// token exists.
const NOT_VALID: &str = "that token is not valid on this server";

/// `GET /login`.
pub async fn login_form(
    State(web): State<Arc<Web>>,
    ConnectInfo(address): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
) -> Response {
    if web.caller(&headers, address).await.is_ok() {
        return Redirect::to("/").into_response();
    }
    web.page(None, "login.html", context! { title => "Sign in" })
}

/// `POST /login` with the form field `token`: a session for its user, or the one message a
/// wrong token gets.
pub async fn login(
    State(web): State<Arc<Web>>,
    ConnectInfo(address): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
    form: Result<Form<Fields>, FormRejection>,
) -> Response {
    // A body that is not a form has none of its fields (so no form token: refused below).
    let fields = form.map(|Form(f)| f).unwrap_or_default();
    if !session::same_origin(&headers, web.shared.tls) {
        return web.forbidden(
            None,
            "this sign-in was sent from another site's page; nothing was changed",
        );
    }
    let refused = || {
        templates::render(
            StatusCode::UNAUTHORIZED,
            "login.html",
            context! { title => "Sign in", error => NOT_VALID },
        )
    };
    let Some(secret) = field(&fields, "token").map(str::to_string) else {
        return refused();
    };
    let engine = web.shared.engine.engine();
    let given = secret.clone();
    let checked =
        tokio::task::spawn_blocking(move || engine.authenticate(&given, Some(address.to_string())))
            .await;
    match checked {
        Ok(Ok(Ok(principal))) => {
            tracing::info!(user = %principal.user, address = %address, "web sign-in");
            let id = web.sessions.open(secret);
            let mut answer = Redirect::to("/").into_response();
            answer.headers_mut().insert(
                header::SET_COOKIE,
                session::set_cookie(Some(&id), web.shared.tls),
            );
            answer
        }
        Ok(Ok(Err(why))) => {
            tracing::info!(reason = %why, address = %address, "web sign-in refused");
            refused()
        }
        Ok(Err(e)) => web.failure(None, e),
        Err(e) => web.internal(&format!("checking the token failed: {e}")),
    }
}

/// `POST /logout`.
pub async fn logout(
    State(web): State<Arc<Web>>,
    ConnectInfo(address): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
    form: Result<Form<Fields>, FormRejection>,
) -> Response {
    let (caller, _) = match super::posted(&web, &headers, address, form).await {
        Ok(posted) => posted,
        Err(refused) => return refused,
    };
    web.sessions.close(&caller.session_id);
    let mut answer = Redirect::to("/login").into_response();
    answer.headers_mut().insert(
        header::SET_COOKIE,
        session::set_cookie(None, web.shared.tls),
    );
    answer
}
