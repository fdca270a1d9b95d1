//! `agents plan events PLAN [--type TYPE]... [--follow]`: a plan's event log (spec section 28,
//! "Observability"): every phase, step, approval, correction, review mark, export and sandbox
//! change the plan went through, oldest first; `--follow` keeps printing new ones until the
//! plan is applied or cancelled, or Ctrl-C.

use std::ops::ControlFlow;

use clap::Args;
use serde_json::json;

use crate::cli::{CliError, Context};
use crate::output::{Column, Element, Report};
use cleveragents_engine::api::{Client, Followed};
use cleveragents_engine::domain::Id;
use cleveragents_engine::domain::event::{EngineEvent, EventType};

/// Events read per page of the history.
const PAGE: u32 = 500;

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
    /// Only events after this sequence number (resume a follower with the last `seq` it
    /// printed: nothing is repeated or lost)
    #[arg(long, value_name = "SEQ", default_value_t = 0)]
    pub after: i64,
}

/// Runs `plan events`, in process or through a server.
///
/// # Errors
/// `NOT_FOUND` / `AMBIGUOUS` for the plan, `INVALID_INPUT` naming an unknown `--type`.
pub fn events(ctx: &Context, a: &EventsArgs) -> Result<Report, CliError> {
    let types = parse_types(&a.types)?;
    let client = ctx.client()?;
    let plan = client.resolve_plan(&a.plan)?;
    if a.follow {
        return follow(ctx, client.as_ref(), &plan, a.after, &types);
    }
    let mut seen = Vec::new();
    let mut after = a.after;
    loop {
        let page = client.events(Some(&plan), after, PAGE)?;
        let Some(last) = page.last() else { break };
        after = last.seq;
        let full = page.len() == PAGE as usize;
        seen.extend(page.into_iter().filter(|e| wanted(&types, e)));
        if !full {
            break;
        }
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
        .map(|e| crate::cli::next::streamed_event(e).into_owned())
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
        what(e).into(),
    ]
}

/// What happened, and on a server who caused it.
fn what(e: &EngineEvent) -> String {
    let summary = crate::event_text::summary(&e.kind);
    match &e.caused_by {
        Some(who) => format!("{summary} (by {who})"),
        None => summary,
    }
}

/// One line of `--follow` output.
fn print(ctx: &Context, e: &EngineEvent) -> std::io::Result<()> {
    if ctx.format == crate::output::Format::Json {
        return crate::output::stream_line(&crate::cli::next::streamed_event(e));
    }
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    writeln!(
        out,
        "{:>6}  {}  {:<22} {}",
        e.seq,
        e.ts.strftime("%H:%M:%S"),
        e.kind.event_type().as_str(),
        what(e)
    )?;
    out.flush()
}

/// Prints what is there, then every new event as it is written, until the plan is final or
/// the user presses Ctrl-C; the report then only counts what was printed.
fn follow(
    ctx: &Context,
    client: &dyn Client,
    plan: &Id,
    after: i64,
    types: &[EventType],
) -> Result<Report, CliError> {
    let guard = crate::cli::interrupt::Guard::new();
    let mut printed = 0;
    let mut last = after;
    let mut failed = None;
    client.follow(Some(plan), after, &mut |f| {
        match f {
            Followed::Event(e) => {
                last = e.seq;
                if wanted(types, &e) {
                    if let Err(err) = print(ctx, &e) {
                        failed = Some(err);
                        return ControlFlow::Break(());
                    }
                    printed += 1;
                }
            }
            Followed::Idle => {}
        }
        if guard.interrupted() {
            ControlFlow::Break(())
        } else {
            ControlFlow::Continue(())
        }
    })?;
    if let Some(e) = failed {
        return Err(CliError::new("IO_ERROR", format!("writing an event: {e}")));
    }
    Ok(Report::ok(
        "plan events",
        json!({"plan_id": plan.to_string(), "followed": printed, "last_seq": last}),
        format!("Followed {printed} event(s) of plan {plan}"),
    ))
}
