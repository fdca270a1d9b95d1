//! `GET /v1/events?plan=ID&after=SEQ`: the event log as Server-Sent Events. Each event's SSE
//! `id` is its `seq`; a client that reconnects with `after` (or `Last-Event-ID`) set to the
//! last one it saw gets every later event once, in order. The stream ends with an `end` event
//! when the plan is final (applied or cancelled); a failure is an `error` event carrying the
//! protocol's error body.
//!
//! Each stream is read by its own blocking follower into a bounded channel: a slow client
//! only ever waits on its own follower, and a client that went away ends it at the next tick.
//! When the server is asked to stop, every stream ends at its next tick, so that it can.

use std::convert::Infallible;
use std::ops::ControlFlow;
use std::sync::Arc;

use axum::extract::{Query, State};
use axum::http::HeaderMap;
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;

use cleveragents_engine::api::{self, Followed};

use super::{Shared, errors};

/// Events buffered per client before its follower waits for it.
const BUFFER: usize = 256;

/// The query of `/v1/events`.
#[derive(Debug, Deserialize)]
pub struct EventsQuery {
    /// Only this plan's events (id or unique prefix).
    plan: Option<String>,
    /// Events after this sequence number (default: `Last-Event-ID`, else 0).
    after: Option<i64>,
    /// Also the live-only events of the plans this server drives (`live` SSE events, without
    /// an id: they are never stored, so a reconnect cannot repeat them); every plan's events.
    #[serde(default)]
    live: bool,
}

/// Streams the events the query asks for.
pub async fn stream(
    State(shared): State<Arc<Shared>>,
    axum::Extension(principal): axum::Extension<api::Principal>,
    Query(query): Query<EventsQuery>,
    headers: HeaderMap,
) -> Response {
    let asked = Asked {
        plan: query.plan,
        after: query.after,
        live: query.live,
        narrow: false,
    };
    stream_for(shared, principal, asked, &headers).await
}

/// What a stream is asked for.
pub struct Asked {
    /// Only this plan's stored events (id or unique prefix).
    pub plan: Option<String>,
    /// Events after this sequence number (default: `Last-Event-ID`, else 0).
    pub after: Option<i64>,
    /// Also the live-only events of the plans this server drives.
    pub live: bool,
    /// With `live` and `plan`: only that plan's events, stored and live (the web page's
    /// box); without, `live` streams every plan's, as `/v1/events?live=true` does.
    pub narrow: bool,
}

/// Streams what `asked` names to `principal` (the events they may read).
pub async fn stream_for(
    shared: Arc<Shared>,
    principal: api::Principal,
    asked: Asked,
    headers: &HeaderMap,
) -> Response {
    let last_id = headers
        .get("last-event-id")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<i64>().ok());
    let after = asked.after.or(last_id).unwrap_or(0);
    let engine = shared.engine.engine();
    let who = principal.clone();
    let plan = match asked.plan {
        None => None,
        Some(p) => match tokio::task::spawn_blocking(move || {
            api::access::check_read_plan(&engine, &who, &p)?;
            engine.resolve_plan(&p)
        })
        .await
        {
            Ok(Ok(id)) => Some(id),
            Ok(Err(e)) => return errors::api_failure(shared.render, e),
            Err(e) => return errors::internal(&format!("resolving the plan failed: {e}")),
        },
    };
    let (tx, rx) = tokio::sync::mpsc::channel::<Event>(BUFFER);
    let (engine, render, stopping) = (
        shared.engine.engine(),
        shared.render,
        shared.stopping.clone(),
    );
    let live = asked.live;
    let only = if asked.narrow { plan } else { None };
    tokio::task::spawn_blocking(move || {
        let reader = match api::access::PlanReader::new(&engine, &principal) {
            Ok(reader) => reader,
            Err(e) => {
                let _ = tx.blocking_send(error_event(render, e));
                return;
            }
        };
        follow(
            &engine,
            render,
            &stopping,
            (plan, live, only, reader),
            after,
            &tx,
        );
    });
    let events = futures_util::stream::unfold(rx, |mut rx| async move {
        rx.recv().await.map(|e| (Ok::<_, Infallible>(e), rx))
    });
    Sse::new(events)
        .keep_alive(KeepAlive::default())
        .into_response()
}

/// The `error` event carrying `e` as the protocol's error body.
fn error_event(render: super::Render, e: api::ApiError) -> Event {
    Event::default()
        .event("error")
        .json_data(cleveragents_engine::api::protocol::ErrorEnvelope { error: render(e) })
        .unwrap_or_else(|_| Event::default().event("error").data("{}"))
}

/// Hands every event the caller may read to `tx` until the plan is final, the client is gone
/// or the store fails.
fn follow(
    engine: &api::Engine,
    render: super::Render,
    stopping: &super::Stopping,
    (plan, live, only, mut reader): (
        Option<cleveragents_engine::domain::Id>,
        bool,
        Option<cleveragents_engine::domain::Id>,
        api::access::PlanReader,
    ),
    after: i64,
    tx: &tokio::sync::mpsc::Sender<Event>,
) {
    let readable =
        std::cell::RefCell::new(|id: &cleveragents_engine::domain::Id| reader.may_read(id));
    let mut sink = |f: Followed| match f {
        Followed::Event(e) if only.is_some() && e.plan_id != only => ControlFlow::Continue(()),
        Followed::Event(e)
            if e.plan_id
                .as_ref()
                .is_some_and(|id| !(readable.borrow_mut())(id)) =>
        {
            ControlFlow::Continue(())
        }
        Followed::Event(e) => {
            let event = Event::default().id(e.seq.to_string());
            let sent = event
                .json_data(&*e)
                .is_ok_and(|event| tx.blocking_send(event).is_ok());
            if sent {
                ControlFlow::Continue(())
            } else {
                ControlFlow::Break(())
            }
        }
        Followed::Idle if tx.is_closed() || stopping.is_set() => ControlFlow::Break(()),
        Followed::Idle => ControlFlow::Continue(()),
    };
    let ended = if live {
        // A live event that cannot be sent at once is dropped: it is never stored, and a
        // slow client must not hold up the engine.
        let mut live = |e: api::LiveEvent| {
            if only.is_some_and(|p| p != e.plan) || !(readable.borrow_mut())(&e.plan) {
                return;
            }
            if let Ok(event) = Event::default().event("live").json_data(&e) {
                let _ = tx.try_send(event);
            }
        };
        api::follow_store_live(engine, after, api::FOLLOW_POLL, &mut sink, &mut live)
    } else {
        api::follow_store(engine, plan.as_ref(), after, api::FOLLOW_POLL, &mut sink)
    };
    if stopping.is_set() {
        // The stream just ends: a client reconnects (with the last `seq`) to another server
        // or once this one is back; an `end` would say the plan is final.
        return;
    }
    let last = match ended {
        Ok(()) => Event::default().event("end").data("{}"),
        Err(e) => error_event(render, e),
    };
    let _ = tx.blocking_send(last);
}
