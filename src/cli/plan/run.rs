//! `agents plan execute|apply|cancel|approvals|decide|reject|errors|prompt` (spec sections 06,
//! 08-13 and 27): driving plans through the lifecycle engine and
//! answering what it asks.
//!
//! Driving happens in the foreground until a gate or a terminal state. A gate or a pending
//! decision ends the command with exit 3 naming the approval and the command that answers it;
//! nothing ever waits on stdin. Ctrl-C stops at the next safe point (exit 130) and leaves the
//! plan resumable. `--stream` prints every event as a JSON line, then the envelope as the last
//! line.

use std::time::Duration;

use clap::Args;
use serde_json::{Value, json};

use crate::cli::interrupt::Guard;
use crate::cli::{CliError, Context, view};
use crate::output::progress::Spinner;
use crate::output::{Column, Element, Level, Report};
use cleveragents_engine::api::{self, Op, Outcome};
use cleveragents_engine::api::{Answer, Driven, Observer, Stopped};
use cleveragents_engine::domain::approval::Approval;
use cleveragents_engine::domain::event::EngineEvent;
use cleveragents_engine::domain::{Id, Plan};

/// `plan execute` arguments.
#[derive(Debug, Args)]
pub struct ExecuteArgs {
    /// Print events as JSON Lines while the plan runs, then the envelope as the last line
    #[arg(long)]
    pub stream: bool,
    /// Plan id or unique prefix
    pub plan: String,
}

/// `plan apply` arguments.
#[derive(Debug, Args)]
pub struct ApplyArgs {
    /// Apply without asking for confirmation
    #[arg(short, long)]
    pub yes: bool,
    /// Leave the changes in the working tree instead of committing them
    #[arg(long)]
    pub no_commit: bool,
    /// Apply only files matching this glob (repeatable; with review marks, only their
    /// accepted hunks)
    #[arg(long, value_name = "GLOB")]
    pub only: Vec<String>,
    /// Leave out files matching this glob (repeatable)
    #[arg(long, value_name = "GLOB")]
    pub exclude: Vec<String>,
    /// After a partial Apply, discard what was left out instead of keeping it in the sandbox
    #[arg(long)]
    pub discard_rest: bool,
    /// Write the change even where it holds the value of a secret (an environment variable
    /// named *_KEY, *_TOKEN, *_SECRET or *_PASSWORD); refused otherwise
    #[arg(long)]
    pub allow_secrets: bool,
    /// Print events as JSON Lines, then the envelope as the last line
    #[arg(long)]
    pub stream: bool,
    /// Plan id or unique prefix
    pub plan: String,
}

/// `plan cancel` arguments.
#[derive(Debug, Args)]
pub struct CancelArgs {
    /// Why the plan is cancelled
    #[arg(short, long, value_name = "REASON")]
    pub reason: Option<String>,
    /// Accepted as on other commands that stop work; cancelling asks nothing (the sandbox is
    /// kept and the plan's record stays)
    #[arg(short, long)]
    pub yes: bool,
    /// Plan id or unique prefix
    pub plan: String,
}

/// `plan approvals` arguments.
#[derive(Debug, Args)]
pub struct ApprovalsArgs {
    /// Only this plan's approvals (id or unique prefix)
    pub plan: Option<String>,
}

/// `plan decide` arguments.
#[derive(Debug, Args)]
pub struct DecideArgs {
    /// Choose option N (1-based, as listed by `plan approvals`) or by its name
    /// (`spawn`, `skip`, `retry`, ...)
    #[arg(
        long,
        value_name = "N|NAME",
        conflicts_with = "guidance",
        required_unless_present_any = ["guidance", "max_cost_usd", "max_tokens"]
    )]
    pub option: Option<String>,
    /// Answer with guidance instead of an option
    #[arg(long, value_name = "TEXT")]
    pub guidance: Option<String>,
    /// Answer a budget approval with a higher cost limit, in US dollars
    #[arg(long, value_name = "USD", conflicts_with_all = ["option", "guidance"])]
    pub max_cost_usd: Option<f64>,
    /// Answer a budget approval with a higher token limit
    #[arg(long, value_name = "N", conflicts_with_all = ["option", "guidance"])]
    pub max_tokens: Option<u64>,
    /// Print events as JSON Lines, then the envelope as the last line
    #[arg(long)]
    pub stream: bool,
    /// Approval id (apr_...)
    pub approval: String,
}

/// `plan reject` arguments.
#[derive(Debug, Args)]
pub struct RejectArgs {
    /// Why (recorded; at a decision, the actor decides again with it as guidance)
    #[arg(long, value_name = "TEXT", required = true)]
    pub reason: String,
    /// Approval id (apr_...)
    pub approval: String,
}

/// `plan prompt` arguments.
#[derive(Debug, Args)]
pub struct PromptArgs {
    /// Print events as JSON Lines, then the envelope as the last line
    #[arg(long)]
    pub stream: bool,
    /// Plan id or unique prefix
    pub plan: String,
    /// Guidance for the plan's actors
    pub text: String,
}

/// What the CLI shows while the engine drives a plan: streamed events, a spinner, Ctrl-C.
struct CliObserver {
    stream: bool,
    spinner: Spinner,
    guard: Guard,
}

fn describe(e: &EngineEvent) -> String {
    let kind = e.kind.event_type().as_str().replace('_', " ");
    match e.kind.step() {
        Some(step) => format!("{kind}: {step}"),
        None => kind,
    }
}

impl Observer for CliObserver {
    fn event(&self, event: &EngineEvent) {
        if self.stream {
            let _ = crate::output::stream_line(&crate::cli::next::streamed_event(event));
        } else {
            self.spinner.set_message(&describe(event));
        }
    }

    fn progress(&self, message: &str) {
        self.spinner.set_message(message);
    }

    fn interrupted(&self) -> bool {
        self.guard.interrupted()
    }
}

/// The engine's API for this command, with an observer that streams events (`stream`) or
/// shows a spinner (rich), and turns Ctrl-C into a clean stop.
///
/// # Errors
/// Config errors (`CONFIG_INVALID`).
pub(crate) fn engine(ctx: &Context, stream: bool, message: &str) -> Result<api::Engine, CliError> {
    let settings = api::Settings::from_config(ctx.config()?);
    let observer = CliObserver {
        stream,
        spinner: if stream {
            Spinner::start(crate::output::Format::Plain, &ctx.terminal, message)
        } else {
            Spinner::start(ctx.format, &ctx.terminal, message)
        },
        guard: Guard::new(),
    };
    Ok(ctx
        .with_database(api::Engine::new(ctx.paths.clone(), settings))
        .with_observer(std::sync::Arc::new(observer)))
}

/// Where this command's operations run: through the chosen server, else in process with the
/// observer of [`engine()`](engine) (streamed events or a spinner, Ctrl-C). Through a server the plan
/// is driven there: leaving the command does not stop it.
///
/// # Errors
/// Config errors (`CONFIG_INVALID`) in process.
pub(crate) fn driver(
    ctx: &Context,
    stream: bool,
    message: &str,
) -> Result<Box<dyn api::Client>, CliError> {
    match &ctx.server {
        Some(chosen) if stream => Ok(Box::new(crate::cli::remote::Streaming::new(chosen)?)),
        Some(_) => ctx.client(),
        None => Ok(Box::new(engine(ctx, stream, message)?)),
    }
}

fn resolve_plan(client: &dyn api::Client, input: &str) -> Result<Id, CliError> {
    Ok(client.resolve_plan(input)?)
}

/// The error for an outcome of another operation than the one run (a bug).
pub(crate) fn unexpected(outcome: &Outcome) -> CliError {
    CliError::new(
        "INTERNAL",
        format!(
            "the engine answered with the outcome of `{}`",
            outcome.name()
        ),
    )
}

/// Runs an operation that drives a plan and returns how driving ended.
///
/// # Errors
/// The operation's errors; `INTERNAL` for another outcome.
pub(crate) fn run_driven(client: &dyn api::Client, op: Op) -> Result<Driven, CliError> {
    match client.run(op)? {
        Outcome::Driven(d) => Ok(*d),
        other => Err(unexpected(&other)),
    }
}

/// An approval as json; its `answer_command` repeats `--data-dir` / `--config-path` when the
/// user gave them, so it runs as printed.
fn approval_data(ctx: &Context, a: &Approval) -> Value {
    json!({
        "approval_id": a.approval_id,
        "plan_id": a.plan_id.to_string(),
        "kind": a.kind,
        "status": a.status,
        "summary": a.summary,
        "options": a.options,
        "context": crate::cli::next::approval_context(a),
        "answer_command": ctx.next(&a.next()),
        "created_at": a.created_at.to_string(),
    })
}

/// The plan's pending `budget` approval, if any.
fn pending_budget(ctx: &Context, plan_id: &cleveragents_engine::domain::Id) -> Option<Approval> {
    ctx.client()
        .ok()?
        .approvals(Some(&plan_id.to_string()))
        .ok()?
        .into_iter()
        .find(|a| a.kind == cleveragents_engine::domain::approval::ApprovalKind::Budget)
}

/// Turns the result of driving into the command's report or its exit-3 / error result.
///
/// # Errors
/// `NEEDS_APPROVAL` (exit 3) at a gate or pending decision; `PLAN_ERRORED`; `CANCELLED`;
/// `INTERRUPTED` (exit 130); `CONFLICT` when the lease was lost.
pub(crate) fn driven_report(
    ctx: &Context,
    command: &str,
    driven: Driven,
) -> Result<Report, CliError> {
    let p = &driven.plan;
    let id = p.plan_id.to_string();
    let mut data = Value::Object(crate::cli::plan::json::plan_dict(p));
    data["stopped"] = crate::cli::plan::json::stopped(&driven.stopped);
    data["events"] = json!(driven.events.len());
    let needs = |approvals: &[Approval], what: String| {
        let first = &approvals[0];
        let mut err = CliError::new("NEEDS_APPROVAL", what).detail(format!(
            "plan {id} is at {}/{}; approval {} ({}): {}",
            p.phase(),
            p.state(),
            first.approval_id,
            first.kind,
            first.summary
        ));
        for a in approvals {
            err = err.hint(ctx.next(&a.next()));
        }
        if approvals
            .iter()
            .any(|a| a.kind == cleveragents_engine::domain::approval::ApprovalKind::PhaseGate)
        {
            err = err.hint(ctx.suggest(&format!(
                "plan reject {} --reason <reason>",
                first.approval_id
            )));
        }
        let mut d = data.clone();
        d["approval"] = approval_data(ctx, first);
        d["approvals"] = json!(
            approvals
                .iter()
                .map(|a| approval_data(ctx, a))
                .collect::<Vec<_>>()
        );
        err.data(d)
    };
    match &driven.stopped {
        Stopped::Gate { approval } => {
            let mut err = needs(
                std::slice::from_ref(approval),
                format!(
                    "plan {id} waits for approval {}: {}",
                    approval.approval_id, approval.summary
                ),
            );
            // The apply gate's change, as `plan diff` counts it, where scripts find it.
            let changes = &approval.context["changes"];
            if changes.is_object() {
                err.data["changes"] = changes.clone();
            }
            Err(err)
        }
        Stopped::Decisions { approvals }
            if approvals.iter().all(|a| {
                a.kind == cleveragents_engine::domain::approval::ApprovalKind::ChildSpawn
            }) =>
        {
            Err(needs(
                approvals,
                format!(
                    "plan {id} waits for approval to spawn {} child plan{}: {}",
                    approvals.len(),
                    if approvals.len() == 1 { "" } else { "s" },
                    approvals[0].summary
                ),
            ))
        }
        Stopped::Decisions { approvals }
            if approvals.iter().all(|a| {
                a.kind == cleveragents_engine::domain::approval::ApprovalKind::InvariantViolation
            }) =>
        {
            Err(needs(
                approvals,
                format!(
                    "plan {id} stopped: {} invariant{} violated: {} (answer with --option accept, correct or cancel)",
                    approvals.len(),
                    if approvals.len() == 1 { "" } else { "s" },
                    approvals[0].summary
                ),
            ))
        }
        Stopped::Decisions { approvals } => Err(needs(
            approvals,
            format!(
                "plan {id} waits for {} decision{}: {}",
                approvals.len(),
                if approvals.len() == 1 { "" } else { "s" },
                approvals[0].summary
            ),
        )),
        // A budget stop waits for a human to raise the limit: exit 3, like a decision.
        Stopped::Errored { code, message }
            if code == "BUDGET_EXCEEDED"
                && let Some(budget) = pending_budget(ctx, &p.plan_id) =>
        {
            Err(needs(
                std::slice::from_ref(&budget),
                format!("plan {id} waits for a higher budget: {message}"),
            ))
        }
        Stopped::Errored { code, message } => Err(errored(p, code, message, data)),
        Stopped::Cancelled { reason } => Err(CliError::new(
            "CANCELLED",
            format!(
                "plan {id} was cancelled{}",
                reason
                    .as_deref()
                    .map(|r| format!(": {r}"))
                    .unwrap_or_default()
            ),
        )
        .detail("the sandbox is kept")
        .hint(ctx.suggest(&format!("plan status {id}")))
        .data(data)),
        // Through a server, Ctrl-C here ends only the waiting: a plan the server reports
        // interrupted was stopped by the server itself stopping.
        Stopped::Interrupted if ctx.server.is_some() => {
            let resume = if p.phase() == cleveragents_engine::domain::lifecycle::Phase::Apply {
                format!("plan apply {id}")
            } else {
                format!("plan execute {id}")
            };
            Err(CliError::new(
                "IO_ERROR",
                format!(
                    "the server stopped while running plan {id}; it resumes with `{}`",
                    ctx.suggest(&resume)
                ),
            )
            .detail(format!(
                "the plan stopped at a safe point, at {}/{}, and is kept; once the server runs again, resume it",
                p.phase(),
                p.state()
            ))
            .hint(ctx.suggest(&resume))
            .hint(ctx.suggest(&format!("plan status {id}")))
            .data(data))
        }
        Stopped::Interrupted => Err(crate::cli::interrupt::cancelled()
            .detail(format!(
                "plan {id} is at {}/{} and can be resumed",
                p.phase(),
                p.state()
            ))
            .hint(ctx.suggest(
                &if p.phase() == cleveragents_engine::domain::lifecycle::Phase::Apply {
                    format!("plan apply {id}")
                } else {
                    format!("plan execute {id}")
                },
            ))
            .data(data)),
        Stopped::LeaseLost => Err(CliError::new(
            "CONFLICT",
            format!("plan {id} was taken over by another process while this one ran it"),
        )
        .hint(ctx.suggest(&format!("plan status {id}")))),
        Stopped::NothingToDo { next } => {
            data["next"] = json!(ctx.next(next));
            Ok(Report::ok(
                command,
                data,
                format!("Plan {id}: Execute is complete; nothing to do"),
            )
            .with(plan_panel(p))
            .with(Element::List {
                title: "Next Steps".into(),
                items: vec![ctx.next(next)],
            }))
        }
        Stopped::Applied => Ok(applied_report(command, data, p)),
    }
}

/// The report of a plan that was applied: its plan panel and what each resource got.
fn applied_report(command: &str, mut data: Value, p: &Plan) -> Report {
    let id = p.plan_id;
    let summary = p
        .validation_summary
        .as_ref()
        .and_then(|v| v.get("apply_summary"))
        .cloned()
        .unwrap_or(Value::Null);
    data["apply_summary"] = summary.clone();
    let mut report = Report::ok(command, data, format!("Plan {id} applied")).with(plan_panel(p));
    if let Some(resources) = summary["resources"].as_array() {
        report = report.with(Element::Table {
            title: "Applied".into(),
            columns: ["Resource", "Files", "Lines", "Commit"]
                .map(Column::left)
                .into(),
            rows: resources
                .iter()
                .map(|r| {
                    vec![
                        r["resource"]
                            .as_str()
                            .unwrap_or_default()
                            .to_string()
                            .into(),
                        r["files"].as_array().map_or(0, Vec::len).to_string().into(),
                        format!("+{} -{}", r["additions"], r["deletions"]).into(),
                        r["commit"]
                            .as_str()
                            .map(|c| c[..12.min(c.len())].to_string())
                            .unwrap_or_else(|| "(not committed)".into())
                            .into(),
                    ]
                })
                .collect(),
            empty: "Nothing to apply: the plan changed no file.".into(),
        });
    }
    report.message(Level::Info, "git hooks were not run")
}

/// `PLAN_ERRORED` for a plan that errored, with its recovery steps as hints.
pub(crate) fn errored(p: &Plan, code: &str, message: &str, data: Value) -> CliError {
    let id = p.plan_id;
    cleveragents_engine::api::recovery_hints(p)
        .into_iter()
        .fold(
            CliError::new(
                "PLAN_ERRORED",
                format!("plan {id} errored in {}: {message}", p.phase()),
            )
            .detail(format!(
                "error code {code}; the plan is at {}/errored and can be resumed",
                p.phase()
            )),
            |e, h| e.hint(crate::cli::next::command(&h.next)),
        )
        .data(data)
}

/// The plan panel shown after driving.
pub(crate) fn plan_panel(p: &Plan) -> Element {
    Element::panel(
        "Plan",
        [
            ("Plan ID", view::id(p.plan_id.to_string())),
            ("Phase", p.phase().as_str().into()),
            ("State", p.state().as_str().into()),
            ("Action", view::id(p.action_name.clone())),
            ("Attempt", p.status.attempt.to_string().into()),
        ],
    )
}

/// `plan execute PLAN`.
///
/// # Errors
/// See [`driven_report`]; `CONFLICT` for plans in apply, applied or cancelled, or driven by
/// another process.
pub fn execute(ctx: &Context, a: &ExecuteArgs) -> Result<Report, CliError> {
    let client = driver(ctx, a.stream, "Running plan")?;
    let id = resolve_plan(client.as_ref(), &a.plan)?;
    let driven = run_driven(client.as_ref(), Op::Execute { plan: id })?;
    driven_report(ctx, "plan execute", driven)
}

/// `plan apply PLAN`.
///
/// # Errors
/// `NEEDS_APPROVAL` (exit 3) without a terminal and without `--yes`; `ABORTED` when declined;
/// see [`driven_report`].
pub fn apply(ctx: &Context, a: &ApplyArgs) -> Result<Report, CliError> {
    let apply = |plan: Id| Op::Apply {
        plan,
        no_commit: a.no_commit,
        selection: selection(a),
    };
    if a.yes {
        return apply_without_asking(ctx, a, apply);
    }
    // What is shown before asking is read with a client of its own, whose spinner is gone
    // (dropped with it) before the question is asked: a spinner drawing on stderr would
    // overwrite the `[y/N]` prompt.
    let (id, confirmation) = {
        let client = driver(ctx, a.stream, "Applying plan")?;
        let preview = client.apply_preview(api::ApplyPreviewQuery {
            plan: a.plan.clone(),
            selection: selection(a),
        })?;
        let id = preview.plan.plan_id;
        let confirmation = match preview.shown {
            None => {
                finished_plan(ctx, &preview.plan, a.discard_rest)?;
                // Let the driver name what is wrong (CONFLICT with hints).
                let driven = run_driven(client.as_ref(), apply(id))?;
                return driven_report(ctx, "plan apply", driven);
            }
            Some(api::ApplyShown::Whole { resources }) => full_confirmation(&id, &resources),
            Some(api::ApplyShown::Partial {
                written,
                left_out,
                total_items,
            }) => partial_confirmation(&id, (&written, &left_out), total_items, a.discard_rest),
        };
        (id, confirmation)
    };
    if !a.yes && ctx.terminal.stdin_tty {
        let _ = std::io::Write::write_all(&mut std::io::stderr(), confirmation.text.as_bytes());
    }
    crate::cli::confirm::confirm(
        &format!("Apply changes for plan {id}?"),
        a.yes,
        &ctx.terminal,
        &ctx.suggest(&format!("plan apply --yes {id}")),
    )
    .map_err(|mut e| {
        if e.data.is_object() {
            e.data["changes"] = confirmation.changes.clone();
            e.data["files"] = json!(confirmation.files);
            if let Some(left_out) = &confirmation.left_out {
                e.data["left_out"] = left_out.clone();
            }
        }
        e
    })?;
    let client = driver(ctx, a.stream, "Applying plan")?;
    let unfinished = unfinished_children(client.as_ref(), id)?;
    let driven = run_driven(client.as_ref(), apply(id))?;
    driven_report(ctx, "plan apply", driven).map(|r| warn_unfinished(ctx, r, &unfinished))
}

/// The child plans of `plan` (an appended correction's, a spawned one's) that are neither
/// applied nor cancelled: applying the parent does not carry their work.
fn unfinished_children(client: &dyn api::Client, plan: Id) -> Result<Vec<Plan>, CliError> {
    use cleveragents_engine::domain::{Phase, ProcessingState};
    Ok(client
        .plan_list(api::PlanFilter::default())?
        .plans
        .into_iter()
        .filter(|p| {
            p.parent_plan_id == Some(plan)
                && p.phase() != Phase::Applied
                && p.state() != ProcessingState::Cancelled
        })
        .collect())
}

/// `plan apply`'s report with a warning for each unfinished child plan: the parent is applied
/// without the child's work (a correction appended but errored or not run yet), and the
/// child's status is the next step.
fn warn_unfinished(ctx: &Context, mut report: Report, children: &[Plan]) -> Report {
    for c in children {
        report = report.message(
            Level::Warn,
            format!(
                "child plan {} ({}) is at {}/{}: its work is not part of this apply",
                c.plan_id,
                c.name,
                c.phase(),
                c.state()
            ),
        );
    }
    if let Some(c) = children.first() {
        let next = ctx.suggest(&format!("plan status {}", c.plan_id));
        match report.elements.iter_mut().rev().find_map(|e| match e {
            Element::List { title, items } if title == "Next Steps" => Some(items),
            _ => None,
        }) {
            Some(items) => items.push(next),
            None => {
                report = report.with(Element::List {
                    title: "Next Steps".into(),
                    items: vec![next],
                })
            }
        }
    }
    report
}

/// The part of the review `plan apply`'s `--only`, `--exclude`, `--discard-rest` and
/// `--allow-secrets` select.
fn selection(a: &ApplyArgs) -> api::ApplyRequest {
    api::ApplyRequest {
        only: a.only.clone(),
        exclude: a.exclude.clone(),
        discard_rest: a.discard_rest,
        allow_secrets: a.allow_secrets,
    }
}

/// `plan apply --yes`: nothing is shown or asked, so the confirmation's preview and review
/// (the whole changeset diffed, as `plan diff` does) are not computed. The answers are those
/// of the asking path: `CONFLICT` for a finished plan, `INVALID_INPUT` for a bad glob when the
/// plan can be applied, the driver's own answer when it cannot.
fn apply_without_asking(
    ctx: &Context,
    a: &ApplyArgs,
    apply: impl Fn(Id) -> Op,
) -> Result<Report, CliError> {
    use cleveragents_engine::domain::{Phase, ProcessingState};
    let client = driver(ctx, a.stream, "Applying plan")?;
    let id = resolve_plan(client.as_ref(), &a.plan)?;
    let plan = client.plan(&id.to_string())?;
    finished_plan(ctx, &plan, a.discard_rest)?;
    let ready = matches!(
        (plan.phase(), plan.state()),
        (Phase::Execute, ProcessingState::Complete)
            | (
                Phase::Apply,
                ProcessingState::Queued | ProcessingState::Errored
            )
    );
    if ready {
        api::ApplySelection::new(&selection(a))?;
    }
    let unfinished = unfinished_children(client.as_ref(), id)?;
    let driven = run_driven(client.as_ref(), apply(id))?;
    driven_report(ctx, "plan apply", driven).map(|r| warn_unfinished(ctx, r, &unfinished))
}

/// `CONFLICT` for a plan that is already applied or cancelled, with follow-ups that fit it
/// (what it changed; with `--discard-rest`, `plan cleanup`, which releases an applied plan's
/// sandbox and so discards what a partial Apply left there). `Ok` for any other plan.
fn finished_plan(
    ctx: &Context,
    plan: &cleveragents_engine::domain::Plan,
    discard_rest: bool,
) -> Result<(), CliError> {
    use cleveragents_engine::domain::{Phase, ProcessingState};
    let id = plan.plan_id;
    if plan.phase() == Phase::Applied {
        let mut e = CliError::new(
            "CONFLICT",
            format!("plan {id} is already applied; there is nothing left to apply"),
        )
        .hint(ctx.suggest(&format!("plan status {id}")))
        .hint(ctx.suggest(&format!("plan artifacts {id}")));
        if discard_rest {
            e = e
                .detail("what a partial Apply left out, if anything, stays in the plan's sandbox until `plan cleanup` releases it")
                .hint(ctx.suggest("plan cleanup"));
        }
        return Err(e);
    }
    if plan.state() == ProcessingState::Cancelled {
        return Err(CliError::new(
            "CONFLICT",
            format!("plan {id} is cancelled; a cancelled plan is never applied"),
        )
        .hint(ctx.suggest(&format!("plan status {id}")))
        .hint(ctx.suggest("plan cleanup")));
    }
    Ok(())
}

/// What `plan apply` shows before asking: the text (stderr, on a terminal) and the data the
/// `NEEDS_APPROVAL` error carries.
struct Confirmation {
    text: String,
    changes: Value,
    files: usize,
    left_out: Option<Value>,
}

/// The whole reviewed tree, per resource and file.
fn full_confirmation(
    id: &cleveragents_engine::domain::Id,
    preview: &[api::ApplyPreview],
) -> Confirmation {
    let files: usize = preview.iter().map(|p| p.files.len()).sum();
    let added: u64 = preview
        .iter()
        .flat_map(|p| p.files.iter().map(|f| f.2))
        .sum();
    let removed: u64 = preview
        .iter()
        .flat_map(|p| p.files.iter().map(|f| f.3))
        .sum();
    let mut text = format!("Changes of plan {id}: {files} file(s), +{added} -{removed}\n");
    for p in preview {
        for (status, path, plus, minus) in &p.files {
            text.push_str(&format!(
                "  {status} {path} (+{plus} -{minus}) [{}]\n",
                p.resource
            ));
        }
    }
    Confirmation {
        text,
        changes: json!(preview),
        files,
        left_out: None,
    }
}

/// Only what the review marks (and `--only`/`--exclude`) let through, then what is left out
/// (`docs/review.md`).
fn partial_confirmation(
    id: &cleveragents_engine::domain::Id,
    (written, left_out): (&[api::Written], &[api::LeftOut]),
    total: usize,
    discard_rest: bool,
) -> Confirmation {
    let items: usize = written.iter().map(|w| w.items).sum();
    let added: u64 = written.iter().map(|w| w.additions).sum();
    let removed: u64 = written.iter().map(|w| w.deletions).sum();
    let mut text = format!(
        "Accepted part of plan {id}: {items} of {total} item(s) in {} file(s), +{added} -{removed}\n",
        written.len()
    );
    for w in written {
        let part = if w.items == w.of {
            String::new()
        } else {
            format!("{} of {} hunks, ", w.items, w.of)
        };
        text.push_str(&format!(
            "  {} {} ({part}+{} -{}) [{}]\n",
            w.status.letter(),
            w.path,
            w.additions,
            w.deletions,
            w.resource
        ));
    }
    if !left_out.is_empty() {
        text.push_str(&format!(
            "Left out ({}), {}:\n",
            left_out.len(),
            if discard_rest {
                "discarded with the sandbox"
            } else {
                "kept in the sandbox"
            }
        ));
        for l in left_out {
            text.push_str(&format!("  {} {} ({}", l.path, l.what, l.why));
            if let Some(r) = &l.reason {
                text.push_str(&format!(": {r}"));
            }
            text.push_str(")\n");
        }
    }
    Confirmation {
        text,
        changes: json!(written),
        files: written.len(),
        left_out: Some(json!(left_out)),
    }
}

/// `plan cancel [-r REASON] PLAN`.
///
/// # Errors
/// `CONFLICT` for applied or cancelled plans.
pub fn cancel(ctx: &Context, a: &CancelArgs) -> Result<Report, CliError> {
    let client = driver(ctx, false, "Cancelling plan")?;
    let id = resolve_plan(client.as_ref(), &a.plan)?;
    let api::Cancelled {
        plan,
        was_running_in: before,
    } = match client.run(Op::Cancel {
        plan: id,
        reason: a.reason.clone(),
        wait: Duration::from_secs(5),
    })? {
        Outcome::Cancelled(c) => *c,
        other => return Err(unexpected(&other)),
    };
    let cancelled = plan.state() == cleveragents_engine::domain::ProcessingState::Cancelled;
    let data = json!({
        "plan": Value::Object(crate::cli::plan::json::plan_dict(&plan)),
        "cancelled": cancelled,
        "reason": a.reason,
        "was_running_in": before.as_ref().map(|l| json!({"pid": l.pid, "host": l.host, "kind": l.kind})),
    });
    if !cancelled {
        return Err(CliError::new(
            "CONFLICT",
            format!("cancellation of plan {id} was requested, but its driver has not stopped yet"),
        )
        .detail("the plan's driver stops at its next step, model turn or tool call")
        .hint(ctx.suggest(&format!("plan status {id}")))
        .data(data));
    }
    let mut report =
        Report::ok("plan cancel", data, format!("Plan {id} cancelled")).with(plan_panel(&plan));
    if let Some(l) = before {
        report = report.message(
            Level::Info,
            format!(
                "the plan was running in pid {} ({}); it stopped",
                l.pid, l.kind
            ),
        );
    }
    Ok(report.message(Level::Info, "the sandbox is kept"))
}

/// `plan approvals [PLAN]`.
///
/// # Errors
/// Unknown plans; store errors.
pub fn approvals(ctx: &Context, a: &ApprovalsArgs) -> Result<Report, CliError> {
    let pending = ctx.client()?.approvals(a.plan.as_deref())?;
    let n = pending.len();
    let plan_ids = view::short_map(pending.iter().map(|a| a.plan_id.to_string()));
    let rows = pending
        .iter()
        .map(|a| {
            vec![
                view::id(a.approval_id.clone()),
                view::id(view::short_in(&plan_ids, &a.plan_id.to_string())),
                a.kind.as_str().into(),
                a.summary.clone().into(),
                if a.options.len() > 1 {
                    a.options
                        .iter()
                        .enumerate()
                        .map(|(i, o)| format!("{}. {o}", i + 1))
                        .collect::<Vec<_>>()
                        .join("; ")
                } else {
                    String::new()
                }
                .into(),
                ctx.next(&a.next()).into(),
            ]
        })
        .collect();
    Ok(Report::ok(
        "plan approvals",
        json!({"approvals": pending.iter().map(|a| approval_data(ctx, a)).collect::<Vec<_>>()}),
        format!("{n} pending approval{}", if n == 1 { "" } else { "s" }),
    )
    .with(Element::Table {
        title: "Pending Approvals".into(),
        columns: ["ID", "Plan", "Kind", "Summary", "Options", "Answer With"]
            .map(Column::left)
            .into(),
        rows,
        empty: "Nothing waits for a human.".into(),
    }))
}

fn answer_report(
    ctx: &Context,
    command: &str,
    client: &dyn api::Client,
    op: Op,
) -> Result<Report, CliError> {
    let api::Answered {
        answered,
        plan,
        driven,
        not_yet_supported,
    } = match client.run(op)? {
        Outcome::Answered(a) => *a,
        other => return Err(unexpected(&other)),
    };
    let approval_id = &answered.approval.approval_id;
    if let Some(d) = driven {
        return driven_report(ctx, command, d).map(|r| {
            r.message(
                Level::Info,
                format!(
                    "{}: {}",
                    approval_id,
                    crate::cli::next::effect(ctx, &answered)
                ),
            )
        });
    }
    if let Some(what) = not_yet_supported {
        return Ok(Report::ok(
            command,
            json!({"approval": approval_data(ctx, &answered.approval), "effect": crate::cli::next::effect(ctx, &answered), "plan": Value::Object(crate::cli::plan::json::plan_dict(&plan))}),
            format!("Answered {approval_id}; {what}: not yet supported"),
        )
        .with(plan_panel(&plan)));
    }
    let next = next_after(ctx, &answered.approval, &plan);
    let mut data = json!({"approval": approval_data(ctx, &answered.approval), "effect": crate::cli::next::effect(ctx, &answered), "plan": Value::Object(crate::cli::plan::json::plan_dict(&plan))});
    if !next.is_empty() {
        data["next"] = json!(next);
    }
    let mut report = Report::ok(
        command,
        data,
        format!(
            "Answered {approval_id}: {}",
            crate::cli::next::effect(ctx, &answered)
        ),
    )
    .with(plan_panel(&plan));
    if !next.is_empty() {
        report = report.with(Element::List {
            title: "Next Steps".into(),
            items: next,
        });
    }
    Ok(report)
}

/// What the user can do after declining a phase gate (the plan stays where it is).
fn next_after(
    ctx: &Context,
    approval: &Approval,
    plan: &cleveragents_engine::domain::Plan,
) -> Vec<String> {
    use cleveragents_engine::domain::approval::{ApprovalKind, ApprovalStatus};
    if approval.kind != ApprovalKind::PhaseGate || approval.status != ApprovalStatus::Rejected {
        return Vec::new();
    }
    let id = plan.plan_id;
    let mut next = match approval.context["gate"].as_str() {
        Some("apply") => vec![
            format!(
                "review the changes: {}",
                ctx.suggest(&format!("plan diff {id}"))
            ),
            format!(
                "take the changes to a branch (in place of <branch>) and finish them by hand: {}",
                ctx.suggest(&format!("plan export --branch <branch> {id}"))
            ),
            format!(
                "undo steps to run them again: {} (then plan rollback and plan execute)",
                ctx.suggest(&format!("plan checkpoints {id}"))
            ),
            format!(
                "apply after all: {}",
                ctx.suggest(&format!("plan apply {id}"))
            ),
        ],
        _ => {
            let mut next = vec![format!(
                "review the strategy: {}",
                ctx.suggest(&format!("plan status {id}"))
            )];
            // Guidance is offered only to a plan with an actor that reads it.
            if api::guidance_heard(plan) {
                next.push(format!(
                    "give guidance: {}",
                    ctx.suggest(&format!("plan prompt {id} <guidance>"))
                ));
            }
            next.push(format!(
                "go ahead after all: {}",
                ctx.suggest(&format!("plan execute {id}"))
            ));
            next
        }
    };
    next.push(format!(
        "drop the plan: {}",
        ctx.suggest(&format!("plan cancel {id}"))
    ));
    next
}

/// `plan decide APR (--option N | --guidance TEXT)`.
///
/// # Errors
/// Unknown or resolved approvals, options out of range, see [`driven_report`].
pub fn decide(ctx: &Context, a: &DecideArgs) -> Result<Report, CliError> {
    let client = driver(ctx, a.stream, "Answering approval")?;
    if a.max_cost_usd.is_some() || a.max_tokens.is_some() {
        if a.max_cost_usd.is_some_and(|c| !c.is_finite() || c < 0.0) {
            return Err(CliError::invalid_input(
                "--max-cost-usd must be a non-negative number of US dollars",
            ));
        }
        let budget = cleveragents_engine::api::PlanBudget {
            max_cost_usd: a.max_cost_usd,
            max_tokens: a.max_tokens,
        };
        return answer_report(
            ctx,
            "plan decide",
            client.as_ref(),
            Op::Decide {
                approval: a.approval.clone(),
                answer: Answer::Budget(budget),
            },
        );
    }
    let answer = match (&a.option, &a.guidance) {
        (Some(text), _) => match text.trim().parse::<usize>() {
            Ok(n) => Answer::Option(n),
            Err(_) => {
                let approval = client.approval(&a.approval)?;
                let options = approval.map(|x| x.options).unwrap_or_default();
                match options
                    .iter()
                    .position(|o| o.eq_ignore_ascii_case(text.trim()))
                {
                    Some(i) => Answer::Option(i + 1),
                    None => {
                        return Err(CliError::invalid_input(format!(
                            "--option `{text}` is neither a number nor an option of approval {}",
                            a.approval
                        ))
                        .hint(if options.is_empty() {
                            ctx.suggest("plan approvals")
                        } else {
                            format!("options: {}", options.join(", "))
                        }));
                    }
                }
            }
        },
        (None, Some(g)) if !g.trim().is_empty() => Answer::Guidance(g.trim().to_string()),
        _ => {
            return Err(CliError::invalid_input("--guidance cannot be empty")
                .hint(ctx.suggest(&format!("plan decide {} --option 1", a.approval))));
        }
    };
    answer_report(
        ctx,
        "plan decide",
        client.as_ref(),
        Op::Decide {
            approval: a.approval.clone(),
            answer,
        },
    )
}

/// `plan reject APR --reason TEXT`.
///
/// # Errors
/// Unknown or resolved approvals; see [`driven_report`].
pub fn reject(ctx: &Context, a: &RejectArgs) -> Result<Report, CliError> {
    if a.reason.trim().is_empty() {
        return Err(CliError::invalid_input("--reason cannot be empty"));
    }
    crate::cli::refuse_placeholder("--reason", &a.reason)?;
    let client = driver(ctx, false, "Rejecting")?;
    answer_report(
        ctx,
        "plan reject",
        client.as_ref(),
        Op::Reject {
            approval: a.approval.clone(),
            reason: a.reason.trim().to_string(),
        },
    )
}

/// `plan prompt PLAN TEXT`: guidance as a `user_intervention` decision; an errored or waiting
/// plan resumes with it.
///
/// # Errors
/// `CONFLICT` for applied or cancelled plans; see [`driven_report`].
pub fn prompt(ctx: &Context, a: &PromptArgs) -> Result<Report, CliError> {
    if a.text.trim().is_empty() {
        return Err(CliError::invalid_input("TEXT cannot be empty"));
    }
    crate::cli::refuse_placeholder("the guidance", &a.text)?;
    let client = driver(ctx, a.stream, "Resuming plan")?;
    let id = resolve_plan(client.as_ref(), &a.plan)?;
    let api::Prompted {
        prompted,
        plan,
        driven,
    } = match client.run(Op::Prompt {
        plan: id,
        text: a.text.trim().to_string(),
    })? {
        Outcome::Prompted(p) => *p,
        other => return Err(unexpected(&other)),
    };
    let note = prompted
        .answered
        .as_ref()
        .map(|apr| format!("answered {apr} with the guidance"));
    // As `plan correct` does: say when no actor of the plan can act on the guidance.
    let ignored = guidance_ignored(&plan);
    let warn = |r: Report| match &ignored {
        Some(why) => r.message(Level::Warn, why.clone()),
        None => r,
    };
    let Some(driven) = driven else {
        let mut r = Report::ok(
            "plan prompt",
            json!({"plan": Value::Object(crate::cli::plan::json::plan_dict(&plan)), "guidance": a.text.trim(), "resumed": false}),
            format!("Guidance recorded for plan {id}; the next actor run follows it"),
        )
        .with(plan_panel(&plan));
        if let Some(n) = note {
            r = r.message(Level::Info, n);
        }
        return Ok(warn(r));
    };
    driven_report(ctx, "plan prompt", driven)
        .map(|r| match note {
            Some(n) => r.message(Level::Info, n),
            None => r,
        })
        .map(warn)
        .map_err(|mut e| {
            // The plan failed again: the error says why the guidance did not help.
            if let Some(why) = &ignored {
                e.body.detail = Some(match e.body.detail.take() {
                    Some(d) => format!("{d}; {why}"),
                    None => why.clone(),
                });
            }
            e
        })
}

/// `plan errors PLAN`: error history, retry history (from events) and recovery suggestions.
///
/// # Errors
/// Unknown plans; store errors.
pub fn errors(ctx: &Context, input: &str) -> Result<Report, CliError> {
    let client = ctx.client()?;
    let api::ErrorsView { plan, errors } = client.plan_errors(input)?;
    let id = plan.plan_id;
    let recovery_decisions: Vec<Value> = client
        .decisions(&id.to_string())?
        .into_iter()
        .filter(|d| {
            matches!(
                d.decision_type,
                cleveragents_engine::domain::decision::DecisionType::ErrorRecovery
                    | cleveragents_engine::domain::decision::DecisionType::UserIntervention
            )
        })
        .map(|d| {
            json!({
                "decision_id": d.decision_id.to_string(),
                "decision_type": d.decision_type,
                "chosen_option": d.chosen_option,
                "created_at": d.created_at.to_string(),
            })
        })
        .collect();
    let hints = ctx.recovery_hints(&plan);
    let n = errors.len();
    let data = json!({
        "plan_id": id.to_string(),
        "phase": plan.phase(),
        "state": plan.state(),
        "error_code": plan.error_code,
        "error_message": plan.error_message,
        "errors": errors,
        "retries": n.saturating_sub(1),
        "recovery_decisions": recovery_decisions,
        "suggestions": hints,
    });
    let mut report = Report::ok(
        "plan errors",
        data,
        format!(
            "{n} error{} recorded for plan {id}",
            if n == 1 { "" } else { "s" }
        ),
    )
    .with(Element::Table {
        title: "Errors".into(),
        columns: ["When", "Phase", "Code", "Message"]
            .map(Column::left)
            .into(),
        rows: errors
            .iter()
            .map(|e| {
                vec![
                    view::time(&e.at).into(),
                    e.phase.as_str().unwrap_or_default().to_string().into(),
                    e.code.clone().into(),
                    e.message.clone().into(),
                ]
            })
            .collect(),
        empty: "No errors.".into(),
    });
    if !recovery_decisions.is_empty() {
        report = report.with(Element::List {
            title: "Guidance and Recovery Decisions".into(),
            items: recovery_decisions
                .iter()
                .map(|d| {
                    format!(
                        "{} {}: {}",
                        d["created_at"].as_str().unwrap_or_default(),
                        d["decision_type"].as_str().unwrap_or_default(),
                        d["chosen_option"].as_str().unwrap_or_default()
                    )
                })
                .collect(),
        });
    }
    if !hints.is_empty() {
        report = report.with(Element::List {
            title: "Recovery Suggestions".into(),
            items: hints,
        });
    }
    Ok(report)
}

/// Why a revert of `plan` would not act on the guidance, when it would not: its steps are run
/// by the offline script executor, which runs the action's script as written (only a model
/// strategist, if any, reads the guidance when it re-decides).
pub(crate) fn guidance_ignored(plan: &cleveragents_engine::domain::Plan) -> Option<String> {
    let executor = plan.execution_actor.as_deref()?;
    if executor != api::SCRIPT_EXECUTOR {
        return None;
    }
    let strategist = plan.strategy_actor.as_deref().unwrap_or_default();
    let decides = if strategist == api::CHECKLIST_STRATEGIST {
        format!("nor does its strategist {strategist}, so the re-run repeats the same work")
    } else {
        format!("only its strategist {strategist} reads the guidance when it re-decides")
    };
    Some(format!(
        "the plan's execution actor {executor} cannot act on guidance (it runs the action's script as written); {decides}. To carry the guidance out, correct with --mode append --execution-actor PROVIDER/MODEL"
    ))
}
