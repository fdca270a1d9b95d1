//! `actor run`: one model actor in isolation, in a fresh sandbox or one of a registered
//! resource, with the model calls made where the data is (the server, with its configuration
//! and keys, through a server).

use std::path::PathBuf;

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::actor_run::{OneShot, OneShotResult, Workspace, run_model_actor};
use crate::actors::providers::ClientOptions;
use crate::actors::runtime::Stop;
use crate::api::{ApiError, Engine, ErrorCode};

/// What `actor run` asks.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ActorRunRequest {
    /// `PROVIDER/MODEL` or a registered actor.
    pub actor: String,
    /// The prompt.
    pub prompt: String,
    /// Sampling temperature.
    pub temperature: Option<f32>,
    /// Offer only these skills' tools.
    pub skills: Vec<String>,
    /// Work in a sandbox of this registered resource (default: a fresh empty sandbox).
    pub resource: Option<String>,
    /// Allow tools marked unsafe.
    pub unsafe_tools: bool,
    /// Continue this named context and save the run to it.
    pub context: Option<String>,
    /// Store the text files of this directory (on the host that runs the actor) in the
    /// context.
    pub context_dir: Option<PathBuf>,
    /// Show the actor this context (a name, or an export file on the host that runs the
    /// actor) without changing it.
    pub load_context: Option<String>,
}

/// One tool call of a run, as the report's table shows it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ToolCallShown {
    /// Turn.
    pub turn: u32,
    /// Tool name.
    pub name: String,
    /// Whether it failed.
    pub is_error: bool,
    /// Its arguments as the model sent them.
    pub arguments: String,
}

/// One model call of a run, as the report's table shows it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ModelCallShown {
    /// Turn.
    pub turn: u32,
    /// Attempts.
    pub attempts: u32,
    /// Whether the provider reported the usage.
    pub usage_reported: bool,
    /// Input tokens.
    pub input_tokens: u64,
    /// Output tokens.
    pub output_tokens: u64,
    /// How long it took.
    pub duration_ms: u64,
}

/// A run that answered.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ActorRan {
    /// The run as the command's JSON shows it.
    pub data: Value,
    /// `PROVIDER/MODEL` or the actor's name.
    pub actor: String,
    /// The run's id.
    pub run_id: String,
    /// The answer.
    pub answer: String,
    /// Why it stopped, for the user.
    pub stop: String,
    /// Whether it stopped at a limit (turns, tokens, steps): the answer may be incomplete.
    pub at_limit: bool,
    /// Model calls made.
    pub turns: u32,
    /// The tools offered.
    pub tools: Vec<String>,
    /// Whether every call reported its usage.
    pub usage_known: bool,
    /// Input tokens over all calls.
    pub input_tokens: u64,
    /// Output tokens over all calls.
    pub output_tokens: u64,
    /// Input tokens read from the provider's cache.
    pub cache_read_tokens: u64,
    /// Cost in US dollars, if known.
    pub cost_usd: Option<f64>,
    /// The sandbox's directory.
    pub sandbox_path: String,
    /// The resource it sandboxes (`scratch` for a fresh one).
    pub sandbox_resource: String,
    /// What it was made from (`None` for a fresh sandbox).
    pub sandbox_source: Option<String>,
    /// The tool calls.
    pub tool_calls: Vec<ToolCallShown>,
    /// `(status letter, path)` of each file changed in the sandbox.
    pub files_changed: Vec<(String, String)>,
    /// The model calls.
    pub model_calls: Vec<ModelCallShown>,
    /// Whether a reply was cut by the completion token limit.
    pub cut_reply: bool,
}

/// Reads an environment variable of the process doing the work (empty counts as unset).
fn env_var(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.is_empty())
}

/// The JSON of `actor run`'s report.
fn run_json(request: &OneShot, result: &OneShotResult, usage_known: bool) -> Value {
    let run = &result.run;
    json!({
        "run_id": result.run_id,
        "actor": result.actor,
        "provider": result.provider,
        "model": result.model,
        "answer": run.answer,
        "stop": run.stop,
        "turns": run.turns,
        "tools": result.tools,
        "tool_calls": run.tool_calls,
        "usage": result.usage,
        "usage_known": usage_known,
        "cost_usd": result.cost_usd,
        "model_calls": run.model_calls.iter().map(|c| json!({
            "turn": c.turn,
            "attempts": c.attempts,
            "input_tokens": c.usage_reported.then_some(c.usage.input_tokens),
            "output_tokens": c.usage_reported.then_some(c.usage.output_tokens),
            "cache_read_tokens": c.usage.cache_read_tokens,
            "cache_write_tokens": c.usage.cache_write_tokens,
            "usage_reported": c.usage_reported,
            "stop_reason": c.stop_reason,
            "duration_ms": c.duration_ms,
            "error": c.error.as_ref().map(|e| json!({"kind": e.0, "message": e.1})),
        })).collect::<Vec<_>>(),
        "sandbox": result.sandbox,
        "context": request.context,
        "load_context": request.load_context,
        "files_changed": result.files_changed,
    })
}

/// Runs the actor on `engine`, stopping when `interrupted` says so.
///
/// # Errors
/// [`ApiError::OneShot`] when the run cannot start (actor, provider, key, skill, sandbox);
/// `INVALID_INPUT` for a resource that cannot be sandboxed or a bad context name; a run that
/// failed, was cancelled or passed its deadline is recorded and is [`ApiError::Stopped`]
/// with the run's data.
pub fn run_actor(
    engine: &Engine,
    r: &ActorRunRequest,
    interrupted: &(dyn Fn() -> bool + Send + Sync),
) -> Result<ActorRan, ApiError> {
    let config = engine.config()?;
    let mut store = engine.store()?;
    let workspace = match r.resource.as_deref() {
        None => Workspace::Fresh,
        Some(input) => {
            let found = crate::registry::resources::find(&store, input)
                .map_err(|e| ApiError::Registry(Box::new(e.into())))?;
            Workspace::of_resource(&found).map_err(|m| ApiError::Failed {
                code: ErrorCode::InvalidInput,
                message: format!("--resource {input}: {m}"),
                detail: None,
                hints: vec![format!("agents resource show {}", found.name)],
                data: Box::new(Value::Null),
            })?
        }
    };
    if let Some(c) = &r.context {
        crate::actor_run::contexts::check_name(c).map_err(|e| ApiError::InvalidInput {
            message: format!("--context {e}"),
        })?;
    }
    let request = OneShot {
        actor: r.actor.clone(),
        prompt: r.prompt.clone(),
        temperature: r.temperature,
        skills: r.skills.clone(),
        workspace,
        options: ClientOptions::default(),
        unsafe_tools: r.unsafe_tools,
        context: r.context.clone(),
        load_context: r.load_context.clone(),
        context_dir: r.context_dir.clone(),
    };
    let result = run_model_actor(
        config,
        &mut store,
        engine.paths(),
        &request,
        env_var,
        interrupted,
    )
    .map_err(|e| ApiError::OneShot {
        actor: r.actor.clone(),
        error: Box::new(e),
    })?;
    let run = &result.run;
    let usage_known = crate::actors::accounting::usage_known(run);
    let data = run_json(&request, &result, usage_known);
    if matches!(
        run.stop,
        Stop::Failed { .. } | Stop::Cancelled | Stop::Deadline { .. }
    ) {
        return Err(ApiError::Stopped {
            stop: Box::new(run.stop.clone()),
            hints: vec![format!(
                "the sandbox is at {}; review it with agents plan diff {id}, open it with \
                 agents plan shell {id}",
                result.sandbox.path,
                id = result.run_id
            )],
            data: Box::new(data),
        });
    }
    Ok(ActorRan {
        data,
        actor: result.actor.clone(),
        run_id: result.run_id.to_string(),
        answer: run.answer.clone(),
        stop: run.stop.describe(),
        at_limit: matches!(
            run.stop,
            Stop::TurnLimit { .. } | Stop::TokenBudget { .. } | Stop::StepLimit { .. }
        ),
        turns: run.turns,
        tools: result.tools.clone(),
        usage_known,
        input_tokens: result.usage.input_tokens,
        output_tokens: result.usage.output_tokens,
        cache_read_tokens: result.usage.cache_read_tokens,
        cost_usd: result.cost_usd,
        sandbox_path: result.sandbox.path.clone(),
        sandbox_resource: result.sandbox.resource.clone(),
        sandbox_source: result.sandbox.source.clone(),
        tool_calls: run
            .tool_calls
            .iter()
            .map(|c| ToolCallShown {
                turn: c.turn,
                name: c.name.clone(),
                is_error: c.is_error,
                arguments: c.arguments.clone(),
            })
            .collect(),
        files_changed: result
            .files_changed
            .iter()
            .map(|f| (f.status.letter().to_string(), f.path.clone()))
            .collect(),
        model_calls: run
            .model_calls
            .iter()
            .map(|c| ModelCallShown {
                turn: c.turn,
                attempts: c.attempts,
                usage_reported: c.usage_reported,
                input_tokens: c.usage.input_tokens,
                output_tokens: c.usage.output_tokens,
                duration_ms: c.duration_ms,
            })
            .collect(),
        cut_reply: run
            .model_calls
            .iter()
            .any(|c| matches!(c.stop_reason.as_deref(), Some("length" | "max_tokens"))),
    })
}
