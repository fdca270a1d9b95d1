//! Child plans (spec sections 08 and 31).
//!
//! A spawn step is a `subplan_spawn` decision (sequential: its own step, a failure stops the
//! later steps) or a `subplan_parallel_spawn` decision whose `subplan_spawn` members run
//! concurrently, at most `max-parallel-children` at once, each to its end whatever its
//! siblings do. Per spawn:
//!
//! 1. Under a profile with `auto_child_plans = false` a `child_spawn` approval is raised first
//!    (`plan decide APR --option spawn|skip`); the parent waits at (execute, queued).
//! 2. The parent's sandboxes are checkpointed; the child is a full plan (`parent_plan_id`,
//!    `root_plan_id`, its own decisions) whose bases are the parent's sandbox repositories at
//!    that checkpoint, so its sandboxes branch from the parent's current state. It inherits the
//!    parent's frozen automation profile, and its Strategize takes the parent's effective
//!    invariants as they are (no second reconciliation).
//! 3. It runs on its own thread with its own database connection in the parent's process,
//!    holding its own lease row for the same process (so no other process takes it over), from
//!    Strategize to the end of Execute; a child never applies by itself.
//! 4. Results merge back into the parent's sandbox by a three-way merge of trees
//!    ([`crate::sandbox::merge`]), in spawn order, after every child of the step has
//!    finished. A conflict fails the step with `MERGE_CONFLICT` and an `error_recovery`
//!    approval naming the child and the paths; a child that failed leaves nothing merged.
//! 5. Cancelling the parent requests cancellation of its running children; Ctrl-C interrupts
//!    them with the parent.
//!
//! The spawn decision is linked to the child's root `prompt_definition` decision by a
//! `decision_dependencies` row of type `plan` whose `downstream_ref` is the child plan id
//! (written when the child records its root).

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use jiff::Timestamp;
use serde_json::{Map, Value, json};

use super::step_end::StepEnd;
use crate::domain::approval::{Approval, ApprovalKind, ApprovalStatus};
use crate::domain::decision::{Decision, DecisionType};
use crate::domain::event::{ChildFinished, ChildMerged, ChildSpawned, ChildStarted};
use crate::domain::{Id, Phase, Plan, ProcessingState};
use crate::events::{self, EventKind};
use crate::lease;
use crate::lifecycle::ended::Ended;
use crate::lifecycle::gates::Gates;
use crate::lifecycle::transitions::{self, Drive, Work};
use crate::lifecycle::{
    Lifecycle, LifecycleSeed, Observer, RunError, approvals as lc_approvals, driven, stop,
    strategize,
};
use crate::registry::plan_use::{self, ChildRequest};
use crate::sandbox::Sandboxes;
use crate::sandbox::checkpoint::{self, CheckpointRequest};
use crate::sandbox::merge::{self, MergeOutcome};
use crate::store::children::{ChildLink, ChildStatus};
use crate::store::lifecycle_run::{BaseKind, PlanBase};
use crate::store::{Store, StoreError};

/// How deep child plans nest (a child of a plan that is itself a child is at depth 2).
pub const MAX_DEPTH: usize = 4;

/// One spawn: the `subplan_spawn` decision and what it asks for.
#[derive(Debug, Clone)]
pub struct Spawn {
    /// The `subplan_spawn` decision.
    pub decision_id: Id,
    /// Its key (script step name).
    pub key: String,
    /// The action the child uses.
    pub action: String,
    /// The child's arguments.
    pub args: Map<String, Value>,
    /// Guidance for the child's strategy (model executors' `create_subplan`).
    pub guidance: Option<String>,
}

/// What a spawn decision's context snapshot says it spawns, if anything:
/// `script_step.spawn {action, args}` (script actions) or `spawn {action, args, guidance}`
/// (`create_subplan`).
pub fn spawn_of(d: &Decision) -> Option<Spawn> {
    let snap = &d.context_snapshot;
    let spec = snap
        .get("script_step")
        .and_then(|s| s.get("spawn"))
        .or_else(|| snap.get("spawn"))
        .filter(|v| v.is_object())?;
    Some(Spawn {
        decision_id: d.decision_id,
        key: snap["key"].as_str().unwrap_or_default().to_string(),
        action: spec["action"].as_str()?.to_string(),
        args: spec["args"].as_object().cloned().unwrap_or_default(),
        guidance: spec["guidance"].as_str().map(str::to_string),
    })
}

/// Whether Execute runs this step as a spawn (rather than handing it to the execution actor).
pub fn is_spawn_step(d: &Decision) -> bool {
    match d.decision_type {
        DecisionType::SubplanSpawn => spawn_of(d).is_some(),
        DecisionType::SubplanParallelSpawn => d
            .context_snapshot
            .get("script_step")
            .and_then(|s| s.get("parallel_group"))
            .is_some(),
        _ => false,
    }
}

/// Forwards a child's progress to the parent's observer (prefixed) and the parent's Ctrl-C;
/// the child's own events stay in the database (the parent records `child_*` events).
struct ChildObserver {
    parent: Arc<dyn Observer>,
    label: String,
}

impl Observer for ChildObserver {
    fn progress(&self, message: &str) {
        self.parent.progress(&format!("{}: {message}", self.label));
    }
    fn interrupted(&self) -> bool {
        self.parent.interrupted()
    }
}

/// How a child's run ended.
#[derive(Debug, Clone, PartialEq)]
enum ChildEnded {
    Succeeded,
    Failed { code: String, message: String },
    Cancelled,
    Interrupted,
}

fn parent_event(store: &mut Store, parent: &Id, event: EventKind) -> Result<(), StoreError> {
    let tx = store.conn_mut().transaction()?;
    events::append(&tx, Some(parent), &event)?;
    tx.commit()?;
    Ok(())
}

/// Drives one child from where it is to the end of its Execute, on the calling thread.
fn run_child(seed: &LifecycleSeed, child_id: Id) -> Result<ChildEnded, RunError> {
    let mut engine = seed.open()?;
    let guard = lease::acquire(engine.store_mut(), &child_id, "child")?;
    let outcome = loop {
        if guard.is_lost() {
            break ChildEnded::Interrupted;
        }
        if let Some(cause) = stop::stop_cause(&engine, &child_id)? {
            let mut plan = engine.plan(&child_id)?;
            break match stop::stop(&mut engine, &mut plan, cause)? {
                driven::Stopped::Cancelled { .. } => ChildEnded::Cancelled,
                _ => ChildEnded::Interrupted,
            };
        }
        let mut plan = engine.plan(&child_id)?;
        match transitions::next(plan.phase(), plan.state(), Drive::Child) {
            Work::Cancelled => break ChildEnded::Cancelled,
            Work::Strategize => match strategize::run(&mut engine, &mut plan, &[])? {
                Ended::Complete => continue,
                Ended::Stopped => {}
                Ended::Awaiting(a) => {
                    break ChildEnded::Failed {
                        code: "CHILD_NEEDS_HUMAN".into(),
                        message: format!(
                            // A command inside a sentence stays (D-commands-2): it explains the error rather than suggesting the next step.
                            "its strategy waits for {} decision(s) ({}); answer them, run `agents plan execute {child_id}`, then run the parent again",
                            a.len(),
                            a.iter()
                                .map(|a| a.approval_id.as_str())
                                .collect::<Vec<_>>()
                                .join(", ")
                        ),
                    };
                }
                Ended::Errored { code, message } => {
                    break ChildEnded::Failed { code, message };
                }
            },
            Work::EnterExecute | Work::ResumeExecute => match super::run(&mut engine, &mut plan)? {
                Ended::Complete => continue,
                Ended::Stopped => {}
                Ended::Awaiting(a) => {
                    break ChildEnded::Failed {
                        code: "CHILD_NEEDS_HUMAN".into(),
                        message: format!(
                            "it waits for approval {}; answer it, then run the parent again",
                            a.first().map(|a| a.approval_id.as_str()).unwrap_or("?")
                        ),
                    };
                }
                Ended::Errored { code, message } => {
                    break ChildEnded::Failed { code, message };
                }
            },
            Work::ExecuteDone => break ChildEnded::Succeeded,
            Work::EnterApply | Work::ResumeApply | Work::Applied | Work::Refused => {
                break ChildEnded::Failed {
                    code: "CHILD_FAILED".into(),
                    message: format!(
                        "it is at {}/{}, which a child cannot run from",
                        plan.phase(),
                        plan.state()
                    ),
                };
            }
        }
        // A phase stopped: find out why at the top of the loop; a stop nobody asked for
        // (a lost lease) ends the run.
        if stop::stop_cause(&engine, &child_id)?.is_none() {
            break ChildEnded::Interrupted;
        }
    };
    drop(guard);
    Ok(outcome)
}

/// The members of a step: itself for a `subplan_spawn`, its current `subplan_spawn` children
/// for a `subplan_parallel_spawn`.
fn members(store: &Store, step: &Decision) -> Result<Vec<Decision>, RunError> {
    if step.decision_type != DecisionType::SubplanParallelSpawn {
        return Ok(vec![step.clone()]);
    }
    Ok(store
        .decisions(&step.plan_id)?
        .into_iter()
        .filter(|d| {
            d.is_current()
                && d.decision_type == DecisionType::SubplanSpawn
                && d.parent_decision_id == Some(step.decision_id)
        })
        .collect())
}

/// How the sandbox of `s`'s action is wider than the one `plan`'s steps run under, one
/// phrase per difference (`network: false -> true`, `writable-paths: + /srv/cache`,
/// `env: + GITHUB_TOKEN`, `limits.memory: 2 GiB -> 8 GiB`); empty when it is not wider.
///
/// # Errors
/// Store errors.
pub(crate) fn sandbox_widening(
    engine: &Lifecycle,
    plan: &Plan,
    s: &Spawn,
) -> Result<Vec<String>, RunError> {
    let parent = super::policy(engine, plan)?.shell;
    let Some(action) = engine.store().action_by_name(&s.action)? else {
        return Ok(Vec::new());
    };
    let child = action.sandbox.unwrap_or_default();
    Ok(widening(&parent, &child))
}

fn widening(
    parent: &crate::tools::shell::ShellPolicy,
    child: &crate::registry::actions::SandboxSpec,
) -> Vec<String> {
    use crate::sandbox::launcher::Limits;
    let mut out = Vec::new();
    if child.network && !parent.network {
        out.push("network: false -> true".to_string());
    }
    for p in &child.writable_paths {
        let path = std::path::Path::new(p);
        if !parent.writable_paths.iter().any(|w| path.starts_with(w)) {
            out.push(format!("writable-paths: + {p}"));
        }
    }
    for name in &child.env {
        if !parent.env.contains(name) {
            out.push(format!("env: + {name}"));
        }
    }
    for d in &parent.deny_read {
        if !child.deny_read.contains(d) {
            out.push(format!("deny-read: - {d}"));
        }
    }
    let (pl, cl) = (parent.limits, child.limits.unwrap_or_default());
    let shown = |v: u64| {
        if v == 0 {
            "unlimited".to_string()
        } else {
            Limits {
                processes: 0,
                memory: v,
                address_space: 0,
                file_size: 0,
                open_files: 0,
            }
            .describe()
            .split(", ")
            .nth(1)
            .and_then(|m| m.strip_prefix("memory "))
            .unwrap_or_default()
            .to_string()
        }
    };
    for (name, p, c, size) in [
        ("processes", pl.processes, cl.processes, false),
        ("memory", pl.memory, cl.memory, true),
        ("address-space", pl.address_space, cl.address_space, true),
        ("file-size", pl.file_size, cl.file_size, true),
        ("open-files", pl.open_files, cl.open_files, false),
    ] {
        let wider = p != 0 && (c == 0 || c > p);
        if wider {
            let f = |v: u64| {
                if size {
                    shown(v)
                } else if v == 0 {
                    "unlimited".into()
                } else {
                    v.to_string()
                }
            };
            out.push(format!("limits.{name}: {} -> {}", f(p), f(c)));
        }
    }
    out
}

/// The latest `child_spawn` approval of a spawn decision.
fn spawn_approval(store: &Store, plan: &Id, decision: &Id) -> Result<Option<Approval>, StoreError> {
    Ok(store.approvals_of(plan)?.into_iter().rfind(|a| {
        a.kind == ApprovalKind::ChildSpawn && a.context["decision_id"] == decision.to_string()
    }))
}

/// Runs a spawn step of `plan` (see the module documentation).
///
/// # Errors
/// [`RunError`] for store and sandbox failures; a child that fails or conflicts is a
/// [`StepEnd::Failed`].
pub(crate) fn run_step(
    engine: &mut Lifecycle,
    plan: &Plan,
    step: &Decision,
    stop: Arc<AtomicBool>,
) -> Result<StepEnd, RunError> {
    let group = step
        .context_snapshot
        .get("script_step")
        .and_then(|s| s.get("parallel_group"))
        .and_then(Value::as_str)
        .map(str::to_string);
    let mut spawns = Vec::new();
    for m in members(engine.store(), step)? {
        match spawn_of(&m) {
            Some(s) => spawns.push(s),
            None => {
                return Ok(StepEnd::Failed {
                    code: "NOT_SUPPORTED".into(),
                    message: format!(
                        "decision {} is a subplan_spawn without an action to spawn",
                        m.decision_id
                    ),
                    output: Value::Null,
                });
            }
        }
    }
    spawns_in(engine, plan, &spawns, group.as_deref(), stop).map(|end| match end {
        StepEnd::Failed {
            code,
            message,
            output,
        } => StepEnd::Failed {
            code,
            message: format!(
                "step {}: {message}",
                step.context_snapshot["key"].as_str().unwrap_or("spawn")
            ),
            output,
        },
        other => other,
    })
}

/// Runs `spawns` (one sequential spawn, or the members of one parallel group) to the end,
/// then merges their results into the parent's sandboxes.
///
/// # Errors
/// [`RunError`] for store and sandbox failures.
pub(crate) fn spawns_in(
    engine: &mut Lifecycle,
    plan: &Plan,
    spawns: &[Spawn],
    group: Option<&str>,
    stop: Arc<AtomicBool>,
) -> Result<StepEnd, RunError> {
    let plan_id = plan.plan_id;
    if let Some(refused) = nesting_refused(engine, plan)? {
        return Ok(refused);
    }
    let (approved, skipped) = match approve(engine, plan, spawns, group)? {
        Ok(decided) => decided,
        Err(waiting) => return Ok(waiting),
    };
    if approved.is_empty() {
        return Ok(StepEnd::Done {
            output: json!({"children": skipped}),
        });
    }
    let sandboxes = Sandboxes::new(engine.paths());
    let branch = branch_point(engine, &sandboxes, &plan_id, &approved)?;
    let reuse = settle_earlier_run(engine, &sandboxes, &plan_id, &approved, &branch)?;
    let spawned = match create_children(engine, plan, &approved, group, &branch, &reuse)? {
        Ok(spawned) => spawned,
        Err(failed) => return Ok(failed),
    };
    let Some(outcomes) = run_children(engine, &plan_id, group, &spawned, &stop)? else {
        return Ok(StepEnd::Stopped);
    };
    let mut report = match outcome_report(&spawned.children, &outcomes, skipped) {
        Ok(report) => report,
        Err(failed) => return Ok(failed),
    };
    merge_back(engine, &sandboxes, &plan_id, &spawned.children, &mut report)
}

/// A step that goes on (`Ok`) or ends now with this result (`Err`).
type Early<T> = Result<T, StepEnd>;

/// The approved spawns, and the report rows of the rejected ones.
type Decided<'s> = (Vec<&'s Spawn>, Vec<Value>);

/// The resources merged (by name), or the resource and paths of a conflict.
type MergeResult = Result<Map<String, Value>, (String, Vec<String>)>;

/// Step 0 of a spawn: nesting. Each level's sandbox borrows its parent's objects, and git
/// follows at most five levels of alternates.
fn nesting_refused(engine: &Lifecycle, plan: &Plan) -> Result<Option<StepEnd>, RunError> {
    let mut depth = 0;
    let mut up = plan.parent_plan_id;
    while let Some(p) = up {
        depth += 1;
        up = engine.store().plan(&p)?.and_then(|p| p.parent_plan_id);
    }
    if depth < MAX_DEPTH {
        return Ok(None);
    }
    Ok(Some(StepEnd::Failed {
        code: "CHILD_FAILED".into(),
        message: format!(
            "plan {} is a child plan {depth} levels deep; child plans nest at most {MAX_DEPTH} levels (each level's sandbox borrows its parent's git objects); an action that spawns itself needs a condition that ends the recursion",
            plan.plan_id
        ),
        output: Value::Null,
    }))
}

/// Step 1 of a spawn: approvals, when the profile wants a human before each spawn. A child
/// whose action asks for a wider sandbox than the parent runs under always needs a human's
/// yes, whatever the profile says (docs/sandbox.md, "Child plans"). Returns the approved
/// spawns and the report rows of the rejected ones, or the step's end while approvals wait.
fn approve<'s>(
    engine: &mut Lifecycle,
    plan: &Plan,
    spawns: &'s [Spawn],
    group: Option<&str>,
) -> Result<Early<Decided<'s>>, RunError> {
    let plan_id = plan.plan_id;
    let auto = Gates::of(plan).flags.auto_child_plans;
    let widenings: Vec<Vec<String>> = spawns
        .iter()
        .map(|s| sandbox_widening(engine, plan, s))
        .collect::<Result<_, _>>()?;
    if auto && widenings.iter().all(Vec::is_empty) {
        return Ok(Ok((spawns.iter().collect(), Vec::new())));
    }
    let mut approved: Vec<&Spawn> = Vec::new();
    let mut skipped: Vec<Value> = Vec::new();
    let mut waiting = Vec::new();
    for (s, wide) in spawns.iter().zip(&widenings) {
        if auto && wide.is_empty() {
            approved.push(s);
            continue;
        }
        match spawn_approval(engine.store(), &plan_id, &s.decision_id)? {
            Some(a) if a.status == ApprovalStatus::Approved => approved.push(s),
            Some(a) if a.status == ApprovalStatus::Rejected => skipped.push(json!({
                "spawn_decision_id": s.decision_id.to_string(),
                "action": s.action,
                "status": "skipped",
                "approval_id": a.approval_id,
            })),
            Some(a) if a.status == ApprovalStatus::Pending => waiting.push(a),
            _ => {
                let a = spawn_request(plan, s, group, wide);
                engine.store_mut().insert_approval(&a)?;
                waiting.push(a);
            }
        }
    }
    engine.flush(&plan_id)?;
    if !waiting.is_empty() {
        return Ok(Err(StepEnd::Awaiting { approvals: waiting }));
    }
    Ok(Ok((approved, skipped)))
}

/// The approval that asks a human whether to spawn `s`.
fn spawn_request(plan: &Plan, s: &Spawn, group: Option<&str>, wide: &[String]) -> Approval {
    let mut a = Approval::new(
        plan.plan_id,
        ApprovalKind::ChildSpawn,
        format!(
            "Spawn a child plan of {} ({}){}{}",
            s.action,
            s.key,
            group
                .map(|g| format!(" in parallel group {g}"))
                .unwrap_or_default(),
            if wide.is_empty() {
                String::new()
            } else {
                format!(
                    "; its sandbox is wider than this plan's: {}",
                    wide.join("; ")
                )
            }
        ),
        Timestamp::now(),
    );
    a.options = vec!["spawn".into(), "skip".into()];
    a.context = json!({
        "decision_id": s.decision_id.to_string(),
        "key": s.key,
        "action": s.action,
        "args": s.args,
        "guidance": s.guidance,
        "parallel_group": group,
        "flag": if wide.is_empty() { "auto_child_plans" } else { "sandbox_widening" },
        "sandbox_widening": wide,
        "automation_profile": plan.automation_profile,
    });
    a
}

/// Where the children branch off: the checkpoint taken, the children's bases (the parent's
/// sandbox repositories at that checkpoint) and the commit and tree per resource.
struct Branch {
    checkpoint_id: Option<String>,
    bases: Vec<PlanBase>,
    trees: Map<String, Value>,
}

/// Step 2 of a spawn: the branch point, every target sandboxed and checkpointed.
fn branch_point(
    engine: &mut Lifecycle,
    sandboxes: &Sandboxes,
    plan_id: &Id,
    approved: &[&Spawn],
) -> Result<Branch, RunError> {
    let bases = engine.store().plan_bases(plan_id)?;
    for b in &bases {
        sandboxes.ensure(engine.store_mut(), plan_id, &b.resource_name)?;
    }
    let keys: Vec<&str> = approved.iter().map(|s| s.key.as_str()).collect();
    let cp = checkpoint::create(
        engine.store_mut(),
        sandboxes,
        plan_id,
        &CheckpointRequest {
            step: Some(format!("spawn: {}", keys.join(", "))),
            decision_id: approved.first().map(|s| s.decision_id.to_string()),
            label: "spawn".into(),
            reuse_if_unchanged: true,
            written_only: false,
        },
    )?;
    let mut branch = Branch {
        checkpoint_id: cp.as_ref().map(|c| c.checkpoint_id.to_string()),
        bases: Vec::new(),
        trees: Map::new(),
    };
    for sb in &sandboxes.active(engine.store(), plan_id)? {
        let Some(state) = cp.as_ref().and_then(|c| {
            c.states
                .iter()
                .find(|s| s.sandbox_id == sb.record.sandbox_id)
        }) else {
            continue;
        };
        let base = bases
            .iter()
            .find(|b| b.resource_name == sb.record.resource_name);
        branch.bases.push(PlanBase {
            resource_name: sb.record.resource_name.clone(),
            project_name: base.map(|b| b.project_name.clone()).unwrap_or_default(),
            alias: base.and_then(|b| b.alias.clone()),
            kind: BaseKind::GitCheckout,
            path: sb.layout.git_dir.display().to_string(),
            base_commit: Some(state.commit_oid.clone()),
            branch: None,
            read_only: base.is_some_and(|b| b.read_only),
        });
        branch.trees.insert(
            sb.record.resource_name.clone(),
            json!({"commit": state.commit_oid, "tree": state.tree_oid}),
        );
    }
    Ok(branch)
}

/// What an earlier run of a spawn step left for one spawn.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Earlier {
    /// A child that completed from the same parent state: merged again, not run again.
    Reuse(Id),
    /// A child from the same parent state whose run was cut off (its driver vanished or was
    /// interrupted): it continues where it stopped, a model step at the exact call
    /// (docs/sandbox.md, "Resuming a step").
    Continue(Id),
}

/// Whether a child's run was cut off rather than ended: its link says it was pending or
/// running (the process driving the parent vanished) or stopped by an interruption, and the
/// child plan itself can still run.
fn cut_off(link: &ChildLink, child: &Plan) -> bool {
    let stopped = match link.status {
        ChildStatus::Pending | ChildStatus::Running => true,
        ChildStatus::Cancelled => link
            .detail
            .as_ref()
            .is_some_and(|d| d["stopped"] == "interrupted"),
        _ => false,
    };
    stopped
        && matches!(child.phase(), Phase::Strategize | Phase::Execute)
        && matches!(
            child.state(),
            ProcessingState::Queued | ProcessingState::Processing
        )
}

/// Step 3 of a spawn: an earlier run of this step (a sibling failed, the process died, a
/// rollback). A child that completed from the same parent state is reused (merged again, not
/// run again); one from the same parent state whose run was cut off continues; the earlier
/// run's other children that did not finish are cancelled. Returns what is reused or
/// continued, by spawn decision.
fn settle_earlier_run(
    engine: &mut Lifecycle,
    sandboxes: &Sandboxes,
    plan_id: &Id,
    approved: &[&Spawn],
    branch: &Branch,
) -> Result<HashMap<Id, Earlier>, RunError> {
    let ids: Vec<Id> = approved.iter().map(|s| s.decision_id).collect();
    let same_base = |old: &ChildLink| {
        old.bases.len() == branch.trees.len()
            && branch
                .trees
                .iter()
                .all(|(r, b)| old.bases.get(r).map(|o| &o["tree"]) == Some(&b["tree"]))
    };
    let mut reuse = HashMap::new();
    for old in engine.store().children_of(plan_id)? {
        if !ids.contains(&old.spawn_decision_id) {
            continue;
        }
        let Some(p) = engine.store().plan(&old.child_plan_id)? else {
            continue;
        };
        let complete = p.phase() == Phase::Execute && p.state() == ProcessingState::Complete;
        // A failed child that was completed since (`plan execute CHILD`) counts too.
        if complete
            && matches!(
                old.status,
                ChildStatus::Succeeded | ChildStatus::Merged | ChildStatus::Failed
            )
            && same_base(&old)
        {
            reuse.insert(old.spawn_decision_id, Earlier::Reuse(old.child_plan_id));
            continue;
        }
        if same_base(&old)
            && cut_off(&old, &p)
            && !reuse.contains_key(&old.spawn_decision_id)
        {
            reuse.insert(old.spawn_decision_id, Earlier::Continue(old.child_plan_id));
            continue;
        }
        if !complete && p.state() != ProcessingState::Cancelled && p.phase() != Phase::Applied {
            cancel_stale_child(engine, sandboxes, p)?;
        }
        if matches!(
            old.status,
            ChildStatus::Pending | ChildStatus::Running | ChildStatus::Succeeded
        ) {
            engine.store_mut().set_child_status(
                &old.child_plan_id,
                ChildStatus::Cancelled,
                Some(&json!({"reason": "the parent's spawn step ran again"})),
                true,
            )?;
        }
    }
    Ok(reuse)
}

/// Cancels a child of an earlier run of the spawn step that did not finish; commands a
/// vanished process left running in its sandboxes go first.
fn cancel_stale_child(
    engine: &Lifecycle,
    sandboxes: &Sandboxes,
    child: Plan,
) -> Result<(), RunError> {
    crate::tools::shell::kill_orphans(&sandboxes.plan_dir(&child.plan_id));
    let mut e = engine.seed().open()?;
    e.recover(&child.plan_id)?;
    let mut p = e.plan(&child.plan_id)?;
    if p.state() != ProcessingState::Cancelled {
        lc_approvals::cancel_now(&mut e, &mut p, "its parent's spawn step ran again")?;
    }
    Ok(())
}

/// The children of one spawn step, in spawn order, and which of them were reused.
struct Spawned<'s> {
    children: Vec<(Id, &'s Spawn)>,
    reused: Vec<Id>,
}

/// Step 4 of a spawn: creates the children (or reuses them), in spawn order.
fn create_children<'s>(
    engine: &mut Lifecycle,
    plan: &Plan,
    approved: &[&'s Spawn],
    group: Option<&str>,
    branch: &Branch,
    reuse: &HashMap<Id, Earlier>,
) -> Result<Early<Spawned<'s>>, RunError> {
    let plan_id = plan.plan_id;
    let mut spawned = Spawned {
        children: Vec::new(),
        reused: Vec::new(),
    };
    for s in approved.iter().copied() {
        if let Some(Earlier::Continue(old)) = reuse.get(&s.decision_id) {
            parent_event(
                engine.store_mut(),
                &plan_id,
                EventKind::ChildSpawned(ChildSpawned {
                    child_plan_id: old.to_string(),
                    action: s.action.clone(),
                    spawn_decision_id: s.decision_id.to_string(),
                    parallel_group: group.map(str::to_owned),
                    reused: Some(true),
                    why: Some(
                        "its run was cut off in an earlier run of this step from the same parent state; it continues where it stopped"
                            .into(),
                    ),
                    ..ChildSpawned::default()
                }),
            )?;
            spawned.children.push((*old, s));
            continue;
        }
        if let Some(Earlier::Reuse(old)) = reuse.get(&s.decision_id) {
            parent_event(
                engine.store_mut(),
                &plan_id,
                EventKind::ChildSpawned(ChildSpawned {
                    child_plan_id: old.to_string(),
                    action: s.action.clone(),
                    spawn_decision_id: s.decision_id.to_string(),
                    parallel_group: group.map(str::to_owned),
                    reused: Some(true),
                    why: Some(
                        "it completed from the same parent state in an earlier run of this step"
                            .into(),
                    ),
                    ..ChildSpawned::default()
                }),
            )?;
            spawned.reused.push(*old);
            spawned.children.push((*old, s));
            continue;
        }
        let position = engine.store().next_child_position(&plan_id)?;
        let req = ChildRequest {
            action: s.action.clone(),
            args: s.args.clone(),
            guidance: s.guidance.clone(),
            bases: branch.bases.clone(),
            link: ChildLink {
                child_plan_id: Id::generate(),
                parent_plan_id: plan_id,
                spawn_decision_id: s.decision_id,
                parallel_group: group.map(str::to_string),
                position,
                bases: branch.trees.clone(),
                status: ChildStatus::Pending,
                detail: None,
                created_at: Timestamp::now(),
                finished_at: None,
            },
        };
        let providers = engine.providers().to_vec();
        let child = match plan_use::create_child(engine.store_mut(), &providers, plan, &req) {
            Ok(c) => c,
            Err(e) => {
                let so_far: Vec<String> = spawned
                    .children
                    .iter()
                    .map(|(id, _)| id.to_string())
                    .collect();
                return Ok(Err(StepEnd::Failed {
                    code: "CHILD_FAILED".into(),
                    message: format!("cannot spawn a child plan of {}: {e}", s.action),
                    output: json!({"children": so_far}),
                }));
            }
        };
        parent_event(
            engine.store_mut(),
            &plan_id,
            EventKind::ChildSpawned(ChildSpawned {
                child_plan_id: child.plan_id.to_string(),
                action: s.action.clone(),
                spawn_decision_id: s.decision_id.to_string(),
                parallel_group: group.map(str::to_owned),
                position: Some(u64::from(position)),
                branched_from: Some(branch.checkpoint_id.clone()),
                ..ChildSpawned::default()
            }),
        )?;
        spawned.children.push((child.plan_id, s));
    }
    engine.flush(&plan_id)?;
    Ok(Ok(spawned))
}

/// Step 5 of a spawn: runs the children, one at a time for a sequential spawn, up to
/// `max-parallel-children` at once for a group; every child of a group runs to its end
/// whatever its siblings do. `None` when the parent was stopped (cancelled or interrupted).
fn run_children(
    engine: &mut Lifecycle,
    plan_id: &Id,
    group: Option<&str>,
    spawned: &Spawned<'_>,
    stop: &AtomicBool,
) -> Result<Option<Vec<ChildEnded>>, RunError> {
    let children = &spawned.children;
    let limit = if group.is_some() {
        engine.max_parallel_children().min(children.len()).max(1)
    } else {
        1
    };
    let pool = ChildPool {
        queue: Mutex::new((0..children.len()).collect()),
        results: Mutex::new(vec![None; children.len()]),
        stop_all: AtomicBool::new(false),
        seed: engine.seed(),
        parent_observer: engine.observer_arc(),
        db: engine.store().location().clone(),
        plan_id: *plan_id,
    };
    let stop_cause = std::thread::scope(|scope| {
        for _ in 0..limit {
            let pool = &pool;
            scope.spawn(move || pool.work(spawned));
        }
        watch_children(engine, plan_id, &pool, children, stop)
    })?;
    engine.flush(plan_id)?;
    if let Some(cause) = stop_cause {
        if cause == stop::StopCause::Cancel {
            cancel_unstarted(&pool.seed, children)?;
        }
        return Ok(None);
    }
    let outcomes: Vec<ChildEnded> = pool
        .results
        .into_inner()
        .expect("results lock")
        .into_iter()
        .map(|o| o.unwrap_or(ChildEnded::Interrupted))
        .collect();
    if outcomes.contains(&ChildEnded::Interrupted) {
        return Ok(None);
    }
    Ok(Some(outcomes))
}

/// What the worker threads of [`run_children`] share.
struct ChildPool {
    queue: Mutex<VecDeque<usize>>,
    results: Mutex<Vec<Option<ChildEnded>>>,
    stop_all: AtomicBool,
    seed: LifecycleSeed,
    parent_observer: Arc<dyn Observer>,
    db: crate::store::Location,
    plan_id: Id,
}

impl ChildPool {
    /// One worker: takes children off the queue until it is empty.
    fn work(&self, spawned: &Spawned<'_>) {
        loop {
            let Some(i) = self.queue.lock().expect("queue lock").pop_front() else {
                return;
            };
            let (child_id, spawn) = spawned.children[i];
            let outcome = if spawned.reused.contains(&child_id) {
                ChildEnded::Succeeded
            } else {
                self.run_one(child_id, spawn)
            };
            self.results.lock().expect("results lock")[i] = Some(outcome);
        }
    }

    /// Runs one child and records its start and end on the parent.
    fn run_one(&self, child_id: Id, spawn: &Spawn) -> ChildEnded {
        let id = child_id.to_string();
        let label = format!("child {} ({})", &id[..10.min(id.len())], spawn.action);
        let seed = self.seed.clone().with_observer(Arc::new(ChildObserver {
            parent: Arc::clone(&self.parent_observer),
            label,
        }));
        let outcome = if self.stop_all.load(Ordering::SeqCst) {
            Ok(ChildEnded::Cancelled)
        } else {
            if let Ok(mut store) = self.db.open() {
                let _ = store.set_child_status(&child_id, ChildStatus::Running, None, false);
                let _ = parent_event(
                    &mut store,
                    &self.plan_id,
                    EventKind::ChildStarted(ChildStarted {
                        child_plan_id: id.clone(),
                        action: spawn.action.clone(),
                    }),
                );
            }
            run_child(&seed, child_id)
        };
        let outcome = outcome.unwrap_or_else(|e| ChildEnded::Failed {
            code: "CHILD_FAILED".into(),
            message: e.to_string(),
        });
        if let Ok(mut store) = self.db.open() {
            let (status, detail) = match &outcome {
                ChildEnded::Succeeded => (ChildStatus::Succeeded, json!({})),
                ChildEnded::Failed { code, message } => (
                    ChildStatus::Failed,
                    json!({"code": code, "message": message}),
                ),
                ChildEnded::Cancelled | ChildEnded::Interrupted => (
                    ChildStatus::Cancelled,
                    json!({"stopped": format!("{outcome:?}").to_lowercase()}),
                ),
            };
            let _ = store.set_child_status(
                &child_id,
                status,
                Some(&detail),
                !matches!(outcome, ChildEnded::Succeeded),
            );
            let _ = parent_event(
                &mut store,
                &self.plan_id,
                EventKind::ChildFinished(ChildFinished {
                    child_plan_id: id,
                    action: spawn.action.clone(),
                    status: status.as_str().into(),
                    detail,
                }),
            );
        }
        outcome
    }
}

/// The parent watches for cancellation and Ctrl-C while its children run; on either it stops
/// the pool and (on cancel) asks every child to cancel. Returns why it stopped, if it did.
fn watch_children(
    engine: &mut Lifecycle,
    plan_id: &Id,
    pool: &ChildPool,
    children: &[(Id, &Spawn)],
    stop: &AtomicBool,
) -> Result<Option<stop::StopCause>, RunError> {
    let mut stop_cause = None;
    loop {
        if pool
            .results
            .lock()
            .expect("results lock")
            .iter()
            .all(Option::is_some)
        {
            return Ok(stop_cause);
        }
        let cause = stop::stop_cause(engine, plan_id)?;
        if (cause.is_some() || stop.load(Ordering::SeqCst)) && !pool.stop_all.load(Ordering::SeqCst)
        {
            pool.stop_all.store(true, Ordering::SeqCst);
            stop_cause = cause.or(Some(stop::StopCause::Cancel));
            // An interrupted parent, or one whose lease another process took over, leaves its
            // children to be resumed with it.
            if !matches!(
                cause,
                Some(stop::StopCause::Interrupt | stop::StopCause::LeaseLost)
            ) {
                let reason = engine.store().plan_cancel_reason(plan_id)?;
                let why = format!(
                    "its parent {plan_id} was cancelled{}",
                    reason
                        .as_deref()
                        .map(|r| format!(": {r}"))
                        .unwrap_or_default()
                );
                for (child, _) in children {
                    lease::request_cancel(engine.store_mut(), child, Some(&why))?;
                }
            }
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Children never started are cancelled with the parent.
fn cancel_unstarted(seed: &LifecycleSeed, children: &[(Id, &Spawn)]) -> Result<(), RunError> {
    for (child, _) in children {
        let mut e = seed.open()?;
        let mut p = e.plan(child)?;
        if p.phase() == Phase::Strategize && p.state() == ProcessingState::Queued {
            lc_approvals::cancel_now(&mut e, &mut p, "its parent was cancelled")?;
        }
    }
    Ok(())
}

/// The `children` report of a spawn step whose children all ran to their end, with the rows
/// of `skipped` spawns; the step's failure when any child failed or was cancelled (nothing is
/// merged then).
fn outcome_report(
    children: &[(Id, &Spawn)],
    outcomes: &[ChildEnded],
    skipped: Vec<Value>,
) -> Early<Vec<Value>> {
    let mut report: Vec<Value> = children
        .iter()
        .zip(outcomes)
        .map(|((id, s), o)| {
            json!({
                "child_plan_id": id.to_string(),
                "action": s.action,
                "spawn_decision_id": s.decision_id.to_string(),
                "status": match o { ChildEnded::Succeeded => "succeeded", ChildEnded::Failed { .. } => "failed", _ => "cancelled" },
                "error": match o { ChildEnded::Failed { code, message } => json!({"code": code, "message": message}), _ => Value::Null },
            })
        })
        .collect();
    report.extend(skipped);
    let failed: Vec<String> = children
        .iter()
        .zip(outcomes)
        .filter_map(|((id, s), o)| match o {
            ChildEnded::Failed { code, message } => Some(format!(
                "child plan {id} ({}) failed ({code}): {message}",
                s.action
            )),
            ChildEnded::Cancelled => Some(format!("child plan {id} ({}) was cancelled", s.action)),
            _ => None,
        })
        .collect();
    if failed.is_empty() {
        return Ok(report);
    }
    let n = children.len();
    Err(StepEnd::Failed {
        code: "CHILD_FAILED".into(),
        message: if n == 1 {
            failed.join("; ")
        } else {
            format!(
                "{} of {n} child plans did not succeed, so nothing was merged (the others ran to their end): {}",
                failed.len(),
                failed.join("; ")
            )
        },
        output: json!({"children": report}),
    })
}

/// Step 6 of a spawn: merges every child back into the parent's sandboxes, in spawn order;
/// the first conflict ends the step.
fn merge_back(
    engine: &mut Lifecycle,
    sandboxes: &Sandboxes,
    plan_id: &Id,
    children: &[(Id, &Spawn)],
    report: &mut [Value],
) -> Result<StepEnd, RunError> {
    for (i, (child, s)) in children.iter().enumerate() {
        let merged = match merge_child_in(engine, sandboxes, plan_id, child)? {
            Ok(merged) => merged,
            Err((resource, paths)) => {
                report[i]["status"] = json!("conflict");
                report[i]["conflicts"] = json!(paths);
                return Ok(StepEnd::Failed {
                    code: "MERGE_CONFLICT".into(),
                    message: format!(
                        "the results of child plan {child} ({}) conflict with the parent's sandbox of {resource} in {}: both changed these lines since the child branched off; nothing of this child was merged",
                        s.action,
                        paths.join(", ")
                    ),
                    output: json!({"children": report}),
                });
            }
        };
        report[i]["status"] = json!("merged");
        report[i]["merged"] = Value::Object(merged);
    }
    engine.flush(plan_id)?;
    Ok(StepEnd::Done {
        output: json!({"children": report}),
    })
}

/// Merges one child's sandboxes into its parent's and records the result on both; the
/// merged resources, or the resource and paths of a conflict.
fn merge_child_in(
    engine: &mut Lifecycle,
    sandboxes: &Sandboxes,
    plan_id: &Id,
    child: &Id,
) -> Result<MergeResult, RunError> {
    let link = engine.store().child_link(child)?;
    let mut merged = Map::new();
    for sb in sandboxes.active(engine.store(), plan_id)? {
        let Some(child_sb) = sandboxes.existing(engine.store(), child, &sb.record.resource_name)?
        else {
            continue;
        };
        let ancestor = link
            .as_ref()
            .and_then(|l| l.bases.get(&sb.record.resource_name))
            .and_then(|b| b["tree"].as_str())
            .and_then(|t| git2::Oid::from_str(t).ok());
        let Some(ancestor) = ancestor else { continue };
        let theirs = merge::current_tree(&child_sb)?;
        match merge::merge_child(&sb, &child_sb, ancestor, theirs)? {
            MergeOutcome::Conflict { paths } => {
                let resource = sb.record.resource_name.clone();
                let detail = json!({"resource": resource, "paths": paths});
                engine.store_mut().set_child_status(
                    child,
                    ChildStatus::Conflict,
                    Some(&detail),
                    true,
                )?;
                parent_event(
                    engine.store_mut(),
                    plan_id,
                    EventKind::ChildMerged(ChildMerged {
                        child_plan_id: child.to_string(),
                        outcome: "conflict".into(),
                        resource: Some(resource.clone()),
                        paths: Some(paths.clone()),
                        resources: None,
                    }),
                )?;
                engine.flush(plan_id)?;
                return Ok(Err((resource, paths)));
            }
            m => {
                merged.insert(sb.record.resource_name.clone(), json!(m));
            }
        }
    }
    let detail = json!({"merged": merged});
    engine
        .store_mut()
        .set_child_status(child, ChildStatus::Merged, Some(&detail), true)?;
    parent_event(
        engine.store_mut(),
        plan_id,
        EventKind::ChildMerged(ChildMerged {
            child_plan_id: child.to_string(),
            outcome: "merged".into(),
            resource: None,
            paths: None,
            resources: Some(merged.clone()),
        }),
    )?;
    Ok(Ok(merged))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::registry::actions::SandboxSpec;
    use crate::sandbox::launcher::Limits;
    use crate::tools::shell::ShellPolicy;

    #[test]
    fn a_child_action_asking_for_more_than_its_parent_is_a_widening_naming_each_difference() {
        let parent = ShellPolicy {
            writable_paths: vec!["/srv/cache".into()],
            env: vec!["LANG_X".into()],
            ..Default::default()
        };
        let same = SandboxSpec {
            writable_paths: vec!["/srv/cache/sub".into()],
            env: vec!["LANG_X".into()],
            ..Default::default()
        };
        assert!(widening(&parent, &same).is_empty());
        let wider = SandboxSpec {
            network: true,
            writable_paths: vec!["/home/user".into()],
            env: vec!["GITHUB_TOKEN".into()],
            limits: Some(Limits {
                memory: 0,
                ..Limits::default()
            }),
            ..Default::default()
        };
        assert_eq!(
            widening(&parent, &wider),
            [
                "network: false -> true",
                "writable-paths: + /home/user",
                "env: + GITHUB_TOKEN",
                "limits.memory: 2 GiB -> unlimited",
            ]
        );
    }
}
