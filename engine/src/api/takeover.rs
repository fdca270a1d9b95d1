//! Resuming the plans whose driver is gone, on another process (spec section 21: a server
//! instance that dies loses nothing; see [`crate::lifecycle::takeover`] for what counts as
//! abandoned). A server calls these on a timer; each plan is resumed exactly as `plan
//! execute` resumes an interrupted plan, from its last checkpoint, and as far as its
//! automation profile allows without a human.

use super::op::Outcome;
use super::{ApiError, Engine};
use crate::domain::Id;
use crate::lifecycle::driver::{self, Goal};
use crate::lifecycle::takeover;

impl Engine {
    /// The plans whose driver vanished or handed them over, oldest first (their stale
    /// leases are recovered on the way).
    ///
    /// # Errors
    /// [`ApiError::Store`].
    pub fn abandoned_plans(&self) -> Result<Vec<Id>, ApiError> {
        let mut store = self.store()?;
        Ok(takeover::abandoned(&mut store)?)
    }

    /// Takes the lease of an abandoned plan and drives it on as far as its profile allows.
    ///
    /// # Errors
    /// [`ApiError`]: `CONFLICT` when another live process took it first.
    pub fn take_over(&self, plan: &Id) -> Result<Outcome, ApiError> {
        let mut lc = self.lifecycle()?;
        let driven = driver::drive(&mut lc, plan, Goal::Continue)?;
        Ok(Outcome::Driven(Box::new(driven)))
    }
}
