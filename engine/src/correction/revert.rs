//! `plan correct --mode revert` (spec 27 "Revert flow").
//!
//! 1. The affected set is computed ([`super::impact`]); an applied plan is refused.
//! 2. The strategy actor re-decides only the affected subtree, before anything is written:
//!    `builtin/checklist-strategist` re-derives the affected steps from the action (the
//!    guidance is recorded on them); a model strategist gets a prompt with the preserved
//!    upstream decisions, the invariants, the corrected decision and the guidance, and what
//!    the original attempt did with the code context ([`super::briefing`]), may read the
//!    project with the first Strategize's read-only tools, and records replacements with
//!    `record_decision`. The root `prompt_definition` and
//!    `invariant_enforced` decisions are re-made by the engine: a corrected root carries the
//!    guidance (and everything is redone); a corrected invariant stops being enforced for
//!    this plan (the correcting decision records that).
//! 3. One transaction: the new decisions (all `is_correction`, `corrects_decision_id` = the
//!    corrected one, the guidance as `correction_reason`), the affected ones superseded, a
//!    `correction_attempts` row with the old attempt's steps and final checkpoint, the next
//!    attempt (`begin_attempt`), and the new step list: steps before the first affected one
//!    stay done, affected ones are pending, unaffected later ones are pending with the
//!    checkpoints of their earlier run to replay. The first re-run step is marked `running`
//!    at the old start checkpoint, so a crash before the rollback is repaired by Execute's
//!    resume.
//! 4. The sandboxes roll back to the start of the first affected step; then the plan is
//!    driven: Execute re-runs the affected steps and replays the others
//!    ([`super::replay`]), then the plan stops at the Apply gate as its profile says.

use std::collections::{HashMap, HashSet};
use std::sync::Mutex;

use jiff::Timestamp;
use serde::Serialize;
use serde_json::{Value, json};

use super::impact::{self, Impact};
use crate::actors::messages::ToolSpec;
use crate::actors::prompts::{self, DecisionDraft, Role, StrategyDraft};
use crate::actors::runtime::{Stop, ToolHost, ToolOutcome};
use crate::domain::approval::ApprovalStatus;
use crate::domain::decision::{Decision, DecisionType, Step};
use crate::domain::event::StateChanged;
use crate::domain::event::state::Correction;
use crate::domain::{CorrectionMode, Id, Next, Phase, Plan, ProcessingState};
use crate::events::EventKind;
use crate::lease;
use crate::lifecycle::driven::Driven;
use crate::lifecycle::driver::{self, Goal};
use crate::lifecycle::state::{self, commit};
use crate::lifecycle::{Lifecycle, RunError, checklist, execute};
use crate::registry::actors::CHECKLIST_STRATEGIST;
use crate::store::corrections::{
    AttemptStatus, CorrectionAttempt, insert_attempt_in, supersede_in,
};
use crate::store::decisions::{depend_in, insert_in};
use crate::store::lifecycle_run::{PlanStep, StepStatus, replace_step_rows, save_step};

/// What a revert did.
#[derive(Debug, Clone, Serialize, serde::Deserialize, schemars::JsonSchema)]
pub struct Reverted {
    /// The attempt recorded.
    pub attempt: CorrectionAttempt,
    /// The impact it acted on.
    pub impact: Impact,
    /// The correcting decision.
    pub correcting: Decision,
    /// Every new decision (the correcting one first).
    pub new_decisions: Vec<Decision>,
    /// What the sandbox rollback did (`null` when nothing had run).
    pub rollback: Value,
    /// The result of driving the plan afterwards.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub driven: Option<Driven>,
}

/// The strategist's answer: new decisions, their dependencies, and which new decision
/// replaces which old one.
#[derive(Debug, Default)]
struct Redecided {
    decisions: Vec<Decision>,
    deps: Vec<(Id, Id)>,
    replaces: HashMap<Id, Id>,
    correcting: Option<Id>,
    snapshot: Value,
}

fn key_of(d: &Decision) -> Option<String> {
    d.context_snapshot
        .get("key")
        .and_then(Value::as_str)
        .map(str::to_string)
}

fn wrong(plan: &Plan, message: String, hints: Vec<Next>) -> RunError {
    RunError::WrongState {
        phase: plan.phase(),
        state: plan.state(),
        message,
        hints,
    }
}

/// Checks that the plan can be reverted now.
///
/// # Errors
/// [`RunError::WrongState`] naming what fits instead.
pub fn check_revertable(plan: &Plan, decision: &Decision) -> Result<(), RunError> {
    let id = plan.plan_id;
    if plan.phase() == Phase::Applied {
        return Err(wrong(
            plan,
            format!(
                "plan {id} is applied: its changes are committed to the project, so a revert cannot undo them"
            ),
            vec![Next::Correct {
                mode: CorrectionMode::Append,
                decision: decision.decision_id,
            }],
        ));
    }
    if plan.state() == ProcessingState::Cancelled {
        return Err(wrong(
            plan,
            format!("plan {id} is cancelled; a cancelled plan does not run again"),
            vec![Next::PlanStatus { plan: id }],
        ));
    }
    if plan.phase() == Phase::Strategize && plan.state() != ProcessingState::Complete {
        return Err(wrong(
            plan,
            format!(
                "plan {id} is at strategize/{}: its decision tree is not finished yet",
                plan.state()
            ),
            vec![Next::PlanStatus { plan: id }, Next::ListApprovals],
        ));
    }
    if plan.state() == ProcessingState::Processing {
        return Err(wrong(
            plan,
            format!("plan {id} is running; correct it once it stops"),
            vec![Next::CancelPlan { plan: id }],
        ));
    }
    if let Some(by) = decision.superseded_by {
        return Err(RunError::Invalid(format!(
            "decision {} was already superseded by {by}; correct that decision instead",
            decision.decision_id
        )));
    }
    Ok(())
}

/// A new decision copying the identity-free fields of `old`, for the next attempt.
fn successor(
    old: &Decision,
    attempt: u32,
    target: &Id,
    guidance: &str,
    now: Timestamp,
) -> Decision {
    let mut d = old.clone();
    d.decision_id = Id::generate();
    d.sequence_number = 0;
    d.attempt = attempt;
    d.is_correction = true;
    d.corrects_decision_id = Some(*target);
    d.correction_reason = Some(guidance.to_string());
    d.superseded_by = None;
    d.created_at = now;
    d
}

/// Re-makes the root and invariants the engine owns; returns the ids that stand for them
/// afterwards (the current root, the invariants still enforced).
fn structural(
    plan_decisions: &[Decision],
    affected: &HashSet<Id>,
    target: &Decision,
    attempt: u32,
    guidance: &str,
    out: &mut Redecided,
) -> (Option<Id>, Vec<Id>) {
    let now = Timestamp::now();
    let current: Vec<&Decision> = plan_decisions.iter().filter(|d| d.is_current()).collect();
    let mut root = current
        .iter()
        .find(|d| d.decision_type == DecisionType::PromptDefinition)
        .map(|d| d.decision_id);
    if let Some(old) = current.iter().find(|d| {
        d.decision_type == DecisionType::PromptDefinition && affected.contains(&d.decision_id)
    }) {
        let mut d = successor(old, attempt, &target.decision_id, guidance, now);
        d.chosen_option = format!("{}\n\nCorrection: {guidance}", old.chosen_option);
        d.rationale = Some(format!("the user corrected the plan's prompt: {guidance}"));
        out.replaces.insert(old.decision_id, d.decision_id);
        if old.decision_id == target.decision_id {
            out.correcting = Some(d.decision_id);
        }
        root = Some(d.decision_id);
        out.decisions.push(d);
    }
    let mut invariants = Vec::new();
    for old in current
        .iter()
        .filter(|d| d.decision_type == DecisionType::InvariantEnforced)
    {
        if !affected.contains(&old.decision_id) {
            invariants.push(old.decision_id);
            continue;
        }
        if old.decision_id == target.decision_id {
            // Correcting an invariant removes it for this plan (spec 12 "Correcting
            // invariants: Remove"); the correcting decision says so and is guidance for the
            // actors that re-decide and re-run.
            let mut d = Decision::new(
                old.plan_id,
                DecisionType::UserIntervention,
                format!(
                    "Do not enforce the invariant \"{}\" for this plan",
                    old.chosen_option
                ),
                now,
            );
            d.attempt = attempt;
            d.parent_decision_id = root;
            d.question = Some("Which invariant must hold?".into());
            d.rationale = Some(format!("the user removed this invariant: {guidance}"));
            d.is_correction = true;
            d.corrects_decision_id = Some(target.decision_id);
            d.correction_reason = Some(guidance.to_string());
            d.context_snapshot = json!({"removed_invariant": old.chosen_option, "invariant_decision": old.decision_id});
            if let Some(r) = root {
                out.deps.push((r, d.decision_id));
            }
            out.replaces.insert(old.decision_id, d.decision_id);
            out.correcting = Some(d.decision_id);
            out.decisions.push(d);
            continue;
        }
        let mut d = successor(old, attempt, &target.decision_id, guidance, now);
        d.parent_decision_id = root;
        if let Some(r) = root {
            out.deps.push((r, d.decision_id));
        }
        out.replaces.insert(old.decision_id, d.decision_id);
        invariants.push(d.decision_id);
        out.decisions.push(d);
    }
    // An invariant an earlier correction removed stays removed when a later correction
    // re-makes the root: its `user_intervention` decision is carried into the new attempt.
    for old in current.iter().filter(|d| {
        d.decision_type == DecisionType::UserIntervention
            && d.context_snapshot.get("removed_invariant").is_some()
            && affected.contains(&d.decision_id)
            && d.decision_id != target.decision_id
    }) {
        let mut d = successor(old, attempt, &target.decision_id, guidance, now);
        d.parent_decision_id = root;
        if let Some(r) = root {
            out.deps.push((r, d.decision_id));
        }
        out.replaces.insert(old.decision_id, d.decision_id);
        out.decisions.push(d);
    }
    (root, invariants)
}

/// The offline strategist: re-derives the affected keyed decisions from the action (script
/// or definition of done), keeping the old dependency structure with replaced ids.
fn checklist_redecide(
    engine: &Lifecycle,
    plan: &Plan,
    keyed: &[&Decision],
    target: &Decision,
    attempt: u32,
    guidance: &str,
    out: &mut Redecided,
) -> Result<(), RunError> {
    let origin = engine.store().plan_origin(&plan.plan_id)?;
    let script = origin.as_ref().and_then(|o| o.script.clone());
    let c = checklist::build(
        script.as_deref(),
        plan.definition_of_done.as_deref().unwrap_or_default(),
        plan.description.as_deref().unwrap_or_default(),
    );
    let now = Timestamp::now();
    for old in keyed {
        let key = key_of(old).unwrap_or_default();
        let Some(i) = c.drafts.iter().position(|d| d.key == key) else {
            continue;
        };
        let draft = &c.drafts[i];
        let mut d = successor(old, attempt, &target.decision_id, guidance, now);
        d.chosen_option = draft.chosen_option.clone();
        d.question = Some(draft.question.clone());
        d.rationale = Some(format!(
            "{}; re-derived for a correction with the user's guidance: {guidance}",
            draft.rationale
        ));
        d.step = draft.step.as_ref().map(Step::from);
        let mut snapshot = old.context_snapshot.clone();
        if let Some(obj) = snapshot.as_object_mut() {
            obj.insert("script_step".into(), json!(c.script_steps[i]));
            obj.insert(
                "correction".into(),
                json!({"guidance": guidance, "replaces": old.decision_id}),
            );
        }
        d.context_snapshot = snapshot;
        out.replaces.insert(old.decision_id, d.decision_id);
        if old.decision_id == target.decision_id {
            out.correcting = Some(d.decision_id);
        }
        out.decisions.push(d);
    }
    out.snapshot = json!({"actor": CHECKLIST_STRATEGIST, "source": if script.as_ref().is_some_and(|s| !s.is_empty()) { "script" } else { "definition_of_done" }});
    Ok(())
}

/// The tools of a re-deciding model strategist: `record_decision` (keys of preserved
/// decisions may be named in `parent` and `depends_on`), `finish_strategy`, and the
/// read-only tools the first Strategize had (over the plan's bases, and its skills').
struct Redecider {
    draft: Mutex<StrategyDraft>,
    seeded: usize,
    finished: Mutex<Option<String>>,
    base: crate::context::strategize::BaseTools,
    external: Option<crate::lifecycle::host::RunnerHost>,
}

impl Redecider {
    /// The tools of `actor` re-deciding `plan`, with the `preserved` decisions' keys known.
    fn new(
        engine: &Lifecycle,
        plan: &Plan,
        actor: &str,
        preserved: &[&Decision],
        base: crate::context::strategize::BaseTools,
    ) -> Self {
        let seed: Vec<DecisionDraft> = preserved
            .iter()
            .map(|d| placeholder(d, key_of(d).unwrap_or_default()))
            .collect();
        Self {
            seeded: seed.len(),
            draft: Mutex::new(StrategyDraft { decisions: seed }),
            finished: Mutex::new(None),
            base,
            external: crate::lifecycle::host::strategist_host(engine, plan, actor),
        }
    }
}

impl ToolHost for Redecider {
    fn specs(&self) -> Vec<ToolSpec> {
        let mut specs = vec![
            prompts::record_decision_tool(),
            prompts::finish_strategy_tool(),
        ];
        if let Some(h) = &self.external {
            specs.extend(h.specs());
        }
        specs.extend(self.base.specs());
        specs
    }

    async fn call(&self, name: &str, args: Value) -> ToolOutcome {
        if self.base.offers(name) {
            return self.base.call(name, args);
        }
        if let Some(h) = self.external.as_ref().filter(|h| h.offer().has(name)) {
            return h.call(name, args).await;
        }
        match name {
            "record_decision" => match self.draft.lock().expect("draft lock").record(args) {
                Ok(d) => ToolOutcome::ok(format!("recorded decision {}", d.key)),
                Err(e) => ToolOutcome::error(e),
            },
            "finish_strategy" => {
                if self.draft.lock().expect("draft lock").decisions.len() <= self.seeded {
                    return ToolOutcome::error(
                        "no replacement decision is recorded yet; record them with record_decision first",
                    );
                }
                *self.finished.lock().expect("finish lock") = args
                    .get("summary")
                    .and_then(Value::as_str)
                    .map(str::to_string);
                ToolOutcome::finish("correction strategy finished")
            }
            other => ToolOutcome::error(format!(
                "`{other}` is not available while re-deciding a correction, which is read-only"
            )),
        }
    }
}

fn placeholder(d: &Decision, key: String) -> DecisionDraft {
    DecisionDraft {
        key,
        decision_type: d.decision_type.as_str().to_string(),
        question: d.question.clone().unwrap_or_default(),
        chosen_option: d.chosen_option.clone(),
        alternatives_considered: Vec::new(),
        confidence_score: d.confidence_score,
        rationale: d.rationale.clone().unwrap_or_default(),
        parent: None,
        depends_on: Vec::new(),
        step: None,
    }
}

/// The prompt of a re-deciding strategist: the preserved decisions, the invariants, the
/// decision being corrected with the user's guidance, and the affected decisions.
fn redecide_prompt(
    preserved: &[&Decision],
    invariant_texts: &[String],
    target: &Decision,
    keyed: &[&Decision],
    guidance: &str,
    briefing: &str,
) -> String {
    let mut prompt = String::from(
        "You are correcting part of an existing plan. Re-decide ONLY the affected decisions listed below; every preserved decision stays as it is and its work is kept.\n\nPreserved decisions (you may name their keys in `parent` and `depends_on`):\n",
    );
    for d in preserved {
        prompt.push_str(&format!(
            "- {} [{}]: {}\n",
            key_of(d).unwrap_or_default(),
            d.decision_type,
            d.chosen_option
        ));
    }
    if preserved.is_empty() {
        prompt.push_str("(none)\n");
    }
    prompt.push_str("\nInvariants:\n");
    for t in invariant_texts {
        prompt.push_str(&format!("- {t}\n"));
    }
    if invariant_texts.is_empty() {
        prompt.push_str("(none)\n");
    }
    prompt.push_str(&format!(
        "\nThe decision being corrected: [{}] {} -> {}\n\nGuidance from the user: {guidance}\n\nAffected decisions to re-decide (reuse a key to replace that decision):\n",
        target.decision_type,
        target.question.clone().unwrap_or_default(),
        target.chosen_option
    ));
    for d in keyed {
        prompt.push_str(&format!(
            "- {} [{}]: {} -> {}\n",
            key_of(d).unwrap_or_default(),
            d.decision_type,
            d.question.clone().unwrap_or_default(),
            d.chosen_option
        ));
    }
    if !briefing.is_empty() {
        prompt.push('\n');
        prompt.push_str(briefing);
    }
    prompt.push_str(
        "\nYou may read the project (read_file, list_files, code_intelligence) as it was at the plan's base. Record the replacement decisions with record_decision, then call finish_strategy.",
    );
    prompt
}

/// A re-deciding run that did not finish changes nothing: interrupted, failed, or stopped at
/// the budget (the correction can be made again once the budget allows).
fn check_stop(stop: &Stop) -> Result<(), RunError> {
    match stop {
        Stop::Cancelled => Err(RunError::Invalid("the correction was interrupted".into())),
        Stop::Failed { error } => Err(RunError::Invalid(format!(
            "the strategy actor failed: {error}"
        ))),
        Stop::Budget { stop } => Err(RunError::Invalid(format!(
            "the correction was not made: {}",
            stop.describe()
        ))),
        _ => Ok(()),
    }
}

/// A model strategist re-decides the affected keyed decisions.
#[allow(clippy::too_many_arguments)]
fn model_redecide(
    engine: &mut Lifecycle,
    plan: &Plan,
    actor_name: &str,
    plan_decisions: &[Decision],
    keyed: &[&Decision],
    affected: &HashSet<Id>,
    target: &Decision,
    root: Option<Id>,
    invariants: &[Id],
    attempt: u32,
    guidance: &str,
    out: &mut Redecided,
) -> Result<(), RunError> {
    let actor = crate::lifecycle::model::resolve(engine, plan, actor_name, Role::Strategist)
        .map_err(|m| RunError::Invalid(format!("the strategy actor cannot run: {m}")))?;
    let preserved: Vec<&Decision> = plan_decisions
        .iter()
        .filter(|d| d.is_current() && !affected.contains(&d.decision_id))
        .filter(|d| key_of(d).is_some())
        .collect();
    let invariant_texts: Vec<String> = plan_decisions
        .iter()
        .chain(out.decisions.iter())
        .filter(|d| invariants.contains(&d.decision_id))
        .map(|d| d.chosen_option.clone())
        .collect();
    let briefing = super::briefing::gather(
        engine,
        plan,
        &super::briefing::Redo {
            keyed,
            target,
            affected,
            guidance,
        },
    );
    let prompt = redecide_prompt(
        &preserved,
        &invariant_texts,
        target,
        keyed,
        guidance,
        &briefing.text,
    );
    let tools = Redecider::new(engine, plan, actor_name, &preserved, briefing.tools);
    let context = json!({
        "description": plan.description,
        "definition_of_done": plan.definition_of_done,
        "invariants": invariant_texts,
        "guidance": [guidance],
    });
    let run = crate::lifecycle::model::run(
        engine,
        &plan.plan_id,
        Some(&target.decision_id),
        &actor,
        crate::lifecycle::model::Input {
            context,
            prompt: prompt.clone(),
            history: Vec::new(),
            ..Default::default()
        },
        &tools,
    )
    .map_err(|m| RunError::Invalid(format!("the strategy actor failed: {m}")))?;
    check_stop(&run.stop)?;
    let drafts: Vec<DecisionDraft> = tools
        .draft
        .into_inner()
        .expect("draft lock")
        .decisions
        .split_off(tools.seeded);
    if drafts.is_empty() {
        return Err(RunError::Invalid(format!(
            "the strategy actor recorded no replacement decision ({})",
            run.stop.describe()
        )));
    }
    let now = Timestamp::now();
    let mut by_key: HashMap<String, Id> = preserved
        .iter()
        .map(|d| (key_of(d).unwrap_or_default(), d.decision_id))
        .collect();
    let old_by_key: HashMap<String, Id> = keyed
        .iter()
        .map(|d| (key_of(d).unwrap_or_default(), d.decision_id))
        .collect();
    for draft in &drafts {
        let kind: DecisionType = draft.decision_type.parse().map_err(RunError::Invalid)?;
        let mut d = Decision::new(plan.plan_id, kind, &draft.chosen_option, now);
        d.attempt = attempt;
        d.parent_decision_id = draft
            .parent
            .as_ref()
            .and_then(|k| by_key.get(k).copied())
            .or(root);
        d.question = Some(draft.question.clone());
        d.alternatives_considered = draft.alternatives_considered.clone();
        d.confidence_score = draft.confidence_score;
        d.rationale = Some(draft.rationale.clone());
        d.step = draft.step.as_ref().map(Step::from);
        d.is_correction = true;
        d.corrects_decision_id = Some(target.decision_id);
        d.correction_reason = Some(guidance.to_string());
        d.context_snapshot = json!({
            "key": draft.key,
            "actor": actor_name,
            "correction": {"guidance": guidance, "replaces": old_by_key.get(&draft.key)},
        });
        if let Some(r) = root {
            out.deps.push((r, d.decision_id));
        }
        for inv in invariants {
            out.deps.push((*inv, d.decision_id));
        }
        for k in draft.depends_on.iter().chain(draft.parent.iter()) {
            if let Some(up) = by_key.get(k) {
                out.deps.push((*up, d.decision_id));
            }
        }
        if let Some(old) = old_by_key.get(&draft.key) {
            out.replaces.insert(*old, d.decision_id);
            if *old == target.decision_id {
                out.correcting = Some(d.decision_id);
            }
        }
        by_key.insert(draft.key.clone(), d.decision_id);
        out.decisions.push(d);
    }
    out.snapshot = json!({
        "actor": actor_name,
        "turns": run.turns,
        "stop": run.stop.describe(),
        "summary": tools.finished.into_inner().expect("finish lock"),
        "prompt": prompt,
        "read": run.tool_calls.iter().filter(|c| !c.is_error && !matches!(c.name.as_str(), "record_decision" | "finish_strategy")).map(|c| json!({"tool": c.name, "arguments": c.arguments})).collect::<Vec<_>>(),
        "briefing": briefing.snapshot,
    });
    Ok(())
}

/// The new step order: a topological order of the executable decisions after the
/// correction, ties broken by where each stood before (a replacement takes the place of the
/// decision it replaces; other new ones go where the first affected step was).
fn order_steps(executable: &[(Id, f64, Vec<Id>)]) -> Result<Vec<Id>, RunError> {
    let ids: HashSet<Id> = executable.iter().map(|e| e.0).collect();
    let mut done: HashSet<Id> = HashSet::new();
    let mut out = Vec::new();
    while out.len() < executable.len() {
        let next = executable
            .iter()
            .filter(|(id, _, deps)| {
                !done.contains(id)
                    && deps
                        .iter()
                        .filter(|u| ids.contains(u))
                        .all(|u| done.contains(u))
            })
            .min_by(|a, b| a.1.total_cmp(&b.1));
        match next {
            Some((id, ..)) => {
                done.insert(*id);
                out.push(*id);
            }
            None => {
                return Err(RunError::Invalid(
                    "the corrected strategy's step dependencies form a cycle".into(),
                ));
            }
        }
    }
    Ok(out)
}

fn checkpoint_of(m: &serde_json::Map<String, Value>) -> Option<String> {
    m.get("checkpoint")
        .and_then(Value::as_str)
        .map(str::to_string)
}

/// Runs a revert correction of `decision_id` with `guidance` (see the module documentation)
/// and drives the plan afterwards as its profile allows.
///
/// # Errors
/// [`RunError::WrongState`] for applied, cancelled, running or unfinished plans;
/// [`RunError::Invalid`] for a superseded decision or a strategy actor that fails (nothing is
/// written then); [`RunError::Busy`]; store and sandbox errors.
pub fn revert(
    engine: &mut Lifecycle,
    decision_id: &Id,
    guidance: &str,
) -> Result<Reverted, RunError> {
    let target = engine
        .store()
        .decision(decision_id)?
        .ok_or_else(|| RunError::Invalid(format!("decision {decision_id} not found")))?;
    let plan_id = target.plan_id;
    engine.recover(&plan_id)?;
    let mut plan = engine.plan(&plan_id)?;
    check_revertable(&plan, &target)?;
    let guard = lease::acquire(engine.store_mut(), &plan_id, "correct")?;
    let sandboxes = engine.sandboxes();
    let impact = impact::impact(engine.store(), Some(&sandboxes), decision_id)
        .map_err(|e| RunError::Invalid(e.to_string()))?;
    let attempt = plan.status.attempt + 1;
    let plan_decisions = engine.store().decisions(&plan_id)?;
    let affected: HashSet<Id> = impact.decisions.iter().map(|r| r.decision_id).collect();
    let mut re = Redecided::default();
    let (root, invariants) = structural(
        &plan_decisions,
        &affected,
        &target,
        attempt,
        guidance,
        &mut re,
    );
    let t = Target {
        target: &target,
        attempt,
        guidance,
        affected: &affected,
        plan_decisions: &plan_decisions,
        root,
    };
    let checklist_deps = redecide(engine, &plan, &t, &invariants, &mut re)?;
    let correcting_id = correcting_decision(&t, &mut re);
    // The correcting decision first, the others in the order made.
    re.decisions.sort_by_key(|d| d.decision_id != correcting_id);
    rewire(engine, &mut re, checklist_deps, root)?;
    let new = new_steps(engine, &plan_id, &t, &re)?;
    let attempt_row = record_attempt(engine, &mut plan, &t, &re, correcting_id, &impact, &new)?;
    let rollback = roll_back_sandbox(engine, &sandboxes, &plan_id, new.rollback_to.as_ref())?;
    drop(guard);
    let driven = driver::drive(engine, &plan_id, Goal::Continue)?;
    let attempt = engine
        .store()
        .correction_attempts(&plan_id)?
        .into_iter()
        .find(|a| a.attempt_id == attempt_row.attempt_id)
        .unwrap_or(attempt_row);
    let new_decisions: Vec<Decision> = re
        .decisions
        .iter()
        .filter_map(|d| engine.store().decision(&d.decision_id).ok().flatten())
        .collect();
    let correcting = new_decisions
        .first()
        .cloned()
        .ok_or_else(|| RunError::Invalid("the correcting decision was not recorded".into()))?;
    Ok(Reverted {
        attempt,
        impact,
        correcting,
        new_decisions,
        rollback,
        driven: Some(driven),
    })
}

/// What a revert corrects, shared by its steps.
#[derive(Clone, Copy)]
struct Target<'a> {
    /// The decision corrected.
    target: &'a Decision,
    /// The plan attempt the correction starts.
    attempt: u32,
    /// The user's guidance.
    guidance: &'a str,
    /// The decisions the correction affects (the impact).
    affected: &'a HashSet<Id>,
    /// The plan's decisions before the correction.
    plan_decisions: &'a [Decision],
    /// The new root decision, when the root is re-made.
    root: Option<Id>,
}

/// The affected keyed decisions are re-decided by the plan's strategist (the offline
/// checklist or a model). Returns whether the re-made decisions keep the old dependency
/// structure (the checklist, or nothing re-decided).
fn redecide(
    engine: &mut Lifecycle,
    plan: &Plan,
    t: &Target<'_>,
    invariants: &[Id],
    re: &mut Redecided,
) -> Result<bool, RunError> {
    let Target {
        target,
        attempt,
        guidance,
        affected,
        plan_decisions,
        root,
    } = *t;
    let keyed: Vec<&Decision> = plan_decisions
        .iter()
        .filter(|d| d.is_current() && affected.contains(&d.decision_id))
        .filter(|d| {
            !matches!(
                d.decision_type,
                DecisionType::PromptDefinition | DecisionType::InvariantEnforced
            ) && key_of(d).is_some()
        })
        .collect();
    let strategist = plan
        .strategy_actor
        .clone()
        .unwrap_or_else(|| CHECKLIST_STRATEGIST.to_string());
    if !keyed.is_empty() {
        engine.observer().progress(&format!(
            "Correction: {strategist} re-decides {} decision(s)",
            keyed.len()
        ));
        if strategist == CHECKLIST_STRATEGIST {
            checklist_redecide(engine, plan, &keyed, target, attempt, guidance, re)?;
        } else {
            model_redecide(
                engine,
                plan,
                &strategist,
                plan_decisions,
                &keyed,
                affected,
                target,
                root,
                invariants,
                attempt,
                guidance,
                re,
            )?;
        }
    }
    Ok(strategist == CHECKLIST_STRATEGIST || keyed.is_empty())
}

/// The decision that corrects the target: the one re-made in its place, or (a corrected
/// decision nobody re-made, e.g. a user_intervention) a successor the guidance replaces.
fn correcting_decision(t: &Target<'_>, re: &mut Redecided) -> Id {
    let Target {
        target,
        attempt,
        guidance,
        ..
    } = *t;
    match re.correcting {
        Some(c) => c,
        None => {
            let mut d = successor(
                target,
                attempt,
                &target.decision_id,
                guidance,
                Timestamp::now(),
            );
            d.step = None;
            if target.decision_type == DecisionType::UserIntervention {
                d.chosen_option = guidance.to_string();
            }
            d.rationale = Some(format!("corrected by the user: {guidance}"));
            let id = d.decision_id;
            re.replaces.insert(target.decision_id, id);
            re.decisions.push(d);
            id
        }
    }
}

/// Points the re-made decisions at their replaced parents and, when `keep_structure`, gives
/// them the dependencies of the decisions they replace; decisions of a removed invariant are
/// dropped from both (their children hang under `root`).
fn rewire(
    engine: &Lifecycle,
    re: &mut Redecided,
    keep_structure: bool,
    root: Option<Id>,
) -> Result<(), RunError> {
    // Keyed decisions re-derived by the checklist keep the old dependency structure.
    let replaced = |id: &Id| re.replaces.get(id).copied();
    let removed: HashSet<Id> = re
        .replaces
        .iter()
        .filter(|(_, new)| {
            re.decisions.iter().any(|d| {
                d.decision_id == **new && d.context_snapshot.get("removed_invariant").is_some()
            })
        })
        .map(|(old, _)| *old)
        .collect();
    if keep_structure {
        let mut extra = Vec::new();
        for d in &re.decisions {
            if matches!(
                d.decision_type,
                DecisionType::PromptDefinition | DecisionType::InvariantEnforced
            ) || d.context_snapshot.get("removed_invariant").is_some()
            {
                continue;
            }
            let old = re
                .replaces
                .iter()
                .find(|(_, n)| **n == d.decision_id)
                .map(|(o, _)| *o);
            let Some(old) = old else { continue };
            for up in engine.store().dependencies_of(&old)? {
                if removed.contains(&up) {
                    continue;
                }
                extra.push((replaced(&up).unwrap_or(up), d.decision_id));
            }
        }
        re.deps.extend(extra);
    }
    for d in &mut re.decisions {
        if let Some(p) = d.parent_decision_id
            && let Some(n) = re.replaces.get(&p)
            && !removed.contains(&p)
        {
            d.parent_decision_id = Some(*n);
        } else if d.parent_decision_id.is_some_and(|p| removed.contains(&p)) {
            d.parent_decision_id = root;
        }
    }
    Ok(())
}

/// The plan's steps after a correction, the steps before it, and where the sandbox goes back
/// to (`Some(None)`: to the beginning).
struct NewSteps {
    steps: Vec<PlanStep>,
    old_steps: Vec<PlanStep>,
    rollback_to: Option<Option<String>>,
}

/// The new step list: the unaffected steps before the first affected one kept, the rest
/// pending (a done step replays its delta), in dependency order; the first step to redo is
/// marked running at the rollback target (crash safety).
fn new_steps(
    engine: &Lifecycle,
    plan_id: &Id,
    t: &Target<'_>,
    re: &Redecided,
) -> Result<NewSteps, RunError> {
    let Target {
        affected,
        plan_decisions,
        ..
    } = *t;
    let new_ids: HashSet<Id> = re.decisions.iter().map(|d| d.decision_id).collect();
    let old_steps = engine.store().plan_steps(plan_id)?;
    let old_pos: HashMap<Id, usize> = old_steps
        .iter()
        .enumerate()
        .map(|(i, s)| (s.decision_id, i))
        .collect();
    let first_affected = old_steps
        .iter()
        .position(|s| affected.contains(&s.decision_id));
    let mut executable: Vec<(Id, f64, Vec<Id>)> = Vec::new();
    let seq_rank = |d: &Decision| 1_000_000.0 + f64::from(d.sequence_number);
    for d in plan_decisions
        .iter()
        .filter(|d| d.is_current() && d.step.is_some() && !affected.contains(&d.decision_id))
    {
        let rank = old_pos
            .get(&d.decision_id)
            .map(|p| *p as f64)
            .unwrap_or_else(|| seq_rank(d));
        executable.push((
            d.decision_id,
            rank,
            engine.store().dependencies_of(&d.decision_id)?,
        ));
    }
    let base_rank = first_affected.map(|f| f as f64).unwrap_or(999_999.0);
    for (i, d) in re.decisions.iter().filter(|d| d.step.is_some()).enumerate() {
        let old = re
            .replaces
            .iter()
            .find(|(_, n)| **n == d.decision_id)
            .map(|(o, _)| *o);
        let rank = old
            .and_then(|o| old_pos.get(&o))
            .map(|p| *p as f64)
            .unwrap_or(base_rank + 0.5 + i as f64 * 1e-3);
        let ups = re
            .deps
            .iter()
            .filter(|(_, down)| *down == d.decision_id)
            .map(|(up, _)| *up)
            .collect();
        executable.push((d.decision_id, rank, ups));
    }
    let order = order_steps(&executable)?;
    let old_by_id: HashMap<Id, &PlanStep> = old_steps.iter().map(|s| (s.decision_id, s)).collect();
    let mut steps = Vec::new();
    let mut redoing = false;
    let mut rollback_to: Option<Option<String>> = None;
    for id in &order {
        let old = old_by_id.get(id);
        if new_ids.contains(id) || first_affected.is_none() {
            redoing = true;
        }
        let fresh = PlanStep {
            decision_id: *id,
            position: 0,
            status: StepStatus::Pending,
            runs: 0,
            start_checkpoints: serde_json::Map::new(),
            end_checkpoints: serde_json::Map::new(),
            output: None,
            error: None,
            started_at: None,
            finished_at: None,
            replay: None,
        };
        match old {
            Some(o) if !redoing && old_pos[id] < first_affected.unwrap_or(usize::MAX) => {
                steps.push((*o).clone());
            }
            Some(o) => {
                let mut s = fresh;
                s.runs = o.runs;
                if o.status == StepStatus::Done
                    && let Some(end) = checkpoint_of(&o.end_checkpoints)
                {
                    s.replay =
                        Some(json!({"start": checkpoint_of(&o.start_checkpoints), "end": end}));
                }
                steps.push(s);
            }
            None => steps.push(fresh),
        }
    }
    // Where the sandbox goes back to: the start of the first affected step that ran.
    if let Some(f) = first_affected {
        let o = &old_steps[f];
        if o.status != StepStatus::Pending || checkpoint_of(&o.start_checkpoints).is_some() {
            rollback_to = Some(checkpoint_of(&o.start_checkpoints));
        }
    }
    // The first step to redo is marked running at the rollback target (crash safety).
    if let Some(target_cp) = &rollback_to
        && let Some(s) = steps.iter_mut().find(|s| s.status == StepStatus::Pending)
    {
        s.status = StepStatus::Running;
        if let Some(cp) = target_cp {
            s.start_checkpoints.insert("checkpoint".into(), json!(cp));
        }
    }
    Ok(NewSteps {
        steps,
        old_steps,
        rollback_to,
    })
}

/// Records the correction attempt in one transaction with its `state_changed` event: the
/// new decisions and dependencies, the superseded ones, the attempt row, the new steps, and
/// the plan's new attempt (withdrawing pending approvals). Returns the attempt row.
fn record_attempt(
    engine: &mut Lifecycle,
    plan: &mut Plan,
    t: &Target<'_>,
    re: &Redecided,
    correcting_id: Id,
    impact: &Impact,
    new: &NewSteps,
) -> Result<CorrectionAttempt, RunError> {
    let Target {
        target,
        attempt,
        guidance,
        affected,
        root,
        ..
    } = *t;
    let plan_id = plan.plan_id;
    let (steps, old_steps) = (&new.steps, &new.old_steps);
    let executed = !old_steps.is_empty();
    let before = engine.store().latest_checkpoint(&plan_id)?;
    let original = json!({
        "attempt": plan.status.attempt,
        "phase": plan.phase(),
        "state": plan.state(),
        "affected": impact,
        "steps": old_steps,
        "final_checkpoint": before.as_ref().map(|c| c.checkpoint_id.to_string()),
        "final_states": before.as_ref().map(|c| &c.states),
        "superseded": re.replaces.iter().map(|(o, n)| json!({"decision_id": o, "superseded_by": n})).collect::<Vec<_>>(),
    });
    let now = Timestamp::now();
    let attempt_row = CorrectionAttempt {
        attempt_id: Id::generate(),
        plan_id,
        original_decision_id: target.decision_id,
        new_decision_id: Some(correcting_id),
        mode: "revert".into(),
        plan_attempt: Some(attempt),
        original,
        correction_reason: Some(guidance.to_string()),
        status: if executed {
            AttemptStatus::Executing
        } else {
            AttemptStatus::Completed
        },
        result: json!({"strategist": re.snapshot}),
        created_at: now,
        completed_at: (!executed).then_some(now),
    };
    plan.status
        .begin_attempt(if executed {
            Phase::Execute
        } else {
            Phase::Strategize
        })
        .map_err(|e| wrong(plan, e.to_string(), Vec::new()))?;
    if !executed {
        state::set_state(plan, ProcessingState::Processing)?;
        state::set_state(plan, ProcessingState::Complete)?;
    }
    plan.error_code = None;
    plan.error_message = None;
    if let Some(r) = root {
        plan.decision_root_id = Some(r);
    }
    let snapshot = plan.clone();
    let superseded: Vec<(Id, Id)> = affected
        .iter()
        .map(|old| (*old, re.replaces.get(old).copied().unwrap_or(correcting_id)))
        .collect();
    let new_decisions = re.decisions.clone();
    let deps = re.deps.clone();
    let row = attempt_row.clone();
    let step_rows = steps.clone();
    commit(
        engine.store_mut(),
        plan,
        EventKind::StateChanged(StateChanged::Correction(Correction {
            reason: "correction".into(),
            mode: "revert".into(),
            attempt_id: row.attempt_id.to_string(),
            attempt: Some(attempt),
            child_plan_id: None,
            corrects: target.decision_id.to_string(),
            new_decision_id: Some(correcting_id.to_string()),
            superseded: Some(superseded.len() as u64),
            new_decisions: Some(new_decisions.len() as u64),
            steps_rerun: Some(impact.steps_rerun.iter().map(ToString::to_string).collect()),
            steps_replayed: Some(
                impact
                    .steps_replayed
                    .iter()
                    .map(ToString::to_string)
                    .collect(),
            ),
            phase: Some(snapshot.phase()),
            state: Some(snapshot.state()),
        })),
        |tx| {
            for d in &new_decisions {
                insert_in(tx, d)?;
            }
            for (old, by) in &superseded {
                supersede_in(tx, old, by)?;
            }
            for (up, down) in &deps {
                depend_in(tx, up, down)?;
            }
            insert_attempt_in(tx, &row)?;
            if executed {
                replace_step_rows(tx, &snapshot.plan_id, &step_rows)?;
            }
            state::resolve_pending(
                tx,
                &snapshot,
                None,
                ApprovalStatus::Withdrawn,
                &json!({"answer": "withdrawn", "why": "a correction started a new attempt"}),
            )?;
            state::reason(tx, &snapshot, executed.then_some("correction"))
        },
    )?;
    engine.flush(&plan_id)?;

    Ok(attempt_row)
}

/// Rolls the sandboxes back to the start of the first affected step (the step marked
/// running), then marks it pending. Returns what the rollback did (`null` when nothing).
fn roll_back_sandbox(
    engine: &mut Lifecycle,
    sandboxes: &crate::sandbox::Sandboxes,
    plan_id: &Id,
    rollback_to: Option<&Option<String>>,
) -> Result<Value, RunError> {
    let mut rollback = Value::Null;
    if let Some(target_cp) = rollback_to
        && let Some(mut first) = engine
            .store()
            .plan_steps(plan_id)?
            .into_iter()
            .find(|s| s.status == StepStatus::Running)
    {
        engine
            .observer()
            .progress("Correction: rolling the sandbox back");
        rollback = execute::roll_back_step(engine, sandboxes, plan_id, &first)?;
        if target_cp.is_none() {
            engine
                .store_mut()
                .discard_all_checkpoints(plan_id, Timestamp::now())?;
        }
        first.status = StepStatus::Pending;
        first.start_checkpoints = serde_json::Map::new();
        let tx = engine.store_mut().conn_mut().transaction()?;
        save_step(&tx, plan_id, &first)?;
        tx.commit()?;
    }
    Ok(rollback)
}
