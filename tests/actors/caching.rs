//! Prompt caching (spec section 27, cost): the stable prefix of every Anthropic request is
//! marked with `cache_control`, and cached input tokens are counted and priced at the cache
//! prices on both wire formats.

use cleveragents_engine::actors::accounting;
use cleveragents_engine::actors::runtime::{RunRequest, Stop, run_actor};
use cleveragents_engine::config::{ModelPrice, ProviderKind};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use super::{client, fast, provider, rt};
use crate::support::file_tools::FileTools;
use crate::support::provider_server::{ProviderServer, Turn};

fn price() -> ModelPrice {
    ModelPrice {
        input_usd_per_mtok: Some(3.0),
        output_usd_per_mtok: Some(15.0),
        ..ModelPrice::default()
    }
}

/// The blocks of `body` that carry `cache_control`, as (where, index) pairs.
fn marked(body: &Value) -> Vec<String> {
    let mut out = Vec::new();
    for (i, t) in body["tools"].as_array().into_iter().flatten().enumerate() {
        if t.get("cache_control").is_some() {
            out.push(format!("tools[{i}]"));
        }
    }
    for (i, s) in body["system"].as_array().into_iter().flatten().enumerate() {
        if s.get("cache_control").is_some() {
            out.push(format!("system[{i}]"));
        }
    }
    for (m, message) in body["messages"].as_array().unwrap().iter().enumerate() {
        for (b, block) in message["content"].as_array().unwrap().iter().enumerate() {
            if block.get("cache_control").is_some() {
                out.push(format!("messages[{m}][{b}]"));
            }
        }
    }
    out
}

#[test]
fn a_tool_loop_against_anthropic_marks_the_stable_prefix_and_prices_cache_reads() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("a.txt"), "alpha\n").unwrap();
    let tools = FileTools::new(dir.path());
    let server = ProviderServer::start(vec![
        Turn::tools("", &[("read_file", r#"{"path": "a.txt"}"#)], (2_000, 20)).cached(0, 1_900),
        Turn::tools("", &[("read_file", r#"{"path": "a.txt"}"#)], (2_100, 20)).cached(1_900, 150),
        Turn::text("done", (2_200, 10)).cached(2_050, 100),
    ]);
    let mut p = provider(&server, ProviderKind::Anthropic);
    p.models.insert("m".into(), price());
    let c = client(p.clone(), fast());
    let request = RunRequest {
        system_template: Some("You read files.".into()),
        prompt: "read a.txt".into(),
        stream: true,
        ..RunRequest::default()
    };
    let run = rt()
        .block_on(run_actor(
            &c,
            &request,
            &tools,
            &CancellationToken::new(),
            &|_| {},
        ))
        .unwrap();
    assert!(matches!(run.stop, Stop::Answered), "{:?}", run.stop);
    let requests = server.requests();
    assert_eq!(requests.len(), 3);
    let last_tool = requests[0].body["tools"].as_array().unwrap().len() - 1;
    for (turn, r) in requests.iter().enumerate() {
        let body = &r.body;
        let last_message = body["messages"].as_array().unwrap().len() - 1;
        let last_block = body["messages"][last_message]["content"]
            .as_array()
            .unwrap()
            .len()
            - 1;
        assert_eq!(
            marked(body),
            [
                format!("tools[{last_tool}]"),
                "system[0]".to_string(),
                format!("messages[{last_message}][{last_block}]"),
            ],
            "turn {turn}: the prefix up to the newest block is marked"
        );
        assert_eq!(
            body["system"][0]["cache_control"],
            json!({"type": "ephemeral"})
        );
        assert_eq!(body["system"][0]["text"], "You read files.");
    }
    // Turn 2 repeats turn 1's request as its prefix: what turn 1 marked is still there.
    let first = &requests[0].body["messages"][0]["content"][0];
    assert_eq!(
        requests[1].body["messages"][0]["content"][0]["text"],
        first["text"]
    );

    let usage = run.usage;
    assert_eq!(usage.input_tokens, 6_300);
    assert_eq!(usage.cache_read_tokens, 3_950);
    assert_eq!(usage.cache_write_tokens, 2_150);
    let cost = accounting::run_cost_usd(&p, &run).unwrap();
    // uncached 200 at $3, reads 3950 at $0.30, writes 2150 at $3.75, output 50 at $15 (per M).
    let expected = (200.0 * 3.0 + 3_950.0 * 0.3 + 2_150.0 * 3.75 + 50.0 * 15.0) / 1e6;
    assert!((cost - expected).abs() < 1e-12, "{cost} != {expected}");
    let uncached = (6_300.0 * 3.0 + 50.0 * 15.0) / 1e6;
    assert!(cost < uncached, "caching must be cheaper than no caching");
}

#[test]
fn openai_cached_tokens_are_counted_and_priced_at_the_configured_cache_price() {
    for stream in [false, true] {
        let server = ProviderServer::start(vec![Turn::text("hi", (10_000, 100)).cached(8_000, 0)]);
        let mut p = provider(&server, ProviderKind::Openai);
        p.models.insert(
            "m".into(),
            ModelPrice {
                cache_read_usd_per_mtok: Some(0.75),
                ..price()
            },
        );
        let c = client(p.clone(), fast());
        let request = RunRequest {
            prompt: "hello".into(),
            stream,
            ..RunRequest::default()
        };
        let run = rt()
            .block_on(run_actor(
                &c,
                &request,
                &cleveragents_engine::actors::runtime::NoTools,
                &CancellationToken::new(),
                &|_| {},
            ))
            .unwrap();
        assert_eq!(run.usage.cache_read_tokens, 8_000, "stream {stream}");
        assert_eq!(run.usage.input_tokens, 10_000);
        let cost = accounting::run_cost_usd(&p, &run).unwrap();
        let expected = (2_000.0 * 3.0 + 8_000.0 * 0.75 + 100.0 * 15.0) / 1e6;
        assert!((cost - expected).abs() < 1e-12, "{cost} != {expected}");
    }
}

#[test]
fn cached_tokens_are_recorded_with_the_call_and_rolled_up_per_plan() {
    use cleveragents_engine::actors::accounting::CallContext;
    use cleveragents_engine::domain::id::Id;
    use cleveragents_engine::domain::plan::Plan;
    use cleveragents_engine::store::Store;
    let server = ProviderServer::start(vec![Turn::text("hi", (1_000, 10)).cached(900, 50)]);
    let p = provider(&server, ProviderKind::Anthropic);
    let c = client(p.clone(), fast());
    let request = RunRequest {
        prompt: "hello".into(),
        ..RunRequest::default()
    };
    let run = rt()
        .block_on(run_actor(
            &c,
            &request,
            &cleveragents_engine::actors::runtime::NoTools,
            &CancellationToken::new(),
            &|_| {},
        ))
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let mut store = Store::open(&dir.path().join("db")).unwrap();
    let plan = Plan::new("local/a", "a", jiff::Timestamp::now());
    store.insert_plan(&plan).unwrap();
    let ctx = CallContext {
        run_id: Id::generate(),
        plan_id: Some(plan.plan_id),
        decision_id: None,
        actor: "scripted/m".into(),
    };
    store
        .record_model_calls(&accounting::call_rows(&ctx, &p, &run))
        .unwrap();
    let rollup = store.usage_for_plan(&plan.plan_id).unwrap();
    assert_eq!(
        (
            rollup.input_tokens,
            rollup.cache_read_tokens,
            rollup.cache_write_tokens
        ),
        (1_000, 900, 50)
    );
}
