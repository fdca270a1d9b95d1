//! A step sees the steps before it (spec section 11, steps build on each other; section 25,
//! hot context): the executor prompt of a later step holds the earlier steps' recorded
//! outputs, the diff of the sandbox so far, and the files it names as the sandbox holds them
//! now — not as they were at the plan's base.

use serde_json::{Value, json};

use super::correction::{MODEL_ACTION, keyed, scripted_config, write_turns};
use super::lifecycle::{Setup, setup_with};
use crate::support::provider_server::{ProviderServer, Turn};

/// A decision recorded by the scripted strategist: `key` with `step`.
pub(crate) fn step_decision(key: &str, depends: &[&str], step: Value) -> String {
    json!({
        "key": key,
        "decision_type": "implementation_choice",
        "question": format!("What does {key} do?"),
        "chosen_option": step["instructions"],
        "confidence_score": 0.9,
        "rationale": "one step at a time",
        "depends_on": depends,
        "step": step,
    })
    .to_string()
}

/// The strategist's two turns recording `decisions`, then finishing.
pub(crate) fn strategist(decisions: &[String]) -> Vec<Turn> {
    let calls: Vec<(&str, &str)> = decisions
        .iter()
        .map(|d| ("record_decision", d.as_str()))
        .collect();
    vec![
        Turn::tools("", &calls, (50, 20)),
        Turn::tools("", &[("finish_strategy", r#"{"summary":"s"}"#)], (10, 5)),
    ]
}

/// `plan use` of the model action with the scripted model as strategist and executor under
/// `profile`: the setup, the answer and its exit code.
pub(crate) fn model_plan(server: &ProviderServer, profile: &str) -> (Setup, Value, i32) {
    let s = setup_with(MODEL_ACTION);
    scripted_config(&s.env, server);
    let (doc, code) = keyed(
        &s.env,
        &[
            "plan",
            "use",
            "--strategy-actor",
            "scripted/m",
            "--execution-actor",
            "scripted/m",
            "--automation-profile",
            profile,
            "local/notes",
            "app",
            "--arg",
            "version=1",
        ],
    );
    (s, doc, code)
}

#[test]
fn step_2s_executor_prompt_holds_what_step_1_wrote_and_said() {
    let d1 = step_decision(
        "d1",
        &[],
        json!({"instructions": "Write notes.txt", "expected_outputs": ["notes.txt"]}),
    );
    let d2 = step_decision(
        "d2",
        &["d1"],
        json!({"instructions": "Append a closing line to notes.txt"}),
    );
    let mut script = strategist(&[d1, d2]);
    script.push(Turn::tools(
        "",
        &[(
            "write_file",
            r#"{"path":"notes.txt","content":"first line from step one\n"}"#,
        )],
        (10, 5),
    ));
    script.push(Turn::text("Wrote notes.txt with its first line.", (10, 2)));
    script.extend(write_turns(
        "notes.txt",
        "first line from step one\nclosing\n",
    ));
    let server = ProviderServer::start(script);
    let (_s, doc, code) = model_plan(&server, "trusted");
    assert_eq!(code, 3, "stops at the apply gate: {doc:#}");
    assert_eq!(server.remaining(), 0);
    let requests = server.requests();
    let step1 = requests[2].body["messages"].to_string();
    assert!(
        !step1.contains("Earlier steps of this plan"),
        "step 1 has no earlier step: {step1}"
    );
    let step2 = requests[4].body["messages"].to_string();
    for needle in [
        // The file it names, read from the sandbox as it is now (it does not exist at the base).
        "### local/repo:notes.txt (as the sandbox holds it now)",
        "first line from step one",
        // Step 1's recorded output.
        "## Earlier steps of this plan (done)",
        "step 1 (d1): Write notes.txt",
        "recorded output: Wrote notes.txt with its first line.",
        // The diff so far.
        "## Changes so far (the sandbox against the plan's base)",
        "A local/repo:notes.txt (+1 -0)",
        "+first line from step one",
    ] {
        assert!(
            step2.contains(needle),
            "step 2's prompt lacks {needle:?}: {step2}"
        );
    }
}

#[test]
fn a_definition_an_earlier_step_added_is_shown_to_a_later_step_that_names_it() {
    let d1 = step_decision(
        "d1",
        &[],
        json!({"instructions": "Add a summary function to the library"}),
    );
    let d2 = step_decision(
        "d2",
        &["d1"],
        json!({"instructions": "Document what render_summary returns"}),
    );
    let mut script = strategist(&[d1, d2]);
    script.extend(write_turns(
        "src/lib.rs",
        "pub fn f() {}\n\npub fn render_summary(items: &[u32]) -> String {\n    format!(\"{} items counted\", items.len())\n}\n",
    ));
    script.extend(write_turns(
        "notes.txt",
        "render_summary returns a sentence\n",
    ));
    let server = ProviderServer::start(script);
    let (_s, doc, code) = model_plan(&server, "trusted");
    assert_eq!(code, 3, "stops at the apply gate: {doc:#}");
    assert_eq!(server.remaining(), 0);
    let step2 = server.requests()[4].body["messages"].to_string();
    // The definition step 1 added, read from the sandbox (the plan's base has none).
    for needle in [
        "## Named in this step",
        "render_summary in local/repo:src/lib.rs (as the sandbox holds it now)",
        "3: pub fn render_summary(items: &[u32]) -> String {",
        "4:     format!(",
    ] {
        assert!(
            step2.contains(needle),
            "step 2's prompt lacks {needle:?}: {step2}"
        );
    }
}
