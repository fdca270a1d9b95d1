//! `plan correct --mode append` (spec 27 "--mode=append"): history stays
//! intact and a child plan carrying the guidance is added, based on the parent's current
//! state.
//!
//! This is the minimal child-plan creation corrections need; it uses the agreed linking so
//! that `plan tree` and later corrections see the child: the child is a `plans` row with
//! `parent_plan_id` / `root_plan_id`, its root `prompt_definition` decision (the guidance,
//! `is_correction`, `corrects_decision_id` = the corrected decision) is recorded now, and a
//! `plan` dependency row links the corrected decision to that root with the child plan id as
//! `downstream_ref`. Its bases: the parent's sandbox work trees when the parent is not
//! applied (copied as directories at first use, so the child starts from the parent's
//! current sandbox state, and its Apply writes back into the parent's sandbox), else the
//! resources as they are now (an applied parent's commit included). It inherits the
//! parent's actors, frozen automation profile and origin (without the script: the guidance
//! is the work). It is then driven as its profile allows.

use jiff::Timestamp;
use serde::Serialize;
use serde_json::json;

use crate::domain::decision::{Decision, DecisionType};
use crate::domain::{Id, Phase, Plan};
use crate::lifecycle::driven::Driven;
use crate::lifecycle::driver::{self, Goal};
use crate::lifecycle::{Lifecycle, RunError};
use crate::store::corrections::{AttemptStatus, CorrectionAttempt, insert_attempt_in};
use crate::store::lifecycle_run::{BaseKind, PlanBase};

/// What an append did.
#[derive(Debug, Clone, Serialize, serde::Deserialize, schemars::JsonSchema)]
pub struct Appended {
    /// The child plan as it is now.
    pub child: Plan,
    /// The child's root decision (the guidance).
    pub root: Decision,
    /// The attempt recorded on the parent.
    pub attempt: CorrectionAttempt,
    /// Where the child starts from, per resource.
    pub bases: Vec<PlanBase>,
    /// The result of driving the child.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub driven: Option<Driven>,
}

/// The child's bases (see the module documentation).
///
/// # Errors
/// [`RunError`] for store, sandbox or git failures.
pub fn child_bases(engine: &Lifecycle, parent: &Plan) -> Result<Vec<PlanBase>, RunError> {
    let sandboxes = engine.sandboxes();
    let active = sandboxes.active(engine.store(), &parent.plan_id)?;
    let mut out = Vec::new();
    for mut b in engine.store().plan_bases(&parent.plan_id)? {
        if parent.phase() != Phase::Applied
            && let Some(sb) = active
                .iter()
                .find(|s| s.record.resource_name == b.resource_name)
        {
            b.kind = BaseKind::Directory;
            b.path = sb.work_dir().display().to_string();
            b.base_commit = None;
            b.branch = None;
        } else if b.kind == BaseKind::GitCheckout {
            let repo = git2::Repository::open(&b.path)
                .map_err(|e| RunError::Sandbox(format!("{}: {e}", b.path)))?;
            let head = repo
                .head()
                .map_err(|e| RunError::Sandbox(format!("{}: {e}", b.path)))?;
            b.branch = head
                .shorthand()
                .ok()
                .filter(|_| head.is_branch())
                .map(str::to_string);
            b.base_commit = head.peel_to_commit().ok().map(|c| c.id().to_string());
        }
        out.push(b);
    }
    Ok(out)
}

/// The execution actor the child plan will run with: `execution_actor` when given (it must
/// resolve), else the parent's. The child's only work is the guidance, a free-text step, and
/// the built-in script executor runs nothing but an action's script steps, so it is refused
/// here rather than creating a child that fails at once (the dry run refuses it too).
///
/// # Errors
/// A message saying why the child could not run and what to pass instead.
pub fn child_execution_actor(
    engine: &Lifecycle,
    parent: &Plan,
    execution_actor: Option<&str>,
) -> Result<String, String> {
    let actor = match execution_actor {
        Some(a) => {
            crate::registry::actors::resolve(engine.store(), engine.providers(), a)
                .map_err(|e| format!("--execution-actor: {e}"))?;
            crate::registry::actors::canonical(a)
        }
        None => parent.execution_actor.clone().unwrap_or_default(),
    };
    if actor == crate::registry::actors::SCRIPT_EXECUTOR {
        let revert = if parent.phase() == Phase::Applied {
            ""
        } else {
            ", or correct with --mode revert, which re-runs the script"
        };
        return Err(format!(
            // A command inside a sentence stays (D-commands-2): it explains the error rather than suggesting the next step.
            "the child plan would run the guidance with {actor}, which carries out only an action's script steps, never free-text guidance; give the child a model execution actor with --execution-actor PROVIDER/MODEL (`agents actor list` shows them){revert}"
        ));
    }
    Ok(actor)
}

/// Why the child plan's model execution actor `actor` could not run now (its provider's API
/// key is not set, its model is unknown, ...), as its Execute would fail with
/// `ACTOR_UNAVAILABLE`; `None` when it can run or is an offline built-in actor.
pub fn child_actor_unavailable(engine: &Lifecycle, parent: &Plan, actor: &str) -> Option<String> {
    if actor.starts_with("builtin/") {
        return None;
    }
    crate::lifecycle::model::resolve(
        engine,
        parent,
        actor,
        crate::actors::prompts::Role::Executor,
    )
    .err()
    .map(|why| format!("the child plan's execution actor {actor} is unavailable: {why}"))
}

/// Appends a child plan carrying `guidance` for `decision_id` and drives it; the child runs
/// with `execution_actor` when given, else with the parent's (see [`child_execution_actor`]).
///
/// # Errors
/// [`RunError::Invalid`] for an unknown decision, a cancelled parent or an execution actor
/// that cannot carry out guidance; store, sandbox and git errors.
pub fn append(
    engine: &mut Lifecycle,
    decision_id: &Id,
    guidance: &str,
    execution_actor: Option<&str>,
) -> Result<Appended, RunError> {
    let target = engine
        .store()
        .decision(decision_id)?
        .ok_or_else(|| RunError::Invalid(format!("decision {decision_id} not found")))?;
    let parent = engine.plan(&target.plan_id)?;
    if parent.state() == crate::domain::ProcessingState::Cancelled {
        return Err(RunError::WrongState {
            phase: parent.phase(),
            state: parent.state(),
            message: format!(
                "plan {} is cancelled; nothing more is added to it",
                parent.plan_id
            ),
            hints: vec![crate::domain::Next::PlanStatus {
                plan: parent.plan_id,
            }],
        });
    }
    let actor =
        child_execution_actor(engine, &parent, execution_actor).map_err(RunError::Invalid)?;
    let bases = child_bases(engine, &parent)?;
    let now = Timestamp::now();
    let mut child = Plan::new(
        parent.action_name.clone(),
        format!("{} (fix)", parent.name),
        now,
    );
    child.description = Some(guidance.to_string());
    child.definition_of_done = Some(guidance.to_string());
    child.project_links = parent.project_links.clone();
    child.automation_profile = parent.automation_profile.clone();
    child.automation_level = parent.automation_level;
    child.effective_profile_snapshot = parent.effective_profile_snapshot.clone();
    child.strategy_actor = parent.strategy_actor.clone();
    child.execution_actor = Some(actor);
    child.estimation_actor = parent.estimation_actor.clone();
    child.invariant_actor = parent.invariant_actor.clone();
    child.arguments = parent.arguments.clone();
    child.parent_plan_id = Some(parent.plan_id);
    child.root_plan_id = Some(parent.root_plan_id.unwrap_or(parent.plan_id));
    let projects: Vec<Id> = engine
        .store()
        .plan_project_ids(&parent.plan_id)?
        .iter()
        .filter_map(|p| p.parse().ok())
        .collect();
    let mut origin = engine
        .store()
        .plan_origin(&parent.plan_id)?
        .ok_or_else(|| {
            RunError::Invalid(format!("plan {} has no recorded action", parent.plan_id))
        })?;
    origin.script = None;
    let mut root = Decision::new(child.plan_id, DecisionType::PromptDefinition, guidance, now);
    root.question = Some("What should this follow-up plan fix?".into());
    root.rationale = Some(format!(
        "appended by a correction of decision {} ({}) in plan {}",
        target.decision_id, target.chosen_option, parent.plan_id
    ));
    root.is_correction = true;
    root.corrects_decision_id = Some(target.decision_id);
    root.correction_reason = Some(guidance.to_string());
    root.context_snapshot =
        json!({"parent_plan_id": parent.plan_id, "corrects": target.decision_id});
    child.decision_root_id = Some(root.decision_id);
    engine
        .store_mut()
        .create_plan(&child, &projects, &origin, &[], None, &bases, None, None)?;
    let attempt = CorrectionAttempt {
        attempt_id: Id::generate(),
        plan_id: parent.plan_id,
        original_decision_id: target.decision_id,
        new_decision_id: Some(root.decision_id),
        mode: "append".into(),
        plan_attempt: Some(parent.status.attempt),
        original: json!({"phase": parent.phase(), "state": parent.state()}),
        correction_reason: Some(guidance.to_string()),
        status: AttemptStatus::Completed,
        result: json!({"child_plan_id": child.plan_id, "bases": bases}),
        created_at: now,
        completed_at: Some(now),
    };
    {
        let tx = engine.store_mut().conn_mut().transaction()?;
        crate::store::decisions::insert_in(&tx, &root)?;
        tx.execute(
            "INSERT OR IGNORE INTO decision_dependencies VALUES (?1, ?2, 'plan', ?3)",
            rusqlite::params![
                target.decision_id.to_string(),
                root.decision_id.to_string(),
                child.plan_id.to_string()
            ],
        )?;
        insert_attempt_in(&tx, &attempt)?;
        crate::events::append(
            &tx,
            Some(&parent.plan_id),
            &crate::events::EventKind::StateChanged(
                crate::domain::event::StateChanged::Correction(
                    crate::domain::event::state::Correction {
                        reason: "correction".into(),
                        mode: "append".into(),
                        attempt_id: attempt.attempt_id.to_string(),
                        attempt: None,
                        child_plan_id: Some(child.plan_id.to_string()),
                        corrects: target.decision_id.to_string(),
                        new_decision_id: None,
                        superseded: None,
                        new_decisions: None,
                        steps_rerun: None,
                        steps_replayed: None,
                        phase: None,
                        state: None,
                    },
                ),
            ),
        )?;
        tx.commit()?;
    }
    engine.flush(&parent.plan_id)?;
    let driven = driver::drive(engine, &child.plan_id, Goal::Continue)?;
    let root = engine.store().decision(&root.decision_id)?.unwrap_or(root);
    Ok(Appended {
        child: driven.plan.clone(),
        root,
        attempt,
        bases,
        driven: Some(driven),
    })
}
