//! Usage of a run, recorded in the database and rolled up per plan and decision, with cost
//! from the configured prices.

use cleveragents_engine::actors::accounting::{CallContext, call_rows, run_cost_usd};
use cleveragents_engine::actors::runtime::{NoTools, RunRequest, run_actor};
use cleveragents_engine::config::{ModelPrice, ProviderKind};
use cleveragents_engine::domain::id::Id;
use cleveragents_engine::domain::plan::Plan;
use cleveragents_engine::store::Store;
use tokio_util::sync::CancellationToken;

use super::{client, fast, provider, rt};
use crate::support::provider_server::{ProviderServer, Turn};

#[test]
fn a_runs_usage_is_recorded_with_cost_and_rolled_up_per_plan_and_decision() {
    let server = ProviderServer::start(vec![
        Turn::rate_limited("0"),
        Turn::text("first", (400_000, 100_000)),
        Turn::text("second", (600_000, 100_000)),
    ]);
    let mut p = provider(&server, ProviderKind::Openai);
    p.models.insert(
        "m".into(),
        ModelPrice {
            input_usd_per_mtok: Some(1.0),
            output_usd_per_mtok: Some(4.0),
            ..ModelPrice::default()
        },
    );
    let client = client(p.clone(), fast());
    let dir = tempfile::tempdir().unwrap();
    let mut store = Store::open(&dir.path().join("db")).unwrap();
    let plan = Plan::new("local/a", "a", jiff::Timestamp::now());
    store.insert_plan(&plan).unwrap();

    for decision in ["D1", "D2"] {
        let request = RunRequest {
            prompt: "go".into(),
            ..RunRequest::default()
        };
        let run = rt()
            .block_on(run_actor(
                &client,
                &request,
                &NoTools,
                &CancellationToken::new(),
                &|_| {},
            ))
            .unwrap();
        let ctx = CallContext {
            run_id: Id::generate(),
            plan_id: Some(plan.plan_id),
            decision_id: Some(decision.into()),
            actor: "scripted/m".into(),
        };
        store
            .record_model_calls(&call_rows(&ctx, &p, &run))
            .unwrap();
        let expected = if decision == "D1" { 0.8 } else { 1.0 };
        assert!((run_cost_usd(&p, &run).unwrap() - expected).abs() < 1e-9);
    }
    let d1 = store.usage_for_decision(&plan.plan_id, "D1").unwrap();
    assert_eq!(
        (d1.calls, d1.input_tokens, d1.output_tokens),
        (1, 400_000, 100_000)
    );
    assert_eq!(d1.cost_usd, Some(0.8));
    let all = store.usage_for_plan(&plan.plan_id).unwrap();
    assert_eq!(
        (all.calls, all.input_tokens, all.output_tokens),
        (2, 1_000_000, 200_000)
    );
    assert!((all.cost_usd.unwrap() - 1.8).abs() < 1e-9);
}
