//! `GET /plans/PLAN`: a plan's status, approvals, review of its changes and decisions, and
//! `GET /plans/PLAN/events`, its live events.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Arc;

use axum::extract::{ConnectInfo, Path, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use minijinja::context;
use serde::Deserialize;
use serde_json::{Value, json};

use cleveragents_engine::api::session_views::PlanChanges;
use cleveragents_engine::api::{self, Mark};

use super::super::Web;
use super::{first_line, short, v};

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
    shorts: &api::ShortIds,
    out: &mut Vec<Value>,
) {
    for n in nodes {
        let id = n.id.to_string();
        out.push(json!({
            "id": id,
            "short": shorts.shown(&n.id),
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
