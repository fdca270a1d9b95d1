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
        let trees = apply::reviewed_trees_in(&store, plan)?;
        Ok(crate::review::load(&store, &self.sandboxes(), &p, &trees)?)
    }
}

impl Engine {
    /// What correction attempt `attempt` changed, per active sandbox of its plan: the original
    /// and corrected attempts' changes against the base, and corrected vs original (spec
    /// section 13, `plan diff --correction`).
    ///
    /// # Errors
    /// [`ApiError::Sandbox`] for store, sandbox and git failures.
    pub fn compare_correction(
        &self,
        attempt: &crate::store::corrections::CorrectionAttempt,
    ) -> Result<Vec<crate::correction::compare::ResourceComparison>, ApiError> {
        let store = self.store()?;
        Ok(crate::correction::compare::compare(
            &store,
            &self.sandboxes(),
            attempt,
        )?)
    }
}
