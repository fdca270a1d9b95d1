//! A model as the execution actor (spec section 11): one actor run per executable decision,
//! with the built-in tools the plan's policy allows, every call going through the tool runner
//! (validation, policy, binding, lazy sandboxes, logging, change records).
//!
//! Not yet: `request_decision` (pausing a run for a human and resuming its transcript), so it
//! is not offered.

use std::sync::Arc;
use std::sync::atomic::AtomicBool;

use serde_json::{Value, json};

use super::script_executor::StepEnd;
use super::{Engine, model};
use crate::engine::actors::prompts::Role;
use crate::engine::actors::runtime::Stop;
use crate::engine::domain::Plan;
use crate::engine::domain::decision::Decision;
use crate::engine::sandbox::Sandboxes;
use crate::engine::store::Store;
use crate::engine::tools::host::RunnerHost;
use crate::engine::tools::runner::Policy;

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
    let tools = RunnerHost::new(
        store,
        Sandboxes::new(engine.paths()),
        plan.plan_id,
        policy,
        Arc::clone(&cancel),
    );
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
    let output = json!({
        "actor": actor_name,
        "answer": run.answer,
        "turns": run.turns,
        "stop": run.stop.describe(),
        "tool_calls": run.tool_calls.iter().map(|c| json!({"tool": c.name, "is_error": c.is_error})).collect::<Vec<_>>(),
    });
    match run.stop {
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
