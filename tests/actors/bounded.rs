//! Bounded calls: a server that drips keep-alives or tokens cannot hold a run past its call
//! or step deadline, and one huge event or reply fails clearly instead of eating memory,
//! CPU and the database (spec section 16; `call_deadline_secs`, `step_deadline_secs`).

use std::time::{Duration, Instant};

use cleveragents_engine::actors::messages::Message;
use cleveragents_engine::actors::providers::{ClientOptions, ProviderError};
use cleveragents_engine::actors::runtime::{
    ActorRun, Limits, NoTools, RunRequest, Stop, run_actor,
};
use cleveragents_engine::config::ProviderKind;
use tokio_util::sync::CancellationToken;

use super::{MODES, client, fast, provider, rt};
use crate::support::provider_server::{ProviderServer, Turn};

fn run(
    kind: ProviderKind,
    stream: bool,
    script: Vec<Turn>,
    options: ClientOptions,
    limits: Limits,
) -> (ActorRun, ProviderServer, Duration) {
    let server = ProviderServer::start(script);
    let client = client(provider(&server, kind), options);
    let request = RunRequest {
        prompt: "hello".into(),
        stream,
        limits,
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
                    &|_| {},
                ),
            )
            .await
            .expect("the run must never hang")
        })
        .unwrap();
    (run, server, started.elapsed())
}

#[test]
fn a_server_dripping_keep_alives_fails_the_call_at_its_deadline() {
    for kind in [ProviderKind::Openai, ProviderKind::Anthropic] {
        let options = ClientOptions {
            call_deadline: Some(Duration::from_millis(800)),
            ..fast()
        };
        let drip = Turn::Drip {
            every: Duration::from_millis(100),
            tokens: false,
        };
        let (run, server, took) = run(kind, true, vec![drip], options, Limits::default());
        let Stop::Failed { error } = &run.stop else {
            panic!("{kind:?}: {:?}", run.stop);
        };
        assert!(error.is_transient(), "{error:?}");
        assert!(
            error.to_string().contains("call deadline of 0.8 s"),
            "{error}"
        );
        assert!(took < Duration::from_secs(3), "took {took:?}");
        assert_eq!(server.requests().len(), 1);
        // Abandoned while the server worked on it: recorded with its usage unknown.
        assert_eq!(run.model_calls[0].error.as_ref().unwrap().0, "abandoned");
        assert!(!run.model_calls[0].usage_reported);
    }
}

#[test]
fn a_server_dripping_one_token_at_a_time_stops_the_run_at_the_step_deadline() {
    for kind in [ProviderKind::Openai, ProviderKind::Anthropic] {
        let drip = Turn::Drip {
            every: Duration::from_millis(100),
            tokens: true,
        };
        let limits = Limits {
            deadline: Some(Duration::from_secs(1)),
            ..Limits::default()
        };
        let (run, _, took) = run(kind, true, vec![drip], fast(), limits);
        assert!(
            matches!(run.stop, Stop::Deadline { secs: 1 }),
            "{kind:?}: {:?}",
            run.stop
        );
        assert!(run.stop.describe().contains("step_deadline_secs"));
        assert!(took < Duration::from_secs(3), "took {took:?}");
    }
}

#[test]
fn one_event_over_the_cap_is_discarded_and_the_model_is_told_to_work_in_smaller_pieces() {
    for (kind, stream) in MODES {
        let options = ClientOptions {
            max_event_bytes: 1 << 20,
            max_answer_bytes: 1 << 20,
            ..fast()
        };
        let script = vec![
            Turn::Huge { bytes: 3 << 20 },
            Turn::text("smaller now", (5, 1)),
        ];
        let (run, server, took) = run(kind, stream, script, options, Limits::default());
        assert!(
            matches!(run.stop, Stop::Answered),
            "{kind:?} {stream}: {:?}",
            run.stop
        );
        assert_eq!(run.answer, "smaller now");
        let (error_kind, message) = run.model_calls[0].error.clone().unwrap();
        assert_eq!(error_kind, "too_large", "{message}");
        assert!(message.contains("1048576 bytes"), "{message}");
        let told = server.requests()[1].body.to_string();
        assert!(told.contains("Your previous reply was discarded"), "{told}");
        assert!(
            run.transcript.iter().any(
                |m| matches!(m, Message::User { text } if text.contains("smaller tool calls"))
            ),
            "{:?}",
            run.transcript
        );
        assert!(took < Duration::from_secs(10), "took {took:?}");
    }
}

#[test]
fn two_replies_over_the_cap_in_a_row_end_the_run() {
    let options = ClientOptions {
        max_event_bytes: 1 << 20,
        ..fast()
    };
    let script = vec![Turn::Huge { bytes: 2 << 20 }, Turn::Huge { bytes: 2 << 20 }];
    let (run, _, _) = run(
        ProviderKind::Openai,
        true,
        script,
        options,
        Limits::default(),
    );
    let Stop::Failed { error } = &run.stop else {
        panic!("{:?}", run.stop);
    };
    assert!(matches!(error, ProviderError::TooLarge { .. }), "{error:?}");
}

/// The time to stream and parse one event of `bytes` bytes, with timeouts far beyond any
/// machine's load so that only the parsing is measured.
fn parse_time(kind: ProviderKind, bytes: usize) -> Duration {
    let server = ProviderServer::start(vec![Turn::Huge { bytes }]);
    let mut p = provider(&server, kind);
    p.timeout_secs = 900;
    p.max_retries = 0;
    let options = ClientOptions {
        max_event_bytes: 64 << 20,
        max_answer_bytes: 64 << 20,
        read_timeout: Some(Duration::from_secs(900)),
        ..fast()
    };
    let c = client(p, options);
    let request = RunRequest {
        prompt: "hello".into(),
        stream: true,
        ..RunRequest::default()
    };
    let started = Instant::now();
    let run = rt().block_on(run_actor(
        &c,
        &request,
        &NoTools,
        &CancellationToken::new(),
        &|_| {},
    ));
    let took = started.elapsed();
    let run = run.unwrap();
    assert!(matches!(run.stop, Stop::Answered), "{:?}", run.stop);
    assert_eq!(run.answer.len(), bytes);
    took
}

#[test]
fn a_thirty_megabyte_event_is_parsed_in_linear_time() {
    for kind in [ProviderKind::Openai, ProviderKind::Anthropic] {
        // Timed against a tenth of the size in the same run, so that a loaded machine slows
        // both: linear parsing takes about ten times as long, quadratic about a hundred.
        let small = parse_time(kind, 3 << 20);
        let large = parse_time(kind, 30 << 20);
        assert!(
            large < small * 35 + Duration::from_secs(5),
            "{kind:?}: 30 MiB took {large:?}, 3 MiB {small:?}"
        );
    }
}

#[test]
fn a_provider_rate_limit_queues_calls_instead_of_failing_them() {
    let server = ProviderServer::start(vec![
        Turn::text("one", (5, 1)),
        Turn::text("two", (5, 1)),
        Turn::text("three", (5, 1)),
    ]);
    let mut p = provider(&server, ProviderKind::Openai);
    p.requests_per_minute = Some(2);
    let options = ClientOptions {
        rate_window: Duration::from_millis(700),
        ..fast()
    };
    let c = client(p, options);
    let request = RunRequest {
        prompt: "hello".into(),
        ..RunRequest::default()
    };
    let started = Instant::now();
    for expected in ["one", "two", "three"] {
        let run = rt()
            .block_on(run_actor(
                &c,
                &request,
                &NoTools,
                &CancellationToken::new(),
                &|_| {},
            ))
            .unwrap();
        assert!(matches!(run.stop, Stop::Answered), "{:?}", run.stop);
        assert_eq!(run.answer, expected);
    }
    let requests = server.requests();
    let gap = requests[2].at - requests[0].at;
    assert!(
        gap >= Duration::from_millis(650),
        "the third request waited for the window: {gap:?}"
    );
    assert!(started.elapsed() < Duration::from_secs(5));
}
