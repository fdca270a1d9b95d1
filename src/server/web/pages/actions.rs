//! The page's actions, each the request the command line sends: marking a hunk, answering
//! an approval, correcting a decision.

use std::net::SocketAddr;
use std::sync::Arc;

use axum::Form;
use axum::extract::rejection::FormRejection;
use axum::extract::{ConnectInfo, Path, State};
use axum::http::HeaderMap;
use axum::response::Response;

use cleveragents_engine::api::{
    Answer, ApiError, CorrectMode, Correction, Mark, Op, Outcome, ReviewRequest,
};
use cleveragents_engine::domain::approval::ApprovalKind;

use super::super::{Caller, Web, plan_path, unexpected};
use super::{Fields, field, short};

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
    let (caller, fields) = match super::posted(&web, &headers, address, form).await {
        Ok(posted) => posted,
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
    let (caller, _) = match super::posted(&web, &headers, address, form).await {
        Ok(posted) => posted,
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
    let (caller, fields) = match super::posted(&web, &headers, address, form).await {
        Ok(posted) => posted,
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
                // Retrying an Apply that failed is `plan apply`, with its approvals rule.
                None if approval.kind == ApprovalKind::Errored
                    && c.plan(&plan.to_string())?.phase().as_str() == "apply" =>
                {
                    (
                        "Approved (plan apply)",
                        Op::Apply {
                            plan,
                            no_commit: false,
                            selection: Default::default(),
                        },
                    )
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

/// `POST /plans/PLAN/decisions/DECISION/correct` with `guidance` and `mode` (`revert` or
/// `append`): `plan correct --mode MODE -g GUIDANCE --yes DECISION`.
pub async fn correct(
    State(web): State<Arc<Web>>,
    ConnectInfo(address): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
    Path((plan, decision)): Path<(String, String)>,
    form: Result<Form<Fields>, FormRejection>,
) -> Response {
    let (caller, fields) = match super::posted(&web, &headers, address, form).await {
        Ok(posted) => posted,
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
