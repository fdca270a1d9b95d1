//! `agents plan review PLAN [--accept|--reject|--reviewed HUNK|PATH...] [--reason TEXT]`
//! (`docs/review.md`): marks hunks and files of the diff the apply gate shows as the caller's
//! marks, then lists every item with its verdict, id, the decisions that produced it and
//! every reviewer's mark. Apply writes only what is accepted.

use clap::Args;
use serde_json::json;

use crate::cli::{CliError, Context, view};
use crate::output::{Cell, Column, Element, Report, Tone};
use cleveragents_engine::api::{Mark, ReviewError, ReviewerMark};
use cleveragents_engine::api::{Op, Outcome, ReviewRequest};

/// `plan review` arguments.
#[derive(Debug, Args)]
pub struct ReviewArgs {
    /// Accept these hunks (id or unique prefix) or files (a path, a directory, or a glob such as `tests/**`); repeatable
    #[arg(long, value_name = "HUNK|PATH", num_args = 1..)]
    pub accept: Vec<String>,
    /// Reject these hunks (id or unique prefix) or files (a path, a directory, or a glob such as `tests/**`); repeatable
    #[arg(long, value_name = "HUNK|PATH", num_args = 1..)]
    pub reject: Vec<String>,
    /// Mark these as reviewed: seen, no verdict yet (hunk id, prefix, path, directory or glob); repeatable
    #[arg(long, value_name = "HUNK|PATH", num_args = 1..)]
    pub reviewed: Vec<String>,
    /// Withdraw your mark of these (pending again unless another reviewer marked them); repeatable
    #[arg(long, value_name = "HUNK|PATH", num_args = 1..)]
    pub reset: Vec<String>,
    /// Why (kept with the mark; a rejection's reason guides its correction)
    #[arg(long, value_name = "TEXT")]
    pub reason: Option<String>,
    /// Plan id or unique prefix
    pub plan: String,
}

impl From<ReviewError> for CliError {
    fn from(e: ReviewError) -> Self {
        match e {
            ReviewError::NotFound { .. } => CliError::new("NOT_FOUND", e.to_string())
                .hint("`agents plan review PLAN` lists the hunk ids and paths"),
            ReviewError::Ambiguous { .. } => CliError::new("INVALID_INPUT", e.to_string())
                .hint("give more digits of the hunk id"),
            ReviewError::Glob { .. } => CliError::new("INVALID_INPUT", e.to_string())
                .hint("globs as in .gitignore: `src/**`, `*.rs`"),
            ReviewError::Store(s) => s.into(),
            ReviewError::Sandbox(s) => s.into(),
        }
    }
}

/// A target given to two of `--accept`, `--reject` and `--reset` is refused rather than
/// marked by whichever runs last.
fn refuse_contradictions(a: &ReviewArgs) -> Result<(), CliError> {
    let flags = [
        ("--accept", &a.accept),
        ("--reject", &a.reject),
        ("--reviewed", &a.reviewed),
        ("--reset", &a.reset),
    ];
    for (i, (first, these)) in flags.iter().enumerate() {
        for (second, those) in &flags[i + 1..] {
            if let Some(t) = these.iter().find(|t| those.contains(t)) {
                return Err(CliError::invalid_input(format!(
                    "{t} is given to both {first} and {second}"
                ))
                .hint("give each hunk or file one mark per command"));
            }
        }
    }
    Ok(())
}

/// Who marked an item what, and why: `alice accepted; bob rejected: too risky` (the local
/// user, who has no name, is `you`).
fn marks_cell(marks: &[ReviewerMark]) -> String {
    marks
        .iter()
        .map(|m| {
            let who = m.reviewer.as_deref().unwrap_or("you");
            match &m.reason {
                Some(r) => format!("{who} {}: {r}", m.mark.as_str()),
                None => format!("{who} {}", m.mark.as_str()),
            }
        })
        .collect::<Vec<_>>()
        .join("; ")
}

/// `plan review`.
///
/// # Errors
/// `NOT_FOUND` for an unknown plan, hunk or path; `INVALID_INPUT` for an ambiguous hunk id or
/// a `--reason` without a mark.
pub fn run(ctx: &Context, a: &ReviewArgs) -> Result<Report, CliError> {
    if a.reason.is_some() && a.accept.is_empty() && a.reject.is_empty() && a.reviewed.is_empty() {
        return Err(CliError::new(
            "INVALID_INPUT",
            "--reason needs --accept, --reject or --reviewed",
        )
        .hint("agents plan review PLAN --reject HUNK --reason TEXT"));
    }
    refuse_contradictions(a)?;
    // Through the engine's API, as the TUI marks (`Op::Review`).
    let client = crate::cli::plan::run::driver(ctx, false, "Reviewing plan")?;
    let id = client.resolve_plan(&a.plan)?;
    let mut review = client.review(&id.to_string())?;
    let mut marked = Vec::new();
    for (targets, mark) in [
        (&a.accept, Mark::Accepted),
        (&a.reject, Mark::Rejected),
        (&a.reviewed, Mark::Reviewed),
        (&a.reset, Mark::Pending),
    ] {
        if targets.is_empty() {
            continue;
        }
        let op = Op::Review(Box::new(ReviewRequest {
            plan: id,
            targets: targets.clone(),
            mark,
            // With several marks, the reason is the rejection's, else the acceptance's; a
            // reset clears it.
            reason: match mark {
                Mark::Rejected => a.reason.clone(),
                Mark::Accepted if a.reject.is_empty() => a.reason.clone(),
                Mark::Reviewed if a.reject.is_empty() && a.accept.is_empty() => a.reason.clone(),
                _ => None,
            },
        }));
        match client.run(op)? {
            Outcome::Reviewed(r) => {
                marked.push(json!({"mark": mark, "items": r.marked}));
                review = r.review;
            }
            other => {
                return Err(CliError::new(
                    "INTERNAL",
                    format!("plan review: unexpected answer `{}`", other.name()),
                ));
            }
        }
    }
    let c = review.counts;
    let status = format!(
        "{} item(s): {} accepted, {} rejected, {} reviewed, {} pending{}",
        c.accepted + c.rejected + c.reviewed + c.pending,
        c.accepted,
        c.rejected,
        c.reviewed,
        c.pending,
        if review.any_marked() {
            "; Apply writes only the accepted ones"
        } else {
            "; nothing marked, Apply writes everything"
        }
    );
    let mut data = serde_json::to_value(&review)
        .map_err(|e| CliError::new("INTERNAL", format!("serializing the review: {e}")))?;
    data["marked"] = json!(marked);
    // Decision ids as in `plan tree` and `plan status`: the shortest prefix unique among all
    // the plan's decisions, so that a printed id can be given to `plan explain`.
    let decisions = client.decisions(&id.to_string())?;
    let shorts = view::short_map(decisions.iter().map(|d| d.decision_id.to_string()));
    let rows = review
        .items()
        .map(|(f, i)| {
            let tone = match i.mark {
                Mark::Accepted => Tone::Good,
                Mark::Rejected => Tone::Bad,
                Mark::Pending | Mark::Reviewed => Tone::Warn,
            };
            vec![
                Cell::new(i.mark.as_str(), tone),
                Cell::from(i.id.clone()),
                Cell::from(f.path.clone()),
                Cell::from(if i.whole_file {
                    "whole file".to_string()
                } else {
                    format!(
                        "-{},{} +{},{}",
                        i.old_start, i.old_lines, i.new_start, i.new_lines
                    )
                }),
                Cell::from(format!("+{} -{}", i.additions, i.deletions)),
                Cell::new(
                    i.decision_ids
                        .iter()
                        .map(|d| view::short_in(&shorts, d))
                        .collect::<Vec<_>>()
                        .join(" "),
                    Tone::Dim,
                ),
                Cell::from(marks_cell(&i.marks)),
                Cell::from(i.reason.clone().unwrap_or_default()),
            ]
        })
        .collect();
    let mut report = Report::ok("plan review", serde_json::Value::Null, status);
    report.data = data;
    Ok(report.with(Element::Table {
        title: "Review".into(),
        columns: vec![
            Column::left("Mark"),
            Column::left("Hunk"),
            Column::left("Path"),
            Column::left("Lines"),
            Column::right("Changes"),
            Column::left("Decisions"),
            Column::left("Marks"),
            Column::left("Reason"),
        ],
        rows,
        empty: "No changes to review.".into(),
    }))
}
