//! The plan status view (spec section 06, `agents plan status`; section 27 "Behavior": a plan
//! whose driver vanished is interrupted, an errored plan names how to recover): everything
//! either face shows about one plan, computed once here so that the CLI and the TUI only
//! render it.

use super::{ApiError, Engine};
use crate::actors::estimate::{Estimate, USAGE_ESTIMATOR};
use crate::domain::approval::Approval;
use crate::domain::budget::PlanBudget;
use crate::domain::decision::Decision;
use crate::domain::{Id, Phase, Plan, ProcessingState};
use crate::lease::{self, Lease};
use crate::lifecycle::invariant_checks::{self, Coverage};
use crate::lifecycle::report::{self, ErrorEntry};
use crate::lifecycle::{RunError, estimator};
use crate::store::Store;
use crate::store::children::ChildLink;
use crate::store::corrections::CorrectionAttempt;
use crate::store::lifecycle_run::{PlanStep, StepStatus};
use crate::store::model_calls::UsageRollup;
use crate::store::plan_links::Origin;

/// Characters of a decision's choice kept when it names a step (a step without a key).
const STEP_NAME_CHARS: usize = 48;

/// Everything `plan status` shows about one plan, read in one go (see [`Engine::plan_status`]).
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize, schemars::JsonSchema)]
pub struct PlanStatusView {
    /// The plan row, after a stale lease was recovered.
    pub plan: Plan,
    /// Where the plan came from (`plan use`): profile source and filled-in script, if known.
    pub origin: Option<Origin>,
    /// Why it is in its state (`interrupted`, `awaiting_decision`, `gate_rejected`, ...).
    pub state_reason: Option<String>,
    /// The live lease (the process driving the plan now), if any.
    pub running_in: Option<Lease>,
    /// An Apply was killed while writing: the next command on the plan rolls it back. Only
    /// when no process runs the plan.
    pub apply_journal_pending: bool,
    /// Whether cancellation was requested.
    pub cancel_requested: bool,
    /// Pending approvals, oldest first.
    pub approvals: Vec<Approval>,
    /// Execute's steps, in order, each with its name.
    pub steps: Vec<StepView>,
    /// Every decision of the plan (current and superseded), in sequence: printed short ids are
    /// made unique among these, so that one names one decision.
    pub decision_ids: Vec<Id>,
    /// Child plans, in spawn order.
    pub children: Vec<ChildView>,
    /// Correction attempts, oldest first (so `plan diff --correction ATTEMPT` can be found).
    pub corrections: Vec<CorrectionAttempt>,
    /// Current decisions (not superseded, not user interventions).
    pub decisions: usize,
    /// Superseded decisions kept for audit.
    pub superseded_decisions: usize,
    /// Tokens and cost of every model call of the plan.
    pub usage: UsageRollup,
    /// The current estimate: the one recorded at Strategize, else the built-in estimator's.
    pub estimate: Estimate,
    /// Whether [`PlanStatusView::estimate`] was recorded (an estimation actor ran).
    pub estimate_recorded: bool,
    /// The plan's budget.
    pub budget: PlanBudget,
    /// Errors, oldest first.
    pub errors: Vec<ErrorEntry>,
    /// Profile flags the engine does not act on yet, and what happens instead: (flag, effect).
    pub not_yet_supported: Vec<(String, String)>,
    /// How the plan's invariants are checked after each step and before Apply.
    pub invariant_checks: Coverage,
    /// The one-line summary of where the plan stands.
    pub headline: StatusHeadline,
    /// Where the latest step that continued from its journal (its driver vanished mid-step)
    /// resumed.
    pub resumed: Option<ResumedAt>,
    /// The humans behind the plan on a server (empty on one machine).
    #[serde(default)]
    pub attribution: crate::store::attribution::Attribution,
}

/// A step that continued from its journal at the exact call (docs/sandbox.md, "Resuming a
/// step").
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize, schemars::JsonSchema,
)]
pub struct ResumedAt {
    /// The phase whose run continued: `execute` (a step) or `strategize` (the strategist).
    pub phase: Phase,
    /// The step's position (`None` for Strategize).
    pub step: Option<u32>,
    /// The model call it continued at (its tool calls re-run, else made).
    pub call: u32,
}

impl ResumedAt {
    /// `resumed at call k of step s`, or `resumed at call k of Strategize`.
    pub fn describe(&self) -> String {
        match self.step {
            Some(step) => format!("resumed at call {} of step {step}", self.call),
            None => format!("resumed at call {} of Strategize", self.call),
        }
    }
}

impl PlanStatusView {
    /// The named estimation actor still to run: the plan names one other than the built-in
    /// estimator and no estimate was recorded yet (until Strategize completes the estimate is
    /// the built-in one's).
    pub fn pending_estimation_actor(&self) -> Option<&str> {
        self.plan
            .estimation_actor
            .as_deref()
            .filter(|a| *a != USAGE_ESTIMATOR && !self.estimate_recorded)
    }
}

/// One Execute step and its name.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize, schemars::JsonSchema)]
pub struct StepView {
    /// The step row.
    pub step: PlanStep,
    /// Its name: see [`step_name`].
    pub name: String,
    /// Its status as a person should read it: the stored one, except that a step left
    /// `running` by a run that stopped (Ctrl-C, quitting the TUI, a crash) is `interrupted`
    /// while the plan waits to be resumed (resuming runs it again).
    pub shown_status: String,
}

/// One child plan of the plan.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize, schemars::JsonSchema)]
pub struct ChildView {
    /// The link: spawn decision, status, parallel group, detail.
    pub link: ChildLink,
    /// The child plan's row (`None` if it cannot be read).
    pub plan: Option<Plan>,
    /// Whether a correction superseded the decision that spawned it (an earlier attempt's
    /// child, shown by `plan tree --show-superseded`).
    pub superseded: bool,
}

/// Where a plan stands, in priority order: the first that holds is the headline.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize, schemars::JsonSchema)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum StatusHeadline {
    /// The plan is applied.
    Applied,
    /// The plan is cancelled.
    Cancelled,
    /// The plan errored in `phase`; it can be resumed (see `report::recovery_hints`).
    Errored {
        /// The phase it errored in.
        phase: Phase,
    },
    /// A live process drives the plan.
    Running {
        /// The plan's phase.
        phase: Phase,
        /// The plan's state.
        state: ProcessingState,
        /// The driving process.
        pid: u32,
    },
    /// Apply was killed while writing: `plan apply` rolls the unfinished write back and
    /// applies again, `plan cancel` rolls it back and cancels.
    ApplyInterrupted,
    /// The driver vanished: the plan is queued with reason `interrupted`; `plan apply`
    /// resumes it at Apply, `plan execute` at the other phases.
    Interrupted {
        /// The phase to resume.
        phase: Phase,
    },
    /// The plan waits for a human to answer `approval` (the oldest pending one).
    WaitingForApproval {
        /// The plan's phase.
        phase: Phase,
        /// The plan's state.
        state: ProcessingState,
        /// The approval to answer.
        approval: Box<Approval>,
    },
    /// The user declined the plan's phase gate with a reason and nothing else waits: the plan
    /// rests at `phase` until its phase is run after all or it is cancelled.
    GateRejected {
        /// The plan's phase.
        phase: Phase,
    },
    /// None of the above: the plan is at `phase` in `state`.
    Phase {
        /// The plan's phase.
        phase: Phase,
        /// The plan's state.
        state: ProcessingState,
    },
}

impl StatusHeadline {
    /// The headline of a plan with these facts (see the variants for the order).
    pub fn of(
        plan: &Plan,
        running_in: Option<&Lease>,
        apply_journal_pending: bool,
        state_reason: Option<&str>,
        approvals: &[Approval],
    ) -> Self {
        let (phase, state) = (plan.phase(), plan.state());
        match (phase, state) {
            (Phase::Applied, _) => Self::Applied,
            (_, ProcessingState::Cancelled) => Self::Cancelled,
            (_, ProcessingState::Errored) => Self::Errored { phase },
            _ if running_in.is_some() => Self::Running {
                phase,
                state,
                pid: running_in.map(|l| l.pid).unwrap_or_default(),
            },
            (Phase::Apply, _) if apply_journal_pending => Self::ApplyInterrupted,
            (_, ProcessingState::Queued) if state_reason == Some("interrupted") => {
                Self::Interrupted { phase }
            }
            _ => match approvals.first() {
                Some(a) => Self::WaitingForApproval {
                    phase,
                    state,
                    approval: Box::new(a.clone()),
                },
                None if state_reason == Some("gate_rejected") => Self::GateRejected { phase },
                None => Self::Phase { phase, state },
            },
        }
    }

    /// Whether the headline asks for attention (errored, interrupted, waiting for a human).
    pub fn needs_attention(&self) -> bool {
        matches!(
            self,
            Self::Errored { .. }
                | Self::ApplyInterrupted
                | Self::Interrupted { .. }
                | Self::WaitingForApproval { .. }
                | Self::GateRejected { .. }
        )
    }
}

/// A step's name: the strategy's key for it (a script step's name), else its decision's
/// choice on one line, shortened to 48 characters (`...` marks the cut); empty when its
/// decision is unknown.
pub fn step_name(decisions: &[Decision], step: &PlanStep) -> String {
    let d = decisions.iter().find(|d| d.decision_id == step.decision_id);
    let key = d
        .and_then(|d| d.context_snapshot.get("key"))
        .and_then(serde_json::Value::as_str)
        .filter(|k| !k.is_empty());
    match (key, d) {
        (Some(k), _) => k.to_string(),
        (None, Some(d)) => {
            let one_line = d.chosen_option.replace(['\n', '\r'], " ");
            if one_line.chars().count() <= STEP_NAME_CHARS {
                one_line
            } else {
                let cut: String = one_line.chars().take(STEP_NAME_CHARS).collect();
                format!("{cut}...")
            }
        }
        (None, None) => String::new(),
    }
}

impl Engine {
    /// The status view of plan `plan` (spec section 06, `agents plan status`). A plan whose
    /// driver vanished is first recovered as interrupted (phase, queued), so the view shows it
    /// so; nothing else is changed. Invariant coverage uses this handle's providers.
    ///
    /// # Errors
    /// [`ApiError::Run`] (`NOT_FOUND`) for an unknown plan; [`ApiError::Store`] and
    /// [`ApiError::Run`] for store failures.
    pub fn plan_status(&self, plan: &Id) -> Result<PlanStatusView, ApiError> {
        let mut store = self.store()?;
        lease::recover_if_stale(&mut store, plan)?;
        let p = store.plan(plan)?.ok_or(RunError::NotFound(*plan))?;
        let origin = store.plan_origin(plan)?;
        let extra = report::status(&store, &p)?;
        let apply_journal_pending =
            extra.running_in.is_none() && !store.pending_journals(plan)?.is_empty();
        let decisions = store.decisions(plan)?;
        let steps: Vec<StepView> = extra
            .steps
            .into_iter()
            .map(|step| StepView {
                name: step_name(&decisions, &step),
                shown_status: match step.status {
                    StepStatus::Running if p.state() != ProcessingState::Processing => {
                        "interrupted".to_string()
                    }
                    other => other.as_str().to_string(),
                },
                step,
            })
            .collect();
        let resumed = resumed_at(&store, plan, &steps)?;
        let children = children(&store, plan, &decisions)?;
        let recorded = estimator::recorded(&store, &p)?;
        let estimate = estimator::current(&store, &p)?;
        let invariant_checks = invariant_checks::coverage(&store, &self.settings.providers, plan)?;
        let headline = StatusHeadline::of(
            &p,
            extra.running_in.as_ref(),
            apply_journal_pending,
            extra.state_reason.as_deref(),
            &extra.approvals,
        );
        Ok(PlanStatusView {
            origin,
            state_reason: extra.state_reason,
            running_in: extra.running_in,
            apply_journal_pending,
            cancel_requested: extra.cancel_requested,
            approvals: extra.approvals,
            steps,
            decision_ids: decisions.iter().map(|d| d.decision_id).collect(),
            children,
            corrections: store.correction_attempts(plan)?,
            decisions: extra.decisions,
            superseded_decisions: extra.superseded_decisions,
            usage: extra.usage,
            estimate,
            estimate_recorded: recorded.is_some(),
            budget: store.plan_budget(plan)?,
            errors: extra.errors,
            not_yet_supported: extra.not_yet_supported,
            invariant_checks,
            headline,
            resumed,
            attribution: store.attribution(plan)?,
            plan: p,
        })
    }
}

/// Where the plan's latest journaled step continued, if one did.
fn resumed_at(store: &Store, plan: &Id, steps: &[StepView]) -> Result<Option<ResumedAt>, ApiError> {
    let Some((decision, entry)) = store.last_resume(plan)? else {
        return Ok(None);
    };
    let Some(call) = entry["turn"].as_u64().and_then(|t| u32::try_from(t).ok()) else {
        return Ok(None);
    };
    // A graph actor's node journals under `<step's key>/<step>:<node>`; its calls are
    // numbered across the graph's run.
    let decision = decision.split('/').next().unwrap_or_default();
    if decision == crate::lifecycle::journal::STRATEGIZE_KEY {
        return Ok(Some(ResumedAt {
            phase: Phase::Strategize,
            step: None,
            call,
        }));
    }
    Ok(steps
        .iter()
        .find(|s| s.step.decision_id.to_string() == decision)
        .map(|s| ResumedAt {
            phase: Phase::Execute,
            step: Some(s.step.position),
            call,
        }))
}

/// The plan's children with their rows and whether a correction superseded their spawn.
fn children(store: &Store, plan: &Id, decisions: &[Decision]) -> Result<Vec<ChildView>, ApiError> {
    Ok(store
        .children_of(plan)?
        .into_iter()
        .map(|link| ChildView {
            plan: store.plan(&link.child_plan_id).ok().flatten(),
            superseded: decisions
                .iter()
                .find(|d| d.decision_id == link.spawn_decision_id)
                .is_some_and(|d| !d.is_current()),
            link,
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::paths::Paths;
    use jiff::Timestamp;

    /// An engine on a fresh data directory and a store on the same database.
    fn engine() -> (tempfile::TempDir, Engine, Store) {
        let dir = tempfile::tempdir().unwrap();
        let paths = Paths::at(dir.path().join("data"), dir.path().join("config.toml"));
        std::fs::create_dir_all(dir.path().join("data")).unwrap();
        let engine = Engine::new(paths, super::super::Settings::default());
        let store = engine.store().unwrap();
        (dir, engine, store)
    }

    fn plan_at(store: &mut Store, phase: Phase, state: ProcessingState) -> Plan {
        let mut plan = Plan::new("local/notes", "notes", Timestamp::now());
        plan.status.phase = phase;
        plan.status.state = state;
        store.insert_plan(&plan).unwrap();
        plan
    }

    #[test]
    fn the_view_heads_applied_errored_and_interrupted_plans_by_what_holds_first() {
        let (_dir, engine, mut store) = engine();
        let applied = plan_at(&mut store, Phase::Applied, ProcessingState::Complete);
        let errored = plan_at(&mut store, Phase::Execute, ProcessingState::Errored);
        let queued = plan_at(&mut store, Phase::Execute, ProcessingState::Queued);
        // Processing with no process driving it: recovered as interrupted, then shown so.
        let orphan = plan_at(&mut store, Phase::Strategize, ProcessingState::Processing);

        let v = engine.plan_status(&applied.plan_id).unwrap();
        assert_eq!(v.headline, StatusHeadline::Applied);
        assert!(!v.headline.needs_attention());
        assert_eq!(v.plan.plan_id, applied.plan_id);
        assert!(v.running_in.is_none() && !v.apply_journal_pending);
        assert!(v.approvals.is_empty() && v.steps.is_empty() && v.children.is_empty());
        assert_eq!((v.decisions, v.superseded_decisions), (0, 0));

        let v = engine.plan_status(&errored.plan_id).unwrap();
        assert_eq!(
            v.headline,
            StatusHeadline::Errored {
                phase: Phase::Execute
            }
        );
        assert!(v.headline.needs_attention());

        let v = engine.plan_status(&queued.plan_id).unwrap();
        assert_eq!(
            v.headline,
            StatusHeadline::Phase {
                phase: Phase::Execute,
                state: ProcessingState::Queued
            }
        );

        let v = engine.plan_status(&orphan.plan_id).unwrap();
        assert_eq!(v.plan.state(), ProcessingState::Queued);
        assert_eq!(v.state_reason.as_deref(), Some("interrupted"));
        assert_eq!(
            v.headline,
            StatusHeadline::Interrupted {
                phase: Phase::Strategize
            }
        );

        let unknown = Id::generate();
        assert!(matches!(
            engine.plan_status(&unknown),
            Err(ApiError::Run(RunError::NotFound(id))) if id == unknown
        ));
    }

    #[test]
    fn the_oldest_pending_approval_heads_a_plan_nobody_runs() {
        let plan = Plan::new("local/notes", "notes", Timestamp::now());
        let first = Approval::new(
            plan.plan_id,
            crate::domain::approval::ApprovalKind::PhaseGate,
            "start Execute?",
            Timestamp::now(),
        );
        let second = Approval {
            approval_id: "apr_2".into(),
            ..first.clone()
        };
        let approvals = [first.clone(), second];
        assert_eq!(
            StatusHeadline::of(&plan, None, false, None, &approvals),
            StatusHeadline::WaitingForApproval {
                phase: Phase::Strategize,
                state: ProcessingState::Queued,
                approval: Box::new(first),
            }
        );
        let lease = Lease {
            plan_id: plan.plan_id,
            pid: 42,
            host: "here".into(),
            kind: "execute".into(),
            acquired_at: Timestamp::now(),
            heartbeat_at: Timestamp::now(),
            started: None,
            expiry: None,
        };
        assert_eq!(
            StatusHeadline::of(&plan, Some(&lease), false, None, &approvals),
            StatusHeadline::Running {
                phase: Phase::Strategize,
                state: ProcessingState::Queued,
                pid: 42
            },
            "a live driver comes before what it waits for"
        );
        assert_eq!(
            StatusHeadline::of(&plan, None, false, Some("interrupted"), &approvals),
            StatusHeadline::Interrupted {
                phase: Phase::Strategize
            }
        );
    }
}
