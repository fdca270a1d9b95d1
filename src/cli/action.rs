//! `agents action create|list|show|available|archive|delete` (spec sections 06 and 09).

use std::path::PathBuf;

use clap::Subcommand;
use serde_json::json;

use super::{CliError, Context, view};
use crate::output::{Column, Element, Report};
use cleveragents_engine::api;
use cleveragents_engine::api::definition_views::{ActionError, CreateRequest};
use cleveragents_engine::domain::ActionState;
use cleveragents_engine::domain::action::Action;

/// `agents action ...`
// Parsed once per process; boxing `Create` would only complicate the clap derive.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Subcommand)]
pub enum ActionCommand {
    /// Create an action from a YAML file; flags override the file
    Create {
        /// Action YAML file (required; see docs/actions.md)
        #[arg(short, long, value_name = "FILE")]
        config: PathBuf,
        /// Strategize actor
        #[arg(long, value_name = "ACTOR")]
        strategy_actor: Option<String>,
        /// Execute actor
        #[arg(long, value_name = "ACTOR")]
        execution_actor: Option<String>,
        /// Cost/risk estimation actor
        #[arg(long, value_name = "ACTOR")]
        estimation_actor: Option<String>,
        /// Invariant reconciliation actor for plans of this action
        #[arg(long, value_name = "ACTOR")]
        invariant_actor: Option<String>,
        /// When the work counts as done
        #[arg(long, value_name = "TEXT")]
        definition_of_done: Option<String>,
        /// Short description
        #[arg(short, long, value_name = "TEXT")]
        description: Option<String>,
        /// Long description
        #[arg(long, value_name = "TEXT")]
        long_description: Option<String>,
        /// Default automation profile for plans of this action
        #[arg(long, value_name = "PROFILE")]
        automation_profile: Option<String>,
        /// Keep the action after use (default)
        #[arg(long, conflicts_with = "no_reusable")]
        reusable: bool,
        /// Archive the action after its first use
        #[arg(long)]
        no_reusable: bool,
        /// Plans may only use read-only tools
        #[arg(long)]
        read_only: bool,
        /// Mark available at once (after the availability checks)
        #[arg(long)]
        available: bool,
        /// Action-level invariant, carried into plans (repeatable)
        #[arg(long = "invariant", value_name = "TEXT")]
        invariants: Vec<String>,
        /// Argument NAME:TYPE:required|optional[:DESCRIPTION] (repeatable)
        #[arg(short = 'a', long = "arg", value_name = "SPEC")]
        args: Vec<String>,
        /// Replace the definition of an existing action of the same name (its version goes up;
        /// plans made before keep the definition they were made from)
        #[arg(long)]
        update: bool,
        /// Action name (default: `name` in the file)
        name: Option<String>,
    },
    /// List actions (archived ones only with --state archived or --state all)
    List {
        /// Only this namespace
        #[arg(short, long, value_name = "NS")]
        namespace: Option<String>,
        /// Only this state: draft, available, archived or all
        #[arg(short, long, value_name = "STATE", value_parser = ["draft", "available", "archived", "all"])]
        state: Option<String>,
        /// Only available actions
        #[arg(long)]
        available: bool,
        /// Show only actions whose name matches this regular expression
        regex: Option<String>,
    },
    /// Show an action
    Show {
        /// Action name or id
        action: String,
    },
    /// Check an action and mark it available (draft or archived -> available)
    Available {
        /// Action name or id
        action: String,
    },
    /// Archive an action (hidden from lists; existing plans unchanged)
    Archive {
        /// Action name or id
        action: String,
    },
    /// Delete an action and free its name (refused while a plan that is not finished uses it)
    Delete {
        /// Action name or id
        action: String,
        /// Do not ask for confirmation
        #[arg(short, long)]
        yes: bool,
    },
}

impl ActionCommand {
    /// The subcommand name.
    pub fn name(&self) -> &'static str {
        match self {
            ActionCommand::Create { .. } => "create",
            ActionCommand::List { .. } => "list",
            ActionCommand::Show { .. } => "show",
            ActionCommand::Available { .. } => "available",
            ActionCommand::Archive { .. } => "archive",
            ActionCommand::Delete { .. } => "delete",
        }
    }

    /// Whether the subcommand can run against a server (`--server`).
    pub fn served_remotely(&self) -> bool {
        true
    }
}

/// Runs an action subcommand.
///
/// # Errors
/// YAML errors with line and column; missing required fields; invalid arguments, scripts or
/// placeholders; failed availability checks; unknown actions.
pub fn run(command: ActionCommand, ctx: &Context) -> Result<Report, CliError> {
    match command {
        ActionCommand::Create {
            config,
            strategy_actor,
            execution_actor,
            estimation_actor,
            invariant_actor,
            definition_of_done,
            description,
            long_description,
            automation_profile,
            reusable,
            no_reusable,
            read_only,
            available,
            invariants,
            args,
            update,
            name,
        } => create(
            ctx,
            CreateRequest {
                config_text: None,
                config,
                name,
                strategy_actor,
                execution_actor,
                estimation_actor,
                invariant_actor,
                definition_of_done,
                description,
                long_description,
                automation_profile,
                reusable: if no_reusable {
                    Some(false)
                } else if reusable {
                    Some(true)
                } else {
                    None
                },
                read_only: read_only.then_some(true),
                available,
                invariants,
                args,
                update,
            },
        ),
        ActionCommand::List {
            namespace,
            state,
            available,
            regex,
        } => list(
            ctx,
            namespace.as_deref(),
            state.as_deref(),
            available,
            regex.as_deref(),
        ),
        ActionCommand::Show { action } => show(ctx, &action),
        ActionCommand::Available { action } => make_available(ctx, &action),
        ActionCommand::Archive { action } => archive(ctx, &action),
        ActionCommand::Delete { action, yes } => delete(ctx, &action, yes),
    }
}

/// The action as structured data.
pub fn action_json(a: &Action) -> serde_json::Value {
    json!({
        "action_id": a.action_id.to_string(),
        "name": a.name,
        "state": a.state,
        "version": a.version,
        "description": a.description,
        "long_description": a.long_description,
        "definition_of_done": a.definition_of_done,
        "strategy_actor": a.strategy_actor,
        "execution_actor": a.execution_actor,
        "estimation_actor": a.estimation_actor,
        "invariant_actor": a.invariant_actor,
        "automation_profile": a.automation_profile,
        "reusable": a.reusable,
        "read_only": a.read_only,
        "arguments": a.arguments,
        "script": a.script,
        "sandbox": a.sandbox,
        "config_path": a.config_path,
        "created_at": a.created_at.to_string(),
        "updated_at": a.updated_at.to_string(),
        "archived_at": a.archived_at.map(|t| t.to_string()),
    })
}

fn summary_panel(title: &str, a: &Action, with_config: bool) -> Element {
    let mut entries = vec![
        ("Name", view::id(a.name.clone())),
        ("ID", view::id(a.action_id.to_string())),
        ("State", a.state.as_str().into()),
        ("Version", a.version.to_string().into()),
        ("Strategy Actor", a.strategy_actor.clone().into()),
        ("Execution Actor", a.execution_actor.clone().into()),
    ];
    if let Some(e) = &a.estimation_actor {
        entries.push(("Estimation Actor", e.clone().into()));
    }
    if let Some(i) = &a.invariant_actor {
        entries.push(("Invariant Actor", i.clone().into()));
    }
    entries.push(("Reusable", view::yes_no(a.reusable).into()));
    entries.push(("Read Only", view::yes_no(a.read_only).into()));
    if with_config && let Some(c) = &a.config_path {
        entries.push(("Config", c.clone().into()));
    }
    entries.push(("Created", view::time(&a.created_at).into()));
    Element::panel(title, entries)
}

fn detail_elements(a: &Action, invariants: &[String]) -> Vec<Element> {
    let mut out = Vec::new();
    if let Some(d) = &a.description {
        out.push(Element::List {
            title: "Description".into(),
            items: vec![d.clone()],
        });
    }
    out.push(Element::List {
        title: "Definition of Done".into(),
        items: vec![a.definition_of_done.clone()],
    });
    out.push(Element::Table {
        title: "Arguments".into(),
        columns: ["Name", "Type", "Required", "Default", "Description"]
            .map(Column::left)
            .into(),
        rows: a
            .arguments
            .iter()
            .map(|x| {
                vec![
                    view::id(x.name.clone()),
                    x.arg_type.as_str().into(),
                    view::flag_cell(x.required),
                    view::or(x.default.as_ref().map(|d| d.to_string()).as_deref(), "-"),
                    view::or(x.description.as_deref(), ""),
                ]
            })
            .collect(),
        empty: "No arguments.".into(),
    });
    if let Some(script) = &a.script {
        out.push(Element::Table {
            title: "Script".into(),
            columns: ["Step", "Kind", "Does", "Depends On"]
                .map(Column::left)
                .into(),
            rows: script
                .iter()
                .enumerate()
                .map(|(i, s)| {
                    let does = match (&s.run, &s.tool, &s.spawn) {
                        (Some(r), _, _) => r.clone(),
                        (_, Some(t), _) => t.clone(),
                        (_, _, Some(sp)) => format!(
                            "{}{}",
                            sp.action,
                            s.parallel_group
                                .as_ref()
                                .map(|g| format!(" [group {g}]"))
                                .unwrap_or_default()
                        ),
                        _ => String::new(),
                    };
                    let deps = match &s.depends_on {
                        Some(d) if d.is_empty() => "(none)".to_string(),
                        Some(d) => d.join(", "),
                        None if i == 0 => "(none)".to_string(),
                        None => format!("{} (previous)", script[i - 1].name),
                    };
                    vec![
                        view::id(s.name.clone()),
                        s.kind().into(),
                        does.into(),
                        deps.into(),
                    ]
                })
                .collect(),
            empty: "No steps.".into(),
        });
    }
    if let Some(sb) = &a.sandbox {
        out.push(Element::panel(
            "Sandbox",
            [
                ("Network", view::yes_no(sb.network).to_string()),
                (
                    "Writable Paths",
                    if sb.writable_paths.is_empty() {
                        "(none)".to_string()
                    } else {
                        sb.writable_paths.join(", ")
                    },
                ),
            ]
            .into_iter()
            .chain((!sb.env.is_empty()).then(|| ("Environment", sb.env.join(", ")))),
        ));
    }
    if !invariants.is_empty() {
        out.push(Element::List {
            title: "Invariants".into(),
            items: invariants
                .iter()
                .enumerate()
                .map(|(i, t)| format!("{}. {t}", i + 1))
                .collect(),
        });
    }
    out.push(Element::panel(
        "Automation",
        [
            (
                "Profile",
                view::or(
                    a.automation_profile.as_deref(),
                    "(inherits project or global)",
                ),
            ),
            (
                "Source",
                if a.automation_profile.is_some() {
                    "action".into()
                } else {
                    view::or(None, "(not set)")
                },
            ),
        ],
    ));
    out
}

fn usage(ctx: &Context, a: &Action) -> Element {
    let args: Vec<String> = a
        .arguments
        .iter()
        .filter(|x| x.required)
        .map(|x| format!(" --arg {0}=<{0}>", x.name))
        .collect();
    Element::List {
        title: "Usage".into(),
        items: vec![ctx.suggest(&format!("plan use {} <project>{}", a.name, args.concat()))],
    }
}

/// A `--config` file as a registry change names it: as given in process; through a server,
/// as an absolute path on this machine with its text, which the server reads instead of the
/// file.
///
/// # Errors
/// `INVALID_INPUT` naming the file when it cannot be sent.
pub(super) fn sent_config(
    ctx: &Context,
    path: &std::path::Path,
) -> Result<(PathBuf, Option<String>), CliError> {
    if ctx.server.is_none() {
        return Ok((path.to_path_buf(), None));
    }
    let text = super::remote::read_config(path)?;
    let absolute = std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf());
    Ok((absolute, Some(text)))
}

/// The name of the action a refused `action create` found already registered, in process or
/// through a server (whose rendering of the refusal carries it as `existing_action`).
fn existing_action(e: api::ApiError) -> Result<String, api::ApiError> {
    match e {
        api::ApiError::Remote(r) => {
            match r.data.as_ref().and_then(|d| d["existing_action"].as_str()) {
                Some(name) => Ok(name.to_string()),
                None => Err(api::ApiError::Remote(r)),
            }
        }
        other => match other.into_registry() {
            Ok(api::RegistryError::Action(ActionError::Exists(name))) => Ok(name),
            Ok(registry) => Err(registry.into()),
            Err(other) => Err(other),
        },
    }
}

fn create(ctx: &Context, mut req: CreateRequest) -> Result<Report, CliError> {
    // The file is this machine's: through a server, its text goes with the change.
    (req.config, req.config_text) = sent_config(ctx, &req.config)?;
    ctx.check_store()?;
    ctx.config()?;
    let created = ctx.change(api::CreateAction(req.clone())).map_err(|e| match existing_action(e) {
        Ok(name) => {
            let file = shell_words::quote(&req.config.display().to_string()).into_owned();
            CliError::new("CONFLICT", format!("action {name} already exists"))
                .detail(
                    "replace its definition with --update (plans made before keep theirs), choose a new name, or delete it first",
                )
                .hint(ctx.suggest(&format!("action create --update --config {file} {name}")))
                .hint(ctx.suggest(&format!("action create --config {file} {name}-v2")))
                .hint(ctx.suggest(&format!("action show {name}")))
                .data(json!({ "existing_action": name }))
        }
        Err(other) => other.into(),
    })?;
    let a = &created.action;
    let texts: Vec<String> = created.invariants.iter().map(|(_, t)| t.clone()).collect();
    let mut report = Report::ok(
        "action create",
        json!({
            "action": action_json(a),
            "invariants": created.invariants.iter().map(|(id, t)| json!({"invariant_id": id, "text": t})).collect::<Vec<_>>(),
            "overrides": created.overrides,
            "checks": created.checks,
            "warnings": created.warnings,
            "replaced_version": created.replaced_version,
        }),
        match created.replaced_version {
            Some(v) => format!("Action updated (version {v} -> {})", a.version),
            None => "Action created".to_string(),
        },
    )
    .with(summary_panel(
        if created.replaced_version.is_some() {
            "Action Updated"
        } else {
            "Action Created"
        },
        a,
        true,
    ));
    for w in &created.warnings {
        report = report.message(crate::output::Level::Warn, w.clone());
    }
    if !created.overrides.is_empty() {
        report = report.with(Element::List {
            title: "Overrides Applied".into(),
            items: created
                .overrides
                .iter()
                .map(|o| format!("{}: {} -> {}", o.field, o.from, o.to))
                .collect(),
        });
    }
    for e in detail_elements(a, &texts) {
        report = report.with(e);
    }
    if a.state == ActionState::Available {
        report = report.with(usage(ctx, a));
    } else {
        report = report.with(Element::List {
            title: "Next Steps".into(),
            items: vec![ctx.suggest(&format!("action available {}", a.name))],
        });
    }
    Ok(report)
}

fn list(
    ctx: &Context,
    ns: Option<&str>,
    state: Option<&str>,
    available: bool,
    regex: Option<&str>,
) -> Result<Report, CliError> {
    ctx.check_store()?;
    let re = view::regex(regex, "agents action list 'coverage'")?;
    let wanted = if available { Some("available") } else { state };
    let rows_all = ctx.client()?.actions()?;
    let all: Vec<&Action> = rows_all.iter().map(|r| &r.action).collect();
    let shown: Vec<&api::definition_views::ActionRow> = rows_all
        .iter()
        .filter(|r| {
            let a = &r.action;
            match wanted {
                None => a.state != ActionState::Archived,
                Some("all") => true,
                Some(s) => a.state.as_str() == s,
            }
        })
        .filter(|r| ns.is_none_or(|n| r.action.name.starts_with(&format!("{n}/"))))
        .filter(|r| re.as_ref().is_none_or(|re| re.is_match(&r.action.name)))
        .collect();
    let mut rows = Vec::new();
    let mut data = Vec::new();
    let mut total_plans = 0;
    for row in &shown {
        let (a, plans) = (&row.action, row.plans);
        total_plans += plans;
        rows.push(vec![
            view::id(a.name.clone()),
            a.state.as_str().into(),
            a.strategy_actor.clone().into(),
            a.execution_actor.clone().into(),
            view::flag_cell(a.reusable),
            plans.to_string().into(),
        ]);
        let mut j = action_json(a);
        j["plans"] = json!(plans);
        data.push(j);
    }
    let count = |s: ActionState| all.iter().filter(|a| a.state == s).count().to_string();
    let n = shown.len();
    let mut report = Report::ok(
        "action list",
        json!({"actions": data}),
        format!("{n} action{} listed", if n == 1 { "" } else { "s" }),
    )
    .with(Element::Table {
        title: "Actions".into(),
        columns: vec![
            Column::left("Name"),
            Column::left("State"),
            Column::left("Strategy Actor"),
            Column::left("Execution Actor"),
            Column::left("Reusable"),
            Column::right("Plans"),
        ],
        rows,
        empty: "No actions found.".into(),
    });
    if wanted.is_some() || ns.is_some() {
        report = report.with(Element::panel(
            "Filters",
            [
                ("State", wanted.unwrap_or("(not archived)").to_string()),
                ("Namespace", ns.unwrap_or("(any)").to_string()),
            ],
        ));
    }
    Ok(report.with(Element::panel(
        "Summary",
        [
            ("Listed", n.to_string()),
            ("Registered", all.len().to_string()),
            ("Available", count(ActionState::Available)),
            ("Draft", count(ActionState::Draft)),
            ("Archived", count(ActionState::Archived)),
            ("Total Plans Created", total_plans.to_string()),
        ],
    )))
}

fn show(ctx: &Context, input: &str) -> Result<Report, CliError> {
    ctx.check_store()?;
    let detail = ctx.client()?.action(input)?;
    let (a, invs) = (detail.action, detail.invariants);
    let (plans, applied, errored) = (
        detail.plans_created,
        detail.plans_applied,
        detail.plans_errored,
    );
    let mut report = Report::ok(
        "action show",
        json!({"action": action_json(&a), "invariants": invs, "history": {"plans_created": plans, "plans_applied": applied, "plans_errored": errored}}),
        "Action loaded",
    )
    .with(summary_panel("Action Details", &a, true));
    for e in detail_elements(&a, &invs.iter().map(|i| i.text.clone()).collect::<Vec<_>>()) {
        report = report.with(e);
    }
    report = report.with(Element::panel(
        "History",
        [
            ("Plans Created", plans.to_string()),
            ("Plans Applied", applied.to_string()),
            ("Plans Errored", errored.to_string()),
        ],
    ));
    if a.state == ActionState::Available {
        report = report.with(usage(ctx, &a));
    }
    Ok(report)
}

fn make_available(ctx: &Context, input: &str) -> Result<Report, CliError> {
    ctx.check_store()?;
    ctx.config()?;
    let (a, from, checks) = ctx.change(api::MakeActionAvailable {
        action: input.to_string(),
    })?;
    let status = if from == ActionState::Available {
        "Action already available"
    } else {
        "Action marked available"
    };
    Ok(Report::ok(
        "action available",
        json!({"action": action_json(&a), "previous_state": from, "checks": checks}),
        status,
    )
    .with(Element::panel(
        "Action Available",
        [
            ("ID", view::id(a.action_id.to_string())),
            ("State", format!("{from} -> {}", a.state).into()),
            ("Name", view::id(a.name.clone())),
        ],
    ))
    .with(Element::panel(
        "Validation",
        checks.iter().map(|c| (c.label.clone(), c.detail.clone())),
    ))
    .with(usage(ctx, &a)))
}

fn archive(ctx: &Context, input: &str) -> Result<Report, CliError> {
    ctx.check_store()?;
    let (a, from) = ctx.change(api::ArchiveAction {
        action: input.to_string(),
    })?;
    let history = ctx.client()?.action(&a.action_id.to_string())?;
    let (plans, applied, errored) = (
        history.plans_created,
        history.plans_applied,
        history.plans_errored,
    );
    Ok(Report::ok(
        "action archive",
        json!({"action": action_json(&a), "previous_state": from}),
        "Action archived",
    )
    .with(Element::panel(
        "Action Archived",
        [
            ("Name", view::id(a.name.clone())),
            ("State", format!("{from} -> archived").into()),
            (
                "Archived",
                a.archived_at
                    .as_ref()
                    .map(view::time)
                    .unwrap_or_default()
                    .into(),
            ),
        ],
    ))
    .with(Element::panel(
        "Impact",
        [
            ("Availability", "hidden from list"),
            ("Existing Plans", "unchanged"),
        ],
    ))
    .with(Element::panel(
        "History",
        [
            ("Total Plans", plans.to_string()),
            ("Applied", applied.to_string()),
            ("Errored", errored.to_string()),
        ],
    ))
    .with(Element::List {
        title: "Restore".into(),
        items: vec![ctx.suggest(&format!("action available {}", a.name))],
    }))
}

fn delete(ctx: &Context, input: &str, yes: bool) -> Result<Report, CliError> {
    ctx.check_store()?;
    let a = ctx.client()?.action(input)?.action;
    super::confirm::confirm(
        &format!("Delete action {} and free its name?", a.name),
        yes,
        &ctx.terminal,
        &ctx.suggest(&format!(
            "action delete --yes {}",
            shell_words::quote(&a.name)
        )),
    )?;
    let change = api::DeleteAction {
        action: a.action_id.to_string(),
    };
    let deleted = ctx.change(change).map_err(|e| match e.into_registry() {
        Ok(api::RegistryError::Action(e @ ActionError::InUse { .. })) => {
            let first = match &e {
                ActionError::InUse { plans, .. } => plans
                    .first()
                    .and_then(|p| p.split(' ').next())
                    .unwrap_or_default()
                    .to_string(),
                _ => String::new(),
            };
            CliError::from(e)
                .hint(ctx.suggest(&format!("plan status {first}")))
                .hint(ctx.suggest(&format!("plan cancel {first}")))
                .hint(ctx.suggest(&format!("action archive {}", shell_words::quote(&a.name))))
        }
        Ok(other) => other.into(),
        Err(other) => other.into(),
    })?;
    let a = &deleted.action;
    Ok(Report::ok(
        "action delete",
        json!({"action": action_json(a), "finished_plans": deleted.finished_plans}),
        format!("Action {} deleted; the name is free", a.name),
    )
    .with(Element::panel(
        "Action Deleted",
        [
            ("Name", view::id(a.name.clone())),
            ("Version", a.version.to_string().into()),
            (
                "Finished Plans",
                format!(
                    "{} (they keep what they were made from)",
                    deleted.finished_plans
                )
                .into(),
            ),
        ],
    )))
}
