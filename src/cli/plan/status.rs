//! `agents plan status PLAN` (spec section 06): renders the engine's
//! [`api::PlanStatusView`] as the JSON data, the headline and the panels; it computes nothing
//! about the plan itself.

use serde_json::{Value, json};

use crate::cli::{CliError, Context, view};
use crate::output::{Cell, Column, Element, Level, Report};
use cleveragents_engine::api::{self, PlanStatusView, StatusHeadline};
use cleveragents_engine::domain::{Phase, Plan, ProcessingState};

/// `plan status PLAN`: the plan by id or unique prefix, as the engine sees it.
///
/// # Errors
/// `NOT_FOUND` / `AMBIGUOUS` for the plan, `CONFIG_INVALID`, store errors.
pub(crate) fn status(ctx: &Context, input: &str) -> Result<Report, CliError> {
    if ctx.server.is_none() {
        // In process the providers of config.toml decide invariant coverage: a broken file is
        // reported here, as before.
        ctx.config()?;
    }
    let v = ctx.client()?.plan_status(input)?;
    let (level, text) = headline(ctx, &v);
    let mut report = Report::ok("plan status", data(ctx, &v), text);
    for line in cost_lines(&v) {
        report = report.message(Level::Info, line);
    }
    if let Some(r) = &v.resumed {
        let mut line = r.describe();
        line[..1].make_ascii_uppercase();
        report = report.message(Level::Info, format!("{line} after its driver vanished"));
    }
    report.elements.extend(plan_panels(&v));
    report.elements.extend(people_panel(&v.attribution));
    report.elements.extend(children_elements(ctx, &v));
    report.elements.extend(progress_elements(ctx, &v));
    if let Some(l) = &v.running_in {
        report.elements.push(Element::panel(
            "Running",
            [
                ("Process", format!("pid {} on {}", l.pid, l.host)),
                ("Doing", l.kind.clone()),
                ("Since", view::time(&l.acquired_at)),
                ("Heartbeat", view::time(&l.heartbeat_at)),
            ],
        ));
    }
    report.elements.extend(steps_elements(ctx, &v));
    report.elements.extend(corrections_table(&v));
    report.elements.extend(tail_elements(ctx, &v));
    report.status.level = level;
    Ok(report)
}

/// The JSON data: the plan's CLI dictionary and everything the view adds, in a fixed order.
fn data(ctx: &Context, v: &PlanStatusView) -> Value {
    let mut data = Value::Object(crate::cli::plan::json::plan_dict(&v.plan));
    data["profile_source"] = json!(v.origin.as_ref().map(|o| o.profile_source));
    data["script"] = json!(v.origin.as_ref().and_then(|o| o.script.clone()));
    data["state_reason"] = json!(v.state_reason);
    data["running_in"] = json!(v.running_in);
    data["apply_journal_pending"] = json!(v.apply_journal_pending);
    data["cancel_requested"] = json!(v.cancel_requested);
    data["resumed"] =
        json!(v.resumed.map(
            |r| json!({"phase": r.phase, "step": r.step, "call": r.call, "text": r.describe()})
        ));
    data["pending_approvals"] = json!(
        v.approvals
            .iter()
            .map(|a| json!({
                "approval_id": a.approval_id, "kind": a.kind, "summary": a.summary,
                "options": a.options, "answer_command": ctx.next(&a.next()),
                "context": crate::cli::next::approval_context(a),
            }))
            .collect::<Vec<_>>()
    );
    data["steps"] = json!(
        v.steps
            .iter()
            .map(|s| {
                let mut st = json!(s.step);
                st["name"] = json!(s.name);
                st
            })
            .collect::<Vec<_>>()
    );
    data["children"] = children_data(v);
    data["corrections"] = corrections_data(v);
    data["decisions"] = json!({"current": v.decisions, "superseded": v.superseded_decisions});
    data["usage"] = json!(v.usage);
    data["estimate"] = json!(v.estimate);
    data["budget"] = json!(v.budget);
    data["errors"] = json!(v.errors);
    data["recovery_hints"] = json!(ctx.recovery_hints(&v.plan));
    data["not_yet_supported"] = json!(
        v.not_yet_supported
            .iter()
            .map(|(f, w)| json!({"flag": f, "effect": w}))
            .collect::<Vec<_>>()
    );
    if v.attribution != api::Attribution::default() {
        data["attribution"] = json!(v.attribution);
    }
    data["invariant_checks"] = json!({
        "coverage": v.invariant_checks,
        "summary": invariant_checks_line(&v.invariant_checks),
    });
    data
}

/// Who created, drove, approved and reviewed the plan on a server; nothing on one machine.
fn people_panel(who: &api::Attribution) -> Option<Element> {
    if *who == api::Attribution::default() {
        return None;
    }
    let names = |v: Vec<String>| {
        if v.is_empty() {
            "-".to_string()
        } else {
            v.join(", ")
        }
    };
    Some(Element::panel(
        "People",
        [
            (
                "Created by",
                who.created_by.clone().unwrap_or_else(|| "-".into()),
            ),
            (
                "Driven by",
                who.driven_by.clone().unwrap_or_else(|| "-".into()),
            ),
            (
                "Approved by",
                names(who.apply_approvals.iter().map(|a| a.user.clone()).collect()),
            ),
            ("Reviewed by", names(who.reviewers.clone())),
        ],
    ))
}

/// The children as JSON, each with whether a correction superseded its spawn.
fn children_data(v: &PlanStatusView) -> Value {
    json!(
        v.children
            .iter()
            .map(|c| json!({
                "plan_id": c.link.child_plan_id.to_string(),
                "action": c.plan.as_ref().map(|p| p.action_name.clone()),
                "phase": c.plan.as_ref().map(|p| p.phase()),
                "state": c.plan.as_ref().map(|p| p.state()),
                "status": c.link.status,
                "spawn_decision_id": c.link.spawn_decision_id.to_string(),
                "parallel_group": c.link.parallel_group,
                "detail": c.link.detail,
                "superseded": c.superseded,
            }))
            .collect::<Vec<_>>()
    )
}

/// The correction attempts as JSON, so that `plan diff --correction ATTEMPT` can be found
/// again later.
fn corrections_data(v: &PlanStatusView) -> Value {
    json!(
        v.corrections
            .iter()
            .map(|a| json!({
                "attempt_id": a.attempt_id.to_string(),
                "attempt": a.plan_attempt,
                "mode": a.mode,
                "original_decision_id": a.original_decision_id.to_string(),
                "new_decision_id": a.new_decision_id.map(|d| d.to_string()),
                "status": a.status.as_str(),
                "guidance": a.correction_reason,
                "created_at": a.created_at.to_string(),
            }))
            .collect::<Vec<_>>()
    )
}

/// The status line: the view's headline in words, with the commands that act on it.
fn headline(ctx: &Context, v: &PlanStatusView) -> (Level, String) {
    let id = &v.plan.plan_id;
    let level = if v.headline.needs_attention() {
        Level::Warn
    } else {
        Level::Ok
    };
    let text = match &v.headline {
        StatusHeadline::Applied => "Plan applied".to_string(),
        StatusHeadline::Cancelled => "Plan cancelled".to_string(),
        StatusHeadline::Errored { phase } => format!("Plan errored in {phase}"),
        StatusHeadline::Running { phase, state, pid } => {
            format!("Plan {phase}/{state}, running in pid {pid}")
        }
        StatusHeadline::ApplyInterrupted => format!(
            "Plan interrupted while Apply was writing; `{}` rolls the unfinished write back and applies again (`{}` rolls it back and cancels)",
            ctx.suggest(&format!("plan apply {id}")),
            ctx.suggest(&format!("plan cancel {id}"))
        ),
        StatusHeadline::Interrupted { phase } => format!(
            "Plan interrupted at {phase}; resume with `{}`",
            ctx.suggest(&format!(
                "plan {} {id}",
                if *phase == Phase::Apply {
                    "apply"
                } else {
                    "execute"
                }
            ))
        ),
        StatusHeadline::WaitingForApproval {
            phase,
            state,
            approval,
        } => format!(
            "Plan {phase}/{state}, waiting for approval {}: `{}`",
            approval.approval_id,
            ctx.next(&approval.next())
        ),
        StatusHeadline::GateRejected { phase } => {
            let run = if *phase == Phase::Strategize {
                "execute"
            } else {
                "apply"
            };
            format!(
                "Plan {phase}/{}: its gate was rejected; `{}` runs it after all, `{}` drops it",
                v.plan.state(),
                ctx.suggest(&format!("plan {run} {id}")),
                ctx.suggest(&format!("plan cancel {id}"))
            )
        }
        StatusHeadline::Phase { phase, state } => format!("Plan {phase}/{state}"),
    };
    (level, text)
}

/// The lines shown for the plan's estimate (the built-in `builtin/usage-estimator`) and
/// budget: only when there is history, a recorded estimate or a budget.
fn cost_lines(v: &PlanStatusView) -> Vec<String> {
    use cleveragents_engine::api::USAGE_ESTIMATOR;
    let e = &v.estimate;
    let mut lines = Vec::new();
    if let Some(named) = v.pending_estimation_actor() {
        lines.push(format!(
            "estimation actor {named}: runs when Strategize completes; until then the estimate is {USAGE_ESTIMATOR}'s"
        ));
    }
    if v.estimate_recorded || e.history_plans > 0 {
        lines.push(format!("Estimate ({}): {}", e.estimator, e.summary));
    }
    if let Some(w) = &e.warning {
        lines.push(format!("Estimate warning: {w}"));
    }
    if v.budget.is_set() {
        lines.push(format!(
            "Budget: {}",
            cleveragents_engine::api::describe_budget(&v.budget)
        ));
    }
    lines
}

/// The Plan Status panel, the invariant checks and, for a child plan, where it merges.
fn plan_panels(v: &PlanStatusView) -> Vec<Element> {
    let p = &v.plan;
    let mut out = vec![Element::panel(
        "Plan Status",
        [
            ("Plan", view::id(p.plan_id.to_string())),
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
    )];
    if let Some(line) = invariant_checks_line(&v.invariant_checks) {
        out.push(Element::panel("Invariant Checks", [("Checked", line)]));
    }
    if let Some(parent) = p.parent_plan_id {
        out.push(Element::panel(
            "Child Plan",
            [
                ("Parent", view::id(parent.to_string())),
                (
                    "Merges Into",
                    "the parent's sandbox (a child is never applied by itself)".into(),
                ),
            ],
        ));
    }
    out
}

/// The Child Plans table (this attempt's children) and a count of superseded ones.
fn children_elements(ctx: &Context, v: &PlanStatusView) -> Vec<Element> {
    let (earlier, current): (Vec<_>, Vec<_>) = v.children.iter().partition(|c| c.superseded);
    let mut out = Vec::new();
    if !current.is_empty() {
        let shorts = view::short_ids(
            &current
                .iter()
                .map(|c| c.link.child_plan_id.to_string())
                .collect::<Vec<_>>(),
        );
        let cell = |c: &api::ChildView, f: fn(&Plan) -> String| -> Cell {
            c.plan.as_ref().map(f).unwrap_or_default().into()
        };
        out.push(Element::Table {
            title: "Child Plans".into(),
            columns: ["ID", "Action", "Phase", "State", "Result", "Group"]
                .map(Column::left)
                .into(),
            rows: current
                .iter()
                .zip(shorts)
                .map(|(c, short)| {
                    vec![
                        view::id(short),
                        cell(c, |p| p.action_name.clone()),
                        cell(c, |p| p.phase().as_str().to_string()),
                        cell(c, |p| p.state().as_str().to_string()),
                        c.link.status.as_str().into(),
                        c.link
                            .parallel_group
                            .clone()
                            .unwrap_or_else(|| "-".into())
                            .into(),
                    ]
                })
                .collect(),
            empty: String::new(),
        });
    }
    if !earlier.is_empty() {
        out.push(Element::List {
            title: format!("Superseded Child Plans: {}", earlier.len()),
            items: vec![format!(
                "spawned by decisions a correction replaced (`{}` shows them)",
                ctx.suggest(&format!("plan tree --show-superseded {}", v.plan.plan_id))
            )],
        });
    }
    out
}

/// Progress, timing, the definition of done, the script and, when it errored, the error and
/// how to recover.
fn progress_elements(ctx: &Context, v: &PlanStatusView) -> Vec<Element> {
    let p = &v.plan;
    let mut out = vec![
        Element::List {
            title: "Progress".into(),
            items: progress(p),
        },
        Element::panel(
            "Timing",
            [
                ("Created", view::time(&p.created_at)),
                ("Updated", view::time(&p.updated_at)),
            ],
        ),
    ];
    if let Some(dod) = &p.definition_of_done {
        out.push(Element::List {
            title: "Definition of Done".into(),
            items: vec![dod.clone()],
        });
    }
    if let Some(script) = v.origin.as_ref().and_then(|o| o.script.as_ref()) {
        out.push(Element::List {
            title: "Script".into(),
            items: script
                .iter()
                .map(|s| {
                    let what = s.run.clone().or(s.tool.clone());
                    let what = what.or(s.spawn.as_ref().map(|sp| sp.action.clone()));
                    format!("{} ({}): {}", s.name, s.kind(), what.unwrap_or_default())
                })
                .collect(),
        });
    }
    if p.error_message.is_some() {
        out.push(Element::panel(
            "Error Detail",
            [
                ("Code", p.error_code.clone().unwrap_or_default()),
                ("Error", p.error_message.clone().unwrap_or_default()),
            ],
        ));
        let hints = ctx.recovery_hints(p);
        if !hints.is_empty() {
            out.push(Element::List {
                title: "Recovery".into(),
                items: hints,
            });
        }
    }
    out
}

/// `[done] Strategize`, `[processing] Execute`, `[waiting] Apply`, ...
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

/// The Steps table and the tail of what each step printed.
fn steps_elements(ctx: &Context, v: &PlanStatusView) -> Vec<Element> {
    if v.steps.is_empty() {
        return Vec::new();
    }
    // Unique among all the plan's decisions, so that a printed id names one decision.
    let shorts = view::short_map(v.decision_ids.iter().map(|d| d.to_string()));
    let mut out = vec![Element::Table {
        title: "Steps".into(),
        columns: ["#", "Step", "Decision", "Status", "Runs"]
            .map(Column::left)
            .into(),
        rows: v
            .steps
            .iter()
            .map(|s| {
                let st = &s.step;
                vec![
                    st.position.to_string().into(),
                    s.name.clone().into(),
                    view::id(view::short_in(&shorts, &st.decision_id.to_string())),
                    s.shown_status.as_str().into(),
                    st.runs.to_string().into(),
                ]
            })
            .collect(),
        empty: String::new(),
    }];
    out.extend(crate::cli::plan::logs::status_tails(
        ctx,
        &v.plan.plan_id.to_string(),
        &v.steps,
    ));
    out
}

/// The Corrections table (empty when there were none).
fn corrections_table(v: &PlanStatusView) -> Option<Element> {
    let corrections = &v.corrections;
    if corrections.is_empty() {
        return None;
    }
    let attempts = view::short_ids(
        &corrections
            .iter()
            .map(|a| a.attempt_id.to_string())
            .collect::<Vec<_>>(),
    );
    let decisions = view::short_map(corrections.iter().flat_map(|a| {
        [Some(a.original_decision_id), a.new_decision_id]
            .into_iter()
            .flatten()
            .map(|d| d.to_string())
    }));
    Some(Element::Table {
        title: "Corrections".into(),
        columns: [
            "Attempt ID",
            "Attempt",
            "Mode",
            "Corrected",
            "Status",
            "Guidance",
        ]
        .map(Column::left)
        .into(),
        rows: corrections
            .iter()
            .zip(attempts)
            .map(|(a, short)| {
                let original = a.original_decision_id.to_string();
                vec![
                    view::id(short),
                    a.plan_attempt
                        .map(|n| n.to_string())
                        .unwrap_or_else(|| "-".into())
                        .into(),
                    a.mode.clone().into(),
                    view::id(view::short_in(&decisions, &original)),
                    a.status.as_str().into(),
                    view::clip(a.correction_reason.as_deref().unwrap_or_default(), 40).into(),
                ]
            })
            .collect(),
        empty: String::new(),
    })
}

/// Pending approvals, usage and the profile flags not acted on yet.
fn tail_elements(ctx: &Context, v: &PlanStatusView) -> Vec<Element> {
    let mut out = Vec::new();
    if !v.approvals.is_empty() {
        out.push(Element::List {
            title: "Pending Approvals".into(),
            items: v
                .approvals
                .iter()
                .map(|a| {
                    format!(
                        "{} ({}): {} -> {}",
                        a.approval_id,
                        a.kind,
                        a.summary,
                        ctx.next(&a.next())
                    )
                })
                .collect(),
        });
    }
    out.push(usage_panel(v));
    if !v.not_yet_supported.is_empty() {
        out.push(Element::List {
            title: "Not Yet Supported".into(),
            items: v
                .not_yet_supported
                .iter()
                .map(|(f, w)| format!("{f}: {w}"))
                .collect(),
        });
    }
    out
}

/// Decisions, model calls, tokens and cost.
fn usage_panel(v: &PlanStatusView) -> Element {
    let u = &v.usage;
    let cost = u.cost_usd.map(|c| format!("${c:.4}")).unwrap_or_else(|| {
        if u.unreported_calls > 0 {
            "unknown (a provider reported no usage)".into()
        } else {
            "unknown (no price configured)".into()
        }
    });
    Element::panel(
        "Usage",
        [
            ("Decisions", v.decisions.to_string()),
            ("Model Calls", calls_cell(u)),
            ("Tokens", tokens_cell(u)),
            ("Cost", cost),
        ],
    )
}

/// `N`, with the calls in flight when a driver vanished and the calls made again for them
/// (docs/sandbox.md, "Resuming a step") when there are any.
fn calls_cell(u: &cleveragents_engine::api::UsageRollup) -> String {
    let mut notes = Vec::new();
    if u.interrupted_calls > 0 {
        notes.push(format!(
            "{} in flight when the driver vanished, tokens unknown",
            u.interrupted_calls
        ));
    }
    if u.retried_calls > 0 {
        notes.push(format!(
            "{} {}",
            u.retried_calls,
            if u.retried_calls == 1 {
                "retry"
            } else {
                "retries"
            }
        ));
    }
    if notes.is_empty() {
        u.calls.to_string()
    } else {
        format!("{} ({})", u.calls, notes.join("; "))
    }
}

/// `N in / M out`, with the cache's share and calls whose usage is unknown when there are any.
fn tokens_cell(u: &cleveragents_engine::api::UsageRollup) -> String {
    let mut text = format!("{} in / {} out", u.input_tokens, u.output_tokens);
    if u.cache_read_tokens > 0 {
        text.push_str(&format!(" ({} in from the cache)", u.cache_read_tokens));
    }
    if u.unreported_calls > 0 {
        text.push_str(&format!(
            ", plus unknown: {} call(s) reported no usage",
            u.unreported_calls
        ));
    }
    text
}

/// How the plan's invariants are checked after each step and before Apply, in words (`None`
/// when it has none); free text without an invariant actor is said to be unchecked.
fn invariant_checks_line(c: &cleveragents_engine::api::InvariantCoverage) -> Option<String> {
    let machine = c.paths_unchanged + c.command;
    let mut parts = Vec::new();
    if machine > 0 {
        parts.push(format!(
            "{machine} machine-checked after each step and before apply ({} paths-unchanged, {} command)",
            c.paths_unchanged, c.command
        ));
    }
    match (&c.invariant_actor, c.free_text) {
        (_, 0) => {}
        (Some(a), n) => parts.push(format!("{n} free-text judged by the invariant actor {a}")),
        (None, n) => parts.push(format!(
            "{n} free-text not machine-checked (no invariant actor: set one with `--invariant-actor` or the `invariant-actor` setting)"
        )),
    }
    (!parts.is_empty()).then(|| parts.join("; "))
}
