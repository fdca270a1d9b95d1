//! `agents session create|list|show|delete|export|import|tell` (spec sections 06 and 20).
//!
//! Sessions are stored in the database with stable ids, and go through the engine's protocol
//! ([`cleveragents_engine::api::session_views`]). `tell`
//! runs the orchestrator, whose tools run `agents` commands in-process through
//! [`dispatch`](super::dispatch) exactly as typed ones, with `--format json`.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use clap::{Parser, Subcommand};
use serde_json::{Value, json};

use super::{CliError, Context, confirm::confirm, view};
use crate::output::{self, Cell, Column, Element, Format, Outcome, Report, Terminal, Tone};
use cleveragents_engine::api;
use cleveragents_engine::api::session_views::{
    self as api_sessions, CommandResult, Commands, DEFAULT_MAX_HISTORY, EXPORT_SCHEMA_VERSION,
    ExecutedCommand, Role, Session, SessionDetail, SessionMessage, SessionSummary, TellRequest,
    Told,
};
use cleveragents_engine::config::{Config, FlagValues};
use cleveragents_engine::paths::Paths;

/// `agents session ...`
#[derive(Debug, Subcommand)]
pub enum SessionCommand {
    /// Create a session for `session tell` (stable id, stored in the database)
    Create {
        /// Orchestrator actor (default: builtin/orchestrator over the default model)
        #[arg(long, value_name = "ACTOR")]
        actor: Option<String>,
        /// A unique name to refer to the session by
        #[arg(long, value_name = "NAME")]
        name: Option<String>,
        /// Automation profile of the plans the orchestrator creates (default: the configured one)
        #[arg(long, value_name = "PROFILE")]
        automation_profile: Option<String>,
        /// Turns the orchestrator sees in full; older ones reach it as a recorded summary
        #[arg(long, value_name = "TURNS", default_value_t = DEFAULT_MAX_HISTORY, value_parser = clap::value_parser!(u32).range(1..))]
        max_history: u32,
    },
    /// List sessions
    List,
    /// Show a session: summary, recent messages, commands executed, linked plans, usage
    Show {
        /// Session id, unique prefix or name
        session: String,
    },
    /// Delete a session and its stored conversation (its plans stay)
    Delete {
        /// Do not ask for confirmation
        #[arg(short, long)]
        yes: bool,
        /// Session id, unique prefix or name
        session: String,
    },
    /// Export a session as portable JSON (schema version, sha256 checksum)
    Export {
        /// Output file (default: SESSION_ID.json in the current directory)
        #[arg(short, long, value_name = "FILE")]
        output: Option<PathBuf>,
        /// Session id, unique prefix or name
        session: String,
    },
    /// Import an exported session under a new id (checksum and schema checked); it runs
    /// under your default automation profile unless --keep-profile
    Import {
        /// The exported JSON file
        #[arg(short, long, value_name = "FILE")]
        input: PathBuf,
        /// Keep the automation profile the file names instead of your default (the file can
        /// be edited: its checksum detects accidents, not tampering)
        #[arg(long)]
        keep_profile: bool,
    },
    /// Ask the orchestrator to do something; it runs `agents` commands and shows them
    Tell(TellArgs),
}

/// Options of `agents session tell`.
#[derive(Debug, clap::Args)]
pub struct TellArgs {
    /// Session id, unique prefix or name
    #[arg(long, value_name = "SESSION_ID")]
    pub session: String,
    /// Use this actor for this request and the next ones
    #[arg(long, value_name = "ACTOR")]
    pub actor: Option<String>,
    /// Print the answer as it arrives (json: events as JSON Lines, then the envelope)
    #[arg(long)]
    pub stream: bool,
    /// The request
    pub prompt: String,
}

impl SessionCommand {
    /// Whether the subcommand can run against a server (`--server`): all of them. Through
    /// a server, `tell` runs its model calls and commands there, and `export` / `import`
    /// write and read the file here.
    pub fn served_remotely(&self) -> bool {
        true
    }

    /// The subcommand name.
    pub fn name(&self) -> &'static str {
        match self {
            SessionCommand::Create { .. } => "create",
            SessionCommand::List => "list",
            SessionCommand::Show { .. } => "show",
            SessionCommand::Delete { .. } => "delete",
            SessionCommand::Export { .. } => "export",
            SessionCommand::Import { .. } => "import",
            SessionCommand::Tell(_) => "tell",
        }
    }

    /// Whether `--stream` was given (JSON Lines in the json format).
    pub fn streams(&self) -> bool {
        matches!(self, SessionCommand::Tell(a) if a.stream)
    }
}

/// Runs a session subcommand.
///
/// # Errors
/// Unknown sessions (`NOT_FOUND`), taken names (`CONFLICT`), unresolvable actors and
/// profiles, export files that fail their checks (`INVALID_INPUT`), provider failures.
pub fn run(command: SessionCommand, ctx: &Context) -> Result<Report, CliError> {
    match command {
        SessionCommand::Create {
            actor,
            name,
            automation_profile,
            max_history,
        } => create(ctx, actor, name, automation_profile, max_history),
        SessionCommand::List => list(ctx),
        SessionCommand::Show { session } => show(ctx, &session),
        SessionCommand::Delete { yes, session } => delete(ctx, &session, yes),
        SessionCommand::Export { output, session } => export_cmd(ctx, &session, output),
        SessionCommand::Import {
            input,
            keep_profile,
        } => import(ctx, &input, keep_profile),
        SessionCommand::Tell(args) => tell(ctx, args),
    }
}

fn session_json(s: &Session) -> Value {
    json!({
        "session_id": s.session_id,
        "name": s.name,
        "actor": s.actor,
        "automation_profile": s.automation_profile,
        "max_history": s.max_history,
        "summary": s.summary,
        "summarized_turns": s.summarized_turns,
        "imported_from": s.imported_from,
        "created_at": s.created_at.to_string(),
        "updated_at": s.updated_at.to_string(),
    })
}

fn create(
    ctx: &Context,
    actor: Option<String>,
    name: Option<String>,
    profile: Option<String>,
    max_history: u32,
) -> Result<Report, CliError> {
    if ctx.server.is_none() {
        // An unusable config.toml is reported as the command line words it.
        ctx.config()?;
    }
    let created = ctx
        .client()?
        .create_session(actor, name, profile, max_history)?;
    let s = &created.session;
    let a = &created.actor;
    let actor_details = match (&a.model, &a.unavailable) {
        (Some(model), _) => Element::panel(
            "Actor Details",
            [
                ("Actor", view::id(a.name.clone())),
                ("Model", model.clone().into()),
                (
                    "Prompt",
                    if a.builtin_prompt {
                        "builtin/orchestrator".into()
                    } else {
                        "the actor's own".into()
                    },
                ),
            ],
        ),
        (None, why) => Element::panel(
            "Actor Details",
            [
                ("Actor", view::id(a.name.clone())),
                (
                    "Model",
                    Cell::new(
                        format!("none yet: {}", why.as_deref().unwrap_or_default()),
                        Tone::Warn,
                    ),
                ),
            ],
        ),
    };
    Ok(Report::ok(
        "session create",
        json!({"session": session_json(s)}),
        "Session created",
    )
    .with(Element::panel(
        "Session",
        [
            ("ID", view::id(s.session_id.to_string())),
            ("Name", view::or(s.name.as_deref(), "(none)")),
            ("Actor", view::id(s.actor.clone())),
            ("Created", view::time(&s.created_at).into()),
        ],
    ))
    .with(Element::panel(
        "Settings",
        [
            ("Automation", s.automation_profile.clone()),
            (
                "Apply Without Review",
                view::yes_no(created.auto_apply).into(),
            ),
            ("Persistence", "database (every turn is stored)".into()),
            ("Max History", format!("{} turns", s.max_history)),
        ],
    ))
    .with(actor_details))
}

fn list(ctx: &Context) -> Result<Report, CliError> {
    let all = ctx.client()?.sessions()?;
    let n = all.len();
    let rows = all
        .iter()
        .map(|r| {
            vec![
                view::id(r.session.session_id.short()),
                view::or(r.session.name.as_deref(), ""),
                r.session.actor.clone().into(),
                Cell::from(r.messages.to_string()),
                view::time(&r.session.updated_at).into(),
            ]
        })
        .collect();
    let label = |r: &SessionSummary| {
        r.session
            .name
            .clone()
            .unwrap_or_else(|| r.session.session_id.short())
    };
    let total: u32 = all.iter().map(|r| r.messages).sum();
    let bytes: u64 = all.iter().map(|r| r.bytes).sum();
    Ok(Report::ok(
        "session list",
        json!({
            "sessions": all.iter().map(|r| {
                let mut v = session_json(&r.session);
                v["messages"] = json!(r.messages);
                v["size_bytes"] = json!(r.bytes);
                v
            }).collect::<Vec<_>>(),
        }),
        format!("{n} session{} listed", if n == 1 { "" } else { "s" }),
    )
    .with(Element::Table {
        title: "Sessions".into(),
        columns: vec![
            Column::left("ID"),
            Column::left("Name"),
            Column::left("Actor"),
            Column::right("Messages"),
            Column::left("Updated"),
        ],
        rows,
        empty: "No sessions yet. Create one with `agents session create`.".into(),
    })
    .with(Element::panel(
        "Summary",
        [
            ("Total", n.to_string()),
            (
                "Most Recent",
                all.first().map(label).unwrap_or_else(|| "-".into()),
            ),
            (
                "Oldest",
                all.last().map(label).unwrap_or_else(|| "-".into()),
            ),
            ("Total Messages", total.to_string()),
            ("Storage", human_bytes(bytes)),
        ],
    )))
}

fn human_bytes(n: u64) -> String {
    if n < 1024 {
        format!("{n} B")
    } else {
        format!("{} KB", n.div_ceil(1024))
    }
}

fn cost_text(c: Option<f64>) -> String {
    c.map(|c| format!("${c:.6}"))
        .unwrap_or_else(|| "unknown (no prices configured)".into())
}

fn clip(text: &str, max: usize) -> String {
    let one: String = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if one.chars().count() <= max {
        one
    } else {
        format!("{}...", one.chars().take(max).collect::<String>())
    }
}

fn detail_json(d: &SessionDetail) -> Value {
    let t = d.totals();
    json!({
        "session": session_json(&d.session),
        "messages": d.messages,
        "plans": d.plans,
        "usage": {"input_tokens": t.input_tokens, "output_tokens": t.output_tokens, "cost_usd": t.cost_usd},
    })
}

fn show(ctx: &Context, input: &str) -> Result<Report, CliError> {
    let shown = ctx.client()?.session(input)?;
    let d = &shown.detail;
    let s = &d.session;
    let t = d.totals();
    let mut data = detail_json(d);
    let mut plan_rows = Vec::new();
    let mut plans_json = Vec::new();
    for (p, plan) in d.plans.iter().zip(&shown.plan_states) {
        let (phase, state) = plan
            .clone()
            .unwrap_or_else(|| ("-".into(), "not in this database".into()));
        plan_rows.push(vec![
            view::id(p.plan_id.to_string()),
            phase.clone().into(),
            state.clone().into(),
        ]);
        plans_json.push(json!({"plan_id": p.plan_id, "turn": p.turn, "phase": plan.as_ref().map(|_| &phase), "state": plan.as_ref().map(|_| &state)}));
    }
    data["plans"] = json!(plans_json);
    let recent: Vec<&SessionMessage> = d.messages.iter().rev().take(10).rev().collect();
    let commands: Vec<String> = d
        .messages
        .iter()
        .flat_map(|m| {
            m.commands.iter().map(move |c| {
                format!(
                    "turn {}: {}{}",
                    m.turn,
                    c.command,
                    if c.ok {
                        String::new()
                    } else {
                        format!("  ({}: {})", c.status, clip(&c.summary, 100))
                    }
                )
            })
        })
        .collect();
    let mut report =
        Report::ok("session show", data, "Session details loaded").with(Element::panel(
            "Session Summary",
            [
                ("ID", view::id(s.session_id.to_string())),
                ("Name", view::or(s.name.as_deref(), "(none)")),
                ("Actor", view::id(s.actor.clone())),
                ("Messages", d.messages.len().to_string().into()),
                ("Turns", d.turns().to_string().into()),
                ("Created", view::time(&s.created_at).into()),
                ("Updated", view::time(&s.updated_at).into()),
                ("Automation", s.automation_profile.clone().into()),
                ("Max History", format!("{} turns", s.max_history).into()),
                (
                    "Imported From",
                    view::or(s.imported_from.as_deref(), "(not imported)"),
                ),
            ],
        ));
    if let Some(summary) = &s.summary {
        report = report.with(Element::List {
            title: format!("History Summary ({} older turns)", s.summarized_turns),
            items: summary.lines().skip(1).map(str::to_string).collect(),
        });
    }
    report = report
        .with(Element::Table {
            title: "Recent Messages".into(),
            columns: vec![
                Column::right("Turn"),
                Column::left("Role"),
                Column::left("Message"),
            ],
            rows: recent
                .iter()
                .map(|m| {
                    vec![
                        Cell::from(m.turn.to_string()),
                        Cell::new(
                            m.role.as_str(),
                            if m.role == Role::User {
                                Tone::Id
                            } else {
                                Tone::Normal
                            },
                        ),
                        clip(&m.content, 70).into(),
                    ]
                })
                .collect(),
            empty: "No messages yet.".into(),
        })
        .with(Element::List {
            title: "Commands Executed".into(),
            items: if commands.is_empty() {
                vec!["(none)".into()]
            } else {
                commands
            },
        })
        .with(Element::Table {
            title: "Linked Plans".into(),
            columns: ["Plan ID", "Phase", "State"].map(Column::left).into(),
            rows: plan_rows,
            empty: "No plans.".into(),
        })
        .with(Element::panel(
            "Token Usage",
            [
                ("Input Tokens", t.input_tokens.to_string()),
                ("Output Tokens", t.output_tokens.to_string()),
                ("Estimated Cost", cost_text(t.cost_usd)),
            ],
        ));
    Ok(report)
}

fn delete(ctx: &Context, input: &str, yes: bool) -> Result<Report, CliError> {
    let client = ctx.client()?;
    let id = client.session(input)?.detail.session.session_id;
    confirm(
        &format!("Delete session {id}?"),
        yes,
        &ctx.terminal,
        &ctx.suggest(&format!("session delete --yes {id}")),
    )?;
    let d = client.delete_session(&id.to_string())?;
    Ok(Report::ok(
        "session delete",
        json!({
            "session_id": d.session_id,
            "messages_removed": d.messages_removed,
            "plans_unlinked": d.plans_unlinked,
            "files_removed": d.files_removed,
        }),
        "Session deleted",
    )
    .with(Element::panel(
        "Deletion Summary",
        [
            ("Session", view::id(d.session_id.clone())),
            ("Messages", format!("{} removed", d.messages_removed).into()),
            ("Storage", format!("{} freed", human_bytes(d.bytes)).into()),
            (
                "Plans Unlinked",
                format!("{} (the plans stay)", d.plans_unlinked).into(),
            ),
        ],
    )))
}

fn export_cmd(ctx: &Context, input: &str, output: Option<PathBuf>) -> Result<Report, CliError> {
    let e = ctx.client()?.export_session(input)?;
    let path = match output {
        Some(p) => p,
        None => {
            let p = PathBuf::from(format!("{}.json", e.session_id));
            if p.exists() {
                return Err(
                    CliError::new("CONFLICT", format!("{} already exists", p.display())).hint(
                        ctx.suggest(&format!("session export --output FILE {}", e.session_id)),
                    ),
                );
            }
            p
        }
    };
    let text = &e.text;
    api_sessions::replace_file(&path, text.as_bytes()).map_err(|err| {
        CliError::new(
            "IO_ERROR",
            format!("cannot write {}: {err}", path.display()),
        )
        .hint("pass --output FILE in a writable directory")
    })?;
    Ok(Report::ok(
        "session export",
        json!({
            "session_id": e.session_id,
            "output": path.display().to_string(),
            "messages": e.messages,
            "plans": e.plans,
            "size_bytes": text.len(),
            "schema_version": e.schema_version,
            "checksum": e.checksum,
        }),
        "Export completed",
    )
    .with(Element::panel(
        "Session Export",
        [
            ("Session", view::id(e.session_id.clone())),
            ("Output", path.display().to_string().into()),
            ("Messages", e.messages.to_string().into()),
            ("Plan References", e.plans.to_string().into()),
            ("Size", human_bytes(text.len() as u64).into()),
            ("Format", "JSON".into()),
            ("Schema Version", format!("v{EXPORT_SCHEMA_VERSION}").into()),
        ],
    ))
    .with(Element::panel(
        "Integrity",
        [("Checksum", e.checksum.clone()), ("Encrypted", "no".into())],
    )))
}

fn import(ctx: &Context, input: &Path, keep_profile: bool) -> Result<Report, CliError> {
    let text = api::read_regular_text(input, api::IMPORT_MAX_BYTES).map_err(|e| {
        let code = if input.exists() {
            "INVALID_INPUT"
        } else {
            "NOT_FOUND"
        };
        CliError::new(code, format!("cannot read {}: {e}", input.display()))
    })?;
    let imported =
        ctx.client()?
            .import_session(&input.display().to_string(), &text, keep_profile)?;
    let actor_ref = &imported.actor_ref;
    let profile = &imported.automation_profile_ref;
    let found = imported.plans_found;
    let mut report = Report::ok(
        "session import",
        json!({
            "session_id": imported.session_id,
            "imported_from": imported.original_id,
            "input": input.display().to_string(),
            "messages": imported.messages,
            "plans": imported.plans,
            "plans_found": found,
            "schema_version": imported.schema_version,
            "checksum": imported.checksum,
            "actor_ref": actor_ref,
            "automation_profile_ref": profile,
        }),
        "Import completed",
    )
    .with(Element::panel(
        "Session Import",
        [
            ("Input", input.display().to_string().into()),
            ("Session ID", view::id(imported.session_id.clone())),
            ("Imported From", imported.original_id.clone().into()),
            ("Messages", imported.messages.to_string().into()),
            ("Schema", format!("v{}", imported.schema_version).into()),
        ],
    ))
    .with(Element::panel(
        "Validation",
        [
            ("Checksum", "verified".into()),
            ("Schema", "compatible".into()),
            (
                "Actor Ref",
                if actor_ref == "resolved" {
                    Cell::from(actor_ref.clone())
                } else {
                    Cell::new(actor_ref.clone(), Tone::Warn)
                },
            ),
            ("Automation Profile", Cell::from(profile.clone())),
            (
                "Plan References",
                format!("{} ({found} in this database)", imported.plans).into(),
            ),
        ],
    ))
    .with(Element::panel(
        "Merge",
        [("Existing", "none"), ("Strategy", "create new")],
    ));
    if let Some(w) = &imported.profile_replaced {
        report = report.message(crate::output::Level::Warn, w.clone());
    }
    if actor_ref != "resolved" {
        report = report.message(
            crate::output::Level::Warn,
            format!(
                "the session's actor {} does not resolve here; pass --actor to `session tell`",
                imported.actor
            ),
        );
    }
    Ok(report)
}

/// Runs the orchestrator's commands in-process, as `agents --format json ARGS` would.
struct InProcess {
    paths: Paths,
    config: Result<Config, CliError>,
    repeat_args: Vec<String>,
}

impl Commands for InProcess {
    fn run(&self, argv: &[String]) -> CommandResult {
        let terminal = Terminal {
            stdout_tty: false,
            stderr_tty: false,
            stdin_tty: false,
            no_color: true,
        };
        let words = std::iter::once("agents".to_string()).chain(argv.iter().cloned());
        let command = match super::Cli::try_parse_from(words) {
            Ok(super::Cli {
                command: Some(c), ..
            }) => c,
            Ok(_) => return usage("no command given"),
            Err(e) => return usage(&e.to_string()),
        };
        if matches!(
            command,
            super::Command::Session(_) | super::Command::Tui(_) | super::Command::Server(_)
        ) {
            return usage("the orchestrator cannot run session, tui or server commands");
        }
        let path = command.path();
        let ctx = Context {
            paths: self.paths.clone(),
            config: self.config.clone(),
            flags: FlagValues {
                format: Some("json".into()),
                verbose: 0,
            },
            format: Format::Json,
            terminal,
            repeat_args: self.repeat_args.clone(),
            server: None,
            server_mode: None,
        };
        let outcome = match super::dispatch(command, &ctx) {
            Ok(report) => Outcome::Done(report),
            Err(e) => Outcome::Failed {
                command: path,
                error: *e.body,
                data: e.data,
            },
        };
        let exit_code = i32::from(outcome.exit().code());
        let mut buf = Vec::new();
        let _ = output::emit(&outcome, Format::Json, &terminal, Duration::ZERO, &mut buf);
        let clean = api_sessions::redact_bytes(&buf);
        CommandResult {
            exit_code,
            envelope: serde_json::from_slice(&clean).unwrap_or(Value::Null),
        }
    }
}

fn usage(message: &str) -> CommandResult {
    CommandResult {
        exit_code: 2,
        envelope: json!({"status": "error", "error": {"code": "USAGE", "message": message}}),
    }
}

/// Prints streamed progress: text as it arrives (human formats) or one JSON line per event
/// (each event is JSON with its `event` kind).
fn on_event(format: Format) -> impl Fn(Value) + Send + Sync {
    move |mut v| {
        use std::io::Write;
        if format == Format::Json {
            if let Some(obj) = v.as_object_mut() {
                let kind = obj.remove("event").unwrap_or(Value::Null);
                obj.insert("type".into(), kind);
            }
            let _ = output::stream_line(&v);
            return;
        }
        let text = match v["event"].as_str() {
            Some("text_delta") => v["text"].as_str().unwrap_or_default().to_string(),
            Some("tool_call_started") => {
                format!("\n[tool] {}\n", v["name"].as_str().unwrap_or_default())
            }
            _ => return,
        };
        let mut out = std::io::stdout().lock();
        let _ = out.write_all(&api_sessions::redact_bytes(text.as_bytes()));
        let _ = out.flush();
    }
}

/// Writes streamed text to stdout at once, redacted (a closed pipe is ignored here and
/// reported when the final report is written).
fn print_stream(text: &str) {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    let _ = out.write_all(&api_sessions::redact_bytes(text.as_bytes()));
    let _ = out.flush();
}

/// The runner of the orchestrator's commands for an engine of this command line: each runs
/// in process as `agents --format json ARGS` would, on the engine's data directory.
pub(crate) fn commands(ctx: &Context) -> Arc<dyn Commands> {
    Arc::new(InProcess {
        paths: ctx.paths.clone(),
        config: ctx.config.clone(),
        repeat_args: ctx.repeat_args.clone(),
    })
}

fn tell(ctx: &Context, args: TellArgs) -> Result<Report, CliError> {
    super::refuse_placeholder("PROMPT", &args.prompt)?;
    if args.prompt.trim().is_empty() {
        return Err(CliError::invalid_input("PROMPT is empty")
            .hint("agents session tell --session ID \"what to do\""));
    }
    let format = ctx.format;
    let human_stream = args.stream && format != Format::Json;
    let request = TellRequest {
        session: args.session.clone(),
        actor: args.actor.clone(),
        prompt: args.prompt.clone(),
        stream: args.stream,
    };
    let header = |session_id: &str, actor: &str| {
        if human_stream {
            print_stream(&format!(
                "Session: {session_id}  Actor: {actor}  Mode: streaming\n\n"
            ));
        }
    };
    let events = on_event(format);
    let told = if ctx.server.is_some() {
        // Through a server the events arrive with the answer, and are shown then.
        let client = ctx.client()?;
        let told = client.tell_session(request)?;
        let session = client.session(&args.session)?.detail.session;
        header(&session.session_id.to_string(), &session.actor);
        told.events.iter().cloned().for_each(&events);
        told
    } else {
        ctx.config()?;
        let engine = ctx.registry_engine();
        if human_stream {
            let session = ctx.client()?.session(&args.session)?.detail.session;
            header(
                &session.session_id.to_string(),
                args.actor.as_deref().unwrap_or(&session.actor),
            );
        }
        let guard = super::interrupt::Guard::new();
        let interrupted = move || guard.interrupted();
        api_sessions::tell(&engine, &request, &events, &interrupted)?
    };
    if human_stream {
        print_stream("\n\n");
    }
    tell_report(&args.prompt, &told, args.stream, ctx)
}

fn tell_report(
    prompt: &str,
    told: &Told,
    streamed: bool,
    ctx: &Context,
) -> Result<Report, CliError> {
    let data = &told.data;
    let text = |k: &str| data[k].as_str().unwrap_or_default().to_string();
    let number = |v: &Value| v.as_u64().unwrap_or_default();
    let commands: Vec<ExecutedCommand> =
        serde_json::from_value(data["commands"].clone()).unwrap_or_default();
    let plans: Vec<String> = data["plans"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(Value::as_str)
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default();
    let (actor, model, session_id, answer) = (
        text("actor"),
        text("model"),
        text("session_id"),
        text("answer"),
    );
    let ran = commands.iter().filter(|c| c.status != "refused").count();
    let mut report = Report::ok(
        "session tell",
        data,
        if streamed {
            "Stream complete".to_string()
        } else {
            format!(
                "Orchestrator completed {ran} command{}",
                if ran == 1 { "" } else { "s" }
            )
        },
    )
    .with(Element::panel(
        "Plan Request",
        [
            ("Actor", view::id(actor)),
            ("Model", model.into()),
            ("Session", view::id(session_id)),
            ("Turn", number(&data["turn"]).to_string().into()),
            ("Automation", text("automation_profile").into()),
            ("Prompt", clip(prompt, 60).into()),
        ],
    ));
    if !streamed {
        report = report.with(Element::List {
            title: "Answer".into(),
            items: answer.lines().map(str::to_string).collect(),
        });
    }
    report = report.with(Element::List {
        title: "Commands Executed".into(),
        items: if commands.is_empty() {
            vec!["(none)".into()]
        } else {
            commands
                .iter()
                .map(|c| {
                    if c.ok {
                        format!("- {}", c.command)
                    } else {
                        format!("- {}  ({}: {})", c.command, c.status, clip(&c.summary, 120))
                    }
                })
                .collect()
        },
    });
    if !plans.is_empty() {
        report = report.with(Element::List {
            title: "Plans Created".into(),
            items: plans
                .iter()
                .map(|p| {
                    format!(
                        "{p}  (review: {})",
                        ctx.suggest(&format!("plan status {p}"))
                    )
                })
                .collect(),
        });
    }
    Ok(report.with(Element::panel(
        "Usage",
        [
            (
                "Input Tokens",
                number(&data["usage"]["input_tokens"]).to_string(),
            ),
            (
                "Output Tokens",
                number(&data["usage"]["output_tokens"]).to_string(),
            ),
            ("Cost", cost_text(data["cost_usd"].as_f64())),
            (
                "Duration",
                format!("{:.1}s", told.duration_ms as f64 / 1000.0),
            ),
            ("Tool Calls", number(&data["tool_calls"]).to_string()),
        ],
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stream_flag_is_reported() {
        let cli = super::super::Cli::try_parse_from([
            "agents",
            "session",
            "tell",
            "--session",
            "x",
            "--stream",
            "hi",
        ])
        .unwrap();
        let Some(super::super::Command::Session(c)) = cli.command else {
            panic!("not a session command")
        };
        assert!(c.streams());
    }
}
