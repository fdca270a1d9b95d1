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
//! A call to a tool that needs a human's approval ([`crate::lifecycle::offer::Offer::approval_needed`]:
//! `human_approval_required`, or an open-world MCP tool outside `full-auto`) pauses the run
//! the same way, with a `tool_approval` showing the tool and its arguments ([`ToolAsk`]).
//! Approved, the call runs when the step continues and its outcome becomes the call's
//! result; rejected, the model is told the user refused it.
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

use super::step_end::{Question, StepEnd, ToolAsk};
use crate::actors::messages::{Message, ToolSpec};
use crate::actors::prompts::Role;
use crate::actors::prompts::request_decision_tool;
use crate::actors::runtime::Stop;
use crate::actors::runtime::{ToolHost, ToolOutcome};
use crate::domain::decision::Decision;
use crate::domain::{Id, Plan};
use crate::lifecycle::host::RunnerHost;
use crate::lifecycle::{Lifecycle, model};
use crate::sandbox::Sandboxes;
use crate::tools::runner::Policy;

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
    /// Whether the answer is a refusal (a rejected `tool_approval`).
    pub refused: bool,
    /// A tool call a human approved, as (name the model called, arguments): it runs before
    /// the model continues, and its outcome becomes the call's result.
    pub approved_call: Option<(String, Value)>,
}

impl Resume {
    /// The resumption after `approval` was answered: a `tool_approval` runs its call when
    /// approved and refuses it otherwise; any other approval answers the question with
    /// `answer`.
    pub fn after(
        approval: &crate::domain::approval::Approval,
        transcript: Vec<Message>,
        call_id: String,
        answer: String,
    ) -> Self {
        use crate::domain::approval::{ApprovalKind, ApprovalStatus};
        let mut resume = Self {
            transcript,
            call_id,
            answer,
            refused: false,
            approved_call: None,
        };
        if approval.kind != ApprovalKind::ToolApproval {
            return resume;
        }
        let tool = approval.context["tool"].as_str().unwrap_or_default();
        if approval.status == ApprovalStatus::Approved {
            let called_as = approval.context["called_as"]
                .as_str()
                .unwrap_or(tool)
                .to_string();
            resume.approved_call = Some((called_as, approval.context["arguments"].clone()));
            resume.answer = String::new();
        } else {
            let why = approval
                .answer
                .as_ref()
                .and_then(|a| a.get("reason").or_else(|| a.get("guidance")))
                .and_then(Value::as_str)
                .filter(|r| !r.trim().is_empty())
                .map(|r| format!(": {r}"))
                .unwrap_or_default();
            resume.answer = format!(
                "PERMISSION_DENIED: the user refused this call to {tool}{why}. Do not call it again with these arguments; carry on without it or finish the step saying what is left."
            );
            resume.refused = true;
        }
        resume
    }

    /// The transcript with `content` in place of the call's placeholder result.
    fn history_with(&self, content: &str, is_error: bool) -> Vec<Message> {
        let mut history = self.transcript.clone();
        for m in history.iter_mut().rev() {
            if let Message::ToolResults { results } = m
                && let Some(r) = results.iter_mut().find(|r| r.call_id == self.call_id)
            {
                content.clone_into(&mut r.content);
                r.is_error = is_error;
                break;
            }
        }
        history
    }

    /// The transcript with the answer in place of the call's placeholder result.
    fn history(&self) -> Vec<Message> {
        self.history_with(&self.answer, self.refused)
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
    /// A call waiting for a human's approval.
    approval: Mutex<Option<ToolAsk>>,
    cancel: Arc<AtomicBool>,
    subplans: Option<Subplans>,
}

/// Turns the approval raised for a paused run into a `tool_approval` for `ask`: the tool,
/// its arguments and why it needs approval in the context, options `approve` and `reject`.
pub(crate) fn tool_approval(
    a: &mut crate::domain::approval::Approval,
    ask: &ToolAsk,
    step_decision_id: Id,
    step: &str,
) {
    a.kind = crate::domain::approval::ApprovalKind::ToolApproval;
    a.summary = format!(
        "Allow the call to {} with {}?",
        ask.tool,
        crate::tools::runner::shorten(&ask.arguments)
    );
    a.context = json!({
        "tool": ask.tool,
        "called_as": ask.called_as,
        "arguments": ask.arguments,
        "reason": ask.reason,
        "step_decision_id": step_decision_id.to_string(),
        "step": step,
        "phase": "execute",
    });
    a.options = vec!["approve".into(), "reject".into()];
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
    seed: crate::lifecycle::LifecycleSeed,
    plan: Plan,
    step: Decision,
    /// The queued parallel group: its label, its decision and its spawns.
    pending: Mutex<Option<(String, Id, Vec<super::children::Spawn>)>>,
    /// Everything spawned in this step, for the step's output.
    spawned: Mutex<Vec<Value>>,
}

/// Passes progress and Ctrl-C on, but no events: the parent's own engine streams those.
struct Relay(Arc<dyn crate::lifecycle::Observer>);

impl crate::lifecycle::Observer for Relay {
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
        engine: &mut Lifecycle,
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
        crate::lifecycle::state::commit(
            engine.store_mut(),
            &mut plan,
            crate::events::EventKind::StateChanged(
                crate::domain::event::StateChanged::DecisionRecorded(
                    crate::domain::event::state::DecisionRecorded {
                        decision_id: id.to_string(),
                        decision_type: kind.as_str().into(),
                        by: "create_subplan".into(),
                    },
                ),
            ),
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
        if !crate::lifecycle::gates::Gates::of(&self.plan)
            .flags
            .auto_child_plans
        {
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

impl ExecutorTools {
    /// Ends the run after this turn with `tool`'s call waiting for a `tool_approval`.
    fn ask_approval(
        &self,
        called_as: &str,
        tool: String,
        reason: String,
        args: Value,
    ) -> ToolOutcome {
        let Ok(mut slot) = self.approval.lock() else {
            return ToolOutcome::error("approvals are unavailable");
        };
        if slot.is_some() || self.asked.lock().is_ok_and(|a| a.is_some()) {
            return ToolOutcome::error(format!(
                "{tool} needs a human's approval, and another question or approval is already with the user; call it again once that is answered"
            ));
        }
        let message = format!(
            "{reason}, so this call waits for a human's approval. The run pauses here; once approved the call runs and its result replaces this message, and if refused you are told so."
        );
        *slot = Some(ToolAsk {
            tool,
            called_as: called_as.to_string(),
            arguments: args,
            reason,
        });
        ToolOutcome::finish(message)
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
            if let Some((tool, reason)) = self.runner.approval_needed(name) {
                return self.ask_approval(name, tool, reason, args);
            }
            return self.runner.call(name, args).await;
        }
        let Ok(mut asked) = self.asked.lock() else {
            return ToolOutcome::error("request_decision is unavailable");
        };
        if asked.is_some() || self.approval.lock().is_ok_and(|a| a.is_some()) {
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

/// The step's hot context (files and definitions its decision names, what earlier steps did,
/// then the warm and cold decisions sharing its words, spec 25); empty when the plan's
/// resources cannot be read.
fn step_context(
    engine: &Lifecycle,
    plan: &Plan,
    decision: &Decision,
    step: &crate::domain::decision::Step,
) -> crate::context::Hot {
    use crate::context::{execute, policy, strategize, tiers};
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
    let memory = tiers::read(
        engine.store(),
        &plan.plan_id,
        Some(&decision.decision_id),
        &p,
    );
    let so_far = super::so_far::gather(engine, plan, decision, &p);
    execute::step_context(&scopes, &text, &p, &memory, &so_far)
}

/// Runs one step with a model execution actor.
///
/// # Errors
/// A message when the actor cannot be resolved or the run cannot start (reported as a failed
/// step by the caller).
pub(crate) fn run_step(
    engine: &mut Lifecycle,
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
    let tools = match step_tools(
        engine,
        plan,
        decision,
        policy,
        &cancel,
        &actor_name,
        &mut actor,
    ) {
        Ok(t) => t,
        Err(end) => return end,
    };
    let (mut input, hot) = step_input(engine, plan, decision, guidance, resume, &tools);
    journal_input(engine, plan, decision, &actor, &tools, &mut input);
    let run = match model::run(
        engine,
        &plan.plan_id,
        Some(&decision.decision_id),
        &actor,
        input,
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
    let approval = tools.approval.into_inner().ok().flatten();
    if cancel.load(Ordering::SeqCst) {
        return StepEnd::Stopped;
    }
    step_end(run, asked, approval, group_failure, output)
}

/// The tools of a step: the built-ins the policy allows, the command, MCP and Agent Skill
/// tools of the actor's skills (spec 18, 19; their prompt block is added to the actor's
/// template), `request_decision`, approvals and child plans. `Err` is the step's failure.
fn step_tools(
    engine: &mut Lifecycle,
    plan: &Plan,
    decision: &Decision,
    policy: Policy,
    cancel: &Arc<AtomicBool>,
    actor_name: &str,
    actor: &mut model::ModelActor,
) -> Result<ExecutorTools, StepEnd> {
    let mut store = match engine.store().reopen() {
        Ok(s) => s,
        Err(e) => {
            return Err(StepEnd::Failed {
                code: "STEP_FAILED".into(),
                message: e.to_string(),
                output: Value::Null,
            });
        }
    };
    // The command, MCP and Agent Skill tools of the actor's skills (spec 18, 19).
    let offer = match crate::lifecycle::offer::Offer::for_actor(
        engine,
        &mut store,
        &plan.plan_id,
        &policy,
        actor_name,
        true,
    ) {
        Ok(o) => o,
        Err(message) => {
            return Err(StepEnd::Failed {
                code: "SKILL_UNAVAILABLE".into(),
                message,
                output: Value::Null,
            });
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
    Ok(ExecutorTools {
        runner: RunnerHost::new(
            store,
            Sandboxes::new(engine.paths()),
            plan.plan_id,
            policy,
            Arc::clone(cancel),
        )
        .with_offer(offer),
        asked: Mutex::new(None),
        approval: Mutex::new(None),
        cancel: Arc::clone(cancel),
        subplans: Some(subplans),
    })
}

/// Journals the step's run (docs/sandbox.md, "Resuming a step"): each call is recorded as
/// it happens, and a step whose journal holds calls (its driver vanished mid-step) continues
/// from it at the exact call; a graph actor's step journals its walk node by node and
/// continues at the node, and in it at the call. Without a journal (the database cannot be
/// opened again) the step runs unjournaled.
fn journal_input(
    engine: &Lifecycle,
    plan: &Plan,
    decision: &Decision,
    actor: &model::ModelActor,
    tools: &ExecutorTools,
    input: &mut model::Input,
) {
    use crate::lifecycle::journal::{Journaled, StepJournal, rebuild};
    let mut writers: std::collections::BTreeSet<String> = tools
        .runner
        .names()
        .into_iter()
        .filter(|n| tools.runner.may_write(n))
        .collect();
    let unnoted: std::collections::BTreeSet<String> = ["create_subplan".to_string()].into();
    writers.extend(unnoted.iter().cloned());
    let step = Journaled {
        plan_id: plan.plan_id,
        key: decision.decision_id.to_string(),
        decision_id: Some(decision.decision_id),
        actor: actor.name.clone(),
        providers: engine.providers().to_vec(),
        fallback: actor.client.provider().clone(),
        writers,
        unnoted,
    };
    if actor.graph.is_some() {
        // A graph actor's walk journals its nodes; each llm node's loop keeps a journal of
        // its own under the node's path (docs/actors.md, "Graph actors").
        match crate::lifecycle::graph_journal::GraphStepJournal::open(
            engine.store().location(),
            Sandboxes::new(engine.paths()),
            step,
        ) {
            Ok(j) => {
                input.graph = Some(crate::actors::runtime::GraphJournalAt {
                    journal: Arc::new(j),
                    path: decision.decision_id.to_string(),
                    offset: 0,
                });
            }
            Err(e) => tracing::warn!(error = %e, "the step runs without a journal"),
        }
        return;
    }
    let journal =
        match StepJournal::open(engine.store().location(), Sandboxes::new(engine.paths()), step) {
            Ok(j) => Arc::new(j),
            Err(e) => {
                tracing::warn!(error = %e, "the step runs without a journal");
                return;
            }
        };
    let entries = engine
        .store()
        .journal(&plan.plan_id, &decision.decision_id.to_string())
        .unwrap_or_default();
    if let Some(rebuilt) = rebuild(&entries) {
        journal.resumed(rebuilt.call(), &rebuilt.point, rebuilt.lost.as_ref());
        input.history = rebuilt.history;
        input.resume_at = Some(rebuilt.point);
    }
    input.journal = Some(journal);
}

/// The model's input for a step (its context, the prompt with the step's hot context, and
/// on resume the history, an approved call run first), and that hot context.
fn step_input(
    engine: &Lifecycle,
    plan: &Plan,
    decision: &Decision,
    guidance: &[String],
    resume: Option<&Resume>,
    tools: &ExecutorTools,
) -> (model::Input, crate::context::Hot) {
    let invariants: Vec<String> = plan.invariants.iter().map(|i| i.text.clone()).collect();
    let step = decision
        .step
        .clone()
        .unwrap_or(crate::domain::decision::Step {
            instructions: decision.chosen_option.clone(),
            expected_outputs: Vec::new(),
            ..Default::default()
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
    // An approved call runs first; its outcome is the result the model continues with.
    let history = match resume {
        Some(r) => match &r.approved_call {
            Some((name, args)) => {
                let outcome = tools.runner.call_approved(name, args.clone());
                r.history_with(&outcome.content, outcome.is_error)
            }
            None => r.history(),
        },
        None => Vec::new(),
    };
    (
        model::Input {
            context,
            prompt,
            history,
            ..model::Input::default()
        },
        hot,
    )
}

/// How a step ends, from why the model stopped: paused on an approval or a question, done,
/// or failed (a parallel group of children that failed, budget, actor errors).
fn step_end(
    run: crate::actors::runtime::ActorRun,
    asked: Option<Asked>,
    approval: Option<ToolAsk>,
    group_failure: Option<String>,
    output: Value,
) -> StepEnd {
    match run.stop {
        Stop::ToolEnded { tool } if approval.as_ref().is_some_and(|a| a.called_as == tool) => {
            let ask = approval.expect("checked");
            let call_id = run
                .tool_calls
                .iter()
                .rev()
                .find(|c| c.name == ask.called_as && !c.is_error)
                .map(|c| c.call_id.clone())
                .unwrap_or_default();
            StepEnd::Paused(Box::new(Question {
                question: format!("Allow the call to {}?", ask.tool),
                options: vec!["approve".into(), "reject".into()],
                recommended: None,
                context: Some(ask.reason.clone()),
                call_id,
                transcript: run.transcript,
                tool: Some(ask),
            }))
        }
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
                tool: None,
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
                    images: Vec::new(),
                }],
            },
        ];
        let resume = Resume {
            transcript: transcript.clone(),
            call_id: "c1".into(),
            answer: "The user chose option 2: b".into(),
            refused: false,
            approved_call: None,
        };
        let history = resume.history();
        assert_eq!(history[..2], transcript[..2]);
        let Message::ToolResults { results } = &history[2] else {
            panic!("{history:?}");
        };
        assert_eq!(results[0].content, "The user chose option 2: b");
    }

    #[test]
    fn an_answered_tool_approval_runs_the_call_or_refuses_it() {
        use crate::domain::approval::{Approval, ApprovalKind, ApprovalStatus};
        let mut a = Approval::new(
            Id::generate(),
            ApprovalKind::ToolApproval,
            "Allow?",
            jiff::Timestamp::now(),
        );
        a.context = json!({"tool": "local/deploy", "called_as": "local_deploy", "arguments": {"env": "prod"}});
        a.status = ApprovalStatus::Approved;
        let r = Resume::after(&a, Vec::new(), "c1".into(), "unused".into());
        assert_eq!(
            r.approved_call,
            Some(("local_deploy".into(), json!({"env": "prod"})))
        );
        assert!(!r.refused);
        a.status = ApprovalStatus::Rejected;
        a.answer = Some(json!({"reason": "not on Fridays"}));
        let r = Resume::after(&a, Vec::new(), "c1".into(), "unused".into());
        assert!(r.approved_call.is_none() && r.refused);
        assert!(
            r.answer
                .contains("refused this call to local/deploy: not on Fridays"),
            "{}",
            r.answer
        );
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
