//! Expected outputs are checked (spec section 11, "expected outputs"): after a step is done,
//! every path in its decision's `expected_outputs` must exist in the sandbox (or, for a
//! resource no sandbox holds, at the plan's base). A missing one fails the step
//! (`EXPECTED_OUTPUT_MISSING`, naming the file), which is then retried, revised or escalated
//! as the automation profile says, like any step failure; a missing one the strategist
//! marked optional (`optional_outputs`) is only a warning in the step's output. Entries that
//! are prose rather than paths (they hold spaces, or read as no path) are not checked.

use serde_json::{Value, json};

use super::step_end::StepEnd;
use crate::context::execute::looks_like_path;
use crate::context::so_far::inside;
use crate::domain::Plan;
use crate::domain::decision::Decision;
use crate::lifecycle::Lifecycle;
use crate::sandbox::{Sandbox, Sandboxes};

/// The error code of a step that did not leave an expected output.
pub const MISSING: &str = "EXPECTED_OUTPUT_MISSING";

/// `ended` with the step's expected outputs checked: a done step missing a required output
/// becomes a failure; one missing only optional outputs carries `warnings`.
pub(crate) fn check(
    engine: &Lifecycle,
    sandboxes: &Sandboxes,
    plan: &Plan,
    decision: &Decision,
    ended: StepEnd,
) -> StepEnd {
    let StepEnd::Done { output } = ended else {
        return ended;
    };
    let Some(step) = &decision.step else {
        return StepEnd::Done { output };
    };
    let active = sandboxes
        .active(engine.store(), &plan.plan_id)
        .unwrap_or_default();
    let missing = |entries: &[String]| -> Vec<String> {
        entries
            .iter()
            .filter_map(|e| as_path(e))
            .filter(|p| !exists(engine, plan, &active, p))
            .map(str::to_string)
            .collect()
    };
    let optional = |p: &String| step.optional_outputs.iter().any(|o| o.trim() == p);
    let (warned, required): (Vec<String>, Vec<String>) = missing(&step.expected_outputs)
        .into_iter()
        .partition(optional);
    let mut warned = warned;
    for p in missing(&step.optional_outputs) {
        if !warned.contains(&p) {
            warned.push(p);
        }
    }
    if let Some(first) = required.first() {
        return StepEnd::Failed {
            code: MISSING.into(),
            message: failure_message(first, &required),
            output,
        };
    }
    StepEnd::Done {
        output: with_warnings(output, &warned),
    }
}

fn failure_message(first: &str, all: &[String]) -> String {
    let others = if all.len() > 1 {
        format!(" (also missing: {})", all[1..].join(", "))
    } else {
        String::new()
    };
    format!(
        "the step did not leave its expected output `{first}` in the sandbox{others}; its decision lists it in expected_outputs"
    )
}

fn with_warnings(output: Value, missing: &[String]) -> Value {
    if missing.is_empty() {
        return output;
    }
    let warnings: Vec<String> = missing
        .iter()
        .map(|p| format!("optional output `{p}` was not produced"))
        .collect();
    let mut out = match output {
        Value::Object(m) => Value::Object(m),
        other => json!({"result": other}),
    };
    out["warnings"] = json!(warnings);
    out
}

/// The path an entry names (`./` and a trailing `/` dropped), or `None` for prose.
fn as_path(entry: &str) -> Option<&str> {
    let p = entry.trim().trim_start_matches("./");
    let bare = p.trim_end_matches('/');
    (!p.is_empty() && !p.contains(char::is_whitespace) && looks_like_path(p)).then_some(bare)
}

/// Whether `path` (or `resource:path`) exists in a sandbox of the plan, or at the plan's
/// base in a resource no sandbox holds.
fn exists(engine: &Lifecycle, plan: &Plan, active: &[Sandbox], path: &str) -> bool {
    let (only, rel) = match path.split_once(':') {
        Some((r, p)) if active.iter().any(|sb| sb.record.resource_name == r) => (Some(r), p),
        _ => (None, path),
    };
    let holds = |sb: &&Sandbox| only.is_none_or(|r| sb.record.resource_name == r);
    if active
        .iter()
        .filter(holds)
        .any(|sb| inside(sb.work_dir(), rel).is_some_and(|p| p.exists()))
    {
        return true;
    }
    at_base(engine, plan, active, rel)
}

/// Whether `path` exists at the plan's base in a resource no sandbox holds.
fn at_base(engine: &Lifecycle, plan: &Plan, active: &[Sandbox], path: &str) -> bool {
    let projects: Vec<String> = plan
        .project_links
        .iter()
        .map(|l| l.project_name.clone())
        .collect();
    let Ok(policy) =
        crate::context::policy::for_plan(engine.store(), &plan.plan_id, &projects, "execute")
    else {
        return false;
    };
    let Ok((scopes, _)) = crate::context::strategize::scopes(
        engine.paths(),
        engine.store(),
        &plan.plan_id,
        &policy,
    ) else {
        return false;
    };
    scopes
        .iter()
        .filter(|s| !active.iter().any(|sb| sb.record.resource_name == s.resource))
        .any(|s| s.view.read(path).is_some())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prose_entries_are_not_paths() {
        assert_eq!(as_path("./src/a.rs"), Some("src/a.rs"));
        assert_eq!(as_path("docs/"), Some("docs"));
        assert_eq!(as_path("local/repo:notes.txt"), Some("local/repo:notes.txt"));
        assert_eq!(as_path("notes.txt updated with the release"), None);
        assert_eq!(as_path("a passing test suite"), None);
    }

    #[test]
    fn a_missing_output_is_named_and_warnings_keep_the_output() {
        let m = failure_message("b.txt", &["b.txt".into(), "c.txt".into()]);
        assert!(m.contains("`b.txt`") && m.contains("also missing: c.txt"), "{m}");
        let out = with_warnings(json!({"answer": "done"}), &["c.txt".into()]);
        assert_eq!(out["answer"], "done");
        assert_eq!(out["warnings"][0], "optional output `c.txt` was not produced");
    }
}
