//! `agents skill list|show|tools|add|remove` (spec sections 06 and 19): the built-in skills
//! and custom skills registered from YAML (named tools, includes, overrides, anonymous tools,
//! MCP servers, Agent Skills folders).

use std::path::PathBuf;

use clap::Subcommand;
use serde_json::json;

use super::confirm::confirm;
use super::{CliError, Context, view};
use crate::output::{Cell, Column, Element, Level, Report, Tone};
use cleveragents_engine::api;
use cleveragents_engine::api::definition_views::{
    AddSkill, DefinitionKind, ResolvedSkill, ResolvedTool, SKILL_SOURCES as SOURCES, ToolCapability,
};

/// `agents skill ...`
#[derive(Debug, Subcommand)]
pub enum SkillCommand {
    /// List skills with their tool counts and sources
    List {
        /// Only this namespace (`builtin` for the built-in skills)
        #[arg(short, long, value_name = "NS")]
        namespace: Option<String>,
        /// Only skills with tools from this source: builtin, custom, mcp or agent_skill
        #[arg(long, value_name = "SOURCE")]
        source: Option<String>,
    },
    /// Show a skill: description, includes, direct tools, capability summary, actors using it
    Show {
        /// Skill name
        name: String,
    },
    /// List every tool a skill provides, with its capability
    Tools {
        /// Skill name
        name: String,
    },
    /// Register a custom skill from YAML, flags or an Agent Skill folder
    Add {
        /// Skill YAML file
        #[arg(short, long, value_name = "FILE")]
        config: Option<PathBuf>,
        /// Description
        #[arg(short, long)]
        description: Option<String>,
        /// Named tool to include (repeatable)
        #[arg(long = "tool", value_name = "NAME")]
        tools: Vec<String>,
        /// Skill whose tools to include (repeatable)
        #[arg(long = "include-skill", value_name = "NAME")]
        include_skills: Vec<String>,
        /// MCP server whose tools to expose, NAME=COMMAND or NAME=URL (repeatable)
        #[arg(long = "mcp-server", value_name = "SPEC")]
        mcp_servers: Vec<String>,
        /// An Agent Skill folder (with SKILL.md) to register as a skill
        #[arg(long, value_name = "DIR")]
        agent_skill: Option<PathBuf>,
        /// Replace an existing skill of the same name
        #[arg(long)]
        update: bool,
        /// Skill name (default: `name` in the file)
        name: Option<String>,
    },
    /// Remove a custom skill (refused while another skill includes it; built-ins cannot be removed)
    Remove {
        /// Do not ask for confirmation
        #[arg(short, long)]
        yes: bool,
        /// Skill name
        name: String,
    },
}

impl SkillCommand {
    /// Whether the subcommand can run against a server (`--server`): all of them.
    pub fn served_remotely(&self) -> bool {
        true
    }

    /// The subcommand name.
    pub fn name(&self) -> &'static str {
        match self {
            SkillCommand::List { .. } => "list",
            SkillCommand::Show { .. } => "show",
            SkillCommand::Tools { .. } => "tools",
            SkillCommand::Add { .. } => "add",
            SkillCommand::Remove { .. } => "remove",
        }
    }
}

/// Runs a skill subcommand.
///
/// # Errors
/// `NOT_FOUND` for an unknown skill or tool, `INVALID_INPUT` for YAML, cycles and overrides,
/// `CONFLICT` for duplicates, built-ins and skills still included.
pub fn run(command: SkillCommand, ctx: &Context) -> Result<Report, CliError> {
    match command {
        SkillCommand::List { namespace, source } => {
            list(ctx, namespace.as_deref(), source.as_deref())
        }
        SkillCommand::Show { name } => show(ctx, &name),
        SkillCommand::Tools { name } => tools(ctx, &name),
        SkillCommand::Add {
            config,
            description,
            tools,
            include_skills,
            mcp_servers,
            agent_skill,
            update,
            name,
        } => add(
            ctx,
            &AddSkill {
                config,
                name,
                description,
                update,
                tools,
                includes: include_skills,
                mcp_servers,
                agent_skill,
                config_text: None,
            },
        ),
        SkillCommand::Remove { name, yes } => remove(ctx, &name, yes),
    }
}

fn add(ctx: &Context, input: &AddSkill) -> Result<Report, CliError> {
    ctx.check_store()?;
    let mut input = input.clone();
    if let Some(config) = &input.config {
        // The file is this machine's: through a server, its text goes with the change.
        let (path, text) = super::action::sent_config(ctx, config)?;
        (input.config, input.config_text) = (Some(path), text);
    }
    if let (Some(dir), Some(chosen)) = (&input.agent_skill, &ctx.server) {
        return Err(CliError::new(
            "NOT_SUPPORTED",
            format!(
                "--agent-skill {}: an Agent Skill folder is not sent to a server ({})",
                dir.display(),
                chosen.url
            ),
        )
        .hint("copy the folder to the server host and register it there without --server")
        .hint("or list it in the server's agent-skill-dirs so that it is discovered"));
    }
    let (reg, skill) = ctx.change(api::RegisterSkill(input))?;
    let mut data = skill_json(&skill);
    data["tools"] = json!(
        skill
            .tools
            .iter()
            .map(ResolvedTool::to_json)
            .collect::<Vec<_>>()
    );
    let mut report = Report::ok(
        "skill add",
        json!({"skill": data, "config_path": reg.config_path}),
        format!(
            "Skill {} registered ({} tools, {} MCP servers)",
            skill.name,
            skill.tools.len(),
            skill.mcp_servers.len()
        ),
    )
    .with(details(&skill));
    for c in &skill.conflicts {
        report = report.message(Level::Warn, c.clone());
    }
    Ok(report)
}

fn remove(ctx: &Context, name: &str, yes: bool) -> Result<Report, CliError> {
    ctx.check_store()?;
    let kind = ctx.client()?.skill_kind(name)?;
    if kind.is_none() {
        return Err(
            CliError::new("NOT_FOUND", format!("skill `{name}` is not registered"))
                .hint("agents skill list"),
        );
    }
    if kind != Some(DefinitionKind::Builtin) {
        confirm(
            &format!("Remove skill {name}?"),
            yes,
            &ctx.terminal,
            &ctx.suggest(&format!("skill remove --yes {name}")),
        )?;
    }
    let (removed, actors) = ctx.change(api::RemoveSkill {
        name: name.to_string(),
    })?;
    let name = removed.name.as_str();
    let mut report = Report::ok(
        "skill remove",
        json!({"skill": name, "actors_naming_it": actors}),
        format!("Skill {name} removed"),
    );
    if !actors.is_empty() {
        report = report.message(
            Level::Warn,
            format!("actor(s) {} still name {name} in `skills:`; their plans fail until it is registered again or removed from them", actors.join(", ")),
        );
    }
    Ok(report)
}

fn skill_json(s: &ResolvedSkill) -> serde_json::Value {
    let mut v = json!({
        "name": s.name,
        "description": s.description,
        "source": s.kind,
        "includes": s.includes,
        "sources": s.sources(),
        "tool_count": s.tools.len(),
        "tools": s.tools.iter().map(|t| t.name.as_str()).collect::<Vec<_>>(),
        "mcp_servers": s.mcp_servers.iter().map(|(from, m)| json!({"name": m.name, "skill": from, "command": m.command, "url": m.url})).collect::<Vec<_>>(),
        "agent_skills": s.agent_skills,
        "conflicts": s.conflicts,
    });
    if let Some(o) = &s.origin {
        v["origin"] = json!(o);
    }
    v
}

fn details(s: &ResolvedSkill) -> Element {
    Element::panel(
        "Skill Details",
        [
            ("Name", view::id(s.name.clone())),
            ("Description", s.description.clone().into()),
            ("Source", s.kind.to_string().into()),
            (
                "Includes",
                if s.includes.is_empty() {
                    Cell::new("(none)", Tone::Dim)
                } else {
                    Cell::from(s.includes.join(", "))
                },
            ),
            (
                "MCP Servers",
                if s.mcp_servers.is_empty() {
                    Cell::new("(none)", Tone::Dim)
                } else {
                    Cell::from(
                        s.mcp_servers
                            .iter()
                            .map(|(_, m)| m.name.clone())
                            .collect::<Vec<_>>()
                            .join(", "),
                    )
                },
            ),
            (
                "Agent Skills",
                if s.agent_skills.is_empty() {
                    Cell::new("(none)", Tone::Dim)
                } else {
                    Cell::from(
                        s.agent_skills
                            .iter()
                            .map(|a| a.name.clone())
                            .collect::<Vec<_>>()
                            .join(", "),
                    )
                },
            ),
        ],
    )
}

/// `yes` when the tool writes, `no` otherwise.
pub(super) fn writes_cell(c: &ToolCapability) -> Cell {
    view::flag_cell(c.writes)
}

/// How a tool's effects are checkpointed: its scope (`file`, `snapshot`), `yes` without a
/// scope, `no` for a writing tool that cannot be checkpointed, `-` for read-only tools.
pub(super) fn checkpoint_cell(c: &ToolCapability) -> Cell {
    if !c.writes {
        Cell::new("-", Tone::Dim)
    } else if c.checkpointable {
        Cell::from(c.checkpoint_scope.clone().unwrap_or_else(|| "yes".into()))
    } else {
        Cell::new("no", Tone::Warn)
    }
}

fn list(ctx: &Context, namespace: Option<&str>, source: Option<&str>) -> Result<Report, CliError> {
    let source = source.map(|s| if s == "custom" { "command" } else { s });
    if let Some(s) = source
        && !SOURCES.contains(&s)
        && s != "command"
    {
        let mut err = CliError::invalid_input(format!(
            "--source `{s}` is not a tool source; use one of: builtin, command, mcp, agent_skill"
        ));
        if let Some(near) = cleveragents_engine::config::nearest(s, SOURCES) {
            err = err.hint(format!("did you mean `--source {near}`?"));
        }
        return Err(err);
    }
    ctx.check_store()?;
    ctx.config()?;
    let listed = ctx.client()?.skills()?;
    let (all, problems) = (listed.skills, listed.problems);
    let shown: Vec<&ResolvedSkill> = all
        .iter()
        .filter(|s| {
            // Built-in skills are bare; `-n builtin` selects them.
            namespace.is_none_or(|ns| match s.name.split_once('/') {
                Some((n, _)) => n == ns,
                None => ns == "builtin",
            })
        })
        .filter(|s| source.is_none_or(|src| s.sources().contains(&src)))
        .collect();
    let rows = shown
        .iter()
        .map(|s| {
            vec![
                view::id(s.name.clone()),
                Cell::from(s.tools.len().to_string()),
                Cell::from(s.includes.len().to_string()),
                Cell::from(match &s.origin {
                    Some(o) => format!("{} (discovered in {o})", s.sources().join(", ")),
                    None => s.sources().join(", "),
                }),
            ]
        })
        .collect();
    let mut distinct: Vec<&str> = all
        .iter()
        .flat_map(|s| s.tools.iter().map(|t| t.name.as_str()))
        .collect();
    distinct.sort_unstable();
    distinct.dedup();
    let n = shown.len();
    let builtin = all.iter().filter(|s| s.kind == "builtin").count();
    let found = all.iter().filter(|s| s.kind == "discovered").count();
    let mut summary = vec![
        ("Built-in", builtin.to_string()),
        ("Custom", (all.len() - builtin - found).to_string()),
    ];
    if found > 0 {
        summary.push(("Discovered", found.to_string()));
    }
    summary.push(("Total Tools", distinct.len().to_string()));
    let mut report = Report::ok(
        "skill list",
        json!({"skills": shown.iter().map(|s| skill_json(s)).collect::<Vec<_>>()}),
        format!("{n} skill{} listed", if n == 1 { "" } else { "s" }),
    )
    .with(Element::Table {
        title: "Skills".into(),
        columns: vec![
            Column::left("Name"),
            Column::right("Tools"),
            Column::right("Includes"),
            Column::left("Sources"),
        ],
        rows,
        empty: "No skills match.".into(),
    })
    .with(Element::panel("Summary", summary));
    for p in problems {
        report = report.message(Level::Warn, p);
    }
    Ok(report)
}

fn summary_counts(tools: &[ResolvedTool]) -> [(&'static str, String); 4] {
    let count = |f: &dyn Fn(&ToolCapability) -> bool| {
        tools
            .iter()
            .filter(|t| f(&t.capability))
            .count()
            .to_string()
    };
    [
        ("Read-Only", count(&|c| c.read_only)),
        ("Writes", count(&|c| c.writes)),
        ("Checkpointable", count(&|c| c.checkpointable)),
        ("Unsafe", count(&|c| c.is_unsafe)),
    ]
}

fn show(ctx: &Context, name: &str) -> Result<Report, CliError> {
    ctx.check_store()?;
    let detail = ctx.client()?.skill(name)?;
    let (skill, actors) = (detail.skill, detail.actors);
    let direct: Vec<&ResolvedTool> = skill
        .tools
        .iter()
        .filter(|t| t.from_skill.is_none())
        .collect();
    let mut summary = vec![("Total Tools", skill.tools.len().to_string())];
    summary.extend(summary_counts(&skill.tools));
    let rows = direct
        .iter()
        .map(|t| {
            vec![
                view::id(t.name.clone()),
                Cell::from(t.source.as_str()),
                writes_cell(&t.capability),
                checkpoint_cell(&t.capability),
            ]
        })
        .collect();
    let mut data = skill_json(&skill);
    data["tools"] = json!(
        skill
            .tools
            .iter()
            .map(ResolvedTool::to_json)
            .collect::<Vec<_>>()
    );
    Ok(Report::ok(
        "skill show",
        json!({"skill": data, "referenced_by": {"actors": actors}}),
        "Skill loaded",
    )
    .with(details(&skill))
    .with(Element::Table {
        title: format!("Direct Tools ({})", direct.len()),
        columns: ["Name", "Source", "Writes", "Checkpoint"]
            .map(Column::left)
            .into(),
        rows,
        empty: "(none)".into(),
    })
    .with(Element::panel("Capability Summary", summary))
    .with(Element::panel(
        "Referenced By",
        [(
            "Actors",
            if actors.is_empty() {
                Cell::new("(none)", Tone::Dim)
            } else {
                Cell::from(actors.join(", "))
            },
        )],
    )))
}

fn tools(ctx: &Context, name: &str) -> Result<Report, CliError> {
    ctx.check_store()?;
    let (skill, problems) = ctx.client()?.skill_tools(name)?;
    let rows = skill
        .tools
        .iter()
        .map(|t| {
            vec![
                view::id(t.name.clone()),
                Cell::from(t.source.as_str()),
                match &t.from_skill {
                    Some(s) => Cell::from(s.clone()),
                    None => Cell::new("(direct)", Tone::Dim),
                },
                view::flag_cell(t.capability.read_only),
                writes_cell(&t.capability),
                checkpoint_cell(&t.capability),
            ]
        })
        .collect();
    let n = skill.tools.len();
    let included = skill
        .tools
        .iter()
        .filter(|t| t.from_skill.is_some())
        .count();
    let mut summary = vec![
        ("Total", n.to_string()),
        ("From Includes", included.to_string()),
        ("Direct", (n - included).to_string()),
    ];
    summary.extend(summary_counts(&skill.tools));
    let mut report = Report::ok(
        "skill tools",
        json!({"skill": skill.name, "tools": skill.tools.iter().map(ResolvedTool::to_json).collect::<Vec<_>>(), "mcp_errors": problems, "conflicts": skill.conflicts}),
        format!("{n} tool{} listed", if n == 1 { "" } else { "s" }),
    )
    .with(Element::Table {
        title: format!("Tools for {}", skill.name),
        columns: ["Tool", "Source", "From Skill", "Read-Only", "Writes", "Checkpoint"].map(Column::left).into(),
        rows,
        empty: "(none)".into(),
    })
    .with(Element::panel("Summary", summary));
    for p in problems {
        report = report.message(Level::Warn, p);
    }
    for c in &skill.conflicts {
        report = report.message(Level::Warn, c.clone());
    }
    Ok(report)
}
