//! How each [`Op`] runs: the glue between the lifecycle, correction, registry and sandbox
//! modules that every face would otherwise repeat.

use std::time::Duration;

use jiff::Timestamp;

use super::op::{
    Answered, Cancelled, CorrectMode, Correction, Op, Outcome, Prompted, ReviewRequest, Reviewed,
    UseRequest, Used,
};
use super::{ApiError, Engine};
use crate::actors::budget::PlanBudget;
use crate::correction::{append, revert};
use crate::domain::Id;
use crate::lease;
use crate::lifecycle::approvals::{self as lc_approvals, Answer};
use crate::lifecycle::driver::{self, Goal};
use crate::lifecycle::{self, RunError};
use crate::registry::plan_use;
use crate::sandbox::CheckpointId;
use crate::sandbox::lifetime;

/// The plan a human's `op` acts on: from then on its events and its actors' work are
/// attributed to them.
fn plan_of(engine: &Engine, op: &Op) -> Result<Option<Id>, ApiError> {
    let store = engine.store()?;
    Ok(match op {
        Op::Execute { plan }
        | Op::Apply { plan, .. }
        | Op::Cancel { plan, .. }
        | Op::Rollback { plan, .. }
        | Op::Prompt { plan, .. } => Some(*plan),
        Op::Review(r) => Some(r.plan),
        Op::Export(x) => Some(x.plan),
        Op::Decide { approval, .. } | Op::Reject { approval, .. } => {
            store.approval(approval)?.map(|a| a.plan_id)
        }
        Op::Correct(c) => store.decision(&c.decision)?.map(|d| d.plan_id),
        Op::Use(_) | Op::Cleanup | Op::Registry(_) => None,
    })
}

/// Records the caller's approval of `plan`'s Apply and holds the Apply until as many humans
/// as the strictest of its organizations' `apply.min_approvals` approved; a plan that cannot
/// be applied (already applied, cancelled) records nothing and is refused by the lifecycle.
fn approve_apply(engine: &Engine, plan: &Id) -> Result<(), ApiError> {
    use crate::domain::{Phase, ProcessingState};
    let Some(found) = engine.store()?.plan(plan)? else {
        return Ok(());
    };
    if found.phase() == Phase::Applied || found.state() == ProcessingState::Cancelled {
        return Ok(());
    }
    let policies = engine.policies_for_plan(plan)?;
    let (org, need) = policies
        .strictest_min_approvals()
        .map(|(org, need)| (org.to_string(), need))
        .unwrap_or_default();
    super::apply_approvals::approve(engine, plan, &org, need)
}

/// Refuses the Apply of `plan`, before anything is recorded, while a policy binding it sets
/// `apply.require_all_hunks_marked` and some item of its review has no mark from anyone
/// (`reviewed` counts as a mark; `docs/review.md`). A plan that cannot be applied is left to
/// the lifecycle's refusal.
fn require_all_marked(engine: &Engine, plan: &Id) -> Result<(), ApiError> {
    let policies = engine.policies_for_plan(plan)?;
    let Some(org) = policies.org_requiring_all_hunks_marked() else {
        return Ok(());
    };
    let store = engine.store()?;
    let Some(found) = store.plan(plan)? else {
        return Ok(());
    };
    if found.status.is_terminal() {
        return Ok(());
    }
    let trees = crate::lifecycle::trees::reviewed_trees_in(&store, plan)?;
    let review = crate::review::load(&store, &engine.sandboxes(), &found, &trees)?;
    let unmarked = review.counts.pending;
    if unmarked == 0 {
        return Ok(());
    }
    let total = review.items().count();
    let verb = if unmarked == 1 { "has" } else { "have" };
    Err(crate::team::policy::PolicyDenial {
        org: org.to_string(),
        key: crate::team::policy::keys::REQUIRE_ALL_HUNKS_MARKED.to_string(),
        message: format!(
            "{unmarked} of {total} items {verb} no review mark from anyone; mark them with \
             `agents plan review {plan} --accept|--reject|--reviewed TARGET...` \
             (`agents plan review {plan}` lists them), then apply again"
        ),
    }
    .into())
}

/// Runs `op` on `engine` (see [`Engine::run`]).
pub(super) fn run(engine: &Engine, op: Op) -> Result<Outcome, ApiError> {
    if let Op::Apply { plan, .. } = &op {
        // Before the plan is attributed to the caller: a refused Apply records nothing.
        require_all_marked(engine, plan)?;
    }
    if engine.human().is_some()
        && let Some(plan) = plan_of(engine, &op)?
    {
        engine.store()?.drive_as_human(&plan)?;
    }
    match op {
        Op::Use(req) => use_action(engine, &req).map(|u| Outcome::Used(Box::new(u))),
        Op::Execute { plan } => drive(engine, &plan, Goal::Execute),
        Op::Apply {
            plan,
            no_commit,
            selection,
        } => {
            approve_apply(engine, &plan)?;
            let mut lc = engine.lifecycle()?;
            lc.set_apply_request(selection);
            let driven = driver::drive(&mut lc, &plan, Goal::Apply { no_commit })?;
            Ok(Outcome::Driven(Box::new(driven)))
        }
        Op::Cancel { plan, reason, wait } => cancel(engine, &plan, reason.as_deref(), wait),
        Op::Rollback { plan, checkpoint } => rollback(engine, &plan, &checkpoint),
        Op::Decide { approval, answer } => answer_approval(engine, &approval, answer),
        Op::Reject { approval, reason } => {
            answer_approval(engine, &approval, Answer::Reject(reason))
        }
        Op::Prompt { plan, text } => prompt(engine, &plan, &text),
        Op::Correct(c) => correct(engine, &c),
        Op::Cleanup => {
            let mut store = engine.store()?;
            let report = lifetime::cleanup(
                &mut store,
                &engine.sandboxes(),
                Timestamp::now(),
                engine.settings.sandbox_retention_days,
            )?;
            Ok(Outcome::CleanedUp(Box::new(report)))
        }
        Op::Review(r) => review(engine, &r),
        Op::Registry(r) => super::registry::run(engine, *r).map(|o| Outcome::Registry(Box::new(o))),
        Op::Export(r) => super::export::export(engine, &r).map(|e| Outcome::Exported(Box::new(e))),
    }
}

/// Marks the items `r` names against the review as it is now, then loads it again.
fn review(engine: &Engine, r: &ReviewRequest) -> Result<Outcome, ApiError> {
    let mut store = engine.store()?;
    let plan = store.plan(&r.plan)?.ok_or(RunError::NotFound(r.plan))?;
    if plan.status.is_terminal() {
        // Marks choose what Apply writes; an applied or cancelled plan applies nothing more.
        return Err(RunError::WrongState {
            phase: plan.phase(),
            state: plan.state(),
            message: format!(
                "plan {} is {}/{}: its review is closed, since nothing more will be applied",
                plan.plan_id,
                plan.phase(),
                plan.state()
            ),
            hints: vec![crate::domain::Next::PlanDiff { plan: plan.plan_id }],
        }
        .into());
    }
    let sandboxes = engine.sandboxes();
    let trees = crate::lifecycle::trees::reviewed_trees_in(&store, &plan.plan_id)?;
    let before = crate::review::load(&store, &sandboxes, &plan, &trees)?;
    let reason = match r.mark {
        crate::review::Mark::Pending => None,
        _ => r.reason.as_deref().filter(|t| !t.trim().is_empty()),
    };
    let marked = crate::review::mark(
        &mut store,
        &plan.plan_id,
        &before,
        &r.targets,
        r.mark,
        reason,
    )?;
    let review = crate::review::load(&store, &sandboxes, &plan, &trees)?;
    Ok(Outcome::Reviewed(Box::new(Reviewed { marked, review })))
}

fn drive(engine: &Engine, plan: &Id, op: Goal) -> Result<Outcome, ApiError> {
    let mut lc = engine.lifecycle()?;
    let driven = driver::drive(&mut lc, plan, op)?;
    Ok(Outcome::Driven(Box::new(driven)))
}

/// Creates the plan, records its budget, and runs it as far as its profile allows. The
/// policies binding the plan cap its `max-cost-usd` (a larger `--max-cost-usd` is refused
/// before anything is written; the configured budget is lowered to the cap; the cap is the
/// budget when none is set).
fn use_action(engine: &Engine, req: &UseRequest) -> Result<Used, ApiError> {
    let mut lc = engine.lifecycle()?;
    let data_dir = lc.paths().data_dir.clone();
    let created = plan_use::create(
        lc.store_mut(),
        &data_dir,
        &engine.settings.providers,
        &req.request,
        req.max_cost_usd,
    )?;
    let plan_id = created.plan.plan_id;
    let (mut budget, mut source) = if req.max_cost_usd.is_some() || req.max_tokens.is_some() {
        (
            PlanBudget {
                max_cost_usd: req.max_cost_usd.or(engine.settings.max_cost_usd),
                max_tokens: req.max_tokens.or(engine.settings.max_tokens),
            },
            "flag",
        )
    } else {
        (
            PlanBudget {
                max_cost_usd: engine.settings.max_cost_usd,
                max_tokens: engine.settings.max_tokens,
            },
            "config",
        )
    };
    if let Some(cap) = created.policies.cost_cap()
        && budget.max_cost_usd.is_none_or(|b| b > cap)
    {
        budget.max_cost_usd = Some(cap);
        source = "policy";
    }
    lc.store_mut().set_plan_budget(&plan_id, &budget, source)?;
    lc.flush(&plan_id)?;
    let checkout_warnings = checkout_warnings(lc.store(), &plan_id);
    let (driven, not_yet_supported) = match driver::drive(&mut lc, &plan_id, Goal::Continue) {
        Ok(d) => (Some(d), None),
        Err(RunError::NotYetSupported(what)) => (None, Some(what)),
        Err(e) => return Err(e.into()),
    };
    let plan = lc.plan(&plan_id)?;
    Ok(Used {
        created,
        plan,
        driven,
        not_yet_supported,
        checkout_warnings,
    })
}

/// What the plan will not see of the user's checkouts, said before anything runs.
fn checkout_warnings(store: &crate::store::Store, plan_id: &Id) -> Vec<String> {
    let Ok(bases) = store.plan_bases(plan_id) else {
        return Vec::new();
    };
    bases
        .iter()
        .filter(|b| b.base_commit.is_some())
        .filter_map(|b| {
            let pre = crate::sandbox::git_sandbox::preflight(std::path::Path::new(&b.path)).ok()?;
            Some(
                pre.warnings()
                    .into_iter()
                    .map(|w| format!("{}: {w}", b.resource_name))
                    .collect::<Vec<_>>(),
            )
        })
        .flatten()
        .collect()
}

fn cancel(
    engine: &Engine,
    plan: &Id,
    reason: Option<&str>,
    wait: Duration,
) -> Result<Outcome, ApiError> {
    let mut lc = engine.lifecycle()?;
    let was_running_in = lease::holder(lc.store(), plan)?;
    let plan = lifecycle::cancel::cancel(&mut lc, plan, reason, wait)?;
    Ok(Outcome::Cancelled(Box::new(Cancelled {
        plan,
        was_running_in,
    })))
}

/// Rolls back under the plan's lease: a live driver of the plan is a `CONFLICT`, and nothing
/// drives the plan while its sandboxes are being restored.
fn rollback(engine: &Engine, plan: &Id, checkpoint: &CheckpointId) -> Result<Outcome, ApiError> {
    let mut store = engine.store()?;
    let _guard = lease::acquire(&mut store, plan, "rollback")?;
    let rolled =
        lifecycle::rollback::to_checkpoint(&mut store, &engine.sandboxes(), plan, checkpoint)?;
    Ok(Outcome::RolledBack(Box::new(rolled)))
}

/// Whether answering `kind` "retry" runs the failed phase again (as `plan execute` does)
/// rather than continuing where the plan waits.
fn retries(kind: crate::domain::approval::ApprovalKind) -> bool {
    use crate::domain::approval::ApprovalKind;
    matches!(
        kind,
        ApprovalKind::Errored
            | ApprovalKind::TransientFailure
            | ApprovalKind::ErrorRecovery
            | ApprovalKind::Budget
    )
}

/// Answers under the plan's lease, then drives the plan on when the answer lets it.
fn answer_approval(engine: &Engine, approval: &str, answer: Answer) -> Result<Outcome, ApiError> {
    let mut lc = engine.lifecycle()?;
    let plan_id = lc
        .store()
        .approval(approval)?
        .map(|a| a.plan_id)
        .ok_or_else(|| RunError::ApprovalNotFound(approval.to_string()))?;
    if let Answer::Budget(new) = &answer {
        let raised = lc.store().plan_budget(&plan_id)?.raised(*new);
        check_policy_budget(lc.store(), &plan_id, &raised)?;
    }
    let answered = {
        let _guard = lease::acquire(lc.store_mut(), &plan_id, "answer")?;
        lc_approvals::answer(&mut lc, approval, answer)?
    };
    let (driven, not_yet_supported) = if answered.resume {
        let op = if retries(answered.approval.kind) {
            Goal::Execute
        } else {
            Goal::Continue
        };
        match driver::drive(&mut lc, &plan_id, op) {
            Ok(d) => (Some(d), None),
            Err(RunError::NotYetSupported(what)) => (None, Some(what)),
            Err(e) => return Err(e.into()),
        }
    } else {
        (None, None)
    };
    let plan = lc.plan(&plan_id)?;
    Ok(Outcome::Answered(Box::new(Answered {
        answered,
        plan,
        driven,
        not_yet_supported,
    })))
}

fn prompt(engine: &Engine, plan: &Id, text: &str) -> Result<Outcome, ApiError> {
    let mut lc = engine.lifecycle()?;
    let prompted = {
        let _guard = lease::acquire(lc.store_mut(), plan, "prompt")?;
        lc_approvals::prompt(&mut lc, plan, text)?
    };
    let driven = if prompted.resume {
        Some(driver::drive(&mut lc, plan, Goal::Execute)?)
    } else {
        None
    };
    let plan = lc.plan(plan)?;
    Ok(Outcome::Prompted(Box::new(Prompted {
        prompted,
        plan,
        driven,
    })))
}

fn correct(engine: &Engine, c: &Correction) -> Result<Outcome, ApiError> {
    let mut lc = engine.lifecycle()?;
    match &c.mode {
        CorrectMode::Revert => {
            let decision = lc
                .store()
                .decision(&c.decision)?
                .ok_or_else(|| RunError::Invalid(format!("decision {} not found", c.decision)))?;
            raise_budget(&mut lc, &decision.plan_id, c)?;
            let r = revert::revert(&mut lc, &c.decision, &c.guidance)?;
            Ok(Outcome::Reverted(Box::new(r)))
        }
        CorrectMode::Append { execution_actor } => {
            let r = append::append(
                &mut lc,
                &c.decision,
                &c.guidance,
                execution_actor.as_deref(),
            )?;
            Ok(Outcome::Appended(Box::new(r)))
        }
    }
}

/// A revert's `--max-cost-usd` / `--max-tokens` are on top of what the plan has spent.
fn raise_budget(
    lc: &mut lifecycle::Lifecycle,
    plan_id: &Id,
    c: &Correction,
) -> Result<(), ApiError> {
    if c.max_cost_usd.is_none() && c.max_tokens.is_none() {
        return Ok(());
    }
    if c.max_cost_usd.is_some_and(|c| !c.is_finite() || c < 0.0) {
        return Err(RunError::Invalid(
            "--max-cost-usd must be a non-negative number of US dollars".into(),
        )
        .into());
    }
    let spent = lc.store().usage_for_plan(plan_id)?;
    let old = lc.store().plan_budget(plan_id)?;
    let budget = old.raised(PlanBudget {
        max_cost_usd: c.max_cost_usd.map(|x| spent.priced_cost_usd + x),
        max_tokens: c
            .max_tokens
            .map(|t| spent.input_tokens + spent.output_tokens + t),
    });
    check_policy_budget(lc.store(), plan_id, &budget)?;
    lc.store_mut()
        .set_plan_budget(plan_id, &budget, "correction")?;
    Ok(())
}

/// Refuses a plan budget above the cap of a policy binding the plan
/// (`budgets.max_cost_usd_per_plan`): no answer or correction widens a policy.
fn check_policy_budget(
    store: &crate::store::Store,
    plan_id: &Id,
    budget: &PlanBudget,
) -> Result<(), ApiError> {
    if budget.max_cost_usd.is_none() {
        return Ok(());
    }
    let names: Vec<String> = store
        .plan(plan_id)?
        .map(|p| {
            p.project_links
                .into_iter()
                .map(|l| l.project_name)
                .collect()
        })
        .unwrap_or_default();
    store
        .policies_of_items(names.iter().map(String::as_str))?
        .check_budget(budget.max_cost_usd)?;
    Ok(())
}
