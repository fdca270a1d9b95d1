//! The web page (spec section 21, "CLI-first + TUI + Web App"): the server's third face, at
//! `/`. Pages render on the server from templates compiled into the binary and work without
//! JavaScript (except the live events box); every action is the protocol request the command
//! line sends, answered for the signed-in user by the function `POST /v1/call` uses.
//!
//! - `GET /login`, `POST /login` (form field `token`), `POST /logout`: [`session`].
//! - `GET /`: the plan list with the TUI's filters.
//! - `GET /plans/PLAN`: status and progress, approvals, the review of the changes, the
//!   decision tree, the live events; `POST /plans/PLAN/review` marks a hunk.
//! - `GET /plans/PLAN/decisions/DECISION`: a decision's explanation and impact, and the
//!   correction form with its dry-run estimate; `POST .../correct` runs the correction.
//! - `POST /approvals/APPROVAL/approve`, `POST /approvals/APPROVAL/reject`.
//! - `GET /plans/PLAN/events`: the plan's events as Server-Sent Events, signed in by cookie.
//! - `GET /assets/FILE`: [`assets`].

mod assets;
mod caller;
mod pages;
mod session;
mod templates;

use std::net::SocketAddr;
use std::sync::Arc;

use axum::Router;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::{get, post};

use cleveragents_engine::api::{self, ApiError, Client, Principal};

use super::Shared;

/// What the page's handlers share: the server's and the signed-in browsers.
pub struct Web {
    shared: Arc<Shared>,
    sessions: session::Sessions,
}

/// The page's routes, to be merged into the server's router.
pub fn router<S>(shared: Arc<Shared>) -> Router<S> {
    let web = Arc::new(Web {
        shared,
        sessions: session::Sessions::default(),
    });
    Router::new()
        .route("/", get(pages::plan_list))
        .route("/login", get(pages::login_form).post(pages::login))
        .route("/logout", post(pages::logout))
        .route("/plans/{plan}", get(pages::plan))
        .route("/plans/{plan}/review", post(pages::review))
        .route("/plans/{plan}/events", get(pages::events))
        .route("/plans/{plan}/decisions/{decision}", get(pages::decision))
        .route(
            "/plans/{plan}/decisions/{decision}/correct",
            post(pages::correct),
        )
        .route("/approvals/{approval}/approve", post(pages::approve))
        .route("/approvals/{approval}/reject", post(pages::reject))
        .route("/assets/{file}", get(assets::serve))
        .with_state(web)
}

/// A signed-in request: who, and their session.
pub struct Caller {
    principal: Principal,
    session_id: String,
    csrf: String,
}

impl Web {
    /// The caller the request's session cookie names, its token checked again now; `None`
    /// without a session, or when its token no longer signs in (the session is closed).
    async fn caller(&self, headers: &HeaderMap, address: SocketAddr) -> Result<Caller, Response> {
        let Some(id) = session::cookie_id(headers) else {
            return Err(Redirect::to("/login").into_response());
        };
        let Some(open) = self.sessions.get(&id) else {
            return Err(Redirect::to("/login").into_response());
        };
        let engine = self.shared.engine.engine();
        let secret = open.secret.clone();
        let checked = tokio::task::spawn_blocking(move || {
            engine.authenticate(&secret, Some(address.to_string()))
        })
        .await;
        match checked {
            Ok(Ok(Ok(principal))) => Ok(Caller {
                principal,
                session_id: id,
                csrf: open.csrf,
            }),
            Ok(Ok(Err(why))) => {
                tracing::info!(reason = %why, "a web session ended: its token no longer signs in");
                self.sessions.close(&id);
                let mut answer = Redirect::to("/login").into_response();
                answer.headers_mut().insert(
                    header::SET_COOKIE,
                    session::set_cookie(None, self.shared.tls),
                );
                Err(answer)
            }
            Ok(Err(e)) => Err(self.failure(None, e)),
            Err(e) => Err(self.internal(&format!("checking the session failed: {e}"))),
        }
    }

    /// The caller of a form's POST: refused (403, nothing runs) when the request comes from
    /// another site's page (its `Origin`) or does not carry the session's CSRF token.
    async fn poster(
        &self,
        headers: &HeaderMap,
        address: SocketAddr,
        csrf: Option<&String>,
    ) -> Result<Caller, Response> {
        if !session::same_origin(headers, self.shared.tls) {
            return Err(self.forbidden(
                None,
                "this form was sent from another site's page; nothing was changed",
            ));
        }
        let caller = match self.caller(headers, address).await {
            Ok(c) => c,
            Err(_) => {
                return Err(self.forbidden(
                    None,
                    "this form needs a signed-in session; nothing was changed",
                ));
            }
        };
        if !csrf.is_some_and(|given| session::same_secret(given, &caller.csrf)) {
            return Err(self.forbidden(
                Some(&caller),
                "this form does not carry this session's form token (it may come from another site, or from a page of an earlier sign-in); nothing was changed",
            ));
        }
        Ok(caller)
    }

    /// Runs `work` as `caller` on a blocking thread (calls read the database and may drive a
    /// plan); a failure is the error page.
    async fn ask<T: Send + 'static>(
        &self,
        caller: &Caller,
        work: impl FnOnce(&dyn Client) -> Result<T, ApiError> + Send + 'static,
    ) -> Result<T, Response> {
        let client = caller::AsUser {
            engine: self.shared.engine.engine(),
            principal: caller.principal.clone(),
        };
        match tokio::task::spawn_blocking(move || work(&client)).await {
            Ok(Ok(answer)) => Ok(answer),
            Ok(Err(e)) => Err(self.failure(Some(caller), e)),
            Err(e) => Err(self.internal(&format!("the call failed: {e}"))),
        }
    }

    /// What every page's frame shows: who is signed in, the sign-out form's token and the
    /// notice the last action left.
    fn frame(&self, caller: Option<&Caller>) -> minijinja::Value {
        match caller {
            Some(c) => minijinja::context! {
                user => c.principal.user.clone(),
                csrf => c.csrf.clone(),
                notice => self.sessions.take_notice(&c.session_id),
            },
            None => minijinja::context! {},
        }
    }

    /// The page `name` with the frame and `context`.
    fn page(&self, caller: Option<&Caller>, name: &str, context: minijinja::Value) -> Response {
        let frame = self.frame(caller);
        templates::render(
            StatusCode::OK,
            name,
            minijinja::context! { ..frame, ..context },
        )
    }

    /// The error page of an engine failure: the code, message and hints the command line
    /// prints, with the code's HTTP status.
    fn failure(&self, caller: Option<&Caller>, e: ApiError) -> Response {
        let error = (self.shared.render)(e);
        let status = super::status_of(error.code);
        let frame = self.frame(caller);
        templates::render(
            status,
            "error.html",
            minijinja::context! {
                ..frame,
                ..minijinja::context! {
                    title => "Error",
                    code => error.code.to_string(),
                    message => error.message,
                    detail => error.detail,
                    hints => error.hints,
                }
            },
        )
    }

    fn forbidden(&self, caller: Option<&Caller>, message: &str) -> Response {
        let frame = self.frame(caller);
        templates::render(
            StatusCode::FORBIDDEN,
            "error.html",
            minijinja::context! {
                ..frame,
                ..minijinja::context! {
                    title => "Refused",
                    code => "PERMISSION_DENIED",
                    message => message,
                    hints => vec!["reload the page and send the form again from there"],
                }
            },
        )
    }

    fn internal(&self, message: &str) -> Response {
        tracing::error!(message, "internal web page failure");
        templates::render(
            StatusCode::INTERNAL_SERVER_ERROR,
            "error.html",
            minijinja::context! { title => "Error", code => "INTERNAL", message => message },
        )
    }

    /// After a form's action: back to `to` (303, so a reload does not send it again) with
    /// `notice` shown there once.
    fn done(&self, caller: &Caller, to: &str, notice: String) -> Response {
        self.sessions.set_notice(&caller.session_id, notice);
        Redirect::to(to).into_response()
    }
}

/// The path of plan `id`'s page.
fn plan_path(id: &impl std::fmt::Display) -> String {
    format!("/plans/{id}")
}

/// Shown for an unexpected answer to a call (a defect: the engine answers each call with
/// its own view).
fn unexpected(what: &str, got: &api::Outcome) -> ApiError {
    ApiError::Protocol {
        message: format!("{what} was answered with `{}`", got.name()),
    }
}
