//! Approvals of an Apply by distinct humans (an organization's `apply.min_approvals`, spec
//! section 22): each human's `plan apply --yes` records their approval; the plan is applied
//! by the call that brings the count to the minimum. The plan's creator's approval does not
//! count.

use super::{ApiError, Engine};
use crate::domain::Id;

/// Why an Apply waits for more approvals.
#[derive(
    Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize, schemars::JsonSchema,
)]
pub struct ApprovalsNeeded {
    /// The plan.
    pub plan: Id,
    /// The organization whose policy asks for them.
    pub org: String,
    /// Approvals that count so far.
    pub have: u32,
    /// Approvals the policy asks for.
    pub need: u32,
    /// Who approved, in order.
    pub approvers: Vec<String>,
    /// Whether the caller is the plan's creator (their approval does not count).
    pub caller_is_creator: bool,
}

impl std::fmt::Display for ApprovalsNeeded {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let yours = if self.caller_is_creator {
            "your approval as the plan's creator does not count"
        } else {
            "your approval is recorded"
        };
        let plural = if self.need == 1 { "" } else { "s" };
        write!(
            f,
            "plan {} needs {} approval{plural} to apply ({yours}): {} of {} so far (apply.min_approvals of `{}`)",
            self.plan, self.need, self.have, self.need, self.org
        )
    }
}

/// Records the caller's approval of `plan`'s Apply and says whether the Apply may go ahead:
/// `need` approvals of humans other than the plan's creator (the policy of `org`). On one
/// machine nothing is recorded and nothing is asked.
///
/// # Errors
/// [`ApiError::ApprovalsNeeded`] while fewer than `need` humans approved (the caller's
/// approval stays recorded); store errors.
pub(super) fn approve(engine: &Engine, plan: &Id, org: &str, need: u32) -> Result<(), ApiError> {
    let Some(human) = engine.human() else {
        return Ok(());
    };
    let store = engine.store()?;
    let creator = store.attribution(plan)?.created_by;
    let caller_is_creator = creator.as_deref() == Some(human.as_str());
    if need == 0 || !caller_is_creator {
        store.approve_apply(plan)?;
    }
    if need == 0 {
        return Ok(());
    }
    let approvers: Vec<String> = store
        .attribution(plan)?
        .apply_approvals
        .into_iter()
        .map(|a| a.user)
        .filter(|u| Some(u) != creator.as_ref())
        .collect();
    let have = u32::try_from(approvers.len()).unwrap_or(u32::MAX);
    if have >= need {
        return Ok(());
    }
    Err(ApiError::ApprovalsNeeded(Box::new(ApprovalsNeeded {
        plan: *plan,
        org: org.to_string(),
        have,
        need,
        approvers,
        caller_is_creator,
    })))
}
