//! Read-side questions of the engine's API, answered with typed views.

use super::{ApiError, Engine};
use crate::domain::{Id, Phase, ProcessingState};
use crate::lifecycle::apply::{self, Preview};

impl Engine {
    /// What applying plan `plan` would change, per resource, when the plan can be applied now
    /// (Execute complete, or Apply queued or errored); `None` otherwise, so that running
    /// [`super::Op::Apply`] names what is wrong. An Apply interrupted by a crash is recovered
    /// first.
    ///
    /// # Errors
    /// [`ApiError::Run`] for unknown plans, store, sandbox and git failures.
    pub fn apply_preview(&self, plan: &Id) -> Result<Option<Vec<Preview>>, ApiError> {
        let mut lc = self.lifecycle()?;
        lc.recover(plan)?;
        let p = lc.plan(plan)?;
        let ready = matches!(
            (p.phase(), p.state()),
            (Phase::Execute, ProcessingState::Complete)
                | (
                    Phase::Apply,
                    ProcessingState::Queued | ProcessingState::Errored
                )
        );
        if !ready {
            return Ok(None);
        }
        Ok(Some(apply::preview(&lc, &p)?))
    }
}

impl Engine {
    /// The review of plan `plan` (`docs/review.md`): every item of the trees the apply gate
    /// recorded (the sandboxes' current trees before one is), with its id, mark and the
    /// decisions that produced it.
    ///
    /// # Errors
    /// [`ApiError::Run`] for an unknown plan, [`ApiError::Review`] for store, sandbox and git
    /// failures.
    pub fn review(&self, plan: &Id) -> Result<crate::review::Review, ApiError> {
        let store = self.store()?;
        let p = store
            .plan(plan)?
            .ok_or(crate::lifecycle::RunError::NotFound(*plan))?;
        let trees = crate::lifecycle::trees::reviewed_trees_in(&store, plan)?;
        Ok(crate::review::load(&store, &self.sandboxes(), &p, &trees)?)
    }
}

/// What `plan list` filters on (every filter optional; all given must hold).
#[derive(
    Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize, schemars::JsonSchema,
)]
pub struct PlanFilter {
    /// Only this phase (`strategize`, `execute`, `apply`, `applied`).
    pub phase: Option<String>,
    /// Only this state (`queued`, `processing`, `errored`, `complete`, `cancelled`).
    pub state: Option<String>,
    /// Only plans targeting this project (name or id).
    pub project: Option<String>,
    /// Only plans of this action (a bare name resolves to `local/`).
    pub action: Option<String>,
    /// Only plans whose action or name matches this regular expression.
    pub regex: Option<String>,
}

/// The plans `plan list` shows, oldest first, with the filters as resolved.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize, schemars::JsonSchema)]
pub struct PlanListView {
    /// The plans that pass every filter.
    pub plans: Vec<crate::domain::Plan>,
    /// The project filter's resolved name.
    pub project: Option<String>,
    /// The action filter's resolved name.
    pub action: Option<String>,
    /// Why listed plans are in their state, where recorded (`gate_rejected`, `interrupted`,
    /// ...), by plan id: with the pending approvals, what a face needs to word a plan as
    /// [`super::StatusHeadline::of`] (`plan status`) words it.
    #[serde(default)]
    pub state_reasons: std::collections::BTreeMap<crate::domain::Id, String>,
}

impl Engine {
    /// The plans that pass `filter` (see [`PlanFilter`]).
    ///
    /// # Errors
    /// [`ApiError::InvalidInput`] for a bad regular expression, the project registry's
    /// `NOT_FOUND` for an unknown project, store errors.
    pub fn plan_list(&self, filter: &PlanFilter) -> Result<PlanListView, ApiError> {
        let store = self.store()?;
        let re = filter
            .regex
            .as_deref()
            .map(regex::Regex::new)
            .transpose()
            .map_err(|e| ApiError::InvalidInput {
                message: format!("invalid REGEX: {e}"),
            })?;
        let project = filter
            .project
            .as_deref()
            .map(|p| crate::registry::projects::find(&store, p))
            .transpose()
            .map_err(|e| ApiError::from(super::RegistryError::Project(e)))?
            .map(|p| p.name);
        let action = filter.action.as_deref().map(|x| {
            crate::domain::QualifiedName::resolve_user_input(x, &[])
                .map(|q| q.to_string())
                .unwrap_or_else(|_| x.to_string())
        });
        let plans = store
            .plan_summaries()?
            .into_iter()
            .filter(|p| {
                filter
                    .phase
                    .as_deref()
                    .is_none_or(|ph| p.phase().as_str() == ph)
            })
            .filter(|p| {
                filter
                    .state
                    .as_deref()
                    .is_none_or(|s| p.state().as_str() == s)
            })
            .filter(|p| {
                project
                    .as_deref()
                    .is_none_or(|pr| p.project_names().contains(&pr))
            })
            .filter(|p| action.as_deref().is_none_or(|ac| p.action_name == ac))
            .filter(|p| {
                re.as_ref()
                    .is_none_or(|r| r.is_match(&p.action_name) || r.is_match(&p.name))
            })
            .collect::<Vec<_>>();
        let mut state_reasons = store.plan_state_reasons()?;
        let listed: std::collections::HashSet<_> = plans.iter().map(|p| p.plan_id).collect();
        state_reasons.retain(|id, _| listed.contains(id));
        Ok(PlanListView {
            plans,
            project,
            action,
            state_reasons,
        })
    }
}
