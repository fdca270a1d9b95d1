//! `agents actor run` (spec section 06): runs one model actor in isolation and prints the
//! answer, the tool calls and the usage.
//!
//! This build runs model actors (`PROVIDER/MODEL`) as a plain conversation: no tools are
//! offered, so no sandbox is made. `--skill` and `--resource` say "not yet supported" (they
//! arrive with the tool runner and sandboxes), as do custom actors (the actor registry).

use std::path::PathBuf;

use serde_json::json;

use super::{CliError, Context, env_var};
use crate::engine::actors::oneshot::{OneShot, OneShotError, run_model_actor};
use crate::engine::actors::providers::{ClientOptions, ProviderError};
use crate::engine::actors::runtime::Stop;
use crate::output::{Cell, Column, Element, Report, Tone};

/// Options of `agents actor run`.
#[derive(Debug, clap::Args)]
pub struct ActorRunArgs {
    /// Sampling temperature
    #[arg(short = 't', long, value_name = "TEMP")]
    pub temperature: Option<f32>,
    /// Attach a skill for this run (not yet supported)
    #[arg(long = "skill", value_name = "SKILL")]
    pub skills: Vec<String>,
    /// Run against a sandbox of this resource (not yet supported)
    #[arg(long, value_name = "RESOURCE")]
    pub resource: Option<String>,
    /// Also write the answer to this file
    #[arg(short = 'o', long, value_name = "FILE")]
    pub output: Option<PathBuf>,
    /// The actor: PROVIDER/MODEL, e.g. openai/gpt-4.1 or ollama/llama3
    pub name: String,
    /// The prompt
    pub prompt: String,
}

/// Runs `agents actor run`.
///
/// # Errors
/// `NOT_SUPPORTED` for skills, resources and custom actors; `INVALID_INPUT` for a malformed
/// name; `NOT_FOUND` for an unknown provider; `PROVIDER_AUTH` (missing or rejected key),
/// `PROVIDER_UNAVAILABLE` (transient failure after retries), `PROVIDER_ERROR` (other
/// provider failures); `IO_ERROR` when `--output` cannot be written.
pub fn run(args: ActorRunArgs, ctx: &Context) -> Result<Report, CliError> {
    let ActorRunArgs {
        temperature,
        skills,
        resource,
        output,
        name,
        prompt,
    } = args;
    run_actor(
        ctx,
        temperature,
        &skills,
        resource.as_deref(),
        output,
        name,
        prompt,
    )
}

fn run_actor(
    ctx: &Context,
    temperature: Option<f32>,
    skills: &[String],
    resource: Option<&str>,
    output: Option<PathBuf>,
    name: String,
    prompt: String,
) -> Result<Report, CliError> {
    if !skills.is_empty() {
        return Err(CliError::new(
            "NOT_SUPPORTED",
            "`--skill` is not yet supported: actor run offers no tools until the tool runner is built",
        )
        .hint(ctx.suggest(&format!("actor run {name} PROMPT"))));
    }
    if resource.is_some() {
        return Err(CliError::new(
            "NOT_SUPPORTED",
            "`--resource` is not yet supported: actor run uses no sandbox until sandboxes are built",
        ));
    }
    let config = ctx.config()?;
    let mut store = ctx.store()?;
    let request = OneShot {
        actor: name.clone(),
        prompt,
        temperature,
        options: ClientOptions::default(),
    };
    let result = run_model_actor(config, &mut store, &request, env_var)
        .map_err(|e| start_error(e, &name, ctx))?;
    let run = &result.run;
    let cost = match result.cost_usd {
        Some(c) => format!("${c:.6}"),
        None => "unknown".to_string(),
    };
    let data = json!({
        "run_id": result.run_id,
        "actor": result.actor,
        "provider": result.provider,
        "model": result.model,
        "answer": run.answer,
        "stop": run.stop,
        "turns": run.turns,
        "tools": [],
        "tool_calls": run.tool_calls,
        "usage": result.usage,
        "cost_usd": result.cost_usd,
        "model_calls": run.model_calls.iter().map(|c| json!({
            "turn": c.turn,
            "attempts": c.attempts,
            "input_tokens": c.usage.input_tokens,
            "output_tokens": c.usage.output_tokens,
            "usage_reported": c.usage_reported,
            "duration_ms": c.duration_ms,
            "error": c.error.as_ref().map(|e| json!({"kind": e.0, "message": e.1})),
        })).collect::<Vec<_>>(),
        "sandbox": null,
    });
    if let Stop::Failed { error } = &run.stop {
        return Err(provider_error(error, ctx).data(data));
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
            "{} answered in {} turn(s): {} tokens in, {} out, cost {cost}",
            result.actor, run.turns, result.usage.input_tokens, result.usage.output_tokens
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
                Cell::new("none (no tools are offered yet)", Tone::Dim),
            ),
            (
                "Sandbox",
                Cell::new("none (no tools, so no sandbox)", Tone::Dim),
            ),
        ],
    ))
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
                    c.usage.input_tokens.to_string().into(),
                    c.usage.output_tokens.to_string().into(),
                    c.duration_ms.to_string().into(),
                ]
            })
            .collect(),
        empty: "No model calls.".into(),
    });
    if let Some(path) = &output {
        report = report.message(
            crate::output::Level::Info,
            format!("Answer written to {}", path.display()),
        );
    }
    Ok(report)
}

/// Errors before the first model call.
fn start_error(e: OneShotError, name: &str, ctx: &Context) -> CliError {
    match e {
        OneShotError::Provider(ProviderError::UnknownProvider { .. }) if !name.contains('/') => {
            provider_error(&ProviderError::BadModelName { name: name.into() }, ctx)
        }
        OneShotError::Provider(ProviderError::UnknownProvider { name: ns, known }) => {
            CliError::new(
                "NOT_SUPPORTED",
                format!(
                    "`{name}` is not a model actor (no provider `{ns}`; configured providers: {known}); running custom actors is not yet supported"
                ),
            )
            .hint(format!("run a model actor: {}", ctx.suggest("actor run openai/gpt-4.1 PROMPT")))
            .hint(format!(
                "or configure a provider named `{ns}`: {}",
                ctx.suggest(&format!("config set providers.{ns}.kind openai"))
            ))
        }
        OneShotError::Provider(p) => provider_error(&p, ctx),
        OneShotError::Runtime(r) => CliError::invalid_input(r.to_string()),
        OneShotError::Store(s) => s.into(),
        OneShotError::Io(io) => CliError::new("IO_ERROR", io.to_string()),
    }
}

/// A provider failure, with what to do about it.
fn provider_error(e: &ProviderError, ctx: &Context) -> CliError {
    let message = e.to_string();
    match e {
        ProviderError::BadModelName { .. } => CliError::invalid_input(message),
        ProviderError::MissingKey { env, .. } => {
            CliError::new("PROVIDER_AUTH", message).hint(format!("export {env}=<your key>"))
        }
        ProviderError::Auth { .. } => CliError::new("PROVIDER_AUTH", message),
        ProviderError::Transient { .. } => CliError::new("PROVIDER_UNAVAILABLE", message)
            .hint("try again later; the provider may be overloaded or unreachable"),
        ProviderError::UnknownProvider { .. } => CliError::new("NOT_FOUND", message),
        ProviderError::Config { provider, .. } | ProviderError::NotFound { provider, .. } => {
            CliError::new("PROVIDER_ERROR", message)
                .hint(ctx.suggest(&format!("config list providers.{provider}")))
        }
        _ => CliError::new("PROVIDER_ERROR", message),
    }
}
