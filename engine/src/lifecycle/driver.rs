//! Drives a plan until it reaches a gate, a pause for a human or a terminal state (spec
//! sections 08-13 and 27). The driving process holds the plan's lease for the whole run.
//!
//! `plan execute` by state, then whatever transitions the frozen profile allows:
//!
//! | Plan state | `plan execute` |
//! |---|---|
//! | strategize, queued (or errored) | run Strategize |
//! | strategize, complete | enter and run Execute |
//! | execute, queued or errored | roll back to the start of the interrupted step, then resume |
//! | execute, complete | nothing to do (`next: agents plan apply <id>`) |
//! | apply, applied, cancelled | `CONFLICT` |
//!
//! Between phases, at every step, model turn and tool call, the driver checks whether the
//! plan's cancellation was requested (then it records the cancellation) or the user pressed
//! Ctrl-C (then the plan goes back to (phase, queued) with reason `interrupted`, resumable).

use jiff::Timestamp;
use serde::Serialize;
use serde_json::json;

use super::approvals::{self, Gate};
use super::gates::Gates;

use super::driven::{Driven, Stopped};
use super::ended::Ended;
use super::stop::{stop, stop_cause};
use super::transitions::{self, Drive, Work};
use super::{Lifecycle, RunError, apply, execute, strategize, wrong_state};
use crate::domain::approval::{Approval, ApprovalKind};
use crate::domain::decision::DecisionType;
use crate::domain::{Id, Phase, Plan, ProcessingState};
// A suggested next step for the user (beside the lifecycle's own next work, `Work`).
use crate::domain::next::Next as Suggest;
use crate::lease;

/// How far the caller asks the driver to take the plan (the command it stands for).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Goal {
    /// Only what the profile allows without a human (after `plan use`, `plan decide`).
    Continue,
    /// `plan execute`: answers the gate at the plan's current state, then continues.
    Execute,
    /// `plan apply` (the user confirmed): answers the apply gate, then applies.
    Apply {
        /// Leave the changes in the working tree instead of committing them.
        no_commit: bool,
    },
}

impl Goal {
    /// The goal's column in the transition table ([`transitions`]).
    pub fn drive(self) -> Drive {
        match self {
            Goal::Continue => Drive::Continue,
            Goal::Execute => Drive::Execute,
            Goal::Apply { .. } => Drive::Apply,
        }
    }
}

/// Checks that `goal` fits the plan's state before taking the lease.
fn check_goal(engine: &Lifecycle, plan: &Plan, goal: Goal) -> Result<(), RunError> {
    let id = plan.plan_id;
    if plan.state() == ProcessingState::Cancelled {
        return Err(wrong_state(
            plan,
            format!(
                "plan {id} is cancelled (in {}); a cancelled plan does not run again",
                plan.phase()
            ),
            vec![Suggest::PlanStatus { plan: id }],
        ));
    }
    // A spawned child (not an appended follow-up plan, which applies into its parent's
    // sandbox by itself) is merged by its parent.
    let spawned_parent = match plan.parent_plan_id {
        Some(parent) if engine.store().child_link(&plan.plan_id)?.is_some() => Some(parent),
        _ => None,
    };
    if let (Goal::Apply { .. }, Some(parent)) = (goal, spawned_parent) {
        return Err(wrong_state(
            plan,
            format!(
                "plan {id} is a child plan of {parent}; its results merge into its parent's sandbox, and the parent is applied instead"
            ),
            vec![
                Suggest::PlanStatus { plan: parent },
                Suggest::ApplyPlan { plan: parent },
            ],
        ));
    }
    // A plan another process is working on is judged by where it resumes; taking the lease
    // then says who holds it.
    let state = match plan.state() {
        ProcessingState::Processing => ProcessingState::Queued,
        s => s,
    };
    if goal == Goal::Continue
        || transitions::next(plan.phase(), state, goal.drive()) != Work::Refused
    {
        return Ok(());
    }
    let at = format!("plan {id} is at {}/{}", plan.phase(), plan.state());
    Err(match goal {
        Goal::Execute => wrong_state(
            plan,
            format!("{at}; `plan execute` runs Strategize and Execute only"),
            vec![Suggest::PlanStatus { plan: id }],
        ),
        _ => wrong_state(
            plan,
            format!("{at}; only a plan whose Execute is complete can be applied"),
            vec![
                Suggest::ExecutePlan { plan: id },
                Suggest::PlanStatus { plan: id },
            ],
        ),
    })
}

/// Guidance the user gave that the next Strategize run should follow: the current
/// `user_intervention` decisions.
fn pending_guidance(engine: &Lifecycle, plan: &Plan) -> Result<Vec<String>, RunError> {
    Ok(engine
        .store()
        .decisions(&plan.plan_id)?
        .into_iter()
        .filter(|d| d.decision_type == DecisionType::UserIntervention && d.is_current())
        .map(|d| d.chosen_option)
        .collect())
}

/// Drives a plan (see the module documentation). Takes the plan's lease first.
///
/// # Errors
/// [`RunError::Busy`] naming the pid driving it; [`RunError::WrongState`] when `goal` does not
/// fit; [`RunError::NotYetSupported`]; store errors.
pub fn drive(engine: &mut Lifecycle, plan_id: &Id, goal: Goal) -> Result<Driven, RunError> {
    engine.recover(plan_id)?;
    let plan = engine.plan(plan_id)?;
    if engine.store().is_actor_run(plan_id)? {
        return Err(wrong_state(
            &plan,
            format!(
                // A command inside a sentence stays (D-commands-2): it explains the error rather than suggesting the next step.
                "{plan_id} is an isolated actor run (`agents actor run`), not a plan; it is never executed or applied"
            ),
            vec![Suggest::PlanDiff { plan: *plan_id }],
        ));
    }
    check_goal(engine, &plan, goal)?;
    let guard = lease::acquire(engine.store_mut(), plan_id, plan.phase().as_str())?;
    engine.take_log();
    engine.flush(plan_id)?;
    let mut driving = Driving {
        goal,
        explicit: goal != Goal::Continue,
        plan,
    };
    let stopped = loop {
        if guard.is_lost() {
            break Stopped::LeaseLost;
        }
        if let Some(cause) = stop_cause(engine, plan_id)? {
            break stop(engine, &mut driving.plan, cause)?;
        }
        driving.plan = engine.plan(plan_id)?;
        if let Some(stopped) = driving.turn(engine)? {
            break stopped;
        }
    };
    drop(guard);
    engine.flush(plan_id)?;
    let events = engine.take_log();
    let plan = engine.plan(plan_id)?;
    // A failed step may send the plan back to revise its strategy (auto_strategy_revision).
    super::revision::after_failure(
        engine,
        Driven {
            plan,
            stopped,
            events,
        },
    )
}

/// One run of [`drive`]: the goal asked for, whether its first piece of work is still to come
/// (the goal's command answers the gate in front of it), and the plan.
struct Driving {
    goal: Goal,
    explicit: bool,
    plan: Plan,
}

impl Driving {
    /// The piece of work the transition table names for the plan's state; `Some` when
    /// driving stops.
    fn turn(&mut self, engine: &mut Lifecycle) -> Result<Option<Stopped>, RunError> {
        let plan_id = self.plan.plan_id;
        let drive = if self.explicit {
            self.goal.drive()
        } else {
            Drive::Continue
        };
        match transitions::next(self.plan.phase(), self.plan.state(), drive) {
            Work::Cancelled => Ok(Some(Stopped::Cancelled {
                reason: engine.store().plan_cancel_reason(&plan_id)?,
            })),
            Work::Applied => Ok(Some(Stopped::Applied)),
            Work::Strategize => self.strategize(engine),
            Work::EnterExecute => self.enter_execute(engine),
            Work::ResumeExecute => self.resume_execute(engine),
            Work::ExecuteDone | Work::EnterApply => self.after_execute(engine),
            Work::ResumeApply => self.resume_apply(engine),
            Work::Refused => Err(wrong_state(
                &self.plan,
                format!(
                    "plan {plan_id} is at {}/{}, which this command cannot continue from",
                    self.plan.phase(),
                    self.plan.state()
                ),
                vec![Suggest::PlanStatus { plan: plan_id }],
            )),
        }
    }

    /// The plan's recorded error, when this run does not retry it.
    fn errored(&self) -> Stopped {
        Stopped::Errored {
            code: self.plan.error_code.clone().unwrap_or_default(),
            message: self.plan.error_message.clone().unwrap_or_default(),
        }
    }

    /// Strategize, queued or errored: decisions a human must answer first, an error to
    /// report, the strategize gate, or a Strategize run.
    fn strategize(&mut self, engine: &mut Lifecycle) -> Result<Option<Stopped>, RunError> {
        let plan_id = self.plan.plan_id;
        let gates = Gates::of(&self.plan);
        let reason = engine.store().plan_state_reason(&plan_id)?;
        let redecide = reason.as_deref() == Some("redecide");
        if reason.as_deref() == Some("awaiting_decision") {
            let pending: Vec<Approval> = engine
                .store()
                .pending_approvals(Some(&plan_id))?
                .into_iter()
                .filter(|a| a.kind == ApprovalKind::Decision)
                .collect();
            if !pending.is_empty() {
                return Ok(Some(Stopped::Decisions { approvals: pending }));
            }
            let n = engine
                .store()
                .decisions(&plan_id)?
                .iter()
                .filter(|d| d.is_current())
                .count();
            strategize::complete(engine, &mut self.plan, n)?;
            return Ok(None);
        }
        if self.plan.state() == ProcessingState::Errored && !self.explicit {
            return Ok(Some(self.errored()));
        }
        if !redecide && !self.explicit && !gates.auto_strategize() {
            let approval = approvals::raise_gate(engine, &self.plan, Gate::Strategize)?;
            return Ok(Some(Stopped::Gate {
                approval: Box::new(approval),
            }));
        }
        self.explicit = false;
        let guidance = if redecide || self.plan.state() == ProcessingState::Errored {
            pending_guidance(engine, &self.plan)?
        } else {
            Vec::new()
        };
        if self.goal != Goal::Continue || gates.auto_strategize() {
            resolve_gate(engine, &mut self.plan, Gate::Strategize)?;
        }
        Ok(stopped_by(strategize::run(
            engine,
            &mut self.plan,
            &guidance,
        )?))
    }

    /// Strategize complete: Execute when asked for or allowed, otherwise the execute gate.
    fn enter_execute(&mut self, engine: &mut Lifecycle) -> Result<Option<Stopped>, RunError> {
        if self.explicit || Gates::of(&self.plan).auto_after(Phase::Strategize) {
            self.explicit = false;
            resolve_gate(engine, &mut self.plan, Gate::Execute)?;
            return self.execute(engine);
        }
        let approval = approvals::raise_gate(engine, &self.plan, Gate::Execute)?;
        Ok(Some(Stopped::Gate {
            approval: Box::new(approval),
        }))
    }

    /// Execute, queued or errored: the execution actor's question (`request_decision`) and a
    /// spawn (`plan decide APR --option spawn|skip`) wait for their answers; an error is
    /// reported unless this run retries it; otherwise Execute resumes.
    fn resume_execute(&mut self, engine: &mut Lifecycle) -> Result<Option<Stopped>, RunError> {
        let pending: Vec<Approval> = engine
            .store()
            .pending_approvals(Some(&self.plan.plan_id))?
            .into_iter()
            .filter(|a| {
                matches!(
                    a.kind,
                    ApprovalKind::Decision
                        | ApprovalKind::ChildSpawn
                        | ApprovalKind::ToolApproval
                        | ApprovalKind::InvariantViolation
                )
            })
            .collect();
        if !pending.is_empty() {
            return Ok(Some(Stopped::Decisions { approvals: pending }));
        }
        if self.plan.state() == ProcessingState::Errored && !self.explicit {
            return Ok(Some(self.errored()));
        }
        self.explicit = false;
        self.execute(engine)
    }

    /// Runs Execute; `Some` unless it completed or was stopped (the loop finds out why).
    fn execute(&mut self, engine: &mut Lifecycle) -> Result<Option<Stopped>, RunError> {
        Ok(stopped_by(execute::run(engine, &mut self.plan)?))
    }

    /// Execute complete: a child waits for its parent; `plan execute` stops here; Apply when
    /// asked for or allowed, otherwise the apply gate.
    fn after_execute(&mut self, engine: &mut Lifecycle) -> Result<Option<Stopped>, RunError> {
        let plan_id = self.plan.plan_id;
        // A child is merged by its parent's spawn step, never applied by itself.
        if let Some(parent) = self.plan.parent_plan_id
            && engine.store().child_link(&plan_id)?.is_some()
        {
            return Ok(Some(Stopped::NothingToDo {
                next: Suggest::ExecutePlan { plan: parent },
            }));
        }
        if self.goal == Goal::Execute && self.explicit {
            return Ok(Some(Stopped::NothingToDo {
                next: Suggest::ApplyPlan { plan: plan_id },
            }));
        }
        if matches!(self.goal, Goal::Apply { .. })
            || (Gates::of(&self.plan).auto_after(Phase::Execute)
                && !held_for_marks(engine, &self.plan)?)
        {
            self.explicit = false;
            return self.apply(engine);
        }
        let approval = approvals::raise_gate(engine, &self.plan, Gate::Apply)?;
        Ok(Some(Stopped::Gate {
            approval: Box::new(approval),
        }))
    }

    /// Apply, queued or errored: resumed by `plan apply`, reported otherwise.
    fn resume_apply(&mut self, engine: &mut Lifecycle) -> Result<Option<Stopped>, RunError> {
        if !self.explicit {
            return Ok(Some(Stopped::Errored {
                code: self.plan.error_code.clone().unwrap_or_default(),
                message: self
                    .plan
                    .error_message
                    .clone()
                    .unwrap_or_else(|| "apply did not finish".into()),
            }));
        }
        self.explicit = false;
        self.apply(engine)
    }

    /// Runs Apply; `None` once applied.
    fn apply(&mut self, engine: &mut Lifecycle) -> Result<Option<Stopped>, RunError> {
        let no_commit = matches!(self.goal, Goal::Apply { no_commit: true });
        Ok(stopped_by(apply::run(engine, &mut self.plan, no_commit)?))
    }
}

/// Whether a policy binding `plan` sets `apply.require_all_hunks_marked` while an item of its
/// review has no mark from anyone: then its profile's `auto_apply` does not apply it, and it
/// waits at the apply gate for its reviewers (`docs/review.md`, D-review-9).
fn held_for_marks(engine: &Lifecycle, plan: &Plan) -> Result<bool, RunError> {
    let store = engine.store();
    let projects = plan.project_links.iter().map(|l| l.project_name.as_str());
    if !store.policies_of_items(projects)?.require_all_hunks_marked() {
        return Ok(false);
    }
    let trees = super::trees::reviewed_trees_in(store, &plan.plan_id)?;
    let review = crate::review::load(store, &engine.sandboxes(), plan, &trees)
        .map_err(|e| RunError::Sandbox(e.to_string()))?;
    Ok(review.counts.pending > 0)
}

/// Where a phase run's end leaves driving: `None` when the phase completed or was stopped (the
/// loop finds out why), otherwise why driving stops.
fn stopped_by(ended: Ended) -> Option<Stopped> {
    match ended {
        Ended::Complete | Ended::Stopped => None,
        Ended::Awaiting(approvals) => Some(Stopped::Decisions { approvals }),
        Ended::Errored { code, message } => Some(Stopped::Errored { code, message }),
    }
}

/// Resolves the pending gate approval `gate` as approved (the user ran the command that
/// answers it, or the profile opened it), with its event.
fn resolve_gate(engine: &mut Lifecycle, plan: &mut Plan, gate: Gate) -> Result<(), RunError> {
    let name = match gate {
        Gate::Strategize => "strategize",
        Gate::Execute => "execute",
        Gate::Apply => "apply",
    };
    let pending: Vec<String> = engine
        .store()
        .pending_approvals(Some(&plan.plan_id))?
        .into_iter()
        .filter(|a| a.kind == ApprovalKind::PhaseGate && a.context["gate"] == name)
        .map(|a| a.approval_id)
        .collect();
    if pending.is_empty() {
        return Ok(());
    }
    for id in pending {
        engine.store_mut().resolve_approval(
            &id,
            crate::domain::approval::ApprovalStatus::Approved,
            &json!({"answered_by": "command", "at": Timestamp::now().to_string()}),
        )?;
    }
    engine.flush(&plan.plan_id)?;
    Ok(())
}
