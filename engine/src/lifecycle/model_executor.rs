//! A model as the execution actor (spec section 11): one actor run per executable decision,
//! with the built-in tools the plan's policy allows, every call going through the tool runner
//! (validation, policy, binding, lazy sandboxes, logging, change records).
//!
//! The actor may call `request_decision` to ask the user a question with options: the call
//! ends the run after its turn, and Execute persists the transcript with a `decision`
//! approval ([`Question`]). Once answered (by `plan decide` / `plan reject` from any process),
//! the step's next run continues that transcript, with the user's answer as the call's result
//! ([`Resume`]).
//!
//! `create_subplan` spawns child plans ([`super::children`]): a call without `parallel_group`
//! runs its child at once and returns the result; calls sharing a group are queued and run
//! together when the model calls another tool or ends the step. Each call is a `subplan_spawn`
//! decision under the step's decision (a group also gets a `subplan_parallel_spawn`).
//!
//! `create_subplan` under a profile with `auto_child_plans = false` answers that waiting for a
//! `child_spawn` approval is not yet supported for model executors.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use serde_json::{Value, json};

use std::sync::Mutex;

use super::script_executor::StepEnd;
use super::{Engine, model};
use crate::actors::messages::{Message, ToolSpec};
use crate::actors::prompts::Role;
use crate::actors::prompts::request_decision_tool;
use crate::actors::runtime::Stop;
use crate::actors::runtime::{ToolHost, ToolOutcome};
use crate::domain::decision::Decision;
use crate::domain::{Id, Plan};
use crate::sandbox::Sandboxes;
use crate::store::Store;
use crate::tools::host::RunnerHost;
use crate::tools::runner::Policy;

/// A question the execution actor asked with `request_decision`, and the paused run.
#[derive(Debug, Clone, PartialEq)]
pub struct Question {
    /// The question.
    pub question: String,
    /// The options (two or more).
    pub options: Vec<String>,
    /// The option the actor would choose, if it said.
    pub recommended: Option<String>,
    /// What the user needs to know to decide.
    pub context: Option<String>,
    /// The provider's id of the `request_decision` call.
    pub call_id: String,
    /// The conversation so far, ending with the call's placeholder result.
    pub transcript: Vec<Message>,
}

/// A paused run to continue: its transcript, and the answer that becomes the result of call
/// `call_id`.
#[derive(Debug, Clone, PartialEq)]
pub struct Resume {
    /// The conversation as paused.
    pub transcript: Vec<Message>,
    /// The `request_decision` call.
    pub call_id: String,
    /// The user's answer, in words for the model.
    pub answer: String,
}

impl Resume {
    /// The transcript with the answer in place of the call's placeholder result.
    fn history(&self) -> Vec<Message> {
        let mut history = self.transcript.clone();
        for m in history.iter_mut().rev() {
            if let Message::ToolResults { results } = m
                && let Some(r) = results.iter_mut().find(|r| r.call_id == self.call_id)
            {
                r.content.clone_from(&self.answer);
                r.is_error = false;
                break;
            }
        }
        history
    }
}

/// What the actor asked, before the run ends.
#[derive(Debug, Clone)]
struct Asked {
    question: String,
    options: Vec<String>,
    recommended: Option<String>,
    context: Option<String>,
}

/// The executor's tools: the tool runner's, plus `request_decision` and `create_subplan`.
struct ExecutorTools {
    runner: RunnerHost,
    asked: Mutex<Option<Asked>>,
    cancel: Arc<AtomicBool>,
    subplans: Option<Subplans>,
}

/// Checks `request_decision`'s arguments; `Err` is the message for the model.
fn parse_question(args: &Value) -> Result<Asked, String> {
    let text = |key: &str| {
        args.get(key)
            .and_then(Value::as_str)
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(str::to_string)
    };
    let question = text("question").ok_or("`question` must be a non-empty string")?;
    let options: Vec<String> = args
        .get("options")
        .and_then(Value::as_array)
        .ok_or("`options` must be an array of at least two strings")?
        .iter()
        .map(|o| o.as_str().map(str::trim).unwrap_or_default().to_string())
        .collect();
    if options.len() < 2 || options.iter().any(String::is_empty) {
        return Err("`options` must be at least two non-empty strings; with one option, decide yourself and carry on".into());
    }
    let mut seen = std::collections::HashSet::new();
    if !options.iter().all(|o| seen.insert(o.as_str())) {
        return Err("`options` must be different from each other".into());
    }
    let recommended = text("recommended");
    if let Some(r) = &recommended
        && !options.contains(r)
    {
        return Err(format!(
            "`recommended` must be one of the options; `{r}` is not"
        ));
    }
    Ok(Asked {
        question,
        options,
        recommended,
        context: text("context"),
    })
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
        kind: crate::domain::decision::DecisionType,
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
            crate::events::EventKind::StateChanged,
            json!({"decision_id": id.to_string(), "decision_type": kind, "by": "create_subplan"}),
            |tx| {
                crate::store::decisions::insert_in(tx, &d)?;
                crate::store::decisions::depend_in(tx, &parent, &id)
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
            Ok(StepEnd::Awaiting { .. } | StepEnd::Paused(_)) => ToolOutcome::error(
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
        use crate::domain::decision::DecisionType;
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
        let mut specs = self.runner.specs();
        specs.push(request_decision_tool());
        if self.subplans.is_some() {
            specs.push(crate::actors::prompts::create_subplan_tool());
        }
        specs
    }

    async fn call(&self, name: &str, args: Value) -> ToolOutcome {
        if name != "request_decision" {
            if let Some(sub) = &self.subplans {
                if self.cancel.load(Ordering::SeqCst) {
                    return ToolOutcome::error("the plan was cancelled; stop");
                }
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
            return self.runner.call(name, args).await;
        }
        let Ok(mut asked) = self.asked.lock() else {
            return ToolOutcome::error("request_decision is unavailable");
        };
        if asked.is_some() {
            return ToolOutcome::error(
                "ask one question at a time; the first one is with the user",
            );
        }
        match parse_question(&args) {
            Ok(q) => {
                *asked = Some(q);
                ToolOutcome::finish(
                    "The question is with the user. The run pauses here and continues with the answer as this call's result.",
                )
            }
            Err(message) => ToolOutcome::error(format!("request_decision: {message}")),
        }
    }
}

/// The step's hot context (files and definitions its decision names, spec 25); empty when
/// the plan's resources cannot be read.
fn step_context(
    engine: &Engine,
    plan: &Plan,
    decision: &Decision,
    step: &crate::domain::decision::Step,
) -> crate::context::Hot {
    use crate::context::{execute, policy, strategize};
    let projects: Vec<String> = plan
        .project_links
        .iter()
        .map(|l| l.project_name.clone())
        .collect();
    let Ok(p) = policy::for_plan(engine.store(), &plan.plan_id, &projects, "execute") else {
        return Default::default();
    };
    let Ok((scopes, _)) = strategize::scopes(engine.paths(), engine.store(), &plan.plan_id, &p)
    else {
        return Default::default();
    };
    let text = format!(
        "{}\n{}\n{}",
        step.instructions,
        decision.chosen_option,
        step.expected_outputs.join("\n")
    );
    execute::step_context(&scopes, &text, &p)
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
    resume: Option<&Resume>,
) -> StepEnd {
    let actor_name = plan.execution_actor.clone().unwrap_or_default();
    let mut actor = match model::resolve(engine, plan, &actor_name, Role::Executor) {
        Ok(a) => a,
        Err(message) => {
            return StepEnd::Failed {
                code: "ACTOR_UNAVAILABLE".into(),
                message,
                output: Value::Null,
            };
        }
    };
    let mut store = match Store::open(engine.store().path()) {
        Ok(s) => s,
        Err(e) => {
            return StepEnd::Failed {
                code: "STEP_FAILED".into(),
                message: e.to_string(),
                output: Value::Null,
            };
        }
    };
    // The command, MCP and Agent Skill tools of the actor's skills (spec 18, 19).
    let offer = match crate::tools::offer::Offer::for_actor(
        engine,
        &mut store,
        &plan.plan_id,
        &policy,
        &actor_name,
        true,
    ) {
        Ok(o) => o,
        Err(message) => {
            return StepEnd::Failed {
                code: "SKILL_UNAVAILABLE".into(),
                message,
                output: Value::Null,
            };
        }
    };
    if let Some(block) = offer.prompt_block() {
        actor.template.push_str("\n\n");
        actor.template.push_str(&block);
    }
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
        runner: RunnerHost::new(
            store,
            Sandboxes::new(engine.paths()),
            plan.plan_id,
            policy,
            Arc::clone(&cancel),
        )
        .with_offer(offer),
        asked: Mutex::new(None),
        cancel: Arc::clone(&cancel),
        subplans: Some(subplans),
    };
    let invariants: Vec<String> = plan.invariants.iter().map(|i| i.text.clone()).collect();
    let step = decision
        .step
        .clone()
        .unwrap_or(crate::domain::decision::Step {
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
    let hot = step_context(engine, plan, decision, &step);
    let mut prompt = format!("Carry out this step now: {}", step.instructions);
    if !hot.text.is_empty() {
        prompt.push_str("\n\n");
        prompt.push_str(&hot.text);
    }
    let run = match model::run(
        engine,
        &plan.plan_id,
        Some(&decision.decision_id),
        &actor,
        model::Input {
            context,
            prompt,
            history: resume.map(Resume::history).unwrap_or_default(),
        },
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
        "hot_context": hot.snapshot(),
    });
    let asked = tools.asked.into_inner().ok().flatten();
    if cancel.load(Ordering::SeqCst) {
        return StepEnd::Stopped;
    }
    match run.stop {
        Stop::ToolEnded { tool } if tool == "request_decision" && asked.is_some() => {
            let asked = asked.expect("checked");
            let call_id = run
                .tool_calls
                .iter()
                .rev()
                .find(|c| c.name == "request_decision" && !c.is_error)
                .map(|c| c.call_id.clone())
                .unwrap_or_default();
            StepEnd::Paused(Box::new(Question {
                question: asked.question,
                options: asked.options,
                recommended: asked.recommended,
                context: asked.context,
                call_id,
                transcript: run.transcript,
            }))
        }
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
        Stop::Budget { stop } => StepEnd::Failed {
            code: "BUDGET_EXCEEDED".into(),
            message: stop.describe(),
            output,
        },
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::actors::messages::{ToolCall, ToolResult};

    #[test]
    fn a_resumed_transcript_carries_the_answer_as_the_calls_result() {
        let transcript = vec![
            Message::User { text: "go".into() },
            Message::Assistant {
                text: String::new(),
                tool_calls: vec![ToolCall {
                    id: "c1".into(),
                    name: "request_decision".into(),
                    arguments: "{}".into(),
                }],
            },
            Message::ToolResults {
                results: vec![ToolResult {
                    call_id: "c1".into(),
                    content: "The question is with the user.".into(),
                    is_error: false,
                }],
            },
        ];
        let resume = Resume {
            transcript: transcript.clone(),
            call_id: "c1".into(),
            answer: "The user chose option 2: b".into(),
        };
        let history = resume.history();
        assert_eq!(history[..2], transcript[..2]);
        let Message::ToolResults { results } = &history[2] else {
            panic!("{history:?}");
        };
        assert_eq!(results[0].content, "The user chose option 2: b");
    }

    #[test]
    fn questions_need_two_distinct_options_and_a_recommendation_among_them() {
        let ok = parse_question(
            &serde_json::json!({"question": "Q?", "options": ["a", "b"], "recommended": "b"}),
        )
        .unwrap();
        assert_eq!(
            (ok.options.len(), ok.recommended.as_deref()),
            (2, Some("b"))
        );
        for (args, expected) in [
            (serde_json::json!({"options": ["a", "b"]}), "`question`"),
            (
                serde_json::json!({"question": "Q?", "options": ["a"]}),
                "at least two",
            ),
            (
                serde_json::json!({"question": "Q?", "options": ["a", "a"]}),
                "different",
            ),
            (
                serde_json::json!({"question": "Q?", "options": ["a", "b"], "recommended": "c"}),
                "`recommended` must be one of the options",
            ),
        ] {
            let e = parse_question(&args).unwrap_err();
            assert!(e.contains(expected), "{args}: {e}");
        }
    }
}
