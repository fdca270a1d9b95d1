//! `agents actor run` (spec section 06): runs one model actor in isolation and prints the
//! answer, the tool calls and the usage.
//!
//! The actor (`PROVIDER/MODEL`) gets the built-in tools (or only those of `--skill`s) and works
//! in a fresh empty sandbox under the data directory, or in a sandbox of `--resource R`; the
//! engine runs every tool call through the tool runner ([`cleveragents_engine::actor_run`]).
//! The report says where the sandbox is and what changed in it. A registered LLM actor runs
//! with its model, prompt, skills, options and limits; a graph actor runs its graph. With
//! `--context NAME` the run continues that actor context and is saved to it;
//! `--load-context NAME|FILE` shows the run a context without changing it.

use std::path::PathBuf;

use serde_json::{Value, json};

use super::{CliError, Context, env_var};
use crate::output::{Cell, Column, Element, Report, Tone};
use cleveragents_engine::actor_run::{
    OneShot, OneShotError, OneShotResult, Workspace, run_model_actor,
};
use cleveragents_engine::actors::providers::{ClientOptions, ProviderError};
use cleveragents_engine::actors::runtime::Stop;

/// Options of `agents actor run`.
#[derive(Debug, clap::Args)]
pub struct ActorRunArgs {
    /// Sampling temperature
    #[arg(short = 't', long, value_name = "TEMP")]
    pub temperature: Option<f32>,
    /// Offer only this skill's tools (repeatable; default: every built-in tool)
    #[arg(long = "skill", value_name = "SKILL")]
    pub skills: Vec<String>,
    /// Work in a sandbox of this registered resource (default: a fresh empty sandbox)
    #[arg(long, value_name = "RESOURCE")]
    pub resource: Option<String>,
    /// Also write the answer to this file
    #[arg(short = 'o', long, value_name = "FILE")]
    pub output: Option<PathBuf>,
    /// Allow tools marked unsafe for this run
    #[arg(short = 'u', long = "unsafe")]
    pub unsafe_: bool,
    /// Continue this named actor context and save the run to it (created on first use)
    #[arg(long, value_name = "NAME")]
    pub context: Option<String>,
    /// Store the text files of this directory in the --context context and show them to the actor
    #[arg(long, value_name = "DIR", requires = "context")]
    pub context_dir: Option<PathBuf>,
    /// Show the actor this context's conversation (a name, or an exported context file) without changing it
    #[arg(long, value_name = "NAME|FILE")]
    pub load_context: Option<String>,
    /// The actor: PROVIDER/MODEL (e.g. openai/gpt-4.1, ollama/llama3) or a registered actor
    pub name: String,
    /// The prompt
    pub prompt: String,
}

/// Runs `agents actor run`.
///
/// # Errors
/// `NOT_SUPPORTED` for graph and built-in actors; `INVALID_INPUT` for a malformed name or a resource that
/// cannot be sandboxed; `NOT_FOUND` for an unknown provider, skill or resource; `PROVIDER_AUTH` (missing or rejected key),
/// `PROVIDER_UNAVAILABLE` (transient failure after retries), `PROVIDER_ERROR` (other
/// provider failures); `IO_ERROR` when `--output` cannot be written.
pub fn run(args: ActorRunArgs, ctx: &Context) -> Result<Report, CliError> {
    let config = ctx.config()?;
    let mut store = ctx.store()?;
    let workspace = match args.resource.as_deref() {
        None => Workspace::Fresh,
        Some(input) => {
            let r = cleveragents_engine::registry::resources::find(&store, input)?;
            Workspace::of_resource(&r).map_err(|m| {
                CliError::invalid_input(format!("--resource {input}: {m}"))
                    .hint(ctx.suggest(&format!("resource show {}", r.name)))
            })?
        }
    };
    if let Some(c) = &args.context {
        cleveragents_engine::actor_run::contexts::check_name(c)
            .map_err(|e| CliError::invalid_input(format!("--context {e}")))?;
    }
    let ActorRunArgs {
        temperature,
        skills,
        output,
        name,
        prompt,
        unsafe_,
        context,
        context_dir,
        load_context,
        ..
    } = args;
    let request = OneShot {
        actor: name.clone(),
        prompt,
        temperature,
        skills,
        workspace,
        options: ClientOptions::default(),
        unsafe_tools: unsafe_,
        context,
        load_context,
        context_dir,
    };
    let guard = super::interrupt::Guard::new();
    let interrupted = move || guard.interrupted();
    let result = run_model_actor(
        config,
        &mut store,
        &ctx.paths,
        &request,
        env_var,
        &interrupted,
    )
    .map_err(|e| start_error(e, &name))?;
    report(ctx, &request, &result, output)
}

/// The report of a finished run: the answer, the run panel, the tables; an error for a
/// failed or cancelled run (with the run's data); the answer written to `--output`.
fn report(
    ctx: &Context,
    request: &OneShot,
    result: &OneShotResult,
    output: Option<PathBuf>,
) -> Result<Report, CliError> {
    let run = &result.run;
    let cost = match result.cost_usd {
        Some(c) => format!("${c:.6}"),
        None => "unknown".to_string(),
    };
    let usage_known = cleveragents_engine::actors::accounting::usage_known(run);
    let tokens = |n: u64| {
        if usage_known {
            n.to_string()
        } else {
            "unknown".to_string()
        }
    };
    let data = run_json(request, result, usage_known);
    let where_hint = format!(
        "the sandbox is at {}; review it with {}",
        result.sandbox.path,
        ctx.suggest(&format!("plan diff {}", result.run_id))
    );
    if let Stop::Failed { error } = &run.stop {
        return Err(provider_error(error).data(data).hint(where_hint));
    }
    if let Stop::Cancelled = &run.stop {
        return Err(super::interrupt::cancelled().data(data).hint(where_hint));
    }
    if let Stop::Deadline { .. } = &run.stop {
        return Err(CliError::new("PROVIDER_UNAVAILABLE", run.stop.describe())
            .data(data)
            .hint("raise `providers.NAME.step_deadline_secs`, or ask for less in one run")
            .hint(where_hint));
    }
    if let Some(path) = &output {
        std::fs::write(path, &run.answer).map_err(|e| {
            CliError::new(
                "IO_ERROR",
                format!("cannot write the answer to {}: {e}", path.display()),
            )
            .data(data.clone())
        })?;
    }
    let mut report = Report::ok(
        "actor run",
        &data,
        format!(
            "{} answered in {} turn(s): {} tokens in{}, {} out, cost {cost}",
            result.actor,
            run.turns,
            tokens(result.usage.input_tokens),
            match result.usage.cache_read_tokens {
                0 => String::new(),
                n => format!(" ({n} from the cache)"),
            },
            tokens(result.usage.output_tokens)
        ),
    )
    .with(Element::List {
        title: "Answer".into(),
        items: run.answer.lines().map(str::to_string).collect(),
    })
    .with(Element::panel(
        "Actor Run",
        [
            ("Actor", Cell::new(result.actor.clone(), Tone::Id)),
            ("Run ID", Cell::new(result.run_id.to_string(), Tone::Id)),
            ("Stop", run.stop.describe().into()),
            ("Turns", run.turns.to_string().into()),
            (
                "Tools",
                if result.tools.is_empty() {
                    Cell::new("none", Tone::Dim)
                } else {
                    result.tools.join(", ").into()
                },
            ),
            (
                "Context",
                match (&request.context, &request.load_context) {
                    (Some(c), _) => c.clone().into(),
                    (None, Some(l)) => format!("{l} (loaded, not saved)").into(),
                    (None, None) => Cell::new("none", Tone::Dim),
                },
            ),
            ("Sandbox", result.sandbox.path.clone().into()),
            (
                "Sandboxed",
                match &result.sandbox.source {
                    Some(src) => format!("{} ({src})", result.sandbox.resource).into(),
                    None => Cell::new("a fresh empty directory", Tone::Dim),
                },
            ),
        ],
    ));
    report = with_tables(report, result);
    if !usage_known {
        report = report.message(
            crate::output::Level::Warn,
            "the provider reported no token usage for some calls: their tokens and cost are unknown",
        );
    }
    if run
        .model_calls
        .iter()
        .any(|c| matches!(c.stop_reason.as_deref(), Some("length" | "max_tokens")))
    {
        report = report.message(
            crate::output::Level::Warn,
            "a reply was cut by the completion token limit; raise `options.max-tokens` of the actor",
        );
    }
    if matches!(
        run.stop,
        Stop::TurnLimit { .. } | Stop::TokenBudget { .. } | Stop::StepLimit { .. }
    ) {
        report = report.message(
            crate::output::Level::Warn,
            format!("{}; the answer may be incomplete", run.stop.describe()),
        );
    }
    report = report.message(crate::output::Level::Info, where_hint);
    if let Some(path) = &output {
        report = report.message(
            crate::output::Level::Info,
            format!("Answer written to {}", path.display()),
        );
    }
    Ok(report)
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

/// The tool calls, the files changed in the sandbox and the model calls of a run.
fn with_tables(report: Report, result: &OneShotResult) -> Report {
    let run = &result.run;
    report
        .with(Element::Table {
            title: "Tool Calls".into(),
            columns: vec![
                Column::right("Turn"),
                Column::left("Tool"),
                Column::left("Outcome"),
                Column::left("Arguments"),
            ],
            rows: run
                .tool_calls
                .iter()
                .map(|c| {
                    vec![
                        c.turn.to_string().into(),
                        c.name.clone().into(),
                        if c.is_error {
                            Cell::new("error", Tone::Bad)
                        } else {
                            Cell::new("ok", Tone::Good)
                        },
                        super::view::clip(&c.arguments, 60).into(),
                    ]
                })
                .collect(),
            empty: "No tool calls.".into(),
        })
        .with(Element::Table {
            title: "Files Changed".into(),
            columns: vec![Column::left("Status"), Column::left("Path")],
            rows: result
                .files_changed
                .iter()
                .map(|f| vec![f.status.letter().into(), f.path.clone().into()])
                .collect(),
            empty: "No files changed in the sandbox.".into(),
        })
        .with(Element::Table {
            title: "Usage".into(),
            columns: vec![
                Column::right("Turn"),
                Column::right("Attempts"),
                Column::right("Input Tokens"),
                Column::right("Output Tokens"),
                Column::right("Duration (ms)"),
            ],
            rows: run
                .model_calls
                .iter()
                .map(|c| {
                    vec![
                        c.turn.to_string().into(),
                        c.attempts.to_string().into(),
                        known(c.usage_reported, c.usage.input_tokens),
                        known(c.usage_reported, c.usage.output_tokens),
                        c.duration_ms.to_string().into(),
                    ]
                })
                .collect(),
            empty: "No model calls.".into(),
        })
}

/// A token count, or `unknown` (dim) when the provider reported none.
fn known(reported: bool, n: u64) -> Cell {
    if reported {
        n.to_string().into()
    } else {
        Cell::new("unknown", Tone::Dim)
    }
}

/// A model run that stopped without its answer: why, with the run's data and `hints` after
/// the stop's own.
pub(crate) fn stopped_error(stop: &Stop, hints: Vec<String>, data: Value) -> CliError {
    let err = match stop {
        Stop::Failed { error } => provider_error(error).data(data),
        Stop::Cancelled => super::interrupt::cancelled().data(data),
        other => CliError::new("PROVIDER_UNAVAILABLE", other.describe())
            .data(data)
            .hint("raise `providers.NAME.step_deadline_secs`, or ask for less in one run"),
    };
    hints.into_iter().fold(err, CliError::hint)
}

/// Errors before the first model call.
pub(crate) fn start_error(e: OneShotError, name: &str) -> CliError {
    match e {
        OneShotError::Provider(ProviderError::UnknownProvider { .. }) if !name.contains('/') => {
            provider_error(&ProviderError::BadModelName { name: name.into() })
        }
        OneShotError::Provider(ProviderError::UnknownProvider { name: ns, known }) => {
            CliError::new(
                "NOT_FOUND",
                format!(
                    "actor `{name}` uses provider `{ns}`, which is not configured (configured providers: {known})"
                ),
            )
            .hint(format!(
                "configure it: {}",
                format!("agents config set providers.{ns}.kind openai")
            ))
            .hint(format!("agents actor show {name}"))
        }
        OneShotError::Provider(p) => provider_error(&p),
        OneShotError::Skill(s) => s.into(),
        OneShotError::CustomSkill(s) => s.into(),
        OneShotError::Tools(m) => CliError::new("TOOL_FAILED", m),
        OneShotError::Actor(a) => a.into(),
        OneShotError::NotSupported(m) => CliError::new("NOT_SUPPORTED", m),
        OneShotError::Sandbox(s) => s.into(),
        OneShotError::Runtime(r) => CliError::invalid_input(r.to_string()),
        OneShotError::Store(s) => s.into(),
        OneShotError::Io(io) => CliError::new("IO_ERROR", io.to_string()),
        OneShotError::Context(c) => super::actor_context::context_error(c),
    }
}

/// A provider failure, with what to do about it.
pub(crate) fn provider_error(e: &ProviderError) -> CliError {
    let message = e.to_string();
    match e {
        ProviderError::BadModelName { .. } | ProviderError::Invalid { .. } => {
            CliError::invalid_input(message)
        }
        ProviderError::MissingKey { env, .. } => {
            CliError::new("PROVIDER_AUTH", message).hint(format!("export {env}=<your key>"))
        }
        ProviderError::Auth { .. } => CliError::new("PROVIDER_AUTH", message),
        ProviderError::Transient { .. } => CliError::new("PROVIDER_UNAVAILABLE", message)
            .hint("try again later; the provider may be overloaded or unreachable"),
        ProviderError::UnknownProvider { .. } => CliError::new("NOT_FOUND", message),
        ProviderError::Config { provider, .. } | ProviderError::NotFound { provider, .. } => {
            CliError::new("PROVIDER_ERROR", message)
                .hint(format!("agents config list providers.{provider}"))
        }
        _ => CliError::new("PROVIDER_ERROR", message),
    }
}
