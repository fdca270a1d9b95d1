//! Warm and cold context reach the prompts (spec section 25, "Tiered Context Architecture"):
//! the decisions of earlier applied plans of the project (cold) and of the plan family
//! (warm) that share words with the task or step are promoted into the hot context within
//! `hot-max-tokens`, and the snapshot names the tier of each.

use serde_json::{Value, json};

use super::correction::by_key;
use super::lifecycle::{Setup, scripted_env, setup, use_plan};
use crate::support::provider_server::{ProviderServer, Turn};
use crate::support::{db_file, ok, run_keyed};

/// What the checklist strategist gives as the reason of every script step.
const SCRIPT_RATIONALE: &str = "builtin/checklist-strategist follows the script as written";

fn store(s: &Setup) -> cleveragents_engine::store::Store {
    cleveragents_engine::store::Store::open(&db_file(&s.env)).unwrap()
}

/// A project whose first plan (`local/notes`, the checklist strategist and the script
/// executor) ran to Applied; its id.
fn applied_first_plan() -> (Setup, String) {
    let s = setup();
    let (doc, code, id) = use_plan(&s, "full-auto");
    assert_eq!(code, 0, "{doc:#}");
    let status = ok(&s.env, &["plan", "status", &id]);
    assert_eq!(status["data"]["phase"], "applied", "{status:#}");
    (s, id)
}

/// A strategist that records one decision and finishes.
fn strategist_turns() -> Vec<Turn> {
    vec![
        Turn::tools(
            "",
            &[(
                "record_decision",
                r#"{"key":"d1","decision_type":"implementation_choice","question":"Which notes?","chosen_option":"write NOTES.md","rationale":"asked for","step":{"instructions":"write NOTES.md"}}"#,
            )],
            (10, 5),
        ),
        Turn::tools("", &[("finish_strategy", r#"{"summary":"s"}"#)], (10, 5)),
    ]
}

/// Runs a second `local/notes` plan strategized by the scripted model; its id and the
/// strategist's first request body.
fn second_plan(s: &Setup, server: &ProviderServer) -> (String, Value) {
    scripted_env(s, server, "openai");
    let (doc, code) = run_keyed(
        &s.env,
        &[
            "plan",
            "use",
            "--strategy-actor",
            "scripted/m",
            "local/notes",
            "app",
            "--arg",
            "version=2.0",
        ],
    );
    assert_eq!(code, 3, "the plan waits at its strategize gate: {doc:#}");
    let id = doc["data"]["plan_id"].as_str().unwrap().to_string();
    let (doc, code) = run_keyed(&s.env, &["plan", "execute", &id]);
    assert!(code == 0 || code == 3, "{doc:#}");
    let first = server.requests()[0].body.clone();
    (id, first)
}

/// The strategist's hot context as `plan explain --show-context` prints it for the plan's
/// root decision.
fn explained_hot_context(s: &Setup, plan: &str) -> Value {
    let root = store(s).decisions(&plan.parse().unwrap()).unwrap()[0]
        .decision_id
        .to_string();
    let doc = ok(&s.env, &["plan", "explain", "--show-context", &root]);
    doc["data"]["context"]["strategist"]["hot_context"].clone()
}

fn promoted_tiers(hot: &Value) -> Vec<(String, String)> {
    hot["promoted"]
        .as_array()
        .unwrap_or_else(|| panic!("no promoted list: {hot:#}"))
        .iter()
        .map(|p| {
            (
                p["tier"].as_str().unwrap().to_string(),
                p["reference"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

#[test]
fn a_second_plan_gets_the_applied_first_plans_decisions_in_its_strategist_prompt_as_cold_context() {
    let (s, first) = applied_first_plan();
    let server = ProviderServer::start(strategist_turns());
    let (second, request) = second_plan(&s, &server);
    let prompt = request["messages"].to_string();
    assert!(prompt.contains("## Earlier decisions"), "{prompt}");
    assert!(prompt.contains(SCRIPT_RATIONALE), "{prompt}");
    assert!(
        prompt.contains(&format!("[history:{first}:")),
        "cold items name the plan they come from: {prompt}"
    );
    assert!(prompt.contains("Script step 1 of 3: write"), "{prompt}");

    let hot = explained_hot_context(&s, &second);
    let tiers = promoted_tiers(&hot);
    assert!(!tiers.is_empty(), "{hot:#}");
    for (tier, reference) in &tiers {
        assert_eq!(tier, "cold", "{hot:#}");
        assert!(
            reference.starts_with(&format!("history:{first}:")),
            "{hot:#}"
        );
        let why = hot["items"]
            .as_array()
            .unwrap()
            .iter()
            .find(|i| i["reference"] == json!(reference))
            .unwrap_or_else(|| panic!("{reference} says why it was included: {hot:#}"));
        assert_eq!(why["tier"], "cold", "{why:#}");
        assert!(why["score"].as_f64().unwrap() >= 1.0, "{why:#}");
        assert!(!why["terms"].as_array().unwrap().is_empty(), "{why:#}");
        assert!(
            hot["references"]
                .as_array()
                .unwrap()
                .contains(&json!(reference)),
            "{hot:#}"
        );
    }
    assert_eq!(hot["tiers"]["warm_considered"], 0, "{hot:#}");
    assert!(
        hot["tiers"]["cold_considered"].as_u64().unwrap() >= 3,
        "{hot:#}"
    );
    assert_eq!(hot["summarization"], "off", "{hot:#}");
}

#[test]
fn with_cold_max_decisions_0_no_earlier_plan_reaches_the_prompt() {
    let (s, _) = applied_first_plan();
    ok(
        &s.env,
        &[
            "project",
            "context",
            "set",
            "--view",
            "strategize",
            "--cold-max-decisions",
            "0",
            "--summarize",
            "app",
        ],
    );
    let server = ProviderServer::start(strategist_turns());
    let (second, request) = second_plan(&s, &server);
    let prompt = request["messages"].to_string();
    assert!(!prompt.contains(SCRIPT_RATIONALE), "{prompt}");
    assert!(!prompt.contains("history:"), "{prompt}");
    let hot = explained_hot_context(&s, &second);
    assert_eq!(hot["tiers"]["cold_considered"], 0, "{hot:#}");
    assert_eq!(hot["promoted"], json!([]), "{hot:#}");
    assert_eq!(
        hot["summarization"], "not yet supported: nothing was summarized",
        "{hot:#}"
    );
    let shown = ok(
        &s.env,
        &["project", "context", "show", "--view", "strategize", "app"],
    );
    assert_eq!(
        shown["data"]["context"]["summarization"], "not yet supported: material is not summarized",
        "{shown:#}"
    );
}

#[test]
fn with_a_small_hot_max_tokens_promoted_items_are_dropped_and_the_prompt_stays_in_budget() {
    let (s, first) = applied_first_plan();
    ok(
        &s.env,
        &[
            "project",
            "context",
            "set",
            "--view",
            "strategize",
            "--hot-max-tokens",
            "40",
            "app",
        ],
    );
    let server = ProviderServer::start(strategist_turns());
    let (second, request) = second_plan(&s, &server);
    let prompt = request["messages"].to_string();
    assert!(!prompt.contains(&format!("history:{first}")), "{prompt}");
    let hot = explained_hot_context(&s, &second);
    assert_eq!(hot["budget"], 40, "{hot:#}");
    let tokens = hot["tokens"].as_u64().unwrap();
    assert!(tokens <= 40, "{hot:#}");
    assert_eq!(
        tokens,
        (hot["text"].as_str().unwrap().chars().count() as u64).div_ceil(4)
    );
    assert!(
        hot["tiers"]["cold_considered"].as_u64().unwrap() >= 3,
        "{hot:#}"
    );
    assert_eq!(hot["promoted"], json!([]), "{hot:#}");
    assert!(hot["dropped"].as_u64().unwrap() >= 3, "{hot:#}");
}

#[test]
fn a_child_plan_appended_by_a_correction_gets_its_familys_decisions_as_warm_context() {
    let (s, parent) = applied_first_plan();
    let pid = parent.parse().unwrap();
    let write = by_key(&store(&s), &pid)["write"].decision_id.to_string();
    let server = ProviderServer::start(vec![
        Turn::tools(
            "",
            &[("write_file", r#"{"path":"h.txt","content":"h\n"}"#)],
            (10, 5),
        ),
        Turn::text("Wrote h.txt.", (10, 5)),
    ]);
    scripted_env(&s, &server, "openai");
    let (doc, code) = run_keyed(
        &s.env,
        &[
            "plan",
            "correct",
            "--mode",
            "append",
            "-g",
            "also write h.txt next to the release NOTES.md",
            "--execution-actor",
            "scripted/m",
            "--yes",
            &write,
        ],
    );
    assert_eq!(code, 0, "{doc:#}");
    let child = doc["data"]["child_plan_id"].as_str().unwrap().to_string();
    let prompt = server.requests()[0].body["messages"].to_string();
    assert!(prompt.contains("## Earlier decisions"), "{prompt}");
    assert!(
        prompt.contains(&format!("[decision:{write}] Script step 1 of 3: write")),
        "the parent's decision, warm: {prompt}"
    );
    assert!(prompt.contains(SCRIPT_RATIONALE), "{prompt}");
    assert!(
        !prompt.contains("history:"),
        "the family is warm, not cold, even once applied: {prompt}"
    );
    let st = store(&s);
    let step = by_key(&st, &child.parse().unwrap())
        .into_values()
        .next()
        .unwrap();
    let output = st
        .plan_steps(&child.parse().unwrap())
        .unwrap()
        .into_iter()
        .find(|p| p.decision_id == step.decision_id)
        .unwrap()
        .output
        .unwrap();
    let output: Value = serde_json::from_str(&output).unwrap();
    let tiers = promoted_tiers(&output["hot_context"]);
    assert!(
        tiers.contains(&("warm".to_string(), format!("decision:{write}"))),
        "{tiers:?}"
    );
    assert!(tiers.iter().all(|(t, _)| t == "warm"), "{tiers:?}");
}
