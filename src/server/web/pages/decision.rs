//! `GET /plans/PLAN/decisions/DECISION`: a decision's explanation, the impact of correcting
//! it, the dry-run estimate and the correction form.

use std::net::SocketAddr;
use std::sync::Arc;

use axum::extract::{ConnectInfo, Path, State};
use axum::http::HeaderMap;
use axum::response::Response;
use minijinja::context;
use serde_json::json;

use super::super::Web;
use super::{first_line, short, v};

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
