//! `agents plan events PLAN [--type TYPE]... [--follow]`: a plan's event log (spec section 28,
//! "Observability"): every phase, step, approval, correction, review mark, export and sandbox
//! change the plan went through, oldest first; `--follow` keeps printing new ones until the
//! plan is applied or cancelled, or Ctrl-C.

use std::time::Duration;

use clap::Args;
use serde_json::json;

use super::{CliError, Context};
use crate::engine::domain::Id;
use crate::engine::domain::event::{EngineEvent, EventType};
use crate::engine::store::Store;
use crate::engine::store::events::Follower;
use crate::output::{Column, Element, Report};

/// How often `--follow` looks for new events.
const POLL: Duration = Duration::from_millis(200);

/// `agents plan events` arguments.
#[derive(Debug, Args)]
pub struct EventsArgs {
    /// Plan id or unique prefix
    pub plan: String,
    /// Only events of this type (`execute_step`, `approval_requested`, ...); repeatable
    #[arg(long = "type", value_name = "TYPE")]
    pub types: Vec<String>,
    /// Keep printing new events as they are written (one line each; JSON Lines with
    /// `--format json`) until the plan is applied or cancelled, or Ctrl-C
    #[arg(long)]
    pub follow: bool,
}

/// Runs `plan events`.
///
/// # Errors
/// `NOT_FOUND` / `AMBIGUOUS` for the plan, `INVALID_INPUT` naming an unknown `--type`.
pub fn events(ctx: &Context, a: &EventsArgs) -> Result<Report, CliError> {
    let types = parse_types(&a.types)?;
    let store = ctx.store()?;
    let plan = store.resolve_plan_id(&a.plan)??;
    // One connection and one follower: the history first, then (with --follow) what comes.
    let mut follower = Follower::new(0, Some(plan));
    let seen: Vec<EngineEvent> = follower
        .poll(&store)?
        .into_iter()
        .filter(|e| wanted(&types, e))
        .collect();
    if a.follow {
        return follow(ctx, &store, &plan, follower, &types, seen);
    }
    Ok(report(&plan.to_string(), &seen))
}

fn parse_types(given: &[String]) -> Result<Vec<EventType>, CliError> {
    given
        .iter()
        .map(|t| {
            t.parse::<EventType>().map_err(|_| {
                let known: Vec<&str> = EventType::ALL.iter().map(|k| k.as_str()).collect();
                CliError::invalid_input(format!("--type {t}: no such event type"))
                    .hint(format!("event types: {}", known.join(", ")))
            })
        })
        .collect()
}

fn wanted(types: &[EventType], e: &EngineEvent) -> bool {
    types.is_empty() || types.contains(&e.kind.event_type())
}

/// The event log as a table (and as the events themselves in JSON and YAML).
fn report(plan: &str, events: &[EngineEvent]) -> Report {
    let shown: Vec<_> = events
        .iter()
        .map(|e| super::next::streamed_event(e).into_owned())
        .collect();
    Report::ok(
        "plan events",
        json!({"plan_id": plan, "events": shown}),
        format!("Plan {plan}: {} event(s)", events.len()),
    )
    .with(Element::Table {
        title: "Events".into(),
        columns: vec![
            Column::right("Seq"),
            Column::left("Time"),
            Column::left("Type"),
            Column::left("What"),
        ],
        rows: events.iter().map(row).collect(),
        empty: "No events.".into(),
    })
}

fn row(e: &EngineEvent) -> Vec<crate::output::Cell> {
    vec![
        e.seq.to_string().into(),
        e.ts.strftime("%Y-%m-%d %H:%M:%S").to_string().into(),
        e.kind.event_type().as_str().into(),
        crate::event_text::summary(&e.kind).into(),
    ]
}

/// One line of `--follow` output.
fn print(ctx: &Context, e: &EngineEvent) -> std::io::Result<()> {
    if ctx.format == crate::output::Format::Json {
        return crate::output::stream_line(&super::next::streamed_event(e));
    }
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    writeln!(
        out,
        "{:>6}  {}  {:<22} {}",
        e.seq,
        e.ts.strftime("%H:%M:%S"),
        e.kind.event_type().as_str(),
        crate::event_text::summary(&e.kind)
    )?;
    out.flush()
}

/// Prints what is there, then every new event as it is written, until the plan is final or
/// the user presses Ctrl-C; the report then only counts what was printed.
fn follow(
    ctx: &Context,
    store: &Store,
    plan: &Id,
    mut follower: Follower,
    types: &[EventType],
    seen: Vec<EngineEvent>,
) -> Result<Report, CliError> {
    let guard = super::interrupt::Guard::new();
    let io = |e: std::io::Error| CliError::new("IO_ERROR", format!("writing an event: {e}"));
    let mut printed = 0;
    let mut new = seen;
    loop {
        for e in new.iter().filter(|e| wanted(types, e)) {
            print(ctx, e).map_err(io)?;
            printed += 1;
        }
        let done = store.plan(plan)?.is_none_or(|p| p.status.is_terminal());
        if done || guard.interrupted() {
            break;
        }
        std::thread::sleep(POLL);
        new = follower.poll(store)?;
    }
    Ok(Report::ok(
        "plan events",
        json!({"plan_id": plan.to_string(), "followed": printed}),
        format!("Followed {printed} event(s) of plan {plan}"),
    ))
}
