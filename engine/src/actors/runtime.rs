//! The actor runtime: one model actor's tool-calling loop.
//!
//! Spec sections 16 and 18 ("tool execution flow"): the rendered system prompt and the user
//! prompt go to the model with the actor's tools; each tool call goes through a [`ToolHost`]
//! (the tool runner at merge, which validates arguments and permissions) and its result goes
//! back to the model "for continued reasoning", until the model replies without tool calls.
//!
//! Behaviour:
//! - Tool failures never crash the loop: an unknown tool name, arguments that are not a JSON
//!   object, and errors reported by the tool all go back to the model as error results.
//! - The loop stops on a reply without tool calls ([`Stop::Answered`]), a tool that ends the
//!   run ([`ToolOutcome::ends_run`], e.g. `finish_strategy`), the turn limit
//!   ([`DEFAULT_MAX_TURNS`] model calls), the token budget, the run's deadline
//!   ([`Stop::Deadline`], the provider's `step_deadline_secs`), a text reply cut by the
//!   completion token limit ([`Stop::Truncated`]), cancellation, or a provider failure
//!   ([`Stop::Failed`], with the transcript so far).
//! - A reply cut by the token limit is reported ([`ActorEvent::Truncated`]) and recorded on
//!   its call; when it carries tool calls the loop goes on, and a call whose arguments were
//!   cut is answered with an error that says so.
//! - A reply over the client's size cap ([`ProviderError::TooLarge`]) is discarded and the
//!   model is told to work in smaller pieces; a second one in a row ends the run.
//! - Cancellation is checked before every model call and every tool call; a model call in
//!   flight is abandoned at once, a tool call in flight runs to completion so that a sandbox
//!   never holds half an operation.
//! - Progress is reported as [`ActorEvent`]s through a callback: text deltas (streamed, never
//!   stored), retries, tool calls started and finished, usage per call.

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use serde::Serialize;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use super::budget::{BudgetCheck, BudgetStop, estimate_tokens};
use super::messages::{ChatRequest, Message, Sampling, StreamEvent, ToolResult, Usage};
use super::prompts::{self, PromptError};
use super::providers::{ProviderClient, ProviderError};

/// Model calls allowed per run (per step, in a plan) unless the actor sets another limit.
pub const DEFAULT_MAX_TURNS: u32 = 40;

pub use crate::domain::tool_host::{NoTools, ToolHost, ToolOutcome};

/// Limits of one run.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Limits {
    /// Model calls allowed.
    pub max_turns: u32,
    /// Input plus output tokens allowed over the whole run; no new model call starts once
    /// the run has used this many.
    pub token_budget: Option<u64>,
    /// Wall time allowed for the whole run; `None` uses the provider's
    /// `step_deadline_secs`.
    pub deadline: Option<Duration>,
    /// The plan's budget, checked before every model call.
    pub budget: Option<BudgetCheck>,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_turns: DEFAULT_MAX_TURNS,
            token_budget: None,
            deadline: None,
            budget: None,
        }
    }
}

/// What to run.
#[derive(Debug, Clone, Default)]
pub struct RunRequest {
    /// The system prompt template (minijinja), rendered with `context`.
    pub system_template: Option<String>,
    /// Values for the template (`{{ context.task_description }}` reads `context`'s
    /// `context` key; see [`prompts::render`]).
    pub context: Value,
    /// The user prompt.
    pub prompt: String,
    /// Completion token cap per call.
    pub max_tokens: Option<u32>,
    /// Sampling options (temperature, top-p, seed, stop sequences).
    pub sampling: Sampling,
    /// Whether to stream replies.
    pub stream: bool,
    /// Limits.
    pub limits: Limits,
    /// A conversation to continue instead of starting one from `prompt` (a run paused by
    /// `request_decision` and resumed with the user's answer as the call's result). Turn
    /// counting starts again from zero.
    pub history: Vec<Message>,
    /// Where the run records each call as it happens, so that it can continue at the exact
    /// call after its process vanished; `None` records nothing.
    pub journal: Option<std::sync::Arc<dyn RunJournal>>,
    /// The point a journaled run continues from (`history` is then the conversation rebuilt
    /// from its journal).
    pub resume_at: Option<ResumePoint>,
    /// For a graph actor's run: where the walk records each node as it starts and ends, and
    /// where each llm node's loop keeps its own journal, so that a run whose process vanished
    /// continues at the node, and in it at the call, where it was (docs/actors.md, "Graph
    /// actors"). `None` runs the graph afresh.
    pub graph: Option<GraphJournalAt>,
}

/// A graph walk's place in its journal: the journal, the walk's path (the step's key, then
/// `/<step>:<node>` for each nested graph node) and the calls made before the walk began
/// (model calls are numbered across the whole run).
#[derive(Debug, Clone)]
pub struct GraphJournalAt {
    /// The journal.
    pub journal: std::sync::Arc<dyn GraphJournal>,
    /// The walk's path.
    pub path: String,
    /// Model calls made before this walk began.
    pub offset: u32,
}

/// A graph node the walk finished (its node run answered), as journaled.
#[derive(Debug, Clone, PartialEq, Serialize, serde::Deserialize)]
pub struct NodeDone {
    /// The walk's step the node ran at (1-based).
    pub step: u32,
    /// The node.
    pub node: String,
    /// Its output.
    pub output: String,
    /// Whether the output is an error.
    pub is_error: bool,
    /// Model calls it made.
    pub turns: u32,
    /// Their tokens.
    pub usage: Usage,
    /// Their priced cost.
    pub spent_usd: f64,
    /// Its tool calls (turns within the node).
    pub tool_calls: Vec<ToolCallRecord>,
}

/// What a graph walk's journal says happened (see [`GraphJournal::walk`]).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct WalkRecord {
    /// The nodes finished, in order.
    pub done: Vec<NodeDone>,
    /// Whether a node had started after them (it is continued, or run again when it was a
    /// tool node: its partial effects were rolled back).
    pub open: bool,
}

/// An llm node's journal, with the conversation and the point it continues from when it had
/// begun (see [`GraphJournal::node_run`]).
pub type NodeRun = (
    std::sync::Arc<dyn RunJournal>,
    Option<(Vec<Message>, ResumePoint)>,
);

/// Where a graph actor's walk records its progress (docs/actors.md, "Graph actors"). Each
/// method is called before the walk goes on, so what it writes durably is what a
/// continuation finds.
pub trait GraphJournal: Send + Sync + std::fmt::Debug {
    /// What the walk at `path` recorded so far (empty for a walk that never ran).
    fn walk(&self, path: &str) -> WalkRecord;
    /// Node `node` (`kind`: `llm`, `tool` or `graph`) starts at step `step` of the walk at
    /// `path`; its own journal, if any, is `path/<step>:<node>`.
    fn node_started(&self, path: &str, step: u32, node: &str, kind: &str);
    /// A node finished with an answer; its effects are checkpointed when it may have
    /// written.
    fn node_done(&self, path: &str, done: &NodeDone);
    /// The journal of the llm node whose loop is at `path` (its calls numbered after
    /// `offset`), with the conversation and the point it continues from when it had begun.
    fn node_run(&self, path: &str, offset: u32) -> NodeRun;
    /// The walk at `path` continues after what it recorded, at model call `call` of the run
    /// (no node's own journal was continued).
    fn resumed(&self, path: &str, call: u32);
}

/// Where a run records each model call and each tool call as it happens (docs/sandbox.md,
/// "Resuming a step"). Every method is called before the run makes its next call, so what it
/// writes durably is what a continuation finds.
pub trait RunJournal: Send + Sync + std::fmt::Debug {
    /// The run's conversation as it starts (the prompt, or the history it continues).
    fn started(&self, history: &[Message]);
    /// Model call `turn` is about to be made to `provider`'s `model`; `retry` as in
    /// [`RunJournal::model_ended`]. Should the process vanish before the call ends, the call
    /// is recorded, when the run continues, as made but never answered (`interrupted`).
    fn model_started(&self, turn: u32, provider: &str, model: &str, retry: bool);
    /// A model call ended: its record and, when it was answered, the assistant message.
    /// `retry` marks the call made again because the one before it was in flight when the
    /// run's process vanished.
    fn model_ended(&self, record: &ModelCallRecord, reply: Option<&Message>, retry: bool);
    /// The engine added a message of its own to the conversation.
    fn noted(&self, message: &Message);
    /// A tool call is about to run.
    fn tool_started(&self, turn: u32, call_id: &str, name: &str);
    /// A tool call finished; `retry` marks a call re-issued because it was in flight.
    fn tool_ended(&self, record: &ToolCallRecord, ends_run: bool, retry: bool);
}

/// Where a journaled run continues: what its journal says was done.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ResumePoint {
    /// Model calls already answered.
    pub turns: u32,
    /// Their tokens.
    pub usage: Usage,
    /// The last answered reply's tool calls, when some have no recorded result: the ones
    /// without run first (the call that was in flight is re-issued).
    pub pending: Vec<super::messages::ToolCall>,
    /// The recorded results of the last reply's calls.
    pub done: Vec<ToolResult>,
    /// Whether the last reply was cut by the completion token limit.
    pub truncated: bool,
    /// A model call was in flight: the next one is a retry.
    pub model_in_flight: bool,
    /// The id of the tool call that was in flight, re-issued as a retry.
    pub tool_in_flight: Option<String>,
    /// The last answered reply called no tool: the run had ended with this answer.
    pub answered: Option<String>,
}

/// Progress of a run, in order. Text deltas are for display only and are never stored.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum ActorEvent {
    /// A model call is starting.
    TurnStarted {
        /// 1-based turn.
        turn: u32,
    },
    /// A piece of the model's reply text.
    TextDelta {
        /// Turn.
        turn: u32,
        /// The text.
        text: String,
    },
    /// The model call failed transiently and is being retried; text deltas of this turn so
    /// far are void.
    Retrying {
        /// Turn.
        turn: u32,
        /// The attempt that failed.
        attempt: u32,
        /// Wait before the next attempt, in milliseconds.
        delay_ms: u64,
        /// What failed.
        reason: String,
    },
    /// The reply of a model call was cut by the completion token limit.
    Truncated {
        /// Turn.
        turn: u32,
        /// The provider's reason (`length`, `max_tokens`).
        stop_reason: String,
        /// Whether the cut reply carried tool calls (the run goes on).
        with_tool_calls: bool,
    },
    /// A model call finished; its token counts.
    Usage {
        /// Turn.
        turn: u32,
        /// This call's tokens.
        usage: Usage,
        /// The run's tokens so far.
        total: Usage,
    },
    /// A tool call is starting.
    ToolCallStarted {
        /// Turn.
        turn: u32,
        /// The provider's call id.
        call_id: String,
        /// Tool name as the model wrote it.
        name: String,
        /// Arguments as the model sent them.
        arguments: String,
    },
    /// A tool call finished.
    ToolCallFinished {
        /// Turn.
        turn: u32,
        /// The provider's call id.
        call_id: String,
        /// Tool name.
        name: String,
        /// Whether it failed.
        is_error: bool,
        /// Duration in milliseconds.
        duration_ms: u64,
    },
}

/// One tool call of a run, as recorded.
#[derive(Debug, Clone, PartialEq, Serialize, serde::Deserialize)]
pub struct ToolCallRecord {
    /// Turn.
    pub turn: u32,
    /// The provider's call id.
    pub call_id: String,
    /// Tool name as the model wrote it.
    pub name: String,
    /// Arguments as the model sent them.
    pub arguments: String,
    /// What the model was told.
    pub result: String,
    /// Whether it failed.
    pub is_error: bool,
    /// Duration in milliseconds.
    pub duration_ms: u64,
}

/// The error kind of a call abandoned at the run's deadline: the provider worked on it, so
/// its usage is unknown (its estimate counts), never zero.
pub const ABANDONED: &str = "abandoned";

/// One model call of a run (successful or not), for accounting.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ModelCallRecord {
    /// Turn.
    pub turn: u32,
    /// Provider name.
    pub provider: String,
    /// Model name.
    pub model: String,
    /// Tokens (zero for a failed call).
    pub usage: Usage,
    /// Whether the provider reported usage.
    pub usage_reported: bool,
    /// Input tokens estimated from the request's characters (used where the provider
    /// reported no usage and a budget needs a number).
    pub estimated_input_tokens: u64,
    /// Output tokens estimated from the reply's characters.
    pub estimated_output_tokens: u64,
    /// The provider's stop reason (`length` / `max_tokens` for a reply cut by the limit).
    pub stop_reason: Option<String>,
    /// Attempts made.
    pub attempts: u32,
    /// When the call started.
    pub started_at: jiff::Timestamp,
    /// Wall time including retries, in milliseconds.
    pub duration_ms: u64,
    /// For a failed call: the error's kind and message.
    pub error: Option<(String, String)>,
}

/// Why a run stopped.
#[derive(Debug, Clone, Serialize)]
#[serde(tag = "reason", rename_all = "snake_case")]
pub enum Stop {
    /// The model replied without tool calls.
    Answered,
    /// A tool ended the run.
    ToolEnded {
        /// The tool.
        tool: String,
    },
    /// The model was still calling tools after `turns` model calls.
    TurnLimit {
        /// The limit.
        turns: u32,
    },
    /// A graph actor ran `steps` nodes, its step limit, without reaching its end.
    StepLimit {
        /// The limit (`limits.max-steps` of the graph).
        steps: u32,
    },
    /// The run passed its deadline.
    Deadline {
        /// The deadline, in seconds.
        secs: u64,
    },
    /// The model's text reply was cut by the completion token limit.
    Truncated {
        /// The cap that was sent, if the actor set one.
        max_tokens: Option<u32>,
    },
    /// The next model call would pass the plan's budget; it was not made.
    Budget {
        /// Which limit, its value and what was spent.
        stop: BudgetStop,
    },
    /// The run used its token budget.
    TokenBudget {
        /// Tokens used.
        used: u64,
        /// The budget.
        budget: u64,
    },
    /// The run was cancelled.
    Cancelled,
    /// A model call failed.
    Failed {
        /// The error.
        #[serde(serialize_with = "display")]
        error: ProviderError,
    },
}

fn display<S: serde::Serializer>(e: &ProviderError, s: S) -> Result<S::Ok, S::Error> {
    s.collect_str(e)
}

impl Stop {
    /// A one-line description for the user.
    pub fn describe(&self) -> String {
        match self {
            Stop::Answered => "the actor answered".into(),
            Stop::ToolEnded { tool } => format!("the actor finished with `{tool}`"),
            Stop::TurnLimit { turns } => format!(
                "the actor was still calling tools after {turns} model calls (the turn limit)"
            ),
            Stop::StepLimit { steps } => format!(
                "the graph ran {steps} nodes, its step limit (`limits.max-steps` of the graph), without reaching its end"
            ),
            Stop::Deadline { secs } => format!(
                "the actor was still working after {secs} s, its deadline (`providers.NAME.step_deadline_secs`)"
            ),
            Stop::Truncated { max_tokens } => format!(
                "the model's reply was cut by the completion token limit{}; raise `options.max-tokens` of the actor or ask for a shorter answer",
                max_tokens
                    .map(|m| format!(" ({m} tokens)"))
                    .unwrap_or_default()
            ),
            Stop::Budget { stop } => stop.describe(),
            Stop::TokenBudget { used, budget } => {
                format!("the actor used {used} tokens of its budget of {budget}")
            }
            Stop::Cancelled => "the run was cancelled".into(),
            Stop::Failed { error } => error.to_string(),
        }
    }
}

/// The result of a run.
#[derive(Debug, Clone, Serialize)]
pub struct ActorRun {
    /// Why it stopped.
    pub stop: Stop,
    /// The model's last non-empty reply text.
    pub answer: String,
    /// The rendered system prompt.
    pub system: Option<String>,
    /// The whole conversation.
    pub transcript: Vec<Message>,
    /// Every tool call, in order.
    pub tool_calls: Vec<ToolCallRecord>,
    /// Every model call, in order.
    pub model_calls: Vec<ModelCallRecord>,
    /// Tokens over all calls.
    pub usage: Usage,
    /// Model calls made.
    pub turns: u32,
}

/// Failures before any model call.
#[derive(Debug, thiserror::Error)]
pub enum RuntimeError {
    /// The system prompt template does not render.
    #[error(transparent)]
    Prompt(#[from] PromptError),
}

/// Caps `text` at `max` characters for an error message.
fn clip(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        text.to_string()
    } else {
        format!("{}...", text.chars().take(max).collect::<String>())
    }
}

/// Checks a call against the offered tools and parses its arguments; `Err` is the error
/// result for the model.
fn prepare(names: &BTreeSet<String>, name: &str, arguments: &str) -> Result<Value, String> {
    if !names.contains(name) {
        let available = if names.is_empty() {
            "none".to_string()
        } else {
            names.iter().cloned().collect::<Vec<_>>().join(", ")
        };
        return Err(format!(
            "unknown tool `{name}`; the available tools are: {available}. Call one of them by its exact name"
        ));
    }
    if arguments.trim().is_empty() {
        return Ok(Value::Object(Default::default()));
    }
    match serde_json::from_str::<Value>(arguments) {
        Ok(v @ Value::Object(_)) => Ok(v),
        Ok(other) => Err(format!(
            "the arguments of `{name}` must be a JSON object, not {}; call it again with an object matching its schema",
            clip(&other.to_string(), 200)
        )),
        Err(e) => Err(format!(
            "the arguments of `{name}` are not valid JSON ({e}): {}; call it again with one JSON object matching its schema",
            clip(arguments, 200)
        )),
    }
}

/// Runs one actor: renders the system prompt, then loops model call → tool calls until a
/// stop condition (see the module documentation). Provider failures end the run with
/// [`Stop::Failed`] and keep everything recorded so far.
///
/// # Errors
/// [`RuntimeError::Prompt`] when the system prompt does not render (no model call is made).
pub async fn run_actor<H: ToolHost>(
    client: &ProviderClient,
    request: &RunRequest,
    tools: &H,
    cancel: &CancellationToken,
    on_event: &(dyn Fn(ActorEvent) + Send + Sync),
) -> Result<ActorRun, RuntimeError> {
    let system = request
        .system_template
        .as_deref()
        .map(|t| prompts::render(t, &request.context))
        .transpose()?;
    let specs = tools.specs();
    let names: BTreeSet<String> = specs.iter().map(|s| s.name.clone()).collect();
    let mut run = ActorRun {
        stop: Stop::Answered,
        answer: String::new(),
        system: system.clone(),
        transcript: if request.history.is_empty() {
            vec![Message::User {
                text: request.prompt.clone(),
            }]
        } else {
            request.history.clone()
        },
        tool_calls: Vec::new(),
        model_calls: Vec::new(),
        usage: Usage::default(),
        turns: 0,
    };
    let deadline = request.limits.deadline.unwrap_or(Duration::from_secs(
        client.provider().step_deadline_secs.max(1),
    ));
    let clock = Instant::now();
    let mut oversized_in_a_row = 0;
    let mut retry_model = false;
    if let Some(stop) = resume(&mut run, request, &names, tools, cancel, on_event).await {
        run.stop = stop;
        return Ok(run);
    }
    if let Some(at) = &request.resume_at {
        retry_model = at.model_in_flight;
    }
    run.stop = loop {
        if cancel.is_cancelled() {
            break Stop::Cancelled;
        }
        let Some(time_left) = deadline.checked_sub(clock.elapsed()) else {
            break Stop::Deadline {
                secs: deadline.as_secs(),
            };
        };
        if let Some(stop) = limit_stop(&run, request) {
            break stop;
        }
        let chat = ChatRequest {
            model: client.model().to_string(),
            system: system.clone(),
            messages: run.transcript.clone(),
            tools: specs.clone(),
            max_tokens: request.max_tokens,
            sampling: request.sampling.clone(),
            stream: request.stream,
        };
        if let Some(budget) = &request.limits.budget
            && let Some(stop) = budget_stop(client, budget, &run, &chat)
        {
            tracing::warn!(reason = %stop.describe(), "model call not made: budget");
            break Stop::Budget { stop };
        }
        run.turns += 1;
        let call = Call {
            client,
            chat: &chat,
            turn: run.turns,
            time_left,
            deadline,
            journal: request.journal.as_deref(),
            retry: std::mem::take(&mut retry_model),
        };
        let response = match call.make(&mut run, cancel, on_event).await {
            Made::Reply(r) => r,
            Made::Stop(stop) => break stop,
            Made::TooLarge(error) if oversized_in_a_row == 0 => {
                oversized_in_a_row += 1;
                tracing::warn!(turn = run.turns, %error, "reply discarded; the model is told to work in smaller pieces");
                let note = Message::User {
                    text: format!(
                        "Your previous reply was discarded: {error}. Work in smaller pieces: split large edits or outputs into several smaller tool calls."
                    ),
                };
                if let Some(j) = &request.journal {
                    j.noted(&note);
                }
                run.transcript.push(note);
                continue;
            }
            Made::TooLarge(error) => break Stop::Failed { error },
        };
        oversized_in_a_row = 0;
        if let Some(stop) =
            tool_turn(&mut run, response, &names, request, tools, cancel, on_event).await
        {
            break stop;
        }
    };
    Ok(run)
}

/// Starts a run: records its conversation in the journal, or, continuing a journaled run
/// ([`RunRequest::resume_at`]), takes its turns and usage so far and runs the tool calls of
/// its last reply that have no recorded result. `Some` when the run ends there (it had
/// answered, or a tool ended it).
async fn resume<H: ToolHost>(
    run: &mut ActorRun,
    request: &RunRequest,
    names: &BTreeSet<String>,
    tools: &H,
    cancel: &CancellationToken,
    on_event: &(dyn Fn(ActorEvent) + Send + Sync),
) -> Option<Stop> {
    let Some(at) = &request.resume_at else {
        if let Some(j) = &request.journal {
            j.started(&run.transcript);
        }
        return None;
    };
    run.turns = at.turns;
    run.usage = at.usage;
    if let Some(answer) = &at.answered {
        run.answer.clone_from(answer);
        return Some(Stop::Answered);
    }
    if at.pending.is_empty() {
        return None;
    }
    let turn = Turn {
        number: at.turns,
        truncated: at.truncated,
        retry_tool: at.tool_in_flight.as_deref(),
    };
    turn.run_calls(
        run,
        at.pending.clone(),
        at.done.clone(),
        names,
        request,
        tools,
        cancel,
        on_event,
    )
    .await
}

/// The stop before a model call that the run's own limits demand: the turn limit, the
/// token budget.
fn limit_stop(run: &ActorRun, request: &RunRequest) -> Option<Stop> {
    let limits = request.limits;
    if run.turns >= limits.max_turns {
        return Some(Stop::TurnLimit {
            turns: limits.max_turns,
        });
    }
    match limits.token_budget {
        Some(budget) if run.usage.total() >= budget => Some(Stop::TokenBudget {
            used: run.usage.total(),
            budget,
        }),
        _ => None,
    }
}

/// One model call about to be made.
struct Call<'a> {
    client: &'a ProviderClient,
    chat: &'a ChatRequest,
    turn: u32,
    time_left: Duration,
    deadline: Duration,
    journal: Option<&'a dyn RunJournal>,
    /// Made again because the one before it was in flight when the run's process vanished.
    retry: bool,
}

/// What a model call gave.
enum Made {
    /// A reply, recorded on the run.
    Reply(super::messages::ChatResponse),
    /// The run stops.
    Stop(Stop),
    /// A reply over the size cap (recorded as a failed call).
    TooLarge(ProviderError),
}

impl Call<'_> {
    fn failed(
        &self,
        error: &ProviderError,
        started_at: jiff::Timestamp,
        clock: Instant,
    ) -> ModelCallRecord {
        ModelCallRecord {
            turn: self.turn,
            provider: self.client.provider().name.clone(),
            model: self.client.model().to_string(),
            usage: Usage::default(),
            usage_reported: false,
            estimated_input_tokens: 0,
            estimated_output_tokens: 0,
            stop_reason: None,
            attempts: match error {
                ProviderError::Transient { attempts, .. } => *attempts,
                _ => 1,
            },
            started_at,
            duration_ms: millis(clock.elapsed()),
            error: Some((error.kind().to_string(), error.to_string())),
        }
    }

    /// Records a call on the run and in its journal.
    fn record(&self, run: &mut ActorRun, record: ModelCallRecord, reply: Option<&Message>) {
        if let Some(j) = self.journal {
            j.model_ended(&record, reply, self.retry);
        }
        run.model_calls.push(record);
    }

    /// The record of a call abandoned at a deadline (`why`) after `streamed` bytes of text:
    /// no usage reported, its tokens estimated from the request and what arrived.
    fn abandoned(
        &self,
        started_at: jiff::Timestamp,
        clock: Instant,
        streamed: usize,
        why: String,
    ) -> ModelCallRecord {
        ModelCallRecord {
            turn: self.turn,
            provider: self.client.provider().name.clone(),
            model: self.client.model().to_string(),
            usage: Usage::default(),
            usage_reported: false,
            estimated_input_tokens: estimate_tokens(
                self.client.request_body(self.chat).to_string().len(),
            ),
            estimated_output_tokens: estimate_tokens(streamed),
            stop_reason: None,
            attempts: 1,
            started_at,
            duration_ms: millis(clock.elapsed()),
            error: Some((ABANDONED.to_string(), why)),
        }
    }

    /// Makes the call, records it (usage, estimates, stop reason) and reports its events.
    async fn make(
        &self,
        run: &mut ActorRun,
        cancel: &CancellationToken,
        on_event: &(dyn Fn(ActorEvent) + Send + Sync),
    ) -> Made {
        let turn = self.turn;
        on_event(ActorEvent::TurnStarted { turn });
        if let Some(j) = self.journal {
            j.model_started(
                turn,
                &self.client.provider().name,
                self.client.model(),
                self.retry,
            );
        }
        let started_at = jiff::Timestamp::now();
        let clock = Instant::now();
        let streamed = std::sync::atomic::AtomicUsize::new(0);
        let mut forward = |e: StreamEvent| match e {
            StreamEvent::TextDelta(text) => {
                streamed.fetch_add(text.len(), std::sync::atomic::Ordering::Relaxed);
                on_event(ActorEvent::TextDelta { turn, text });
            }
            StreamEvent::Retrying {
                attempt,
                delay,
                reason,
            } => on_event(ActorEvent::Retrying {
                turn,
                attempt,
                delay_ms: delay.as_millis() as u64,
                reason,
            }),
        };
        let call = tokio::time::timeout(
            self.time_left,
            self.client.complete(self.chat, cancel, &mut forward),
        );
        let completion = match call.await {
            Err(_) => {
                let why = format!(
                    "abandoned at the run's deadline of {} s (`providers.NAME.step_deadline_secs`)",
                    self.deadline.as_secs()
                );
                let streamed = streamed.load(std::sync::atomic::Ordering::Relaxed);
                run.model_calls
                    .push(self.abandoned(started_at, clock, streamed, why));
                return Made::Stop(Stop::Deadline {
                    secs: self.deadline.as_secs(),
                });
            }
            Ok(Ok(c)) => c,
            Ok(Err(ProviderError::Cancelled { .. })) => return Made::Stop(Stop::Cancelled),
            Ok(Err(error @ ProviderError::TooLarge { .. })) => {
                self.record(run, self.failed(&error, started_at, clock), None);
                return Made::TooLarge(error);
            }
            Ok(Err(error)) if error.abandoned() => {
                let streamed = streamed.load(std::sync::atomic::Ordering::Relaxed);
                let record = self.abandoned(started_at, clock, streamed, error.to_string());
                self.record(run, record, None);
                return Made::Stop(Stop::Failed { error });
            }
            Ok(Err(error)) => {
                self.record(run, self.failed(&error, started_at, clock), None);
                return Made::Stop(Stop::Failed { error });
            }
        };
        let response = completion.response;
        run.usage += response.usage;
        let (estimated_input_tokens, estimated_output_tokens) = if response.usage_reported {
            (0, 0)
        } else {
            (
                estimate_tokens(self.client.request_body(self.chat).to_string().len()),
                estimate_tokens(
                    response.text.len()
                        + response
                            .tool_calls
                            .iter()
                            .map(|c| c.name.len() + c.arguments.len())
                            .sum::<usize>(),
                ),
            )
        };
        let reply = Message::Assistant {
            text: response.text.clone(),
            tool_calls: response.tool_calls.clone(),
        };
        let record = ModelCallRecord {
            turn,
            provider: self.client.provider().name.clone(),
            model: self.client.model().to_string(),
            usage: response.usage,
            usage_reported: response.usage_reported,
            estimated_input_tokens,
            estimated_output_tokens,
            stop_reason: response.stop_reason.clone(),
            attempts: completion.attempts,
            started_at,
            duration_ms: millis(completion.duration),
            error: None,
        };
        self.record(run, record, Some(&reply));
        on_event(ActorEvent::Usage {
            turn,
            usage: response.usage,
            total: run.usage,
        });
        Made::Reply(response)
    }
}

/// Takes a reply into the transcript and runs its tool calls; returns the stop when the
/// reply ends the run (no tool calls, a cut text reply, a tool that ends the run,
/// cancellation).
async fn tool_turn<H: ToolHost>(
    run: &mut ActorRun,
    response: super::messages::ChatResponse,
    names: &BTreeSet<String>,
    request: &RunRequest,
    tools: &H,
    cancel: &CancellationToken,
    on_event: &(dyn Fn(ActorEvent) + Send + Sync),
) -> Option<Stop> {
    let turn = run.turns;
    let truncated = response.truncated();
    if truncated {
        tracing::warn!(turn, stop_reason = ?response.stop_reason, tool_calls = response.tool_calls.len(), "the reply was cut by the completion token limit");
        on_event(ActorEvent::Truncated {
            turn,
            stop_reason: response.stop_reason.clone().unwrap_or_default(),
            with_tool_calls: !response.tool_calls.is_empty(),
        });
    }
    if !response.text.is_empty() {
        run.answer.clone_from(&response.text);
    }
    let calls = response.tool_calls.clone();
    run.transcript.push(Message::Assistant {
        text: response.text,
        tool_calls: response.tool_calls,
    });
    if calls.is_empty() && truncated {
        return Some(Stop::Truncated {
            max_tokens: request.max_tokens,
        });
    }
    if calls.is_empty() {
        return Some(Stop::Answered);
    }
    let turn = Turn {
        number: turn,
        truncated,
        retry_tool: None,
    };
    turn.run_calls(
        run,
        calls,
        Vec::new(),
        names,
        request,
        tools,
        cancel,
        on_event,
    )
    .await
}

/// The tool calls of one reply being run.
struct Turn<'a> {
    /// The model call that made them.
    number: u32,
    /// Whether its reply was cut by the completion token limit.
    truncated: bool,
    /// A call re-issued because it was in flight when the run's process vanished.
    retry_tool: Option<&'a str>,
}

impl Turn<'_> {
    /// Runs `calls` in order (those with a result in `done` are not run again: their
    /// recorded result stands), puts their results in the transcript, and returns the stop
    /// when a tool ended the run or it was cancelled.
    #[allow(clippy::too_many_arguments)]
    async fn run_calls<H: ToolHost>(
        &self,
        run: &mut ActorRun,
        calls: Vec<super::messages::ToolCall>,
        done: Vec<ToolResult>,
        names: &BTreeSet<String>,
        request: &RunRequest,
        tools: &H,
        cancel: &CancellationToken,
        on_event: &(dyn Fn(ActorEvent) + Send + Sync),
    ) -> Option<Stop> {
        let turn = self.number;
        let mut results = Vec::with_capacity(calls.len());
        let mut ended_by = None;
        let mut cancelled = false;
        for call in calls {
            if let Some(r) = done.iter().find(|r| r.call_id == call.id) {
                results.push(r.clone());
                continue;
            }
            if cancel.is_cancelled() {
                cancelled = true;
                break;
            }
            on_event(ActorEvent::ToolCallStarted {
                turn,
                call_id: call.id.clone(),
                name: call.name.clone(),
                arguments: call.arguments.clone(),
            });
            if let Some(j) = &request.journal {
                j.tool_started(turn, &call.id, &call.name);
            }
            let clock = Instant::now();
            let outcome = match prepare(names, &call.name, &call.arguments) {
                Ok(args) => tools.call(&call.name, args).await,
                Err(message) if self.truncated => ToolOutcome::error(format!(
                    "your reply was cut by the completion token limit, so this call is incomplete: {message}. Make smaller calls"
                )),
                Err(message) => ToolOutcome::error(message),
            };
            let duration_ms = millis(clock.elapsed());
            tracing::debug!(turn, tool = %call.name, is_error = outcome.is_error, duration_ms, "tool call finished");
            on_event(ActorEvent::ToolCallFinished {
                turn,
                call_id: call.id.clone(),
                name: call.name.clone(),
                is_error: outcome.is_error,
                duration_ms,
            });
            if outcome.ends_run && ended_by.is_none() {
                ended_by = Some(call.name.clone());
            }
            let record = ToolCallRecord {
                turn,
                call_id: call.id.clone(),
                name: call.name,
                arguments: call.arguments,
                result: outcome.content.clone(),
                is_error: outcome.is_error,
                duration_ms,
            };
            if let Some(j) = &request.journal {
                j.tool_ended(
                    &record,
                    outcome.ends_run,
                    self.retry_tool == Some(call.id.as_str()),
                );
            }
            run.tool_calls.push(record);
            results.push(ToolResult {
                call_id: call.id,
                content: outcome.content,
                is_error: outcome.is_error,
                images: outcome.images,
            });
        }
        run.transcript.push(Message::ToolResults { results });
        if cancelled {
            return Some(Stop::Cancelled);
        }
        ended_by.map(|tool| Stop::ToolEnded { tool })
    }
}

/// Whether the next call (`chat`) would pass the plan's budget: this run's calls so far
/// count at their reported usage (or, unreported, at a character estimate), the next call at
/// the estimate of its input.
fn budget_stop(
    client: &ProviderClient,
    budget: &BudgetCheck,
    run: &ActorRun,
    chat: &ChatRequest,
) -> Option<BudgetStop> {
    let provider = client.provider();
    let price = provider.models.get(client.model());
    let mut tokens = 0;
    let mut usd = 0.0;
    for c in run.model_calls.iter().filter(|c| c.error.is_none()) {
        let usage = if c.usage_reported {
            c.usage
        } else {
            Usage {
                input_tokens: c.estimated_input_tokens,
                output_tokens: c.estimated_output_tokens,
                ..Usage::default()
            }
        };
        tokens += usage.total();
        usd += super::pricing::cost_usd(provider.kind, price, usage).unwrap_or(0.0);
    }
    let next = estimate_tokens(client.request_body(chat).to_string().len());
    budget.check(tokens, usd, next, price.and_then(|p| p.input_usd_per_mtok))
}

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_tools_and_bad_arguments_get_messages_that_say_what_to_do() {
        let names: BTreeSet<String> = ["read_file".to_string(), "write_file".to_string()].into();
        let e = prepare(&names, "delete_everything", "{}").unwrap_err();
        assert!(e.contains("unknown tool `delete_everything`"), "{e}");
        assert!(e.contains("read_file, write_file"), "{e}");
        let e = prepare(&names, "read_file", "{\"path\": ").unwrap_err();
        assert!(e.contains("not valid JSON"), "{e}");
        let e = prepare(&names, "read_file", "[1]").unwrap_err();
        assert!(e.contains("must be a JSON object"), "{e}");
        assert_eq!(
            prepare(&names, "read_file", "").unwrap(),
            serde_json::json!({})
        );
    }
}
