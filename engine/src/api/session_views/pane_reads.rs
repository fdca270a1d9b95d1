//! The reads behind the TUI's panes and overlays (spec section 20), computed by the same
//! engine functions as the headless commands: `plan tree --show-superseded`, `plan explain`,
//! `plan correct --dry-run`, `plan review` / `plan diff`, `plan checkpoints`, and the action
//! and project registries.

use super::{CheckpointRecord, CorrectionPreview, Explained, PlanChanges, TreeNode, UseChoices};
use crate::api::{ApiError, Engine};
use crate::correction::impact::{self, ImpactError};
use crate::correction::tree;
use crate::domain::action::ActionState;
use crate::domain::decision::Decision;
use crate::domain::id::Id;
use crate::lifecycle::trees::reviewed_trees_in;
use crate::sandbox::diff::DiffRequest;
use crate::store::Store;

/// Plan `plan`'s tree with superseded decisions and child plans.
///
/// # Errors
/// `NOT_FOUND`, `AMBIGUOUS`, store errors.
pub(super) fn plan_tree(engine: &Engine, plan: &str) -> Result<Vec<TreeNode>, ApiError> {
    let store = engine.store()?;
    let id = store.resolve_plan_id(plan)??;
    Ok(tree::load(&store, &id, true)?
        .roots
        .iter()
        .map(tree_node)
        .collect())
}

fn tree_node(n: &tree::Node) -> TreeNode {
    TreeNode {
        kind: n.kind.to_string(),
        id: n.id.to_string(),
        decision_type: n.decision_type.map(|t| t.as_str().to_string()),
        label: n.label.clone(),
        question: n.question.clone(),
        confidence_score: n.confidence_score,
        superseded: n.superseded_by.is_some(),
        status: n.status.clone(),
        children: n.children.iter().map(tree_node).collect(),
    }
}

/// Decision `input` as stored.
fn decision(store: &Store, input: &str) -> Result<Decision, ApiError> {
    let id = store.resolve_decision_id(input)??;
    store.decision(&id)?.ok_or_else(|| ApiError::InvalidInput {
        message: format!("decision {input} no longer exists"),
    })
}

fn impact_failed(e: ImpactError) -> ApiError {
    match e {
        ImpactError::Store(e) => ApiError::Store(e),
        other => ApiError::InvalidInput {
            message: other.to_string(),
        },
    }
}

/// Why decision `input` was taken, and everything downstream of it.
///
/// # Errors
/// `NOT_FOUND` for an unknown decision; store and impact failures.
pub(super) fn explanation(engine: &Engine, input: &str) -> Result<Explained, ApiError> {
    let store = engine.store()?;
    let decision = decision(&store, input)?;
    let impact = impact::impact(&store, Some(&engine.sandboxes()), &decision.decision_id)
        .map_err(impact_failed)?;
    Ok(Explained { decision, impact })
}

/// The impact of a correction of decision `input`: a revert's affected decisions, steps,
/// child plans and files, and why it would be refused; an append changes nothing that
/// exists, and is refused when the child's execution actor cannot take guidance.
///
/// # Errors
/// `NOT_FOUND` for an unknown decision or plan; store and impact failures.
pub(super) fn correction_preview(
    engine: &Engine,
    input: &str,
    append: bool,
) -> Result<CorrectionPreview, ApiError> {
    let store = engine.store()?;
    let d = decision(&store, input)?;
    let plan = store
        .plan(&d.plan_id)?
        .ok_or(crate::lifecycle::RunError::NotFound(d.plan_id))?;
    if append {
        let lc = engine.lifecycle()?;
        return Ok(CorrectionPreview {
            impact: None,
            refused: crate::correction::append::child_execution_actor(&lc, &plan, None).err(),
        });
    }
    let impact =
        impact::impact(&store, Some(&engine.sandboxes()), &d.decision_id).map_err(impact_failed)?;
    Ok(CorrectionPreview {
        impact: Some(impact),
        refused: crate::correction::revert::check_revertable(&plan, &d)
            .err()
            .map(|e| e.to_string()),
    })
}

/// Plan `input`'s changes: while its sandboxes are active, the review when it can be read
/// (else their attributed diff); once they are gone, what Apply wrote.
///
/// # Errors
/// `NOT_FOUND`, `AMBIGUOUS`, store errors. Sandbox and git failures read as no changes.
pub(super) fn plan_changes(engine: &Engine, input: &str) -> Result<PlanChanges, ApiError> {
    let store = engine.store()?;
    let id = store.resolve_plan_id(input)??;
    let sandboxes = engine.sandboxes();
    let Ok(active) = sandboxes.active(&store, &id) else {
        return Ok(PlanChanges::Nothing);
    };
    let request = DiffRequest {
        path: None,
        hunks: true,
    };
    // Once applied, the plan's change is what its commit holds: a partial Apply keeps the
    // remainder in the sandbox, which is not shown as the plan's change.
    let applied_phase = store
        .plan(&id)?
        .is_some_and(|p| p.phase() == crate::domain::Phase::Applied);
    if !active.is_empty() && !applied_phase {
        if let Some(review) = review(engine, &store, &id) {
            let diffs = review.files.iter().map(|f| f.diff.clone()).collect();
            return Ok(PlanChanges::Review { review, diffs });
        }
        let files = active
            .iter()
            .filter_map(|sb| {
                crate::sandbox::attribution::attributed_diff(&store, sb, &request).ok()
            })
            .flatten()
            .collect();
        return Ok(PlanChanges::Working { files });
    }
    let applied =
        crate::sandbox::applied::applied_changes(&store, &id, &request).unwrap_or_default();
    if applied.is_empty() {
        return Ok(PlanChanges::Nothing);
    }
    Ok(PlanChanges::Applied {
        commits: applied
            .iter()
            .filter_map(|a| a.commit.as_deref().map(|c| c[..c.len().min(12)].to_owned()))
            .collect(),
        files: applied.into_iter().flat_map(|a| a.files).collect(),
        left_out: crate::api::plan_diff::last_left_out(&store, &id)
            .ok()
            .and_then(|l| l.as_array().cloned())
            .unwrap_or_default()
            .iter()
            .filter_map(|l| l["path"].as_str().map(str::to_owned))
            .collect(),
    })
}

/// The review of plan `id`, as `plan review` computes it; `None` when it cannot be read.
fn review(engine: &Engine, store: &Store, id: &Id) -> Option<crate::review::Review> {
    let plan = store.plan(id).ok()??;
    let trees = reviewed_trees_in(store, id).ok()?;
    crate::review::load(store, &engine.sandboxes(), &plan, &trees).ok()
}

/// Plan `input`'s checkpoints that are not discarded, oldest first.
///
/// # Errors
/// `NOT_FOUND`, `AMBIGUOUS`, store errors.
pub(super) fn checkpoints(engine: &Engine, input: &str) -> Result<Vec<CheckpointRecord>, ApiError> {
    let store = engine.store()?;
    let id = store.resolve_plan_id(input)??;
    Ok(store
        .checkpoints(&id)?
        .into_iter()
        .filter(|cp| cp.discarded_at.is_none())
        .collect())
}

/// The available actions with their arguments, and every project, by name.
///
/// # Errors
/// Store errors.
pub(super) fn use_choices(engine: &Engine) -> Result<UseChoices, ApiError> {
    let store = engine.store()?;
    Ok(UseChoices {
        actions: store
            .actions()?
            .into_iter()
            .filter(|a| a.state == ActionState::Available)
            .map(|a| (a.name, a.arguments))
            .collect(),
        projects: store.projects()?.into_iter().map(|p| p.name).collect(),
    })
}
