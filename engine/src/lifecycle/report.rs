//! What `plan status` and `plan errors` show beyond the plan row (spec section 27,
//! spec section 27, "error recovery"): who runs the plan, why it waits, its steps, its
//! pending approvals, tokens and cost, its errors with retry history and recovery hints.

use jiff::Timestamp;
use serde::Serialize;
use serde_json::{Value, json};

use super::gates::{Gates, NOT_YET_SUPPORTED};
use crate::domain::approval::Approval;
use crate::domain::decision::DecisionType;
use crate::domain::{Id, Next, Plan};
use crate::events::{self, EventKind};
use crate::lease::{self, Lease};
use crate::store::lifecycle_run::PlanStep;
use crate::store::model_calls::UsageRollup;
use crate::store::{Store, StoreError};

/// One error of a plan, from its `plan_errored` events.
#[derive(Debug, Clone, PartialEq, Serialize, serde::Deserialize, schemars::JsonSchema)]
pub struct ErrorEntry {
    /// Event sequence.
    pub seq: i64,
    /// When it happened.
    pub at: Timestamp,
    /// The phase it happened in.
    pub phase: Value,
    /// Error code.
    pub code: String,
    /// What failed.
    pub message: String,
    /// Details (actor, step, output).
    pub details: Value,
}

/// A plan's status beyond its row.
#[derive(Debug, Clone, Serialize)]
pub struct Status {
    /// The live lease (who runs it now), if any.
    pub running_in: Option<Lease>,
    /// Why it is in its state (`interrupted`, `awaiting_decision`, `cancelled`, ...).
    pub state_reason: Option<String>,
    /// Whether cancellation was requested.
    pub cancel_requested: bool,
    /// Pending approvals.
    pub approvals: Vec<Approval>,
    /// Execute's steps.
    pub steps: Vec<PlanStep>,
    /// Current decisions (not superseded).
    pub decisions: usize,
    /// Superseded decisions kept for audit.
    pub superseded_decisions: usize,
    /// Tokens and cost of every model call of the plan.
    pub usage: UsageRollup,
    /// Errors, oldest first.
    pub errors: Vec<ErrorEntry>,
    /// Profile flags the engine does not act on yet, and what happens instead.
    pub not_yet_supported: Vec<(String, String)>,
    /// The frozen flags.
    pub gates: Gates,
}

/// The errors of a plan, oldest first.
///
/// # Errors
/// [`StoreError`].
pub fn errors(store: &Store, plan_id: &Id) -> Result<Vec<ErrorEntry>, StoreError> {
    let mut out = Vec::new();
    let mut after = 0;
    loop {
        let batch = events::after(store, after, Some(plan_id), 500)?;
        let Some(last) = batch.last() else { break };
        after = last.seq;
        for e in &batch {
            let EventKind::PlanErrored(p) = &e.kind else {
                continue;
            };
            out.push(ErrorEntry {
                seq: e.seq,
                at: e.ts,
                phase: json!(p.phase),
                code: p.code.clone(),
                message: p.message.clone(),
                details: p.details.clone(),
            });
        }
        if batch.len() < 500 {
            break;
        }
    }
    Ok(out)
}

/// One recovery hint: what it does and the step that does it (the CLI renders the step as
/// the command a user runs, with `--data-dir` / `--config-path` when they were given).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, serde::Deserialize, schemars::JsonSchema)]
pub struct Hint {
    /// What the step does, for a human.
    pub what: String,
    /// The step; a template when it needs a value the user fills in (guidance).
    pub next: Next,
}

impl Hint {
    /// A hint: `what` the step does, and the step.
    pub fn new(what: impl Into<String>, next: Next) -> Self {
        Self {
            what: what.into(),
            next,
        }
    }
}

/// What a user can do about an errored plan: only commands that its phase accepts. Strategize
/// and Execute resume with `plan execute` or `plan prompt`; Apply is retried with `plan apply`
/// (the other two refuse a plan at Apply). A failed step's output is in `plan logs`.
pub fn recovery_hints(plan: &Plan) -> Vec<Hint> {
    let mut hints = phase_recovery_hints(plan);
    // `plan prompt` is offered only to a plan with an actor that reads guidance.
    if !guidance_heard(plan) {
        hints.retain(|h| !matches!(h.next, Next::PromptPlan { .. }));
    }
    hints
}

/// Whether one of `plan`'s actors can act on guidance: not when its strategist and executor
/// are both offline built-ins (the checklist strategist and the script executor follow the
/// action as written).
pub fn guidance_heard(plan: &Plan) -> bool {
    use crate::registry::actors::{CHECKLIST_STRATEGIST, SCRIPT_EXECUTOR};
    !(plan.execution_actor.as_deref() == Some(SCRIPT_EXECUTOR)
        && plan.strategy_actor.as_deref() == Some(CHECKLIST_STRATEGIST))
}

fn phase_recovery_hints(plan: &Plan) -> Vec<Hint> {
    let plan_id = plan.plan_id;
    let code = plan.error_code.as_deref().unwrap_or_default();
    let cancel = Hint::new(
        "give up (the sandbox is kept)",
        Next::CancelPlan { plan: plan_id },
    );
    if plan.phase() == crate::domain::Phase::Apply {
        let apply = Next::ApplyPlan { plan: plan_id };
        return match code {
            "APPLY_JOURNAL" => vec![
                Hint::new(
                    "see what stopped the apply",
                    Next::PlanErrors { plan: plan_id },
                ),
                Hint::new("complete the interrupted apply", apply),
                cancel,
            ],
            _ => vec![
                Hint::new(
                    "see what the plan changes",
                    Next::PlanDiff { plan: plan_id },
                ),
                Hint::new("fix what the error names, then apply again", apply),
                cancel,
            ],
        };
    }
    let retry = Next::ExecutePlan { plan: plan_id };
    let prompt = Next::PromptPlan { plan: plan_id };
    match code {
        "ACTOR_UNAVAILABLE" => vec![
            Hint::new(
                "check the actor (and that its provider's API key is set)",
                Next::ListActors,
            ),
            Hint::new("retry", retry),
            cancel,
        ],
        "TRANSIENT_FAILURE" => vec![
            Hint::new("retry (the provider failed transiently)", retry),
            cancel,
        ],
        "ACTOR_FAILED" | "NO_STRATEGY" => vec![
            Hint::new(
                "give the actor guidance (in place of <guidance>) and resume",
                prompt,
            ),
            Hint::new("retry as is", retry),
            cancel,
        ],
        "STEP_FAILED" | "VALIDATION_FAILED" => vec![
            Hint::new("read the steps' output", Next::PlanLogs { plan: plan_id }),
            Hint::new(
                "give guidance (in place of <guidance>) and resume from the start of the failed step",
                prompt,
            ),
            Hint::new("retry the step", retry),
            cancel,
        ],
        _ => vec![
            Hint::new("see the errors", Next::PlanErrors { plan: plan_id }),
            Hint::new("retry", retry),
            Hint::new("give guidance (in place of <guidance>) and resume", prompt),
            cancel,
        ],
    }
}

/// A plan's status beyond its row.
///
/// # Errors
/// [`StoreError`].
pub fn status(store: &Store, plan: &Plan) -> Result<Status, StoreError> {
    let id = &plan.plan_id;
    let running_in =
        lease::holder(store, id)?.filter(|l| !l.is_stale(Timestamp::now(), &lease::host_name()));
    let decisions = store.decisions(id)?;
    let current = decisions
        .iter()
        .filter(|d| d.is_current() && d.decision_type != DecisionType::UserIntervention)
        .count();
    Ok(Status {
        running_in,
        state_reason: store.plan_state_reason(id)?,
        cancel_requested: lease::cancel_requested(store, id)?,
        approvals: store.pending_approvals(Some(id))?,
        steps: store.plan_steps(id)?,
        decisions: current,
        superseded_decisions: decisions.iter().filter(|d| !d.is_current()).count(),
        usage: store.usage_for_plan(id)?,
        errors: errors(store, id)?,
        not_yet_supported: NOT_YET_SUPPORTED
            .iter()
            .map(|(f, w)| ((*f).to_string(), (*w).to_string()))
            .collect(),
        gates: Gates::of(plan),
    })
}
