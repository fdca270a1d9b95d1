//! The plan lifecycle (spec sections 08 and 27).
//!
//! A plan moves forward through [`Phase`]s `strategize -> execute -> apply -> applied`, one step
//! at a time and only when its [`ProcessingState`] is `complete`; `applied` is terminal. The only
//! backward moves are [`PlanStatus::rollback_to`] (to execute/queued, for a checkpoint
//! rollback) and [`PlanStatus::begin_attempt`] (attempt + 1, to strategize or execute queued,
//! for a correction). Both are refused for applied plans.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// The four phases of a plan, in order.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Hash,
    Serialize,
    Deserialize,
    schemars::JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum Phase {
    /// Deciding what to do; read-only by construction.
    Strategize,
    /// Doing it inside a sandbox.
    Execute,
    /// Reviewing, validating and merging into the real project.
    Apply,
    /// Terminal: the changes are in the project.
    Applied,
}

/// Where a plan is within its current phase.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ProcessingState {
    /// Waiting to be driven.
    Queued,
    /// Being driven by a process.
    Processing,
    /// Failed; error fields say why.
    Errored,
    /// The phase's work finished successfully.
    Complete,
    /// Cancelled by a user or the system.
    Cancelled,
}

macro_rules! str_enum {
    ($ty:ty { $($variant:ident => $text:literal),* $(,)? }) => {
        impl $ty {
            /// Every value, in order.
            pub const ALL: &'static [$ty] = &[$(<$ty>::$variant),*];
            /// The lowercase name used in storage and output.
            pub fn as_str(self) -> &'static str {
                match self { $(<$ty>::$variant => $text),* }
            }
        }
        impl fmt::Display for $ty {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.as_str())
            }
        }
        impl FromStr for $ty {
            type Err = String;
            fn from_str(s: &str) -> Result<Self, Self::Err> {
                match s {
                    $($text => Ok(<$ty>::$variant),)*
                    _ => Err(format!(
                        "`{s}` is not one of: {}",
                        [$($text),*].join(", ")
                    )),
                }
            }
        }
    };
}
pub(crate) use str_enum;

str_enum!(Phase { Strategize => "strategize", Execute => "execute", Apply => "apply", Applied => "applied" });
str_enum!(ProcessingState {
    Queued => "queued",
    Processing => "processing",
    Errored => "errored",
    Complete => "complete",
    Cancelled => "cancelled",
});

impl Phase {
    /// The phase after this one, if any.
    pub fn next(self) -> Option<Phase> {
        match self {
            Phase::Strategize => Some(Phase::Execute),
            Phase::Execute => Some(Phase::Apply),
            Phase::Apply => Some(Phase::Applied),
            Phase::Applied => None,
        }
    }
}

/// Whether a plan may move from `from` to `to`: exactly one phase forward.
pub fn can_transition(from: Phase, to: Phase) -> bool {
    from.next() == Some(to)
}

/// Why a lifecycle change was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LifecycleError {
    /// The phase move is not one step forward.
    #[error("a plan cannot move from {from} to {to}: phases only advance one step at a time")]
    InvalidTransition {
        /// Current phase.
        from: Phase,
        /// Requested phase.
        to: Phase,
    },
    /// The current phase's work has not completed.
    #[error("a plan in {phase}/{state} cannot advance: the {phase} phase must be complete first")]
    NotComplete {
        /// Current phase.
        phase: Phase,
        /// Current state.
        state: ProcessingState,
    },
    /// The plan is applied, which is terminal.
    #[error("the plan is applied, which is final; start a new plan instead")]
    Terminal,
    /// A correction may restart only strategize or execute.
    #[error("a new attempt can start only in strategize or execute, not {0}")]
    InvalidAttemptPhase(Phase),
    /// A state change that the state machine does not allow.
    #[error("a plan cannot change from {from} to {to} within a phase")]
    InvalidStateChange {
        /// Current state.
        from: ProcessingState,
        /// Requested state.
        to: ProcessingState,
    },
}

/// The lifecycle position of a plan: phase, state and attempt number (1-based).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct PlanStatus {
    /// Current phase.
    pub phase: Phase,
    /// State within the phase.
    pub state: ProcessingState,
    /// Attempt number, starting at 1; a correction begins the next attempt.
    pub attempt: u32,
}

impl Default for PlanStatus {
    fn default() -> Self {
        Self::new()
    }
}

impl PlanStatus {
    /// A new plan: strategize, queued, attempt 1.
    pub fn new() -> Self {
        Self {
            phase: Phase::Strategize,
            state: ProcessingState::Queued,
            attempt: 1,
        }
    }

    /// Whether the plan is finished for good (applied, or cancelled).
    pub fn is_terminal(&self) -> bool {
        self.phase == Phase::Applied || self.state == ProcessingState::Cancelled
    }

    /// Advances to the next phase, queued. Allowed only one step forward and only from
    /// `complete`. Moving into `applied` leaves the plan `complete`.
    ///
    /// # Errors
    /// [`LifecycleError::Terminal`], [`LifecycleError::InvalidTransition`] or
    /// [`LifecycleError::NotComplete`].
    pub fn advance(&mut self, to: Phase) -> Result<(), LifecycleError> {
        if self.phase == Phase::Applied {
            return Err(LifecycleError::Terminal);
        }
        if !can_transition(self.phase, to) {
            return Err(LifecycleError::InvalidTransition {
                from: self.phase,
                to,
            });
        }
        if self.state != ProcessingState::Complete {
            return Err(LifecycleError::NotComplete {
                phase: self.phase,
                state: self.state,
            });
        }
        self.phase = to;
        self.state = if to == Phase::Applied {
            ProcessingState::Complete
        } else {
            ProcessingState::Queued
        };
        Ok(())
    }

    /// Changes the state within the current phase.
    ///
    /// Allowed: queued -> processing | cancelled; processing -> queued (interrupted) | errored
    /// | complete | cancelled; errored -> queued | processing (resume) | cancelled;
    /// complete -> cancelled (before the next phase starts). Nothing leaves cancelled, and an
    /// applied plan never changes.
    ///
    /// # Errors
    /// [`LifecycleError::Terminal`] or [`LifecycleError::InvalidStateChange`].
    pub fn set_state(&mut self, to: ProcessingState) -> Result<(), LifecycleError> {
        use ProcessingState::*;
        if self.phase == Phase::Applied {
            return Err(LifecycleError::Terminal);
        }
        let ok = matches!(
            (self.state, to),
            (Queued, Processing | Cancelled)
                | (Processing, Queued | Errored | Complete | Cancelled)
                | (Errored, Queued | Processing | Cancelled)
                | (Complete, Cancelled)
        );
        if !ok {
            return Err(LifecycleError::InvalidStateChange {
                from: self.state,
                to,
            });
        }
        self.state = to;
        Ok(())
    }

    /// Rolls the plan back to a checkpoint: it returns to execute/queued, whatever phase it was
    /// in. Refused for applied plans.
    ///
    /// # Errors
    /// [`LifecycleError::Terminal`].
    pub fn rollback_to(&mut self) -> Result<(), LifecycleError> {
        if self.phase == Phase::Applied {
            return Err(LifecycleError::Terminal);
        }
        self.phase = Phase::Execute;
        self.state = ProcessingState::Queued;
        Ok(())
    }

    /// Starts the next attempt (a correction): attempt + 1, `phase` (strategize or execute),
    /// queued. Refused for applied plans.
    ///
    /// # Errors
    /// [`LifecycleError::Terminal`] or [`LifecycleError::InvalidAttemptPhase`].
    pub fn begin_attempt(&mut self, phase: Phase) -> Result<(), LifecycleError> {
        if self.phase == Phase::Applied {
            return Err(LifecycleError::Terminal);
        }
        if !matches!(phase, Phase::Strategize | Phase::Execute) {
            return Err(LifecycleError::InvalidAttemptPhase(phase));
        }
        self.attempt += 1;
        self.phase = phase;
        self.state = ProcessingState::Queued;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn only_one_step_forward_is_a_transition() {
        assert!(can_transition(Phase::Strategize, Phase::Execute));
        assert!(can_transition(Phase::Execute, Phase::Apply));
        assert!(can_transition(Phase::Apply, Phase::Applied));
        assert!(!can_transition(Phase::Strategize, Phase::Apply));
        assert!(!can_transition(Phase::Execute, Phase::Strategize));
        assert!(!can_transition(Phase::Applied, Phase::Applied));
    }

    #[test]
    fn a_plan_walks_the_whole_lifecycle() {
        let mut s = PlanStatus::new();
        for to in [Phase::Execute, Phase::Apply, Phase::Applied] {
            s.set_state(ProcessingState::Processing).unwrap();
            s.set_state(ProcessingState::Complete).unwrap();
            s.advance(to).unwrap();
        }
        assert_eq!(
            (s.phase, s.state),
            (Phase::Applied, ProcessingState::Complete)
        );
        assert!(s.is_terminal());
        assert_eq!(s.advance(Phase::Applied), Err(LifecycleError::Terminal));
        assert_eq!(s.rollback_to(), Err(LifecycleError::Terminal));
        assert_eq!(
            s.begin_attempt(Phase::Strategize),
            Err(LifecycleError::Terminal)
        );
    }

    #[test]
    fn advancing_needs_a_complete_phase() {
        let mut s = PlanStatus::new();
        assert_eq!(
            s.advance(Phase::Execute),
            Err(LifecycleError::NotComplete {
                phase: Phase::Strategize,
                state: ProcessingState::Queued
            })
        );
    }

    #[test]
    fn begin_attempt_increments_and_requeues() {
        let mut s = PlanStatus {
            phase: Phase::Apply,
            state: ProcessingState::Errored,
            attempt: 1,
        };
        s.begin_attempt(Phase::Execute).unwrap();
        assert_eq!(
            s,
            PlanStatus {
                phase: Phase::Execute,
                state: ProcessingState::Queued,
                attempt: 2
            }
        );
        assert_eq!(
            s.begin_attempt(Phase::Apply),
            Err(LifecycleError::InvalidAttemptPhase(Phase::Apply))
        );
    }

    #[test]
    fn names_round_trip() {
        for p in Phase::ALL {
            assert_eq!(p.as_str().parse::<Phase>().unwrap(), *p);
        }
        for s in ProcessingState::ALL {
            assert_eq!(s.as_str().parse::<ProcessingState>().unwrap(), *s);
        }
        assert!(
            "done"
                .parse::<ProcessingState>()
                .unwrap_err()
                .contains("queued")
        );
    }

    #[derive(Debug, Clone)]
    enum Step {
        Advance(Phase),
        SetState(ProcessingState),
        Rollback,
        Attempt(Phase),
    }

    fn step() -> impl Strategy<Value = Step> {
        let phase = proptest::sample::select(Phase::ALL.to_vec());
        let state = proptest::sample::select(ProcessingState::ALL.to_vec());
        prop_oneof![
            phase.clone().prop_map(Step::Advance),
            state.prop_map(Step::SetState),
            Just(Step::Rollback),
            phase.prop_map(Step::Attempt),
        ]
    }

    proptest! {
        /// Whatever sequence of operations is attempted, every accepted change obeys the rules:
        /// phases move one step forward from complete, or backward only through rollback or a
        /// new attempt; applied never changes; attempts only grow.
        #[test]
        fn accepted_changes_always_obey_the_rules(steps in proptest::collection::vec(step(), 0..60)) {
            let mut s = PlanStatus::new();
            for step in steps {
                let before = s;
                let result = match step.clone() {
                    Step::Advance(to) => s.advance(to),
                    Step::SetState(to) => s.set_state(to),
                    Step::Rollback => s.rollback_to(),
                    Step::Attempt(p) => s.begin_attempt(p),
                };
                if before.phase == Phase::Applied {
                    prop_assert!(result.is_err());
                }
                if result.is_err() {
                    prop_assert_eq!(s, before, "a refused change must not alter the status");
                    continue;
                }
                prop_assert!(s.attempt >= before.attempt);
                match step {
                    Step::Advance(to) => {
                        prop_assert_eq!(before.state, ProcessingState::Complete);
                        prop_assert!(can_transition(before.phase, to));
                    }
                    Step::SetState(_) => prop_assert_eq!(s.phase, before.phase),
                    Step::Rollback => prop_assert_eq!((s.phase, s.state), (Phase::Execute, ProcessingState::Queued)),
                    Step::Attempt(_) => prop_assert_eq!(s.attempt, before.attempt + 1),
                }
                if s.phase < before.phase {
                    prop_assert!(matches!(step, Step::Rollback | Step::Attempt(_)));
                }
            }
        }
    }
}
