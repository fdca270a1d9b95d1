//! The page's handlers: each reads the signed-in caller, asks the engine the protocol's
//! requests the command line asks for the same view or action, and renders a template.

use std::collections::{BTreeMap, HashMap};
use std::net::SocketAddr;
use std::sync::Arc;

use axum::Form;
use axum::extract::rejection::FormRejection;
use axum::extract::{ConnectInfo, Path, Query, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Redirect, Response};
use minijinja::context;

/// `value` as a template value.
fn v(value: &impl serde::Serialize) -> minijinja::Value {
    minijinja::Value::from(minijinja::value::Serde(value))
}
use serde::Deserialize;
use serde_json::{Value, json};

use cleveragents_engine::api::session_views::PlanChanges;
use cleveragents_engine::api::{
    self, Answer, ApiError, CorrectMode, Correction, Mark, Op, Outcome, PlanFilter, ReviewRequest,
};
use cleveragents_engine::domain::approval::ApprovalKind;

use super::{Caller, Web, plan_path, session, templates, unexpected};

/// A form's fields.
type Fields = HashMap<String, String>;

/// What a refused sign-in is told, whatever the reason: it never says whether a user or a
/// token exists.
const NOT_VALID: &str = "that token is not valid on this server";

/// The field `name`, trimmed, when it is not empty.
fn field<'a>(fields: &'a Fields, name: &str) -> Option<&'a str> {
    fields.get(name).map(|v| v.trim()).filter(|v| !v.is_empty())
}

/// `GET /login`.
pub async fn login_form(
    State(web): State<Arc<Web>>,
    ConnectInfo(address): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
) -> Response {
    if web.caller(&headers, address).await.is_ok() {
        return Redirect::to("/").into_response();
    }
    web.page(None, "login.html", context! { title => "Sign in" })
}

/// `POST /login` with the form field `token`: a session for its user, or the one message a
/// wrong token gets.
pub async fn login(
    State(web): State<Arc<Web>>,
    ConnectInfo(address): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
    form: Result<Form<Fields>, FormRejection>,
) -> Response {
    // A body that is not a form has none of its fields (so no form token: refused below).
    let fields = form.map(|Form(f)| f).unwrap_or_default();
    if !session::same_origin(&headers, web.shared.tls) {
        return web.forbidden(
            None,
            "this sign-in was sent from another site's page; nothing was changed",
        );
    }
    let refused = || {
        templates::render(
            StatusCode::UNAUTHORIZED,
            "login.html",
            context! { title => "Sign in", error => NOT_VALID },
        )
    };
    let Some(secret) = field(&fields, "token").map(str::to_string) else {
        return refused();
    };
    let engine = web.shared.engine.engine();
    let given = secret.clone();
    let checked =
        tokio::task::spawn_blocking(move || engine.authenticate(&given, Some(address.to_string())))
            .await;
    match checked {
        Ok(Ok(Ok(principal))) => {
            tracing::info!(user = %principal.user, address = %address, "web sign-in");
            let id = web.sessions.open(secret);
            let mut answer = Redirect::to("/").into_response();
            answer.headers_mut().insert(
                header::SET_COOKIE,
                session::set_cookie(Some(&id), web.shared.tls),
            );
            answer
        }
        Ok(Ok(Err(why))) => {
            tracing::info!(reason = %why, address = %address, "web sign-in refused");
            refused()
        }
        Ok(Err(e)) => web.failure(None, e),
        Err(e) => web.internal(&format!("checking the token failed: {e}")),
    }
}

/// `POST /logout`.
pub async fn logout(
    State(web): State<Arc<Web>>,
    ConnectInfo(address): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
    form: Result<Form<Fields>, FormRejection>,
) -> Response {
    // A body that is not a form has none of its fields (so no form token: refused below).
    let fields = form.map(|Form(f)| f).unwrap_or_default();
    let caller = match web.poster(&headers, address, fields.get("csrf")).await {
        Ok(c) => c,
        Err(refused) => return refused,
    };
    web.sessions.close(&caller.session_id);
    let mut answer = Redirect::to("/login").into_response();
    answer.headers_mut().insert(
        header::SET_COOKIE,
        session::set_cookie(None, web.shared.tls),
    );
    answer
}

/// The plan list's filters, as the query string carries them (empty means any).
#[derive(Debug, Default, Deserialize)]
pub struct ListQuery {
    phase: Option<String>,
    state: Option<String>,
    project: Option<String>,
    action: Option<String>,
    regex: Option<String>,
}

fn given(v: Option<String>) -> Option<String> {
    v.map(|s| s.trim().to_string()).filter(|s| !s.is_empty())
}

/// `GET /`: the plans `plan list` shows, with its filters.
pub async fn plan_list(
    State(web): State<Arc<Web>>,
    ConnectInfo(address): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
    Query(query): Query<ListQuery>,
) -> Response {
    let caller = match web.caller(&headers, address).await {
        Ok(c) => c,
        Err(to_login) => return to_login,
    };
    let filter = PlanFilter {
        phase: given(query.phase),
        state: given(query.state),
        project: given(query.project),
        action: given(query.action),
        regex: given(query.regex),
    };
    let shown = json!(filter);
    let answer = web
        .ask(&caller, move |c| {
            let list = c.plan_list(filter)?;
            let approvals = c.approvals(None)?;
            // The choices of the filters; a user who may not read them gets free text.
            let choices = c.use_choices().ok();
            Ok((list, approvals, choices))
        })
        .await;
    let (list, approvals, choices) = match answer {
        Ok(a) => a,
        Err(page) => return page,
    };
    let waiting: BTreeMap<String, usize> = approvals.iter().fold(BTreeMap::new(), |mut m, a| {
        *m.entry(a.plan_id.to_string()).or_default() += 1;
        m
    });
    let plans: Vec<Value> = list
        .plans
        .iter()
        .rev()
        .map(|p| {
            let id = p.plan_id.to_string();
            json!({
                "id": id,
                "short": short(&id),
                "name": p.name,
                "action": p.action_name,
                "phase": p.phase().as_str(),
                "state": p.state().as_str(),
                "projects": p.project_links.iter().map(|l| l.project_name.clone()).collect::<Vec<_>>(),
                "reason": list.state_reasons.get(&p.plan_id),
                "approvals": waiting.get(&id).copied().unwrap_or(0),
                "updated": p.updated_at.to_string(),
            })
        })
        .collect();
    let (actions, projects) = choices.map_or((Vec::new(), Vec::new()), |c| {
        (
            c.actions.into_iter().map(|(name, _)| name).collect(),
            c.projects,
        )
    });
    web.page(
        Some(&caller),
        "plans.html",
        context! {
            title => "Plans",
            plans => v(&plans),
            filter => v(&shown),
            phases => ["strategize", "execute", "apply", "applied"],
            states => ["queued", "processing", "errored", "complete", "cancelled"],
            actions => actions,
            projects => projects,
        },
    )
}

/// The first 8 characters of an id, as the TUI shows ids.
fn short(id: &str) -> String {
    id.chars().take(8).collect()
}

/// The first line of `text`, at most `max` characters.
fn first_line(text: &str, max: usize) -> String {
    let line = text.lines().next().unwrap_or("");
    let cut: String = line.chars().take(max).collect();
    if cut.len() < text.trim_end().len() {
        format!("{cut}…")
    } else {
        cut
    }
}

/// One hunk's lines as the page shows them.
fn lines(hunk: &api::Hunk) -> Vec<Value> {
    hunk.lines
        .iter()
        .map(|l| {
            let (kind, sign) = match l.kind {
                api::LineKind::Added => ("added", "+"),
                api::LineKind::Removed => ("removed", "-"),
                api::LineKind::Context => ("context", " "),
            };
            json!({
                "kind": kind,
                "sign": sign,
                "text": l.text,
                "old": l.old_line,
                "new": l.new_line,
            })
        })
        .collect()
}

fn hunk_header(h: &api::Hunk) -> String {
    format!(
        "@@ -{},{} +{},{} @@",
        h.old_start, h.old_lines, h.new_start, h.new_lines
    )
}

/// The changes as the page shows them: each file with its items (hunks or the whole file),
/// each item with its mark and lines; `reviewable` when the marks can be set.
fn changes_view(changes: PlanChanges) -> Value {
    match changes {
        PlanChanges::Nothing => json!({"state": "nothing", "files": []}),
        PlanChanges::Review { review, diffs } => {
            let files: Vec<Value> = review
                .files
                .iter()
                .enumerate()
                .map(|(i, f)| {
                    let diff = diffs.get(i);
                    let items: Vec<Value> = f
                        .items
                        .iter()
                        .enumerate()
                        .map(|(j, item)| {
                            let hunk = diff.and_then(|d| {
                                d.hunks
                                    .iter()
                                    .find(|h| h.id.as_deref() == Some(item.id.as_str()))
                                    .or_else(|| d.hunks.get(j))
                            });
                            let mut v = serde_json::to_value(item).unwrap_or(Value::Null);
                            v["lines"] = json!(hunk.map(lines).unwrap_or_default());
                            v["header"] =
                                json!(hunk.map_or_else(|| "whole file".to_string(), hunk_header));
                            v
                        })
                        .collect();
                    let mut v = serde_json::to_value(f).unwrap_or(Value::Null);
                    if let Some(o) = v.as_object_mut() {
                        o.remove("diff");
                    }
                    v["items"] = json!(items);
                    v["anchor"] = json!(format!("file-{i}"));
                    v
                })
                .collect();
            json!({
                "state": "review",
                "reviewable": true,
                "counts": review.counts,
                "files": files,
                "any_marked": review.any_marked(),
            })
        }
        PlanChanges::Working { files } => json!({
            "state": "working",
            "files": plain_files(&files),
        }),
        PlanChanges::Applied {
            files,
            commits,
            left_out,
        } => json!({
            "state": "applied",
            "files": plain_files(&files),
            "commits": commits,
            "left_out": left_out,
        }),
    }
}

/// Files without review marks (Execute under way, or applied).
fn plain_files(files: &[api::FileDiff]) -> Vec<Value> {
    files
        .iter()
        .enumerate()
        .map(|(i, f)| {
            json!({
                "path": f.path,
                "old_path": f.old_path,
                "status": f.status,
                "binary": f.binary,
                "additions": f.additions,
                "deletions": f.deletions,
                "anchor": format!("file-{i}"),
                "items": f.hunks.iter().enumerate().map(|(j, h)| json!({
                    "id": h.id.clone().unwrap_or_else(|| format!("{i}-{j}")),
                    "header": hunk_header(h),
                    "lines": lines(h),
                    "mark": "pending",
                })).collect::<Vec<_>>(),
            })
        })
        .collect()
}

/// The decision tree as a flat list, each node with its depth, and the rationale of each
/// decision (its explanation) from the plan's decisions.
fn tree_rows(
    nodes: &[api::TreeNode],
    depth: usize,
    rationale: &HashMap<String, String>,
    shorts: &HashMap<String, String>,
    out: &mut Vec<Value>,
) {
    for n in nodes {
        let id = n.id.to_string();
        out.push(json!({
            "id": id,
            "short": shorts.get(&id).cloned().unwrap_or_else(|| short(&id)),
            "kind": n.kind,
            "type": n.decision_type.map(|t| t.as_str()),
            "label": first_line(&n.label, 140),
            "question": n.question,
            "confidence": n.confidence_score,
            "executable": n.executable,
            "correction": n.is_correction,
            "status": n.status,
            "why": rationale.get(&id),
            "depth": depth.min(8),
        }));
        tree_rows(&n.children, depth + 1, rationale, shorts, out);
    }
}

/// `GET /plans/PLAN`.
pub async fn plan(
    State(web): State<Arc<Web>>,
    ConnectInfo(address): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
    Path(plan): Path<String>,
) -> Response {
    let caller = match web.caller(&headers, address).await {
        Ok(c) => c,
        Err(to_login) => return to_login,
    };
    let answer = web
        .ask(&caller, move |c| {
            let id = c.resolve_plan(&plan)?.to_string();
            let status = c.plan_status(&id)?;
            // While a process drives the plan its sandboxes are being written: reading the
            // changes would wait for the running step to end, and the page would hang.
            let changes = match status.running_in {
                Some(_) => None,
                None => Some(c.plan_changes(&id)?),
            };
            let tree = c.decision_tree(&id, false, true)?;
            let decisions = c.decisions(&id)?;
            Ok((id, status, changes, tree, decisions))
        })
        .await;
    let (id, status, changes, tree, decisions) = match answer {
        Ok(a) => a,
        Err(page) => return page,
    };
    let rationale: HashMap<String, String> = decisions
        .iter()
        .filter_map(|d| Some((d.decision_id.to_string(), d.rationale.clone()?)))
        .collect();
    let mut rows = Vec::new();
    tree_rows(&tree.roots, 0, &rationale, &tree.short_ids, &mut rows);
    let done = status
        .steps
        .iter()
        .filter(|s| s.shown_status == "done")
        .count();
    let steps: Vec<Value> = status
        .steps
        .iter()
        .map(|s| json!({"name": s.name, "status": s.shown_status, "position": s.step.position}))
        .collect();
    let approvals: Vec<Value> = status
        .approvals
        .iter()
        .map(|a| {
            json!({
                "id": a.approval_id,
                "kind": a.kind,
                "summary": a.summary,
                "gate": a.context.get("gate"),
                "options": a.options,
                "created": a.created_at.to_string(),
            })
        })
        .collect();
    let p = &status.plan;
    web.page(
        Some(&caller),
        "plan.html",
        context! {
            title => format!("Plan {}", p.name),
            plan => v(&json!({
                "id": id,
                "short": short(&id),
                "name": p.name,
                "action": p.action_name,
                "description": p.description,
                "phase": p.phase().as_str(),
                "state": p.state().as_str(),
                "attempt": p.status.attempt,
                "projects": p.project_links.iter().map(|l| l.project_name.clone()).collect::<Vec<_>>(),
                "profile": p.automation_profile,
                "error": p.error_message,
            })),
            headline => v(&status.headline),
            reason => status.state_reason,
            progress => v(&json!({"done": done, "total": status.steps.len()})),
            steps => v(&steps),
            approvals => v(&approvals),
            changes => v(&changes.map_or_else(
                || json!({"state": "running", "files": []}),
                changes_view
            )),
            tree => v(&rows),
            usage => v(&status.usage),
            attribution => v(&status.attribution),
            errors => v(&status.errors),
            // The "reviewed" mark (seen, no verdict yet), where the engine has it.
            mark_reviewed => Mark::parse("reviewed").is_some(),
        },
    )
}

/// `POST /plans/PLAN/review` with `item` (a hunk or file id), `mark` (`accepted`,
/// `rejected`, `reviewed`, `pending`) and, for a rejection, `reason`: `plan review
/// --accept|--reject|--reviewed|--reset`.
pub async fn review(
    State(web): State<Arc<Web>>,
    ConnectInfo(address): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
    Path(plan): Path<String>,
    form: Result<Form<Fields>, FormRejection>,
) -> Response {
    // A body that is not a form has none of its fields (so no form token: refused below).
    let fields = form.map(|Form(f)| f).unwrap_or_default();
    let caller = match web.poster(&headers, address, fields.get("csrf")).await {
        Ok(c) => c,
        Err(refused) => return refused,
    };
    let (Some(item), Some(mark)) = (field(&fields, "item"), field(&fields, "mark")) else {
        return web.failure(
            Some(&caller),
            ApiError::InvalidInput {
                message: "the review form needs a hunk (`item`) and a mark".into(),
            },
        );
    };
    let Some(mark) = Mark::parse(mark) else {
        return web.failure(
            Some(&caller),
            ApiError::InvalidInput {
                message: format!(
                    "`{mark}` is not a review mark (accepted, rejected, reviewed, pending)"
                ),
            },
        );
    };
    let reason = field(&fields, "reason").map(str::to_string);
    if mark == Mark::Rejected && reason.is_none() {
        return web.failure(
            Some(&caller),
            ApiError::InvalidInput {
                message: "a rejected hunk needs a reason: it guides the hunk's correction".into(),
            },
        );
    }
    let item = item.to_string();
    let target = item.clone();
    let answer = web
        .ask(&caller, move |c| {
            let id = c.resolve_plan(&plan)?;
            // As `plan review` sends it: a reset carries no reason.
            let reason = if mark == Mark::Pending { None } else { reason };
            match c.run(Op::Review(Box::new(ReviewRequest {
                plan: id,
                targets: vec![target],
                mark,
                reason,
            })))? {
                Outcome::Reviewed(r) => Ok((id, r.marked)),
                other => Err(unexpected("plan review", &other)),
            }
        })
        .await;
    match answer {
        Ok((id, marked)) => {
            let verb = match mark {
                Mark::Pending => "with your mark withdrawn",
                other => other.as_str(),
            };
            web.done(
                &caller,
                &format!("{}#hunk-{item}", plan_path(&id)),
                format!("{} item(s) {verb}: {}", marked.len(), marked.join(", ")),
            )
        }
        Err(page) => page,
    }
}

/// `POST /approvals/APPROVAL/approve`: what the TUI's `a` runs (`plan apply --yes` or `plan
/// execute` at a phase gate, `plan decide --option 1` otherwise).
pub async fn approve(
    State(web): State<Arc<Web>>,
    ConnectInfo(address): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
    Path(approval): Path<String>,
    form: Result<Form<Fields>, FormRejection>,
) -> Response {
    // A body that is not a form has none of its fields (so no form token: refused below).
    let fields = form.map(|Form(f)| f).unwrap_or_default();
    let caller = match web.poster(&headers, address, fields.get("csrf")).await {
        Ok(c) => c,
        Err(refused) => return refused,
    };
    answer_approval(&web, &caller, approval, None).await
}

/// `POST /approvals/APPROVAL/reject` with `reason`: `plan reject APPROVAL --reason TEXT`.
pub async fn reject(
    State(web): State<Arc<Web>>,
    ConnectInfo(address): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
    Path(approval): Path<String>,
    form: Result<Form<Fields>, FormRejection>,
) -> Response {
    // A body that is not a form has none of its fields (so no form token: refused below).
    let fields = form.map(|Form(f)| f).unwrap_or_default();
    let caller = match web.poster(&headers, address, fields.get("csrf")).await {
        Ok(c) => c,
        Err(refused) => return refused,
    };
    let Some(reason) = field(&fields, "reason").map(str::to_string) else {
        return web.failure(
            Some(&caller),
            ApiError::InvalidInput {
                message: "rejecting an approval needs a reason".into(),
            },
        );
    };
    answer_approval(&web, &caller, approval, Some(reason)).await
}

/// Answers approval `id`: approves it, or rejects it with `reason`.
async fn answer_approval(
    web: &Web,
    caller: &Caller,
    id: String,
    reason: Option<String>,
) -> Response {
    let answer = web
        .ask(caller, move |c| {
            let Some(approval) = c.approval(&id)? else {
                return Err(ApiError::InvalidInput {
                    message: format!("approval {id} does not exist"),
                });
            };
            let plan = approval.plan_id;
            let id_shown = id.clone();
            let (what, op) = match reason {
                Some(reason) => (
                    "Rejected",
                    Op::Reject {
                        approval: id,
                        reason,
                    },
                ),
                None if approval.kind == ApprovalKind::PhaseGate => {
                    match approval.context["gate"].as_str() {
                        Some("apply") => (
                            "Approved (plan apply)",
                            Op::Apply {
                                plan,
                                no_commit: false,
                                selection: Default::default(),
                            },
                        ),
                        _ => ("Approved (plan execute)", Op::Execute { plan }),
                    }
                }
                None => (
                    "Approved (option 1)",
                    Op::Decide {
                        approval: id,
                        answer: Answer::Option(1),
                    },
                ),
            };
            let label = format!("{what} {id_shown}");
            c.run(op)?;
            let now = c.plan(&plan.to_string())?;
            Ok((plan, label, now))
        })
        .await;
    match answer {
        Ok((plan, what, now)) => web.done(
            caller,
            &plan_path(&plan),
            format!(
                "{what}; the plan is now at {}/{}",
                now.phase().as_str(),
                now.state().as_str()
            ),
        ),
        Err(page) => page,
    }
}

/// `GET /plans/PLAN/decisions/DECISION`: the decision's explanation and impact, and the
/// correction form with the dry-run estimate (`plan correct --dry-run`).
pub async fn decision(
    State(web): State<Arc<Web>>,
    ConnectInfo(address): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
    Path((plan, decision)): Path<(String, String)>,
) -> Response {
    let caller = match web.caller(&headers, address).await {
        Ok(c) => c,
        Err(to_login) => return to_login,
    };
    let answer = web
        .ask(&caller, move |c| {
            let id = c.resolve_plan(&plan)?;
            let preview = c.revert_preview(&decision, false)?;
            Ok((id, preview))
        })
        .await;
    let (id, preview) = match answer {
        Ok(a) => a,
        Err(page) => return page,
    };
    let d = &preview.decision;
    let imp = &preview.impact;
    let step_label = |s: &cleveragents_engine::domain::Id| {
        preview.steps.get(&s.to_string()).map_or_else(
            || json!({"short": short(&s.to_string()), "chosen": ""}),
            |l| json!({"short": l.short, "chosen": first_line(&l.chosen, 100)}),
        )
    };
    web.page(
        Some(&caller),
        "decision.html",
        context! {
            title => format!("Decision {}", preview.short_id),
            plan_id => id.to_string(),
            plan_name => preview.plan.name,
            decision => v(&json!({
                "id": d.decision_id.to_string(),
                "short": preview.short_id,
                "type": d.decision_type.as_str(),
                "question": d.question,
                "chosen": d.chosen_option,
                "alternatives": d.alternatives_considered,
                "confidence": d.confidence_score,
                "rationale": d.rationale,
                "reasoning": d.actor_reasoning,
                "correction": d.is_correction,
                "correction_reason": d.correction_reason,
                "superseded_by": d.superseded_by.map(|s| s.to_string()),
            })),
            impact => v(&json!({
                "level": imp.level(),
                "decisions": imp.decisions.iter().map(|r| json!({
                    "short": short(&r.decision_id.to_string()),
                    "type": r.decision_type.as_str(),
                    "chosen": first_line(&r.chosen_option, 100),
                })).collect::<Vec<_>>(),
                "rerun": imp.steps_rerun.iter().map(step_label).collect::<Vec<_>>(),
                "replayed": imp.steps_replayed.iter().map(step_label).collect::<Vec<_>>(),
                "kept": imp.steps_kept.len(),
                "child_plans": imp.child_plans.len(),
                "files": imp.files,
                "model_calls": imp.estimated_model_calls,
            })),
            estimate => v(&json!({
                "tokens": preview.rerun.tokens,
                "cost": preview.rerun.cost_usd.map(|c| format!("${c:.4}")),
            })),
            refused => preview.refused.as_ref().map(|r| r.message.clone()),
            script_executor => preview.script_executor,
        },
    )
}

/// `POST /plans/PLAN/decisions/DECISION/correct` with `guidance` and `mode` (`revert` or
/// `append`): `plan correct --mode MODE -g GUIDANCE --yes DECISION`.
pub async fn correct(
    State(web): State<Arc<Web>>,
    ConnectInfo(address): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
    Path((plan, decision)): Path<(String, String)>,
    form: Result<Form<Fields>, FormRejection>,
) -> Response {
    // A body that is not a form has none of its fields (so no form token: refused below).
    let fields = form.map(|Form(f)| f).unwrap_or_default();
    let caller = match web.poster(&headers, address, fields.get("csrf")).await {
        Ok(c) => c,
        Err(refused) => return refused,
    };
    let Some(guidance) = field(&fields, "guidance").map(str::to_string) else {
        return web.failure(
            Some(&caller),
            ApiError::InvalidInput {
                message: "the guidance is empty: say what was wrong and what to do instead".into(),
            },
        );
    };
    let mode = match field(&fields, "mode").unwrap_or("revert") {
        "append" => CorrectMode::Append {
            execution_actor: None,
        },
        _ => CorrectMode::Revert,
    };
    let answer = web
        .ask(&caller, move |c| {
            let id = c.resolve_plan(&plan)?;
            // As `plan correct` (without --dry-run) does: a revert that would be refused is
            // answered with the refusal before anything runs.
            let preview = c.revert_preview(&decision, matches!(mode, CorrectMode::Revert))?;
            let outcome = c.run(Op::Correct(Box::new(Correction {
                decision: preview.decision.decision_id,
                mode,
                guidance,
                max_cost_usd: None,
                max_tokens: None,
            })))?;
            let now = c.plan(&id.to_string())?;
            Ok((id, outcome, now))
        })
        .await;
    match answer {
        Ok((id, outcome, now)) => {
            let what = match &outcome {
                Outcome::Reverted(r) => format!(
                    "Correction attempt {} ran: {} decision(s) recomputed",
                    short(&r.attempt.attempt_id.to_string()),
                    r.new_decisions.len()
                ),
                Outcome::Appended(_) => "A child plan carrying the guidance was appended".into(),
                other => format!("The correction was answered with `{}`", other.name()),
            };
            web.done(
                &caller,
                &plan_path(&id),
                format!(
                    "{what}; the plan is now at {}/{}",
                    now.phase().as_str(),
                    now.state().as_str()
                ),
            )
        }
        Err(page) => page,
    }
}

/// The query of the page's event stream.
#[derive(Debug, Deserialize)]
pub struct EventsQuery {
    after: Option<i64>,
}

/// `GET /plans/PLAN/events`: the plan's events and the live events of its running step, as
/// `/v1/events?live=true` streams them, for the signed-in user.
pub async fn events(
    State(web): State<Arc<Web>>,
    ConnectInfo(address): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
    Path(plan): Path<String>,
    Query(query): Query<EventsQuery>,
) -> Response {
    let caller = match web.caller(&headers, address).await {
        Ok(c) => c,
        Err(_) => return StatusCode::UNAUTHORIZED.into_response(),
    };
    let asked = crate::server::events::Asked {
        plan: Some(plan),
        after: query.after,
        live: true,
        narrow: true,
    };
    crate::server::events::stream_for(Arc::clone(&web.shared), caller.principal, asked, &headers)
        .await
}
