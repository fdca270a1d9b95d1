//! `builtin/checklist-strategist`: the offline strategist. It turns the
//! action's `script` steps, or else the items of the definition of done, into ordered
//! decisions: one step each, with dependencies from `depends-on` (default: the step before).
//! No model is called, so the result depends only on the plan.

use serde_json::{Value, json};

use crate::actors::prompts::{DecisionDraft, StepDraft};
use crate::registry::actions::ScriptStep;

/// Where a checklist came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    /// The action's `script`.
    Script,
    /// The items of the definition of done.
    DefinitionOfDone,
}

/// A checklist: the drafts in order, and for each the script step it came from (as JSON, for
/// the script executor) when the source is the script.
#[derive(Debug, Clone, PartialEq)]
pub struct Checklist {
    /// Where it came from.
    pub source: Source,
    /// One draft per step.
    pub drafts: Vec<DecisionDraft>,
    /// The script step of each draft (same order), `None` for definition-of-done items.
    pub script_steps: Vec<Option<Value>>,
}

/// The items of a definition of done: one per non-empty line, without list markers
/// (`-`, `*`, `+`, `1.`, `1)`, `[ ]`, `[x]`).
pub fn done_items(text: &str) -> Vec<String> {
    text.lines()
        .map(|l| {
            let mut t = l.trim();
            for marker in ["- ", "* ", "+ "] {
                if let Some(rest) = t.strip_prefix(marker) {
                    t = rest.trim_start();
                }
            }
            let digits = t.chars().take_while(char::is_ascii_digit).count();
            if digits > 0
                && let Some(rest) = t[digits..]
                    .strip_prefix(". ")
                    .or_else(|| t[digits..].strip_prefix(") "))
            {
                t = rest.trim_start();
            }
            for box_ in ["[ ] ", "[x] ", "[X] "] {
                if let Some(rest) = t.strip_prefix(box_) {
                    t = rest.trim_start();
                }
            }
            t.to_string()
        })
        .filter(|t| !t.is_empty())
        .collect()
}

fn describe(step: &ScriptStep) -> String {
    if let Some(cmd) = &step.run {
        format!("run `{cmd}`")
    } else if let Some(tool) = &step.tool {
        let args = step
            .args
            .as_ref()
            .map(|a| Value::Object(a.clone()).to_string())
            .unwrap_or_else(|| "{}".into());
        format!("call tool {tool} with {args}")
    } else if let Some(spawn) = &step.spawn {
        format!("spawn a child plan of {}", spawn.action)
    } else {
        "nothing".into()
    }
}

/// Builds the checklist of a plan: from `script` when it has steps, else from the definition
/// of done (or the description when there is no definition of done).
pub fn build(
    script: Option<&[ScriptStep]>,
    definition_of_done: &str,
    description: &str,
) -> Checklist {
    match script.filter(|s| !s.is_empty()) {
        Some(steps) => from_script(steps),
        None => from_definition_of_done(definition_of_done, description),
    }
}

/// A group's key is `parallel:LABEL`, so a group may share its label with a step name.
fn group_key(label: &str) -> String {
    format!("parallel:{label}")
}

/// The keys step `i` depends on: its `depends-on`, or the step before it; a dependency on a
/// member of a parallel group is a dependency on the group, and a member never depends on its
/// own group.
fn deps_of(steps: &[ScriptStep], i: usize) -> Vec<String> {
    let group_of = |name: &str| -> Option<String> {
        steps
            .iter()
            .find(|s| s.name == name)
            .and_then(|s| s.parallel_group.as_deref())
            .map(group_key)
    };
    let raw = match &steps[i].depends_on {
        Some(d) => d.clone(),
        None if i > 0 => vec![steps[i - 1].name.clone()],
        None => Vec::new(),
    };
    let own = steps[i].parallel_group.as_deref().map(group_key);
    let mut out: Vec<String> = Vec::new();
    for d in raw {
        let key = group_of(&d).unwrap_or(d);
        if Some(&key) != own.as_ref() && !out.contains(&key) {
            out.push(key);
        }
    }
    out
}

/// The checklist of a script. Spawn steps sharing a `parallel-group` become one
/// `subplan_parallel_spawn` decision (the executable step, at the position of the group's
/// first member) with one `subplan_spawn` decision per member under it; dependencies on a
/// member are dependencies on its group.
fn from_script(steps: &[ScriptStep]) -> Checklist {
    let mut drafts = Vec::new();
    let mut raw = Vec::new();
    let mut emitted: Vec<&str> = Vec::new();
    for (i, step) in steps.iter().enumerate() {
        let question = format!("Script step {} of {}: {}", i + 1, steps.len(), step.name);
        if let Some(group) = step.parallel_group.as_deref() {
            if !emitted.contains(&group) {
                emitted.push(group);
                let (draft, members) = group_draft(steps, group);
                drafts.push(draft);
                raw.push(Some(json!({
                    "parallel_group": group,
                    "members": members,
                })));
            }
            drafts.push(DecisionDraft {
                key: step.name.clone(),
                decision_type: "subplan_spawn".into(),
                question,
                chosen_option: describe(step),
                alternatives_considered: Vec::new(),
                confidence_score: Some(1.0),
                rationale: format!("the action's script lists this step in parallel group {group}"),
                parent: Some(group_key(group)),
                depends_on: Vec::new(),
                step: None,
            });
            raw.push(Some(json!(step)));
            continue;
        }
        let is_spawn = step.spawn.is_some();
        drafts.push(DecisionDraft {
            key: step.name.clone(),
            decision_type: if is_spawn {
                "subplan_spawn".into()
            } else {
                "implementation_choice".into()
            },
            question,
            chosen_option: describe(step),
            alternatives_considered: Vec::new(),
            confidence_score: Some(1.0),
            rationale: "the action's script lists this step; builtin/checklist-strategist follows the script as written".into(),
            parent: None,
            depends_on: deps_of(steps, i),
            step: Some(StepDraft {
                instructions: describe(step),
                expected_outputs: Vec::new(),
                ..Default::default()
            }),
        });
        raw.push(Some(json!(step)));
    }
    Checklist {
        source: Source::Script,
        drafts,
        script_steps: raw,
    }
}

/// The `subplan_parallel_spawn` decision of parallel group `group`, depending on what its
/// members depend on, and the names of its members.
fn group_draft(steps: &[ScriptStep], group: &str) -> (DecisionDraft, Vec<String>) {
    let members: Vec<(usize, &ScriptStep)> = steps
        .iter()
        .enumerate()
        .filter(|(_, s)| s.parallel_group.as_deref() == Some(group))
        .collect();
    let mut depends_on: Vec<String> = Vec::new();
    for (j, _) in &members {
        for d in deps_of(steps, *j) {
            if !depends_on.contains(&d) {
                depends_on.push(d);
            }
        }
    }
    let actions: Vec<&str> = members
        .iter()
        .map(|(_, s)| s.spawn.as_ref().map(|sp| sp.action.as_str()).unwrap_or("?"))
        .collect();
    let what = format!(
        "spawn {} child plans in parallel: {}",
        members.len(),
        actions.join(", ")
    );
    let draft = DecisionDraft {
        key: group_key(group),
        decision_type: "subplan_parallel_spawn".into(),
        question: format!("Parallel group {group} of the script"),
        chosen_option: what.clone(),
        alternatives_considered: Vec::new(),
        confidence_score: Some(1.0),
        rationale: "the action's script puts these spawn steps in one parallel group; builtin/checklist-strategist follows the script as written".into(),
        parent: None,
        depends_on,
        step: Some(StepDraft {
            instructions: what,
            expected_outputs: Vec::new(),
            ..Default::default()
        }),
    };
    (draft, members.iter().map(|(_, s)| s.name.clone()).collect())
}

/// The checklist of an action without a script: one step per item of the definition of done
/// (or the description when there is no definition of done), each after the one before.
fn from_definition_of_done(definition_of_done: &str, description: &str) -> Checklist {
    let mut items = done_items(definition_of_done);
    if items.is_empty() && !description.trim().is_empty() {
        items.push(description.trim().to_string());
    }
    let n = items.len();
    let drafts = items
        .iter()
        .enumerate()
        .map(|(i, item)| DecisionDraft {
            key: format!("item-{}", i + 1),
            decision_type: "implementation_choice".into(),
            question: format!("Definition of done item {} of {n}", i + 1),
            chosen_option: item.clone(),
            alternatives_considered: Vec::new(),
            confidence_score: Some(1.0),
            rationale: "the action has no script; builtin/checklist-strategist makes each item of the definition of done one step".into(),
            parent: None,
            depends_on: if i > 0 {
                vec![format!("item-{i}")]
            } else {
                Vec::new()
            },
            step: Some(StepDraft {
                instructions: item.clone(),
                expected_outputs: Vec::new(),
                ..Default::default()
            }),
        })
        .collect();
    Checklist {
        source: Source::DefinitionOfDone,
        drafts,
        script_steps: vec![None; n],
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn step(name: &str, run: &str, depends: Option<&[&str]>) -> ScriptStep {
        ScriptStep {
            name: name.into(),
            run: Some(run.into()),
            shell: None,
            tool: None,
            args: None,
            spawn: None,
            resource: None,
            depends_on: depends.map(|d| d.iter().map(|s| s.to_string()).collect()),
            parallel_group: None,
        }
    }

    #[test]
    fn script_steps_become_one_decision_each_depending_on_the_step_before_by_default() {
        let steps = [
            step("fmt", "cargo fmt", None),
            step("gen", "make gen", None),
            step("docs", "make docs", Some(&["fmt"])),
        ];
        let c = build(Some(&steps), "done", "desc");
        assert_eq!(c.source, Source::Script);
        let keys: Vec<&str> = c.drafts.iter().map(|d| d.key.as_str()).collect();
        assert_eq!(keys, ["fmt", "gen", "docs"]);
        assert!(c.drafts[0].depends_on.is_empty());
        assert_eq!(c.drafts[1].depends_on, ["fmt"]);
        assert_eq!(
            c.drafts[2].depends_on,
            ["fmt"],
            "depends-on replaces the default"
        );
        assert_eq!(c.drafts[0].chosen_option, "run `cargo fmt`");
        assert_eq!(c.script_steps[2].as_ref().unwrap()["run"], "make docs");
        assert!(
            c.drafts
                .iter()
                .all(|d| d.alternatives_considered.is_empty())
        );
    }

    #[test]
    fn spawn_steps_of_one_parallel_group_become_one_group_decision_with_a_spawn_under_it_each() {
        let spawn = |name: &str, action: &str, group: Option<&str>| ScriptStep {
            name: name.into(),
            run: None,
            shell: None,
            tool: None,
            args: None,
            spawn: Some(crate::registry::actions::SpawnSpec {
                action: action.into(),
                args: Default::default(),
            }),
            resource: None,
            depends_on: None,
            parallel_group: group.map(str::to_string),
        };
        let steps = [
            step("prep", "make prep", None),
            spawn("a", "local/a", Some("both")),
            spawn("b", "local/b", Some("both")),
            step("after", "make after", None),
            spawn("c", "local/c", None),
        ];
        let c = build(Some(&steps), "done", "desc");
        let keys: Vec<(&str, &str)> = c
            .drafts
            .iter()
            .map(|d| (d.key.as_str(), d.decision_type.as_str()))
            .collect();
        assert_eq!(
            keys,
            [
                ("prep", "implementation_choice"),
                ("parallel:both", "subplan_parallel_spawn"),
                ("a", "subplan_spawn"),
                ("b", "subplan_spawn"),
                ("after", "implementation_choice"),
                ("c", "subplan_spawn"),
            ]
        );
        assert_eq!(c.drafts[1].depends_on, ["prep"]);
        assert!(
            c.drafts[1].step.is_some(),
            "the group is the executable step"
        );
        assert!(c.drafts[2].step.is_none() && c.drafts[3].step.is_none());
        assert_eq!(c.drafts[2].parent.as_deref(), Some("parallel:both"));
        assert_eq!(
            c.drafts[4].depends_on,
            ["parallel:both"],
            "a step after a member depends on its group"
        );
        assert_eq!(c.drafts[5].depends_on, ["after"]);
        assert!(
            c.drafts[5].step.is_some(),
            "a spawn outside a group is its own step"
        );
        assert_eq!(
            c.script_steps[1].as_ref().unwrap()["members"],
            json!(["a", "b"])
        );
    }

    #[test]
    fn without_a_script_each_definition_of_done_item_is_a_step() {
        let c = build(
            None,
            "- tests pass\n\n2. docs updated\n* [x] changelog entry\n",
            "d",
        );
        assert_eq!(c.source, Source::DefinitionOfDone);
        let items: Vec<&str> = c.drafts.iter().map(|d| d.chosen_option.as_str()).collect();
        assert_eq!(items, ["tests pass", "docs updated", "changelog entry"]);
        assert_eq!(c.drafts[2].depends_on, ["item-2"]);
        assert!(c.script_steps.iter().all(Option::is_none));
    }

    #[test]
    fn an_empty_definition_of_done_falls_back_to_the_description() {
        let c = build(Some(&[]), "  ", "Format the code");
        assert_eq!(c.drafts.len(), 1);
        assert_eq!(c.drafts[0].chosen_option, "Format the code");
    }
}
