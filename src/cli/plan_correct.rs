//! `agents plan tree|explain|correct` and `plan diff --correction` (spec sections 06 and 27).
//! Each reads and corrects through the engine's API ([`api::Client`]), so it runs in process
//! or through a server alike; `tree`, `explain`, `correct --dry-run` and `diff --correction`
//! only read: the engine opens the database with `query_only` and takes no sandbox snapshot.

use std::fmt::Write as _;

use clap::Args;
use serde_json::{Value, json};

use super::confirm::confirm;
use super::{CliError, Context, view};
use crate::output::{Cell, Column, Element, Level, Payload, Report, Tone, TreeNode};
use cleveragents_engine::api::{self, Impact, Stopped};
use cleveragents_engine::domain::Id;
use cleveragents_engine::domain::decision::Decision;
use cleveragents_engine::domain::lifecycle::Phase;

/// `plan tree` arguments.
#[derive(Debug, Args)]
pub struct TreeArgs {
    /// Also show decisions superseded by corrections
    #[arg(long)]
    pub show_superseded: bool,
    /// Plan id or unique prefix
    pub plan: String,
}

/// `plan explain` arguments.
#[derive(Debug, Args)]
pub struct ExplainArgs {
    /// Include the context snapshot (what the actor had seen)
    #[arg(long)]
    pub show_context: bool,
    /// Include the actor's raw reasoning, if it was kept
    #[arg(long)]
    pub show_reasoning: bool,
    /// Decision id or unique prefix
    pub decision: String,
}

/// `plan correct` arguments.
#[derive(Debug, Args)]
pub struct CorrectArgs {
    /// `revert`: supersede the decision and recompute only what depends on it; `append`: keep
    /// history and add a child plan that carries the fix
    #[arg(long, value_name = "MODE", value_parser = ["revert", "append"])]
    pub mode: String,
    /// What was wrong and what to do instead
    #[arg(short = 'g', long, value_name = "TEXT")]
    pub guidance: String,
    /// Show what would be affected and change nothing
    #[arg(long)]
    pub dry_run: bool,
    /// Do not ask for confirmation
    #[arg(short, long)]
    pub yes: bool,
    /// With --mode append: the child plan's execution actor (default: the parent's)
    #[arg(long, value_name = "ACTOR")]
    pub execution_actor: Option<String>,
    /// Budget of this correction's model calls in US dollars, on top of what the plan spent
    #[arg(long, value_name = "USD")]
    pub max_cost_usd: Option<f64>,
    /// Budget of this correction's model calls in tokens, on top of what the plan spent
    #[arg(long, value_name = "N")]
    pub max_tokens: Option<u64>,
    /// Decision id or unique prefix (the plan is found from it)
    pub decision: String,
}

fn first_line(s: &str, max: usize) -> String {
    let mut out = String::new();
    push_first_line(&mut out, s, max);
    out
}

/// Appends the first line of `s`, cut to `max` characters with `...` when it is longer or
/// more lines follow.
fn push_first_line(out: &mut String, s: &str, max: usize) {
    // Most labels are one short line: no line or character to count.
    if s.len() <= max && !s.contains('\n') {
        out.push_str(s);
        return;
    }
    let line = s.lines().next().unwrap_or_default();
    if line.chars().count() > max || s.lines().nth(1).is_some() {
        out.extend(line.chars().take(max.saturating_sub(3)));
        out.push_str("...");
    } else {
        out.push_str(line);
    }
}

fn tree_label(n: &api::TreeNode, shorts: &api::ShortIds) -> Cell {
    if n.kind == "plan" {
        return Cell::new(
            format!(
                "-> Plan: {} {} ({})",
                n.id,
                n.label,
                n.status.clone().unwrap_or_default()
            ),
            Tone::Id,
        );
    }
    // One string per label, written in place (a tree can have 100,000 of them).
    let mut text = String::with_capacity(n.label.len().min(64) + 64);
    text.push('[');
    text.push_str(n.decision_type.map(|t| t.as_str()).unwrap_or_default());
    text.push_str("] \"");
    push_first_line(&mut text, &n.label, 60);
    text.push('"');
    if let Some(c) = n.confidence_score {
        let _ = write!(text, " ({c:.2})");
    }
    text.push(' ');
    shorts.push_shown(&mut text, &n.id);
    if n.is_correction == Some(true) {
        text.push_str(" (correction)");
    }
    if let Some(by) = n.superseded_by {
        text.push_str(" (superseded by ");
        shorts.push_shown(&mut text, &by);
        text.push(')');
        return Cell::new(text, Tone::Dim);
    }
    Cell::from(text)
}

/// The printed tree of `nodes`, each node dropped once its label is made, so that the labels
/// take the memory the nodes leave rather than more.
fn tree_nodes(nodes: Vec<api::TreeNode>, shorts: &api::ShortIds) -> Vec<TreeNode> {
    nodes
        .into_iter()
        .map(|mut n| {
            let label = tree_label(&n, shorts);
            let children = std::mem::take(&mut n.children);
            drop(n);
            TreeNode {
                label,
                children: tree_nodes(children, shorts),
            }
        })
        .collect()
}

/// `plan tree`'s data: `{plan_id, attempt, phase, state, children: [node], summary,
/// child_plans: [{plan_id, parent_plan_id, name, status}]}`.
#[derive(serde::Serialize)]
struct TreeData {
    plan_id: Id,
    attempt: u32,
    phase: cleveragents_engine::domain::Phase,
    state: cleveragents_engine::domain::lifecycle::ProcessingState,
    children: Vec<api::TreeNode>,
    summary: api::TreeSummary,
    child_plans: Vec<api::ChildPlan>,
}

/// `agents plan tree [--show-superseded] PLAN`.
///
/// # Errors
/// `NOT_FOUND` / `AMBIGUOUS` for the plan; store errors.
pub fn plan_tree(ctx: &Context, a: &TreeArgs) -> Result<Report, CliError> {
    // The structured formats print only the data, the human ones only the tree and tables
    // (with short ids): each asks for what it prints (for 100,000 decisions, either is most of
    // the command's time).
    let t = ctx
        .client()?
        .decision_tree(&a.plan, a.show_superseded, !ctx.format.is_structured())?;
    let plan = t.plan;
    let id = plan.plan_id;
    let s = t.summary;
    let children = t.child_plans;
    let status = if s.nodes == 0 {
        format!("Plan {id} has no decisions yet (Strategize has not run)")
    } else {
        format!(
            "{} decision(s), depth {}, {} child plan(s)",
            s.nodes, s.depth, s.child_plans
        )
    };
    if ctx.format.is_structured() {
        let mut report = Report::ok("plan tree", Value::Null, status);
        report.payload = Some(Payload::new(TreeData {
            plan_id: id,
            attempt: plan.status.attempt,
            phase: plan.phase(),
            state: plan.state(),
            children: t.roots,
            summary: s,
            child_plans: children,
        }));
        return Ok(report);
    }
    let mut report = Report::ok("plan tree", Value::Null, status).with(Element::Tree {
        title: format!("Decision Tree: {}", plan.name),
        roots: tree_nodes(t.roots, &t.short_ids),
    });
    report = report.with(Element::panel(
        "Tree Summary",
        [
            ("Nodes", s.nodes.to_string()),
            ("Depth", s.depth.to_string()),
            ("Child Plans", s.child_plans.to_string()),
            ("Invariants", s.invariants.to_string()),
            (
                "Superseded",
                if s.superseded_hidden {
                    format!("{} (hidden)", s.superseded)
                } else {
                    format!("{} (shown)", s.superseded)
                },
            ),
            ("Attempt", plan.status.attempt.to_string()),
        ],
    ));
    if !children.is_empty() {
        report = report.with(Element::Table {
            title: "Child Plans".into(),
            columns: ["ID", "Name", "Status"].map(Column::left).into(),
            rows: children
                .iter()
                .map(|c| {
                    vec![
                        view::id(c.plan_id.to_string()),
                        c.name.as_str().into(),
                        c.status.as_str().into(),
                    ]
                })
                .collect(),
            empty: String::new(),
        });
    }
    if s.nodes > 0 {
        report = report.with(Element::List {
            title: "Next Steps".into(),
            items: vec![
                ctx.suggest("plan explain <decision>"),
                ctx.suggest("plan correct --mode revert -g <guidance> --dry-run <decision>"),
            ],
        });
    }
    Ok(report)
}

/// `agents plan explain [--show-context] [--show-reasoning] DECISION`.
///
/// # Errors
/// `NOT_FOUND` / `AMBIGUOUS` for the decision; store errors.
pub fn explain(ctx: &Context, a: &ExplainArgs) -> Result<Report, CliError> {
    let api::ExplainView {
        decision: d,
        short_id,
        impact: imp,
    } = ctx.client()?.explain_decision(&a.decision)?;
    let downstream: Vec<Id> = imp
        .decisions
        .iter()
        .skip(1)
        .map(|r| r.decision_id)
        .collect();
    let mut data = json!({
        "decision_id": d.decision_id,
        "plan_id": d.plan_id,
        "decision_type": d.decision_type,
        "question": d.question,
        "chosen_option": d.chosen_option,
        "alternatives": d.alternatives_considered,
        "confidence": d.confidence_score,
        "rationale": d.rationale,
        "superseded_by": d.superseded_by,
        "is_correction": d.is_correction,
        "corrects_decision_id": d.corrects_decision_id,
        "correction_reason": d.correction_reason,
        "attempt": d.attempt,
        "context": if a.show_context { d.context_snapshot.clone() } else { Value::Null },
        "impact": {
            "decisions": downstream,
            "steps": imp.steps_rerun,
            "child_plans": imp.child_plans,
            "files": imp.files,
            "level": imp.level(),
        },
    });
    if a.show_reasoning {
        data["reasoning"] = json!(d.actor_reasoning);
    }
    let entries = decision_entries(&d);
    let mut report = Report::ok(
        "plan explain",
        data,
        format!(
            "Decision {}: {} downstream decision(s), {} step(s), {} file(s)",
            short_id,
            downstream.len(),
            imp.steps_rerun.len(),
            imp.files.len()
        ),
    )
    .with(Element::Panel {
        title: "Decision".into(),
        entries,
    })
    .with(Element::List {
        title: "Alternatives Considered".into(),
        items: if d.alternatives_considered.is_empty() {
            vec!["(none)".into()]
        } else {
            d.alternatives_considered.clone()
        },
    })
    .with(Element::List {
        title: "Rationale".into(),
        items: vec![d.rationale.clone().unwrap_or_else(|| "(none)".into())],
    })
    .with(Element::panel(
        "Downstream Impact",
        [
            ("Decisions", downstream.len().to_string()),
            ("Steps", imp.steps_rerun.len().to_string()),
            ("Child Plans", imp.child_plans.len().to_string()),
            ("Files", imp.files.len().to_string()),
            ("Correction Impact", imp.level().to_string()),
        ],
    ));
    if !imp.files.is_empty() {
        report = report.with(Element::List {
            title: "Files".into(),
            items: imp.files.clone(),
        });
    }
    report = context_lists(report, a, &d);
    Ok(report.with(Element::List {
        title: "Next Steps".into(),
        // A superseded decision cannot be corrected: its replacement can.
        items: vec![match d.superseded_by {
            Some(by) => ctx.suggest(&format!("plan explain {by}")),
            None => ctx.suggest(&format!(
                "plan correct --mode revert -g <guidance> --dry-run {}",
                d.decision_id
            )),
        }],
    }))
}

/// The "Decision" panel of `plan explain`.
fn decision_entries(d: &Decision) -> Vec<(String, Cell)> {
    let mut entries: Vec<(String, Cell)> = vec![
        ("Decision".into(), view::id(d.decision_id.to_string())),
        ("Type".into(), d.decision_type.as_str().into()),
        ("Plan".into(), view::id(d.plan_id.to_string())),
        ("Question".into(), view::or(d.question.as_deref(), "(none)")),
        ("Chosen".into(), d.chosen_option.clone().into()),
        (
            "Confidence".into(),
            d.confidence_score
                .map(|c| format!("{c:.2}"))
                .unwrap_or_else(|| "(none)".into())
                .into(),
        ),
        ("Attempt".into(), d.attempt.to_string().into()),
    ];
    if let Some(by) = d.superseded_by {
        entries.push(("Superseded By".into(), view::id(by.to_string())));
    }
    if let Some(c) = d.corrects_decision_id {
        entries.push(("Corrects".into(), view::id(c.to_string())));
        entries.push((
            "Guidance".into(),
            d.correction_reason.clone().unwrap_or_default().into(),
        ));
    }
    entries
}

/// Why each hot-context item was included (tier, score, query terms) and what was left out
/// for budget, one line each.
fn why_lines(h: &Value) -> Vec<String> {
    let score = |v: &Value| {
        v["score"]
            .as_f64()
            .map_or("-".into(), |s| format!("{s:.1}"))
    };
    let mut out: Vec<String> = h["items"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|i| {
            let terms: Vec<&str> = i["terms"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(Value::as_str)
                .collect();
            let mut line = format!(
                "included {}: tier {}, score {}, terms: {}",
                i["reference"].as_str().unwrap_or_default(),
                i["tier"].as_str().unwrap_or_default(),
                score(i),
                if terms.is_empty() {
                    "(none)".to_string()
                } else {
                    terms.join(", ")
                }
            );
            if let Some(via) = i["via"].as_str() {
                line.push_str(&format!(", {via}"));
            }
            line
        })
        .collect();
    out.extend(h["left_out"].as_array().into_iter().flatten().map(|i| {
        format!(
            "left out for budget {}: tier {}, score {}, {} tokens",
            i["reference"].as_str().unwrap_or_default(),
            i["tier"].as_str().unwrap_or_default(),
            score(i),
            i["tokens"]
        )
    }));
    out
}

/// What `--show-context` and `--show-reasoning` add to `plan explain`.
fn context_lists(mut report: Report, a: &ExplainArgs, d: &Decision) -> Report {
    let hot = d
        .context_snapshot
        .get("hot_context")
        .or_else(|| {
            d.context_snapshot
                .get("strategist")
                .and_then(|s| s.get("hot_context"))
        })
        .filter(|h| h.is_object());
    if a.show_context
        && let Some(h) = hot
    {
        report = report.with(Element::List {
            title: "Hot Context".into(),
            items: vec![
                format!(
                    "{} of {} tokens (hash {})",
                    h["tokens"],
                    h["budget"],
                    h["hash"].as_str().unwrap_or_default()
                ),
                format!(
                    "holds: {}",
                    h["references"]
                        .as_array()
                        .map(|r| r
                            .iter()
                            .filter_map(Value::as_str)
                            .collect::<Vec<_>>()
                            .join(", "))
                        .unwrap_or_default()
                ),
                h["text"].as_str().unwrap_or_default().to_string(),
            ]
            .into_iter()
            .chain(why_lines(h))
            .collect(),
        });
    }
    if a.show_context {
        report = report.with(Element::List {
            title: "Context Snapshot".into(),
            items: vec![serde_json::to_string_pretty(&d.context_snapshot).unwrap_or_default()],
        });
    }
    if a.show_reasoning {
        report = report.with(Element::List {
            title: "Actor Reasoning".into(),
            items: vec![
                d.actor_reasoning
                    .clone()
                    .unwrap_or_else(|| "(not recorded)".into()),
            ],
        });
    }
    report
}

fn affected_json(imp: &Impact) -> Value {
    json!({
        "decisions": imp.decisions.iter().map(|r| json!({
            "decision_id": r.decision_id,
            "decision_type": r.decision_type,
            "chosen_option": r.chosen_option,
            "plan_id": r.plan_id,
        })).collect::<Vec<_>>(),
        "steps_rerun": imp.steps_rerun,
        "steps_replayed": imp.steps_replayed,
        "steps_may_rerun": imp.steps_may_rerun,
        "steps_kept": imp.steps_kept,
        "child_plans": imp.child_plans,
        "files": imp.files,
        "checkpoints": imp.checkpoints,
        "rollback_checkpoint": imp.rollback_checkpoint,
        "unaffected_decisions": imp.unaffected,
        "estimated_model_calls": imp.estimated_model_calls,
    })
}

/// Step lines: `<short id>  <chosen option>` (the full ids are in json).
fn step_lines(
    v: &[Id],
    labels: &std::collections::BTreeMap<String, api::StepLabel>,
) -> Vec<String> {
    if v.is_empty() {
        return vec!["(none)".into()];
    }
    v.iter()
        .map(|id| {
            let id = id.to_string();
            match labels.get(&id) {
                Some(l) => format!("{}  {}", l.short, first_line(&l.chosen, 60)),
                None => format!("{}  ", view::short(&id)),
            }
        })
        .collect()
}

fn ids(v: &[Id]) -> Vec<String> {
    if v.is_empty() {
        vec!["(none)".into()]
    } else {
        v.iter().map(Id::to_string).collect()
    }
}

fn impact_elements(
    report: Report,
    imp: &Impact,
    labels: &std::collections::BTreeMap<String, api::StepLabel>,
) -> Report {
    report
        .with(Element::Table {
            title: "Decisions to Invalidate".into(),
            columns: ["ID", "Type", "Chosen"].map(Column::left).into(),
            rows: imp
                .decisions
                .iter()
                .map(|r| {
                    vec![
                        view::id(r.decision_id.to_string()),
                        r.decision_type.as_str().into(),
                        first_line(&r.chosen_option, 50).into(),
                    ]
                })
                .collect(),
            empty: "(none)".into(),
        })
        .with(Element::List {
            title: "Steps to Re-run".into(),
            items: step_lines(&imp.steps_rerun, labels),
        })
        .with(Element::List {
            title: "Steps to Replay (no model or tool call)".into(),
            items: step_lines(&imp.steps_replayed, labels),
        })
        .with(Element::List {
            title: "Steps That May Re-run If Their Replay Conflicts".into(),
            items: step_lines(&imp.steps_may_rerun, labels),
        })
        .with(Element::List {
            title: "Child Plans".into(),
            items: ids(&imp.child_plans),
        })
        .with(Element::List {
            title: "Files".into(),
            items: if imp.files.is_empty() {
                vec!["(none)".into()]
            } else {
                imp.files.clone()
            },
        })
        .with(Element::panel(
            "Estimate",
            [
                ("Decisions Invalidated", imp.decisions.len().to_string()),
                ("Unaffected Decisions", imp.unaffected.len().to_string()),
                ("Model Calls", imp.estimated_model_calls.to_string()),
                (
                    "Rollback To",
                    imp.rollback_checkpoint
                        .clone()
                        .unwrap_or_else(|| "(the sandbox base, or nothing ran yet)".into()),
                ),
            ],
        ))
}

/// What a revert dry run suggests: running the revert, or, when it would be refused, what fits
/// instead (never the refused command).
fn dry_run_next_steps(ctx: &Context, a: &CorrectArgs, p: &api::RevertPreview) -> Vec<String> {
    let guidance = shell_words::quote(&a.guidance);
    let d = &p.decision;
    let plan = &p.plan;
    match &p.refused {
        None => vec![ctx.suggest(&format!(
            "plan correct --mode revert -g {guidance} --yes {}",
            d.decision_id
        ))],
        // The offline script executor cannot carry guidance: the child needs a model actor.
        Some(_) if plan.phase() == Phase::Applied && p.script_executor => {
            vec![
                ctx.suggest(&format!(
                    "plan correct --mode append --execution-actor <actor> -g {guidance} --dry-run {}",
                    d.decision_id
                )),
                ctx.suggest("actor list"),
            ]
        }
        Some(_) if plan.phase() == Phase::Applied => vec![ctx.suggest(&format!(
            "plan correct --mode append -g {guidance} --dry-run {}",
            d.decision_id
        ))],
        Some(api::Refusal {
            hints: Some(hints), ..
        }) => hints.iter().map(|h| ctx.next(h)).collect(),
        Some(_) => vec![ctx.suggest(&format!("plan status {}", d.plan_id))],
    }
}

/// `agents plan correct --mode revert|append -g TEXT [--dry-run] [--yes] DECISION`.
///
/// # Errors
/// `NOT_FOUND`, `CONFLICT` (applied, running or cancelled plans), `NEEDS_APPROVAL` (exit 3)
/// without `--yes` and a terminal, `INVALID_INPUT` (empty guidance, superseded decision),
/// `PLAN_ERRORED` when the re-run fails.
pub fn correct(ctx: &Context, a: &CorrectArgs) -> Result<Report, CliError> {
    if a.guidance.trim().is_empty() {
        return Err(CliError::invalid_input("--guidance is empty")
            .hint("say what was wrong and what to do instead, e.g. -g \"use gRPC, not REST\""));
    }
    super::refuse_placeholder("--guidance", &a.guidance)?;
    if a.mode == "append" {
        return append(ctx, a);
    }
    if a.execution_actor.is_some() {
        return Err(CliError::invalid_input(
            "--execution-actor chooses the child plan's actor of --mode append; a revert re-runs the plan with its own actors",
        ));
    }
    let client = ctx.client()?;
    if a.dry_run {
        let preview = client.revert_preview(&a.decision, false)?;
        if preview.refused.is_some() {
            return Err(refused_dry_run(ctx, a, client.as_ref(), preview));
        }
        return Ok(dry_run(ctx, a, preview));
    }
    let preview = client.revert_preview(&a.decision, true)?;
    drop(client);
    let (d, imp, short) = (&preview.decision, &preview.impact, &preview.short_id);
    confirm(
        &format!(
            "Revert decision {short} and recompute {} decision(s), re-running {} step(s)?",
            imp.decisions.len(),
            imp.steps_rerun.len()
        ),
        a.yes,
        &ctx.terminal,
        &ctx.suggest(&format!(
            "plan correct --mode revert -g {} --yes {}",
            shell_words::quote(&a.guidance),
            d.decision_id
        )),
    )?;
    if a.max_cost_usd.is_some_and(|c| !c.is_finite() || c < 0.0) {
        return Err(CliError::invalid_input(
            "--max-cost-usd must be a non-negative number of US dollars",
        ));
    }
    let client = super::plan::run::driver(ctx, false, "Correcting")?;
    let r = match client.run(api::Op::Correct(Box::new(api::Correction {
        decision: d.decision_id,
        mode: api::CorrectMode::Revert,
        guidance: a.guidance.clone(),
        max_cost_usd: a.max_cost_usd,
        max_tokens: a.max_tokens,
    })))? {
        api::Outcome::Reverted(r) => *r,
        other => return Err(super::plan::run::unexpected(&other)),
    };
    let Some(driven) = r.driven.clone() else {
        return Err(CliError::new(
            "CORRECTION_FAILED",
            "the plan was not driven",
        ));
    };
    let p = driven.plan.clone();
    let id = p.plan_id;
    let next = match &driven.stopped {
        Stopped::Gate { approval } => ctx.next(&approval.next()),
        _ => ctx.suggest(&format!("plan status {id}")),
    };
    let data = json!({
        "decision_id": d.decision_id,
        "plan_id": id,
        "mode": "revert",
        "dry_run": false,
        "attempt_id": r.attempt.attempt_id,
        "new_decision_id": r.correcting.decision_id,
        "new_decisions": r.new_decisions.iter().map(|n| json!({"decision_id": n.decision_id, "decision_type": n.decision_type, "chosen_option": n.chosen_option})).collect::<Vec<_>>(),
        "attempt": p.status.attempt,
        "affected": affected_json(&r.impact),
        "rollback": r.rollback,
        "result": r.attempt.result,
        "attempt_status": r.attempt.status,
        "phase": p.phase(),
        "state": p.state(),
        "stopped": super::plan::json::stopped(&driven.stopped),
        "next": next,
    });
    let ok_stop = matches!(
        driven.stopped,
        Stopped::Gate { .. } | Stopped::Applied | Stopped::NothingToDo { .. }
    );
    if !ok_stop {
        return super::plan::run::driven_report(ctx, "plan correct", driven).map(|mut rep| {
            rep.data = data.clone();
            rep
        });
    }
    Ok(reverted_report(ctx, a, d, &r, &p, data, next))
}

/// `plan correct --dry-run` of a revert: what would be invalidated, re-run and replayed, and
/// its cost, with nothing changed.
fn dry_run(ctx: &Context, a: &CorrectArgs, p: api::RevertPreview) -> Report {
    let (d, imp, rerun) = (&p.decision, &p.impact, &p.rerun);
    let refusal = p.refused.as_ref().map(|r| r.message.clone());
    let mut affected = affected_json(imp);
    affected["estimated_tokens"] = json!(rerun.tokens);
    affected["estimated_cost_usd"] = json!(rerun.cost_usd);
    let cost_line = format!(
        "{} step(s) re-run, est. {} tokens / {}; {} step(s) replayed at no cost (from the re-run steps' recorded usage)",
        imp.steps_rerun.len(),
        rerun.tokens,
        rerun
            .cost_usd
            .map_or_else(|| "cost unknown".to_string(), |c| format!("${c:.4}")),
        imp.steps_replayed.len()
    );
    let data = json!({
        "decision_id": d.decision_id,
        "plan_id": d.plan_id,
        "mode": "revert",
        "dry_run": true,
        "guidance": a.guidance,
        "affected": affected,
        "refused": refusal,
    });
    let mut report = Report::ok(
        "plan correct",
        data,
        format!(
            "Dry run: {} decision(s) invalidated, {} step(s) re-run, {} replayed; nothing was changed",
            imp.decisions.len(),
            imp.steps_rerun.len(),
            imp.steps_replayed.len()
        ),
    )
    .message(Level::Info, cost_line)
    .with(Element::panel(
        "Correction Preview",
        [
            ("Decision", view::id(d.decision_id.to_string())),
            ("Type", d.decision_type.as_str().into()),
            ("Plan", view::id(d.plan_id.to_string())),
            ("Mode", "revert".into()),
            ("Guidance", a.guidance.clone().into()),
        ],
    ));
    report = impact_elements(report, imp, &p.steps);
    if let Some(why) = super::plan::run::guidance_ignored(&p.plan) {
        report = report.message(Level::Warn, why);
    }
    if let Some(r) = refusal {
        report = report.message(Level::Warn, format!("a revert would be refused: {r}"));
    }
    report.with(Element::List {
        title: "Next Steps".into(),
        items: dry_run_next_steps(ctx, a, &p),
    })
}

/// A revert dry run that would be refused ends as the revert would: with the refusal's own
/// error (`CONFLICT` for the plan's phase or state), its preview as the data, and what fits
/// instead as the hints (never the refused command).
fn refused_dry_run(
    ctx: &Context,
    a: &CorrectArgs,
    client: &dyn api::Client,
    p: api::RevertPreview,
) -> CliError {
    let hints = dry_run_next_steps(ctx, a, &p);
    let data = dry_run(ctx, a, p).data;
    let mut err = match client.revert_preview(&a.decision, true) {
        Err(e) => CliError::from(e),
        Ok(p) => CliError::new("CONFLICT", p.refused.map(|r| r.message).unwrap_or_default()),
    };
    err.body.message = format!("a revert would be refused: {}", err.body.message);
    err.body.suggestions = hints;
    err.data(data)
}

/// The report of a revert that stopped where it should (a gate, applied, nothing to do).
fn reverted_report(
    ctx: &Context,
    a: &CorrectArgs,
    d: &Decision,
    r: &api::Reverted,
    p: &cleveragents_engine::domain::Plan,
    data: Value,
    next: String,
) -> Report {
    let id = p.plan_id;
    let result = &r.attempt.result;
    let list = |k: &str| -> Vec<String> {
        result[k]
            .as_array()
            .map(|v| {
                v.iter()
                    .filter_map(|x| x.as_str().map(str::to_string))
                    .collect()
            })
            .filter(|v: &Vec<String>| !v.is_empty())
            .unwrap_or_else(|| vec!["(none)".into()])
    };
    let ignored = super::plan::run::guidance_ignored(p);
    let report = Report::ok(
        "plan correct",
        data,
        format!(
            "{}: attempt {} re-ran {} step(s) and replayed {}; plan at {}/{}",
            if ignored.is_some() {
                "Re-ran without the guidance"
            } else {
                "Corrected"
            },
            p.status.attempt,
            result["steps_rerun"].as_array().map_or(0, Vec::len),
            result["steps_replayed"].as_array().map_or(0, Vec::len),
            p.phase(),
            p.state()
        ),
    )
    .with(Element::panel(
        "Correction",
        [
            ("Attempt ID", view::id(r.attempt.attempt_id.to_string())),
            (
                "New Decision",
                view::id(r.correcting.decision_id.to_string()),
            ),
            ("Corrects", view::id(d.decision_id.to_string())),
            ("Attempt", p.status.attempt.to_string().into()),
            ("Guidance", a.guidance.clone().into()),
        ],
    ))
    .with(Element::List {
        title: "Steps Re-run".into(),
        items: list("steps_rerun"),
    })
    .with(Element::List {
        title: "Steps Replayed".into(),
        items: list("steps_replayed"),
    })
    .with(Element::List {
        title: "Next Steps".into(),
        items: vec![
            next,
            ctx.suggest(&format!(
                "plan diff --correction {} {id}",
                r.attempt.attempt_id
            )),
        ],
    });
    match ignored {
        Some(why) => report.message(Level::Warn, why),
        None => report,
    }
}

/// `agents plan diff --correction ATTEMPT [PLAN]`: the old attempt's changes, the corrected
/// attempt's changes (each against the sandbox base) and the corrected-vs-original patch.
///
/// # Errors
/// `NOT_FOUND` / `AMBIGUOUS`; `INVALID_INPUT` when the attempt is of another plan.
pub fn correction_diff(
    ctx: &Context,
    attempt: &str,
    plan: Option<&str>,
) -> Result<Report, CliError> {
    let client = ctx.client()?;
    let api::AttemptView {
        attempt: a,
        resources: compared,
    } = client.correction_attempt(attempt).map_err(|e| {
        let err = CliError::from(e);
        if err.body.code == "NOT_FOUND" {
            // An attempt id is printed by `plan correct`; `plan status` lists them again.
            err.hint(ctx.suggest(&format!("plan status {}", plan.unwrap_or("<plan>"))))
        } else {
            err
        }
    })?;
    if let Some(p) = plan {
        let pid = client.resolve_plan(p)?;
        if pid != a.plan_id {
            return Err(CliError::invalid_input(format!(
                "correction attempt {} belongs to plan {}, not {pid}",
                a.attempt_id, a.plan_id
            ))
            .hint(format!(
                "agents plan diff --correction {} {}",
                a.attempt_id, a.plan_id
            )));
        }
    }
    let mut resources = Vec::new();
    let mut all_changes = Vec::new();
    let mut rows = Vec::new();
    for r in compared {
        for f in &r.changes {
            rows.push(vec![
                Cell::new(f.status.letter(), Tone::Warn),
                Cell::from(f.path.clone()),
                Cell::from(format!("+{}", f.additions)),
                Cell::from(format!("-{}", f.deletions)),
                Cell::new(r.resource_name.clone(), Tone::Dim),
            ]);
        }
        resources.push(json!({
            "resource_name": r.resource_name,
            "before": {"stats": api::diff_stats(&r.before), "files": r.before},
            "after": {"stats": api::diff_stats(&r.after), "files": r.after},
            "changes": {"stats": api::diff_stats(&r.changes), "files": r.changes},
        }));
        all_changes.extend(r.changes);
    }
    let stats = api::diff_stats(&all_changes);
    let data = json!({
        "attempt_id": a.attempt_id,
        "plan_id": a.plan_id,
        "original_decision_id": a.original_decision_id,
        "new_decision_id": a.new_decision_id,
        "mode": a.mode,
        "status": a.status,
        "guidance": a.correction_reason,
        "stats": stats,
        "resources": resources,
    });
    let mut report = Report::ok(
        "plan diff",
        data,
        format!(
            "Correction {}: {} file(s) differ between the original and the corrected attempt, +{} -{}",
            view::short(&a.attempt_id.to_string()),
            stats.files_changed,
            stats.additions,
            stats.deletions
        ),
    )
    .with(Element::panel(
        "Correction",
        [
            ("Attempt ID", view::id(a.attempt_id.to_string())),
            ("Original Decision", view::id(a.original_decision_id.to_string())),
            (
                "New Decision",
                view::or(a.new_decision_id.map(|i| i.to_string()).as_deref(), "(none)"),
            ),
            ("Mode", a.mode.clone().into()),
            ("Status", a.status.as_str().into()),
            ("Guidance", a.correction_reason.clone().unwrap_or_default().into()),
        ],
    ))
    .with(Element::Table {
        title: "Corrected vs Original".into(),
        columns: vec![
            Column::left("St"),
            Column::left("Path"),
            Column::right("Added"),
            Column::right("Removed"),
            Column::left("Resource"),
        ],
        rows,
        empty: "No difference.".into(),
    });
    if !all_changes.is_empty() {
        report = report.with(Element::List {
            title: "Diff (original -> corrected)".into(),
            items: vec![api::unified_diff(&all_changes)],
        });
    }
    Ok(report)
}

/// `plan correct --mode append`: a child plan carrying the guidance.
fn append(ctx: &Context, a: &CorrectArgs) -> Result<Report, CliError> {
    let preview =
        ctx.client()?
            .append_preview(&a.decision, a.execution_actor.as_deref(), a.dry_run)?;
    let d = &preview.decision;
    let actor_flag = a
        .execution_actor
        .as_deref()
        .map(|x| format!(" --execution-actor {}", shell_words::quote(x)))
        .unwrap_or_default();
    let again = ctx.suggest(&format!(
        "plan correct --mode append -g {}{actor_flag} --yes {}",
        shell_words::quote(&a.guidance),
        d.decision_id
    ));
    if let Some(why) = &preview.actor_refusal {
        let err = CliError::new("NOT_SUPPORTED", why.clone()).hint(ctx.suggest("actor list"));
        return Err(if preview.parent_phase == Phase::Applied {
            err
        } else {
            err.hint(ctx.suggest(&format!(
                "plan correct --mode revert -g {} --dry-run {}",
                shell_words::quote(&a.guidance),
                d.decision_id
            )))
        });
    }
    // An actor that cannot run now (its provider's key is not set) would leave an errored
    // child: the dry run says so, and the real run refuses before writing anything.
    if let Some(why) = &preview.actor_unavailable {
        return Err(CliError::new("ENVIRONMENT", why.clone())
            .detail("the child plan's Execute would error with ACTOR_UNAVAILABLE")
            .hint(ctx.suggest("actor list"))
            .hint(ctx.suggest("diagnostics")));
    }
    if a.dry_run {
        let bases = &preview.bases;
        let data = json!({
            "decision_id": d.decision_id,
            "plan_id": d.plan_id,
            "mode": "append",
            "dry_run": true,
            "guidance": a.guidance,
            "child_plan": {"parent_plan_id": d.plan_id, "based_on": bases},
            "affected": {"decisions": [], "steps_rerun": [], "steps_replayed": [], "steps_may_rerun": [], "child_plans": [], "files": [], "estimated_model_calls": 0},
        });
        return Ok(Report::ok(
            "plan correct",
            data,
            "Dry run: a child plan carrying the guidance would be added; nothing was changed",
        )
        .with(Element::List {
            title: "Child Plan Based On".into(),
            items: bases
                .iter()
                .map(|b| format!("{}: {} ({})", b.resource_name, b.path, b.kind.as_str()))
                .collect(),
        })
        .with(Element::List {
            title: "Next Steps".into(),
            items: vec![again],
        }));
    }
    confirm(
        &format!(
            "Add a child plan to {} that carries the guidance?",
            view::short(&d.plan_id.to_string())
        ),
        a.yes,
        &ctx.terminal,
        &again,
    )?;
    let client = super::plan::run::driver(ctx, false, "Adding a child plan")?;
    let r = match client.run(api::Op::Correct(Box::new(api::Correction {
        decision: d.decision_id,
        mode: api::CorrectMode::Append {
            execution_actor: a.execution_actor.clone(),
        },
        guidance: a.guidance.clone(),
        max_cost_usd: None,
        max_tokens: None,
    })))? {
        api::Outcome::Appended(r) => *r,
        other => return Err(super::plan::run::unexpected(&other)),
    };
    let child = &r.child;
    let next = match r.driven.as_ref().map(|x| &x.stopped) {
        Some(Stopped::Gate { approval }) => ctx.next(&approval.next()),
        _ => ctx.suggest(&format!("plan status {}", child.plan_id)),
    };
    let data = json!({
        "decision_id": d.decision_id,
        "plan_id": d.plan_id,
        "mode": "append",
        "dry_run": false,
        "attempt_id": r.attempt.attempt_id,
        "child_plan_id": child.plan_id,
        "new_decision_id": r.root.decision_id,
        "child": {"phase": child.phase(), "state": child.state()},
        "based_on": r.bases,
        "stopped": r.driven.as_ref().map(|x| super::plan::json::stopped(&x.stopped)),
        "next": next,
    });
    let report = Report::ok(
        "plan correct",
        data,
        format!(
            "Appended child plan {} at {}/{}; decision {} and its work are kept",
            child.plan_id,
            child.phase(),
            child.state(),
            view::short(&d.decision_id.to_string())
        ),
    );
    // The correction did not carry the guidance out: the command fails, as `plan use` does
    // for a plan that errors, with the child's recovery hints.
    if let Some(Stopped::Errored { code, message }) = r.driven.as_ref().map(|x| &x.stopped) {
        return Err(super::plan::run::errored(child, code, message, report.data));
    }
    Ok(report
        .with(Element::panel(
            "Correction",
            [
                ("Mode", Cell::from("append")),
                ("Child Plan", view::id(child.plan_id.to_string())),
                ("Root Decision", view::id(r.root.decision_id.to_string())),
                ("Corrects", view::id(d.decision_id.to_string())),
                ("Guidance", a.guidance.clone().into()),
            ],
        ))
        .with(Element::List {
            title: "Next Steps".into(),
            items: vec![next, ctx.suggest(&format!("plan tree {}", d.plan_id))],
        }))
}
