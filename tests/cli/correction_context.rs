//! A correction's strategist sees what the original attempt did (spec section 27, "Revert
//! flow"; section 25): it is offered the read-only tools the first Strategize had, and its
//! prompt holds the code context, the corrected decision's step instructions and expected
//! outputs, the diff the original attempt made, and why it is corrected — the guidance, and
//! the hunks rejected in review with their reasons.

use serde_json::{Value, json};

use super::correction::{by_key, keyed, store, write_turns};
use super::execute_context::{model_plan, step_decision, strategist};
use crate::support::provider_server::{ProviderServer, Turn};

fn tool_names(body: &Value) -> Vec<String> {
    body["tools"]
        .as_array()
        .unwrap_or_else(|| panic!("no tools offered: {body:#}"))
        .iter()
        .map(|t| t["function"]["name"].as_str().unwrap().to_string())
        .collect()
}

#[test]
fn a_revert_corrections_strategist_gets_the_read_tools_the_original_step_its_diff_and_the_rejection()
 {
    let d1 = step_decision("d1", &[], json!({"instructions": "Write a.txt"}));
    let d2 = step_decision(
        "d2",
        &["d1"],
        json!({"instructions": "Write b.txt with the second value", "expected_outputs": ["b.txt"]}),
    );
    let mut script = strategist(&[d1, d2]);
    script.extend(write_turns("a.txt", "one\n"));
    script.extend(write_turns("b.txt", "second value in lower case\n"));
    // The correction: the strategist reads b.txt at the base (absent), re-decides d2 and the
    // executor re-runs it.
    let new2 = step_decision(
        "d2",
        &["d1"],
        json!({"instructions": "Write b.txt in capitals", "expected_outputs": ["b.txt"]}),
    );
    script.push(Turn::tools(
        "",
        &[("list_files", r#"{"pattern":"**/*"}"#)],
        (10, 5),
    ));
    script.extend(strategist(&[new2]));
    script.extend(write_turns("b.txt", "SECOND VALUE\n"));
    let server = ProviderServer::start(script);
    let (s, doc, code) = model_plan(&server, "trusted");
    assert_eq!(code, 3, "stops at the apply gate: {doc:#}");
    let id = doc["data"]["plan_id"].as_str().unwrap().to_string();
    let (doc, code) = keyed(
        &s.env,
        &[
            "plan",
            "review",
            &id,
            "--reject",
            "b.txt",
            "--reason",
            "values are written in capitals here",
        ],
    );
    assert_eq!(code, 0, "{doc:#}");
    let d2 = by_key(&store(&s.env), &id.parse().unwrap())["d2"]
        .decision_id
        .to_string();
    let (doc, code) = keyed(
        &s.env,
        &[
            "plan",
            "correct",
            "--mode",
            "revert",
            "-g",
            "use capitals",
            "--yes",
            &d2,
        ],
    );
    assert_eq!(code, 0, "{doc:#}");
    assert_eq!(server.remaining(), 0, "every scripted turn was used");
    let requests = server.requests();
    let first = &requests[6].body;
    let tools = tool_names(first);
    for t in [
        "record_decision",
        "finish_strategy",
        "read_file",
        "list_files",
        "search_code",
        "find_definition",
    ] {
        assert!(tools.iter().any(|n| n == t), "{t} is offered: {tools:?}");
    }
    assert!(
        !tools.iter().any(|n| n == "write_file"),
        "no write tool: {tools:?}"
    );
    let prompt = first["messages"].to_string();
    for needle in [
        // The corrected decision's step.
        "step instructions: Write b.txt with the second value",
        "expected outputs: b.txt",
        "recorded output: done",
        // Why it is corrected.
        "Guidance from the user: use capitals",
        "Rejected in review: local/repo:b.txt",
        "reason: values are written in capitals here",
        // What the original attempt changed: d2's hunk, not d1's.
        "## What the original attempt changed",
        "+second value in lower case",
        // The code context.
        "## Project overview",
    ] {
        assert!(
            prompt.contains(needle),
            "the prompt lacks {needle:?}: {prompt}"
        );
    }
    assert_eq!(
        prompt.matches("use capitals").count(),
        1,
        "the guidance is given once: {prompt}"
    );
    assert!(
        !prompt.contains("+one"),
        "d1's change is not d2's: {prompt}"
    );
    // The read call ran against the plan's base.
    let after_read = requests[7].body["messages"].to_string();
    assert!(after_read.contains("src/lib.rs"), "{after_read}");
}
