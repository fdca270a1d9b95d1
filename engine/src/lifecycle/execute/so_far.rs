//! Gathers what the plan did before a step ([`crate::context::so_far`]): the steps done
//! before it, with their recorded outputs, and every active sandbox's changes against the
//! plan's base, as the sandbox is now.

use crate::context::policy::Resolved;
use crate::context::so_far::{Changes, EarlierStep, SoFar, outcome};
use crate::domain::Plan;
use crate::domain::decision::Decision;
use crate::lifecycle::Lifecycle;
use crate::sandbox::Sandboxes;
use crate::sandbox::diff::{DiffRequest, sandbox_diff};
use crate::store::lifecycle_run::StepStatus;

/// What the plan did before `decision`'s step, as far as the policy lets it into context
/// (resources and paths it excludes are left out). Parts that cannot be read are left out.
pub(crate) fn gather(
    engine: &Lifecycle,
    plan: &Plan,
    decision: &Decision,
    policy: &Resolved,
) -> SoFar {
    SoFar {
        steps: earlier_steps(engine, plan, decision),
        changes: changes(engine, plan, policy),
    }
}

/// The steps done before `decision`'s (every done step for a decision that is no step,
/// such as a validation fix), in plan order.
fn earlier_steps(engine: &Lifecycle, plan: &Plan, decision: &Decision) -> Vec<EarlierStep> {
    let store = engine.store();
    let (Ok(steps), Ok(decisions)) = (
        store.plan_steps(&plan.plan_id),
        store.decisions(&plan.plan_id),
    ) else {
        return Vec::new();
    };
    let before = steps
        .iter()
        .find(|s| s.decision_id == decision.decision_id)
        .map_or(u32::MAX, |s| s.position);
    steps
        .iter()
        .filter(|s| s.status == StepStatus::Done && s.position < before)
        .map(|s| {
            let d = decisions.iter().find(|d| d.decision_id == s.decision_id);
            EarlierStep {
                position: s.position,
                key: d
                    .and_then(|d| d.context_snapshot["key"].as_str())
                    .unwrap_or_default()
                    .to_string(),
                instructions: d
                    .map(|d| d.step.as_ref().map_or(&d.chosen_option, |s| &s.instructions))
                    .cloned()
                    .unwrap_or_default(),
                outcome: s
                    .output
                    .as_deref()
                    .and_then(|o| serde_json::from_str(o).ok())
                    .map(|o| outcome(&o))
                    .unwrap_or_default(),
            }
        })
        .collect()
}

/// Every active sandbox of the plan (that the policy takes) with its diff against the base.
fn changes(engine: &Lifecycle, plan: &Plan, policy: &Resolved) -> Vec<Changes> {
    let Ok(active) = Sandboxes::new(engine.paths()).active(engine.store(), &plan.plan_id) else {
        return Vec::new();
    };
    let request = DiffRequest {
        path: None,
        hunks: true,
    };
    active
        .iter()
        .filter(|sb| policy.takes_resource(&sb.record.resource_name))
        .map(|sb| Changes {
            resource: sb.record.resource_name.clone(),
            work_dir: sb.work_dir().to_path_buf(),
            mounted: sb.keep_mounted(),
            files: sandbox_diff(sb, &request)
                .unwrap_or_default()
                .into_iter()
                .filter(|f| policy.takes_path(&f.path))
                .collect(),
        })
        .collect()
}
