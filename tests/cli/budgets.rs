//! Plan budgets (spec section 27): a plan whose next model call would pass its
//! `max-cost-usd` stops before the call with a `budget` approval, and `plan decide` with a
//! higher limit continues it.

use serde_json::{Value, json};

use super::lifecycle::{Setup, scripted_env, setup_with};
use crate::support::provider_server::{ProviderServer, Turn};
use crate::support::{run_keyed, use_plan_keyed};

const ONE_STEP: &str = "name: local/notes\ndescription: Write release notes\ndefinition-of-done: NOTES.md names the release\nstrategy-actor: builtin/checklist-strategist\nexecution-actor: builtin/script-executor\narguments:\n  - name: version\n    type: string\n    required: true\n";

/// The scripted provider, priced at $1 per million input and output tokens.
fn priced(s: &Setup, server: &ProviderServer, kind: &str) {
    scripted_env(s, server, kind);
    let mut config = std::fs::read_to_string(&s.env.config_path).unwrap();
    config.push_str(
        "[providers.scripted.models.m]\ninput_usd_per_mtok = 1.0\noutput_usd_per_mtok = 1.0\n",
    );
    std::fs::write(&s.env.config_path, config).unwrap();
}

fn pending(s: &Setup, id: &str) -> Vec<Value> {
    let (approvals, _) = run_keyed(&s.env, &["plan", "approvals", id]);
    approvals["data"]["approvals"]
        .as_array()
        .unwrap_or_else(|| panic!("{approvals:#}"))
        .iter()
        .filter(|a| a["status"] == "pending")
        .cloned()
        .collect()
}

#[test]
fn a_plan_over_its_cost_budget_stops_before_the_call_and_continues_with_a_higher_limit() {
    for kind in ["openai", "anthropic"] {
        let server = ProviderServer::start(vec![
            // $1.00 of input: far over the $0.01 budget once it is reported.
            Turn::tools(
                "",
                &[(
                    "write_file",
                    r#"{"path": "DRAFT.md", "content": "draft\n"}"#,
                )],
                (1_000_000, 10),
            ),
            Turn::tools(
                "",
                &[(
                    "write_file",
                    r#"{"path": "NOTES.md", "content": "Release 1.2\n"}"#,
                )],
                (100, 10),
            ),
            Turn::text("Wrote NOTES.md.", (100, 5)),
        ]);
        let s = setup_with(ONE_STEP);
        priced(&s, &server, kind);
        let (doc, code) = run_keyed(
            &s.env,
            &[
                "plan",
                "use",
                "--execution-actor",
                "scripted/m",
                "--automation-profile",
                "trusted",
                "--max-cost-usd",
                "0.01",
                "local/notes",
                "app",
                "--arg",
                "version=1.2",
            ],
        );
        assert_eq!(code, 3, "{kind}: {doc:#}");
        let id = doc["data"]["plan_id"].as_str().unwrap().to_string();
        assert_eq!(
            server.requests().len(),
            1,
            "{kind}: the second call was never made"
        );
        let waiting = pending(&s, &id);
        assert_eq!(waiting.len(), 1, "{waiting:#?}");
        let budget = &waiting[0];
        assert_eq!(budget["kind"], "budget");
        assert_eq!(budget["options"], json!(["raise", "cancel"]));
        let summary = budget["summary"].as_str().unwrap();
        assert!(
            summary.contains("max-cost-usd $0.0100") && summary.contains("$1.0000 spent"),
            "{summary}"
        );
        let apr = budget["approval_id"].as_str().unwrap().to_string();
        assert!(
            budget["answer_command"]
                .as_str()
                .unwrap()
                .contains("--max-cost-usd"),
            "{budget:#}"
        );

        // A limit the plan has already spent is refused; a higher one continues the plan.
        let (doc, code) = run_keyed(&s.env, &["plan", "decide", &apr, "--max-cost-usd", "0.5"]);
        assert_ne!(code, 0, "{doc:#}");
        assert!(doc.to_string().contains("already spent $1.0000"), "{doc:#}");
        let (doc, code) = run_keyed(&s.env, &["plan", "decide", &apr, "--max-cost-usd", "100"]);
        assert!(code == 0 || code == 3, "{kind}: {doc:#}");
        assert_eq!(server.remaining(), 0, "{kind}: the plan went on: {doc:#}");
        let (status, _) = run_keyed(&s.env, &["plan", "status", &id]);
        assert_ne!(status["data"]["state"], "errored", "{status:#}");
        assert!(
            pending(&s, &id).iter().all(|a| a["kind"] != "budget"),
            "the budget approval is answered"
        );
        let db = rusqlite::Connection::open(crate::support::db_file(&s.env)).unwrap();
        let (limit, source): (f64, String) = db
            .query_row(
                "SELECT max_cost_usd, source FROM plan_budgets WHERE plan_id = ?1",
                [&id],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .unwrap();
        assert_eq!((limit, source.as_str()), (100.0, "approval"));
    }
}

#[test]
fn a_config_default_budget_applies_to_new_plans() {
    let server = ProviderServer::start(vec![Turn::tools(
        "",
        &[(
            "write_file",
            r#"{"path": "DRAFT.md", "content": "draft\n"}"#,
        )],
        (10, 10_000),
    )]);
    let s = setup_with(ONE_STEP);
    priced(&s, &server, "openai");
    let (doc, code) = run_keyed(&s.env, &["config", "set", "max-tokens", "5000"]);
    assert_eq!(code, 0, "{doc:#}");
    let (doc, code) = run_keyed(
        &s.env,
        &[
            "plan",
            "use",
            "--execution-actor",
            "scripted/m",
            "--automation-profile",
            "trusted",
            "local/notes",
            "app",
            "--arg",
            "version=1.2",
        ],
    );
    assert_eq!(code, 3, "{doc:#}");
    let id = doc["data"]["plan_id"].as_str().unwrap().to_string();
    let waiting = pending(&s, &id);
    assert_eq!(waiting[0]["kind"], "budget", "{waiting:#?}");
    assert!(
        waiting[0]["summary"]
            .as_str()
            .unwrap()
            .contains("max-tokens 5000 tokens"),
        "{waiting:#?}"
    );
    assert_eq!(server.requests().len(), 1);
}

/// `plan use local/notes app --arg version=1.2` under `profile`, `scripted/m` executing.
fn use_notes(s: &Setup, profile: &str) -> (Value, i32, String) {
    use_plan_keyed(
        &s.env,
        "local/notes",
        profile,
        &["--execution-actor", "scripted/m", "--arg", "version=1.2"],
    )
}

#[test]
fn after_two_runs_of_an_action_a_third_plan_is_estimated_within_their_range() {
    let server = ProviderServer::start(vec![
        Turn::text("Wrote the notes.", (100, 10)),
        Turn::text("Wrote the notes again.", (300, 30)),
    ]);
    let s = setup_with(ONE_STEP);
    priced(&s, &server, "openai");
    let (doc, code, first) = use_notes(&s, "trusted");
    assert_eq!(code, 3, "stops at the apply gate: {doc:#}");
    let (_, _, _second) = use_notes(&s, "trusted");
    assert_eq!(server.remaining(), 0);

    // The third plan waits before Strategize under `manual`: nothing ran yet.
    let (_, _, third) = use_notes(&s, "manual");
    let (status, code) = run_keyed(&s.env, &["plan", "status", &third]);
    assert_eq!(code, 0, "{status:#}");
    let e = &status["data"]["estimate"];
    assert_eq!(e["estimator"], "builtin/usage-estimator");
    assert_eq!(e["history_plans"], 2, "{e:#}");
    let median = e["plan_tokens"]["median"].as_f64().unwrap();
    assert!((110.0..=330.0).contains(&median), "{e:#}");
    assert_eq!(
        (&e["plan_tokens"]["min"], &e["plan_tokens"]["max"]),
        (&json!(110.0), &json!(330.0))
    );
    assert!(
        e["summary"]
            .as_str()
            .unwrap()
            .contains("est. 220 tokens (range 110 to 330)"),
        "{e:#}"
    );
    let plain = s
        .env
        .command(&["--format", "plain", "plan", "status", &third])
        .env("SCRIPTED_API_KEY", "sk-test")
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&plain.stdout);
    assert!(
        text.contains("Estimate (builtin/usage-estimator): est. 220 tokens"),
        "{text}"
    );

    // With no earlier plan of its own action, the estimate says so.
    let db = cleveragents_engine::store::Store::open(&crate::support::db_file(&s.env)).unwrap();
    let mut lonely = db.plan(&third.parse().unwrap()).unwrap().unwrap();
    lonely.action_name = "local/never-ran".into();
    let none = cleveragents_engine::actors::estimate::estimate(&db, &lonely).unwrap();
    assert_eq!(none.history_plans, 0);
    assert!(none.summary.starts_with("no history"), "{}", none.summary);

    // Correcting the first plan's step re-runs it: its recorded usage is the estimate.
    let step = db.plan_steps(&first.parse().unwrap()).unwrap()[0]
        .decision_id
        .to_string();
    let (doc, code) = run_keyed(
        &s.env,
        &[
            "plan",
            "correct",
            "--mode",
            "revert",
            "-g",
            "shorter",
            "--dry-run",
            &step,
        ],
    );
    assert_eq!(code, 0, "{doc:#}");
    assert_eq!(doc["data"]["affected"]["estimated_tokens"], 110, "{doc:#}");
    let said = doc.to_string();
    assert!(
        said.contains("1 step(s) re-run, est. 110 tokens / $0.0001; 0 step(s) replayed at no cost"),
        "{said}"
    );
}

#[test]
fn a_correction_with_its_own_budget_stops_before_a_call_that_would_pass_it() {
    let server = ProviderServer::start(vec![Turn::text("Wrote the notes.", (100, 10))]);
    let s = setup_with(ONE_STEP);
    priced(&s, &server, "openai");
    let (_, code, id) = use_notes(&s, "trusted");
    assert_eq!(code, 3);
    let db = cleveragents_engine::store::Store::open(&crate::support::db_file(&s.env)).unwrap();
    let step = db.plan_steps(&id.parse().unwrap()).unwrap()[0]
        .decision_id
        .to_string();
    drop(db);
    let (doc, code) = run_keyed(
        &s.env,
        &[
            "plan",
            "correct",
            "--mode",
            "revert",
            "-g",
            "shorter",
            "--yes",
            "--max-tokens",
            "1",
            &step,
        ],
    );
    assert_eq!(code, 3, "{doc:#}");
    assert_eq!(server.requests().len(), 1, "the re-run's call was not made");
    let waiting = pending(&s, &id);
    assert_eq!(waiting[0]["kind"], "budget", "{waiting:#?}");
    let db = rusqlite::Connection::open(crate::support::db_file(&s.env)).unwrap();
    let (limit, source): (i64, String) = db
        .query_row(
            "SELECT max_tokens, source FROM plan_budgets WHERE plan_id = ?1",
            [&id],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .unwrap();
    assert_eq!((limit, source.as_str()), (111, "correction"));
}

#[test]
fn a_plan_whose_provider_reports_no_usage_shows_its_tokens_and_cost_as_unknown() {
    let server = ProviderServer::start(vec![
        Turn::text("Wrote the notes.", (100, 10)).without_usage(),
    ]);
    let s = setup_with(ONE_STEP);
    priced(&s, &server, "anthropic");
    let (_, code, id) = use_notes(&s, "trusted");
    assert_eq!(code, 3);
    let (status, _) = run_keyed(&s.env, &["plan", "status", &id]);
    assert_eq!(status["data"]["usage"]["unreported_calls"], 1, "{status:#}");
    assert_eq!(status["data"]["usage"]["cost_usd"], Value::Null);
    let plain = s
        .env
        .command(&["--format", "plain", "plan", "status", &id])
        .env("SCRIPTED_API_KEY", "sk-test")
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&plain.stdout);
    assert!(
        text.contains("plus unknown: 1 call(s) reported no usage"),
        "{text}"
    );
    assert!(
        text.contains("unknown (a provider reported no usage)"),
        "{text}"
    );
    assert!(!text.contains("$0.0000"), "{text}");
}
