//! Plan budgets (spec section 27): a plan whose next model call would pass its
//! `max-cost-usd` stops before the call with a `budget` approval, and `plan decide` with a
//! higher limit continues it.

use serde_json::{Value, json};

use super::lifecycle::{Setup, run_keyed, scripted_env, setup_with};
use crate::support::provider_server::{ProviderServer, Turn};

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
