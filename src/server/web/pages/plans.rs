//! `GET /`: the plan list with the filters of `plan list` and the TUI.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::Arc;

use axum::extract::{ConnectInfo, Query, State};
use axum::http::HeaderMap;
use axum::response::Response;
use minijinja::context;
use serde::Deserialize;
use serde_json::{Value, json};

use cleveragents_engine::api::PlanFilter;

use super::super::Web;
use super::{short, v};

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
