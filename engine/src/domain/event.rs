//! The event record of the event log: the kinds of stored event, their payloads and one
//! event as stored and streamed. Writing and reading the log is [`crate::store::events`].
//!
//! A stored row is `{"seq", "ts", "plan_id", "type", "data"}`; [`EventKind`] is `type` and
//! `data` together (adjacently tagged), each kind with its payload struct ([`payload`],
//! [`state`]). A row whose `data` does not fit its kind's payload (written by another
//! version) reads as [`EventKind::Raw`] and serialises back unchanged.

pub mod payload;
pub mod state;

use std::fmt;
use std::str::FromStr;

use jiff::Timestamp;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::id::Id;
use super::lifecycle::str_enum;

pub use payload::*;
pub use state::StateChanged;

/// The kinds of event, named as spec section 27 names them: the `type` of a row, for
/// queries that filter by it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum EventType {
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
    /// A plan's sandbox was exported as a branch or a patch.
    PlanExported,
    /// Items of a plan's review were marked.
    ReviewMarked,
    /// A plan's sandbox was released or removed.
    SandboxCleaned,
    /// A registry item was added, changed or removed (no plan).
    RegistryChanged,
}

str_enum!(EventType {
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
    PlanExported => "plan_exported",
    ReviewMarked => "review_marked",
    SandboxCleaned => "sandbox_cleaned",
    RegistryChanged => "registry_changed",
});

/// What happened: the kind of event with its payload, stored as `type` and `data`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(tag = "type", content = "data", rename_all = "snake_case")]
pub enum EventKind {
    /// A plan was created by `plan use`.
    PlanCreated(PlanCreated),
    /// Strategize began.
    StrategizeStarted(StrategizeStarted),
    /// Strategize recorded decisions.
    StrategizeDecisions(StrategizeDecisions),
    /// Strategize finished.
    StrategizeComplete(StrategizeComplete),
    /// The plan's model estimation actor gave its estimate (or the built-in's stood in).
    EstimateRecorded(EstimateRecorded),
    /// Execute began.
    ExecuteStarted(ExecuteStarted),
    /// Execute began or finished one step (one executable decision).
    ExecuteStep(ExecuteStep),
    /// Execute finished.
    ExecuteComplete(ExecuteComplete),
    /// Apply began.
    ApplyStarted(ApplyStarted),
    /// Apply finished: the changes are in the project.
    ApplyComplete(ApplyComplete),
    /// A human must act.
    ApprovalRequested(ApprovalRequested),
    /// A human acted (or the approval was withdrawn).
    ApprovalResolved(ApprovalResolved),
    /// The plan errored.
    PlanErrored(PlanErrored),
    /// The plan was cancelled.
    PlanCancelled(PlanCancelled),
    /// The driving process vanished; the plan was re-queued.
    PlanInterrupted(PlanInterrupted),
    /// Phase or state changed in a way no other kind describes.
    StateChanged(StateChanged),
    /// A spawn step created a child plan (on the parent).
    ChildSpawned(ChildSpawned),
    /// A child plan started running (on the parent).
    ChildStarted(ChildStarted),
    /// A child plan's run ended: succeeded, failed or cancelled (on the parent).
    ChildFinished(ChildFinished),
    /// A child plan's results were merged into the parent's sandbox, or conflicted (on the
    /// parent).
    ChildMerged(ChildMerged),
    /// The plan's effective invariants were checked after a step or before Apply (what was
    /// checked, how, and what was not machine-checked).
    InvariantChecked(InvariantChecked),
    /// An invariant did not hold; an `invariant_violation` approval stops the plan.
    InvariantViolated(InvariantViolated),
    /// A plan's sandbox was exported as a branch or a patch.
    PlanExported(PlanExported),
    /// Items of a plan's review were marked.
    ReviewMarked(ReviewMarked),
    /// A plan's sandbox was released or removed.
    SandboxCleaned(SandboxCleaned),
    /// A registry item was added, changed or removed (no plan).
    RegistryChanged(RegistryChanged),
    /// A row whose `data` does not fit its kind's payload (an older or newer writer): kept as
    /// stored, so reading the log never fails on it.
    #[serde(untagged)]
    Raw(RawEvent),
}

/// A stored event whose payload could not be typed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct RawEvent {
    /// The row's `type`.
    #[serde(rename = "type")]
    pub event_type: EventType,
    /// The row's `data`, as stored.
    pub data: Value,
}

impl EventKind {
    /// The kind's `type` (as stored in the `type` column).
    pub fn event_type(&self) -> EventType {
        match self {
            Self::PlanCreated(_) => EventType::PlanCreated,
            Self::StrategizeStarted(_) => EventType::StrategizeStarted,
            Self::StrategizeDecisions(_) => EventType::StrategizeDecisions,
            Self::StrategizeComplete(_) => EventType::StrategizeComplete,
            Self::EstimateRecorded(_) => EventType::EstimateRecorded,
            Self::ExecuteStarted(_) => EventType::ExecuteStarted,
            Self::ExecuteStep(_) => EventType::ExecuteStep,
            Self::ExecuteComplete(_) => EventType::ExecuteComplete,
            Self::ApplyStarted(_) => EventType::ApplyStarted,
            Self::ApplyComplete(_) => EventType::ApplyComplete,
            Self::ApprovalRequested(_) => EventType::ApprovalRequested,
            Self::ApprovalResolved(_) => EventType::ApprovalResolved,
            Self::PlanErrored(_) => EventType::PlanErrored,
            Self::PlanCancelled(_) => EventType::PlanCancelled,
            Self::PlanInterrupted(_) => EventType::PlanInterrupted,
            Self::StateChanged(_) => EventType::StateChanged,
            Self::ChildSpawned(_) => EventType::ChildSpawned,
            Self::ChildStarted(_) => EventType::ChildStarted,
            Self::ChildFinished(_) => EventType::ChildFinished,
            Self::ChildMerged(_) => EventType::ChildMerged,
            Self::InvariantChecked(_) => EventType::InvariantChecked,
            Self::InvariantViolated(_) => EventType::InvariantViolated,
            Self::PlanExported(_) => EventType::PlanExported,
            Self::ReviewMarked(_) => EventType::ReviewMarked,
            Self::SandboxCleaned(_) => EventType::SandboxCleaned,
            Self::RegistryChanged(_) => EventType::RegistryChanged,
            Self::Raw(r) => r.event_type,
        }
    }

    /// The step an event is about (an `execute_step`, an invariant check after a step, a
    /// step that paused), by its label.
    pub fn step(&self) -> Option<&str> {
        match self {
            Self::ExecuteStep(p) => Some(&p.step),
            Self::InvariantChecked(p) => Some(&p.step),
            Self::InvariantViolated(p) => Some(&p.step),
            Self::StateChanged(StateChanged::Transition(t)) => t.step.as_deref(),
            Self::Raw(r) => r.data.get("step").and_then(Value::as_str),
            _ => None,
        }
    }

    /// The payload as the `data` JSON object stored for it.
    pub fn data(&self) -> Value {
        match serde_json::to_value(self) {
            Ok(Value::Object(mut m)) => m.remove("data").unwrap_or(Value::Null),
            _ => Value::Null,
        }
    }

    /// The event of a stored row: `data` typed by `event_type`, or [`EventKind::Raw`] when it
    /// does not fit.
    pub fn from_stored(event_type: EventType, data: Value) -> Self {
        let row = serde_json::json!({"type": event_type.as_str(), "data": &data});
        serde_json::from_value(row).unwrap_or(Self::Raw(RawEvent { event_type, data }))
    }
}

/// One event, as stored and as streamed (`--stream` prints these as JSON Lines).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct EngineEvent {
    /// Global sequence number, increasing.
    pub seq: i64,
    /// When it happened (RFC 3339 UTC).
    pub ts: Timestamp,
    /// The plan concerned, if any.
    pub plan_id: Option<Id>,
    /// What happened, with its details (`type` and `data`).
    #[serde(flatten)]
    pub kind: EventKind,
    /// The human whose call caused it on a server (for an actor's work, the one who last
    /// started, resumed or approved the plan); `None` on one machine.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub caused_by: Option<String>,
}

#[cfg(test)]
mod tests;
