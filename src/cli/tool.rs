//! `agents tool list|show|run` (spec 06, 18; issue 4): the built-in tools, their schemas and
//! capabilities, and running one headlessly against a plan's sandbox.

use std::path::PathBuf;

use clap::Subcommand;
use serde_json::{Value, json};

use super::plan_sandbox::{open, register_dev_target};
use super::skill::{checkpoint_cell, writes_cell};
use super::view;
use super::{CliError, Context};
use crate::engine::skills;
use crate::engine::tools::runner::{CallRequest, Policy, ToolRunner};
use crate::engine::tools::{self, Tool};
use crate::output::{Cell, Column, Element, Level, Report, Tone};

/// `agents tool ...`
#[derive(Debug, Subcommand)]
pub enum ToolCommand {
    /// List the built-in tools with their capability
    List {
        /// Show only tools whose name matches this regular expression
        regex: Option<String>,
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
    /// The subcommand name.
    pub fn name(&self) -> &'static str {
        match self {
            ToolCommand::List { .. } => "list",
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
        ToolCommand::List { regex } => list(regex.as_deref()),
        ToolCommand::Show { name } => show(&name),
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
    let (mut store, sandboxes, plan) = open(ctx, plan)?;
    let mut messages = Vec::new();
    if let Some(path) = target_path {
        messages = register_dev_target(&mut store, &sandboxes, &plan, &path)?;
    }
    let policy = Policy::for_plan(&plan);
    let step = ToolRunner::new(&mut store, &sandboxes).step(
        &plan.plan_id,
        &policy,
        CallRequest {
            tool: tool.to_string(),
            arguments,
            parent_skill: skill,
            resource,
        },
    )?;
    let call = &step.call;
    let data = json!({
        "plan_id": plan.plan_id.to_string(),
        "call": call.record,
        "result": call.result.as_ref().ok(),
        "changes": call.changes,
        "checkpoints": {
            "start": step.start.as_ref().map(|c| c.checkpoint_id.to_string()),
            "end": step.end.as_ref().map(|c| c.checkpoint_id.to_string()),
        },
    });
    if let Err(e) = &call.result {
        let code = match e.code() {
            "INVALID_ARGUMENTS" => "INVALID_INPUT",
            other => other,
        };
        let mut err = CliError::new(code, format!("{tool}: {e}"))
            .detail(format!(
                "the call was logged as #{} ({}); the plan is unchanged and can continue",
                call.record.seq, call.record.outcome
            ))
            .data(data);
        if code == "INVALID_INPUT" {
            err = err.hint("the tool's input schema lists its arguments; fix the named field");
        }
        return Err(err);
    }
    let result = call.result.as_ref().expect("checked above");
    let mut report = Report::ok(
        "tool run",
        &data,
        format!("{tool} ran ({} change(s))", call.changes.len()),
    )
    .with(Element::panel(
        "Tool Call",
        [
            ("Tool", Cell::new(tool, Tone::Id)),
            ("Plan", Cell::new(plan.plan_id.to_string(), Tone::Id)),
            (
                "Resource",
                call.record.resource_name.clone().unwrap_or_default().into(),
            ),
            ("Call", format!("#{}", call.record.seq).into()),
            ("Duration", format!("{} ms", call.record.duration_ms).into()),
        ],
    ));
    if !call.changes.is_empty() {
        report = report.with(Element::Table {
            title: "Changes".into(),
            columns: vec![
                Column::left("Operation"),
                Column::left("Path"),
                Column::right("Size"),
            ],
            rows: call
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
    for m in messages {
        report = report.message(Level::Warn, m);
    }
    Ok(report)
}

fn tool_json(t: &dyn Tool) -> Value {
    json!({
        "name": t.name(),
        "description": t.description(),
        "source": "builtin",
        "group": t.group().as_str(),
        "skills": skills::skills_with_tool(t.name()),
        "capability": t.capability(),
    })
}

fn list(regex: Option<&str>) -> Result<Report, CliError> {
    let re = view::regex(regex, "agents tool list '^git_'")?;
    let all = tools::builtins();
    let shown: Vec<&dyn Tool> = all
        .iter()
        .map(|t| t.as_ref())
        .filter(|t| re.as_ref().is_none_or(|r| r.is_match(t.name())))
        .collect();
    let rows = shown
        .iter()
        .map(|t| {
            let cap = t.capability();
            vec![
                view::id(t.name()),
                Cell::from("builtin"),
                view::flag_cell(cap.read_only),
                writes_cell(&cap),
            ]
        })
        .collect();
    let count = |f: fn(&tools::Capability) -> bool| {
        shown
            .iter()
            .filter(|t| f(&t.capability()))
            .count()
            .to_string()
    };
    let n = shown.len();
    Ok(Report::ok(
        "tool list",
        json!({"tools": shown.iter().map(|t| tool_json(*t)).collect::<Vec<_>>()}),
        format!("{n} tool{} listed", if n == 1 { "" } else { "s" }),
    )
    .with(Element::Table {
        title: "Tools".into(),
        columns: ["Name", "Source", "Read-Only", "Writes"]
            .map(Column::left)
            .into(),
        rows,
        empty: "No tools match.".into(),
    })
    .with(Element::panel(
        "Summary",
        [
            ("Total", n.to_string()),
            ("Read-Only", count(|c| c.read_only)),
            ("Writes", count(|c| c.writes)),
            ("Custom", "0 (custom tools are not yet supported)".into()),
        ],
    )))
}

/// One line per argument of a JSON Schema object: `name: type (required) - description`.
fn schema_lines(schema: &Value) -> Vec<(String, Cell)> {
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

fn show(name: &str) -> Result<Report, CliError> {
    let tool = tools::builtin(name).ok_or_else(|| {
        let names: Vec<&str> = tools::builtins().iter().map(|t| t.name()).collect();
        let err = CliError::new("NOT_FOUND", format!("tool `{name}` not found"))
            .detail("only the built-in tools exist; custom and MCP tools are not yet supported");
        match crate::engine::config::nearest(name, names) {
            Some(s) => err.hint(format!("agents tool show {s}")),
            None => err.hint("agents tool list"),
        }
    })?;
    let cap = tool.capability();
    let schema = tool.input_schema();
    let mut data = tool_json(tool.as_ref());
    data["input_schema"] = schema.clone();
    let skill_names = skills::skills_with_tool(tool.name());
    Ok(
        Report::ok("tool show", json!({"tool": data}), "Tool loaded")
            .with(Element::panel(
                "Tool Details",
                [
                    ("Name", view::id(tool.name())),
                    ("Description", tool.description().into()),
                    ("Source", "builtin".into()),
                    ("Group", tool.group().as_str().into()),
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
