//! `agents plan ...` (spec sections 06 and 08). This issue provides `use`, `list` and
//! `status`; the lifecycle work adds `execute`, `apply`, `cancel`, `tree` and the rest as more
//! variants of [`PlanCommand`].

use clap::{Args, Subcommand};
use serde_json::json;

use super::{CliError, Context, view};
use crate::engine::domain::{Phase, Plan, ProcessingState};
use crate::engine::registry::plan_use::{self, Request};
use crate::output::{Column, Element, Level, Report};

/// `agents plan ...`
#[derive(Debug, Subcommand)]
pub enum PlanCommand {
    /// Apply an available action to one or more projects (creates the plan)
    Use(UseArgs),
    /// List plans
    List(ListArgs),
    /// Show a plan's status
    Status {
        /// Plan id or unique prefix
        plan: String,
    },
    /// Sandbox commands: diff, artifacts, checkpoints, rollback, export, cleanup
    #[command(flatten)]
    Sandbox(super::plan_sandbox::PlanSandboxCommand),
}

/// `agents plan use` arguments.
#[derive(Debug, Args)]
pub struct UseArgs {
    /// Automation profile for this plan (overrides action, project and global)
    #[arg(long, value_name = "PROFILE")]
    pub automation_profile: Option<String>,
    /// Plan-level invariant (repeatable)
    #[arg(long = "invariant", value_name = "TEXT")]
    pub invariants: Vec<String>,
    /// Override the action's strategy actor
    #[arg(long, value_name = "ACTOR")]
    pub strategy_actor: Option<String>,
    /// Override the action's execution actor
    #[arg(long, value_name = "ACTOR")]
    pub execution_actor: Option<String>,
    /// Override the action's estimation actor
    #[arg(long, value_name = "ACTOR")]
    pub estimation_actor: Option<String>,
    /// Override the action's invariant reconciliation actor
    #[arg(long, value_name = "ACTOR")]
    pub invariant_actor: Option<String>,
    /// Action argument NAME=VALUE (repeatable)
    #[arg(short = 'a', long = "arg", value_name = "NAME=VALUE")]
    pub args: Vec<String>,
    /// Action name or id
    pub action: String,
    /// Target projects, in order
    #[arg(required = true, num_args = 1..)]
    pub projects: Vec<String>,
}

/// `agents plan list` arguments.
#[derive(Debug, Args)]
pub struct ListArgs {
    /// Only this phase
    #[arg(long, value_name = "PHASE", value_parser = ["strategize", "execute", "apply", "applied"])]
    pub phase: Option<String>,
    /// Only this state
    #[arg(long, value_name = "STATE", value_parser = ["queued", "processing", "errored", "complete", "cancelled"])]
    pub state: Option<String>,
    /// Only plans targeting this project
    #[arg(long, value_name = "PROJECT")]
    pub project: Option<String>,
    /// Only plans of this action
    #[arg(long, value_name = "ACTION")]
    pub action: Option<String>,
    /// Show only plans whose action or name matches this regular expression
    pub regex: Option<String>,
}

impl PlanCommand {
    /// The subcommand name.
    pub fn name(&self) -> &'static str {
        match self {
            PlanCommand::Use(_) => "use",
            PlanCommand::List(_) => "list",
            PlanCommand::Status { .. } => "status",
            PlanCommand::Sandbox(c) => c.name(),
        }
    }
}

/// Runs a plan subcommand.
///
/// # Errors
/// Draft or archived actions, bad arguments, unresolved actors or profiles, unknown plans.
pub fn run(command: PlanCommand, ctx: &Context) -> Result<Report, CliError> {
    match command {
        PlanCommand::Use(a) => use_action(ctx, a),
        PlanCommand::List(a) => list(ctx, &a),
        PlanCommand::Status { plan } => status(ctx, &plan),
        PlanCommand::Sandbox(c) => super::plan_sandbox::run(c, ctx),
    }
}

fn use_action(ctx: &Context, a: UseArgs) -> Result<Report, CliError> {
    let mut store = ctx.store()?;
    let providers = ctx.config()?.providers();
    let req = Request {
        action: a.action,
        projects: a.projects,
        automation_profile: a.automation_profile,
        invariants: a.invariants,
        strategy_actor: a.strategy_actor,
        execution_actor: a.execution_actor,
        estimation_actor: a.estimation_actor,
        invariant_actor: a.invariant_actor,
        args: a.args,
        global_profile: super::global_setting(ctx, "automation-profile"),
    };
    let c = plan_use::create(&mut store, &providers, &req)?;
    let p = &c.plan;
    let id = p.plan_id.to_string();
    let mut data = serde_json::Value::Object(p.as_cli_dict());
    data["profile_source"] = json!(c.profile_source);
    data["effective_invariants"] = json!(c.invariants.effective);
    data["action_archived"] = json!(c.action_archived);
    data["ran"] = json!(false);
    data["next"] = json!(ctx.suggest(&format!("plan status {id}")));
    let mut report = Report::ok(
        "plan use",
        data,
        "Plan created at strategize/queued; Strategize: not yet supported, so nothing ran",
    )
    .with(Element::panel(
        "Plan Created",
        [
            ("Plan ID", view::id(id.clone())),
            ("Phase", p.phase().as_str().into()),
            ("State", p.state().as_str().into()),
            ("Action", view::id(p.action_name.clone())),
            ("Projects", p.project_names().join(", ").into()),
            ("Automation", c.profile.name.clone().into()),
            ("Attempt", p.status.attempt.to_string().into()),
        ],
    ));
    if !p.arguments.is_empty() {
        report = report.with(Element::panel(
            "Arguments",
            p.arguments.iter().map(|(k, v)| {
                (
                    k.clone(),
                    v.as_str()
                        .map(str::to_string)
                        .unwrap_or_else(|| v.to_string()),
                )
            }),
        ));
    }
    let overridden = |flag: &str| c.actor_overrides.iter().any(|(f, _)| f == flag);
    let actor = |v: &Option<String>, flag: &str| match v {
        Some(a) if overridden(flag) => format!("{a} (override)"),
        Some(a) => a.clone(),
        None => "(none)".into(),
    };
    report = report
        .with(Element::panel(
            "Actors",
            [
                ("Strategy", actor(&p.strategy_actor, "strategy-actor")),
                ("Execution", actor(&p.execution_actor, "execution-actor")),
                ("Estimation", actor(&p.estimation_actor, "estimation-actor")),
                ("Invariant", actor(&p.invariant_actor, "invariant-actor")),
            ],
        ))
        .with(Element::panel(
            "Automation",
            [
                ("Profile", c.profile.name.clone()),
                ("Source", c.profile_source.label().to_string()),
                ("Automatic Phases", automatic_phases(&c.profile.flags)),
                ("Read-Only", view::yes_no(c.action.read_only).to_string()),
            ],
        ))
        .with(Element::List {
            title: "Target Projects".into(),
            items: c
                .projects
                .iter()
                .enumerate()
                .map(|(i, pr)| format!("{}. {}", i + 1, pr.name))
                .collect(),
        })
        .with(Element::Table {
            title: "Plan Invariants".into(),
            columns: ["Scope", "Source", "Invariant"].map(Column::left).into(),
            rows: c
                .invariants
                .effective
                .iter()
                .rev()
                .map(|i| {
                    let source = match (i.scope, &i.project, &i.action) {
                        (crate::engine::domain::InvariantScope::Plan, ..) => "CLI".to_string(),
                        (_, Some(pr), _) => pr.clone(),
                        (_, _, Some(a)) => a.clone(),
                        _ => "global".to_string(),
                    };
                    vec![
                        i.scope.as_str().into(),
                        source.into(),
                        i.text.clone().into(),
                    ]
                })
                .collect(),
            empty: "(none)".into(),
        })
        .with(Element::List {
            title: "Next Steps".into(),
            items: vec![
                ctx.suggest(&format!("plan status {id}")),
                ctx.suggest(&format!("invariant list --plan {id} --effective")),
            ],
        });
    if c.action_archived {
        report = report.message(
            Level::Info,
            format!(
                "action {} is not reusable and was archived by this use",
                c.action.name
            ),
        );
    }
    report.status.level = Level::Warn;
    Ok(report)
}

fn plan_row(p: &Plan) -> serde_json::Value {
    json!({
        "plan_id": p.plan_id.to_string(),
        "action": p.action_name,
        "projects": p.project_names(),
        "phase": p.phase(),
        "state": p.state(),
        "attempt": p.status.attempt,
        "automation_profile": p.automation_profile,
        "created_at": p.created_at.to_string(),
        "updated_at": p.updated_at.to_string(),
    })
}

fn list(ctx: &Context, a: &ListArgs) -> Result<Report, CliError> {
    let store = ctx.store()?;
    let re = view::regex(a.regex.as_deref(), "agents plan list 'coverage'")?;
    let project = a
        .project
        .as_deref()
        .map(|p| crate::engine::registry::projects::find(&store, p))
        .transpose()?;
    let action = a.action.as_deref().map(|x| {
        crate::engine::domain::QualifiedName::resolve_user_input(x, &[])
            .map(|q| q.to_string())
            .unwrap_or_else(|_| x.to_string())
    });
    let plans: Vec<Plan> = store
        .plans()?
        .into_iter()
        .filter(|p| a.phase.as_deref().is_none_or(|ph| p.phase().as_str() == ph))
        .filter(|p| a.state.as_deref().is_none_or(|s| p.state().as_str() == s))
        .filter(|p| {
            project
                .as_ref()
                .is_none_or(|pr| p.project_names().contains(&pr.name.as_str()))
        })
        .filter(|p| action.as_deref().is_none_or(|ac| p.action_name == ac))
        .filter(|p| {
            re.as_ref()
                .is_none_or(|r| r.is_match(&p.action_name) || r.is_match(&p.name))
        })
        .collect();
    let n = plans.len();
    let count = |s: ProcessingState| plans.iter().filter(|p| p.state() == s).count().to_string();
    let mut report = Report::ok(
        "plan list",
        json!({"plans": plans.iter().map(plan_row).collect::<Vec<_>>()}),
        format!("{n} plan{} listed", if n == 1 { "" } else { "s" }),
    )
    .with(Element::Table {
        title: "Plans".into(),
        columns: ["ID", "Phase", "State", "Action", "Project", "Created"]
            .map(Column::left)
            .into(),
        rows: plans
            .iter()
            .zip(view::short_ids(
                &plans
                    .iter()
                    .map(|p| p.plan_id.to_string())
                    .collect::<Vec<_>>(),
            ))
            .map(|(p, short)| {
                vec![
                    view::id(short),
                    p.phase().as_str().into(),
                    p.state().as_str().into(),
                    p.action_name.clone().into(),
                    p.project_names().join(", ").into(),
                    view::time(&p.created_at).into(),
                ]
            })
            .collect(),
        empty: "No plans found.".into(),
    });
    if a.phase.is_some() || a.state.is_some() || a.project.is_some() || a.action.is_some() {
        report = report.with(Element::panel(
            "Filters",
            [
                ("Phase", a.phase.clone().unwrap_or_else(|| "(any)".into())),
                ("State", a.state.clone().unwrap_or_else(|| "(any)".into())),
                (
                    "Project",
                    project.map(|p| p.name).unwrap_or_else(|| "(any)".into()),
                ),
                ("Action", action.unwrap_or_else(|| "(any)".into())),
            ],
        ));
    }
    Ok(report.with(Element::panel(
        "Summary",
        [
            ("Total", n.to_string()),
            ("Queued", count(ProcessingState::Queued)),
            ("Processing", count(ProcessingState::Processing)),
            ("Completed", count(ProcessingState::Complete)),
            ("Errored", count(ProcessingState::Errored)),
            ("Cancelled", count(ProcessingState::Cancelled)),
        ],
    )))
}

fn progress(p: &Plan) -> Vec<String> {
    let phases = [Phase::Strategize, Phase::Execute, Phase::Apply];
    phases
        .iter()
        .map(|ph| {
            let name = match ph {
                Phase::Strategize => "Strategize",
                Phase::Execute => "Execute",
                _ => "Apply",
            };
            if p.phase() == Phase::Applied || *ph < p.phase() {
                format!("[done] {name}")
            } else if *ph == p.phase() {
                format!("[{}] {name}", p.state())
            } else if p.state() == ProcessingState::Cancelled {
                format!("[skipped] {name}")
            } else {
                format!("[waiting] {name}")
            }
        })
        .collect()
}

fn status(ctx: &Context, input: &str) -> Result<Report, CliError> {
    let store = ctx.store()?;
    let id = store.resolve_plan_id(input)??;
    let p = store
        .plan(&id)?
        .ok_or_else(|| CliError::new("NOT_FOUND", format!("plan {id} not found")))?;
    let origin = store.plan_origin(&id)?;
    let mut data = serde_json::Value::Object(p.as_cli_dict());
    data["profile_source"] = json!(origin.as_ref().map(|o| o.profile_source));
    data["script"] = json!(origin.as_ref().and_then(|o| o.script.clone()));
    let (level, text) = match (p.phase(), p.state()) {
        (Phase::Applied, _) => (Level::Ok, "Plan applied".to_string()),
        (_, ProcessingState::Cancelled) => (Level::Ok, "Plan cancelled".to_string()),
        (_, ProcessingState::Errored) => (Level::Warn, format!("Plan errored in {}", p.phase())),
        (ph, ProcessingState::Queued) => (
            Level::Warn,
            format!("Plan queued at {ph}; running plans is not yet supported, so nothing ran"),
        ),
        (ph, st) => (Level::Ok, format!("Plan {ph}/{st}")),
    };
    let mut report = Report::ok("plan status", data, text).with(Element::panel(
        "Plan Status",
        [
            ("Plan", view::id(id.to_string())),
            ("Phase", p.phase().as_str().into()),
            ("State", p.state().as_str().into()),
            ("Action", view::id(p.action_name.clone())),
            ("Projects", p.project_names().join(", ").into()),
            (
                "Automation",
                view::or(p.automation_profile.as_deref(), "(none)"),
            ),
            ("Attempt", p.status.attempt.to_string().into()),
        ],
    ));
    report = report
        .with(Element::List {
            title: "Progress".into(),
            items: progress(&p),
        })
        .with(Element::panel(
            "Timing",
            [
                ("Created", view::time(&p.created_at)),
                ("Updated", view::time(&p.updated_at)),
            ],
        ));
    if let Some(dod) = &p.definition_of_done {
        report = report.with(Element::List {
            title: "Definition of Done".into(),
            items: vec![dod.clone()],
        });
    }
    if let Some(script) = origin.as_ref().and_then(|o| o.script.as_ref()) {
        report = report.with(Element::List {
            title: "Script".into(),
            items: script
                .iter()
                .map(|s| {
                    format!(
                        "{} ({}): {}",
                        s.name,
                        s.kind(),
                        s.run
                            .clone()
                            .or(s.tool.clone())
                            .or(s.spawn.as_ref().map(|sp| sp.action.clone()))
                            .unwrap_or_default()
                    )
                })
                .collect(),
        });
    }
    if p.error_message.is_some() {
        report = report.with(Element::panel(
            "Error Detail",
            [
                ("Code", p.error_code.clone().unwrap_or_default()),
                ("Error", p.error_message.clone().unwrap_or_default()),
            ],
        ));
    }
    report.status.level = level;
    Ok(report)
}

/// The phases the profile runs without asking (`strategize, execute`), or that none do.
fn automatic_phases(f: &crate::engine::registry::profiles::Flags) -> String {
    let auto: Vec<&str> = [
        (f.auto_strategize, "strategize"),
        (f.auto_execute, "execute"),
        (f.auto_apply, "apply"),
    ]
    .iter()
    .filter(|(on, _)| *on)
    .map(|(_, name)| *name)
    .collect();
    if auto.is_empty() {
        "none (each phase waits for you)".to_string()
    } else {
        auto.join(", ")
    }
}
