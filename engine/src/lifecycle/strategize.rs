//! The Strategize phase (spec section 10).
//!
//! 1. The plan moves to (strategize, processing) with a `strategize_started` event.
//! 2. Invariants are reconciled: by the invariant actor when the plan, a project or the
//!    configuration names one (`super::invariant_actor`; a failure errors the plan), else by
//!    the deterministic reconciler. The root's context snapshot says which was used.
//! 3. The root `prompt_definition` decision holds the substituted description; one
//!    `invariant_enforced` decision per effective invariant hangs under it.
//! 4. The strategy actor runs with read-only tools only: `builtin/checklist-strategist`
//!    offline, or a model actor with `record_decision` / `finish_strategy`. Every decision
//!    depends on the root and on every `invariant_enforced` decision, plus what it declares,
//!    and carries a context snapshot (a hash and references of what the actor read).
//! 5. A decision with two or more options pauses the plan for a human when
//!    `auto_decisions_strategize` is false, and so does a decision whose confidence is below
//!    the escalation threshold under every profile but `full-auto` (spec 27, "Semantic
//!    Escalation", `super::gates::escalation`); otherwise Strategize completes.

use std::collections::HashMap;
use std::sync::Mutex;

use jiff::Timestamp;
use serde_json::{Value, json};

use super::ended::Ended;
use super::gates::Gates;
use super::model;
use super::state::{self, commit};
use super::{Lifecycle, RunError, checklist};
use crate::actors::messages::ToolSpec;
use crate::actors::prompts::{self, DecisionDraft, Role, StrategyDraft};
use crate::actors::runtime::{Stop, ToolHost, ToolOutcome};
use crate::context::policy as context_policy;
use crate::context::{self, strategize::BaseTools};
use crate::domain::approval::{Approval, ApprovalKind, ApprovalStatus};
use crate::domain::decision::{Decision, DecisionType, Step};
use crate::domain::event::state::Transition;
use crate::domain::event::{
    DecisionSummary, StateChanged, StrategizeComplete, StrategizeDecisions, StrategizeStarted,
};
use crate::domain::{Id, Phase, Plan, ProcessingState};
use crate::events::EventKind;
use crate::registry::actors::{CHECKLIST_STRATEGIST, SCRIPT_EXECUTOR, fingerprint};
use crate::registry::invariants;
use crate::store::{approvals, decisions};

/// What the strategy actor produced.
struct Strategy {
    drafts: Vec<DecisionDraft>,
    script_steps: Vec<Option<Value>>,
    /// What the actor read and did (for the context snapshot).
    snapshot: Value,
}

/// The tools a model strategist gets: its role tools, and the read-only file tools and the
/// `code_intelligence` skill over the plan's bases (spec 10, 25); write tools are never
/// offered, and calls to tools that were not offered are refused and recorded.
struct StrategistTools {
    draft: Mutex<StrategyDraft>,
    summary: Mutex<Option<String>>,
    /// Read-only command and Agent Skill tools of the strategist's skills (spec 18).
    external: Option<crate::lifecycle::host::RunnerHost>,
    base: BaseTools,
}

impl ToolHost for StrategistTools {
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
        match name {
            "record_decision" => {
                let mut draft = self.draft.lock().expect("draft lock");
                match draft.record(args) {
                    Ok(d) => ToolOutcome::ok(format!("recorded decision {}", d.key)),
                    Err(e) => ToolOutcome::error(e),
                }
            }
            "finish_strategy" => {
                let summary = args
                    .get("summary")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_string();
                if self.draft.lock().expect("draft lock").decisions.is_empty() {
                    return ToolOutcome::error(
                        "no decision is recorded yet; record the strategy with record_decision first",
                    );
                }
                *self.summary.lock().expect("summary lock") = Some(summary);
                ToolOutcome::finish("strategy finished")
            }
            other if self.external.as_ref().is_some_and(|h| h.offer().has(other)) => {
                self.external
                    .as_ref()
                    .expect("checked")
                    .call(other, args)
                    .await
            }
            other => ToolOutcome::error(format!(
                "`{other}` is not available in strategize, which is read-only"
            )),
        }
    }
}

fn model_strategy(
    engine: &mut Lifecycle,
    plan: &Plan,
    actor_name: &str,
    effective: &[String],
    guidance: &[String],
) -> Result<Strategy, (String, String)> {
    let actor = model::resolve(engine, plan, actor_name, Role::Strategist)
        .map_err(|m| ("ACTOR_UNAVAILABLE".to_string(), m))?;
    let projects: Vec<String> = plan
        .project_links
        .iter()
        .map(|l| l.project_name.clone())
        .collect();
    let store_failed = |e: crate::store::StoreError| ("STORE".to_string(), e.to_string());
    let policy = context_policy::for_plan(engine.store(), &plan.plan_id, &projects, "strategize")
        .map_err(store_failed)?;
    engine
        .observer()
        .progress("Strategize: reading the project index");
    let (scopes, unreadable) =
        context::strategize::scopes(engine.paths(), engine.store(), &plan.plan_id, &policy)
            .map_err(store_failed)?;
    let task = [
        plan.description.as_deref(),
        plan.definition_of_done.as_deref(),
    ]
    .into_iter()
    .flatten()
    .collect::<Vec<_>>()
    .join("\n");
    let memory = context::tiers::read(engine.store(), &plan.plan_id, None, &policy);
    let hot = context::strategize::initial_context(&scopes, &task, &policy, &memory);
    let tools = StrategistTools {
        draft: Mutex::new(StrategyDraft::default()),
        summary: Mutex::new(None),
        external: crate::lifecycle::host::strategist_host(engine, plan, actor_name),
        base: BaseTools::new(scopes),
    };
    let description = plan.description.clone().unwrap_or_default();
    let context = json!({
        "description": description,
        "definition_of_done": plan.definition_of_done,
        "invariants": effective,
        "guidance": guidance,
    });
    let mut prompt = format!(
        "Plan the work for this task and record your decisions.\n\nTask: {}",
        if description.is_empty() {
            plan.definition_of_done.clone().unwrap_or_default()
        } else {
            description.clone()
        }
    );
    for g in guidance {
        prompt.push_str(&format!("\n\nGuidance from the user: {g}"));
    }
    if !hot.text.is_empty() {
        prompt.push_str("\n\n");
        prompt.push_str(&hot.text);
    }
    let mut input = model::Input {
        context,
        prompt,
        history: Vec::new(),
        ..model::Input::default()
    };
    // A graph actor's nodes run their own loops, which keep no journal yet.
    let replayed = if actor.graph.is_none() {
        journal_input(engine, plan, &actor, &tools, &mut input)
    } else {
        Replayed::default()
    };
    let run = model::run(engine, &plan.plan_id, None, &actor, input, &tools)
        .map_err(|m| ("ACTOR_FAILED".to_string(), m))?;
    let refused: Vec<Value> = run
        .tool_calls
        .iter()
        .filter(|c| {
            c.is_error
                && !tools.base.offers(&c.name)
                && !matches!(c.name.as_str(), "record_decision" | "finish_strategy")
        })
        .map(|c| json!({"tool": c.name, "arguments": c.arguments, "result": c.result}))
        .collect();
    let drafts = tools.draft.into_inner().expect("draft lock").decisions;
    match &run.stop {
        Stop::Cancelled => return Err(("CANCELLED".into(), "the run was stopped".into())),
        Stop::Budget { stop } => return Err(("BUDGET_EXCEEDED".into(), stop.describe())),
        Stop::Failed { error } => {
            return Err((
                if error.is_transient() {
                    "TRANSIENT_FAILURE"
                } else {
                    "ACTOR_FAILED"
                }
                .into(),
                error.to_string(),
            ));
        }
        _ if drafts.is_empty() => {
            return Err((
                "NO_STRATEGY".into(),
                format!(
                    "the strategy actor recorded no decision ({})",
                    run.stop.describe()
                ),
            ));
        }
        _ => {}
    }
    let n = drafts.len();
    Ok(Strategy {
        drafts,
        script_steps: vec![None; n],
        snapshot: json!({
            "actor": actor_name,
            "turns": run.turns,
            "stop": run.stop.describe(),
            "summary": tools.summary.into_inner().expect("summary lock"),
            "read": replayed.read.into_iter().chain(run.tool_calls.iter().filter(|c| !c.is_error && !matches!(c.name.as_str(), "record_decision" | "finish_strategy")).map(|c| json!({"tool": c.name, "arguments": c.arguments}))).collect::<Vec<_>>(),
            "resumed_at_call": replayed.call,
            "refused_tool_calls": refused,
            "hot_context": hot.snapshot(),
            "context_policy": policy,
            "unreadable_resources": unreadable,
        }),
    })
}

/// What a Strategize run continued from its journal had already done.
#[derive(Default)]
struct Replayed {
    /// The model call the run continued at (`None`: it started afresh).
    call: Option<u32>,
    /// The read-only calls answered before (for the context snapshot).
    read: Vec<Value>,
}

/// Journals the strategist's run as a step's run is (docs/sandbox.md, "Resuming a step"):
/// each model call and tool call is recorded as it happens, so that a Strategize whose
/// driver vanished continues at the exact call instead of buying every answered call again.
/// It continues only from a journal that starts from the same prompt (the same task,
/// guidance and hot context) and whose recorded decisions replay into the draft; otherwise
/// the journal is cleared and the run starts afresh. The strategist's tools only read, so
/// nothing is restored.
fn journal_input(
    engine: &mut Lifecycle,
    plan: &Plan,
    actor: &model::ModelActor,
    tools: &StrategistTools,
    input: &mut model::Input,
) -> Replayed {
    use super::journal::{Journaled, STRATEGIZE_KEY, StepJournal, rebuild};
    let step = Journaled {
        plan_id: plan.plan_id,
        key: STRATEGIZE_KEY.to_string(),
        decision_id: None,
        actor: actor.name.clone(),
        providers: engine.providers().to_vec(),
        fallback: actor.client.provider().clone(),
        writers: Default::default(),
        unnoted: Default::default(),
    };
    let entries = engine
        .store()
        .journal(&plan.plan_id, STRATEGIZE_KEY)
        .unwrap_or_default();
    let continued = rebuild(&entries).and_then(|rebuilt| {
        let same_start = matches!(
            rebuilt.history.first(),
            Some(crate::actors::messages::Message::User { text }) if *text == input.prompt
        );
        let read = replay(tools, &rebuilt)?;
        same_start.then_some((rebuilt, read))
    });
    if continued.is_none()
        && let Err(e) = engine
            .store_mut()
            .journal_clear(&plan.plan_id, STRATEGIZE_KEY)
    {
        tracing::warn!(error = %e, "Strategize runs without a journal");
        return Replayed::default();
    }
    let journal = match StepJournal::open(
        engine.store().location(),
        crate::sandbox::Sandboxes::new(engine.paths()),
        step,
    ) {
        Ok(j) => std::sync::Arc::new(j),
        Err(e) => {
            tracing::warn!(error = %e, "Strategize runs without a journal");
            return Replayed::default();
        }
    };
    let mut replayed = Replayed::default();
    if let Some((rebuilt, read)) = continued {
        let call = rebuilt.call();
        if rebuilt.failed_call {
            // Retried after a provider error: the calls answered before it stand.
            engine.observer().progress(&format!(
                "Strategize: retrying after model call {} failed",
                rebuilt.point.turns
            ));
        } else {
            engine
                .observer()
                .progress(&format!("Strategize: resuming at model call {call}"));
            journal.resumed(call, &rebuilt.point, rebuilt.lost.as_ref());
        }
        input.history = rebuilt.history;
        input.resume_at = Some(rebuilt.point);
        replayed = Replayed {
            call: Some(call),
            read,
        };
    }
    input.journal = Some(journal);
    replayed
}

/// Replays the answered calls of a journaled strategist run into `tools`: each
/// `record_decision` that succeeded is recorded in the draft again (the draft lives in
/// memory; the same arguments in the same order give the same draft). Returns the read-only
/// calls that succeeded, or `None` when a recorded decision no longer replays (the run then
/// starts afresh).
fn replay(tools: &StrategistTools, rebuilt: &super::journal::Rebuilt) -> Option<Vec<Value>> {
    use crate::actors::messages::Message;
    let mut ok: HashMap<&str, bool> = HashMap::new();
    for m in &rebuilt.history {
        if let Message::ToolResults { results } = m {
            for r in results {
                ok.insert(r.call_id.as_str(), !r.is_error);
            }
        }
    }
    for r in &rebuilt.point.done {
        ok.insert(r.call_id.as_str(), !r.is_error);
    }
    let mut read = Vec::new();
    let mut draft = tools.draft.lock().ok()?;
    for m in &rebuilt.history {
        let Message::Assistant { tool_calls, .. } = m else {
            continue;
        };
        for c in tool_calls {
            if ok.get(c.id.as_str()) != Some(&true) {
                continue;
            }
            match c.name.as_str() {
                "record_decision" => {
                    let args: Value = serde_json::from_str(&c.arguments).ok()?;
                    draft.record(args).ok()?;
                }
                "finish_strategy" => {}
                _ => read.push(json!({"tool": c.name, "arguments": c.arguments})),
            }
        }
    }
    Some(read)
}

/// Runs Strategize for a plan at (strategize, queued|errored). `guidance` is user guidance
/// (from `plan reject` of a decision or `plan prompt`) handed to the actor.
///
/// # Errors
/// [`RunError`] for store failures and impossible states; actor failures are
/// [`Ended::Errored`].
pub fn run(
    engine: &mut Lifecycle,
    plan: &mut Plan,
    guidance: &[String],
) -> Result<Ended, RunError> {
    let actor = plan
        .strategy_actor
        .clone()
        .unwrap_or_else(|| CHECKLIST_STRATEGIST.to_string());
    if plan.state() != ProcessingState::Processing {
        state::set_state(plan, ProcessingState::Processing)?;
    }
    plan.error_code = None;
    plan.error_message = None;
    plan.started_at.get_or_insert_with(Timestamp::now);
    let snapshot_plan = plan.clone();
    commit(
        engine.store_mut(),
        plan,
        EventKind::StrategizeStarted(StrategizeStarted {
            attempt: plan.status.attempt,
            actor: actor.clone(),
        }),
        |tx| {
            state::reason(tx, &snapshot_plan, None)?;
            state::resolve_pending(
                tx,
                &snapshot_plan,
                Some("errored"),
                ApprovalStatus::Approved,
                &json!({"answer": "retry"}),
            )?;
            Ok(())
        },
    )?;
    engine.flush(&plan.plan_id)?;
    engine
        .observer()
        .progress("Strategize: reconciling invariants");

    let plan_key = plan.plan_id.to_string();
    let (view, reconciler) = match plan.parent_plan_id {
        // A child plan takes its parent's effective invariants as they are.
        Some(parent) => (inherited_invariants(engine.store(), &parent)?, None),
        None => {
            let (_, view, reconciler) =
                invariants::effective(engine.store(), engine.providers(), &plan_key, None)
                    .map_err(|e| {
                        RunError::Invalid(format!("cannot reconcile the plan's invariants: {e}"))
                    })?;
            (view, reconciler)
        }
    };
    let (view, reconciler_note) = match &reconciler {
        _ if plan.parent_plan_id.is_some() => (
            view,
            json!({
                "used": "inherited",
                "from_plan": plan.parent_plan_id.map(|p| p.to_string()),
                "note": "a child plan inherits its parent's effective invariants without reconciling them again",
            }),
        ),
        Some(choice) => match super::invariant_actor::reconcile(engine, plan, choice, &view) {
            Ok(done) => done,
            Err((code, message)) => {
                if super::stop::stop_cause(engine, &plan.plan_id)?.is_some() {
                    return Ok(Ended::Stopped);
                }
                close_journals(engine, &plan.plan_id)?;
                state::errored(
                    engine.store_mut(),
                    plan,
                    &code,
                    &message,
                    json!({"invariant_actor": choice.actor, "from": choice.from}),
                )?;
                engine.flush(&plan.plan_id)?;
                return Ok(Ended::Errored { code, message });
            }
        },
        None => (view, json!({"used": "deterministic"})),
    };
    let effective: Vec<String> = view.effective.iter().map(|i| i.text.clone()).collect();
    let origin = engine.store().plan_origin(&plan.plan_id)?;
    let script = origin.as_ref().and_then(|o| o.script.clone());

    engine
        .observer()
        .progress(&format!("Strategize: running {actor}"));
    let strategy = if actor == CHECKLIST_STRATEGIST {
        let c = checklist::build(
            script.as_deref(),
            plan.definition_of_done.as_deref().unwrap_or_default(),
            plan.description.as_deref().unwrap_or_default(),
        );
        Ok(Strategy {
            snapshot: json!({
                "actor": actor,
                "source": match c.source { checklist::Source::Script => "script", checklist::Source::DefinitionOfDone => "definition_of_done" },
                "read": [if c.source == checklist::Source::Script { "plan_origins.script" } else { "plans.definition_of_done" }],
            }),
            drafts: c.drafts,
            script_steps: c.script_steps,
        })
    } else if actor == SCRIPT_EXECUTOR {
        Err((
            "ACTOR_UNAVAILABLE".to_string(),
            format!(
                "{SCRIPT_EXECUTOR} is an execution actor; use {CHECKLIST_STRATEGIST} or a model as the strategy actor"
            ),
        ))
    } else {
        model_strategy(engine, plan, &actor, &effective, guidance)
    };
    if super::stop::stop_cause(engine, &plan.plan_id)?.is_some() {
        return Ok(Ended::Stopped);
    }
    let strategy = match strategy {
        Ok(s) => s,
        Err((code, message)) if code == "CANCELLED" => {
            let _ = message;
            return Ok(Ended::Stopped);
        }
        Err((code, message)) => return failed(engine, plan, &actor, code, message),
    };
    let ended = record(
        engine,
        plan,
        &actor,
        &effective,
        &view,
        reconciler_note,
        strategy,
        script.as_deref(),
    )?;
    // The strategy is recorded: its run is over, and the next Strategize (a revision) starts
    // afresh. A kill before this line leaves a journal that ends with `finish_strategy`, which
    // is never continued (or with an answer whose draft is already recorded: the next run's
    // prompt, with the revision's guidance, differs).
    close_journals(engine, &plan.plan_id)?;
    Ok(ended)
}

/// Closes the journals of Strategize's runs (the invariant actor's and the strategist's):
/// the next Strategize runs them afresh.
fn close_journals(engine: &mut Lifecycle, plan_id: &Id) -> Result<(), RunError> {
    for key in [
        super::invariant_actor::INVARIANTS_KEY,
        super::journal::STRATEGIZE_KEY,
    ] {
        engine.store_mut().journal_close(plan_id, key)?;
    }
    Ok(())
}

/// The strategy actor failed: the plan errors. A failed Strategize runs again from its start,
/// as a failed step does, so its journal is closed first (killed in between, the plan is
/// interrupted and starts afresh too); after a transient provider error it is kept, so that
/// the retry continues at the call that failed instead of buying the answered ones again.
fn failed(
    engine: &mut Lifecycle,
    plan: &mut Plan,
    actor: &str,
    code: String,
    message: String,
) -> Result<Ended, RunError> {
    if code != "TRANSIENT_FAILURE" {
        close_journals(engine, &plan.plan_id)?;
    }
    state::errored(
        engine.store_mut(),
        plan,
        &code,
        &message,
        json!({"actor": actor}),
    )?;
    engine.flush(&plan.plan_id)?;
    Ok(Ended::Errored { code, message })
}

/// The parent's effective invariants: its current `invariant_enforced` decisions.
fn inherited_invariants(
    store: &crate::store::Store,
    parent: &Id,
) -> Result<invariants::EffectiveView, RunError> {
    let effective = store
        .decisions(parent)?
        .into_iter()
        .filter(|d| d.is_current() && d.decision_type == DecisionType::InvariantEnforced)
        .map(|d| invariants::Invariant {
            invariant_id: d.context_snapshot["references"][0]
                .as_str()
                .unwrap_or_default()
                .to_string(),
            text: d.chosen_option.clone(),
            key: None,
            scope: serde_json::from_value(d.context_snapshot["scope"].clone())
                .unwrap_or(crate::domain::InvariantScope::Plan),
            project: None,
            action: None,
            plan_id: Some(*parent),
            created_at: d.created_at,
            seq: i64::from(d.sequence_number),
        })
        .collect();
    Ok(invariants::EffectiveView {
        effective,
        duplicates: Vec::new(),
        conflicts: Vec::new(),
    })
}

#[allow(clippy::too_many_arguments)]
fn record(
    engine: &mut Lifecycle,
    plan: &mut Plan,
    actor: &str,
    effective: &[String],
    view: &invariants::EffectiveView,
    reconciler: Value,
    strategy: Strategy,
    script: Option<&[crate::registry::actions::ScriptStep]>,
) -> Result<Ended, RunError> {
    let now = Timestamp::now();
    let attempt = plan.status.attempt;
    let (root, reuse_root, base_hash) =
        root_decision(engine, plan, effective, reconciler, &strategy, script, now)?;
    let mut all: Vec<Decision> = Vec::new();
    let mut deps: Vec<(Id, Id)> = Vec::new();
    let mut invariant_ids = Vec::new();
    for inv in &view.effective {
        let mut d = Decision::new(
            plan.plan_id,
            DecisionType::InvariantEnforced,
            &inv.text,
            now,
        );
        d.attempt = attempt;
        d.parent_decision_id = Some(root.decision_id);
        d.question = Some("Which invariant must hold?".into());
        d.rationale = Some(match plan.parent_plan_id {
            Some(parent) => format!("inherited from parent plan {parent} (not reconciled again)"),
            None => format!("effective {} invariant", inv.scope_label()),
        });
        d.context_snapshot = json!({
            "hash": fingerprint(inv.text.as_bytes()),
            "references": [inv.invariant_id],
            "scope": inv.scope,
        });
        deps.push((root.decision_id, d.decision_id));
        invariant_ids.push(d.decision_id);
        all.push(d);
    }
    let needs_human = strategy_decisions(
        plan,
        actor,
        &strategy,
        (&root, &invariant_ids, &base_hash),
        now,
        &mut all,
        &mut deps,
    )?;
    let count = store_decisions(engine, plan, &root, reuse_root, &all, &deps)?;
    if !needs_human.is_empty() {
        return raise_decision_approvals(engine, plan, needs_human);
    }
    complete(engine, plan, count)
}

/// The root decision (`prompt_definition`) of a strategy, with whether it is a child's root
/// its parent recorded (kept, not inserted again), and the hash of what it was built from.
fn root_decision(
    engine: &Lifecycle,
    plan: &Plan,
    effective: &[String],
    reconciler: Value,
    strategy: &Strategy,
    script: Option<&[crate::registry::actions::ScriptStep]>,
    now: Timestamp,
) -> Result<(Decision, bool, String), RunError> {
    let attempt = plan.status.attempt;
    let prompt_text = plan
        .description
        .clone()
        .filter(|d| !d.trim().is_empty())
        .or_else(|| plan.definition_of_done.clone())
        .unwrap_or_else(|| plan.action_name.clone());
    let base_hash = fingerprint(
        json!({
            "description": plan.description,
            "definition_of_done": plan.definition_of_done,
            "arguments": plan.arguments,
            "invariants": effective,
            "script": script,
        })
        .to_string()
        .as_bytes(),
    );
    let mut root = Decision::new(
        plan.plan_id,
        DecisionType::PromptDefinition,
        &prompt_text,
        now,
    );
    root.attempt = attempt;
    root.question = Some("What should this plan achieve?".into());
    root.rationale = Some("the action's description with the plan's arguments substituted".into());
    root.context_snapshot = json!({
        "hash": base_hash,
        "references": ["plans.description", "plans.definition_of_done", "plans.arguments"],
        "definition_of_done": plan.definition_of_done,
        "arguments": plan.arguments,
        "reconciler": reconciler,
        "strategist": strategy.snapshot,
    });
    // A child plan's root may have been recorded by its parent (the prompt a parent gives a
    // child is the child's root decision, spec 08): it is kept, not replaced.
    let handed_down = match (plan.parent_plan_id, plan.decision_root_id) {
        (Some(_), Some(r)) => engine
            .store()
            .decision(&r)?
            .filter(|d| d.is_current() && d.decision_type == DecisionType::PromptDefinition),
        _ => None,
    };
    let reuse_root = handed_down.is_some();
    if let Some(r) = handed_down {
        root = r;
    }
    Ok((root, reuse_root, base_hash))
}

/// A draft a human decides: (decision, options with the chosen one first, question, why it
/// escalated when its confidence is below the threshold).
type NeedsHuman = (Id, Vec<String>, String, Option<super::gates::Escalation>);

/// The decisions of the strategy's drafts under `root` (and its invariant decisions), with
/// their dependencies. Returns the drafts with alternatives a human picks among (decision,
/// options, question) when Strategize decisions are not automatic or a draft's confidence
/// escalates it.
fn strategy_decisions(
    plan: &Plan,
    actor: &str,
    strategy: &Strategy,
    (root, invariant_ids, base_hash): (&Decision, &[Id], &str),
    now: Timestamp,
    all: &mut Vec<Decision>,
    deps: &mut Vec<(Id, Id)>,
) -> Result<Vec<NeedsHuman>, RunError> {
    let attempt = plan.status.attempt;
    let mut by_key: HashMap<String, Id> = HashMap::new();
    let gates = Gates::of(plan);
    let mut needs_human: Vec<NeedsHuman> = Vec::new();
    for (draft, raw) in strategy.drafts.iter().zip(&strategy.script_steps) {
        let kind: DecisionType = draft.decision_type.parse().map_err(RunError::Invalid)?;
        let mut d = Decision::new(plan.plan_id, kind, &draft.chosen_option, now);
        d.attempt = attempt;
        d.parent_decision_id = Some(
            draft
                .parent
                .as_ref()
                .and_then(|k| by_key.get(k).copied())
                .unwrap_or(root.decision_id),
        );
        d.question = Some(draft.question.clone());
        d.alternatives_considered = draft.alternatives_considered.clone();
        d.confidence_score = draft.confidence_score;
        d.rationale = Some(draft.rationale.clone());
        d.step = draft.step.as_ref().map(Step::from);
        d.context_snapshot = json!({
            "hash": base_hash,
            "key": draft.key,
            "actor": actor,
            "references": strategy.snapshot.get("read").cloned().unwrap_or(json!([])),
            "script_step": raw,
            "hot_context": strategy.snapshot.get("hot_context").cloned(),
        });
        deps.push((root.decision_id, d.decision_id));
        for inv in invariant_ids {
            deps.push((*inv, d.decision_id));
        }
        for k in &draft.depends_on {
            if let Some(up) = by_key.get(k) {
                deps.push((*up, d.decision_id));
            }
        }
        if let Some(parent) = draft.parent.as_ref().and_then(|k| by_key.get(k)) {
            deps.push((*parent, d.decision_id));
        }
        let escalated = super::gates::escalation(plan, draft.confidence_score);
        if escalated.is_some()
            || (!draft.alternatives_considered.is_empty()
                && !gates.auto_decisions(Phase::Strategize))
        {
            let mut options = vec![draft.chosen_option.clone()];
            options.extend(draft.alternatives_considered.iter().cloned());
            needs_human.push((d.decision_id, options, draft.question.clone(), escalated));
        }
        by_key.insert(draft.key.clone(), d.decision_id);
        all.push(d);
    }
    Ok(needs_human)
}

/// Stores the strategy (root, decisions, dependencies, the link to a parent's spawn decision)
/// with its `strategize_decisions` event, superseding the previous one. Returns the number
/// of decisions.
fn store_decisions(
    engine: &mut Lifecycle,
    plan: &mut Plan,
    root: &Decision,
    reuse_root: bool,
    all: &[Decision],
    deps: &[(Id, Id)],
) -> Result<usize, RunError> {
    let summary: Vec<DecisionSummary> = std::iter::once(root)
        .chain(all.iter())
        .map(|d| DecisionSummary {
            decision_id: d.decision_id.to_string(),
            decision_type: d.decision_type.as_str().into(),
            chosen_option: d.chosen_option.clone(),
            executable: d.step.is_some(),
        })
        .collect();
    let count = all.len() + 1;
    plan.decision_root_id = Some(root.decision_id);
    let root_id = root.decision_id;
    let plan_id = plan.plan_id;
    // A child plan's root hangs under the parent's spawn decision (`plan tree`, corrections).
    let spawned_by = engine
        .store()
        .child_link(&plan_id)?
        .map(|l| l.spawn_decision_id);
    commit(
        engine.store_mut(),
        plan,
        EventKind::StrategizeDecisions(StrategizeDecisions {
            count: count as u64,
            decision_root_id: root_id.to_string(),
            decisions: summary,
        }),
        |tx| {
            if !reuse_root {
                decisions::insert_in(tx, root)?;
            }
            decisions::supersede_all_in(tx, &plan_id, &root_id, &[])?;
            for d in all {
                decisions::insert_in(tx, d)?;
            }
            for (up, down) in deps {
                decisions::depend_in(tx, up, down)?;
            }
            if let Some(spawn) = spawned_by {
                tx.execute(
                    "INSERT OR IGNORE INTO decision_dependencies VALUES (?1, ?2, 'plan', ?3)",
                    rusqlite::params![spawn.to_string(), root_id.to_string(), plan_id.to_string()],
                )?;
            }
            Ok(())
        },
    )?;
    engine.flush(&plan.plan_id)?;

    Ok(count)
}

/// Raises one decision approval per draft with alternatives and queues the plan
/// (`awaiting_decision`).
fn raise_decision_approvals(
    engine: &mut Lifecycle,
    plan: &mut Plan,
    needs_human: Vec<NeedsHuman>,
) -> Result<Ended, RunError> {
    let mut raised = Vec::new();
    for (decision, options, question, escalated) in needs_human {
        let mut a = Approval::new(
            plan.plan_id,
            ApprovalKind::Decision,
            match &escalated {
                Some(e) => format!("{question} ({})", e.describe()),
                None => question.clone(),
            },
            Timestamp::now(),
        );
        a.context = json!({
            "decision_id": decision.to_string(),
            "question": question,
            "recommended": options[0],
            "phase": "strategize",
        });
        if let Some(e) = escalated {
            a.context["escalation"] = json!({
                "reason": "low_confidence",
                "confidence": e.confidence,
                "threshold": e.threshold,
            });
        }
        a.options = options;
        raised.push(a);
    }
    state::set_state(plan, ProcessingState::Queued)?;
    let snapshot = plan.clone();
    let pending = raised.clone();
    commit(
        engine.store_mut(),
        plan,
        EventKind::StateChanged(StateChanged::Transition(Transition {
            reason: Some("awaiting_decision".into()),
            approvals: Some(pending.iter().map(|a| a.approval_id.clone()).collect()),
            ..Transition::at(Phase::Strategize, ProcessingState::Queued)
        })),
        |tx| {
            state::reason(tx, &snapshot, Some("awaiting_decision"))?;
            for a in &pending {
                approvals::insert_in(tx, a)?;
            }
            Ok(())
        },
    )?;
    engine.flush(&plan.plan_id)?;
    Ok(Ended::Awaiting(raised))
}

/// Completes Strategize: (strategize, complete) with a `strategize_complete` event.
///
/// # Errors
/// [`RunError`].
pub fn complete(engine: &mut Lifecycle, plan: &mut Plan, count: usize) -> Result<Ended, RunError> {
    if plan.state() != ProcessingState::Processing {
        state::set_state(plan, ProcessingState::Processing)?;
    }
    state::set_state(plan, ProcessingState::Complete)?;
    let snapshot = plan.clone();
    commit(
        engine.store_mut(),
        plan,
        EventKind::StrategizeComplete(StrategizeComplete {
            decisions: count as u64,
            decision_root_id: snapshot.decision_root_id.map(|d| d.to_string()),
        }),
        |tx| state::reason(tx, &snapshot, None),
    )?;
    engine.flush(&plan.plan_id)?;
    super::estimator::after_strategize(engine, plan)?;
    Ok(Ended::Complete)
}
