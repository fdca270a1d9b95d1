//! `agents plan tree|explain|correct` and `plan diff --correction` (spec sections 06 and 27).
//! `tree`, `explain`, `correct --dry-run` and `diff --correction` only read: they
//! open the database with `query_only` and never take a sandbox snapshot.

use std::collections::HashMap;

use clap::Args;
use serde_json::{Value, json};

use super::confirm::confirm;
use super::{CliError, Context, view};
use crate::output::{Cell, Column, Element, Level, Payload, Report, Tone, TreeNode};
use cleveragents_engine::api;
use cleveragents_engine::correction::impact::{self, Impact};
use cleveragents_engine::correction::{append as appending, revert, tree};
use cleveragents_engine::domain::Id;
use cleveragents_engine::domain::decision::Decision;
use cleveragents_engine::domain::lifecycle::Phase;
use cleveragents_engine::domain::plan::Plan;
use cleveragents_engine::lifecycle::RunError;
use cleveragents_engine::lifecycle::driver::Stopped;
use cleveragents_engine::sandbox::Sandboxes;
use cleveragents_engine::sandbox::diff;
use cleveragents_engine::store::Store;

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

/// Opens the database for reading only (`query_only`); the file is never written.
///
/// # Errors
/// `NOT_FOUND` when no database exists yet; store errors.
pub(crate) fn read_store(ctx: &Context) -> Result<Store, CliError> {
    let db = ctx.paths.database();
    if !db.exists() {
        return Err(CliError::new(
            "NOT_FOUND",
            format!("no database at {}: no plan exists yet", db.display()),
        )
        .hint("agents plan use <action> <project>"));
    }
    Ok(Store::open_read_only(&db)?)
}

fn first_line(s: &str, max: usize) -> String {
    let line = s.lines().next().unwrap_or_default();
    if line.chars().count() > max || s.lines().nth(1).is_some() {
        let cut: String = line.chars().take(max.saturating_sub(3)).collect();
        format!("{cut}...")
    } else {
        line.to_string()
    }
}

fn tree_label(n: &tree::Node, shorts: &HashMap<String, String>) -> Cell {
    let short = view::short_in(shorts, &n.id.to_string());
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
    let mut text = format!(
        "[{}] \"{}\"",
        n.decision_type.map(|t| t.as_str()).unwrap_or_default(),
        first_line(&n.label, 60)
    );
    if let Some(c) = n.confidence_score {
        text.push_str(&format!(" ({c:.2})"));
    }
    text.push_str(&format!(" {short}"));
    if n.is_correction == Some(true) {
        text.push_str(" (correction)");
    }
    if let Some(by) = n.superseded_by {
        text.push_str(&format!(
            " (superseded by {})",
            view::short_in(shorts, &by.to_string())
        ));
        return Cell::new(text, Tone::Dim);
    }
    Cell::from(text)
}

fn tree_nodes(nodes: &[tree::Node], shorts: &HashMap<String, String>) -> Vec<TreeNode> {
    nodes
        .iter()
        .map(|n| TreeNode {
            label: tree_label(n, shorts),
            children: tree_nodes(&n.children, shorts),
        })
        .collect()
}

/// Every decision id a tree shows (its nodes and what superseded them).
fn tree_ids(nodes: &[tree::Node], out: &mut Vec<String>) {
    for n in nodes {
        if n.kind != "plan" {
            out.push(n.id.to_string());
        }
        if let Some(by) = n.superseded_by {
            out.push(by.to_string());
        }
        tree_ids(&n.children, out);
    }
}

/// `plan tree`'s data: `{plan_id, attempt, phase, state, children: [node], summary,
/// child_plans: [{plan_id, parent_plan_id, name, status}]}`.
#[derive(serde::Serialize)]
struct TreeData {
    plan_id: Id,
    attempt: u32,
    phase: cleveragents_engine::domain::Phase,
    state: cleveragents_engine::domain::lifecycle::ProcessingState,
    children: Vec<tree::Node>,
    summary: tree::Summary,
    child_plans: Vec<ChildPlan>,
}

/// One child plan in [`TreeData`].
#[derive(serde::Serialize)]
struct ChildPlan {
    plan_id: Id,
    parent_plan_id: Option<Id>,
    name: String,
    status: String,
}

/// `agents plan tree [--show-superseded] PLAN`.
///
/// # Errors
/// `NOT_FOUND` / `AMBIGUOUS` for the plan; store errors.
pub fn plan_tree(ctx: &Context, a: &TreeArgs) -> Result<Report, CliError> {
    let store = read_store(ctx)?;
    let id = store.resolve_plan_id(&a.plan)??;
    let plan = store
        .plan(&id)?
        .ok_or_else(|| CliError::new("NOT_FOUND", format!("plan {id} does not exist")))?;
    let t = tree::load(&store, &id, a.show_superseded)?;
    let s = t.summary;
    let children: Vec<ChildPlan> = store
        .family_plans(&id)?
        .into_iter()
        .filter(|p| p.0 != id)
        .map(|(plan_id, parent_plan_id, name, status)| ChildPlan {
            plan_id,
            parent_plan_id,
            name,
            status,
        })
        .collect();
    let status = if s.nodes == 0 {
        format!("Plan {id} has no decisions yet (Strategize has not run)")
    } else {
        format!(
            "{} decision(s), depth {}, {} child plan(s)",
            s.nodes, s.depth, s.child_plans
        )
    };
    // The structured formats print only the data, the human ones only the tree and tables:
    // each builds its own (for 100,000 decisions, either is most of the command's time).
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
        roots: {
            let mut ids = Vec::new();
            tree_ids(&t.roots, &mut ids);
            tree_nodes(&t.roots, &view::decision_shorts(&store, ids)?)
        },
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

fn load_decision(store: &Store, input: &str) -> Result<Decision, CliError> {
    let id = store.resolve_decision_id(input)??;
    store
        .decision(&id)?
        .ok_or_else(|| CliError::new("NOT_FOUND", format!("decision {id} does not exist")))
}

fn impact_of(ctx: &Context, store: &Store, decision: &Id) -> Result<Impact, CliError> {
    let sandboxes = Sandboxes::new(&ctx.paths);
    impact::impact(store, Some(&sandboxes), decision)
        .map_err(|e| CliError::new("CORRECTION_FAILED", e.to_string()))
}

/// `agents plan explain [--show-context] [--show-reasoning] DECISION`.
///
/// # Errors
/// `NOT_FOUND` / `AMBIGUOUS` for the decision; store errors.
pub fn explain(ctx: &Context, a: &ExplainArgs) -> Result<Report, CliError> {
    let store = read_store(ctx)?;
    let d = load_decision(&store, &a.decision)?;
    let imp = impact_of(ctx, &store, &d.decision_id)?;
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
            view::decision_short(&store, &d.decision_id)?,
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
            format!(
                "included {}: tier {}, score {}, terms: {}",
                i["reference"].as_str().unwrap_or_default(),
                i["tier"].as_str().unwrap_or_default(),
                score(i),
                if terms.is_empty() {
                    "(none)".to_string()
                } else {
                    terms.join(", ")
                }
            )
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
fn step_lines(v: &[Id], labels: &std::collections::HashMap<Id, String>) -> Vec<String> {
    if v.is_empty() {
        return vec!["(none)".into()];
    }
    let shorts = view::short_map(v.iter().chain(labels.keys()).map(Id::to_string));
    v.iter()
        .map(|id| {
            format!(
                "{}  {}",
                view::short_in(&shorts, &id.to_string()),
                labels
                    .get(id)
                    .map(|l| first_line(l, 60))
                    .unwrap_or_default()
            )
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

fn impact_elements(report: Report, imp: &Impact, store: &Store) -> Report {
    let labels: std::collections::HashMap<Id, String> = store
        .decisions(&imp.plan_id)
        .unwrap_or_default()
        .into_iter()
        .map(|d| (d.decision_id, d.chosen_option))
        .collect();
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
            items: step_lines(&imp.steps_rerun, &labels),
        })
        .with(Element::List {
            title: "Steps to Replay (no model or tool call)".into(),
            items: step_lines(&imp.steps_replayed, &labels),
        })
        .with(Element::List {
            title: "Steps That May Re-run If Their Replay Conflicts".into(),
            items: step_lines(&imp.steps_may_rerun, &labels),
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

/// A correction's own budget (`--max-cost-usd`, `--max-tokens`): the plan's budget becomes
/// what it has spent plus these, so the correction and the re-run it drives may spend that
/// much more (and stop with a `budget` approval before passing it).
/// What a revert dry run suggests: running the revert, or, when it would be refused, what fits
/// instead (never the refused command).
fn dry_run_next_steps(
    ctx: &Context,
    a: &CorrectArgs,
    d: &Decision,
    plan: &Plan,
    refused: Option<&RunError>,
) -> Vec<String> {
    let guidance = shell_words::quote(&a.guidance);
    match refused {
        None => vec![ctx.suggest(&format!(
            "plan correct --mode revert -g {guidance} --yes {}",
            d.decision_id
        ))],
        // The offline script executor cannot carry guidance: the child needs a model actor.
        Some(_)
            if plan.phase() == Phase::Applied
                && plan.execution_actor.as_deref()
                    == Some(cleveragents_engine::registry::actors::SCRIPT_EXECUTOR) =>
        {
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
        Some(RunError::WrongState { hints, .. }) => hints.iter().map(|h| ctx.next(h)).collect(),
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
    let store = read_store(ctx)?;
    let d = load_decision(&store, &a.decision)?;
    let plan = store
        .plan(&d.plan_id)?
        .ok_or_else(|| CliError::new("NOT_FOUND", format!("plan {} does not exist", d.plan_id)))?;
    if a.mode == "append" {
        drop(store);
        return append(ctx, a, &d);
    }
    if a.execution_actor.is_some() {
        return Err(CliError::invalid_input(
            "--execution-actor chooses the child plan's actor of --mode append; a revert re-runs the plan with its own actors",
        ));
    }
    if a.dry_run {
        return dry_run(ctx, a, &store, &d, &plan);
    }
    revert::check_revertable(&plan, &d)?;
    let imp = impact_of(ctx, &store, &d.decision_id)?;
    let short = view::decision_short(&store, &d.decision_id)?;
    drop(store);
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
    let engine = super::plan_run::engine(ctx, false, "Correcting")?;
    let r = match engine.run(api::Op::Correct(Box::new(api::Correction {
        decision: d.decision_id,
        mode: api::CorrectMode::Revert,
        guidance: a.guidance.clone(),
        max_cost_usd: a.max_cost_usd,
        max_tokens: a.max_tokens,
    })))? {
        api::Outcome::Reverted(r) => *r,
        other => return Err(super::plan_run::unexpected(&other)),
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
        "stopped": super::plan_json::stopped(&driven.stopped),
        "next": next,
    });
    let ok_stop = matches!(
        driven.stopped,
        Stopped::Gate { .. } | Stopped::Applied | Stopped::NothingToDo { .. }
    );
    if !ok_stop {
        return super::plan_run::driven_report(ctx, "plan correct", driven).map(|mut rep| {
            rep.data = data.clone();
            rep
        });
    }
    Ok(reverted_report(ctx, a, &d, &r, &p, data, next))
}

/// `plan correct --dry-run` of a revert: what would be invalidated, re-run and replayed, and
/// its cost, with nothing changed.
fn dry_run(
    ctx: &Context,
    a: &CorrectArgs,
    store: &Store,
    d: &Decision,
    plan: &Plan,
) -> Result<Report, CliError> {
    let imp = impact_of(ctx, store, &d.decision_id)?;
    let refused = revert::check_revertable(plan, d).err();
    let refusal = refused.as_ref().map(ToString::to_string);
    let rerun =
        cleveragents_engine::actors::estimate::rerun_cost(store, &d.plan_id, &imp.steps_rerun)?;
    let mut affected = affected_json(&imp);
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
    report = impact_elements(report, &imp, store);
    if let Some(r) = refusal {
        report = report.message(Level::Warn, format!("a revert would be refused: {r}"));
    }
    Ok(report.with(Element::List {
        title: "Next Steps".into(),
        items: dry_run_next_steps(ctx, a, d, plan, refused.as_ref()),
    }))
}

/// The report of a revert that stopped where it should (a gate, applied, nothing to do).
fn reverted_report(
    ctx: &Context,
    a: &CorrectArgs,
    d: &Decision,
    r: &revert::Reverted,
    p: &Plan,
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
    Report::ok(
        "plan correct",
        data,
        format!(
            "Corrected: attempt {} re-ran {} step(s) and replayed {}; plan at {}/{}",
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
    })
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
    let store = read_store(ctx)?;
    let a = store.correction_attempt(attempt)?.map_err(|e| {
        let not_found = matches!(
            e,
            cleveragents_engine::domain::id::IdPrefixError::NotFound { .. }
        );
        let err = CliError::from(e);
        if not_found {
            // An attempt id is printed by `plan correct`; `plan status` lists them again.
            err.hint(ctx.suggest(&format!("plan status {}", plan.unwrap_or("<plan>"))))
        } else {
            err
        }
    })?;
    if let Some(p) = plan {
        let pid = store.resolve_plan_id(p)??;
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
    let compared =
        api::Engine::new(ctx.paths.clone(), api::Settings::default()).compare_correction(&a)?;
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
            "before": {"stats": diff::stats(&r.before), "files": r.before},
            "after": {"stats": diff::stats(&r.after), "files": r.after},
            "changes": {"stats": diff::stats(&r.changes), "files": r.changes},
        }));
        all_changes.extend(r.changes);
    }
    let stats = diff::stats(&all_changes);
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
            items: vec![diff::unified(&all_changes)],
        });
    }
    Ok(report)
}

/// `plan correct --mode append`: a child plan carrying the guidance.
fn append(ctx: &Context, a: &CorrectArgs, d: &Decision) -> Result<Report, CliError> {
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
    {
        let engine = super::plan_run::engine(ctx, false, "Reading")?.lifecycle()?;
        let parent = engine.plan(&d.plan_id)?;
        appending::child_execution_actor(&engine, &parent, a.execution_actor.as_deref()).map_err(
            |why| {
                let err = CliError::new("NOT_SUPPORTED", why).hint(ctx.suggest("actor list"));
                if parent.phase() == cleveragents_engine::domain::Phase::Applied {
                    err
                } else {
                    err.hint(ctx.suggest(&format!(
                        "plan correct --mode revert -g {} --dry-run {}",
                        shell_words::quote(&a.guidance),
                        d.decision_id
                    )))
                }
            },
        )?;
    }
    if a.dry_run {
        let engine = super::plan_run::engine(ctx, false, "Reading")?.lifecycle()?;
        let parent = engine.plan(&d.plan_id)?;
        let bases = appending::child_bases(&engine, &parent)?;
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
    let engine = super::plan_run::engine(ctx, false, "Adding a child plan")?;
    let r = match engine.run(api::Op::Correct(Box::new(api::Correction {
        decision: d.decision_id,
        mode: api::CorrectMode::Append {
            execution_actor: a.execution_actor.clone(),
        },
        guidance: a.guidance.clone(),
        max_cost_usd: None,
        max_tokens: None,
    })))? {
        api::Outcome::Appended(r) => *r,
        other => return Err(super::plan_run::unexpected(&other)),
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
        "stopped": r.driven.as_ref().map(|x| super::plan_json::stopped(&x.stopped)),
        "next": next,
    });
    let mut report = Report::ok(
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
    if let Some(Stopped::Errored { code, message }) = r.driven.as_ref().map(|x| &x.stopped) {
        report.status.level = Level::Warn;
        report = report.message(
            Level::Warn,
            format!("the child plan errored ({code}): {message}"),
        );
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
