//! `agents plan ...` (spec sections 06 and 08): `use`, `list`, `status`, `execute`, `apply`,
//! `cancel`, `tree` and the rest, one variant of [`PlanCommand`] each.

pub mod status;

pub mod run;

pub mod review;

pub mod logs;

pub mod json;

pub mod events;

use clap::{Args, Subcommand};
use serde_json::json;

use super::{CliError, Context, view};
use crate::output::{Column, Element, Level, Payload, Report};
use cleveragents_engine::api;
use cleveragents_engine::api::{PlanCreated as Created, PlanUseArgs as Request, Stopped};
use cleveragents_engine::domain::{Phase, Plan, ProcessingState};

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
    /// Run the plan's next phase (start Strategize, enter Execute, resume), then continue as
    /// its automation profile allows
    Execute(run::ExecuteArgs),
    /// Apply an executed plan's changes to its projects
    Apply(run::ApplyArgs),
    /// Cancel a plan (the process running it stops within 2 seconds; the sandbox is kept)
    Cancel(run::CancelArgs),
    /// List what waits for a human (phase gates, decisions, errored plans)
    Approvals(run::ApprovalsArgs),
    /// Answer an approval with an option or guidance
    Decide(run::DecideArgs),
    /// Decline an approval with a reason
    Reject(run::RejectArgs),
    /// Give a plan guidance; an errored or waiting plan resumes with it
    Prompt(run::PromptArgs),
    /// Show what a plan's steps printed (stdout and stderr, whole), or one step's
    Logs(logs::LogsArgs),
    /// Show a plan's event log: every phase, step, approval, correction, review mark and
    /// export, oldest first (--follow keeps printing new ones)
    Events(events::EventsArgs),
    /// Show a plan's errors, retry history and recovery suggestions
    Errors {
        /// Plan id or unique prefix
        plan: String,
    },
    /// Show a plan's decision tree, with child plans under their spawn decisions
    Tree(super::plan_correct::TreeArgs),
    /// Explain a decision: question, choice, alternatives, rationale and downstream impact
    Explain(super::plan_correct::ExplainArgs),
    /// Correct a decision: revert it and recompute only what depends on it, or append a fix
    Correct(super::plan_correct::CorrectArgs),
    /// Review hunk by hunk: accept or reject hunks and files; Apply writes only what is accepted
    Review(review::ReviewArgs),
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
    /// Budget of the plan's model calls in US dollars (default: config `max-cost-usd`)
    #[arg(long, value_name = "USD")]
    pub max_cost_usd: Option<f64>,
    /// Budget of the plan's model calls in tokens (default: config `max-tokens`)
    #[arg(long, value_name = "N")]
    pub max_tokens: Option<u64>,
    /// Print events as JSON Lines while the plan runs, then the envelope as the last line
    #[arg(long)]
    pub stream: bool,
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
            PlanCommand::Execute(_) => "execute",
            PlanCommand::Apply(_) => "apply",
            PlanCommand::Cancel(_) => "cancel",
            PlanCommand::Approvals(_) => "approvals",
            PlanCommand::Decide(_) => "decide",
            PlanCommand::Reject(_) => "reject",
            PlanCommand::Prompt(_) => "prompt",
            PlanCommand::Logs(_) => "logs",
            PlanCommand::Events(_) => "events",
            PlanCommand::Errors { .. } => "errors",
            PlanCommand::Tree(_) => "tree",
            PlanCommand::Explain(_) => "explain",
            PlanCommand::Correct(_) => "correct",
            PlanCommand::Review(_) => "review",
            PlanCommand::Sandbox(c) => c.name(),
        }
    }

    /// Whether the subcommand reaches the engine only through the API's client, so that it
    /// can run against a server (`--server`).
    pub fn served_remotely(&self) -> bool {
        match self {
            PlanCommand::Status { .. }
            | PlanCommand::Events(_)
            | PlanCommand::List(_)
            | PlanCommand::Approvals(_)
            | PlanCommand::Cancel(_)
            | PlanCommand::Reject(_)
            | PlanCommand::Review(_)
            | PlanCommand::Execute(_)
            | PlanCommand::Decide(_)
            | PlanCommand::Prompt(_)
            | PlanCommand::Use(_)
            | PlanCommand::Apply(_)
            | PlanCommand::Logs(_)
            | PlanCommand::Errors { .. }
            | PlanCommand::Tree(_)
            | PlanCommand::Explain(_)
            | PlanCommand::Correct(_) => true,
            PlanCommand::Sandbox(c) => c.served_remotely(),
        }
    }

    /// Whether `--stream` was given.
    pub fn streams(&self) -> bool {
        match self {
            PlanCommand::Use(a) => a.stream,
            PlanCommand::Execute(a) => a.stream,
            PlanCommand::Apply(a) => a.stream,
            PlanCommand::Decide(a) => a.stream,
            PlanCommand::Prompt(a) => a.stream,
            _ => false,
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
        PlanCommand::Status { plan } => status::status(ctx, &plan),
        PlanCommand::Execute(a) => run::execute(ctx, &a),
        PlanCommand::Apply(a) => run::apply(ctx, &a),
        PlanCommand::Cancel(a) => run::cancel(ctx, &a),
        PlanCommand::Approvals(a) => run::approvals(ctx, &a),
        PlanCommand::Decide(a) => run::decide(ctx, &a),
        PlanCommand::Reject(a) => run::reject(ctx, &a),
        PlanCommand::Prompt(a) => run::prompt(ctx, &a),
        PlanCommand::Logs(a) => logs::logs(ctx, &a),
        PlanCommand::Events(a) => events::events(ctx, &a),
        PlanCommand::Errors { plan } => run::errors(ctx, &plan),
        PlanCommand::Tree(a) => super::plan_correct::plan_tree(ctx, &a),
        PlanCommand::Explain(a) => super::plan_correct::explain(ctx, &a),
        PlanCommand::Correct(a) => super::plan_correct::correct(ctx, &a),
        PlanCommand::Review(a) => review::run(ctx, &a),
        PlanCommand::Sandbox(c) => super::plan_sandbox::run(c, ctx),
    }
}

/// `plan use`: a server-qualified action fetched first (spec section 21, server items in
/// local plans), then the plan created and driven as its automation profile allows.
fn use_action(ctx: &Context, a: UseArgs) -> Result<Report, CliError> {
    if a.max_cost_usd.is_some_and(|c| !c.is_finite() || c < 0.0) {
        return Err(CliError::invalid_input(
            "--max-cost-usd must be a non-negative number of US dollars",
        )
        .hint("e.g. --max-cost-usd 0.50"));
    }
    // A server-qualified action (`dev:acme/review`) is fetched, or taken from the cache.
    let fetched = super::server_items::fetch_action(ctx, &a.action)?;
    let report = create_plan(ctx, a)?;
    Ok(match fetched {
        Some((level, text)) => report.message(level, text),
        None => report,
    })
}

/// Creates the plan and drives it; the report carries the checkouts' warnings, each naming
/// its resource.
fn create_plan(ctx: &Context, a: UseArgs) -> Result<Report, CliError> {
    let client = run::driver(ctx, a.stream, "Creating plan")?;
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
    let used = match client.run(api::Op::Use(Box::new(api::UseRequest {
        request: req,
        max_cost_usd: a.max_cost_usd,
        max_tokens: a.max_tokens,
    })))? {
        api::Outcome::Used(u) => *u,
        other => return Err(run::unexpected(&other)),
    };
    let api::Used {
        created: c,
        plan: p,
        driven,
        not_yet_supported: not_yet,
        checkout_warnings,
    } = used;
    let waits_to_start = matches!(
        driven.as_ref().map(|d| &d.stopped),
        Some(Stopped::Gate { approval }) if approval.context["gate"] == "strategize"
    );
    let mut waiting: Option<CliError> = None;
    if let Some(d) = driven.clone() {
        // Driving reports errors, cancellation and applied plans itself; a gate (also the
        // strategize gate of a profile without auto_strategize) or a pending decision (exit 3)
        // keeps the plan-use report with the approval added.
        let extra = |data: &mut serde_json::Value| {
            if data.is_object() {
                data["profile_source"] = json!(c.profile_source);
                data["effective_invariants"] = json!(c.invariants.effective);
                data["action_archived"] = json!(c.action_archived);
                data["ran"] = json!(true);
            }
        };
        match run::driven_report(ctx, "plan use", d) {
            Err(e) if e.body.exit == crate::output::Exit::NeedsHuman => waiting = Some(e),
            other => {
                return other
                    .map(|mut r| {
                        extra(&mut r.data);
                        for w in &checkout_warnings {
                            r = r.message(crate::output::Level::Warn, w.clone());
                        }
                        r
                    })
                    .map_err(|mut e| {
                        extra(&mut e.data);
                        e
                    });
            }
        }
    }
    let p = &p;
    let id = p.plan_id.to_string();
    let mut data = serde_json::Value::Object(json::plan_dict(p));
    data["profile_source"] = json!(c.profile_source);
    data["effective_invariants"] = json!(c.invariants.effective);
    data["action_archived"] = json!(c.action_archived);
    data["ran"] = json!(p.phase() != Phase::Strategize || p.state() != ProcessingState::Queued);
    if let Some(w) = &waiting {
        for key in ["stopped", "approval", "approvals"] {
            data[key] = w.data[key].clone();
        }
        // At the apply gate: how much the plan changed (`plan diff`'s counts).
        if !w.data["changes"].is_null() {
            data["changes"] = w.data["changes"].clone();
        }
    }
    data["approval"] = match driven.as_ref().map(|d| &d.stopped) {
        _ if waiting.is_some() => data["approval"].clone(),
        Some(Stopped::Gate { approval }) => json!({
            "approval_id": approval.approval_id,
            "kind": approval.kind,
            "context": super::next::approval_context(approval),
            "answer_command": ctx.next(&approval.next()),
        }),
        _ => serde_json::Value::Null,
    };
    let next = if let Some(w) = &waiting {
        w.body.suggestions.first().cloned().unwrap_or_default()
    } else if waits_to_start {
        ctx.suggest(&format!("plan execute {id}"))
    } else {
        ctx.suggest(&format!("plan status {id}"))
    };
    data["next"] = json!(next);
    let status_text = match &not_yet {
        Some(what) => format!(
            "Plan at {}/{}; {what}: not yet supported",
            p.phase(),
            p.state()
        ),
        None => format!(
            "Plan created at {}/{}; run `{next}` to start Strategize (profile {})",
            p.phase(),
            p.state(),
            c.profile.name
        ),
    };
    let mut report = Report::ok("plan use", data, status_text);
    for w in &checkout_warnings {
        report = report.message(crate::output::Level::Warn, w.clone());
    }
    report = created_panels(ctx, report, p, &c, &id, &next);
    if c.action_archived {
        report = report.message(
            Level::Info,
            format!(
                "action {} is not reusable and was archived by this use",
                c.action.name
            ),
        );
    }
    if not_yet.is_some() {
        report.status.level = Level::Warn;
    }
    if let Some(w) = waiting {
        report.status = crate::output::Message {
            level: Level::Warn,
            text: w.body.message.clone(),
        };
        report.exit = crate::output::Exit::NeedsHuman;
        report.error = Some(*w.body);
    }
    Ok(report)
}

/// The panels of `plan use`'s report: the plan, its arguments, actors, automation, target
/// projects, invariants and next steps.
fn created_panels(
    ctx: &Context,
    mut report: Report,
    p: &Plan,
    c: &Created,
    id: &str,
    next: &str,
) -> Report {
    report = report.with(Element::panel(
        "Plan Created",
        [
            ("Plan ID", view::id(id.to_string())),
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
                        (cleveragents_engine::domain::InvariantScope::Plan, ..) => {
                            "CLI".to_string()
                        }
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
                next.to_string(),
                ctx.suggest(&format!("invariant list --plan {id} --effective")),
            ],
        });
    report
}

/// `plan list`'s data: `{plans: [row]}` (rows as [`PlanRow`]).
struct PlanList {
    plans: Vec<Plan>,
}

impl serde::Serialize for PlanList {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap as _;
        let mut map = serializer.serialize_map(Some(1))?;
        map.serialize_entry("plans", &PlanRows(&self.plans))?;
        map.end()
    }
}

/// The plans as a sequence of rows.
struct PlanRows<'a>(&'a [Plan]);

impl serde::Serialize for PlanRows<'_> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_seq(self.0.iter().map(PlanRow::of))
    }
}

/// One plan as `plan list --format json` shows it, keys in this order.
#[derive(serde::Serialize)]
struct PlanRow<'a> {
    plan_id: String,
    action: &'a str,
    projects: Vec<&'a str>,
    phase: cleveragents_engine::domain::Phase,
    state: ProcessingState,
    attempt: u32,
    automation_profile: &'a Option<String>,
    parent_plan_id: Option<String>,
    created_at: String,
    updated_at: String,
}

impl<'a> PlanRow<'a> {
    fn of(p: &'a Plan) -> Self {
        PlanRow {
            plan_id: p.plan_id.to_string(),
            action: &p.action_name,
            projects: p.project_names(),
            phase: p.phase(),
            state: p.state(),
            attempt: p.status.attempt,
            automation_profile: &p.automation_profile,
            parent_plan_id: p.parent_plan_id.map(|i| i.to_string()),
            created_at: p.created_at.to_string(),
            updated_at: p.updated_at.to_string(),
        }
    }
}

fn list(ctx: &Context, a: &ListArgs) -> Result<Report, CliError> {
    // A bad pattern is named here, with the regex crate's diagram, before anything is asked.
    view::regex(a.regex.as_deref(), "agents plan list 'coverage'")?;
    let listed = ctx
        .client()?
        .plan_list(cleveragents_engine::api::PlanFilter {
            phase: a.phase.clone(),
            state: a.state.clone(),
            project: a.project.clone(),
            action: a.action.clone(),
            regex: a.regex.clone(),
        })?;
    let (plans, project, action) = (listed.plans, listed.project, listed.action);
    let n = plans.len();
    let count = |s: ProcessingState| plans.iter().filter(|p| p.state() == s).count().to_string();
    // A phase that completed waits for the next one (or its gate); only an applied plan is done.
    let applied = plans.iter().filter(|p| p.phase() == Phase::Applied).count();
    let waiting = plans
        .iter()
        .filter(|p| p.state() == ProcessingState::Complete && p.phase() != Phase::Applied)
        .count();
    // Each format builds only what it shows: the json rows or the table's cells.
    let structured = ctx.format.is_structured();
    let mut report = Report::ok(
        "plan list",
        serde_json::Value::Null,
        format!("{n} plan{} listed", if n == 1 { "" } else { "s" }),
    );
    let table_plans = if structured { &plans[..0] } else { &plans[..] };
    // One prefix per id wherever it appears (a parent is often listed too).
    let shorts = view::short_map(
        table_plans
            .iter()
            .flat_map(|p| std::iter::once(p.plan_id).chain(p.parent_plan_id))
            .map(|i| i.to_string()),
    );
    report = report.with(Element::Table {
        title: "Plans".into(),
        columns: [
            "ID", "Phase", "State", "Action", "Project", "Parent", "Created",
        ]
        .map(Column::left)
        .into(),
        rows: table_plans
            .iter()
            .map(|p| {
                vec![
                    view::id(view::short_in(&shorts, &p.plan_id.to_string())),
                    p.phase().as_str().into(),
                    p.state().as_str().into(),
                    p.action_name.clone().into(),
                    p.project_names().join(", ").into(),
                    p.parent_plan_id
                        .map(|i| view::id(view::short_in(&shorts, &i.to_string())))
                        .unwrap_or_else(|| "-".into()),
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
                ("Project", project.unwrap_or_else(|| "(any)".into())),
                ("Action", action.unwrap_or_else(|| "(any)".into())),
            ],
        ));
    }
    let mut report = report.with(Element::panel(
        "Summary",
        [
            ("Total", n.to_string()),
            ("Queued", count(ProcessingState::Queued)),
            ("Processing", count(ProcessingState::Processing)),
            ("Waiting", waiting.to_string()),
            ("Applied", applied.to_string()),
            ("Errored", count(ProcessingState::Errored)),
            ("Cancelled", count(ProcessingState::Cancelled)),
        ],
    ));
    if structured {
        // Serialized row by row from the plans, without a json value per row.
        report.payload = Some(Payload::new(PlanList { plans }));
    } else {
        report.data = json!({"plans": []});
    }
    Ok(report)
}

/// The phases the profile runs without asking (`strategize, execute`), or that none do.
fn automatic_phases(f: &cleveragents_engine::api::ProfileFlags) -> String {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_plan_lists_in_json_with_the_keys_values_and_order_of_its_documented_row() {
        let now = jiff::Timestamp::from_second(1_800_000_000).unwrap();
        let mut child = Plan::new("local/fix", "fix the parser", now);
        child.project_links = vec![
            cleveragents_engine::domain::plan::ProjectLink::new("local/api", Some("api"), false)
                .unwrap(),
        ];
        child.automation_profile = Some("trusted".into());
        child.parent_plan_id = Some(cleveragents_engine::domain::Id::generate());
        let plain = Plan::new("local/docs", "docs", now);
        let expected: Vec<serde_json::Value> = [&child, &plain]
            .iter()
            .map(|p| {
                json!({
                    "plan_id": p.plan_id.to_string(),
                    "action": p.action_name,
                    "projects": p.project_names(),
                    "phase": p.phase(),
                    "state": p.state(),
                    "attempt": p.status.attempt,
                    "automation_profile": p.automation_profile,
                    "parent_plan_id": p.parent_plan_id.map(|i| i.to_string()),
                    "created_at": p.created_at.to_string(),
                    "updated_at": p.updated_at.to_string(),
                })
            })
            .collect();
        let typed = PlanList {
            plans: vec![child, plain],
        };
        assert_eq!(
            serde_json::to_string_pretty(&typed).unwrap(),
            serde_json::to_string_pretty(&json!({ "plans": expected })).unwrap()
        );
    }
}
