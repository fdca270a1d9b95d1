//! `agents tool list|show|run` (spec 06, 18): the built-in tools, their schemas and
//! capabilities, and running one headlessly against a plan's sandbox.

pub mod registry;

use std::path::PathBuf;

use clap::Subcommand;
use serde_json::{Value, json};

use super::skill::checkpoint_cell;
use super::view;
use super::{CliError, Context};
use crate::output::{Cell, Column, Element, Level, Report, Tone};
use cleveragents_engine::api::definition_views::{AddTool, BuiltinTool, ToolCapability, ToolView};
use cleveragents_engine::api::run_views::ToolRunRequest;

/// `agents tool ...`
#[derive(Debug, Subcommand)]
pub enum ToolCommand {
    /// List tools (built-in and registered) with their capability
    List {
        /// Only this namespace (`builtin` for the built-in tools)
        #[arg(short, long, value_name = "NS")]
        namespace: Option<String>,
        /// Only tools of this source: builtin, command, mcp or agent_skill
        #[arg(long, value_name = "SOURCE")]
        source: Option<String>,
        /// Show only tools whose name matches this regular expression
        regex: Option<String>,
    },
    /// Register a tool from its YAML (or from flags: NAME, -d, --code, --input-schema)
    Add {
        /// Tool YAML file
        #[arg(short, long, value_name = "FILE")]
        config: Option<PathBuf>,
        /// Description (overrides the file's)
        #[arg(short, long)]
        description: Option<String>,
        /// Replace a registered tool of the same name
        #[arg(long)]
        update: bool,
        /// Source: command (default), mcp or agent_skill
        #[arg(long, value_name = "SOURCE")]
        source: Option<String>,
        /// Input JSON Schema (an object schema), e.g. '{"type":"object"}'
        #[arg(long, value_name = "JSON")]
        input_schema: Option<String>,
        /// Script run with /bin/sh in the sandbox; arguments arrive as JSON on stdin
        #[arg(long, value_name = "CODE")]
        code: Option<String>,
        /// The tool changes files (offered only in Execute)
        #[arg(long, conflicts_with = "no_writes")]
        writes: bool,
        /// The tool only reads (offered in Strategize too)
        #[arg(long)]
        no_writes: bool,
        /// Its effects can be rolled back with the sandbox
        #[arg(long, conflicts_with = "no_checkpointable")]
        checkpointable: bool,
        /// Its effects cannot be rolled back (refused under require_checkpoints)
        #[arg(long)]
        no_checkpointable: bool,
        /// Tool name, namespaced (`local/lint`; default: `name` in the file)
        name: Option<String>,
    },
    /// Remove a registered tool (refused while a skill names it)
    Remove {
        /// Do not ask for confirmation
        #[arg(short, long)]
        yes: bool,
        /// Tool name
        name: String,
    },
    /// Show a tool: description, capability, skills, input JSON schema
    Show {
        /// Tool name
        name: String,
    },
    /// Run a built-in tool against a plan's sandbox (developer command)
    Run {
        /// Tool name (read_file, write_file, edit_file, shell_execute, ...)
        tool: String,
        /// Plan id or unique prefix
        #[arg(long, value_name = "PLAN")]
        plan: String,
        /// Arguments as a JSON object, e.g. '{"path": "src/main.rs"}'
        #[arg(long, value_name = "JSON", default_value = "{}")]
        args: String,
        /// Resource to bind (default: the plan's only resource, or path://NAME/ in a path)
        #[arg(long, value_name = "NAME")]
        resource: Option<String>,
        /// Skill the call is attributed to in the execution log
        #[arg(long, value_name = "SKILL")]
        skill: Option<String>,
        /// Developer flag: sandbox this directory or git checkout for the plan if it has no
        /// resource yet (stands in for `plan use` until the registries are merged)
        #[arg(long, value_name = "PATH", hide = true)]
        target_path: Option<PathBuf>,
    },
}

impl ToolCommand {
    /// Whether the subcommand can run against a server (`--server`): all of them. Through a
    /// server, `run` runs the tool in the server's sandboxes, on the server's host.
    pub fn served_remotely(&self) -> bool {
        true
    }

    /// The subcommand name.
    pub fn name(&self) -> &'static str {
        match self {
            ToolCommand::List { .. } => "list",
            ToolCommand::Add { .. } => "add",
            ToolCommand::Remove { .. } => "remove",
            ToolCommand::Show { .. } => "show",
            ToolCommand::Run { .. } => "run",
        }
    }
}

/// Runs a tool subcommand.
///
/// # Errors
/// `NOT_FOUND` (plan, tool), `INVALID_INPUT` (arguments JSON, schema errors naming the field),
/// `PERMISSION_DENIED` (policy or confinement), `TOOL_FAILED`; the call is logged in every
/// case but a missing plan or unparseable JSON.
pub fn run(command: ToolCommand, ctx: &Context) -> Result<Report, CliError> {
    match command {
        ToolCommand::List {
            namespace,
            source,
            regex,
        } => list(
            ctx,
            namespace.as_deref(),
            source.as_deref(),
            regex.as_deref(),
        ),
        ToolCommand::Show { name } => show(ctx, &name),
        ToolCommand::Add {
            config,
            description,
            update,
            source,
            input_schema,
            code,
            writes,
            no_writes,
            checkpointable,
            no_checkpointable,
            name,
        } => registry::add(
            ctx,
            &AddTool {
                config,
                name,
                description,
                update,
                source,
                input_schema,
                code,
                writes: flag(writes, no_writes),
                checkpointable: flag(checkpointable, no_checkpointable),
                config_text: None,
            },
        ),
        ToolCommand::Remove { yes, name } => registry::remove(ctx, &name, yes),
        ToolCommand::Run {
            tool,
            plan,
            args,
            resource,
            skill,
            target_path,
        } => tool_run(ctx, &tool, &plan, &args, resource, skill, target_path),
    }
}

/// `--x` / `--no-x` as an optional boolean.
fn flag(yes: bool, no: bool) -> Option<bool> {
    match (yes, no) {
        (true, _) => Some(true),
        (_, true) => Some(false),
        _ => None,
    }
}

fn tool_run(
    ctx: &Context,
    tool: &str,
    plan: &str,
    args: &str,
    resource: Option<String>,
    skill: Option<String>,
    target_path: Option<PathBuf>,
) -> Result<Report, CliError> {
    let arguments: Value = serde_json::from_str(args).map_err(|e| {
        CliError::invalid_input(format!("--args is not valid JSON: {e}"))
            .hint(r#"e.g. --args '{"path": "src/main.rs"}'"#)
    })?;
    let ran = ctx.client()?.run_tool(ToolRunRequest {
        tool: tool.to_string(),
        plan: plan.to_string(),
        arguments,
        resource,
        skill,
        // Relative to where the command was typed, wherever the tool runs.
        target_path: target_path.map(|p| std::path::absolute(&p).unwrap_or(p)),
    })?;
    let data = &ran.data;
    let result = &ran.result;
    let mut report = Report::ok(
        "tool run",
        data,
        format!("{tool} ran ({} change(s))", ran.changes.len()),
    )
    .with(Element::panel(
        "Tool Call",
        [
            ("Tool", Cell::new(tool, Tone::Id)),
            ("Plan", Cell::new(ran.plan_id.clone(), Tone::Id)),
            (
                "Resource",
                ran.resource_name.clone().unwrap_or_default().into(),
            ),
            ("Call", format!("#{}", ran.seq).into()),
            ("Duration", format!("{} ms", ran.duration_ms).into()),
        ],
    ));
    if !ran.changes.is_empty() {
        report = report.with(Element::Table {
            title: "Changes".into(),
            columns: vec![
                Column::left("Operation"),
                Column::left("Path"),
                Column::right("Size"),
            ],
            rows: ran
                .changes
                .iter()
                .map(|c| {
                    let path = match &c.old_path {
                        Some(old) => format!("{old} -> {}", c.path),
                        None => c.path.clone(),
                    };
                    vec![
                        Cell::from(c.operation.as_str()),
                        Cell::from(path),
                        Cell::from(c.new_size.map(|s| s.to_string()).unwrap_or_default()),
                    ]
                })
                .collect(),
            empty: String::new(),
        });
    }
    let mut shown = Vec::new();
    for key in ["content", "stdout", "stderr", "diff"] {
        if let Some(Value::String(text)) = result.get(key)
            && !text.is_empty()
        {
            shown.push((key, text.clone()));
        }
    }
    for (key, text) in shown {
        report = report.with(Element::List {
            title: key.to_string(),
            items: vec![text],
        });
    }
    let rest: Vec<(String, Cell)> = result
        .as_object()
        .map(|o| {
            o.iter()
                .filter(|(k, _)| !matches!(k.as_str(), "content" | "stdout" | "stderr" | "diff"))
                .map(|(k, v)| {
                    let text = match v {
                        Value::String(s) => s.clone(),
                        other => other.to_string(),
                    };
                    (k.clone(), Cell::from(text))
                })
                .collect()
        })
        .unwrap_or_default();
    if !rest.is_empty() {
        report = report.with(Element::Panel {
            title: "Result".into(),
            entries: rest,
        });
    }
    for m in &ran.warnings {
        report = report.message(Level::Warn, m.clone());
    }
    Ok(report)
}

pub(super) fn tool_json(t: &BuiltinTool) -> Value {
    json!({
        "name": t.name,
        "description": t.description,
        "source": t.source,
        "group": t.group,
        "skills": t.skills,
        "capability": t.capability,
    })
}

fn list(
    ctx: &Context,
    namespace: Option<&str>,
    source: Option<&str>,
    regex: Option<&str>,
) -> Result<Report, CliError> {
    registry::list(ctx, namespace, source, regex)
}

/// One line per argument of a JSON Schema object: `name: type (required) - description`.
pub(super) fn schema_lines(schema: &Value) -> Vec<(String, Cell)> {
    let required: Vec<&str> = schema
        .get("required")
        .and_then(Value::as_array)
        .map(|r| r.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let Some(props) = schema.get("properties").and_then(Value::as_object) else {
        return vec![("(no arguments)".into(), Cell::from(""))];
    };
    props
        .iter()
        .map(|(name, p)| {
            let mut text = type_of(p);
            if required.contains(&name.as_str()) {
                text.push_str(" (required)");
            } else if let Some(d) = p.get("default") {
                text.push_str(&format!(" (default: {d})"));
            }
            if let Some(d) = p.get("description").and_then(Value::as_str) {
                text.push_str(" - ");
                text.push_str(d.lines().next().unwrap_or_default());
            }
            (name.clone(), Cell::from(text))
        })
        .collect()
}

/// A property's type as a word: `string`, `integer|null`, `array of Edit`.
fn type_of(p: &Value) -> String {
    if let Some(r) = p.get("$ref").and_then(Value::as_str) {
        return r.rsplit('/').next().unwrap_or(r).to_string();
    }
    let t = match p.get("type") {
        Some(Value::String(t)) => t.clone(),
        Some(Value::Array(ts)) => ts
            .iter()
            .filter_map(Value::as_str)
            .collect::<Vec<_>>()
            .join("|"),
        _ => "any".to_string(),
    };
    match p.get("items") {
        Some(items) if t.starts_with("array") => format!("{t} of {}", type_of(items)),
        _ => t,
    }
}

fn show(ctx: &Context, name: &str) -> Result<Report, CliError> {
    ctx.check_store()?;
    let (tool, schema) = match ctx.client()?.tool(name)? {
        ToolView::Builtin { tool, input_schema } => (tool, input_schema),
        ToolView::Registered { tool, skills } => {
            return Ok(registry::show(&tool, &skills));
        }
        ToolView::Unknown {
            namespaced,
            nearest,
        } => {
            let mut err = CliError::new("NOT_FOUND", format!("tool `{name}` not found"));
            if !namespaced {
                err = err.detail("built-in tools have bare names; a bare name that is none means local/NAME, and no tool of that name is registered");
            }
            return Err(match nearest {
                Some(s) => err.hint(format!("agents tool show {s}")),
                None => err.hint("agents tool list"),
            });
        }
    };
    let cap = ToolCapability::from(&tool.capability);
    let mut data = tool_json(&tool);
    data["input_schema"] = schema.clone();
    let skill_names = &tool.skills;
    Ok(
        Report::ok("tool show", json!({"tool": data}), "Tool loaded")
            .with(Element::panel(
                "Tool Details",
                [
                    ("Name", view::id(tool.name.clone())),
                    ("Description", tool.description.clone().into()),
                    ("Source", "builtin".into()),
                    ("Group", tool.group.clone().into()),
                    ("Skills", skill_names.join(", ").into()),
                ],
            ))
            .with(Element::Panel {
                title: "Input Schema".into(),
                entries: schema_lines(&schema),
            })
            .with(Element::panel(
                "Capability",
                [
                    ("Read-Only", view::yes_no(cap.read_only).into()),
                    ("Writes", view::yes_no(cap.writes).into()),
                    ("Checkpointable", view::yes_no(cap.checkpointable).into()),
                    ("Checkpoint Scope", checkpoint_cell(&cap)),
                    ("Idempotent", view::yes_no(cap.idempotent).into()),
                    ("Unsafe", view::yes_no(cap.is_unsafe).into()),
                    (
                        "Side Effects",
                        view::or(Some(&cap.side_effects.join(", ")), "(none)"),
                    ),
                ],
            )),
    )
}
