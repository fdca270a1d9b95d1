//! Lifecycle, session 2: diff hunks that name their decisions, `request_decision` from a model
//! executor, the invariant actor, the apply journal's crash path, `--no-commit`, Ctrl-C during
//! a run, and the findings of the last new-user trial.

use serde_json::Value;

use super::lifecycle::{Setup, setup, use_plan};
use crate::support::db_file;

fn store(s: &Setup) -> cleveragents::engine::store::Store {
    cleveragents::engine::store::Store::open(&db_file(&s.env)).unwrap()
}

/// A plan of the three-step script action executed to (execute, complete) under `trusted`.
fn executed() -> (Setup, String) {
    let s = setup();
    let (doc, code, id) = use_plan(&s, "trusted");
    assert_eq!(code, 3, "{doc:#}");
    (s, id)
}

/// The decision ids of the plan's steps, in execution order.
fn step_decisions(s: &Setup, id: &str) -> Vec<String> {
    store(s)
        .plan_steps(&id.parse().unwrap())
        .unwrap()
        .into_iter()
        .map(|st| st.decision_id.to_string())
        .collect()
}

fn files_of(diff: &Value) -> Vec<Value> {
    diff["data"]["resources"][0]["files"]
        .as_array()
        .unwrap()
        .clone()
}

#[test]
fn every_json_diff_hunk_names_the_decisions_whose_steps_produced_its_lines() {
    let (s, id) = executed();
    let steps = step_decisions(&s, &id);
    assert_eq!(steps.len(), 3);
    let (write, extend, readme) = (&steps[0], &steps[1], &steps[2]);
    let (diff, code) = s.env.json(&["plan", "diff", &id]);
    assert_eq!(code, 0, "{diff:#}");
    let files = files_of(&diff);
    let hunk_ids = |path: &str| -> Vec<Vec<String>> {
        files
            .iter()
            .find(|f| f["path"] == path)
            .unwrap_or_else(|| panic!("{path} not in {diff:#}"))["hunks"]
            .as_array()
            .unwrap()
            .iter()
            .map(|h| {
                h["decision_ids"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|d| d.as_str().unwrap().to_string())
                    .collect()
            })
            .collect()
    };
    // NOTES.md: "Release 1.2" from step `write`, "More" from step `extend`.
    assert_eq!(hunk_ids("NOTES.md"), [vec![write.clone(), extend.clone()]]);
    // README: one appended line from step `readme`.
    assert_eq!(hunk_ids("README"), [vec![readme.clone()]]);

}
