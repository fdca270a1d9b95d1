//! What driving a plan returns: the plan as it is now, why driving stopped and the events the
//! run committed. Every driver returns it (the plan driver [`super::driver`], a correction
//! that drives the plan on, a strategy revision), and the faces show it.

use serde::Serialize;

use crate::domain::Next;
use crate::domain::Plan;
use crate::domain::approval::Approval;
use crate::events::EngineEvent;

/// Why driving stopped.
#[derive(Debug, Clone, PartialEq, Serialize, serde::Deserialize, schemars::JsonSchema)]
#[serde(tag = "stopped", rename_all = "snake_case")]
pub enum Stopped {
    /// A phase gate waits for a human.
    Gate {
        /// The gate's approval.
        approval: Box<Approval>,
    },
    /// Decisions wait for a human.
    Decisions {
        /// The pending decision approvals.
        approvals: Vec<Approval>,
    },
    /// Nothing to do now (`plan execute` on a complete Execute).
    NothingToDo {
        /// The step that moves the plan on.
        next: Next,
    },
    /// The plan is applied.
    Applied,
    /// The plan was cancelled.
    Cancelled {
        /// The reason given.
        reason: Option<String>,
    },
    /// The plan errored.
    Errored {
        /// Error code.
        code: String,
        /// What failed.
        message: String,
    },
    /// The user pressed Ctrl-C; the plan is queued and resumable.
    Interrupted,
    /// Another process took the plan over (this one's lease went stale).
    LeaseLost,
}

/// The result of driving.
#[derive(Debug, Clone, Serialize, serde::Deserialize, schemars::JsonSchema)]
pub struct Driven {
    /// The plan as it is now.
    pub plan: Plan,
    /// Why driving stopped.
    pub stopped: Stopped,
    /// The events this run committed, in order.
    pub events: Vec<EngineEvent>,
}
