//! What a correction's model strategist is given besides `record_decision` and
//! `finish_strategy` (spec section 27, "Revert flow"; section 25): the read-only tools the
//! first Strategize had (`read_file`, `list_files`, the `code_intelligence` skill over the
//! plan's bases, and its skills' read-only tools), and a prompt holding the original attempt
//! of the decisions it re-decides ([`crate::context::correction`]: their steps, why they are
//! corrected, what they changed) and the code context for the task, the guidance and the
//! corrected step, within the strategize view's `hot-max-tokens` (half each at most).

use std::collections::HashSet;

use serde_json::{Value, json};

use crate::context::correction::{Corrected, Original, Rejected};
use crate::context::policy::{self, Resolved};
use crate::context::strategize::{self, BaseTools};
use crate::context::{Budget, Hot, so_far, tiers};
use crate::domain::decision::Decision;
use crate::domain::{Id, Plan};
use crate::lifecycle::Lifecycle;
use crate::review::{Mark, Review};
use crate::sandbox::diff::FileDiff;

/// The strategist's briefing: the text for its prompt, its read-only tools and what it saw.
pub(crate) struct Briefing {
    /// The prompt's sections: the original attempt, then the code context.
    pub text: String,
    /// `read_file`, `list_files` and `code_intelligence` over the plan's bases.
    pub tools: BaseTools,
    /// For the correcting decisions' context snapshot.
    pub snapshot: Value,
}

/// What the decisions being re-decided did.
pub(crate) struct Redo<'a> {
    /// The affected keyed decisions, as the original attempt had them.
    pub keyed: &'a [&'a Decision],
    /// The decision corrected.
    pub target: &'a Decision,
    /// Every affected decision.
    pub affected: &'a HashSet<Id>,
    /// The user's guidance.
    pub guidance: &'a str,
}

/// Gathers the briefing; parts that cannot be read are left out (a policy that cannot be
/// resolved leaves only the original attempt, without code context or base tools).
pub(crate) fn gather(engine: &Lifecycle, plan: &Plan, redo: &Redo<'_>) -> Briefing {
    let projects: Vec<String> = plan
        .project_links
        .iter()
        .map(|l| l.project_name.clone())
        .collect();
    let policy = policy::for_plan(engine.store(), &plan.plan_id, &projects, "strategize").ok();
    let budget = policy.as_ref().map_or(6000, |p| p.hot_max_tokens);
    let mut b = Budget::new(budget / 2);
    crate::context::correction::push(&mut b, &original(engine, plan, redo));
    let original = b.finish();
    let Some(policy) = policy else {
        return Briefing {
            text: original.text.clone(),
            tools: BaseTools::new(Vec::new()),
            snapshot: json!({"original": original.snapshot()}),
        };
    };
    let (code, tools) = code_context(engine, plan, redo, &policy, budget - original.tokens);
    Briefing {
        text: format!("{}\n{}", original.text, code.text),
        tools,
        snapshot: json!({
            "original": original.snapshot(),
            "hot_context": code.snapshot(),
            "context_policy": policy,
        }),
    }
}

/// The strategist's initial context (overview, files found for the words, promoted
/// decisions) for the task, the guidance and the corrected steps, within `left` tokens; and
/// the read-only tools over the same bases.
fn code_context(
    engine: &Lifecycle,
    plan: &Plan,
    redo: &Redo<'_>,
    policy: &Resolved,
    left: u64,
) -> (Hot, BaseTools) {
    let Ok((scopes, _)) = strategize::scopes(engine.paths(), engine.store(), &plan.plan_id, policy)
    else {
        return (Hot::default(), BaseTools::new(Vec::new()));
    };
    let mut words: Vec<String> = [&plan.description, &plan.definition_of_done]
        .into_iter()
        .flatten()
        .cloned()
        .collect();
    words.push(redo.guidance.to_string());
    for d in redo.keyed {
        words.push(d.chosen_option.clone());
        if let Some(s) = &d.step {
            words.push(s.instructions.clone());
            words.extend(s.expected_outputs.iter().cloned());
        }
    }
    let memory = tiers::read(engine.store(), &plan.plan_id, None, policy);
    let share = Resolved {
        hot_max_tokens: left,
        ..policy.clone()
    };
    let hot = strategize::initial_context(&scopes, &words.join("\n"), &share, &memory);
    (hot, BaseTools::new(scopes))
}

/// The original attempt of the re-decided decisions: their steps and recorded outputs, the
/// hunks they produced and those rejected in review.
fn original(engine: &Lifecycle, plan: &Plan, redo: &Redo<'_>) -> Original {
    let ids: HashSet<String> = redo.affected.iter().map(Id::to_string).collect();
    let review = crate::lifecycle::trees::reviewed_trees(engine, &plan.plan_id)
        .ok()
        .and_then(|trees| {
            crate::review::load(engine.store(), &engine.sandboxes(), plan, &trees).ok()
        });
    let mut keyed: Vec<&&Decision> = redo.keyed.iter().collect();
    keyed.sort_by_key(|d| d.decision_id != redo.target.decision_id);
    Original {
        decisions: keyed.iter().map(|d| corrected(engine, plan, d)).collect(),
        rejected: review.as_ref().map(|r| rejected(r, &ids)).unwrap_or_default(),
        diff: review.as_ref().map(|r| produced(r, &ids)).unwrap_or_default(),
    }
}

fn corrected(engine: &Lifecycle, plan: &Plan, d: &Decision) -> Corrected {
    let outcome = engine
        .store()
        .plan_steps(&plan.plan_id)
        .unwrap_or_default()
        .into_iter()
        .find(|s| s.decision_id == d.decision_id)
        .and_then(|s| s.output)
        .and_then(|o| serde_json::from_str(&o).ok())
        .map(|o| so_far::outcome(&o))
        .unwrap_or_default();
    let step = d.step.clone().unwrap_or_default();
    Corrected {
        key: d.context_snapshot["key"]
            .as_str()
            .unwrap_or_default()
            .to_string(),
        choice: format!(
            "{} -> {}",
            d.question.as_deref().unwrap_or_default(),
            d.chosen_option
        ),
        instructions: d.step.as_ref().map(|s| s.instructions.clone()),
        expected_outputs: step.expected_outputs,
        optional_outputs: step.optional_outputs,
        outcome,
    }
}

fn by_them(decision_ids: &[String], ids: &HashSet<String>) -> bool {
    decision_ids.iter().any(|d| ids.contains(d))
}

/// The hunks the affected decisions produced, per resource.
fn produced(review: &Review, ids: &HashSet<String>) -> Vec<(String, Vec<FileDiff>)> {
    let mut out: Vec<(String, Vec<FileDiff>)> = Vec::new();
    for f in &review.files {
        let hunks: Vec<_> = f
            .diff
            .hunks
            .iter()
            .filter(|h| by_them(&h.decision_ids, ids))
            .cloned()
            .collect();
        if hunks.is_empty() {
            continue;
        }
        let diff = FileDiff {
            hunks,
            ..f.diff.clone()
        };
        match out.iter_mut().find(|(r, _)| *r == f.resource) {
            Some((_, files)) => files.push(diff),
            None => out.push((f.resource.clone(), vec![diff])),
        }
    }
    out
}

/// The items rejected in review that the affected decisions produced (or that no decision
/// is known to have produced).
fn rejected(review: &Review, ids: &HashSet<String>) -> Vec<Rejected> {
    review
        .items()
        .filter(|(_, i)| i.mark == Mark::Rejected)
        .filter(|(_, i)| i.decision_ids.is_empty() || by_them(&i.decision_ids, ids))
        .map(|(f, i)| Rejected {
            resource: f.resource.clone(),
            path: f.path.clone(),
            hunk: f
                .diff
                .hunks
                .iter()
                .find(|h| h.id.as_deref() == Some(i.id.as_str()))
                .cloned(),
            reason: i.reason.clone(),
        })
        .collect()
}
