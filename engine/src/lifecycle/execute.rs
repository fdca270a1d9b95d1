//! The Execute phase (spec section 11).
//!
//! - Sandboxes are created lazily, one per target resource, from the bases recorded at
//!   `plan use` (the first tool call on a resource creates its sandbox). `require_sandbox =
//!   false` still sandboxes; the `execute_started` event records why.
//! - The execution actor runs once per executable decision, in dependency order. Each step is
//!   checkpointed at its start and end; the checkpoints name the decision, and so do the tool
//!   calls made in between, so every change can be traced to the decision that produced it.
//! - A failed step with `auto_checkpoint_restore` is rolled back to its start and retried once.
//! - The project's required validations run as the last step, in the sandbox; what they write
//!   is rolled back, so they never change the result. `auto_validation_fix` hands a failure
//!   back to a model execution actor at most twice (the offline script executor cannot fix).
//! - The execution actor is `builtin/script-executor` ([`script_executor`]) or a model
//!   ([`model_executor`]); a spawn step runs child plans instead ([`children`]), each of which
//!   runs this phase again on its own thread. Those are this module's parts, so the recursion
//!   of a child plan through Execute stays inside it.

//! - A step left `running` by a driver that vanished (or a failed step being retried) is rolled
//!   back to its start checkpoint before anything else runs; commands it left running are
//!   killed first.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

pub mod children;
mod expected;
mod model_executor;
pub mod script_executor;
mod so_far;
pub mod step_end;

use jiff::Timestamp;
use serde_json::{Value, json};

use super::ended::Ended;
use super::gates::Gates;
use super::state::{self, commit};
use super::{Lifecycle, RunError};
use crate::domain::approval::ApprovalStatus;
use crate::domain::decision::Decision;
use crate::domain::event::state::Transition;
use crate::domain::event::{ExecuteComplete, ExecuteStarted, ExecuteStep, StateChanged};
use crate::domain::{Id, Phase, Plan, ProcessingState};
use crate::events::EventKind;
use crate::lease;
use crate::registry::actors::SCRIPT_EXECUTOR;
use crate::sandbox::checkpoint::{self, CheckpointRequest};
use crate::sandbox::{SandboxError, SandboxTarget, Sandboxes, TargetKind};
use crate::store::lifecycle_run::{BaseKind, PlanStep, StepStatus, replace_steps, save_step};
use crate::store::{Store, StoreError};
use crate::tools::runner::{Policy, ToolRunner};
use crate::tools::shell::ShellPolicy;
use step_end::{Question, StepEnd};

/// The user's answer to a `request_decision`, in words for the model.
fn answer_text(a: &crate::domain::approval::Approval) -> String {
    let answer = a.answer.clone().unwrap_or(Value::Null);
    let text = |k: &str| answer.get(k).and_then(Value::as_str).map(str::to_string);
    match a.status {
        ApprovalStatus::Rejected => format!(
            "The user declined to choose: {}. Carry on without asking this question again.",
            text("reason").unwrap_or_default()
        ),
        ApprovalStatus::Withdrawn => {
            "The question was withdrawn; carry on with the option you recommend.".into()
        }
        _ => match (
            answer.get("option").and_then(Value::as_u64),
            text("chosen_option"),
        ) {
            (Some(n), Some(chosen)) => format!("The user chose option {n}: {chosen}"),
            _ => format!(
                "The user chose none of the options and said: {}",
                text("guidance").unwrap_or_default()
            ),
        },
    }
}

impl From<SandboxError> for RunError {
    fn from(e: SandboxError) -> Self {
        match e {
            SandboxError::Store(s) => RunError::Store(s),
            other => RunError::Sandbox(other.to_string()),
        }
    }
}

impl From<crate::tools::runner::RunnerError> for RunError {
    fn from(e: crate::tools::runner::RunnerError) -> Self {
        use crate::tools::runner::RunnerError as E;
        match e {
            E::Store(s) => RunError::Store(s),
            E::Sandbox(s) => s.into(),
            E::PlanNotFound(id) => RunError::NotFound(id),
        }
    }
}

/// Watches for cancellation (the plan's flag, Ctrl-C) on its own thread and connection, and
/// raises a flag that running shell commands and the step loop read.
struct Watcher {
    flag: Arc<AtomicBool>,
    done: Arc<AtomicBool>,
    handle: Option<std::thread::JoinHandle<()>>,
}

impl Watcher {
    fn start(engine: &Lifecycle, plan_id: Id) -> Self {
        let flag = Arc::new(AtomicBool::new(false));
        let done = Arc::new(AtomicBool::new(false));
        let db = engine.store().location().clone();
        let observer = engine.observer_arc();
        let (f, d) = (Arc::clone(&flag), Arc::clone(&done));
        let handle = std::thread::Builder::new()
            .name("plan-cancel-watch".into())
            .spawn(move || {
                let store = db.open().ok();
                while !d.load(Ordering::SeqCst) {
                    let requested = store
                        .as_ref()
                        .is_some_and(|s| lease::cancel_requested(s, &plan_id).unwrap_or(false));
                    if requested || observer.interrupted() {
                        f.store(true, Ordering::SeqCst);
                        return;
                    }
                    std::thread::sleep(Duration::from_millis(100));
                }
            })
            .ok();
        Self { flag, done, handle }
    }

    fn stopped(&self) -> bool {
        self.flag.load(Ordering::SeqCst)
    }
}

impl Drop for Watcher {
    fn drop(&mut self) {
        self.done.store(true, Ordering::SeqCst);
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }
}

/// The user's guidance in force (current `user_intervention` decisions).
fn guidance_for(store: &Store, plan_id: &Id) -> Result<Vec<String>, RunError> {
    Ok(store
        .decisions(plan_id)?
        .into_iter()
        .filter(|d| {
            d.is_current()
                && d.decision_type == crate::domain::decision::DecisionType::UserIntervention
        })
        .map(|d| d.chosen_option)
        .collect())
}

/// Registers the plan's bases as sandbox targets (idempotent); sandboxes themselves are
/// created on first use.
pub(crate) fn register_targets(
    engine: &mut Lifecycle,
    sandboxes: &Sandboxes,
    plan: &Plan,
) -> Result<(), RunError> {
    for base in engine.store().plan_bases(&plan.plan_id)? {
        let kind = match base.kind {
            BaseKind::GitCheckout => TargetKind::GitCheckout {
                repo: PathBuf::from(&base.path),
                base_commit: base.base_commit.clone().unwrap_or_default(),
            },
            BaseKind::Directory => TargetKind::Directory {
                root: PathBuf::from(&base.path),
            },
        };
        sandboxes.register_target(
            engine.store_mut(),
            &SandboxTarget {
                plan_id: plan.plan_id,
                resource_name: base.resource_name.clone(),
                alias: base.alias.clone(),
                kind,
                read_only: base.read_only,
            },
        )?;
    }
    Ok(())
}

/// The policy tools run under: the plan's phase and state, its frozen flags, its action's
/// read-only flag and `sandbox:` widening.
pub(crate) fn policy(engine: &Lifecycle, plan: &Plan) -> Result<Policy, RunError> {
    let gates = Gates::of(plan);
    let origin = engine.store().plan_origin(&plan.plan_id)?;
    let mut p = Policy::for_plan(plan);
    p.allow_unsafe_tools = gates.flags.allow_unsafe_tools;
    p.require_checkpoints = gates.flags.require_checkpoints;
    p.read_only_action = origin.as_ref().is_some_and(|o| o.read_only);
    if let Some(sb) = origin.and_then(|o| o.sandbox) {
        p.shell = ShellPolicy {
            env: sb.env.clone(),
            network: sb.network,
            writable_paths: sb.writable_paths.iter().map(PathBuf::from).collect(),
            limits: sb.limits.unwrap_or_default(),
            deny_read: sb.deny_read.clone(),
            vars: Default::default(),
        };
    }
    p.shell.vars = crate::registry::actions::argument_env(&plan.arguments);
    Ok(p)
}

/// The executable decisions (current, with a step) in dependency order; ties keep the
/// strategy's order.
pub(crate) fn executable_in_order(store: &Store, plan_id: &Id) -> Result<Vec<Decision>, RunError> {
    let mut all: Vec<Decision> = store
        .decisions(plan_id)?
        .into_iter()
        .filter(|d| d.is_current() && d.step.is_some())
        .collect();
    // A decision a correction re-made takes the place of the one it replaces.
    let place = |d: &Decision| -> u32 {
        let mut cur = d.clone();
        for _ in 0..64 {
            let replaced = cur
                .context_snapshot
                .get("correction")
                .and_then(|c| c.get("replaces"))
                .and_then(Value::as_str)
                .and_then(|s| s.parse::<Id>().ok())
                .and_then(|id| store.decision(&id).ok().flatten());
            match replaced {
                Some(old) => cur = old,
                None => break,
            }
        }
        cur.sequence_number
    };
    all.sort_by_cached_key(|d| (place(d), d.sequence_number));
    let ids: HashSet<Id> = all.iter().map(|d| d.decision_id).collect();
    let mut deps: HashMap<Id, Vec<Id>> = HashMap::new();
    for d in &all {
        let ups = store
            .dependencies_of(&d.decision_id)?
            .into_iter()
            .filter(|u| ids.contains(u))
            .collect();
        deps.insert(d.decision_id, ups);
    }
    let mut done: HashSet<Id> = HashSet::new();
    let mut out = Vec::new();
    while out.len() < all.len() {
        let next = all.iter().find(|d| {
            !done.contains(&d.decision_id) && deps[&d.decision_id].iter().all(|u| done.contains(u))
        });
        match next {
            Some(d) => {
                done.insert(d.decision_id);
                out.push(d.clone());
            }
            None => {
                return Err(RunError::Invalid(
                    "the strategy's step dependencies form a cycle".into(),
                ));
            }
        }
    }
    Ok(out)
}

fn save(store: &mut Store, plan_id: &Id, step: &PlanStep) -> Result<(), StoreError> {
    let tx = store.conn_mut().transaction()?;
    save_step(&tx, plan_id, step)?;
    tx.commit()?;
    Ok(())
}

/// Rolls the sandboxes back to the start of `step` (its start checkpoint, or the sandboxes'
/// bases when none existed yet). Leaves the plan at execute / queued.
pub(crate) fn roll_back_step(
    engine: &mut Lifecycle,
    sandboxes: &Sandboxes,
    plan_id: &Id,
    step: &PlanStep,
) -> Result<Value, RunError> {
    let killed = crate::tools::shell::kill_orphans(&sandboxes.plan_dir(plan_id));
    let cp = step
        .start_checkpoints
        .get("checkpoint")
        .and_then(Value::as_str)
        .and_then(|s| s.parse::<crate::sandbox::CheckpointId>().ok());
    match cp {
        Some(cp) => {
            let outcome = checkpoint::rollback(engine.store_mut(), sandboxes, plan_id, &cp)?;
            Ok(
                json!({"checkpoint": cp, "resources": outcome.resources, "killed_process_groups": killed}),
            )
        }
        None => {
            let mut resources = Vec::new();
            for sb in sandboxes.active(engine.store(), plan_id)? {
                let _lock = sb.lock()?;
                checkpoint::restore(&sb, sb.base_commit()?)?;
                resources.push(sb.record.resource_name.clone());
            }
            Ok(
                json!({"checkpoint": null, "to": "base", "resources": resources, "killed_process_groups": killed}),
            )
        }
    }
}

fn take_checkpoint(
    engine: &mut Lifecycle,
    sandboxes: &Sandboxes,
    plan_id: &Id,
    label: &str,
    step: &str,
    decision: &Id,
) -> Result<Option<String>, RunError> {
    Ok(checkpoint::create(
        engine.store_mut(),
        sandboxes,
        plan_id,
        &CheckpointRequest {
            step: Some(step.to_string()),
            decision_id: Some(decision.to_string()),
            label: label.to_string(),
            reuse_if_unchanged: false,
            written_only: true,
        },
    )?
    .map(|c| c.checkpoint_id.to_string()))
}

/// Bytes of a step's stdout and of its stderr that its events carry: the last ones (the step
/// row keeps the whole output for `plan logs`).
pub const EVENT_OUTPUT_TAIL: usize = 4000;

/// A step's output as its events carry it: `stdout` and `stderr` cut to their last
/// [`EVENT_OUTPUT_TAIL`] bytes, with a leading `… (N bytes) ` when cut.
pub fn event_output(output: &Value) -> Value {
    let mut out = output.clone();
    for key in ["stdout", "stderr"] {
        if let Some(text) = output[key].as_str()
            && text.len() > EVENT_OUTPUT_TAIL
        {
            let mut start = text.len() - EVENT_OUTPUT_TAIL;
            while !text.is_char_boundary(start) {
                start += 1;
            }
            out[key] = json!(format!("… ({} bytes) {}", text.len(), &text[start..]));
        }
    }
    out
}

/// Ends `step` as done: takes its end checkpoint, records its output and an `execute_step`
/// event with `status` (`done`, or `replayed` for a correction's replay), in one transaction.
fn finish_step(
    engine: &mut Lifecycle,
    plan: &mut Plan,
    sandboxes: &Sandboxes,
    step: &mut PlanStep,
    label: &str,
    output: Value,
    status: &str,
) -> Result<(), RunError> {
    let plan_id = plan.plan_id;
    let end = take_checkpoint(engine, sandboxes, &plan_id, "end", label, &step.decision_id)?;
    step.status = StepStatus::Done;
    step.end_checkpoints = serde_json::Map::new();
    if let Some(cp) = &end {
        step.end_checkpoints.insert("checkpoint".into(), json!(cp));
    }
    step.output = Some(output.to_string());
    step.finished_at = Some(Timestamp::now());
    let finished = step.clone();
    commit(
        engine.store_mut(),
        plan,
        EventKind::ExecuteStep(ExecuteStep {
            position: Some(finished.position),
            decision_id: Some(finished.decision_id.to_string()),
            checkpoint: Some(end),
            output: Some(event_output(&output)),
            ..ExecuteStep::new(label, status)
        }),
        |tx| save_step(tx, &plan_id, &finished),
    )?;
    engine.flush(&plan_id)?;
    Ok(())
}

/// Pauses `step` after its actor called `request_decision`: a decision (child of the step's)
/// holding the question, a `decision` approval, the persisted transcript, the step back to
/// pending with its start checkpoint, and the plan at execute/queued (`awaiting_decision`),
/// all in one transaction.
fn pause_step(
    engine: &mut Lifecycle,
    plan: &mut Plan,
    step: &PlanStep,
    label: &str,
    q: Question,
) -> Result<crate::domain::approval::Approval, RunError> {
    use crate::domain::approval::{Approval, ApprovalKind};
    use crate::domain::decision::DecisionType;
    let plan_id = plan.plan_id;
    let now = Timestamp::now();
    let chosen = q
        .recommended
        .clone()
        .unwrap_or_else(|| q.options[0].clone());
    let mut d = Decision::new(
        plan_id,
        DecisionType::ImplementationChoice,
        chosen.clone(),
        now,
    );
    d.attempt = plan.status.attempt;
    d.parent_decision_id = Some(step.decision_id);
    d.question = Some(q.question.clone());
    d.alternatives_considered = q
        .options
        .iter()
        .filter(|o| **o != chosen)
        .cloned()
        .collect();
    d.rationale = Some(
        "asked by the execution actor with request_decision; the user decides (until then the actor's recommendation stands)".into(),
    );
    d.context_snapshot = json!({
        "requested_by": "request_decision",
        "step_decision_id": step.decision_id.to_string(),
        "context": q.context,
    });
    let mut a = Approval::new(plan_id, ApprovalKind::Decision, q.question.clone(), now);
    a.context = json!({
        "decision_id": d.decision_id.to_string(),
        "step_decision_id": step.decision_id.to_string(),
        "step": label,
        "question": q.question,
        "recommended": q.recommended,
        "context": q.context,
        "phase": "execute",
    });
    a.options = q.options.clone();
    // A tool call waiting for approval records no decision: the approval is the record.
    let d = match &q.tool {
        Some(ask) => {
            model_executor::tool_approval(&mut a, ask, step.decision_id, label);
            None
        }
        None => Some(d),
    };
    let pause = crate::store::pauses::ActorPause {
        approval_id: a.approval_id.clone(),
        plan_id,
        decision_id: step.decision_id,
        call_id: q.call_id,
        transcript: q.transcript,
        resumed_at: None,
    };
    let mut paused = step.clone();
    paused.status = StepStatus::Pending;
    paused.finished_at = None;
    state::set_state(plan, ProcessingState::Queued)?;
    let snapshot = plan.clone();
    let raised = a.clone();
    commit(
        engine.store_mut(),
        plan,
        EventKind::StateChanged(StateChanged::Transition(Transition {
            reason: Some("awaiting_decision".into()),
            step: Some(label.to_owned()),
            approvals: Some(vec![raised.approval_id.clone()]),
            ..Transition::at(Phase::Execute, ProcessingState::Queued)
        })),
        |tx| {
            if let Some(d) = &d {
                crate::store::decisions::insert_in(tx, d)?;
            }
            crate::store::approvals::insert_in(tx, &raised)?;
            crate::store::pauses::insert_in(tx, &pause)?;
            save_step(tx, &plan_id, &paused)?;
            state::reason(tx, &snapshot, Some("awaiting_decision"))
        },
    )?;
    engine.flush(&plan_id)?;
    Ok(a)
}

/// Runs Execute for a plan at (strategize, complete) (entering Execute) or (execute,
/// queued|errored) (resuming).
///
/// # Errors
/// [`RunError`] for store and sandbox failures; step failures are [`Ended::Errored`].
pub fn run(engine: &mut Lifecycle, plan: &mut Plan) -> Result<Ended, RunError> {
    let sandboxes = engine.sandboxes();
    let plan_id = plan.plan_id;
    // The plan's MCP servers: started by the first step that uses them, reused by the later
    // ones, stopped when this run returns (done, paused, failed or cancelled).
    let _servers = crate::tools::mcp::PlanServers::open(plan_id);
    let actor = plan
        .execution_actor
        .clone()
        .unwrap_or_else(|| SCRIPT_EXECUTOR.to_string());
    // Steps whose checkpoints a `plan rollback` discarded run again (their work is gone).
    engine.store_mut().reset_steps_after_rollback(&plan_id)?;
    let resumed = resume_interrupted_step(engine, &sandboxes, plan)?;
    let continuing = resumed["continued_at_call"]
        .is_u64()
        .then(|| resumed["decision_id"].as_str().and_then(|d| d.parse().ok()))
        .flatten();
    let gates = enter_execute(engine, plan, &actor, resumed)?;
    register_targets(engine, &sandboxes, plan)?;
    let run = StepRun {
        sandboxes: &sandboxes,
        actor: &actor,
        gates: &gates,
        plan_id,
        continuing: std::cell::Cell::new(continuing),
    };
    let n = match run.steps(engine, plan)? {
        Ok(n) => n,
        Err(ended) => return Ok(ended),
    };
    if let Some(ended) = run.validations(engine, plan)? {
        return Ok(ended);
    }
    complete(engine, plan, &sandboxes, n)?;
    Ok(Ended::Complete)
}

/// Resume: a step left running (its driver vanished) or failed is rolled back first. Returns
/// what the `execute_started` event reports about it (`null` when nothing was resumed).
fn resume_interrupted_step(
    engine: &mut Lifecycle,
    sandboxes: &Sandboxes,
    plan: &mut Plan,
) -> Result<Value, RunError> {
    let plan_id = plan.plan_id;
    if plan.phase() != Phase::Execute {
        return Ok(Value::Null);
    }
    let Some(step) = engine
        .store()
        .plan_steps(&plan_id)?
        .into_iter()
        .find(|s| matches!(s.status, StepStatus::Running | StepStatus::Failed))
    else {
        return Ok(Value::Null);
    };
    let mut again = step.clone();
    again.status = StepStatus::Pending;
    if step.status == StepStatus::Running
        && let Some((call, checkpoint)) = continuation(engine, &plan_id, &step)?
    {
        // A model executor's step continues at the exact call, a graph actor's at the node
        // and call (docs/sandbox.md).
        engine.observer().progress(&format!(
            "Execute: resuming step {} at model call {call}",
            step.position
        ));
        let restored = match &checkpoint {
            Some(cp) => super::journal::continue_from(engine.store_mut(), sandboxes, &plan_id, cp)?,
            None => roll_back_step(engine, sandboxes, &plan_id, &step)?,
        };
        // The step stays `running`: killed again before it starts, the next run restores
        // and continues it again instead of starting it afresh from a state mid-step.
        *plan = engine.plan(&plan_id)?;
        return Ok(
            json!({"step": step.position, "decision_id": step.decision_id.to_string(), "continued_at_call": call, "restored": restored}),
        );
    }
    engine.observer().progress(&format!(
        "Execute: rolling back step {} to its start",
        step.position
    ));
    let rolled = roll_back_step(engine, sandboxes, &plan_id, &step)?;
    save(engine.store_mut(), &plan_id, &again)?;
    *plan = engine.plan(&plan_id)?;
    Ok(
        json!({"step": step.position, "decision_id": step.decision_id.to_string(), "rolled_back": rolled}),
    )
}

/// Where an interrupted step continues, from its journal: the model call and the internal
/// checkpoint to restore first. `None` when it runs again from its start.
fn continuation(
    engine: &Lifecycle,
    plan_id: &Id,
    step: &PlanStep,
) -> Result<Option<(u32, Option<Value>)>, RunError> {
    let key = step.decision_id.to_string();
    if let Some(rebuilt) = super::journal::rebuild(&engine.store().journal(plan_id, &key)?) {
        return Ok(Some((rebuilt.call(), rebuilt.checkpoint)));
    }
    Ok(
        super::graph_journal::continuation(engine.store(), plan_id, &key)?
            .map(|c| (c.call, c.checkpoint)),
    )
}

/// Enters (or re-enters) Execute: the plan processing, its steps laid out on first entry,
/// errored approvals resolved, `execute_started` written. Returns the plan's gates.
fn enter_execute(
    engine: &mut Lifecycle,
    plan: &mut Plan,
    actor: &str,
    resumed: Value,
) -> Result<Gates, RunError> {
    let plan_id = plan.plan_id;
    let entering = plan.phase() == Phase::Strategize;
    if entering {
        plan.status
            .advance(Phase::Execute)
            .map_err(|e| RunError::WrongState {
                phase: plan.phase(),
                state: plan.state(),
                message: e.to_string(),
                hints: Vec::new(),
            })?;
    }
    state::set_state(plan, ProcessingState::Processing)?;
    plan.error_code = None;
    plan.error_message = None;
    let order = if entering || engine.store().plan_steps(&plan_id)?.is_empty() {
        Some(executable_in_order(engine.store(), &plan_id)?)
    } else {
        None
    };
    let gates = Gates::of(plan);
    let snapshot = plan.clone();
    let steps_total = match &order {
        Some(o) => o.len(),
        None => engine.store().plan_steps(&plan_id)?.len(),
    };
    commit(
        engine.store_mut(),
        plan,
        EventKind::ExecuteStarted(ExecuteStarted {
            attempt: snapshot.status.attempt,
            actor: actor.to_owned(),
            steps: steps_total as u64,
            resumed,
            sandbox: if gates.flags.require_sandbox {
                "required by the profile"
            } else {
                "used although require_sandbox is false: Execute always works in sandboxes so that nothing reaches the project before Apply"
            }
            .into(),
        }),
        |tx| {
            if let Some(o) = &order {
                let ids: Vec<Id> = o.iter().map(|d| d.decision_id).collect();
                replace_steps(tx, &snapshot.plan_id, &ids)?;
            }
            state::resolve_pending(
                tx,
                &snapshot,
                Some("errored"),
                ApprovalStatus::Approved,
                &json!({"answer": "retry"}),
            )?;
            state::reason(tx, &snapshot, None)
        },
    )?;
    engine.flush(&plan_id)?;
    Ok(gates)
}

/// What every step of one Execute run shares.
struct StepRun<'a> {
    sandboxes: &'a Sandboxes,
    actor: &'a str,
    gates: &'a Gates,
    plan_id: Id,
    /// The step that continues from its journal (its driver vanished mid-step); taken by
    /// its first start, so a retry of it starts afresh.
    continuing: std::cell::Cell<Option<Id>>,
}

/// A paused step's approval and how its model run continues.
type Resumed = (String, model_executor::Resume);

impl StepRun<'_> {
    /// Runs every step not done yet, in order. The number of steps, or how the run ended early.
    fn steps(
        &self,
        engine: &mut Lifecycle,
        plan: &mut Plan,
    ) -> Result<Result<usize, Ended>, RunError> {
        let plan_id = self.plan_id;
        let watcher = Watcher::start(engine, plan_id);
        let decisions: BTreeMap<Id, Decision> = engine
            .store()
            .decisions(&plan_id)?
            .into_iter()
            .map(|d| (d.decision_id, d))
            .collect();
        let steps = engine.store().plan_steps(&plan_id)?;
        let n = steps.len();
        for mut step in steps {
            if step.status == StepStatus::Done {
                continue;
            }
            let Some(decision) = decisions.get(&step.decision_id) else {
                continue;
            };
            let key = decision.context_snapshot["key"]
                .as_str()
                .unwrap_or_default()
                .to_string();
            let label = format!("step {} of {n}: {key}", step.position);
            if let Some(ended) = self.step(engine, plan, &watcher, decision, &mut step, &label)? {
                return Ok(Err(ended));
            }
        }
        Ok(Ok(n))
    }

    /// Runs one step to its end, retrying a failure as the profile allows; `Some` when the
    /// run ends with it (stopped, paused, awaiting approvals, errored).
    fn step(
        &self,
        engine: &mut Lifecycle,
        plan: &mut Plan,
        watcher: &Watcher,
        decision: &Decision,
        step: &mut PlanStep,
        label: &str,
    ) -> Result<Option<Ended>, RunError> {
        let plan_id = self.plan_id;
        let mut retries_left = self.gates.step_retries();
        loop {
            if watcher.stopped() || super::stop::stop_cause(engine, &plan_id)?.is_some() {
                return Ok(Some(Ended::Stopped));
            }
            let resume = match pending_resume(engine, &plan_id, step)? {
                Ok(resume) => resume,
                Err(waiting) => return Ok(Some(waiting)),
            };
            engine.observer().progress(&format!("Execute: {label}"));
            self.start_step(engine, plan, step, label, resume.as_ref())?;
            let replay_conflict = match self.replay_kept(engine, plan, step, label)? {
                Some(conflict) => conflict,
                None => return Ok(None),
            };
            let ended = self.dispatch(engine, plan, watcher, decision, resume.as_ref())?;
            let ended = expected::check(engine, self.sandboxes, plan, decision, ended);
            let ended = match ended {
                StepEnd::Done { output } if !replay_conflict.is_null() => StepEnd::Done {
                    output: json!({"replay_conflict": replay_conflict, "rerun": output}),
                },
                other => other,
            };
            match ended {
                StepEnd::Stopped => return Ok(Some(Ended::Stopped)),
                StepEnd::Paused(q) => {
                    let approval = pause_step(engine, plan, step, label, *q)?;
                    return Ok(Some(Ended::Awaiting(vec![approval])));
                }
                StepEnd::Awaiting { approvals } => {
                    await_approvals(engine, plan, step, label, &approvals)?;
                    return Ok(Some(Ended::Awaiting(approvals)));
                }
                StepEnd::Done { output } => {
                    finish_step(engine, plan, self.sandboxes, step, label, output, "done")?;
                    // Spec 12, prevention: a violated invariant stops the plan here.
                    return super::invariant_checks::after_step(
                        engine,
                        plan,
                        self.sandboxes,
                        step,
                        label,
                    );
                }
                StepEnd::Failed {
                    code,
                    message,
                    output,
                } => {
                    // Retrying cannot help an unsupported step or a merge conflict (the same
                    // children would conflict again).
                    if retries_left > 0 && code != "NOT_SUPPORTED" && code != "MERGE_CONFLICT" {
                        retries_left -= 1;
                        self.retry_step(engine, plan, step, label, &message)?;
                        continue;
                    }
                    fail_step(engine, plan, step, label, &code, &message, &output)?;
                    return Ok(Some(Ended::Errored { code, message }));
                }
            }
        }
    }

    /// Marks the step running, with a start checkpoint unless it resumes a paused run or
    /// continues from its journal (the step keeps its start checkpoint then: its work so far
    /// stays).
    fn start_step(
        &self,
        engine: &mut Lifecycle,
        plan: &mut Plan,
        step: &mut PlanStep,
        label: &str,
        resume: Option<&Resumed>,
    ) -> Result<(), RunError> {
        let plan_id = self.plan_id;
        let continuing = self.continuing.get() == Some(step.decision_id);
        self.continuing.set(None);
        if !continuing {
            // A fresh run of the step: its journal starts empty.
            engine
                .store_mut()
                .journal_clear(&plan_id, &step.decision_id.to_string())?;
        }
        let start = if resume.is_some() || continuing {
            step.start_checkpoints
                .get("checkpoint")
                .and_then(Value::as_str)
                .map(str::to_string)
        } else {
            let start = take_checkpoint(
                engine,
                self.sandboxes,
                &plan_id,
                "start",
                label,
                &step.decision_id,
            )?;
            step.start_checkpoints = serde_json::Map::new();
            if let Some(cp) = &start {
                step.start_checkpoints
                    .insert("checkpoint".into(), json!(cp));
            } else {
                // No sandbox exists yet: the plan's base is recorded as its first checkpoint,
                // so that a rollback can return to it (the step keeps no start checkpoint).
                checkpoint::record_base(engine.store_mut(), &plan_id, label)?;
            }
            start
        };
        step.status = StepStatus::Running;
        step.runs += 1;
        step.started_at = Some(Timestamp::now());
        step.finished_at = None;
        step.error = None;
        let started = step.clone();
        commit(
            engine.store_mut(),
            plan,
            EventKind::ExecuteStep(ExecuteStep {
                position: Some(started.position),
                decision_id: Some(started.decision_id.to_string()),
                run: Some(started.runs),
                checkpoint: Some(start),
                resumed_after: Some(resume.map(|(apr, _)| apr.clone())),
                ..ExecuteStep::new(label, "started")
            }),
            |tx| save_step(tx, &plan_id, &started),
        )?;
        engine.flush(&plan_id)?;
        if let Some((apr, _)) = resume {
            engine.store_mut().mark_pause_resumed(apr)?;
        }
        Ok(())
    }

    /// A step a correction kept: replays its recorded delta instead of running the actor;
    /// a conflict (or missing checkpoints) makes it re-run. `None` when the replay finished
    /// the step; otherwise the replay conflict (`null` when there was nothing to replay).
    fn replay_kept(
        &self,
        engine: &mut Lifecycle,
        plan: &mut Plan,
        step: &mut PlanStep,
        label: &str,
    ) -> Result<Option<Value>, RunError> {
        let plan_id = self.plan_id;
        let Some(recorded) = step.replay.clone() else {
            return Ok(Some(Value::Null));
        };
        let replayed =
            crate::sandbox::replay::replay(engine.store(), self.sandboxes, &plan_id, &recorded)?;
        if let crate::sandbox::replay::Replayed::Merged { .. } = &replayed {
            let output = json!({"replayed": replayed, "from": recorded});
            finish_step(
                engine,
                plan,
                self.sandboxes,
                step,
                label,
                output,
                "replayed",
            )?;
            return Ok(None);
        }
        let replay_conflict = json!(replayed);
        step.replay = None;
        let conflicted = step.clone();
        commit(
            engine.store_mut(),
            plan,
            EventKind::ExecuteStep(ExecuteStep {
                position: Some(conflicted.position),
                decision_id: Some(conflicted.decision_id.to_string()),
                replay: Some(replay_conflict.clone()),
                why: Some(
                    "the recorded delta does not apply to the corrected work; the step re-runs"
                        .into(),
                ),
                ..ExecuteStep::new(label, "replay_conflict")
            }),
            |tx| save_step(tx, &plan_id, &conflicted),
        )?;
        engine.flush(&plan_id)?;
        Ok(Some(replay_conflict))
    }

    /// Runs the step by its kind: a spawn step, a script step, or a model executor's step.
    fn dispatch(
        &self,
        engine: &mut Lifecycle,
        plan: &Plan,
        watcher: &Watcher,
        decision: &Decision,
        resume: Option<&Resumed>,
    ) -> Result<StepEnd, RunError> {
        let plan_id = self.plan_id;
        let policy = policy(engine, plan)?;
        let flag = Arc::clone(&watcher.flag);
        let stop_flag = Arc::clone(&watcher.flag);
        if children::is_spawn_step(decision) {
            return children::run_step(engine, plan, decision, flag);
        }
        if self.actor == SCRIPT_EXECUTOR {
            let mut runner = ToolRunner::new(engine.store_mut(), self.sandboxes).with_cancel(flag);
            return Ok(script_executor::run_step(
                &mut runner,
                &plan_id,
                &policy,
                decision
                    .context_snapshot
                    .get("script_step")
                    .filter(|v| !v.is_null()),
                &move || stop_flag.load(Ordering::SeqCst),
            )?);
        }
        let mut guidance = guidance_for(engine.store(), &plan_id)?;
        if let Some(reason) = &decision.correction_reason {
            guidance.push(format!("Correction of this step: {reason}"));
        }
        Ok(model_executor::run_step(
            engine,
            plan,
            decision,
            policy,
            flag,
            &guidance,
            resume.map(|(_, r)| r),
        ))
    }

    /// Rolls a failed step back to its start before it runs again
    /// (`auto_checkpoint_restore`).
    fn retry_step(
        &self,
        engine: &mut Lifecycle,
        plan: &mut Plan,
        step: &PlanStep,
        label: &str,
        message: &str,
    ) -> Result<(), RunError> {
        let plan_id = self.plan_id;
        let rolled = roll_back_step(engine, self.sandboxes, &plan_id, step)?;
        *plan = engine.plan(&plan_id)?;
        // A rollback to a checkpoint leaves the plan queued; one to the base (the first step
        // made no checkpoint) leaves it processing.
        if plan.state() != ProcessingState::Processing {
            state::set_state(plan, ProcessingState::Processing)?;
        }
        commit(
            engine.store_mut(),
            plan,
            EventKind::ExecuteStep(ExecuteStep {
                position: Some(step.position),
                decision_id: Some(step.decision_id.to_string()),
                error: Some(message.to_owned()),
                rolled_back: Some(rolled),
                why: Some("auto_checkpoint_restore".into()),
                ..ExecuteStep::new(label, "retrying")
            }),
            |_| Ok(()),
        )?;
        engine.flush(&plan_id)?;
        Ok(())
    }

    /// Required validations, as the last step, in the sandboxes. `auto_validation_fix`: a
    /// model executor gets the failure output and another try, at most twice; each try is a
    /// `validation_response` decision with its own checkpoints. `Some` when the run ends here.
    fn validations(
        &self,
        engine: &mut Lifecycle,
        plan: &mut Plan,
    ) -> Result<Option<Ended>, RunError> {
        let plan_id = self.plan_id;
        engine
            .observer()
            .progress("Execute: running the project's validations");
        let mut results = super::validations::run_in_sandboxes(engine, self.sandboxes, plan)?;
        let mut rounds = if self.actor == SCRIPT_EXECUTOR {
            0
        } else {
            self.gates.validation_fix_rounds()
        };
        while rounds > 0 {
            let Some(failed) = results.iter().find(|r| r.required && !r.passed).cloned() else {
                break;
            };
            rounds -= 1;
            if super::stop::stop_cause(engine, &plan_id)?.is_some() {
                return Ok(Some(Ended::Stopped));
            }
            if self.fix_validation(engine, plan, &failed)? == StepEnd::Stopped {
                return Ok(Some(Ended::Stopped));
            }
            results = super::validations::run_in_sandboxes(engine, self.sandboxes, plan)?;
        }
        let failed_required: Vec<&super::validations::ValidationRun> =
            results.iter().filter(|r| r.required && !r.passed).collect();
        let summary = json!({"execute": results});
        commit(
            engine.store_mut(),
            plan,
            EventKind::ExecuteStep(ExecuteStep {
                validations: Some(json!(results)),
                ..ExecuteStep::new(
                    "validations",
                    if failed_required.is_empty() {
                        "done"
                    } else {
                        "failed"
                    },
                )
            }),
            |_| Ok(()),
        )?;
        engine.flush(&plan_id)?;
        plan.validation_summary = Some(summary);
        let Some(first) = failed_required.first() else {
            return Ok(None);
        };
        let fix_rounds = self.gates.validation_fix_rounds();
        let message = format!(
            "required validation `{}` failed ({}){}",
            first.command,
            first.result,
            if fix_rounds > 0 && self.actor == SCRIPT_EXECUTOR {
                "; builtin/script-executor cannot fix a failing validation, so auto_validation_fix does not apply"
            } else if fix_rounds > 0 {
                "; the execution actor's two fix attempts (auto_validation_fix) did not make it pass"
            } else {
                ""
            }
        );
        state::errored(
            engine.store_mut(),
            plan,
            "VALIDATION_FAILED",
            &message,
            json!({"validations": results}),
        )?;
        engine.flush(&plan_id)?;
        Ok(Some(Ended::Errored {
            code: "VALIDATION_FAILED".into(),
            message,
        }))
    }

    /// One `auto_validation_fix` try: a `validation_response` decision run by the model
    /// executor between its own checkpoints.
    fn fix_validation(
        &self,
        engine: &mut Lifecycle,
        plan: &mut Plan,
        failed: &super::validations::ValidationRun,
    ) -> Result<StepEnd, RunError> {
        let plan_id = self.plan_id;
        let fix = validation_fix_decision(plan, failed);
        let label = format!("validation fix: {}", failed.command);
        let start = take_checkpoint(
            engine,
            self.sandboxes,
            &plan_id,
            "start",
            &label,
            &fix.decision_id,
        )?;
        let recorded = fix.clone();
        commit(
            engine.store_mut(),
            plan,
            EventKind::ExecuteStep(ExecuteStep {
                decision_id: Some(fix.decision_id.to_string()),
                checkpoint: Some(start),
                why: Some("auto_validation_fix".into()),
                ..ExecuteStep::new(&label, "started")
            }),
            |tx| crate::store::decisions::insert_in(tx, &recorded).map(|_| ()),
        )?;
        engine.flush(&plan_id)?;
        let policy = policy(engine, plan)?;
        let guidance = guidance_for(engine.store(), &plan_id)?;
        let snapshot = plan.clone();
        let flag = Arc::new(AtomicBool::new(false));
        let ended =
            model_executor::run_step(engine, &snapshot, &fix, policy, flag, &guidance, None);
        let ended = match ended {
            StepEnd::Awaiting { .. } => StepEnd::Failed {
                code: "STEP_FAILED".into(),
                message: "a validation fix cannot wait for approvals".into(),
                output: Value::Null,
            },
            other => other,
        };
        let end = take_checkpoint(
            engine,
            self.sandboxes,
            &plan_id,
            "end",
            &label,
            &fix.decision_id,
        )?;
        commit(
            engine.store_mut(),
            plan,
            EventKind::ExecuteStep(ExecuteStep {
                decision_id: Some(fix.decision_id.to_string()),
                checkpoint: Some(end),
                ..ExecuteStep::new(
                    &label,
                    match ended {
                        StepEnd::Done { .. } => "done",
                        StepEnd::Stopped => "stopped",
                        StepEnd::Failed { .. } => "failed",
                        StepEnd::Paused(_) => "asked_a_question_a_fix_cannot_wait_for",
                        StepEnd::Awaiting { .. } => "failed",
                    },
                )
            }),
            |_| Ok(()),
        )?;
        engine.flush(&plan_id)?;
        Ok(ended)
    }
}

/// A run paused by `request_decision` continues once the user has answered. `Err` while the
/// question is still open; `None` when the step has no pause.
fn pending_resume(
    engine: &Lifecycle,
    plan_id: &Id,
    step: &PlanStep,
) -> Result<Result<Option<Resumed>, Ended>, RunError> {
    let Some(pause) = engine.store().open_pause(plan_id, &step.decision_id)? else {
        return Ok(Ok(None));
    };
    Ok(match engine.store().approval(&pause.approval_id)? {
        Some(a) if a.status == ApprovalStatus::Pending => Err(Ended::Awaiting(vec![a])),
        Some(a) => Ok(Some((
            pause.approval_id.clone(),
            model_executor::Resume::after(&a, pause.transcript, pause.call_id, answer_text(&a)),
        ))),
        None => Ok(None),
    })
}

/// A spawn step waits for child-spawn approvals: the step pending again, the plan queued.
fn await_approvals(
    engine: &mut Lifecycle,
    plan: &mut Plan,
    step: &mut PlanStep,
    label: &str,
    approvals: &[crate::domain::approval::Approval],
) -> Result<(), RunError> {
    let plan_id = plan.plan_id;
    step.status = StepStatus::Pending;
    step.finished_at = None;
    let waiting = step.clone();
    *plan = engine.plan(&plan_id)?;
    state::set_state(plan, ProcessingState::Queued)?;
    let tx_plan = plan.clone();
    commit(
        engine.store_mut(),
        plan,
        EventKind::ExecuteStep(ExecuteStep {
            position: Some(waiting.position),
            decision_id: Some(waiting.decision_id.to_string()),
            approvals: Some(approvals.iter().map(|a| a.approval_id.clone()).collect()),
            ..ExecuteStep::new(label, "awaiting_approval")
        }),
        |tx| {
            save_step(tx, &plan_id, &waiting)?;
            state::reason(tx, &tx_plan, Some("awaiting_child_spawn"))
        },
    )?;
    engine.flush(&plan_id)?;
    Ok(())
}

/// A step failed for good: recorded failed, the plan errored.
fn fail_step(
    engine: &mut Lifecycle,
    plan: &mut Plan,
    step: &mut PlanStep,
    label: &str,
    code: &str,
    message: &str,
    output: &Value,
) -> Result<(), RunError> {
    let plan_id = plan.plan_id;
    step.status = StepStatus::Failed;
    step.error = Some(message.to_owned());
    step.output = Some(output.to_string());
    step.finished_at = Some(Timestamp::now());
    let failed = step.clone();
    commit(
        engine.store_mut(),
        plan,
        EventKind::ExecuteStep(ExecuteStep {
            position: Some(failed.position),
            decision_id: Some(failed.decision_id.to_string()),
            error: Some(message.to_owned()),
            output: Some(event_output(output)),
            ..ExecuteStep::new(label, "failed")
        }),
        |tx| save_step(tx, &plan_id, &failed),
    )?;
    state::errored(
        engine.store_mut(),
        plan,
        code,
        message,
        json!({"step": failed.position, "decision_id": failed.decision_id.to_string(), "output": event_output(output)}),
    )?;
    engine.flush(&plan_id)?;
    Ok(())
}

/// The `validation_response` decision of one `auto_validation_fix` try.
fn validation_fix_decision(plan: &Plan, failed: &super::validations::ValidationRun) -> Decision {
    let mut fix = Decision::new(
        plan.plan_id,
        crate::domain::decision::DecisionType::ValidationResponse,
        format!("fix the failing validation `{}`", failed.command),
        Timestamp::now(),
    );
    fix.attempt = plan.status.attempt;
    fix.parent_decision_id = plan.decision_root_id;
    fix.question = Some(format!("How to make `{}` pass?", failed.command));
    fix.rationale = Some("auto_validation_fix: the required validation failed".into());
    fix.step = Some(crate::domain::decision::Step {
        instructions: format!(
            "The required validation `{}` failed ({}).\nstdout:\n{}\nstderr:\n{}\nChange the project so that it passes, within the plan's strategy.",
            failed.command, failed.result, failed.stdout, failed.stderr
        ),
        expected_outputs: Vec::new(),
        ..Default::default()
    });
    fix
}

/// Execute finished: the sandboxes and last checkpoint recorded on the plan, which is
/// complete; `execute_complete` written and the correction attempts closed.
fn complete(
    engine: &mut Lifecycle,
    plan: &mut Plan,
    sandboxes: &Sandboxes,
    n: usize,
) -> Result<(), RunError> {
    let plan_id = plan.plan_id;
    let latest = engine.store().latest_checkpoint(&plan_id)?;
    let active = sandboxes.active(engine.store(), &plan_id)?;
    plan.sandbox_refs = active
        .iter()
        .map(|s| s.record.root_dir.display().to_string())
        .collect();
    plan.changeset_id = latest.as_ref().map(|c| c.checkpoint_id.to_string());
    state::set_state(plan, ProcessingState::Complete)?;
    let calls = engine.store().tool_calls(&plan_id)?;
    commit(
        engine.store_mut(),
        plan,
        EventKind::ExecuteComplete(ExecuteComplete {
            steps: n as u64,
            tool_calls: calls.iter().filter(|c| c.discarded_at.is_none()).count() as u64,
            sandboxes: active
                .iter()
                .map(|s| s.record.resource_name.clone())
                .collect(),
            checkpoint: latest.map(|c| c.checkpoint_id.to_string()),
        }),
        |_| Ok(()),
    )?;
    engine.flush(&plan_id)?;
    crate::store::corrections::finish_attempts(engine.store_mut(), &plan_id)?;
    Ok(())
}
