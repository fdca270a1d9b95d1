//! The UI's commands that change something, as the operations a user would run headlessly
//! (`plan execute`, `apply`, `decide`, `reject`, `cancel`, `rollback`, `prompt`, `use`,
//! `correct`, `review`): each one [`Op`] through the client, on a worker thread.

use std::time::Duration;

use cleveragents_engine::api::session_views::{Answer, NewPlan, ReviewMark};
use cleveragents_engine::api::{
    ApiError, Client, CorrectMode, Correction, Op, Outcome, ReviewRequest, UseRequest,
};
use cleveragents_engine::domain::approval::ApprovalKind;
use cleveragents_engine::domain::id::Id;
use cleveragents_engine::domain::sandbox::CheckpointId;
use cleveragents_ui::model as view;
use cleveragents_ui::{Cmd, Msg};

use super::jobs::Jobs;
use super::views;

/// How long cancelling waits for another process's driver of the plan to stop.
const CANCEL_WAIT: Duration = Duration::from_secs(10);

fn short(id: &str) -> &str {
    view::short_id(id)
}

/// Answers an approval: the operation a user would run headlessly.
pub fn answer(jobs: &mut Jobs, client: &dyn Client, cmd: Cmd) -> Vec<Msg> {
    let approval_id = match &cmd {
        Cmd::Approve { approval_id }
        | Cmd::Reject { approval_id, .. }
        | Cmd::Choose { approval_id, .. }
        | Cmd::Guidance { approval_id, .. } => approval_id.clone(),
        _ => return Vec::new(),
    };
    let approval = match client.approval(&approval_id) {
        Ok(Some(a)) => a,
        _ => {
            return vec![Msg::Error {
                title: "Approval not found".into(),
                detail: format!("{approval_id} was answered or withdrawn elsewhere."),
            }];
        }
    };
    let plan = approval.plan_id;
    let shown = approval_id.clone();
    let (verb, op) = match cmd {
        Cmd::Approve { .. } if approval.kind == ApprovalKind::PhaseGate => {
            match approval.context["gate"].as_str() {
                Some("apply") => (
                    "apply",
                    Op::Apply {
                        plan,
                        no_commit: false,
                        selection: Default::default(),
                    },
                ),
                _ => ("execute", Op::Execute { plan }),
            }
        }
        // Retrying an Apply that failed is `plan apply`, with its approvals rule.
        Cmd::Approve { .. }
            if approval.kind == ApprovalKind::Errored
                && client
                    .plan(&plan.to_string())
                    .is_ok_and(|p| p.phase().as_str() == "apply") =>
        {
            (
                "apply",
                Op::Apply {
                    plan,
                    no_commit: false,
                    selection: Default::default(),
                },
            )
        }
        Cmd::Approve { .. } => (
            "decide",
            Op::Decide {
                approval: approval_id,
                answer: Answer::Option(1),
            },
        ),
        Cmd::Reject { reason, .. } => (
            "reject",
            Op::Reject {
                approval: approval_id,
                reason,
            },
        ),
        Cmd::Choose { option, .. } => {
            let Some(n) = approval.options.iter().position(|o| *o == option) else {
                return vec![Msg::Error {
                    title: "Unknown option".into(),
                    detail: option,
                }];
            };
            (
                "decide",
                Op::Decide {
                    approval: approval_id,
                    answer: Answer::Option(n + 1),
                },
            )
        }
        Cmd::Guidance { text, .. } => (
            "decide",
            Op::Decide {
                approval: approval_id,
                answer: Answer::Guidance(text),
            },
        ),
        _ => return Vec::new(),
    };
    // As the command a user would type: decide and reject take the approval.
    let what = match verb {
        "decide" | "reject" => format!("plan {verb} {shown}"),
        _ => format!("plan {verb} {}", short(&plan.to_string())),
    };
    jobs.run_op(what, move |_| Ok(op))
}

/// The commands that change a plan: each one engine operation on a worker thread.
/// `global_profile` is the configured automation profile new plans get unless their action
/// or project names one.
pub fn operation(jobs: &mut Jobs, global_profile: Option<&str>, cmd: Cmd) -> Vec<Msg> {
    match cmd {
        Cmd::Execute { plan_id } => {
            let what = format!("plan execute {}", short(&plan_id));
            jobs.run_op(what, move |c| {
                Ok(Op::Execute {
                    plan: c.resolve_plan(&plan_id)?,
                })
            })
        }
        Cmd::Apply { plan_id } => {
            let what = format!("plan apply {}", short(&plan_id));
            jobs.run_op(what, move |c| {
                Ok(Op::Apply {
                    plan: c.resolve_plan(&plan_id)?,
                    no_commit: false,
                    selection: Default::default(),
                })
            })
        }
        Cmd::Cancel { plan_id } => {
            let what = format!("plan cancel {}", short(&plan_id));
            jobs.run_op(what, move |c| {
                Ok(Op::Cancel {
                    plan: c.resolve_plan(&plan_id)?,
                    reason: None,
                    wait: CANCEL_WAIT,
                })
            })
        }
        Cmd::Rollback {
            plan_id,
            checkpoint_id,
        } => {
            let what = format!("plan rollback {} {checkpoint_id}", short(&plan_id));
            jobs.run_op(what, move |c| {
                let checkpoint: CheckpointId =
                    checkpoint_id.parse().map_err(|_| ApiError::InvalidInput {
                        message: format!("{checkpoint_id} is not a checkpoint id"),
                    })?;
                Ok(Op::Rollback {
                    plan: c.resolve_plan(&plan_id)?,
                    checkpoint,
                })
            })
        }
        Cmd::Prompt { plan_id, text } => {
            let what = format!("plan prompt {}", short(&plan_id));
            jobs.run_op(what, move |c| {
                Ok(Op::Prompt {
                    plan: c.resolve_plan(&plan_id)?,
                    text,
                })
            })
        }
        Cmd::Use {
            action,
            project,
            profile,
            args,
        } => use_action(jobs, global_profile, action, project, profile, args),
        Cmd::Correct {
            decision_id,
            mode,
            guidance,
        } => {
            let what = format!("plan correct {}", short(&decision_id));
            jobs.run_op(what, move |_| {
                let decision: Id = decision_id.parse().map_err(|_| ApiError::InvalidInput {
                    message: format!("{decision_id} is not a decision id"),
                })?;
                Ok(Op::Correct(Box::new(Correction {
                    decision,
                    mode: match mode {
                        view::CorrectionMode::Revert => CorrectMode::Revert,
                        view::CorrectionMode::Append => CorrectMode::Append {
                            execution_actor: None,
                        },
                    },
                    guidance,
                    max_cost_usd: None,
                    max_tokens: None,
                })))
            })
        }
        Cmd::Review {
            plan_id,
            item_ids,
            mark,
            reason,
        } => review(jobs, plan_id, item_ids, mark, reason),
        _ => Vec::new(),
    }
}

/// `plan use ACTION PROJECT [--automation-profile PROFILE] --arg NAME=VALUE...`: the plan's id
/// goes back with the end of the command ([`Msg::UseEnded`]), so the form's plan is selected
/// even when the command ends before the plans list shows it.
fn use_action(
    jobs: &mut Jobs,
    global_profile: Option<&str>,
    action: String,
    project: String,
    profile: Option<String>,
    args: Vec<(String, String)>,
) -> Vec<Msg> {
    let what = match &profile {
        Some(p) => format!("plan use {action} {project} --automation-profile {p}"),
        None => format!("plan use {action} {project}"),
    };
    let request = NewPlan {
        action: action.clone(),
        projects: vec![project.clone()],
        automation_profile: profile,
        args: args
            .into_iter()
            .map(|(name, value)| format!("{name}={value}"))
            .collect(),
        global_profile: global_profile.map(str::to_string),
        ..NewPlan::default()
    };
    let label = what.clone();
    jobs.spawn_all(what, move |client| {
        let result = client.run(Op::Use(Box::new(UseRequest {
            request,
            max_cost_usd: None,
            max_tokens: None,
        })));
        let plan_id = match &result {
            Ok(Outcome::Used(u)) => Some(u.plan.plan_id.to_string()),
            _ => None,
        };
        vec![
            Msg::UseEnded {
                action,
                project,
                plan_id,
            },
            super::jobs::finished(&label, result),
        ]
    })
}

/// Marks review items; the diff pane then shows the review as it now is.
fn review(
    jobs: &mut Jobs,
    plan_id: String,
    item_ids: Vec<String>,
    mark: view::ReviewMark,
    reason: Option<String>,
) -> Vec<Msg> {
    let what = format!("plan review {}", short(&plan_id));
    jobs.spawn(what, move |client| {
        let marked = client.resolve_plan(&plan_id).and_then(|plan| {
            client.run(Op::Review(Box::new(ReviewRequest {
                plan,
                targets: item_ids,
                mark: match mark {
                    view::ReviewMark::Pending => ReviewMark::Pending,
                    view::ReviewMark::Reviewed => ReviewMark::Reviewed,
                    view::ReviewMark::Accepted => ReviewMark::Accepted,
                    view::ReviewMark::Rejected => ReviewMark::Rejected,
                },
                reason,
            })))
        });
        let failed = |detail: String| Msg::Error {
            title: "Could not mark the review".into(),
            detail,
        };
        match marked {
            // The review's own file diffs do not cross the protocol: the pane reads the
            // plan's changes again, with their new marks.
            Ok(Outcome::Reviewed(_)) => match client.plan_changes(&plan_id) {
                Ok(changes) => Msg::DiffUpdated {
                    plan_id,
                    diff: views::changes_view(&changes),
                },
                Err(e) => failed(e.to_string()),
            },
            Ok(other) => failed(format!("unexpected answer `{}`", other.name())),
            Err(e) => failed(e.to_string()),
        }
    })
}
