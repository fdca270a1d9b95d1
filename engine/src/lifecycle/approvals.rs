//! Where a human must act: phase gates, decisions, errored plans.
//! Each is a persisted `apr_` row with its kind, context, options and the command that answers
//! it; answering writes the answer and its event in one transaction.
//!
//! - phase gates are answered by `plan execute` / `plan apply` (the driver resolves them) and
//!   declined by `plan reject` (the plan stays complete; the rejection is recorded);
//! - decisions by `plan decide APR --option N` (the chosen option is recorded) or
//!   `--guidance TEXT` / `plan reject APR --reason TEXT` (the actor decides again with that
//!   guidance);
//! - errored plans (and `error_recovery`, raised when a child plan's results conflict with
//!   its parent's sandbox) by `plan decide APR --option 1` (retry: `plan execute`) or
//!   `--option 2` (cancel), or `plan reject` (cancel);
//! - child spawns (`child_spawn`, when `auto_child_plans` is false) by `plan decide APR
//!   --option spawn` (1) or `--option skip` (2), or `plan reject` (skip);
//! - tool calls that need approval (`tool_approval`) by `plan decide APR --option approve`
//!   (1: the call runs) or `--option reject` (2), or `plan reject APR --reason TEXT` (the
//!   model is told the call was refused, and why);
//! - invariant violations (`invariant_violation`) by `plan decide APR --option accept` (1),
//!   `correct` (2: names the `plan correct` command) or `cancel` (3), or `plan reject`
//!   (cancel); see [`super::invariant_checks`].

use jiff::Timestamp;
use serde::Serialize;
use serde_json::{Value, json};

use super::invariant_checks::{correct_step, pending_violations};
use super::report::Hint;
use super::state::{self, commit};
use super::{Lifecycle, RunError};
use crate::domain::approval::{Approval, ApprovalKind, ApprovalStatus};
use crate::domain::decision::{Decision, DecisionType};
use crate::domain::event::state::{ChildSpawnAnswered, Transition};
use crate::domain::event::{PlanCancelled, StateChanged};
use crate::domain::{Phase, Plan, ProcessingState};
use crate::events::EventKind;
use crate::store::{approvals, decisions};

/// An answer to an approval.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize, schemars::JsonSchema)]
pub enum Answer {
    /// Option N (1-based).
    Option(usize),
    /// Free-text guidance.
    Guidance(String),
    /// A rejection with its reason.
    Reject(String),
    /// Higher budget limits (a `budget` approval); the limits not named stay.
    Budget(crate::actors::budget::PlanBudget),
}

/// What answering did, and whether the plan should be driven on.
#[derive(Debug, Clone, PartialEq, Serialize, serde::Deserialize, schemars::JsonSchema)]
pub struct Answered {
    /// The approval as it is now.
    pub approval: Approval,
    /// What changed, in words.
    pub effect: String,
    /// A step the user takes first for the effect to happen (`correct` on an invariant
    /// violation: the `plan correct` that withdraws the approval); the face writes it before
    /// the effect.
    pub first: Option<super::report::Hint>,
    /// Whether the driver should continue the plan now.
    pub resume: bool,
}

/// Which phase a gate opens.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Gate {
    /// Start Strategize (`auto_strategize` is false).
    Strategize,
    /// Enter Execute (`auto_execute` is false).
    Execute,
    /// Apply (`auto_apply` is false).
    Apply,
}

impl Gate {
    fn name(self) -> &'static str {
        match self {
            Gate::Strategize => "strategize",
            Gate::Execute => "execute",
            Gate::Apply => "apply",
        }
    }
}

/// Raises the phase gate `gate` for a plan, or returns the pending one already raised.
///
/// # Errors
/// [`RunError`].
pub fn raise_gate(engine: &mut Lifecycle, plan: &Plan, gate: Gate) -> Result<Approval, RunError> {
    let id = plan.plan_id;
    if let Some(a) = engine
        .store()
        .pending_approvals(Some(&id))?
        .into_iter()
        .find(|a| a.kind == ApprovalKind::PhaseGate && a.context["gate"] == gate.name())
    {
        return Ok(a);
    }
    // The apply gate says how much it asks about, as `plan diff` counts it.
    let changes = match gate {
        Gate::Apply => Some(super::trees::reviewable_changes(engine, plan)?),
        _ => None,
    };
    let summary = match (gate, &changes) {
        (Gate::Strategize, _) => format!("Start Strategize for plan {id}"),
        (Gate::Execute, _) => format!("Review the strategy and start Execute for plan {id}"),
        (Gate::Apply, Some(c)) if c.files_changed > 0 => format!(
            "Review the changes ({} file(s) changed, +{} -{}) and apply plan {id}",
            c.files_changed, c.additions, c.deletions
        ),
        (Gate::Apply, _) => format!("Review the changes (no file changed) and apply plan {id}"),
    };
    // The answer (`plan execute`, `plan apply` for the apply gate) follows from the context's
    // `gate` (`Approval::next`).
    let mut a = Approval::new(id, ApprovalKind::PhaseGate, summary, Timestamp::now());
    a.context = json!({
        "gate": gate.name(),
        "phase": plan.phase(),
        "state": plan.state(),
        "automation_profile": plan.automation_profile,
        "flag": match gate { Gate::Strategize => "auto_strategize", Gate::Execute => "auto_execute", Gate::Apply => "auto_apply" },
    });
    if gate == Gate::Execute {
        // The estimation step after Strategize: informational, shown at the gate.
        let e = super::estimator::current(engine.store(), plan)?;
        a.context["estimate"] = json!(e);
    }
    a.options = vec!["approve".into()];
    if gate == Gate::Apply {
        // The trees the user reviews now are the ones Apply commits (spec section 13).
        a.context["trees"] = super::trees::reviewable_trees(engine, plan)?;
        a.context["changes"] = json!(changes.unwrap_or_default());
    }
    engine.store_mut().insert_approval(&a)?;
    engine.flush(&id)?;
    Ok(a)
}

/// Answers a `tool_approval`: option 1 (`approve`) lets the call run when the step
/// continues; option 2 (`reject`), a rejection or guidance refuse it, and the model is told
/// why. Either way the step continues.
fn answer_tool(
    engine: &mut Lifecycle,
    approval: &Approval,
    plan: &mut Plan,
    answer: &Answer,
) -> Result<(String, bool), RunError> {
    let id = approval.approval_id.as_str();
    let tool = approval.context["tool"].as_str().unwrap_or("?").to_string();
    let (status, recorded, effect) = match answer {
        Answer::Option(1) => (
            ApprovalStatus::Approved,
            json!({"option": "approve"}),
            format!("the call to {tool} runs when the step continues"),
        ),
        Answer::Option(2) => (
            ApprovalStatus::Rejected,
            json!({"option": "reject"}),
            format!("the call to {tool} is refused; the execution actor is told so"),
        ),
        Answer::Reject(reason) | Answer::Guidance(reason) => (
            ApprovalStatus::Rejected,
            json!({"option": "reject", "reason": reason}),
            format!("the call to {tool} is refused: {reason}"),
        ),
        Answer::Option(n) => {
            return Err(RunError::Invalid(format!(
                "--option {n} is out of range: approval {id} has options 1 (approve) and 2 (reject)"
            )));
        }
        Answer::Budget(_) => {
            return Err(RunError::Invalid(format!(
                "approval {id} asks whether {tool} may run; answer it with --option approve|reject"
            )));
        }
    };
    let tx_plan = plan.clone();
    commit(
        engine.store_mut(),
        plan,
        EventKind::StateChanged(StateChanged::Transition(Transition {
            approval_id: Some(id.to_owned()),
            tool_approval: Some(recorded["option"].clone()),
            tool: Some(tool.to_string()),
            ..Transition::at(tx_plan.phase(), tx_plan.state())
        })),
        |tx| approvals::resolve_in(tx, id, status, &recorded).map(|_| ()),
    )?;
    Ok((effect, true))
}

fn find(engine: &Lifecycle, approval_id: &str) -> Result<Approval, RunError> {
    engine
        .store()
        .approval(approval_id)?
        .ok_or_else(|| RunError::ApprovalNotFound(approval_id.to_string()))
}

fn user_intervention(plan: &Plan, parent: Option<&Decision>, text: &str) -> Decision {
    let mut d = Decision::new(
        plan.plan_id,
        DecisionType::UserIntervention,
        text,
        Timestamp::now(),
    );
    d.attempt = plan.status.attempt;
    d.parent_decision_id = parent.map(|p| p.decision_id).or(plan.decision_root_id);
    d.question = parent
        .and_then(|p| p.question.clone())
        .or_else(|| Some("Guidance from the user".into()));
    d.rationale = Some("given by the user".into());
    d
}

/// Answers an approval (`plan decide`, `plan reject`). Answering one that is no longer pending
/// is refused, naming how it was resolved.
///
/// # Errors
/// [`RunError::ApprovalNotFound`], [`RunError::Invalid`] (option out of range, an answer that
/// does not fit the kind), store errors.
pub fn answer(
    engine: &mut Lifecycle,
    approval_id: &str,
    answer: Answer,
) -> Result<Answered, RunError> {
    let approval = find(engine, approval_id)?;
    if approval.status != ApprovalStatus::Pending {
        return Err(RunError::Invalid(format!(
            "approval {approval_id} is already {}; nothing to answer",
            approval.status
        )));
    }
    let mut plan = engine.plan(&approval.plan_id)?;
    let errored = |k| {
        matches!(
            k,
            ApprovalKind::Errored | ApprovalKind::TransientFailure | ApprovalKind::ErrorRecovery
        )
    };
    let mut first = None;
    let (effect, resume) = match (approval.kind, &answer) {
        (ApprovalKind::PhaseGate, Answer::Reject(reason)) => {
            reject_gate(engine, &approval, &mut plan, reason)?
        }
        (ApprovalKind::PhaseGate, _) => {
            return Err(RunError::GateAnswer {
                approval_id: approval_id.to_string(),
                approve: approval.next(),
            });
        }
        (ApprovalKind::Decision, Answer::Option(n)) => {
            choose_option(engine, &approval, &mut plan, *n)?
        }
        (ApprovalKind::Decision, Answer::Guidance(text) | Answer::Reject(text)) => {
            let rejected = matches!(answer, Answer::Reject(_));
            guide_decision(engine, &approval, &mut plan, text, rejected)?
        }
        (ApprovalKind::ChildSpawn, Answer::Option(n)) if *n == 1 || *n == 2 => {
            answer_spawn(engine, &approval, &mut plan, *n == 1, None)?
        }
        (ApprovalKind::ChildSpawn, Answer::Reject(reason)) => {
            answer_spawn(engine, &approval, &mut plan, false, Some(reason))?
        }
        (ApprovalKind::ToolApproval, _) => answer_tool(engine, &approval, &mut plan, &answer)?,
        (ApprovalKind::InvariantViolation, _) => {
            let (effect, resume, hint) = answer_violation(engine, &approval, &mut plan, &answer)?;
            first = hint;
            (effect, resume)
        }
        (ApprovalKind::Budget, Answer::Budget(new)) => {
            raise_budget(engine, &approval, &mut plan, *new)?
        }
        (ApprovalKind::Budget, Answer::Option(1)) => {
            return Err(RunError::BudgetLimitMissing {
                approval_id: approval_id.to_string(),
            });
        }
        (ApprovalKind::Budget, Answer::Option(2) | Answer::Reject(_)) => {
            let reason = match &answer {
                Answer::Reject(r) => r.clone(),
                _ => "cancelled at the budget limit".into(),
            };
            cancel_now(engine, &mut plan, &reason)?;
            (format!("the plan is cancelled: {reason}"), false)
        }
        (kind, Answer::Option(1)) if errored(kind) => {
            ("retry: the plan's phase runs again".into(), true)
        }
        (kind, Answer::Option(2) | Answer::Reject(_)) if errored(kind) => {
            let reason = match &answer {
                Answer::Reject(r) => r.clone(),
                _ => "cancelled from the errored approval".into(),
            };
            cancel_now(engine, &mut plan, &reason)?;
            (format!("the plan is cancelled: {reason}"), false)
        }
        (ApprovalKind::Errored | ApprovalKind::ErrorRecovery, Answer::Guidance(text)) => {
            let d = user_intervention(&plan, None, text);
            let tx_plan = plan.clone();
            commit(
                engine.store_mut(),
                &mut plan,
                EventKind::StateChanged(StateChanged::Transition(Transition {
                    guidance: Some(text.clone()),
                    ..Transition::at(tx_plan.phase(), tx_plan.state())
                })),
                |tx| decisions::insert_in(tx, &d).map(|_| ()),
            )?;
            (
                format!("guidance recorded; the phase runs again with it: {text}"),
                true,
            )
        }
        (kind, a) => {
            return Err(RunError::Invalid(format!(
                "approval {approval_id} ({kind}) cannot be answered with {a:?}; options: {}",
                approval.options.join(", ")
            )));
        }
    };
    engine.flush(&plan.plan_id)?;
    Ok(Answered {
        approval: find(engine, approval_id)?,
        effect,
        first,
        resume,
    })
}

/// What answering one approval did, in words, and whether the plan is driven on.
type Effect = (String, bool);

/// A rejected phase gate: the gate stays closed and the rejection is recorded.
fn reject_gate(
    engine: &mut Lifecycle,
    approval: &Approval,
    plan: &mut Plan,
    reason: &str,
) -> Result<Effect, RunError> {
    let approval_id = approval.approval_id.as_str();
    let status_plan = plan.clone();
    commit(
        engine.store_mut(),
        plan,
        EventKind::StateChanged(StateChanged::Transition(Transition {
            reason: Some("gate_rejected".into()),
            approval_id: Some(approval_id.to_owned()),
            ..Transition::at(status_plan.phase(), status_plan.state())
        })),
        |tx| {
            approvals::resolve_in(
                tx,
                approval_id,
                ApprovalStatus::Rejected,
                &json!({"reason": reason}),
            )?;
            state::reason(tx, &status_plan, Some("gate_rejected"))
        },
    )?;
    let effect = format!(
        "the gate stays closed: the plan stays at {}/{} and the rejection is recorded",
        plan.phase(),
        plan.state()
    );
    Ok((effect, false))
}

/// Option `n` of a decision approval: the decision is chosen again; the plan goes on once no
/// other decision waits.
fn choose_option(
    engine: &mut Lifecycle,
    approval: &Approval,
    plan: &mut Plan,
    n: usize,
) -> Result<Effect, RunError> {
    let approval_id = approval.approval_id.as_str();
    if n == 0 || n > approval.options.len() {
        return Err(RunError::Invalid(format!(
            "--option {n} is out of range: approval {approval_id} has options 1 to {}",
            approval.options.len()
        )));
    }
    let decision_id: crate::domain::Id = approval.context["decision_id"]
        .as_str()
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| RunError::Invalid(format!("approval {approval_id} names no decision")))?;
    let chosen = approval.options[n - 1].clone();
    let alternatives: Vec<String> = approval
        .options
        .iter()
        .enumerate()
        .filter(|(i, _)| *i != n - 1)
        .map(|(_, o)| o.clone())
        .collect();
    let tx_plan = plan.clone();
    commit(
        engine.store_mut(),
        plan,
        EventKind::StateChanged(StateChanged::Transition(Transition {
            decision_id: Some(decision_id.to_string()),
            chosen_option: Some(chosen.clone()),
            ..Transition::at(tx_plan.phase(), tx_plan.state())
        })),
        |tx| {
            decisions::rechoose_in(
                tx,
                &decision_id,
                &chosen,
                &alternatives,
                &format!(
                    "chosen by the user (option {n} of {})",
                    approval.options.len()
                ),
            )?;
            approvals::resolve_in(
                tx,
                approval_id,
                ApprovalStatus::Answered,
                &json!({"option": n, "chosen_option": chosen}),
            )?;
            Ok(())
        },
    )?;
    let resume = engine
        .store()
        .pending_approvals(Some(&plan.plan_id))?
        .iter()
        .all(|a| a.kind != ApprovalKind::Decision);
    Ok((format!("recorded option {n}: {chosen}"), resume))
}

/// Guidance for (or a rejection of) a decision approval: a `user_intervention` decision, the
/// other open decisions withdrawn, and the actor decides again with it.
fn guide_decision(
    engine: &mut Lifecycle,
    approval: &Approval,
    plan: &mut Plan,
    text: &str,
    rejected: bool,
) -> Result<Effect, RunError> {
    let approval_id = approval.approval_id.as_str();
    let decision_id: Option<crate::domain::Id> = approval.context["decision_id"]
        .as_str()
        .and_then(|s| s.parse().ok());
    let parent = decision_id
        .map(|d| engine.store().decision(&d))
        .transpose()?
        .flatten();
    let d = user_intervention(plan, parent.as_ref(), text);
    let (status, key) = if rejected {
        (ApprovalStatus::Rejected, "reason")
    } else {
        (ApprovalStatus::Answered, "guidance")
    };
    let tx_plan = plan.clone();
    commit(
        engine.store_mut(),
        plan,
        // A rejection's reason takes the place of `redecide` (the row has always read so).
        EventKind::StateChanged(StateChanged::Transition(Transition {
            reason: Some(if rejected {
                text.to_owned()
            } else {
                "redecide".into()
            }),
            guidance: (!rejected).then(|| text.to_owned()),
            ..Transition::at(tx_plan.phase(), tx_plan.state())
        })),
        |tx| {
            decisions::insert_in(tx, &d)?;
            approvals::resolve_in(tx, approval_id, status, &json!({key: text}))?;
            // The other open decisions are decided again with the guidance too.
            state::resolve_pending(
                tx,
                &tx_plan,
                Some("decision"),
                ApprovalStatus::Withdrawn,
                &json!({"reason": "the strategy is decided again with the user's guidance"}),
            )?;
            state::reason(tx, &tx_plan, Some("redecide"))
        },
    )?;
    let effect = if approval.context["phase"] == "execute" {
        format!("the execution actor continues with the guidance: {text}")
    } else {
        format!("the strategy actor decides again with the guidance: {text}")
    };
    Ok((effect, true))
}

/// A child-spawn approval answered: spawn, or skip (with the reason of a rejection). The
/// spawn step goes on once no other spawn waits.
fn answer_spawn(
    engine: &mut Lifecycle,
    approval: &Approval,
    plan: &mut Plan,
    spawn: bool,
    reason: Option<&str>,
) -> Result<Effect, RunError> {
    let approval_id = approval.approval_id.as_str();
    let option = if spawn { "spawn" } else { "skip" };
    let status = if spawn {
        ApprovalStatus::Approved
    } else {
        ApprovalStatus::Rejected
    };
    let tx_plan = plan.clone();
    let event = EventKind::StateChanged(StateChanged::ChildSpawnAnswered(ChildSpawnAnswered {
        phase: tx_plan.phase(),
        state: tx_plan.state(),
        approval_id: approval_id.to_owned(),
        child_spawn: option.into(),
        reason: reason.map(str::to_owned),
    }));
    let mut resolution = json!({"option": option});
    if let Some(r) = reason {
        resolution["reason"] = json!(r);
    }
    commit(engine.store_mut(), plan, event, |tx| {
        approvals::resolve_in(tx, approval_id, status, &resolution).map(|_| ())
    })?;
    let action = approval.context["action"].as_str().unwrap_or("?");
    let effect = match (spawn, reason) {
        (true, _) => format!("the child plan of {action} will be spawned"),
        (false, None) => format!("the spawn of {action} is skipped"),
        (false, Some(r)) => format!("the spawn is skipped: {r}"),
    };
    let resume = engine
        .store()
        .pending_approvals(Some(&plan.plan_id))?
        .iter()
        .all(|a| a.kind != ApprovalKind::ChildSpawn);
    Ok((effect, resume))
}

/// Higher budget limits for a `budget` approval: refused unless above what the plan has
/// spent; the plan's phase runs again.
fn raise_budget(
    engine: &mut Lifecycle,
    approval: &Approval,
    plan: &mut Plan,
    new: crate::actors::budget::PlanBudget,
) -> Result<Effect, RunError> {
    let approval_id = approval.approval_id.as_str();
    let old = engine.store().plan_budget(&plan.plan_id)?;
    let budget = old.raised(new);
    let spent = engine.store().usage_for_plan(&plan.plan_id)?;
    let still_over = budget
        .max_cost_usd
        .is_some_and(|m| m <= spent.priced_cost_usd)
        || budget
            .max_tokens
            .is_some_and(|m| m <= spent.input_tokens + spent.output_tokens);
    if still_over {
        return Err(RunError::Invalid(format!(
            "the plan has already spent ${:.4} and {} tokens; give a limit above that",
            spent.priced_cost_usd,
            spent.input_tokens + spent.output_tokens
        )));
    }
    engine
        .store_mut()
        .set_plan_budget(&plan.plan_id, &budget, "approval")?;
    let tx_plan = plan.clone();
    commit(
        engine.store_mut(),
        plan,
        EventKind::StateChanged(StateChanged::Transition(Transition {
            approval_id: Some(approval_id.to_owned()),
            budget: Some(budget),
            ..Transition::at(tx_plan.phase(), tx_plan.state())
        })),
        |tx| {
            approvals::resolve_in(
                tx,
                approval_id,
                ApprovalStatus::Approved,
                &json!({"budget": budget}),
            )
            .map(|_| ())
        },
    )?;
    let effect = format!(
        "the budget is now {}; the plan's phase runs again",
        describe_budget(&budget)
    );
    Ok((effect, true))
}

/// `max-cost-usd $X, max-tokens N` (the limits set), or `no limit`.
pub fn describe_budget(b: &crate::actors::budget::PlanBudget) -> String {
    let mut parts = Vec::new();
    if let Some(c) = b.max_cost_usd {
        parts.push(format!("max-cost-usd ${c}"));
    }
    if let Some(t) = b.max_tokens {
        parts.push(format!("max-tokens {t}"));
    }
    if parts.is_empty() {
        "no limit".into()
    } else {
        parts.join(", ")
    }
}

/// Answers an `invariant_violation`: 1 `accept` (once: the plan goes on once no other
/// violation waits), 2 `correct` (nothing changes; the effect names the `plan correct` command,
/// which withdraws the approval), 3 `cancel` or a rejection (the plan is cancelled).
///
/// # Errors
/// [`RunError::Invalid`] for guidance or an option out of range; store errors.
fn answer_violation(
    engine: &mut Lifecycle,
    approval: &Approval,
    plan: &mut Plan,
    answer: &Answer,
) -> Result<(String, bool, Option<Hint>), RunError> {
    let id = approval.approval_id.as_str();
    let text = approval.context["invariant"].as_str().unwrap_or("?");
    // Options are answered by their place in the approval's list, which leaves `correct` out
    // where the plan's executor cannot act on guidance: read each by its name.
    let named = match answer {
        Answer::Option(n) => match n.checked_sub(1).and_then(|i| approval.options.get(i)) {
            Some(o) if o == "accept" => Answer::Option(1),
            Some(o) if o == "correct" => Answer::Option(2),
            Some(o) if o == "cancel" => Answer::Option(3),
            _ => Answer::Option(usize::MAX),
        },
        other => other.clone(),
    };
    match &named {
        Answer::Option(1) => {
            let tx_plan = plan.clone();
            commit(
                engine.store_mut(),
                plan,
                EventKind::StateChanged(StateChanged::Transition(Transition {
                    approval_id: Some(id.to_owned()),
                    invariant_violation: Some("accepted".into()),
                    invariant_id: Some(approval.context["invariant_id"].clone()),
                    ..Transition::at(tx_plan.phase(), tx_plan.state())
                })),
                |tx| {
                    approvals::resolve_in(
                        tx,
                        id,
                        ApprovalStatus::Approved,
                        &json!({"option": "accept", "at": Timestamp::now().to_string()}),
                    )
                    .map(|_| ())
                },
            )?;
            let waiting = pending_violations(engine.store(), &plan.plan_id)?;
            let effect = match waiting.as_slice() {
                [] => format!("the violation of `{text}` is accepted once; the plan goes on"),
                rest => format!(
                    "the violation of `{text}` is accepted once; the plan goes on when {} more waiting violation(s) are answered: {}",
                    rest.len(),
                    rest.iter()
                        .map(|a| a.approval_id.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            };
            Ok((effect, waiting.is_empty(), None))
        }
        Answer::Option(2) => Ok((
            "the correction withdraws this approval and re-runs the step (the plan waits until then)"
                .into(),
            false,
            Some(Hint::new("to correct the step", correct_step(approval))),
        )),
        Answer::Option(3) | Answer::Reject(_) => {
            let reason = match answer {
                Answer::Reject(r) => r.clone(),
                _ => format!("cancelled at the violation of invariant `{text}`"),
            };
            cancel_now(engine, plan, &reason)?;
            Ok((format!("the plan is cancelled: {reason}"), false, None))
        }
        Answer::Option(_) => Err(RunError::Invalid(format!(
            "--option {} is out of range: approval {id} has options {}",
            match answer {
                Answer::Option(n) => n.to_string(),
                _ => String::new(),
            },
            approval
                .options
                .iter()
                .enumerate()
                .map(|(i, o)| format!("{} ({o})", i + 1))
                .collect::<Vec<_>>()
                .join(", ")
        ))),
        Answer::Guidance(_) | Answer::Budget(_) => Err(RunError::Invalid(format!(
            "approval {id} asks about a violated invariant; answer it with --option accept|correct|cancel"
        ))),
    }
}

/// Cancels a plan nobody is driving: (phase, cancelled), pending approvals withdrawn, a
/// `plan_cancelled` event, all in one transaction. The sandbox is kept.
///
/// # Errors
/// [`RunError::WrongState`] for applied or already cancelled plans.
pub fn cancel_now(engine: &mut Lifecycle, plan: &mut Plan, reason: &str) -> Result<(), RunError> {
    if plan.phase() == Phase::Applied || plan.state() == ProcessingState::Cancelled {
        return Err(RunError::WrongState {
            phase: plan.phase(),
            state: plan.state(),
            message: format!(
                "plan {} is {}/{}, which is final; there is nothing to cancel",
                plan.plan_id,
                plan.phase(),
                plan.state()
            ),
            hints: Vec::new(),
        });
    }
    state::set_state(plan, ProcessingState::Cancelled)?;
    plan.completed_at = Some(Timestamp::now());
    let snapshot = plan.clone();
    let reason_v: Value = json!(reason);
    commit(
        engine.store_mut(),
        plan,
        EventKind::PlanCancelled(PlanCancelled {
            phase: snapshot.phase(),
            reason: reason.to_owned(),
            project_deleted: None,
        }),
        |tx| {
            state::resolve_pending(
                tx,
                &snapshot,
                None,
                ApprovalStatus::Withdrawn,
                &json!({"reason": "the plan was cancelled", "cancel_reason": reason_v}),
            )?;
            state::reason(tx, &snapshot, Some("cancelled"))
        },
    )?;
    engine.flush(&plan.plan_id)?;
    Ok(())
}

/// What `plan prompt` did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, serde::Deserialize, schemars::JsonSchema)]
pub struct Prompted {
    /// The approval the guidance answered, if any.
    pub answered: Option<String>,
    /// Whether the plan should be driven on now (it was errored or waiting for decisions).
    pub resume: bool,
}

/// `plan prompt PLAN TEXT`: records the guidance as a `user_intervention` decision. An errored
/// plan's `errored` approval and a waiting plan's decision approvals are answered with it, and
/// the plan resumes; at a phase gate the guidance is only recorded (the gate stays closed).
///
/// # Errors
/// [`RunError::WrongState`] for applied or cancelled plans.
pub fn prompt(
    engine: &mut Lifecycle,
    plan_id: &crate::domain::Id,
    text: &str,
) -> Result<Prompted, RunError> {
    let mut plan = engine.plan(plan_id)?;
    if plan.phase() == Phase::Applied || plan.state() == ProcessingState::Cancelled {
        return Err(RunError::WrongState {
            phase: plan.phase(),
            state: plan.state(),
            message: format!(
                "plan {plan_id} is {}/{}, which is final; guidance can no longer change it",
                plan.phase(),
                plan.state()
            ),
            hints: Vec::new(),
        });
    }
    let pending = engine.store().pending_approvals(Some(plan_id))?;
    let decision = pending
        .iter()
        .find(|a| a.kind == ApprovalKind::Decision)
        .cloned();
    if let Some(d) = decision {
        let answered = answer(engine, &d.approval_id, Answer::Guidance(text.to_string()))?;
        return Ok(Prompted {
            answered: Some(answered.approval.approval_id),
            resume: true,
        });
    }
    let errored = pending
        .iter()
        .find(|a| {
            matches!(
                a.kind,
                ApprovalKind::Errored | ApprovalKind::TransientFailure
            )
        })
        .cloned();
    let d = user_intervention(&plan, None, text);
    let tx_plan = plan.clone();
    let errored_id = errored.as_ref().map(|a| a.approval_id.clone());
    commit(
        engine.store_mut(),
        &mut plan,
        EventKind::StateChanged(StateChanged::Transition(Transition {
            guidance: Some(text.to_owned()),
            ..Transition::at(tx_plan.phase(), tx_plan.state())
        })),
        |tx| {
            decisions::insert_in(tx, &d)?;
            if let Some(id) = &errored_id {
                approvals::resolve_in(
                    tx,
                    id,
                    ApprovalStatus::Answered,
                    &json!({"guidance": text}),
                )?;
            }
            Ok(())
        },
    )?;
    engine.flush(plan_id)?;
    Ok(Prompted {
        resume: plan.state() == ProcessingState::Errored,
        answered: errored_id,
    })
}
