//! `agents tool run` (issue 4): exercise a built-in tool headlessly against a plan's sandbox.

use std::path::PathBuf;

use clap::Subcommand;
use serde_json::{Value, json};

use super::plan_sandbox::{open, register_dev_target};
use super::{CliError, Context};
use crate::engine::tools::runner::{CallRequest, Policy, ToolRunner};
use crate::output::{Cell, Column, Element, Level, Report, Tone};

/// `agents tool ...`
#[derive(Debug, Subcommand)]
pub enum ToolCommand {
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
