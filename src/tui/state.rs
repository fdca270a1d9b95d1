//! The plans list and the approval queue, kept current: every [`POLL_INTERVAL`] the engine is
//! asked for both (`plan list`, `plan approvals`), and they are sent to the UI when they differ
//! from what was last sent, so a change made anywhere (another terminal, another client of the
//! same server) shows without a key press, and an idle TUI redraws nothing.

use std::collections::BTreeMap;
use std::time::Duration;

use cleveragents_engine::api::{ApiError, Client, PlanFilter};
use cleveragents_engine::domain::approval::Approval;
use cleveragents_engine::domain::id::Id;
use cleveragents_engine::domain::plan::Plan;
use cleveragents_ui::Msg;

use super::views::{approval_item, gate_rejected, plan_row};

/// How often the plans and approvals are read again.
pub const POLL_INTERVAL: Duration = Duration::from_millis(250);

/// What was last sent: the plans, their state reasons and the pending approvals.
type Sent = (Vec<Plan>, BTreeMap<Id, String>, Vec<Approval>);

/// What was last sent.
#[derive(Debug, Default)]
pub struct PlansAndApprovals {
    sent: Option<Sent>,
}

impl PlansAndApprovals {
    /// The messages that bring the plans list and the approval queue up to date, if either
    /// changed since the last call (always on the first call).
    ///
    /// # Errors
    /// [`ApiError`] when the engine cannot be asked.
    pub fn refresh(&mut self, client: &dyn Client) -> Result<Vec<Msg>, ApiError> {
        let listed = client.plan_list(PlanFilter::default())?;
        let (plans, reasons) = (listed.plans, listed.state_reasons);
        let approvals = client.approvals(None)?;
        if self
            .sent
            .as_ref()
            .is_some_and(|(p, r, a)| *p == plans && *r == reasons && *a == approvals)
        {
            return Ok(Vec::new());
        }
        let now = jiff::Timestamp::now();
        let rows = plans
            .iter()
            .map(|p| {
                // The headline looks at the plan's oldest pending approval only.
                let pending = approvals
                    .iter()
                    .find(|a| a.plan_id == p.plan_id)
                    .map(std::slice::from_ref)
                    .unwrap_or_default();
                let reason = reasons.get(&p.plan_id).map(String::as_str);
                plan_row(p, now, gate_rejected(p, reason, pending))
            })
            .collect();
        let items = approvals.iter().map(approval_item).collect();
        self.sent = Some((plans, reasons, approvals));
        Ok(vec![Msg::PlansUpdated(rows), Msg::ApprovalsUpdated(items)])
    }
}
