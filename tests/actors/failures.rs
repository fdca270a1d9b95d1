//! Provider failures: retries honour `retry-after`, permanent errors fail at once with what
//! to fix, dropped and stalled streams are retried or reported and never hang.

use std::time::{Duration, Instant};

use cleveragents_engine::actors::providers::{ProviderError, RetryMode};
use cleveragents_engine::actors::runtime::{ActorEvent, NoTools, RunRequest, Stop, run_actor};
use cleveragents_engine::config::ProviderKind;
use tokio_util::sync::CancellationToken;

use super::{Events, KEY, MODES, client, fast, provider, rt};
use crate::support::provider_server::{ProviderServer, Turn};

/// Runs a plain chat against `script` and returns the run, the server, and the elapsed time.
fn chat(
    kind: ProviderKind,
    stream: bool,
    script: Vec<Turn>,
    options: cleveragents_engine::actors::providers::ClientOptions,
) -> (
    cleveragents_engine::actors::runtime::ActorRun,
    ProviderServer,
    Events,
    Duration,
) {
    let server = ProviderServer::start(script);
    let client = client(provider(&server, kind), options);
    let events = Events::default();
    let request = RunRequest {
        prompt: "hello".into(),
        stream,
        ..RunRequest::default()
    };
    let started = Instant::now();
    let run = rt()
        .block_on(async {
            tokio::time::timeout(
                Duration::from_secs(30),
                run_actor(
                    &client,
                    &request,
                    &NoTools,
                    &CancellationToken::new(),
                    &events.sink(),
                ),
            )
            .await
            .expect("the run must never hang")
        })
        .unwrap();
    (run, server, events, started.elapsed())
}

fn failed(run: &cleveragents_engine::actors::runtime::ActorRun) -> &ProviderError {
    match &run.stop {
        Stop::Failed { error } => error,
        other => panic!("expected a failure, got {other:?}"),
    }
}

#[test]
fn rate_limited_then_success_waits_for_retry_after_and_succeeds() {
    for (kind, stream) in [
        (ProviderKind::Openai, true),
        (ProviderKind::Anthropic, false),
    ] {
        let (run, server, events, _) = chat(
            kind,
            stream,
            vec![Turn::rate_limited("1"), Turn::text("hi there", (5, 2))],
            fast(),
        );
        assert!(matches!(run.stop, Stop::Answered), "{:?}", run.stop);
        assert_eq!(run.answer, "hi there");
        let requests = server.requests();
        assert_eq!(requests.len(), 2);
        let waited = requests[1].at - requests[0].at;
        assert!(
            waited >= Duration::from_millis(950),
            "retried after {waited:?}, not after retry-after: 1"
        );
        assert_eq!(run.model_calls[0].attempts, 2);
        let retry = events
            .all()
            .into_iter()
            .find_map(|e| match e {
                ActorEvent::Retrying {
                    delay_ms,
                    reason,
                    attempt,
                    ..
                } => Some((delay_ms, reason, attempt)),
                _ => None,
            })
            .expect("a retry event");
        assert_eq!((retry.0, retry.2), (1000, 1));
        assert!(retry.1.contains("429"), "{}", retry.1);
    }
}

#[test]
fn server_errors_are_retried_with_backoff_up_to_max_retries_in_total() {
    let (run, server, ..) = chat(
        ProviderKind::Openai,
        false,
        vec![
            Turn::status(500, "boom"),
            Turn::status(503, "busy"),
            Turn::text("ok", (1, 1)),
        ],
        fast(),
    );
    assert_eq!(run.answer, "ok");
    assert_eq!(server.requests().len(), 3);

    let (run, server, ..) = chat(
        ProviderKind::Anthropic,
        false,
        vec![
            Turn::status(529, "Overloaded"),
            Turn::status(500, "a"),
            Turn::status(502, "b"),
            Turn::text("never", (1, 1)),
        ],
        fast(),
    );
    let err = failed(&run);
    assert!(err.is_transient());
    assert_eq!(
        server.requests().len(),
        3,
        "max_retries = 3 attempts in total"
    );
    assert!(err.to_string().contains("after 3 attempt(s)"), "{err}");
    assert!(err.to_string().contains("502"), "{err}");
    assert_eq!(run.model_calls.len(), 1);
    assert_eq!(run.model_calls[0].error.as_ref().unwrap().0, "transient");
}

#[test]
fn with_retries_off_the_first_transient_failure_is_returned_for_the_lifecycle() {
    let mut options = fast();
    options.retry = RetryMode::Never;
    let (run, server, ..) = chat(
        ProviderKind::Openai,
        true,
        vec![Turn::status(503, "busy"), Turn::text("x", (1, 1))],
        options,
    );
    assert!(failed(&run).is_transient());
    assert_eq!(server.requests().len(), 1);
}

#[test]
fn a_retry_after_longer_than_sixty_seconds_is_not_waited_for() {
    let (run, server, _, elapsed) = chat(
        ProviderKind::Anthropic,
        true,
        vec![Turn::rate_limited("120"), Turn::text("x", (1, 1))],
        fast(),
    );
    let err = failed(&run);
    assert!(err.is_transient());
    assert!(err.to_string().contains("asked to wait 120 s"), "{err}");
    assert_eq!(server.requests().len(), 1);
    assert!(elapsed < Duration::from_secs(10));
}

#[test]
fn unauthorized_fails_at_once_naming_provider_and_variable_without_the_key() {
    for (kind, stream) in MODES {
        let (run, server, ..) = chat(
            kind,
            stream,
            vec![Turn::Unauthorized, Turn::text("x", (1, 1))],
            fast(),
        );
        let err = failed(&run);
        let text = err.to_string();
        assert!(
            matches!(err, ProviderError::Auth { status: 401, .. }),
            "{text}"
        );
        assert!(text.contains("provider `scripted`"), "{text}");
        assert!(text.contains("SCRIPTED_API_KEY"), "{text}");
        assert_eq!(server.requests().len(), 1, "a 401 is not retried");
        let everything = format!("{run:?} {}", serde_json::to_string(&run).unwrap());
        assert!(
            !everything.contains(KEY),
            "the key leaked into the run: {everything}"
        );
        assert!(!everything.contains("TOPSECRET"));
    }
}

#[test]
fn unknown_model_and_context_too_long_fail_at_once_saying_what_to_fix() {
    let (run, server, ..) = chat(
        ProviderKind::Openai,
        false,
        vec![Turn::Status {
            status: 404,
            retry_after: None,
            code: "model_not_found".into(),
            message: "The model `m` does not exist".into(),
        }],
        fast(),
    );
    let text = failed(&run).to_string();
    assert!(
        text.contains("does not know model `m`") && text.contains("Check the model name"),
        "{text}"
    );
    assert_eq!(server.requests().len(), 1);

    let (run, ..) = chat(
        ProviderKind::Anthropic,
        true,
        vec![Turn::status(
            400,
            "prompt is too long: 250000 tokens > 200000 maximum",
        )],
        fast(),
    );
    let err = failed(&run);
    assert!(matches!(err, ProviderError::ContextTooLong { .. }), "{err}");
    assert!(err.to_string().contains("larger context window"));
}

#[test]
fn malformed_responses_fail_at_once_in_every_mode() {
    for (kind, stream) in MODES {
        let (run, server, ..) = chat(
            kind,
            stream,
            vec![Turn::Malformed, Turn::text("x", (1, 1))],
            fast(),
        );
        let err = failed(&run);
        assert!(
            matches!(err, ProviderError::Malformed { .. }),
            "{kind:?} {stream}: {err}"
        );
        assert!(err.to_string().contains("not JSON"), "{err}");
        assert_eq!(server.requests().len(), 1);
    }
}

#[test]
fn a_dropped_connection_is_retried_and_the_reply_is_not_doubled() {
    for (kind, stream) in MODES {
        let (run, server, events, _) = chat(
            kind,
            stream,
            vec![Turn::Drop, Turn::text("whole reply", (4, 2))],
            fast(),
        );
        assert!(
            matches!(run.stop, Stop::Answered),
            "{kind:?} {stream}: {:?}",
            run.stop
        );
        assert_eq!(run.answer, "whole reply");
        assert_eq!(server.requests().len(), 2);
        let all = events.all();
        let retry_at = all
            .iter()
            .position(|e| matches!(e, ActorEvent::Retrying { .. }))
            .expect("the drop is reported as a retry");
        let after: String = all[retry_at..]
            .iter()
            .filter_map(|e| match e {
                ActorEvent::TextDelta { text, .. } => Some(text.as_str()),
                _ => None,
            })
            .collect();
        assert_eq!(after, "whole reply");
    }
}

#[test]
fn a_connection_dropped_on_every_attempt_is_reported() {
    let (run, server, ..) = chat(
        ProviderKind::Anthropic,
        true,
        vec![Turn::Drop, Turn::Drop, Turn::Drop],
        fast(),
    );
    let err = failed(&run);
    assert!(err.is_transient());
    let text = err.to_string();
    assert!(
        ["interrupted", "ended before", "connection"]
            .iter()
            .any(|w| text.contains(w)),
        "{text}"
    );
    assert_eq!(server.requests().len(), 3);
}

#[test]
fn a_stalled_response_times_out_instead_of_hanging() {
    for stream in [true, false] {
        let mut options = fast();
        options.read_timeout = Some(Duration::from_millis(300));
        let (run, server, _, elapsed) = chat(
            ProviderKind::Openai,
            stream,
            vec![Turn::Stall, Turn::text("late but fine", (1, 1))],
            options,
        );
        assert_eq!(run.answer, "late but fine", "{:?}", run.stop);
        assert_eq!(server.requests().len(), 2);
        assert!(elapsed < Duration::from_secs(10));
    }
}

#[test]
fn cancelling_abandons_a_call_in_flight() {
    let server = ProviderServer::start(vec![Turn::Stall]);
    let client = client(provider(&server, ProviderKind::Anthropic), fast());
    let cancel = CancellationToken::new();
    let request = RunRequest {
        prompt: "hi".into(),
        stream: true,
        ..RunRequest::default()
    };
    let started = Instant::now();
    let run = rt()
        .block_on(async {
            let c = cancel.clone();
            tokio::spawn(async move {
                tokio::time::sleep(Duration::from_millis(200)).await;
                c.cancel();
            });
            run_actor(&client, &request, &NoTools, &cancel, &|_| {}).await
        })
        .unwrap();
    assert!(matches!(run.stop, Stop::Cancelled), "{:?}", run.stop);
    assert!(started.elapsed() < Duration::from_secs(3));
    assert!(run.model_calls.is_empty());
}
