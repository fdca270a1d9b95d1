//! `agents skill list|show|tools|add|remove` (spec sections 06 and 19). Only the built-in
//! skills exist: `add` and `remove` answer `NOT_SUPPORTED` (custom skill YAML and MCP servers
//! are not yet supported).

use std::path::PathBuf;

use clap::Subcommand;
use serde_json::json;

use super::{CliError, Context, view};
use crate::engine::skills::{self, SOURCES, Skill, SkillTool};
use crate::engine::tools::Capability;
use crate::output::{Cell, Column, Element, Report, Tone};

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
    /// Register a custom skill from YAML (not yet supported)
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
        /// MCP server whose tools to expose (repeatable)
        #[arg(long = "mcp-server", value_name = "SPEC")]
        mcp_servers: Vec<String>,
        /// Replace an existing skill of the same name
        #[arg(long)]
        update: bool,
        /// Skill name (default: `name` in the file)
        name: Option<String>,
    },
    /// Remove a custom skill (not yet supported; built-ins cannot be removed)
    Remove {
        /// Do not ask for confirmation
        #[arg(short, long)]
        yes: bool,
        /// Skill name
        name: String,
    },
}

impl SkillCommand {
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
/// `NOT_FOUND` for an unknown skill (with the nearest built-in), `INVALID_INPUT` for an
/// unknown `--source`, `NOT_SUPPORTED` for `add` and for `remove` of a non-built-in name,
/// `CONFLICT` for `remove` of a built-in.
pub fn run(command: SkillCommand, ctx: &Context) -> Result<Report, CliError> {
    match command {
        SkillCommand::List { namespace, source } => list(namespace.as_deref(), source.as_deref()),
        SkillCommand::Show { name } => show(ctx, &name),
        SkillCommand::Tools { name } => tools(&name),
        SkillCommand::Add { mcp_servers, .. } => {
            let mut err = CliError::new("NOT_SUPPORTED", "custom skills are not yet supported")
                .detail(format!(
                    "only the built-in skills exist ({}); skill YAML, named tools{} are not yet supported, and nothing was registered",
                    skills::builtin_names().join(", "),
                    if mcp_servers.is_empty() {
                        " and MCP servers"
                    } else {
                        ", and the MCP servers given with --mcp-server,"
                    }
                ))
                .hint("agents skill list");
            err = err.hint("name built-in skills in an actor's `skills:` list instead");
            Err(err)
        }
        SkillCommand::Remove { name, .. } => Err(match skills::lookup(&name) {
            Ok(s) => CliError::new(
                "CONFLICT",
                format!("`{}` is a built-in skill and cannot be removed", s.name),
            )
            .detail("built-in skills are compiled in; an actor that should not use it leaves it out of `skills:`"),
            Err(_) => CliError::new(
                "NOT_SUPPORTED",
                format!("custom skills are not yet supported, so `{name}` is not registered"),
            )
            .detail("nothing was removed"),
        }
        .hint("agents skill list")),
    }
}

/// A skill as structured data; `tools` is the list of tool names.
fn skill_row_json(s: &Skill) -> serde_json::Value {
    json!({
        "name": s.name,
        "description": s.description,
        "source": s.source,
        "includes": s.includes,
        "sources": s.sources(),
        "tool_count": s.tools.len(),
        "tools": s.tools.iter().map(|t| t.name.as_str()).collect::<Vec<_>>(),
    })
}

/// `yes` when the tool writes, `no` otherwise.
pub(super) fn writes_cell(c: &Capability) -> Cell {
    view::flag_cell(c.writes)
}

/// How a tool's effects are checkpointed: its scope (`file`, `snapshot`), `yes` without a
/// scope, `no` for a writing tool that cannot be checkpointed, `-` for read-only tools.
pub(super) fn checkpoint_cell(c: &Capability) -> Cell {
    if !c.writes {
        Cell::new("-", Tone::Dim)
    } else if c.checkpointable {
        Cell::from(c.checkpoint_scope.unwrap_or("yes"))
    } else {
        Cell::new("no", Tone::Warn)
    }
}

fn list(namespace: Option<&str>, source: Option<&str>) -> Result<Report, CliError> {
    if let Some(s) = source
        && !SOURCES.contains(&s)
    {
        let mut err = CliError::invalid_input(format!(
            "--source `{s}` is not a tool source; use one of: {}",
            SOURCES.join(", ")
        ));
        if let Some(near) = crate::engine::config::nearest(s, SOURCES) {
            err = err.hint(format!("did you mean `--source {near}`?"));
        }
        return Err(err);
    }
    let all = skills::list();
    let shown: Vec<&Skill> = all
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
                Cell::from(s.sources().join(", ")),
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
    Ok(Report::ok(
        "skill list",
        json!({"skills": shown.iter().map(|s| skill_row_json(s)).collect::<Vec<_>>()}),
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
    .with(Element::panel(
        "Summary",
        [
            ("Built-in", all.len().to_string()),
            ("Custom", "0 (custom skills are not yet supported)".into()),
            ("Total Tools", distinct.len().to_string()),
        ],
    )))
}

fn summary_counts(tools: &[SkillTool]) -> [(&'static str, String); 4] {
    let count = |f: &dyn Fn(&Capability) -> bool| {
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
    let skill = skills::lookup(name)?;
    let store = ctx.store()?;
    let actors: Vec<String> = store
        .actors()?
        .into_iter()
        .filter(|a| a.definition.skills.iter().any(|s| s == &skill.name))
        .map(|a| a.name)
        .collect();
    let mut summary = vec![("Total Tools", skill.tools.len().to_string())];
    summary.extend(summary_counts(&skill.tools));
    let rows = skill
        .tools
        .iter()
        .map(|t| {
            vec![
                view::id(t.name.clone()),
                Cell::from(t.source),
                writes_cell(&t.capability),
                checkpoint_cell(&t.capability),
            ]
        })
        .collect();
    Ok(Report::ok(
        "skill show",
        json!({
            "skill": {
                "name": skill.name,
                "description": skill.description,
                "source": skill.source,
                "includes": skill.includes,
                "sources": skill.sources(),
                "tools": skill.tools,
            },
            "referenced_by": {"actors": actors},
        }),
        "Skill loaded",
    )
    .with(Element::panel(
        "Skill Details",
        [
            ("Name", view::id(skill.name.clone())),
            ("Description", skill.description.clone().into()),
            ("Source", skill.source.into()),
            ("Includes", Cell::new("(none)", Tone::Dim)),
        ],
    ))
    .with(Element::Table {
        title: format!("Direct Tools ({})", skill.tools.len()),
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

fn tools(name: &str) -> Result<Report, CliError> {
    let skill = skills::lookup(name)?;
    let rows = skill
        .tools
        .iter()
        .map(|t| {
            vec![
                view::id(t.name.clone()),
                Cell::from(t.source),
                Cell::new("(direct)", Tone::Dim),
                view::flag_cell(t.capability.read_only),
                writes_cell(&t.capability),
                checkpoint_cell(&t.capability),
            ]
        })
        .collect();
    let data: Vec<serde_json::Value> = skill
        .tools
        .iter()
        .map(|t| {
            json!({
                "name": t.name,
                "description": t.description,
                "source": t.source,
                "from_skill": null,
                "capability": t.capability,
            })
        })
        .collect();
    let n = skill.tools.len();
    let mut summary = vec![
        ("Total", n.to_string()),
        ("From Includes", "0".to_string()),
        ("Direct", n.to_string()),
    ];
    summary.extend(summary_counts(&skill.tools));
    Ok(Report::ok(
        "skill tools",
        json!({"skill": skill.name, "tools": data}),
        format!("{n} tool{} listed", if n == 1 { "" } else { "s" }),
    )
    .with(Element::Table {
        title: format!("Tools for {}", skill.name),
        columns: [
            "Tool",
            "Source",
            "From Skill",
            "Read-Only",
            "Writes",
            "Checkpoint",
        ]
        .map(Column::left)
        .into(),
        rows,
        empty: "(none)".into(),
    })
    .with(Element::panel("Summary", summary)))
}
