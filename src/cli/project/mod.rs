//! `agents project create|link-resource|unlink-resource|list|show|delete` and
//! `agents project validation add|remove|list` (spec sections 06 and 14).

pub mod context;

use clap::Subcommand;
use serde_json::json;

use super::{CliError, Context, confirm::confirm, view};
use crate::output::{Column, Element, Level, Report};
use cleveragents_engine::api;
use cleveragents_engine::api::registry_views::{
    IndexStatus, LinkedResource, Project, Validation, projects,
};

/// `agents project ...`
#[derive(Debug, Subcommand)]
pub enum ProjectCommand {
    /// Create a project, optionally linking resources and adding invariants
    Create {
        /// Description
        #[arg(short, long, value_name = "TEXT")]
        description: Option<String>,
        /// Registered resource to link (repeatable)
        #[arg(long = "resource", value_name = "RESOURCE")]
        resources: Vec<String>,
        /// Project invariant for every plan targeting it (repeatable)
        #[arg(long = "invariant", value_name = "TEXT")]
        invariants: Vec<String>,
        /// Invariant reconciliation actor for plans targeting this project
        #[arg(long, value_name = "ACTOR")]
        invariant_actor: Option<String>,
        /// Project name (e.g. local/api-service)
        name: String,
    },
    /// Link a registered resource to a project
    LinkResource {
        /// Read-only within this project
        #[arg(long)]
        read_only: bool,
        /// Short name for the resource within the project
        #[arg(long, value_name = "ALIAS")]
        alias: Option<String>,
        /// Project
        project: String,
        /// Resource
        resource: String,
    },
    /// Unlink a resource from a project (it stays registered)
    UnlinkResource {
        /// Do not ask for confirmation
        #[arg(short, long)]
        yes: bool,
        /// Project
        project: String,
        /// Resource (name or alias)
        resource: String,
    },
    /// List projects
    List {
        /// Only this namespace
        #[arg(short, long, value_name = "NS")]
        namespace: Option<String>,
        /// Show only projects whose name matches this regular expression
        regex: Option<String>,
    },
    /// Show a project: resources, validations, invariants, active plans
    Show {
        /// Project name or id
        project: String,
    },
    /// Delete a project (a JSON backup of its records is kept)
    Delete {
        /// Cancel active plans and delete anyway
        #[arg(short, long)]
        force: bool,
        /// Do not ask for confirmation
        #[arg(short, long)]
        yes: bool,
        /// Project name or id
        project: String,
    },
    /// Validation commands run against a project's changes
    #[command(subcommand)]
    Validation(ValidationCommand),
    /// A project's context policy per view (what actors see without asking)
    #[command(subcommand)]
    Context(context::ContextCommand),
}

/// `agents project validation ...`
#[derive(Debug, Subcommand)]
pub enum ValidationCommand {
    /// Add a validation command
    Add {
        /// What it checks
        #[arg(short, long, value_name = "TEXT")]
        description: Option<String>,
        /// Must pass (default)
        #[arg(long, overrides_with = "informational")]
        required: bool,
        /// Reported but never blocks
        #[arg(long)]
        informational: bool,
        /// Timeout in seconds
        #[arg(long, default_value_t = projects::DEFAULT_TIMEOUT_SECS, value_name = "SECONDS")]
        timeout: u64,
        /// Linked resource (name or alias) it runs against
        #[arg(long, value_name = "RESOURCE")]
        resource: Option<String>,
        /// Keep the host network (default: a private network with only loopback, where tests
        /// may still listen on 127.0.0.1)
        #[arg(long)]
        network: bool,
        /// Project
        project: String,
        /// Shell command (quoted)
        command: String,
    },
    /// Remove a validation
    Remove {
        /// Do not ask for confirmation
        #[arg(short, long)]
        yes: bool,
        /// Project
        project: String,
        /// Validation id (val_...)
        validation: String,
    },
    /// List a project's validations
    List {
        /// Project
        project: String,
    },
}

impl ProjectCommand {
    /// The subcommand path below `project`.
    pub fn name(&self) -> String {
        match self {
            ProjectCommand::Create { .. } => "create".into(),
            ProjectCommand::LinkResource { .. } => "link-resource".into(),
            ProjectCommand::UnlinkResource { .. } => "unlink-resource".into(),
            ProjectCommand::List { .. } => "list".into(),
            ProjectCommand::Show { .. } => "show".into(),
            ProjectCommand::Delete { .. } => "delete".into(),
            ProjectCommand::Context(c) => c.name().into(),
            ProjectCommand::Validation(v) => format!(
                "validation {}",
                match v {
                    ValidationCommand::Add { .. } => "add",
                    ValidationCommand::Remove { .. } => "remove",
                    ValidationCommand::List { .. } => "list",
                }
            ),
        }
    }

    /// Whether the subcommand can run against a server (`--server`): every one, since each
    /// reaches the engine only through the API.
    pub fn served_remotely(&self) -> bool {
        true
    }
}

/// Runs a project subcommand.
///
/// # Errors
/// Unknown projects or resources, duplicates, active plans blocking deletion, bad values.
pub fn run(command: ProjectCommand, ctx: &Context) -> Result<Report, CliError> {
    match command {
        ProjectCommand::Create {
            description,
            resources,
            invariants,
            invariant_actor,
            name,
        } => create(
            ctx,
            projects::CreateRequest {
                name,
                description,
                resources,
                invariants,
                invariant_actor,
            },
        ),
        ProjectCommand::LinkResource {
            read_only,
            alias,
            project,
            resource,
        } => link(ctx, &project, &resource, read_only, alias.as_deref()),
        ProjectCommand::UnlinkResource {
            yes,
            project,
            resource,
        } => unlink(ctx, &project, &resource, yes),
        ProjectCommand::List { namespace, regex } => {
            list(ctx, namespace.as_deref(), regex.as_deref())
        }
        ProjectCommand::Show { project } => show(ctx, &project),
        ProjectCommand::Context(c) => context::run(c, ctx),
        ProjectCommand::Delete {
            force,
            yes,
            project,
        } => delete(ctx, &project, force, yes),
        ProjectCommand::Validation(v) => match v {
            ValidationCommand::Add {
                description,
                required: _,
                informational,
                timeout,
                resource,
                network,
                project,
                command,
            } => validation_add(
                ctx,
                projects::ValidationRequest {
                    project,
                    command,
                    description,
                    required: !informational,
                    timeout_secs: timeout,
                    resource,
                    network,
                },
            ),
            ValidationCommand::Remove {
                yes,
                project,
                validation,
            } => validation_remove(ctx, &project, &validation, yes),
            ValidationCommand::List { project } => validation_list(ctx, &project),
        },
    }
}

/// The project as structured data.
pub fn project_json(p: &Project) -> serde_json::Value {
    json!({
        "project_id": p.project_id.to_string(),
        "name": p.name,
        "description": p.description,
        "invariant_actor": p.invariant_actor,
        "automation_profile": p.automation_profile,
        "created_at": p.created_at.to_string(),
        "updated_at": p.updated_at.to_string(),
    })
}

fn link_json(l: &LinkedResource) -> serde_json::Value {
    json!({
        "resource_id": l.resource.resource_id.to_string(),
        "resource": l.resource.name,
        "type": l.resource.type_name,
        "alias": l.alias,
        "read_only": l.read_only,
    })
}

fn validation_json(v: &Validation) -> serde_json::Value {
    json!({
        "validation_id": v.validation_id,
        "project": v.project,
        "command": v.command,
        "description": v.description,
        "mode": if v.required { "required" } else { "informational" },
        "timeout_secs": v.timeout_secs,
        "resource": v.resource,
        "network": v.network,
        "created_at": v.created_at.to_string(),
    })
}

fn links_table(title: &str, links: &[LinkedResource]) -> Element {
    Element::Table {
        title: title.into(),
        columns: ["Resource", "Type", "Alias", "Sandbox", "Read-Only"]
            .map(Column::left)
            .into(),
        rows: links
            .iter()
            .map(|l| {
                vec![
                    view::id(l.resource.name.clone()),
                    l.resource.type_name.clone().into(),
                    view::or(l.alias.as_deref(), "-"),
                    l.resource.sandbox_strategy().to_string().into(),
                    view::flag_cell(
                        l.read_only
                            || !l
                                .resource
                                .resource_type()
                                .is_some_and(|t| t.capabilities.writable),
                    ),
                ]
            })
            .collect(),
        empty: "No resources linked.".into(),
    }
}

fn create(ctx: &Context, req: projects::CreateRequest) -> Result<Report, CliError> {
    ctx.check_store()?;
    ctx.config()?;
    let c = ctx.change(api::CreateProject(req))?;
    let p = &c.project;
    let mut report = Report::ok(
        "project create",
        json!({
            "project": project_json(p),
            "resources": c.resources.iter().map(link_json).collect::<Vec<_>>(),
            "invariants": c.invariants,
        }),
        "Project created",
    )
    .with(Element::panel(
        "Project",
        [
            ("Name", view::id(p.name.clone())),
            ("ID", view::id(p.project_id.to_string())),
            ("Description", view::or(p.description.as_deref(), "(none)")),
            ("Created", view::time(&p.created_at).into()),
        ],
    ))
    .with(links_table("Linked Resources", &c.resources));
    let mut items: Vec<String> = c
        .invariants
        .iter()
        .enumerate()
        .map(|(i, inv)| format!("{}. {}", i + 1, inv.text))
        .collect();
    if items.is_empty() {
        items.push("(none)".into());
    }
    items.push(format!(
        "Reconciliation Actor: {}",
        p.invariant_actor.as_deref().unwrap_or("(inherits global)")
    ));
    report = report
        .with(Element::List {
            title: "Invariants".into(),
            items,
        })
        .with(Element::panel(
            "Defaults",
            [
                ("Validations", "0"),
                ("Automation Profile", "(inherits global)"),
            ],
        ));
    if c.resources.is_empty() {
        report = report.with(Element::List {
            title: "Next Steps".into(),
            items: vec![ctx.suggest(&format!("project link-resource {} <resource>", p.name))],
        });
    }
    Ok(report)
}

fn link(
    ctx: &Context,
    project: &str,
    resource: &str,
    read_only: bool,
    alias: Option<&str>,
) -> Result<Report, CliError> {
    ctx.check_store()?;
    let (p, l) = ctx.change(api::LinkProjectResource {
        project: project.to_string(),
        resource: resource.to_string(),
        read_only,
        alias: alias.map(str::to_string),
    })?;
    let built = super::indexing::build(ctx, &l.resource.name, true)?;
    let writable = l
        .resource
        .resource_type()
        .is_some_and(|t| t.capabilities.writable)
        && !l.read_only;
    Ok(super::indexing::attach(
        Report::ok(
            "project link-resource",
            json!({"project": project_json(&p), "link": link_json(&l), "writable": writable}),
            "Resource linked to project",
        )
        .with(Element::panel(
            "Resource Linked",
            [
                ("Project", view::id(p.name.clone())),
                ("Resource", view::id(l.resource.name.clone())),
                ("Type", l.resource.type_name.clone().into()),
                ("Alias", view::or(l.alias.as_deref(), "(none)")),
                (
                    "Read-Only",
                    if writable || l.read_only {
                        view::yes_no(l.read_only).into()
                    } else {
                        format!("yes ({} resources cannot be written)", l.resource.type_name).into()
                    },
                ),
            ],
        ))
        .with(Element::panel(
            "Permissions",
            [
                ("Read", "allowed"),
                (
                    "Write",
                    if writable {
                        "allowed (in the plan's sandbox)"
                    } else {
                        "denied"
                    },
                ),
                (
                    "Apply",
                    if writable {
                        "requires approval"
                    } else {
                        "denied"
                    },
                ),
            ],
        )),
        built,
    ))
}

fn unlink(ctx: &Context, project: &str, resource: &str, yes: bool) -> Result<Report, CliError> {
    let client = ctx.client()?;
    let (p, l, _) = client.project_unlink(project, resource)?;
    confirm(
        &format!("Unlink {} from {}?", l.resource.name, p.name),
        yes,
        &ctx.terminal,
        &ctx.suggest(&format!(
            "project unlink-resource --yes {} {}",
            p.name, l.resource.name
        )),
    )?;
    let (p, l, active) = ctx.change(api::UnlinkProjectResource {
        project: project.to_string(),
        resource: resource.to_string(),
    })?;
    let (remaining, linking) = client.link_counts(&p.name, &l.resource.name)?;
    let (cleanup, cleanup_panel) = if linking > 0 {
        (serde_json::Value::Null, None)
    } else {
        super::indexing::cleanup(ctx, &l.resource.name)?
    };
    let mut report = Report::ok(
        "project unlink-resource",
        json!({"project": project_json(&p), "link": link_json(&l), "remaining_resources": remaining, "active_plans": active.iter().map(|a| a.plan_id.to_string()).collect::<Vec<_>>(), "index_cleanup": cleanup}),
        "Resource unlinked from project",
    )
    .with(Element::panel(
        "Resource Unlinked",
        [("Project", view::id(p.name.clone())), ("Resource", view::id(l.resource.name.clone())), ("Type", l.resource.type_name.clone().into())],
    ))
    .with(Element::panel(
        "Project Summary",
        [("Linked Resources", format!("{remaining} remaining")), ("Active Plans", active.len().to_string())],
    ));
    if let Some(panel) = cleanup_panel {
        report = report.with(panel);
    }
    if !active.is_empty() {
        report = report.message(
            Level::Warn,
            format!(
                "active plans of {} still refer to {}: {}",
                p.name,
                l.resource.name,
                view::short_ids(
                    &active
                        .iter()
                        .map(|a| a.plan_id.to_string())
                        .collect::<Vec<_>>()
                )
                .join(", ")
            ),
        );
    }
    Ok(report)
}

fn list(ctx: &Context, ns: Option<&str>, regex: Option<&str>) -> Result<Report, CliError> {
    view::regex(regex, "agents project list 'api'")?;
    let all = ctx.client()?.projects(ns, regex)?;
    let n = all.len();
    let shorts = view::short_ids(
        &all.iter()
            .map(|s| s.project.project_id.to_string())
            .collect::<Vec<_>>(),
    );
    let rows = all
        .iter()
        .zip(shorts)
        .map(|(s, short)| {
            vec![
                view::id(short),
                view::id(s.project.name.clone()),
                s.resources.to_string().into(),
                s.active_plans.to_string().into(),
                view::or(s.project.automation_profile.as_deref(), "(global)"),
            ]
        })
        .collect();
    Ok(Report::ok(
        "project list",
        json!({"projects": all.iter().map(|s| { let mut j = project_json(&s.project); j["resources"] = json!(s.resources); j["active_plans"] = json!(s.active_plans); j }).collect::<Vec<_>>()}),
        format!("{n} project{} listed", if n == 1 { "" } else { "s" }),
    )
    .with(Element::Table {
        title: "Projects".into(),
        columns: vec![Column::left("ID"), Column::left("Name"), Column::right("Resources"), Column::right("Active Plans"), Column::left("Profile")],
        rows,
        empty: "No projects found.".into(),
    })
    .with(Element::panel(
        "Summary",
        [
            ("Total", n.to_string()),
            ("With Resources", all.iter().filter(|s| s.resources > 0).count().to_string()),
            ("Active Plans", all.iter().map(|s| s.active_plans).sum::<usize>().to_string()),
        ],
    )))
}

fn validations_table(title: String, vs: &[Validation]) -> Element {
    Element::Table {
        title,
        columns: vec![
            Column::left("ID"),
            Column::left("Command"),
            Column::left("Mode"),
            Column::right("Timeout"),
            Column::left("Resource"),
        ],
        rows: vs
            .iter()
            .map(|v| {
                vec![
                    view::id(v.validation_id.clone()),
                    v.command.clone().into(),
                    (if v.required {
                        "required"
                    } else {
                        "informational"
                    })
                    .into(),
                    format!("{}s", v.timeout_secs).into(),
                    view::or(v.resource.as_deref(), "(all)"),
                ]
            })
            .collect(),
        empty: "No validations.".into(),
    }
}

fn show(ctx: &Context, project: &str) -> Result<Report, CliError> {
    let shown = ctx.client()?.project(project)?;
    let (d, indexing): (_, Vec<IndexStatus>) = (shown.details, shown.indexing);
    let p = &d.project;
    Ok(Report::ok(
        "project show",
        json!({
            "project": project_json(p),
            "resources": d.resources.iter().map(link_json).collect::<Vec<_>>(),
            "validations": d.validations.iter().map(validation_json).collect::<Vec<_>>(),
            "invariants": d.invariants,
            "active_plans": d.active_plans.iter().map(|a| json!({"plan_id": a.plan_id.to_string(), "action": a.action_name, "phase": a.phase(), "state": a.state()})).collect::<Vec<_>>(),
            "indexing": indexing.iter().map(super::indexing::status_json).collect::<Vec<_>>(),
        }),
        "Project loaded",
    )
    .with(Element::panel(
        "Project Details",
        [
            ("Name", view::id(p.name.clone())),
            ("ID", view::id(p.project_id.to_string())),
            ("Description", view::or(p.description.as_deref(), "(none)")),
            ("Resources", d.resources.len().to_string().into()),
            ("Automation Profile", view::or(p.automation_profile.as_deref(), "(inherits global)")),
            ("Invariant Actor", view::or(p.invariant_actor.as_deref(), "(inherits global)")),
            ("Created", view::time(&p.created_at).into()),
        ],
    ))
    .with(links_table("Linked Resources", &d.resources))
    .with(super::indexing::table(&indexing))
    .with(validations_table(format!("Validations ({})", d.validations.len()), &d.validations))
    .with(Element::Table {
        title: "Invariants".into(),
        columns: ["ID", "Key", "Text"].map(Column::left).into(),
        rows: d.invariants.iter().map(|i| vec![view::id(i.invariant_id.clone()), view::or(i.key.as_deref(), "-"), i.text.clone().into()]).collect(),
        empty: "No project invariants.".into(),
    })
    .with(Element::Table {
        title: "Active Plans".into(),
        columns: ["Plan ID", "Action", "Phase", "State"].map(Column::left).into(),
        rows: d
            .active_plans
            .iter()
            .zip(view::short_ids(&d.active_plans.iter().map(|a| a.plan_id.to_string()).collect::<Vec<_>>()))
            .map(|(a, short)| vec![view::id(short), a.action_name.clone().into(), a.phase().as_str().into(), a.state().as_str().into()])
            .collect(),
        empty: "No active plans.".into(),
    }))
}

fn delete(ctx: &Context, project: &str, force: bool, yes: bool) -> Result<Report, CliError> {
    // Blocked deletions are refused before asking anything.
    let (p, active) = ctx.client()?.project_deletion(project, force)?;
    let question = if active.is_empty() {
        format!("Delete project {}? This cannot be undone.", p.name)
    } else {
        format!(
            "Cancel {} active plan(s) and delete project {}?",
            active.len(),
            p.name
        )
    };
    confirm(
        &question,
        yes,
        &ctx.terminal,
        &ctx.suggest(&format!(
            "project delete {}--yes {}",
            if force { "--force " } else { "" },
            p.name
        )),
    )?;
    let d = ctx.change(api::DeleteProject {
        project: p.name.clone(),
        force,
    })?;
    let mut report = Report::ok(
        "project delete",
        json!({
            "project": project_json(&d.project),
            "resources_unlinked": d.resources_unlinked,
            "validations_removed": d.validations_removed,
            "invariants_removed": d.invariants_removed,
            "plans_cancelled": d.plans_cancelled.iter().map(|(id, was)| json!({"plan_id": id, "was": was})).collect::<Vec<_>>(),
            "backup": d.backup,
        }),
        if d.plans_cancelled.is_empty() {
            "Project deleted"
        } else {
            "Project force-deleted"
        },
    );
    if !d.plans_cancelled.is_empty() {
        report = report.with(Element::List {
            title: "Force Delete".into(),
            items: d
                .plans_cancelled
                .iter()
                .zip(view::short_ids(
                    &d.plans_cancelled
                        .iter()
                        .map(|(id, _)| id.to_string())
                        .collect::<Vec<_>>(),
                ))
                .map(|((_, was), short)| format!("{short} - cancelled (was {was})"))
                .collect(),
        });
    }
    Ok(report
        .with(Element::panel(
            "Deleted",
            [
                ("Project", d.project.name.clone()),
                ("ID", d.project.project_id.to_string()),
                ("Resources Unlinked", d.resources_unlinked.to_string()),
                ("Validations Removed", d.validations_removed.to_string()),
                ("Invariants Removed", d.invariants_removed.to_string()),
                ("Plans Cancelled", d.plans_cancelled.len().to_string()),
            ],
        ))
        .with(Element::panel(
            "Backup",
            [("Snapshot", d.backup.display().to_string())],
        )))
}

fn validation_add(ctx: &Context, req: projects::ValidationRequest) -> Result<Report, CliError> {
    ctx.check_store()?;
    let v = ctx.change(api::AddValidation(req))?;
    let mut entries = vec![
        ("ID", view::id(v.validation_id.clone())),
        ("Project", view::id(v.project.clone())),
        ("Command", v.command.clone().into()),
        ("Description", view::or(v.description.as_deref(), "(none)")),
        (
            "Mode",
            (if v.required {
                "required"
            } else {
                "informational"
            })
            .into(),
        ),
    ];
    if let Some(r) = &v.resource {
        entries.push(("Resource", r.clone().into()));
    }
    entries.push(("Timeout", format!("{}s", v.timeout_secs).into()));
    Ok(Report::ok(
        "project validation add",
        json!({"validation": validation_json(&v)}),
        "Validation added",
    )
    .with(Element::panel("Validation Added", entries)))
}

fn validation_remove(
    ctx: &Context,
    project: &str,
    id: &str,
    yes: bool,
) -> Result<Report, CliError> {
    let (p, v) = ctx.client()?.validation(project, id)?;
    confirm(
        &format!("Remove validation {} from {}?", v.validation_id, p.name),
        yes,
        &ctx.terminal,
        &ctx.suggest(&format!(
            "project validation remove --yes {} {}",
            p.name, v.validation_id
        )),
    )?;
    let v = ctx.change(api::RemoveValidation {
        project: project.to_string(),
        validation: id.to_string(),
    })?;
    Ok(Report::ok(
        "project validation remove",
        json!({"validation": validation_json(&v)}),
        "Validation removed",
    )
    .with(Element::panel(
        "Validation Removed",
        [
            ("ID", view::id(v.validation_id.clone())),
            ("Command", v.command.clone().into()),
            ("Description", view::or(v.description.as_deref(), "(none)")),
        ],
    )))
}

fn validation_list(ctx: &Context, project: &str) -> Result<Report, CliError> {
    let (p, vs) = ctx.client()?.validations(project)?;
    let required = vs.iter().filter(|v| v.required).count();
    let n = vs.len();
    Ok(Report::ok(
        "project validation list",
        json!({"project": p.name, "validations": vs.iter().map(validation_json).collect::<Vec<_>>()}),
        format!("{n} validation{} listed", if n == 1 { "" } else { "s" }),
    )
    .with(validations_table("Validations".into(), &vs))
    .with(Element::panel(
        "Summary",
        [("Total", n.to_string()), ("Required", required.to_string()), ("Informational", (n - required).to_string())],
    )))
}
