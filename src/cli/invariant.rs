//! `agents invariant add|list|remove` (spec sections 06 and 12).

use clap::Subcommand;
use serde_json::json;

use super::{CliError, Context, confirm::confirm, view};
use crate::output::{Column, Element, Level, Report};
use cleveragents_engine::api;
use cleveragents_engine::api::registry_views::{
    Invariant, InvariantError, InvariantFilter as Filter, Targets,
};
use cleveragents_engine::domain::InvariantScope;

/// `agents invariant ...`
#[derive(Debug, Subcommand)]
pub enum InvariantCommand {
    /// Add an invariant at one or more scopes
    Add {
        /// Applies to every plan
        #[arg(long)]
        global: bool,
        /// Applies to plans targeting this project
        #[arg(short, long, value_name = "PROJECT")]
        project: Option<String>,
        /// Applies to this plan and its children (repeatable)
        #[arg(long = "plan", value_name = "PLAN_ID")]
        plans: Vec<String>,
        /// Carried into plans of this action (repeatable)
        #[arg(long = "action", value_name = "ACTION")]
        actions: Vec<String>,
        /// Conflict key: invariants sharing a key conflict, and the narrowest scope wins
        #[arg(long, value_name = "KEY")]
        key: Option<String>,
        /// The constraint
        text: String,
    },
    /// List invariants (all, or those at the given scopes)
    List {
        /// Global invariants
        #[arg(long)]
        global: bool,
        /// A project's invariants
        #[arg(short, long, value_name = "PROJECT")]
        project: Option<String>,
        /// A plan's invariants (with --effective: the reconciled view)
        #[arg(long, value_name = "PLAN_ID")]
        plan: Option<String>,
        /// An action's invariants
        #[arg(long, value_name = "ACTION")]
        action: Option<String>,
        /// With --plan: every scope reconciled (duplicates dropped, key conflicts resolved)
        #[arg(long)]
        effective: bool,
        /// Show only invariants whose text matches this regular expression
        regex: Option<String>,
    },
    /// Remove an invariant by id (inv_...)
    Remove {
        /// Do not ask for confirmation
        #[arg(short, long)]
        yes: bool,
        /// Invariant id
        id: String,
    },
}

impl InvariantCommand {
    /// Whether the subcommand can run against a server (`--server`): every one, since each
    /// reaches the engine only through the API.
    pub fn served_remotely(&self) -> bool {
        true
    }

    /// The subcommand name.
    pub fn name(&self) -> &'static str {
        match self {
            InvariantCommand::Add { .. } => "add",
            InvariantCommand::List { .. } => "list",
            InvariantCommand::Remove { .. } => "remove",
        }
    }
}

/// Runs an invariant subcommand.
///
/// # Errors
/// No scope, empty text, invalid keys, unknown targets or ids.
pub fn run(command: InvariantCommand, ctx: &Context) -> Result<Report, CliError> {
    match command {
        InvariantCommand::Add {
            global,
            project,
            plans,
            actions,
            key,
            text,
        } => add(
            ctx,
            &Targets {
                global,
                project,
                plans,
                actions,
            },
            &text,
            key.as_deref(),
        ),
        InvariantCommand::List {
            global,
            project,
            plan,
            action,
            effective,
            regex,
        } => {
            if effective {
                let plan = plan.ok_or(InvariantError::EffectiveNeedsPlan)?;
                effective_view(ctx, &plan, regex.as_deref())
            } else {
                list(
                    ctx,
                    &Filter {
                        global,
                        project,
                        plan,
                        action,
                    },
                    regex.as_deref(),
                )
            }
        }
        InvariantCommand::Remove { yes, id } => remove(ctx, &id, yes),
    }
}

/// `global`, `project`, `action` or `plan`; carried action invariants show as `action`.
pub fn source_label(i: &Invariant) -> &'static str {
    i.scope.as_str()
}

fn add(
    ctx: &Context,
    targets: &Targets,
    text: &str,
    key: Option<&str>,
) -> Result<Report, CliError> {
    ctx.check_store()?;
    let added = ctx.change(api::AddInvariant {
        targets: targets.clone(),
        text: text.to_string(),
        key: key.map(str::to_string),
    })?;
    let n = added.len();
    let mut report = Report::ok(
        "invariant add",
        json!({"invariants": added}),
        if n == 1 {
            "Invariant added".to_string()
        } else {
            format!("{n} invariants added")
        },
    );
    for i in &added {
        let mut entries = Vec::new();
        match i.scope {
            InvariantScope::Project => {
                entries.push(("Project", view::id(i.project.clone().unwrap_or_default())))
            }
            InvariantScope::Action => {
                entries.push(("Action", view::id(i.action.clone().unwrap_or_default())))
            }
            InvariantScope::Plan => entries.push((
                "Plan",
                view::id(i.plan_id.map(|p| p.to_string()).unwrap_or_default()),
            )),
            InvariantScope::Global => {}
        }
        entries.push(("Invariant", i.text.clone().into()));
        entries.push(("Scope", i.scope.as_str().into()));
        if let Some(k) = &i.key {
            entries.push(("Key", k.clone().into()));
        }
        entries.push(("ID", view::id(i.invariant_id.clone())));
        report = report.with(Element::panel("Invariant Added", entries));
    }
    Ok(report)
}

fn list(ctx: &Context, filter: &Filter, regex: Option<&str>) -> Result<Report, CliError> {
    view::regex(regex, "agents invariant list 'API'")?;
    let all: Vec<Invariant> = ctx.client()?.invariants(filter.clone(), regex)?;
    let title = match (filter.global, &filter.project, &filter.plan, &filter.action) {
        (true, None, None, None) => "Global Invariants".to_string(),
        (false, Some(p), None, None) => format!("Project Invariants ({p})"),
        (false, None, Some(p), None) => format!("Plan Invariants ({p})"),
        (false, None, None, Some(a)) => format!("Action Invariants ({a})"),
        _ => "Invariants".to_string(),
    };
    let n = all.len();
    Ok(Report::ok(
        "invariant list",
        json!({"invariants": all}),
        format!("{n} invariant{}", if n == 1 { "" } else { "s" }),
    )
    .with(Element::Table {
        title,
        columns: ["ID", "Scope", "Key", "Text"].map(Column::left).into(),
        rows: all
            .iter()
            .map(|i| {
                vec![
                    view::id(i.invariant_id.clone()),
                    i.scope_label().into(),
                    view::or(i.key.as_deref(), "-"),
                    i.text.clone().into(),
                ]
            })
            .collect(),
        empty: "No invariants found.".into(),
    }))
}

fn effective_view(ctx: &Context, plan: &str, regex: Option<&str>) -> Result<Report, CliError> {
    view::regex(regex, "agents invariant list --plan PLAN --effective 'API'")?;
    // The reconciler's providers come from the configuration: an unusable one is reported.
    ctx.config()?;
    let global_actor = super::global_setting(ctx, "invariant-actor");
    let shown = ctx
        .client()?
        .effective_invariants(plan, global_actor.as_deref(), regex)?;
    let (plan_id, v, choice) = (shown.plan_id, shown.view, shown.choice);
    let (removed, gone) = (shown.removed, shown.gone);
    let count = |s: InvariantScope| v.effective.iter().filter(|i| i.scope == s).count();
    let conflicts = v.conflicts.len();
    let matching = regex
        .map(|r| format!(" matching `{r}`"))
        .unwrap_or_default();
    let status = format!(
        "{} effective invariant{}{matching} ({} global, {} project, {} action, {} plan; {conflicts} conflict{} resolved, {} duplicate{} dropped)",
        v.effective.len(),
        if v.effective.len() == 1 { "" } else { "s" },
        count(InvariantScope::Global),
        count(InvariantScope::Project),
        count(InvariantScope::Action),
        count(InvariantScope::Plan),
        if conflicts == 1 { "" } else { "s" },
        v.duplicates.len(),
        if v.duplicates.len() == 1 { "" } else { "s" },
    );
    let semantic = match &choice {
        None => "semantic conflicts not checked (no invariant actor)".to_string(),
        Some(c) => format!(
            "semantic conflicts are checked when the plan enters strategize: the invariant actor {} (from {}) reconciles them then; this view resolves only --key conflicts and duplicates",
            c.actor, c.from
        ),
    };
    let mut report = Report::ok(
        "invariant list",
        json!({
            "plan_id": plan_id.to_string(),
            "effective": v.effective,
            "conflicts": v.conflicts,
            "duplicates": v.duplicates,
            "invariant_actor": choice,
            "removed_by_correction": removed
                .iter()
                .map(|(id, by)| json!({"invariant_id": id, "decision_id": by}))
                .collect::<Vec<_>>(),
            "semantic_check": "not_checked",
        }),
        status,
    )
    .with(Element::Table {
        title: format!("Effective Invariants (Plan {plan_id})"),
        columns: ["ID", "Source", "Key", "Text"].map(Column::left).into(),
        rows: v
            .effective
            .iter()
            .map(|i| {
                let source = match (i.scope, &i.project, &i.action) {
                    (InvariantScope::Project, Some(p), _) => format!("project {p}"),
                    (InvariantScope::Action, _, Some(a)) => format!("action {a}"),
                    (s, ..) => s.as_str().to_string(),
                };
                vec![
                    view::id(i.invariant_id.clone()),
                    source.into(),
                    view::or(i.key.as_deref(), "-"),
                    i.text.clone().into(),
                ]
            })
            .collect(),
        empty: "No invariants apply to this plan.".into(),
    });
    if !gone.is_empty() {
        report = report.with(Element::List {
            title: format!("Removed By Correction: {}", gone.len()),
            items: gone
                .iter()
                .map(|i| {
                    let by = removed
                        .iter()
                        .find(|(id, _)| *id == i.invariant_id)
                        .map(|(_, by)| by.to_string())
                        .unwrap_or_default();
                    format!("{} \"{}\" (decision {by})", i.invariant_id, i.text)
                })
                .collect(),
        });
    }
    if !v.conflicts.is_empty() {
        report = report.with(Element::List {
            title: format!("Conflicts Resolved: {conflicts}"),
            items: v
                .conflicts
                .iter()
                .map(|d| {
                    format!(
                        "{} \"{}\" overridden by {} \"{}\" (key {})",
                        d.dropped.scope,
                        d.dropped.text,
                        d.kept.scope,
                        d.kept.text,
                        d.kept.key.as_deref().unwrap_or("")
                    )
                })
                .collect(),
        });
    }
    if !v.duplicates.is_empty() {
        report = report.with(Element::List {
            title: format!("Duplicates Dropped: {}", v.duplicates.len()),
            items: v
                .duplicates
                .iter()
                .map(|d| {
                    format!(
                        "{} \"{}\" repeats {} \"{}\"",
                        d.dropped.scope, d.dropped.text, d.kept.scope, d.kept.text
                    )
                })
                .collect(),
        });
    }
    Ok(report.message(Level::Warn, semantic))
}

fn remove(ctx: &Context, id: &str, yes: bool) -> Result<Report, CliError> {
    let inv = ctx.client()?.invariant(id)?;
    confirm(
        &format!(
            "Remove invariant {} (\"{}\", scope: {})?",
            inv.invariant_id,
            inv.text,
            inv.scope_label()
        ),
        yes,
        &ctx.terminal,
        &ctx.suggest(&format!("invariant remove --yes {}", inv.invariant_id)),
    )?;
    let inv = ctx.change(api::RemoveInvariant {
        invariant: inv.invariant_id,
    })?;
    Ok(Report::ok(
        "invariant remove",
        json!({"invariant": inv}),
        "Invariant removed",
    )
    .with(Element::panel(
        "Invariant Removed",
        [
            ("Removed", inv.text.clone().into()),
            ("Scope", inv.scope_label().into()),
            ("ID", view::id(inv.invariant_id.clone())),
        ],
    )))
}
