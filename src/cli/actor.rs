//! `agents actor add|list|show|remove|run|context` (spec sections 06 and 16); `run` lives in
//! `actor_run.rs`, `context` in `actor_context.rs`.

use std::path::PathBuf;

use clap::Subcommand;
use serde_json::json;

use super::{CliError, Context, view};
use crate::output::{Column, Element, Level, Report};
use cleveragents_engine::api;
use cleveragents_engine::api::definition_views::{
    ActorError, ActorType, DEFAULT_MAX_STEPS, GraphDef, NodeDef, NodeKind, Overrides,
};
use cleveragents_engine::domain::actor::{Actor, ActorRef};

/// `agents actor ...`
#[derive(Debug, Subcommand)]
pub enum ActorCommand {
    /// Run one actor with tools in a sandbox and print its answer, tool calls and usage
    Run(super::actor_run::ActorRunArgs),
    /// Register a custom actor from a YAML file (flags override the file)
    Add {
        /// Actor YAML file
        #[arg(short, long, value_name = "FILE")]
        config: PathBuf,
        /// Actor type: llm (also spelt agent, as in spec 05) or graph
        #[arg(long = "type", value_name = "TYPE", value_parser = ["llm", "agent", "graph"])]
        actor_type: Option<String>,
        /// Skill to attach (repeatable)
        #[arg(long = "skill", value_name = "SKILL")]
        skills: Vec<String>,
        /// Description
        #[arg(short, long)]
        description: Option<String>,
        /// Allow the actor to use tools marked unsafe
        #[arg(long = "unsafe")]
        unsafe_: bool,
        /// Model option override KEY=VALUE (temperature, max-tokens, top-p, seed, stop; repeatable)
        #[arg(short = 'o', long = "option", value_name = "KEY=VALUE")]
        options: Vec<String>,
        /// Replace an existing actor of the same name
        #[arg(long)]
        update: bool,
        /// Actor name (default: `name` in the file)
        name: Option<String>,
    },
    /// List custom actors, the built-in actors and one row per provider
    List {
        /// Show only actors whose name matches this regular expression
        regex: Option<String>,
    },
    /// Show one actor (custom, built-in or PROVIDER/MODEL)
    Show {
        /// Actor name
        name: String,
    },
    /// Remove a custom actor
    Remove {
        /// Actor name
        name: String,
    },
    /// Named conversations that `actor run --context NAME` continues
    #[command(subcommand)]
    Context(super::actor_context::ContextCommand),
}

impl ActorCommand {
    /// Whether the subcommand can run against a server (`--server`): all of them. Through a
    /// server, `run` makes its model calls there with the server's configuration and keys
    /// and writes `--output` here; `context export|import` write and read the file here.
    pub fn served_remotely(&self) -> bool {
        true
    }

    /// The subcommand name.
    pub fn name(&self) -> &'static str {
        match self {
            ActorCommand::Run(_) => "run",
            ActorCommand::Add { .. } => "add",
            ActorCommand::List { .. } => "list",
            ActorCommand::Show { .. } => "show",
            ActorCommand::Remove { .. } => "remove",
            ActorCommand::Context(c) => match c.name() {
                "list" => "context list",
                "show" => "context show",
                "export" => "context export",
                "import" => "context import",
                "delete" => "context delete",
                "clear" => "context clear",
                _ => "context rm",
            },
        }
    }
}

/// Runs an actor subcommand.
///
/// # Errors
/// YAML errors with line and column, reserved names, unknown models, duplicates without
/// `--update`, unknown actors.
pub fn run(command: ActorCommand, ctx: &Context) -> Result<Report, CliError> {
    match command {
        ActorCommand::Run(args) => super::actor_run::run(args, ctx),
        ActorCommand::Add {
            config,
            actor_type,
            skills,
            description,
            unsafe_,
            options,
            update,
            name,
        } => {
            let mut opts = Vec::new();
            for o in options {
                let (k, v) = o.split_once('=').ok_or_else(|| {
                    CliError::invalid_input(format!("--option `{o}` is not KEY=VALUE"))
                        .hint("e.g. --option temperature=0.2")
                })?;
                opts.push((k.trim().to_string(), v.trim().to_string()));
            }
            let overrides = Overrides {
                actor_type: actor_type.map(|t| {
                    if t == "graph" {
                        ActorType::Graph
                    } else {
                        ActorType::Llm
                    }
                }),
                skills,
                description,
                unsafe_,
                options: opts,
            };
            add(ctx, &config, name.as_deref(), &overrides, update)
        }
        ActorCommand::List { regex } => list(ctx, regex.as_deref()),
        ActorCommand::Show { name } => show(ctx, &name),
        ActorCommand::Remove { name } => remove(ctx, &name),
        ActorCommand::Context(c) => super::actor_context::run(c, ctx),
    }
}

fn actor_json(a: &Actor) -> serde_json::Value {
    json!({
        "actor_id": a.actor_id,
        "name": a.name,
        "type": a.definition.actor_type.as_str(),
        "model": a.definition.model,
        "description": a.definition.description,
        "system_prompt": a.definition.system_prompt,
        "skills": a.definition.skills,
        "options": a.definition.options,
        "limits": a.definition.limits,
        "unsafe": a.definition.unsafe_,
        "graph": a.definition.graph,
        "config_path": a.config_path,
        "config_hash": a.config_hash,
        "created_at": a.created_at.to_string(),
        "updated_at": a.updated_at.to_string(),
    })
}

fn options_items(a: &Actor) -> Vec<String> {
    match serde_json::to_value(&a.definition.options) {
        // The YAML spelling (`max-tokens`), as in the file and in `limits`.
        Ok(serde_json::Value::Object(m)) => m
            .iter()
            .map(|(k, v)| format!("- {}: {v}", k.replace('_', "-")))
            .collect(),
        _ => vec![],
    }
}

fn add(
    ctx: &Context,
    config: &std::path::Path,
    name: Option<&str>,
    overrides: &Overrides,
    update: bool,
) -> Result<Report, CliError> {
    ctx.check_store()?;
    ctx.config()?;
    let (file, config_text) = super::action::sent_config(ctx, config)?;
    let change = api::AddActor {
        file,
        name: name.map(str::to_string),
        overrides: overrides.clone(),
        update,
        config_text,
    };
    let added = ctx.change(change).map_err(|e| match e.into_registry() {
        Ok(api::RegistryError::Actor(ActorError::Exists(n))) => CliError::new(
            "CONFLICT",
            "Actor already registered - use --update to replace",
        )
        .detail(format!("Actor already exists: {n}"))
        .hint(ctx.suggest(&format!(
            "actor add --update --config {} {n}",
            shell_words::quote(&config.display().to_string())
        ))),
        Ok(other) => other.into(),
        Err(other) => other.into(),
    })?;
    let a = &added.actor;
    let (provider, model) = a
        .definition
        .model
        .as_deref()
        .and_then(|m| m.split_once('/'))
        .unwrap_or(("(none)", "(none)"));
    let mut report = Report::ok(
        "actor add",
        json!({"actor": actor_json(a), "replaced": added.previous.is_some()}),
        if added.previous.is_some() {
            "Actor updated"
        } else {
            "Actor added"
        },
    )
    .with(Element::panel(
        if added.previous.is_some() {
            "Actor Updated"
        } else {
            "Actor Added"
        },
        [
            ("Name", view::id(a.name.clone())),
            ("Type", a.definition.actor_type.as_str().into()),
            ("Provider", provider.into()),
            ("Model", model.into()),
            ("Unsafe", view::yes_no(a.definition.unsafe_).into()),
        ],
    ))
    .with(Element::panel(
        "Config",
        [
            ("Path", a.config_path.clone().unwrap_or_default()),
            (
                "Hash",
                a.config_hash
                    .as_deref()
                    .map(view::short)
                    .unwrap_or_default(),
            ),
            ("Options", options_items(a).len().to_string()),
            (
                "Skills",
                if a.definition.skills.is_empty() {
                    "(none)".into()
                } else {
                    a.definition.skills.join(", ")
                },
            ),
        ],
    ));
    if let Some(prev) = &added.previous {
        let mut changes = Vec::new();
        changes.push(format!(
            "Model: {}",
            if prev.model == a.definition.model {
                "unchanged".to_string()
            } else {
                format!(
                    "{} -> {}",
                    prev.model.as_deref().unwrap_or("(none)"),
                    a.definition.model.as_deref().unwrap_or("(none)")
                )
            }
        ));
        let added_skills: Vec<&String> = a
            .definition
            .skills
            .iter()
            .filter(|s| !prev.skills.contains(s))
            .collect();
        let removed_skills: Vec<&String> = prev
            .skills
            .iter()
            .filter(|s| !a.definition.skills.contains(s))
            .collect();
        changes.push(format!(
            "Skills: +{} -{}{}",
            added_skills.len(),
            removed_skills.len(),
            if added_skills.is_empty() {
                String::new()
            } else {
                format!(
                    " ({})",
                    added_skills
                        .iter()
                        .map(|s| s.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                )
            }
        ));
        changes.push(format!(
            "Options: {}",
            if prev.options == a.definition.options {
                "unchanged"
            } else {
                "updated"
            }
        ));
        changes.push(format!(
            "System Prompt: {}",
            if prev.system_prompt == a.definition.system_prompt {
                "unchanged"
            } else {
                "updated"
            }
        ));
        report = report.with(Element::List {
            title: "Changes".into(),
            items: changes,
        });
    }
    if let Some(graph) = graph_of(a) {
        report = with_graph(report, &graph);
    }
    Ok(report)
}

fn list(ctx: &Context, regex: Option<&str>) -> Result<Report, CliError> {
    ctx.check_store()?;
    ctx.config()?;
    let re = view::regex(regex, "agents actor list '^local/'")?;
    let listed = ctx.client()?.actors()?;
    let providers = listed.providers;
    let rows: Vec<_> = listed
        .actors
        .into_iter()
        .filter(|r| re.as_ref().is_none_or(|re| re.is_match(&r.name)))
        .collect();
    let custom = rows.iter().filter(|r| r.kind == "custom").count();
    let n = rows.len();
    let table = rows
        .iter()
        .map(|r| {
            vec![
                view::id(r.name.clone()),
                r.actor_type.clone().into(),
                view::or(r.provider.as_deref(), "-"),
                view::or(r.model.as_deref(), "-"),
                view::flag_cell(r.builtin),
                view::flag_cell(r.unsafe_),
            ]
        })
        .collect();
    Ok(Report::ok(
        "actor list",
        json!({"actors": rows}),
        format!("{n} actor{} listed", if n == 1 { "" } else { "s" }),
    )
    .with(Element::Table {
        title: "Actors".into(),
        columns: ["Name", "Type", "Provider", "Model", "Built-in", "Unsafe"]
            .map(Column::left)
            .into(),
        rows: table,
        empty: "No actors match.".into(),
    })
    .with(Element::panel(
        "Summary",
        [
            ("Total", n.to_string()),
            ("Custom", custom.to_string()),
            ("Built-in", (n - custom).to_string()),
            ("Providers", providers.to_string()),
        ],
    )))
}

fn show(ctx: &Context, name: &str) -> Result<Report, CliError> {
    ctx.check_store()?;
    ctx.config()?;
    let detail = ctx.client()?.actor(name)?;
    let (r, referenced) = (detail.actor, detail.referenced_by_actions);
    let report = match &r {
        ActorRef::Custom { actor } => {
            let a = actor.as_ref();
            let (provider, model) = a
                .definition
                .model
                .as_deref()
                .and_then(|m| m.split_once('/'))
                .unwrap_or(("(none)", "(none)"));
            let mut rep = Report::ok(
                "actor show",
                json!({"actor": actor_json(a), "referenced_by_actions": referenced}),
                "Actor loaded",
            )
            .with(Element::panel(
                "Actor Details",
                [
                    ("Name", view::id(a.name.clone())),
                    ("Type", a.definition.actor_type.as_str().into()),
                    ("Provider", provider.into()),
                    ("Model", model.into()),
                    ("Built-in", "no".into()),
                    ("Unsafe", view::yes_no(a.definition.unsafe_).into()),
                    (
                        "Description",
                        view::or(a.definition.description.as_deref(), "(none)"),
                    ),
                    ("Created", view::time(&a.created_at).into()),
                    ("Updated", view::time(&a.updated_at).into()),
                    ("Config", view::or(a.config_path.as_deref(), "(none)")),
                    (
                        "Config Hash",
                        a.config_hash
                            .as_deref()
                            .map(view::short)
                            .unwrap_or_default()
                            .into(),
                    ),
                ],
            ));
            let opts = options_items(a);
            rep = rep.with(Element::List {
                title: "Options".into(),
                items: if opts.is_empty() {
                    vec!["(defaults)".into()]
                } else {
                    opts
                },
            });
            let limits = [
                ("max-turns", a.definition.limits.max_turns.map(u64::from)),
                ("max-tokens", a.definition.limits.max_tokens),
            ];
            rep = rep.with(Element::panel(
                "Limits",
                limits.iter().map(|(k, v)| {
                    (
                        k.to_string(),
                        v.map(|n| n.to_string()).unwrap_or_else(|| "(none)".into()),
                    )
                }),
            ));
            rep = rep.with(Element::List {
                title: "Skills".into(),
                items: if a.definition.skills.is_empty() {
                    vec!["(none)".into()]
                } else {
                    a.definition
                        .skills
                        .iter()
                        .map(|s| format!("- {s}"))
                        .collect()
                },
            });
            if let Some(p) = &a.definition.system_prompt {
                rep = rep.with(Element::List {
                    title: "System Prompt".into(),
                    items: vec![p.clone()],
                });
            }
            if let Some(graph) = graph_of(a) {
                rep = with_graph(rep, &graph);
            }
            rep.with(Element::panel(
                "Usage",
                [(
                    "Referenced by Actions",
                    if referenced.is_empty() {
                        "0".to_string()
                    } else {
                        format!("{} ({})", referenced.len(), referenced.join(", "))
                    },
                )],
            ))
        }
        ActorRef::Builtin { name, description } => {
            Report::ok("actor show", json!({"actor": r}), "Actor loaded").with(Element::panel(
                "Actor Details",
                [
                    ("Name", view::id(name.clone())),
                    ("Type", "offline".into()),
                    ("Built-in", "yes".into()),
                    ("Unsafe", "no".into()),
                    ("Description", description.clone().into()),
                ],
            ))
        }
        ActorRef::Provider {
            name,
            provider,
            model,
            kind,
            base_url,
            api_key_env,
        } => Report::ok("actor show", json!({"actor": r}), "Actor loaded").with(Element::panel(
            "Actor Details",
            [
                ("Name", view::id(name.clone())),
                ("Type", "provider".into()),
                ("Provider", provider.clone().into()),
                ("Model", model.clone().into()),
                ("API", kind.clone().into()),
                ("Base URL", base_url.clone().into()),
                (
                    "Key Variable",
                    view::or(api_key_env.as_deref(), "(none: keyless)"),
                ),
                ("Built-in", "yes".into()),
            ],
        )),
    };
    Ok(report)
}

fn remove(ctx: &Context, name: &str) -> Result<Report, CliError> {
    ctx.check_store()?;
    ctx.config()?;
    let (a, impact) = ctx.change(api::RemoveActor {
        actor: name.to_string(),
    })?;
    let mut report = Report::ok(
        "actor remove",
        json!({"actor": actor_json(&a), "impact": impact}),
        "Actor removed",
    )
    .with(Element::panel(
        "Actor Removed",
        [
            ("Name", view::id(a.name.clone())),
            ("Model", view::or(a.definition.model.as_deref(), "(none)")),
        ],
    ))
    .with(Element::panel(
        "Impact",
        [
            ("Actions Referencing", impact.actions.len().to_string()),
            ("Projects Referencing", impact.projects.len().to_string()),
            ("Active Plans", impact.active_plans.len().to_string()),
        ],
    ))
    .with(Element::panel("Cleanup", [("Config", "kept on disk")]));
    if !impact.actions.is_empty() || !impact.projects.is_empty() || !impact.active_plans.is_empty()
    {
        let mut who: Vec<String> = impact
            .actions
            .iter()
            .map(|a| format!("action {a}"))
            .collect();
        who.extend(impact.projects.iter().map(|p| format!("project {p}")));
        who.extend(
            view::short_ids(&impact.active_plans)
                .into_iter()
                .map(|p| format!("plan {p}")),
        );
        report = report.message(
            Level::Warn,
            format!(
                "{} no longer resolve{} until {} is registered again: {}",
                if who.len() == 1 {
                    "this reference"
                } else {
                    "these references"
                },
                if who.len() == 1 { "s" } else { "" },
                a.name,
                who.join(", ")
            ),
        );
    }
    Ok(report)
}

/// The graph of a graph actor, when it reads back.
fn graph_of(a: &Actor) -> Option<GraphDef> {
    a.definition
        .graph
        .as_ref()
        .and_then(|g| GraphDef::from_value(g).ok())
}

/// What a node does, in a few words (`openai/gpt-4o`, `tool read_file`, `actor local/x`).
fn node_detail(n: &NodeDef) -> String {
    match n.kind {
        NodeKind::Llm => n.model.clone().unwrap_or_default(),
        NodeKind::Tool if n.anonymous => format!(
            "anonymous tool{}",
            n.description
                .as_deref()
                .map(|d| format!(": {}", view::clip(d, 40)))
                .unwrap_or_default()
        ),
        NodeKind::Tool => format!("tool {}", n.tool.as_deref().unwrap_or_default()),
        NodeKind::Actor => format!("actor {}", n.actor.as_deref().unwrap_or_default()),
    }
}

/// The graph drawn as a panel (entry, step limit, cycle), a node table and an edge table;
/// the JSON data carries the graph as stored.
fn with_graph(report: Report, g: &GraphDef) -> Report {
    let cycle = g.cycle();
    report
        .with(Element::panel(
            "Graph",
            [
                ("Entry", g.entry_node().unwrap_or("(none)").to_string()),
                ("Nodes", g.nodes.len().to_string()),
                ("Edges", g.edges.len().to_string()),
                (
                    "Max Steps",
                    g.limits
                        .max_steps
                        .map(|n| n.to_string())
                        .unwrap_or_else(|| format!("{DEFAULT_MAX_STEPS} (default)")),
                ),
                (
                    "Cycle",
                    cycle
                        .map(|c| c.join(" -> "))
                        .unwrap_or_else(|| "none".into()),
                ),
            ],
        ))
        .with(Element::Table {
            title: "Nodes".into(),
            columns: ["Node", "Type", "Runs", "Skills", "Limits"]
                .map(Column::left)
                .into(),
            rows: g
                .nodes
                .iter()
                .map(|n| {
                    let limits = [
                        n.limits.max_turns.map(|t| format!("max-turns {t}")),
                        n.limits.max_tokens.map(|t| format!("max-tokens {t}")),
                    ]
                    .into_iter()
                    .flatten()
                    .collect::<Vec<_>>();
                    vec![
                        view::id(n.name.clone()),
                        n.kind.as_str().into(),
                        node_detail(n).into(),
                        if n.skills.is_empty() {
                            "-".into()
                        } else {
                            n.skills.join(", ").into()
                        },
                        if limits.is_empty() {
                            "-".into()
                        } else {
                            limits.join(", ").into()
                        },
                    ]
                })
                .collect(),
            empty: "No nodes.".into(),
        })
        .with(Element::Table {
            title: "Edges".into(),
            columns: ["From", "To", "When"].map(Column::left).into(),
            rows: g
                .edges
                .iter()
                .map(|e| {
                    vec![
                        e.source.clone().into(),
                        e.target.clone().into(),
                        e.when
                            .as_ref()
                            .map(|c| c.describe())
                            .unwrap_or_else(|| "always".into())
                            .into(),
                    ]
                })
                .collect(),
            empty: "No edges: the entry node runs, then the graph ends.".into(),
        })
}
