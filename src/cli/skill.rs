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
use cleveragents_engine::registry::tool_registration::AddSkill;
use cleveragents_engine::skill_registry::{
    self, Discovered, ResolvedSkill, ResolvedTool, SkillDef,
};
use cleveragents_engine::skills::{self, SOURCES};
use cleveragents_engine::tools::custom::ToolCapability;

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
    /// Whether the subcommand can run against a server (`--server`): none yet.
    pub fn served_remotely(&self) -> bool {
        false
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
            },
        ),
        SkillCommand::Remove { name, yes } => remove(ctx, &name, yes),
    }
}

fn add(ctx: &Context, input: &AddSkill) -> Result<Report, CliError> {
    ctx.store()?;
    let (reg, skill) = ctx.change(api::RegisterSkill(input.clone()))?;
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
    let store = ctx.store()?;
    if skills::lookup(name).is_err() && store.custom_skill::<SkillDef>(name)?.is_none() {
        return Err(
            CliError::new("NOT_FOUND", format!("skill `{name}` is not registered"))
                .hint("agents skill list"),
        );
    }
    if skills::lookup(name).is_err() {
        confirm(
            &format!("Remove skill {name}?"),
            yes,
            &ctx.terminal,
            &ctx.suggest(&format!("skill remove --yes {name}")),
        )?;
    }
    drop(store);
    let (_, actors) = ctx.change(api::RemoveSkill {
        name: name.to_string(),
    })?;
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

/// Every skill (built-in, registered, discovered), with the problems of discovery.
fn all_skills(ctx: &Context) -> Result<(Vec<ResolvedSkill>, Vec<String>), CliError> {
    let store = ctx.store()?;
    let mut all: Vec<ResolvedSkill> = Vec::new();
    for b in skills::builtin_names() {
        all.push(skill_registry::resolve(&store, b)?);
    }
    for r in store.custom_skills::<SkillDef>()? {
        match skill_registry::resolve(&store, &r.name) {
            Ok(s) => all.push(s),
            Err(e) => tracing::warn!(skill = %r.name, error = %e, "skill does not resolve"),
        }
    }
    let (found, problems) = discovered(ctx, &store)?;
    all.extend(found.iter().map(Discovered::resolved));
    Ok((all, problems))
}

/// The Agent Skills discovered in `agent-skill-dirs` and, when `agent-skills-in-resources`
/// is true, in `.agents/skills/` of every registered resource with a path; with the
/// problems found on the way.
fn discovered(
    ctx: &Context,
    store: &cleveragents_engine::store::Store,
) -> Result<(Vec<Discovered>, Vec<String>), CliError> {
    let config = ctx.config()?;
    let resources: Vec<(String, PathBuf)> = if config.agent_skills_in_resources() {
        store
            .resources()?
            .into_iter()
            .filter_map(|r| {
                let path = r.properties.get("path")?.as_str()?.to_string();
                Some((r.name, PathBuf::from(path)))
            })
            .collect()
    } else {
        Vec::new()
    };
    Ok(skill_registry::discover(
        &config.agent_skill_dirs(),
        &resources,
    ))
}

/// A registered or built-in skill, else a discovered one (`discovered/<name>`).
fn resolve_any(
    ctx: &Context,
    store: &cleveragents_engine::store::Store,
    name: &str,
) -> Result<ResolvedSkill, CliError> {
    match skill_registry::resolve(store, name) {
        Ok(s) => Ok(s),
        Err(e) => discovered(ctx, store)?
            .0
            .iter()
            .map(Discovered::resolved)
            .find(|d| d.name == name)
            .ok_or_else(|| e.into()),
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
    let (all, problems) = all_skills(ctx)?;
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
    let store = ctx.store()?;
    let skill = resolve_any(ctx, &store, name)?;
    let actors: Vec<String> = store
        .actors()?
        .into_iter()
        .filter(|a| a.definition.skills.iter().any(|s| s == &skill.name))
        .map(|a| a.name)
        .collect();
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

/// A scratch directory removed on drop.
struct Scratch(PathBuf);

impl Scratch {
    fn path(&self) -> &std::path::Path {
        &self.0
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// The live tools of a skill's MCP servers: each is started in a scratch directory (or
/// reached), listed and stopped.
fn live_mcp_tools(skill: &ResolvedSkill) -> (Vec<ResolvedTool>, Vec<String>) {
    let mut tools = Vec::new();
    let mut problems = Vec::new();
    if skill.mcp_servers.is_empty() {
        return (tools, problems);
    }
    let scratch = Scratch(std::env::temp_dir().join(format!("agents-mcp-{}", std::process::id())));
    if let Err(e) = std::fs::create_dir_all(scratch.path()) {
        problems.push(format!("no scratch directory for the MCP servers: {e}"));
        return (tools, problems);
    }
    let pool = match cleveragents_engine::tools::mcp::McpPool::new() {
        Ok(p) => p,
        Err(e) => {
            problems.push(e);
            return (tools, problems);
        }
    };
    let home = scratch.path().join("home");
    let _ = std::fs::create_dir_all(&home);
    let place = cleveragents_engine::tools::mcp::Placement {
        cwd: scratch.path().to_path_buf(),
        writable: vec![scratch.path().to_path_buf()],
        env: vec![
            ("PATH".into(), std::env::var("PATH").unwrap_or_default()),
            ("HOME".into(), home.display().to_string()),
        ],
        network: true,
        allow_unconfined: true,
        log_dir: None,
        ..cleveragents_engine::tools::mcp::Placement::default()
    };
    for (from, spec) in &skill.mcp_servers {
        match pool.connect(spec, &place) {
            Ok(list) => {
                for t in list {
                    tools.push(ResolvedTool {
                        name: t.qualified,
                        description: t.description,
                        source: cleveragents_engine::tools::custom::ToolSource::Mcp,
                        capability: t.capability,
                        from_skill: (from != &skill.name).then(|| from.clone()),
                        external: None,
                    });
                }
            }
            Err(e) => problems.push(e),
        }
    }
    pool.shutdown();
    (tools, problems)
}

fn tools(ctx: &Context, name: &str) -> Result<Report, CliError> {
    let store = ctx.store()?;
    let mut skill = resolve_any(ctx, &store, name)?;
    let (live, problems) = live_mcp_tools(&skill);
    skill.tools.extend(live);
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
