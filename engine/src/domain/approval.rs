//! Approvals: every place a human must act is a persisted row (spec section 27).

use std::fmt;
use std::str::FromStr;

use jiff::Timestamp;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::id::Id;
use super::lifecycle::str_enum;
use super::next::Next;

/// Why a plan waits for a human.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ApprovalKind {
    /// The profile stops before the next phase.
    PhaseGate,
    /// An actor offered options and the profile wants a human to choose.
    Decision,
    /// A child plan is about to be spawned.
    ChildSpawn,
    /// A provider failed transiently and the profile does not retry by itself.
    TransientFailure,
    /// The plan errored and needs guidance, a retry or cancellation.
    Errored,
    /// Work could not be combined (a child plan's results conflict with its parent's sandbox)
    /// and a human must choose how to recover.
    ErrorRecovery,
    /// The next model call would pass the plan's budget (`max-cost-usd`, `max-tokens`): a
    /// human raises the limit (`plan decide APR --max-cost-usd X`) or cancels.
    Budget,
    /// A tool call that needs a human's approval (`human_approval_required`, or an
    /// open-world MCP tool outside `full-auto`; spec section 18): approve runs it, reject
    /// returns a refusal to the model.
    ToolApproval,
    /// An effective invariant did not hold after a step or before Apply (spec section 12):
    /// accept once (the plan continues, the acceptance recorded), correct the step's decision
    /// (`plan correct`), or cancel. Raised under every profile.
    InvariantViolation,
}

str_enum!(ApprovalKind {
    PhaseGate => "phase_gate",
    Decision => "decision",
    ChildSpawn => "child_spawn",
    TransientFailure => "transient_failure",
    Errored => "errored",
    ErrorRecovery => "error_recovery",
    Budget => "budget",
    ToolApproval => "tool_approval",
    InvariantViolation => "invariant_violation",
});

/// Where an approval stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ApprovalStatus {
    /// Waiting for a human.
    Pending,
    /// Approved (gates, spawns, retries).
    Approved,
    /// Declined, with a reason.
    Rejected,
    /// Answered with an option or guidance.
    Answered,
    /// No longer relevant (the plan was cancelled or moved on).
    Withdrawn,
}

str_enum!(ApprovalStatus {
    Pending => "pending",
    Approved => "approved",
    Rejected => "rejected",
    Answered => "answered",
    Withdrawn => "withdrawn",
});

/// One approval.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Approval {
    /// `apr_` followed by a ULID.
    pub approval_id: String,
    /// The plan waiting.
    pub plan_id: Id,
    /// Why it waits.
    pub kind: ApprovalKind,
    /// Where it stands.
    pub status: ApprovalStatus,
    /// One line: what is being asked.
    pub summary: String,
    /// What the human needs to decide well (diff stats, the question, the error, ...).
    pub context: Value,
    /// The options, when the answer is a choice.
    pub options: Vec<String>,
    /// The answer, once given.
    pub answer: Option<Value>,
    /// When it was raised.
    pub created_at: Timestamp,
    /// When it was answered or withdrawn.
    pub resolved_at: Option<Timestamp>,
}

impl Approval {
    /// A new pending approval.
    pub fn new(
        plan_id: Id,
        kind: ApprovalKind,
        summary: impl Into<String>,
        now: Timestamp,
    ) -> Self {
        Self {
            approval_id: format!("apr_{}", Id::generate()),
            plan_id,
            kind,
            status: ApprovalStatus::Pending,
            summary: summary.into(),
            context: Value::Object(Default::default()),
            options: Vec::new(),
            answer: None,
            created_at: now,
            resolved_at: None,
        }
    }

    /// The step that answers it headlessly, from its kind: a phase gate runs the gated phase
    /// (`plan execute`, or `plan apply` for the apply gate); a decision takes an option by
    /// number; a child spawn spawns; an errored plan (also a transient failure or a merge
    /// conflict) is retried in its phase (`plan apply` at Apply, else `plan execute`); a
    /// budget takes a higher limit; a tool call is approved or rejected; an invariant
    /// violation is accepted. Derived rather than stored, so that rows of any schema version
    /// answer the same way.
    pub fn next(&self) -> Next {
        let id = self.approval_id.as_str();
        let plan = self.plan_id;
        let at_apply = |key: &str| self.context[key] == "apply";
        match self.kind {
            ApprovalKind::PhaseGate if at_apply("gate") => Next::ApplyPlan { plan },
            ApprovalKind::PhaseGate => Next::ExecutePlan { plan },
            ApprovalKind::Decision => Next::decide(id, "N"),
            ApprovalKind::ChildSpawn => Next::decide(id, "spawn"),
            ApprovalKind::TransientFailure
            | ApprovalKind::Errored
            | ApprovalKind::ErrorRecovery
                if at_apply("phase") =>
            {
                Next::ApplyPlan { plan }
            }
            ApprovalKind::TransientFailure
            | ApprovalKind::Errored
            | ApprovalKind::ErrorRecovery => Next::ExecutePlan { plan },
            ApprovalKind::Budget => Next::RaiseBudget {
                approval: id.to_string(),
            },
            ApprovalKind::ToolApproval => Next::either(
                Next::decide(id, "approve"),
                Next::Reject {
                    approval: id.to_string(),
                },
            ),
            ApprovalKind::InvariantViolation => Next::decide(id, "accept"),
        }
    }
}
