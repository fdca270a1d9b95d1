//! `agents actor context list|show|export|import|delete|clear|rm` (spec sections 05 and 06):
//! the named conversations `agents actor run --context NAME` continues
//! ([`cleveragents_engine::actor_run::contexts`]).

use std::path::PathBuf;

use clap::Subcommand;
use serde_json::json;

use super::indexing::bytes;
use super::{CliError, Context, view};
use crate::output::{Column, Element, Report};
use cleveragents_engine::api;
use cleveragents_engine::api::run_views::{
    CONTEXT_SCHEMA_VERSION, ContextError, ContextItem, ContextSummary, Message, Removal,
};

/// `agents actor context ...`
#[derive(Debug, Subcommand)]
pub enum ContextCommand {
    /// List actor contexts
    List {
        /// Show only contexts whose name matches this regular expression
        regex: Option<String>,
    },
    /// Show a context: its summary, conversation and files
    Show {
        /// Context name
        name: String,
    },
    /// Export a context as portable JSON (schema version and checksum)
    Export {
        /// File to write
        #[arg(short, long, value_name = "FILE")]
        output: PathBuf,
        /// Context name
        name: String,
    },
    /// Import a context from an exported JSON file
    Import {
        /// Exported file to read
        #[arg(short, long, value_name = "FILE")]
        input: PathBuf,
        /// Replace an existing context of the same name
        #[arg(long)]
        update: bool,
        /// Context name (default: the name in the file)
        name: Option<String>,
    },
    /// Delete a context entirely
    Delete(Target),
    /// Remove every message and file of a context, keeping the context
    Clear(Target),
    /// Remove the files of a context (added with `actor run --context-dir`), keeping its conversation
    Rm(Target),
}

/// Which contexts `delete`, `clear` and `rm` act on.
#[derive(Debug, clap::Args)]
pub struct Target {
    /// Every context
    #[arg(short, long, conflicts_with = "name")]
    all: bool,
    /// Do not ask for confirmation
    #[arg(short, long)]
    yes: bool,
    /// Context name
    #[arg(required_unless_present = "all")]
    name: Option<String>,
}

impl ContextCommand {
    /// The subcommand name.
    pub fn name(&self) -> &'static str {
        match self {
            ContextCommand::List { .. } => "list",
            ContextCommand::Show { .. } => "show",
            ContextCommand::Export { .. } => "export",
            ContextCommand::Import { .. } => "import",
            ContextCommand::Delete(_) => "delete",
            ContextCommand::Clear(_) => "clear",
            ContextCommand::Rm(_) => "rm",
        }
    }
}

/// Runs an `actor context` subcommand.
///
/// # Errors
/// `NOT_FOUND` for an unknown context, `CONFLICT` for an import over an existing one without
/// `--update`, `INVALID_INPUT` for a bad name or an export file that is not valid (format,
/// schema version, checksum), `IO_ERROR` for a file that cannot be read or written,
/// `NEEDS_APPROVAL` without `--yes` and a terminal.
pub fn run(command: ContextCommand, ctx: &Context) -> Result<Report, CliError> {
    match command {
        ContextCommand::List { regex } => list(ctx, regex.as_deref()),
        ContextCommand::Show { name } => show(ctx, &name),
        ContextCommand::Export { output, name } => export(ctx, &name, &output),
        ContextCommand::Import {
            input,
            update,
            name,
        } => import(ctx, &input, name.as_deref(), update),
        ContextCommand::Delete(t) => remove(ctx, &t, Removal::Context),
        ContextCommand::Clear(t) => remove(ctx, &t, Removal::Items),
        ContextCommand::Rm(t) => remove(ctx, &t, Removal::Files),
    }
}

fn summary_json(s: &ContextSummary) -> serde_json::Value {
    serde_json::to_value(s).expect("a summary serializes")
}

fn list(ctx: &Context, regex: Option<&str>) -> Result<Report, CliError> {
    let re = view::regex(regex, "agents actor context list '^docs'")?;
    let rows: Vec<ContextSummary> = ctx
        .client()?
        .actor_contexts()?
        .into_iter()
        .filter(|c| re.as_ref().is_none_or(|re| re.is_match(&c.name)))
        .collect();
    let n = rows.len();
    let total: u64 = rows.iter().map(|c| c.bytes).sum();
    Ok(Report::ok(
        "actor context list",
        json!({"contexts": rows.iter().map(summary_json).collect::<Vec<_>>()}),
        format!("{n} context{} listed", if n == 1 { "" } else { "s" }),
    )
    .with(Element::Table {
        title: "Actor Contexts".into(),
        columns: vec![
            Column::left("Name"),
            Column::left("Actor"),
            Column::right("Messages"),
            Column::right("Files"),
            Column::right("Size"),
            Column::left("Updated"),
        ],
        rows: rows
            .iter()
            .map(|c| {
                vec![
                    view::id(c.name.clone()),
                    view::or(c.actor.as_deref(), "-"),
                    c.messages.to_string().into(),
                    c.files.to_string().into(),
                    bytes(c.bytes).into(),
                    view::time(&c.updated_at).into(),
                ]
            })
            .collect(),
        empty: "No actor contexts. Make one with `agents actor run --context NAME ACTOR PROMPT`."
            .into(),
    })
    .with(Element::panel(
        "Stats",
        [
            ("Contexts", n.to_string()),
            ("Total Size", bytes(total)),
            ("Estimated Tokens", format!("~{}", total.div_ceil(4))),
        ],
    )))
}

fn message_row(m: &Message) -> (&'static str, String) {
    match m {
        Message::User { text } => ("user", text.clone()),
        Message::Assistant { text, .. } => ("assistant", text.clone()),
        Message::ToolResults { results } => {
            ("tool results", format!("{} result(s)", results.len()))
        }
    }
}

fn show(ctx: &Context, name: &str) -> Result<Report, CliError> {
    let d = ctx.client()?.actor_context(name)?;
    let s = &d.summary;
    let mut messages = Vec::new();
    let mut files = Vec::new();
    for (i, item) in d.items.iter().enumerate() {
        match item {
            ContextItem::Message { message, actor, .. } => {
                let (role, text) = message_row(message);
                messages.push(vec![
                    (i + 1).to_string().into(),
                    role.into(),
                    view::or(actor.as_deref(), "-"),
                    view::clip(&text.replace('\n', " "), 80).into(),
                ]);
            }
            ContextItem::File { path, content, .. } => {
                files.push(vec![
                    path.clone().into(),
                    bytes(content.len() as u64).into(),
                ]);
            }
        }
    }
    Ok(Report::ok(
        "actor context show",
        json!({"context": summary_json(s), "items": d.items}),
        "Context displayed",
    )
    .with(Element::panel(
        "Context Summary",
        [
            ("Context", view::id(s.name.clone())),
            ("Actor", view::or(s.actor.as_deref(), "(none)")),
            ("Messages", s.messages.to_string().into()),
            ("Files", s.files.to_string().into()),
            ("Total Size", bytes(s.bytes).into()),
            (
                "Estimated Tokens",
                format!("~{}", s.bytes.div_ceil(4)).into(),
            ),
            ("Created", view::time(&s.created_at).into()),
            ("Updated", view::time(&s.updated_at).into()),
            (
                "Imported From",
                view::or(s.imported_from.as_deref(), "(none)"),
            ),
        ],
    ))
    .with(Element::Table {
        title: "Conversation".into(),
        columns: vec![
            Column::right("#"),
            Column::left("Role"),
            Column::left("Actor"),
            Column::left("Text"),
        ],
        rows: messages,
        empty: "No messages.".into(),
    })
    .with(Element::Table {
        title: "Context Files".into(),
        columns: vec![Column::left("Path"), Column::right("Size")],
        rows: files,
        empty: "No files.".into(),
    }))
}

fn export(ctx: &Context, name: &str, output: &std::path::Path) -> Result<Report, CliError> {
    let exported = ctx.client()?.export_actor_context(name)?;
    let (text, sum, d) = (&exported.text, &exported.checksum, &exported.detail);
    std::fs::write(output, format!("{text}\n")).map_err(|e| {
        CliError::new(
            "IO_ERROR",
            format!("--output {}: cannot write: {e}", output.display()),
        )
    })?;
    Ok(Report::ok(
        "actor context export",
        json!({"context": d.summary.name, "output": output.display().to_string(), "items": d.items.len(), "bytes": text.len() + 1, "checksum": sum, "schema_version": CONTEXT_SCHEMA_VERSION}),
        "Export completed",
    )
    .with(Element::panel(
        "Context Export",
        [
            ("Context", view::id(d.summary.name.clone())),
            ("Output", output.display().to_string().into()),
            ("Items", d.items.len().to_string().into()),
            ("Size", bytes(text.len() as u64 + 1).into()),
        ],
    ))
    .with(Element::panel(
        "Integrity",
        [
            ("Checksum", sum.clone()),
            ("Schema Version", CONTEXT_SCHEMA_VERSION.to_string()),
            ("Compressed", "no".to_string()),
        ],
    )))
}

fn import(
    ctx: &Context,
    input: &std::path::Path,
    name: Option<&str>,
    update: bool,
) -> Result<Report, CliError> {
    let text = api::read_regular_text(input, api::IMPORT_MAX_BYTES).map_err(|e| {
        let code = if input.exists() {
            "INVALID_INPUT"
        } else {
            "IO_ERROR"
        };
        let e = ContextError::File {
            path: input.display().to_string(),
            message: e.to_string(),
        };
        CliError::new(code, format!("--input {e}"))
    })?;
    let done =
        ctx.client()?
            .import_actor_context(&input.display().to_string(), &text, name, update)?;
    let s = &done.summary;
    Ok(Report::ok(
        "actor context import",
        json!({"context": summary_json(s), "checksum": done.checksum, "replaced": done.replaced}),
        "Import completed",
    )
    .with(Element::panel(
        "Context Import",
        [
            ("Context", view::id(s.name.clone())),
            ("Input", input.display().to_string().into()),
            ("Items", (s.messages + s.files).to_string().into()),
            ("Checksum", done.checksum.clone().into()),
        ],
    ))
    .with(Element::panel(
        "Merge",
        [
            ("Strategy", "replace"),
            ("Replaced", view::yes_no(done.replaced)),
        ],
    )))
}

fn remove(ctx: &Context, t: &Target, what: Removal) -> Result<Report, CliError> {
    let client = ctx.client()?;
    let (verb, command, title, done) = match what {
        Removal::Context => ("Delete", "delete", "Context Deleted", "Context deleted"),
        Removal::Items => ("Clear", "clear", "Context Cleared", "Context cleared"),
        Removal::Files => (
            "Remove the files of",
            "rm",
            "Context Files Removed",
            "Context updated",
        ),
    };
    let names = t.name.clone().map(|n| vec![n]);
    if let Some(n) = &names {
        // Name the miss before asking anything.
        client.actor_context(&n[0])?;
    }
    let target = match &t.name {
        Some(n) => format!("context {n}"),
        None => "every actor context".to_string(),
    };
    super::confirm::confirm(
        &format!("{verb} {target}?"),
        t.yes,
        &ctx.terminal,
        &ctx.suggest(&format!(
            "actor context {command} --yes {}",
            t.name
                .as_deref()
                .map(|n| shell_words::quote(n).to_string())
                .unwrap_or_else(|| "--all".into())
        )),
    )?;
    let removed = client.remove_actor_contexts(names, what)?;
    let items: u64 = removed.iter().map(|r| r.items).sum();
    let freed: u64 = removed.iter().map(|r| r.bytes).sum();
    Ok(Report::ok(
        format!("actor context {command}"),
        json!({"removed": removed}),
        done,
    )
    .with(Element::Table {
        title: title.into(),
        columns: vec![
            Column::left("Context"),
            Column::right("Items Removed"),
            Column::right("Freed"),
        ],
        rows: removed
            .iter()
            .map(|r| {
                vec![
                    view::id(r.name.clone()),
                    r.items.to_string().into(),
                    bytes(r.bytes).into(),
                ]
            })
            .collect(),
        empty: "No actor contexts.".into(),
    })
    .with(Element::panel(
        "Stats",
        [
            ("Contexts", removed.len().to_string()),
            ("Items Removed", items.to_string()),
            ("Storage Freed", bytes(freed)),
            (
                "Context Kept",
                view::yes_no(what != Removal::Context).to_string(),
            ),
        ],
    )))
}
