//! A model as the execution actor (spec section 11): one actor run per executable decision,
//! with the built-in tools the plan's policy allows, every call going through the tool runner
//! (validation, policy, binding, lazy sandboxes, logging, change records).
//!
//! `create_subplan` spawns child plans ([`super::children`]): a call without `parallel_group`
//! runs its child at once and returns the result; calls sharing a group are queued and run
//! together when the model calls another tool or ends the step. Each call is a `subplan_spawn`
//! decision under the step's decision (a group also gets a `subplan_parallel_spawn`).
//!
//! Not yet: `request_decision` (pausing a run for a human and resuming its transcript), so it
//! is not offered; for the same reason `create_subplan` under a profile with
//! `auto_child_plans = false` answers that waiting for a `child_spawn` approval is not yet
//! supported.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use serde_json::{Value, json};

use super::script_executor::StepEnd;
use super::{Engine, model};
use crate::engine::actors::messages::ToolSpec;
use crate::engine::actors::prompts::Role;
use crate::engine::actors::runtime::{Stop, ToolHost, ToolOutcome};
use crate::engine::domain::decision::Decision;
use crate::engine::domain::{Id, Plan};
use crate::engine::sandbox::Sandboxes;
use crate::engine::store::Store;
use crate::engine::tools::runner::{CallRequest, Policy, ToolRunner};

/// The executor's tools: the built-ins the policy allows, run by the tool runner on its own
/// database connection, and `create_subplan`.
struct ExecutorTools {
    plan_id: Id,
    policy: Policy,
    store: Mutex<Store>,
    sandboxes: Sandboxes,
    cancel: Arc<AtomicBool>,
    subplans: Option<Subplans>,
}

/// `create_subplan` for one step.
struct Subplans {
    seed: super::EngineSeed,
    plan: Plan,
    step: Decision,
    /// The queued parallel group: its label, its decision and its spawns.
    pending: Mutex<Option<(String, Id, Vec<super::children::Spawn>)>>,
    /// Everything spawned in this step, for the step's output.
    spawned: Mutex<Vec<Value>>,
}

/// Passes progress and Ctrl-C on, but no events: the parent's own engine streams those.
struct Relay(Arc<dyn super::Observer>);

impl super::Observer for Relay {
    fn progress(&self, message: &str) {
        self.0.progress(message);
    }
    fn interrupted(&self) -> bool {
        self.0.interrupted()
    }
}

impl Subplans {
    /// Records a spawn decision (and its group's decision when `group` is new).
    fn record(
        &self,
        engine: &mut Engine,
        kind: crate::engine::domain::decision::DecisionType,
        parent: Id,
        text: String,
        snapshot: Value,
    ) -> Result<Id, String> {
        let mut d = Decision::new(self.plan.plan_id, kind, text, jiff::Timestamp::now());
        d.attempt = self.plan.status.attempt;
        d.parent_decision_id = Some(parent);
        d.question = Some("Which child plan should carry out part of this step?".into());
        d.rationale = Some("the execution actor called create_subplan".into());
        d.confidence_score = None;
        d.context_snapshot = snapshot;
        let id = d.decision_id;
        let plan_id = self.plan.plan_id;
        let mut plan = engine.plan(&plan_id).map_err(|e| e.to_string())?;
        super::state::commit(
            engine.store_mut(),
            &mut plan,
            crate::engine::events::EventKind::StateChanged,
            json!({"decision_id": id.to_string(), "decision_type": kind, "by": "create_subplan"}),
            |tx| {
                crate::engine::store::decisions::insert_in(tx, &d)?;
                crate::engine::store::decisions::depend_in(tx, &parent, &id)
            },
        )
        .map_err(|e| e.to_string())?;
        Ok(id)
    }

    fn run(
        &self,
        spawns: &[super::children::Spawn],
        group: Option<&str>,
        cancel: &Arc<AtomicBool>,
    ) -> ToolOutcome {
        let mut engine = match self.seed.open() {
            Ok(e) => e,
            Err(e) => return ToolOutcome::error(format!("create_subplan: {e}")),
        };
        let ended =
            super::children::spawns_in(&mut engine, &self.plan, spawns, group, Arc::clone(cancel));
        let report = |output: &Value| {
            if let Some(list) = output["children"].as_array() {
                self.spawned
                    .lock()
                    .expect("spawned lock")
                    .extend(list.iter().cloned());
            }
        };
        match ended {
            Ok(StepEnd::Done { output }) => {
                report(&output);
                ToolOutcome::ok(output.to_string())
            }
            Ok(StepEnd::Failed {
                code,
                message,
                output,
            }) => {
                report(&output);
                ToolOutcome::error(format!("{code}: {message}"))
            }
            Ok(StepEnd::Stopped) => {
                cancel.store(true, Ordering::SeqCst);
                ToolOutcome::error("the plan was stopped; stop")
            }
            Ok(StepEnd::Awaiting { .. }) => ToolOutcome::error(
                "create_subplan: waiting for a child_spawn approval is not yet supported for model executors",
            ),
            Err(e) => ToolOutcome::error(format!("create_subplan: {e}")),
        }
    }

    /// Runs the queued parallel group, if any.
    fn flush(&self, cancel: &Arc<AtomicBool>) -> Option<ToolOutcome> {
        let (label, _, spawns) = self.pending.lock().expect("pending lock").take()?;
        Some(self.run(&spawns, Some(&label), cancel))
    }

    fn create(&self, args: &Value, cancel: &Arc<AtomicBool>) -> ToolOutcome {
        let Some(action) = args["action"].as_str().filter(|a| !a.trim().is_empty()) else {
            return ToolOutcome::error(
                "create_subplan: `action` (a registered action's name) is required",
            );
        };
        let child_args = match &args["args"] {
            Value::Null => serde_json::Map::new(),
            Value::Object(m) => m.clone(),
            _ => {
                return ToolOutcome::error(
                    "create_subplan: `args` must be an object of the action's arguments",
                );
            }
        };
        let group = args["parallel_group"].as_str().map(str::to_string);
        let guidance = args["guidance"].as_str().map(str::to_string);
        if !super::gates::Gates::of(&self.plan).flags.auto_child_plans {
            return ToolOutcome::error(format!(
                "create_subplan: profile {} needs a child_spawn approval before each spawn (auto_child_plans = false), and pausing a model executor for it is not yet supported; carry out the work yourself",
                self.plan.automation_profile.as_deref().unwrap_or("?")
            ));
        }
        // A different group (or none) runs the queued one first.
        let queued = self
            .pending
            .lock()
            .expect("pending lock")
            .as_ref()
            .map(|(l, ..)| l.clone());
        if queued.is_some()
            && queued != group
            && let Some(outcome) = self.flush(cancel)
            && outcome.is_error
        {
            return ToolOutcome::error(format!(
                "the queued parallel group ran first and failed, so this child was not spawned: {}",
                outcome.content
            ));
        }
        let mut engine = match self.seed.open() {
            Ok(e) => e,
            Err(e) => return ToolOutcome::error(format!("create_subplan: {e}")),
        };
        use crate::engine::domain::decision::DecisionType;
        let spec = json!({"action": action, "args": child_args, "guidance": guidance});
        let n = self.spawned.lock().expect("spawned lock").len() + 1;
        let group_id = match &group {
            None => None,
            Some(label) => {
                let existing = self
                    .pending
                    .lock()
                    .expect("pending lock")
                    .as_ref()
                    .map(|(_, id, _)| *id);
                match existing {
                    Some(id) => Some(id),
                    None => match self.record(
                        &mut engine,
                        DecisionType::SubplanParallelSpawn,
                        self.step.decision_id,
                        format!("spawn child plans in parallel group {label}"),
                        json!({"key": format!("parallel:{label}"), "parallel_group": label, "actor": self.plan.execution_actor}),
                    ) {
                        Ok(id) => {
                            *self.pending.lock().expect("pending lock") = Some((label.clone(), id, Vec::new()));
                            Some(id)
                        }
                        Err(e) => return ToolOutcome::error(format!("create_subplan: {e}")),
                    },
                }
            }
        };
        let key = format!("create_subplan-{n}");
        let decision_id = match self.record(
            &mut engine,
            DecisionType::SubplanSpawn,
            group_id.unwrap_or(self.step.decision_id),
            format!("spawn a child plan of {action}"),
            json!({"key": key, "spawn": spec, "actor": self.plan.execution_actor}),
        ) {
            Ok(id) => id,
            Err(e) => return ToolOutcome::error(format!("create_subplan: {e}")),
        };
        drop(engine);
        let spawn = super::children::Spawn {
            decision_id,
            key,
            action: action.to_string(),
            args: child_args,
            guidance,
        };
        match group {
            None => self.run(&[spawn], None, cancel),
            Some(label) => {
                let mut pending = self.pending.lock().expect("pending lock");
                if let Some((_, _, list)) = pending.as_mut() {
                    list.push(spawn);
                }
                ToolOutcome::ok(format!(
                    "queued in parallel group {label}; the group's children run together when you call another tool or finish the step"
                ))
            }
        }
    }
}

impl ToolHost for ExecutorTools {
    fn specs(&self) -> Vec<ToolSpec> {
        let mut specs: Vec<ToolSpec> = self
            .policy
            .offered()
            .into_iter()
            .map(|t| ToolSpec {
                name: t.name().to_string(),
                description: t.description().to_string(),
                input_schema: t.input_schema(),
            })
            .collect();
        if self.subplans.is_some() {
            specs.push(crate::engine::actors::prompts::create_subplan_tool());
        }
        specs
    }

    async fn call(&self, name: &str, args: Value) -> ToolOutcome {
        if self.cancel.load(Ordering::SeqCst) {
            return ToolOutcome::error("the plan was cancelled; stop");
        }
        if let Some(sub) = &self.subplans {
            if name == "create_subplan" {
                return sub.create(&args, &self.cancel);
            }
            // Another tool: the queued parallel group runs first, so the model sees its work.
            if let Some(outcome) = sub.flush(&self.cancel)
                && outcome.is_error
            {
                return ToolOutcome::error(format!(
                    "the queued parallel group of child plans ran before this call and failed, so `{name}` was not run: {}",
                    outcome.content
                ));
            }
        }
        let mut store = match self.store.lock() {
            Ok(s) => s,
            Err(_) => return ToolOutcome::error("the tool runner is unavailable"),
        };
        let mut runner =
            ToolRunner::new(&mut store, &self.sandboxes).with_cancel(Arc::clone(&self.cancel));
        let request = CallRequest {
            tool: name.to_string(),
            arguments: args,
            parent_skill: None,
            resource: None,
        };
        match runner.call(&self.plan_id, &self.policy, request) {
            Ok(call) => match call.result {
                Ok(v) => ToolOutcome::ok(v.to_string()),
                Err(e) => ToolOutcome::error(format!("{}: {e}", e.code())),
            },
            Err(e) => ToolOutcome::error(format!("the tool runner failed: {e}")),
        }
    }
}

/// Runs one step with a model execution actor.
///
/// # Errors
/// A message when the actor cannot be resolved or the run cannot start (reported as a failed
/// step by the caller).
pub(crate) fn run_step(
    engine: &mut Engine,
    plan: &Plan,
    decision: &Decision,
    policy: Policy,
    cancel: Arc<AtomicBool>,
    guidance: &[String],
) -> StepEnd {
    let actor_name = plan.execution_actor.clone().unwrap_or_default();
    let actor = match model::resolve(engine, plan, &actor_name, Role::Executor) {
        Ok(a) => a,
        Err(message) => {
            return StepEnd::Failed {
                code: "ACTOR_UNAVAILABLE".into(),
                message,
                output: Value::Null,
            };
        }
    };
    let store = match Store::open(engine.store().path()) {
        Ok(s) => s,
        Err(e) => {
            return StepEnd::Failed {
                code: "STEP_FAILED".into(),
                message: e.to_string(),
                output: Value::Null,
            };
        }
    };
    let subplans = Subplans {
        seed: engine
            .seed()
            .with_observer(Arc::new(Relay(engine.observer_arc()))),
        plan: plan.clone(),
        step: decision.clone(),
        pending: Mutex::new(None),
        spawned: Mutex::new(Vec::new()),
    };
    let tools = ExecutorTools {
        plan_id: plan.plan_id,
        policy,
        store: Mutex::new(store),
        sandboxes: Sandboxes::new(engine.paths()),
        cancel: Arc::clone(&cancel),
        subplans: Some(subplans),
    };
    let invariants: Vec<String> = plan.invariants.iter().map(|i| i.text.clone()).collect();
    let step = decision
        .step
        .clone()
        .unwrap_or(crate::engine::domain::decision::Step {
            instructions: decision.chosen_option.clone(),
            expected_outputs: Vec::new(),
        });
    let context = json!({
        "decision": {
            "question": decision.question,
            "chosen_option": decision.chosen_option,
            "rationale": decision.rationale,
        },
        "step": step,
        "definition_of_done": plan.definition_of_done,
        "invariants": invariants,
        "guidance": guidance,
    });
    let prompt = format!("Carry out this step now: {}", step.instructions);
    let run = match model::run(
        engine,
        &plan.plan_id,
        Some(&decision.decision_id),
        &actor,
        context,
        prompt,
        &tools,
    ) {
        Ok(r) => r,
        Err(message) => {
            return StepEnd::Failed {
                code: "ACTOR_FAILED".into(),
                message,
                output: Value::Null,
            };
        }
    };
    // A parallel group still queued when the model finished runs now.
    let mut group_failure = None;
    if let Some(sub) = &tools.subplans
        && let Some(outcome) = sub.flush(&cancel)
        && outcome.is_error
    {
        group_failure = Some(outcome.content);
    }
    let children: Vec<Value> = tools
        .subplans
        .as_ref()
        .map(|s| s.spawned.lock().expect("spawned lock").clone())
        .unwrap_or_default();
    let output = json!({
        "actor": actor_name,
        "children": children,
        "answer": run.answer,
        "turns": run.turns,
        "stop": run.stop.describe(),
        "tool_calls": run.tool_calls.iter().map(|c| json!({"tool": c.name, "is_error": c.is_error})).collect::<Vec<_>>(),
    });
    if cancel.load(Ordering::SeqCst) {
        return StepEnd::Stopped;
    }
    match run.stop {
        Stop::Answered | Stop::ToolEnded { .. } if group_failure.is_some() => StepEnd::Failed {
            code: "CHILD_FAILED".into(),
            message: format!(
                "the parallel group of child plans queued by the execution actor failed when the step ended: {}",
                group_failure.unwrap_or_default()
            ),
            output,
        },
        Stop::Answered | Stop::ToolEnded { .. } => StepEnd::Done { output },
        Stop::Cancelled => StepEnd::Stopped,
        Stop::Failed { error } => StepEnd::Failed {
            code: if error.is_transient() {
                "TRANSIENT_FAILURE".into()
            } else {
                "ACTOR_FAILED".into()
            },
            message: error.to_string(),
            output,
        },
        other => StepEnd::Failed {
            code: "ACTOR_FAILED".into(),
            message: other.describe(),
            output,
        },
    }
}
