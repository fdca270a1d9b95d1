//! The engine's views in the TUI's terms (`cleveragents_ui::model`): plan rows, approvals,
//! the decision tree, the diff and review, the explanation, the correction preview,
//! checkpoints and the use form's choices. Pure conversions: nothing here reads or waits.

use cleveragents_engine::api::StatusHeadline;
use cleveragents_engine::api::session_views::{
    self as sv, CheckpointRecord, CorrectionPreview, Explained, FileDiff, LineKind, PlanChanges,
    Reached, ReviewMark, TreeNode, UseChoices,
};
use cleveragents_engine::domain::approval::{Approval, ApprovalKind};
use cleveragents_engine::domain::id::Id;
use cleveragents_engine::domain::lifecycle::{Phase, ProcessingState};
use cleveragents_engine::domain::plan::Plan;
use cleveragents_engine::domain::profile::Profile;
use cleveragents_ui::model::{self as view, PlanRow};

fn phase(p: Phase) -> view::Phase {
    match p {
        Phase::Strategize => view::Phase::Strategize,
        Phase::Execute => view::Phase::Execute,
        Phase::Apply => view::Phase::Apply,
        Phase::Applied => view::Phase::Applied,
    }
}

fn state(s: ProcessingState) -> view::ProcessingState {
    match s {
        ProcessingState::Queued => view::ProcessingState::Queued,
        ProcessingState::Processing => view::ProcessingState::Processing,
        ProcessingState::Errored => view::ProcessingState::Errored,
        ProcessingState::Complete => view::ProcessingState::Complete,
        ProcessingState::Cancelled => view::ProcessingState::Cancelled,
    }
}

/// The plans list row for a plan. Elapsed time runs from creation to completion (or now);
/// cost is unknown until model calls are accounted. `gate_rejected`: `plan status` would say
/// "its gate was rejected" (see [`gate_rejected`]).
pub fn plan_row(plan: &Plan, now: jiff::Timestamp, gate_rejected: bool) -> PlanRow {
    let end = plan.completed_at.unwrap_or(now);
    let elapsed_ms = end.duration_since(plan.created_at).as_millis().max(0);
    PlanRow {
        plan_id: plan.plan_id.to_string(),
        action: plan.action_name.clone(),
        project: plan.project_names().join(", "),
        phase: phase(plan.phase()),
        state: state(plan.state()),
        elapsed_ms: u64::try_from(elapsed_ms).unwrap_or(u64::MAX),
        cost_usd: None,
        gate_rejected,
    }
}

/// Whether `agents plan status` heads plan `plan` with "its gate was rejected", by the same
/// rule ([`StatusHeadline::of`]): the plan's state reason and its pending approvals decide. A
/// plan being processed is shown as processing (the process driving it is not looked up here).
pub fn gate_rejected(plan: &Plan, state_reason: Option<&str>, pending: &[Approval]) -> bool {
    plan.state() != ProcessingState::Processing
        && matches!(
            StatusHeadline::of(plan, None, false, state_reason, pending),
            StatusHeadline::GateRejected { .. }
        )
}

/// The approval queue row for a pending approval.
pub fn approval_item(approval: &Approval) -> view::ApprovalItem {
    view::ApprovalItem {
        approval_id: approval.approval_id.clone(),
        plan_id: approval.plan_id.to_string(),
        kind: match approval.kind {
            ApprovalKind::PhaseGate => view::ApprovalKind::PhaseGate,
            ApprovalKind::Decision => view::ApprovalKind::DecisionChoice,
            ApprovalKind::ChildSpawn => view::ApprovalKind::ChildSpawn,
            ApprovalKind::TransientFailure => view::ApprovalKind::TransientFailure,
            // A merge conflict is answered like an errored plan (retry or cancel).
            ApprovalKind::Errored | ApprovalKind::ErrorRecovery => view::ApprovalKind::ErroredPlan,
            ApprovalKind::Budget => view::ApprovalKind::Budget,
            // Approve or reject one tool call: answered like a choice between two options.
            ApprovalKind::ToolApproval => view::ApprovalKind::DecisionChoice,
            // Accept, correct or cancel, with the evidence in the summary: a choice.
            ApprovalKind::InvariantViolation => view::ApprovalKind::DecisionChoice,
        },
        summary: approval.summary.clone(),
        options: approval.options.clone(),
    }
}

/// One node of the engine's tree in the tree pane's terms. A child plan node reads
/// `plan: NAME → PHASE/STATE ⇢ plan ID`.
pub fn tree_node(n: &TreeNode) -> view::DecisionNode {
    let is_plan = n.kind == "plan";
    view::DecisionNode {
        decision_id: n.id.clone(),
        decision_type: n.decision_type.clone().unwrap_or_else(|| n.kind.clone()),
        summary: n.question.clone().unwrap_or_else(|| n.label.clone()),
        chosen: if is_plan {
            n.status.clone().unwrap_or_default()
        } else {
            n.label.clone()
        },
        confidence: n.confidence_score.map(|c| c as f32),
        superseded: n.superseded,
        children: n.children.iter().map(tree_node).collect(),
        child_plan_id: is_plan.then(|| n.id.clone()),
    }
}

/// A plan's changes as the diff pane shows them: the review's items with their marks while
/// the changes can be reviewed, the sandboxes' diff, or what Apply wrote.
pub fn changes_view(changes: &PlanChanges) -> view::DiffView {
    match changes {
        PlanChanges::Nothing => view::DiffView::default(),
        PlanChanges::Review { review, diffs } => review_view(review, diffs),
        PlanChanges::Working { files } => view::DiffView {
            files: files.iter().map(diff_file).collect(),
            applied: None,
        },
        PlanChanges::Applied {
            files,
            commits,
            left_out,
        } => {
            let mut title = if commits.is_empty() {
                "applied".to_owned()
            } else {
                format!("applied in {}", commits.join(", "))
            };
            if !left_out.is_empty() {
                let mut paths: Vec<&str> = left_out.iter().map(String::as_str).collect();
                paths.dedup();
                title.push_str(&format!(" · left out: {}", paths.join(", ")));
            }
            view::DiffView {
                files: files.iter().map(diff_file).collect(),
                applied: Some(title),
            }
        }
    }
}

/// A review as the diff pane shows it: every file (its diff at the same index of `diffs`)
/// with its hunks, each hunk (or the whole file without hunks) with its id, verdict, reason
/// and every reviewer's mark.
pub fn review_view(review: &sv::Review, diffs: &[FileDiff]) -> view::DiffView {
    let mark = |m: ReviewMark| match m {
        ReviewMark::Pending => view::ReviewMark::Pending,
        ReviewMark::Reviewed => view::ReviewMark::Reviewed,
        ReviewMark::Accepted => view::ReviewMark::Accepted,
        ReviewMark::Rejected => view::ReviewMark::Rejected,
    };
    let item = |i: &sv::ReviewItem| view::ReviewItem {
        id: i.id.clone(),
        mark: mark(i.mark),
        reason: i.reason.clone(),
        marks: i
            .marks
            .iter()
            .map(|m| view::ReviewerMark {
                reviewer: m.reviewer.clone(),
                mark: mark(m.mark),
                reason: m.reason.clone(),
            })
            .collect(),
    };
    let files = review
        .files
        .iter()
        .zip(diffs)
        .map(|(f, diff)| {
            let mut file = diff_file(diff);
            if diff.hunks.is_empty() {
                file.review = f.items.first().map(item);
            } else {
                for (h, i) in file.hunks.iter_mut().zip(&f.items) {
                    h.review = Some(item(i));
                }
            }
            file
        })
        .collect();
    view::DiffView {
        files,
        applied: None,
    }
}

fn diff_file(f: &FileDiff) -> view::DiffFile {
    view::DiffFile {
        path: f.path.clone(),
        added: usize::try_from(f.additions).unwrap_or(usize::MAX),
        removed: usize::try_from(f.deletions).unwrap_or(usize::MAX),
        status: f.status.letter().to_owned(),
        review: None,
        hunks: f
            .hunks
            .iter()
            .map(|h| view::DiffHunk {
                old_start: h.old_start,
                old_lines: h.old_lines,
                new_start: h.new_start,
                new_lines: h.new_lines,
                lines: h
                    .lines
                    .iter()
                    .map(|l| view::DiffLine {
                        kind: match l.kind {
                            LineKind::Context => view::DiffLineKind::Context,
                            LineKind::Added => view::DiffLineKind::Added,
                            LineKind::Removed => view::DiffLineKind::Removed,
                        },
                        text: l.text.clone(),
                    })
                    .collect(),
                decision_ids: h.decision_ids.clone(),
                review: None,
            })
            .collect(),
    }
}

fn decision_ref(r: &Reached) -> view::DecisionRef {
    view::DecisionRef {
        decision_id: r.decision_id.to_string(),
        decision_type: r.decision_type.as_str().to_string(),
        chosen: r.chosen_option.clone(),
    }
}

/// Why a decision was taken, and everything downstream of it: the downstream decisions (the
/// plan's own first, in sequence order, then those of its child plans), and the child plans
/// reached.
pub fn explanation(e: &Explained) -> view::Explanation {
    let (d, imp) = (&e.decision, &e.impact);
    view::Explanation {
        decision_id: d.decision_id.to_string(),
        plan_id: d.plan_id.to_string(),
        decision_type: d.decision_type.as_str().to_string(),
        question: d.question.clone(),
        chosen: d.chosen_option.clone(),
        alternatives: d.alternatives_considered.clone(),
        rationale: d.rationale.clone(),
        confidence: d.confidence_score.map(|c| c as f32),
        superseded_by: d.superseded_by.map(|i| i.to_string()),
        impact: imp.decisions.iter().skip(1).map(decision_ref).collect(),
        impact_child_plans: imp.child_plans.iter().map(Id::to_string).collect(),
        impact_steps: imp.steps_rerun.len(),
        impact_files: imp.files.clone(),
        impact_level: imp.level().to_string(),
    }
}

/// The impact of a correction as the preview shows it (spec section 13): a revert's affected
/// decisions, steps, child plans and files, and why it would be refused; an append changes
/// nothing that exists.
pub fn correction_preview(p: &CorrectionPreview) -> view::CorrectionPreview {
    let Some(imp) = &p.impact else {
        return view::CorrectionPreview {
            refused: p.refused.clone(),
            ..view::CorrectionPreview::default()
        };
    };
    let ids = |v: &[Id]| v.iter().map(Id::to_string).collect::<Vec<_>>();
    view::CorrectionPreview {
        decisions: imp.decisions.iter().map(decision_ref).collect(),
        steps_rerun: ids(&imp.steps_rerun),
        steps_replayed: ids(&imp.steps_replayed),
        steps_may_rerun: ids(&imp.steps_may_rerun),
        child_plans: ids(&imp.child_plans),
        files: imp.files.clone(),
        estimated_model_calls: Some(imp.estimated_model_calls),
        refused: p.refused.clone(),
    }
}

/// A checkpoint a rollback can go to.
pub fn checkpoint_item(cp: &CheckpointRecord) -> view::CheckpointItem {
    view::CheckpointItem {
        checkpoint_id: cp.checkpoint_id.to_string(),
        seq: cp.seq,
        label: cp.label.clone(),
        step: cp.step.clone(),
        files_changed: cp.files_changed,
        taken: cp.created_at.strftime("%Y-%m-%d %H:%M:%S").to_string(),
    }
}

/// The actions that can be used and every project, by name, with each action's arguments
/// (only the actions that declare some), the registered automation profiles and the
/// configured one (`automation-profile`), the default's last resort before `manual`.
pub fn use_choices(
    choices: &UseChoices,
    profiles: &[Profile],
    configured_profile: Option<&str>,
) -> view::UseChoices {
    let arguments = choices
        .actions
        .iter()
        .filter(|(_, args)| !args.is_empty())
        .map(|(name, args)| {
            let fields = args
                .iter()
                .map(|arg| view::ArgumentField {
                    name: arg.name.clone(),
                    required: arg.required,
                    default: arg.default.as_ref().map(|v| match v {
                        serde_json::Value::String(s) => s.clone(),
                        other => other.to_string(),
                    }),
                    description: arg.description.clone(),
                })
                .collect();
            (name.clone(), fields)
        })
        .collect();
    view::UseChoices {
        actions: choices.actions.iter().map(|(n, _)| n.clone()).collect(),
        projects: choices.projects.clone(),
        arguments,
        profiles: profiles.iter().map(|p| p.name.clone()).collect(),
        configured_profile: configured_profile.map(str::to_owned),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plans_become_rows_with_phase_state_and_elapsed_time() {
        let created = jiff::Timestamp::from_second(1_000).unwrap();
        let mut plan = Plan::new("local/fmt", "fmt", created);
        plan.project_links.push(
            cleveragents_engine::domain::plan::ProjectLink::new("local/api", None, false).unwrap(),
        );
        let row = plan_row(&plan, jiff::Timestamp::from_second(1_075).unwrap(), false);
        assert_eq!(row.plan_id, plan.plan_id.to_string());
        assert_eq!(
            (row.action.as_str(), row.project.as_str()),
            ("local/fmt", "local/api")
        );
        assert_eq!(
            (row.phase, row.state),
            (view::Phase::Strategize, view::ProcessingState::Queued)
        );
        assert_eq!(row.elapsed_ms, 75_000);
        assert_eq!(row.cost_usd, None);
    }
}
