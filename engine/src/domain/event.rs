//! The event record of the event log: the kinds of stored event and one
//! event as stored and streamed. Writing and reading the log is [`crate::store::events`].

use std::fmt;
use std::str::FromStr;

use jiff::Timestamp;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::id::Id;
use super::lifecycle::str_enum;

/// The kinds of event, named as the plan-executor seed names them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EventKind {
    /// A plan was created by `plan use`.
    PlanCreated,
    /// Strategize began.
    StrategizeStarted,
    /// Strategize recorded decisions.
    StrategizeDecisions,
    /// Strategize finished.
    StrategizeComplete,
    /// The plan's model estimation actor gave its estimate (or the built-in's stood in).
    EstimateRecorded,
    /// Execute began.
    ExecuteStarted,
    /// Execute began or finished one step (one executable decision).
    ExecuteStep,
    /// Execute finished.
    ExecuteComplete,
    /// Apply began.
    ApplyStarted,
    /// Apply finished: the changes are in the project.
    ApplyComplete,
    /// A human must act.
    ApprovalRequested,
    /// A human acted (or the approval was withdrawn).
    ApprovalResolved,
    /// The plan errored.
    PlanErrored,
    /// The plan was cancelled.
    PlanCancelled,
    /// The driving process vanished; the plan was re-queued.
    PlanInterrupted,
    /// Phase or state changed in a way no other kind describes.
    StateChanged,
    /// A spawn step created a child plan (on the parent).
    ChildSpawned,
    /// A child plan started running (on the parent).
    ChildStarted,
    /// A child plan's run ended: succeeded, failed or cancelled (on the parent).
    ChildFinished,
    /// A child plan's results were merged into the parent's sandbox, or conflicted (on the
    /// parent).
    ChildMerged,
    /// The plan's effective invariants were checked after a step or before Apply (what was
    /// checked, how, and what was not machine-checked).
    InvariantChecked,
    /// An invariant did not hold; an `invariant_violation` approval stops the plan.
    InvariantViolated,
}

str_enum!(EventKind {
    PlanCreated => "plan_created",
    StrategizeStarted => "strategize_started",
    StrategizeDecisions => "strategize_decisions",
    StrategizeComplete => "strategize_complete",
    EstimateRecorded => "estimate_recorded",
    ExecuteStarted => "execute_started",
    ExecuteStep => "execute_step",
    ExecuteComplete => "execute_complete",
    ApplyStarted => "apply_started",
    ApplyComplete => "apply_complete",
    ApprovalRequested => "approval_requested",
    ApprovalResolved => "approval_resolved",
    PlanErrored => "plan_errored",
    PlanCancelled => "plan_cancelled",
    PlanInterrupted => "plan_interrupted",
    StateChanged => "state_changed",
    ChildSpawned => "child_spawned",
    ChildStarted => "child_started",
    ChildFinished => "child_finished",
    ChildMerged => "child_merged",
    InvariantChecked => "invariant_checked",
    InvariantViolated => "invariant_violated",
});

/// One event, as stored and as streamed (`--stream` prints these as JSON Lines).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EngineEvent {
    /// Global sequence number, increasing.
    pub seq: i64,
    /// When it happened (RFC 3339 UTC).
    pub ts: Timestamp,
    /// The plan concerned, if any.
    pub plan_id: Option<Id>,
    /// What happened.
    #[serde(rename = "type")]
    pub kind: EventKind,
    /// Details; shape depends on the kind.
    pub data: Value,
}
