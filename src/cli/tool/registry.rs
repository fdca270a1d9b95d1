//! `agents tool add|remove|list|show` for registered tools (spec sections 06 and 18).

use serde_json::{Value, json};

use crate::cli::confirm::confirm;
use crate::cli::skill::{checkpoint_cell, writes_cell};
use crate::cli::{CliError, Context, view};
use crate::output::{Cell, Column, Element, Level, Report, Tone};
use cleveragents_engine::api;
use cleveragents_engine::api::definition_views::{
    AddTool, DefinitionKind, Registration, ToolCapability, ToolDef, ToolSource,
};

fn registered_json(r: &Registration<ToolDef>) -> Value {
    let d = &r.definition;
    json!({
        "name": r.name,
        "description": d.description,
        "source": d.source.as_str(),
        "capability": d.capability().ok(),
        "input_schema": d.input_schema,
        "resources": d.resources.iter().map(|(k, s)| json!({"slot": k, "type": s.resource_type, "access": s.access, "binding": s.mode(), "bind": s.bind, "from_param": s.from_param})).collect::<Vec<_>>(),
        "command": d.command,
        "code": d.code,
        "mcp_server": d.mcp_server,
        "config_path": r.config_path,
        "created_at": r.created_at.to_string(),
        "updated_at": r.updated_at.to_string(),
    })
}

fn capability_panel(cap: &ToolCapability) -> Element {
    Element::panel(
        "Capability",
        [
            ("Read-Only", view::yes_no(cap.read_only).into()),
            ("Writes", view::yes_no(cap.writes).into()),
            ("Checkpointable", view::yes_no(cap.checkpointable).into()),
            ("Checkpoint Scope", checkpoint_cell(cap)),
            ("Idempotent", view::yes_no(cap.idempotent).into()),
            (
                "Approval Required",
                view::yes_no(cap.human_approval_required).into(),
            ),
            (
                "Side Effects",
                view::or(Some(&cap.side_effects.join(", ")), "(none)"),
            ),
        ],
    )
}

/// `tool add`.
///
/// # Errors
/// `INVALID_INPUT` naming the field (YAML, schema, capability, command), `CONFLICT` for a
/// duplicate without `--update`.
pub fn add(ctx: &Context, input: &AddTool) -> Result<Report, CliError> {
    ctx.check_store()?;
    let existed = match input.name.as_deref() {
        Some(n) => ctx.client()?.tool_kind(n)? == Some(DefinitionKind::Registered),
        None => false,
    };
    let mut input = input.clone();
    if let Some(config) = &input.config {
        // The file is this machine's: through a server, its text goes with the change.
        let (path, text) = crate::cli::action::sent_config(ctx, config)?;
        (input.config, input.config_text) = (Some(path), text);
    }
    let reg = ctx.change(api::RegisterTool(input.clone()))?;
    let cap = reg.definition.capability().unwrap_or_default();
    let verb = if existed && input.update {
        "updated"
    } else {
        "registered"
    };
    Ok(Report::ok(
        "tool add",
        json!({"tool": registered_json(&reg)}),
        format!("Tool {} {verb}", reg.name),
    )
    .with(Element::panel(
        "Tool",
        [
            ("Name", view::id(reg.name.clone())),
            ("Description", reg.definition.description.clone().into()),
            ("Source", reg.definition.source.as_str().into()),
            (
                "Offered In",
                if cap.writes {
                    "execute"
                } else {
                    "strategize, execute"
                }
                .into(),
            ),
        ],
    ))
    .with(capability_panel(&cap)))
}

/// `tool remove`.
///
/// # Errors
/// `NOT_FOUND`, `CONFLICT` while a skill names it, `CONFLICT` for a built-in.
pub fn remove(ctx: &Context, name: &str, yes: bool) -> Result<Report, CliError> {
    ctx.check_store()?;
    match ctx.client()?.tool_kind(name)? {
        Some(DefinitionKind::Builtin) => {
            return Err(CliError::new(
                "CONFLICT",
                format!("`{name}` is a built-in tool and cannot be removed"),
            )
            .hint("leave its skill out of an actor's `skills:` instead"));
        }
        None => {
            return Err(
                CliError::new("NOT_FOUND", format!("tool `{name}` is not registered"))
                    .hint("agents tool list"),
            );
        }
        Some(DefinitionKind::Registered) => {}
    }
    confirm(
        &format!("Remove tool {name}?"),
        yes,
        &ctx.terminal,
        &ctx.suggest(&format!("tool remove --yes {name}")),
    )?;
    let reg = ctx.change(api::RemoveTool {
        name: name.to_string(),
    })?;
    let name = reg.name.as_str();
    Ok(Report::ok(
        "tool remove",
        json!({"tool": registered_json(&reg)}),
        format!("Tool {name} removed"),
    )
    .with(Element::panel(
        "Tool Removed",
        [
            ("Name", view::id(name.to_string())),
            ("Config", "kept on disk".into()),
        ],
    )))
}

/// One row of `tool list`: name, source, capability, registered definition.
struct Row {
    name: String,
    source: &'static str,
    cap: ToolCapability,
    json: Value,
}

/// `tool list`.
///
/// # Errors
/// `INVALID_INPUT` for a bad regex or source.
pub fn list(
    ctx: &Context,
    namespace: Option<&str>,
    source: Option<&str>,
    regex: Option<&str>,
) -> Result<Report, CliError> {
    let re = view::regex(regex, "agents tool list '^git_'")?;
    if let Some(s) = source
        && ToolSource::parse(s).is_none()
    {
        return Err(CliError::invalid_input(format!(
            "--source `{s}` is not a tool source; use builtin, command, mcp or agent_skill"
        )));
    }
    let source = source.and_then(ToolSource::parse).map(ToolSource::as_str);
    ctx.check_store()?;
    let listed = ctx.client()?.tools()?;
    let mut rows: Vec<Row> = listed
        .builtins
        .iter()
        .map(|t| Row {
            name: t.name.clone(),
            source: "builtin",
            cap: (&t.capability).into(),
            json: super::tool_json(t),
        })
        .collect();
    for r in listed.registered {
        rows.push(Row {
            name: r.name.clone(),
            source: r.definition.source.as_str(),
            cap: r.definition.capability().unwrap_or_default(),
            json: registered_json(&r),
        });
    }
    let shown: Vec<&Row> = rows
        .iter()
        .filter(|r| re.as_ref().is_none_or(|re| re.is_match(&r.name)))
        .filter(|r| source.is_none_or(|s| s == r.source))
        .filter(|r| {
            namespace.is_none_or(|ns| match r.name.split_once('/') {
                Some((n, _)) => n == ns,
                None => ns == "builtin",
            })
        })
        .collect();
    let n = shown.len();
    let count =
        |f: fn(&ToolCapability) -> bool| shown.iter().filter(|r| f(&r.cap)).count().to_string();
    let custom = shown.iter().filter(|r| r.source != "builtin").count();
    Ok(Report::ok(
        "tool list",
        json!({"tools": shown.iter().map(|r| r.json.clone()).collect::<Vec<_>>()}),
        format!("{n} tool{} listed", if n == 1 { "" } else { "s" }),
    )
    .with(Element::Table {
        title: "Tools".into(),
        columns: ["Name", "Source", "Read-Only", "Writes"]
            .map(Column::left)
            .into(),
        rows: shown
            .iter()
            .map(|r| {
                vec![
                    view::id(r.name.clone()),
                    Cell::from(r.source),
                    view::flag_cell(r.cap.read_only),
                    writes_cell(&r.cap),
                ]
            })
            .collect(),
        empty: "No tools match.".into(),
    })
    .with(Element::panel(
        "Summary",
        [
            ("Total", n.to_string()),
            ("Read-Only", count(|c| c.read_only)),
            ("Writes", count(|c| c.writes)),
            ("Registered", custom.to_string()),
        ],
    )))
}

/// `tool show` of a registered tool, with the custom skills that name it.
pub fn show(reg: &Registration<ToolDef>, skills: &[String]) -> Report {
    let d = &reg.definition;
    let cap = d.capability().unwrap_or_default();
    let implementation = d
        .command
        .clone()
        .or_else(|| {
            d.code
                .as_ref()
                .map(|c| format!("(script, {} lines)", c.lines().count()))
        })
        .or_else(|| {
            d.mcp_server.as_ref().map(|m| {
                format!(
                    "MCP {} ({})",
                    m.tool_name.clone().unwrap_or_default(),
                    m.command
                        .clone()
                        .or_else(|| m.url.clone())
                        .unwrap_or_default()
                )
            })
        })
        .unwrap_or_default();
    let mut report = Report::ok(
        "tool show",
        json!({"tool": registered_json(reg), "skills": skills}),
        "Tool loaded",
    )
    .with(Element::panel(
        "Tool Details",
        [
            ("Name", view::id(reg.name.clone())),
            ("Description", d.description.clone().into()),
            ("Source", d.source.as_str().into()),
            ("Runs", implementation.into()),
            (
                "Skills",
                if skills.is_empty() {
                    Cell::new("(none)", Tone::Dim)
                } else {
                    skills.join(", ").into()
                },
            ),
            ("Config", view::or(reg.config_path.as_deref(), "(flags)")),
        ],
    ))
    .with(Element::Panel {
        title: "Input Schema".into(),
        entries: super::schema_lines(&d.input_schema),
    })
    .with(capability_panel(&cap));
    if !d.resources.is_empty() {
        report = report.with(Element::Table {
            title: "Resource Slots".into(),
            columns: ["Slot", "Type", "Access", "Binding"]
                .map(Column::left)
                .into(),
            rows: d
                .resources
                .iter()
                .map(|(k, s)| {
                    let binding = match (&s.bind, &s.from_param) {
                        (Some(b), _) => format!("static: {b}"),
                        (_, Some(p)) => format!("parameter: {p}"),
                        _ => "contextual".into(),
                    };
                    vec![
                        Cell::from(k.clone()),
                        Cell::from(s.resource_type.clone()),
                        Cell::from(s.access.clone()),
                        Cell::from(binding),
                    ]
                })
                .collect(),
            empty: String::new(),
        });
    }
    if cap.is_unsafe {
        report = report.message(Level::Warn, "this tool is not confined by the kernel here");
    }
    report
}
