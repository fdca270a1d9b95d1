//! How one run of a phase (Strategize, Execute, Apply) ended, for the driver that ran it.

use crate::domain::approval::Approval;

/// How a phase run ended.
#[derive(Debug, Clone, PartialEq)]
pub enum Ended {
    /// The phase is complete: Strategize recorded the decision tree, every Execute step and
    /// the required validations passed, or Apply put the changes in the project.
    Complete,
    /// Approvals wait for a human: decisions (`plan decide` / `plan reject`, or the execution
    /// actor's `request_decision`), a `child_spawn` or `tool_approval`, or an
    /// `invariant_violation` (before Apply nothing was written and the plan's phase and state
    /// are unchanged; during Execute the plan waits at (execute, queued)).
    Awaiting(Vec<Approval>),
    /// The phase failed (an actor, a step, a required validation, a check refusing the apply
    /// or a journal that could not be completed); the plan is errored.
    Errored {
        /// Error code.
        code: String,
        /// What failed.
        message: String,
    },
    /// The run was stopped (cancel, Ctrl-C, lost lease); the driver records which.
    Stopped,
}
