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

use super::{CliError, Context};
use crate::output::{Cell, Column, Element, Report, Tone};
use cleveragents_engine::api::run_views::{self, ActorRan, ActorRunRequest};

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
    let ActorRunArgs {
        temperature,
        skills,
        resource,
        output,
        unsafe_,
        context,
        context_dir,
        load_context,
        name,
        prompt,
    } = args;
    let request = ActorRunRequest {
        actor: name,
        prompt,
        temperature,
        skills,
        resource,
        unsafe_tools: unsafe_,
        context,
        // Relative to where the command was typed, wherever the actor runs.
        context_dir: context_dir.map(|p| std::path::absolute(&p).unwrap_or(p)),
        // A context file named relative to where the command was typed (a context's name
        // stays a name).
        load_context: load_context.map(|l| {
            let path = std::path::Path::new(&l);
            if path.is_relative() && path.is_file() {
                super::remote::absolute(path.to_path_buf())
                    .display()
                    .to_string()
            } else {
                l
            }
        }),
    };
    let ran = if ctx.server.is_some() {
        ctx.client()?.run_actor(request.clone())?
    } else {
        ctx.config()?;
        let guard = super::interrupt::Guard::new();
        let interrupted = move || guard.interrupted();
        run_views::run_actor(&ctx.registry_engine(), &request, &interrupted)?
    };
    report(ctx, &request, &ran, output)
}

/// The report of a run that answered: the answer, the run panel, the tables; the answer
/// written to `--output`.
fn report(
    ctx: &Context,
    request: &ActorRunRequest,
    ran: &ActorRan,
    output: Option<PathBuf>,
) -> Result<Report, CliError> {
    let cost = match ran.cost_usd {
        Some(c) => format!("${c:.6}"),
        None => "unknown".to_string(),
    };
    let tokens = |n: u64| {
        if ran.usage_known {
            n.to_string()
        } else {
            "unknown".to_string()
        }
    };
    let data = &ran.data;
    let where_hint = format!(
        "the sandbox is at {}; review it with {}, open it with {}",
        ran.sandbox_path,
        ctx.suggest(&format!("plan diff {}", ran.run_id)),
        ctx.suggest(&format!("plan shell {}", ran.run_id))
    );
    if let Some(path) = &output {
        std::fs::write(path, &ran.answer).map_err(|e| {
            CliError::new(
                "IO_ERROR",
                format!("cannot write the answer to {}: {e}", path.display()),
            )
            .data(data.clone())
        })?;
    }
    let mut report = Report::ok(
        "actor run",
        data,
        format!(
            "{} answered in {} turn(s): {} tokens in{}, {} out, cost {cost}",
            ran.actor,
            ran.turns,
            tokens(ran.input_tokens),
            match ran.cache_read_tokens {
                0 => String::new(),
                n => format!(" ({n} from the cache)"),
            },
            tokens(ran.output_tokens)
        ),
    )
    .with(Element::List {
        title: "Answer".into(),
        items: ran.answer.lines().map(str::to_string).collect(),
    })
    .with(Element::panel(
        "Actor Run",
        [
            ("Actor", Cell::new(ran.actor.clone(), Tone::Id)),
            ("Run ID", Cell::new(ran.run_id.clone(), Tone::Id)),
            ("Stop", ran.stop.clone().into()),
            ("Turns", ran.turns.to_string().into()),
            (
                "Tools",
                if ran.tools.is_empty() {
                    Cell::new("none", Tone::Dim)
                } else {
                    ran.tools.join(", ").into()
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
            ("Sandbox", ran.sandbox_path.clone().into()),
            (
                "Sandboxed",
                match &ran.sandbox_source {
                    Some(src) => format!("{} ({src})", ran.sandbox_resource).into(),
                    None => Cell::new("a fresh empty directory", Tone::Dim),
                },
            ),
        ],
    ));
    report = with_tables(report, ran);
    if !ran.usage_known {
        report = report.message(
            crate::output::Level::Warn,
            "the provider reported no token usage for some calls: their tokens and cost are unknown",
        );
    }
    if ran.cut_reply {
        report = report.message(
            crate::output::Level::Warn,
            "a reply was cut by the completion token limit; raise `options.max-tokens` of the actor",
        );
    }
    if ran.at_limit {
        report = report.message(
            crate::output::Level::Warn,
            format!("{}; the answer may be incomplete", ran.stop),
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

/// The tool calls, the files changed in the sandbox and the model calls of a run.
fn with_tables(report: Report, ran: &ActorRan) -> Report {
    report
        .with(Element::Table {
            title: "Tool Calls".into(),
            columns: vec![
                Column::right("Turn"),
                Column::left("Tool"),
                Column::left("Outcome"),
                Column::left("Arguments"),
            ],
            rows: ran
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
            rows: ran
                .files_changed
                .iter()
                .map(|(status, path)| vec![status.clone().into(), path.clone().into()])
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
            rows: ran
                .model_calls
                .iter()
                .map(|c| {
                    vec![
                        c.turn.to_string().into(),
                        c.attempts.to_string().into(),
                        known(c.usage_reported, c.input_tokens),
                        known(c.usage_reported, c.output_tokens),
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
