//! The phase transition table (spec sections 08-13): for a plan at (phase, state) and what
//! its driver was asked to do, which piece of work comes next. Every driver reads it: the
//! plan driver ([`super::driver::drive`], for `plan execute`, `plan apply` and what the
//! profile allows by itself) and a spawn step's child runner. The drivers add what the table
//! does not know: gates and their approvals, questions waiting for a human, errors to report.
//!
//! | phase, state | Continue | Execute | Apply | Child |
//! |---|---|---|---|---|
//! | any, cancelled | cancelled | cancelled | cancelled | cancelled |
//! | any, processing | refused | refused | refused | refused |
//! | strategize, queued or errored | strategize | strategize | refused | strategize |
//! | strategize, complete | enter execute | enter execute | refused | enter execute |
//! | execute, queued or errored | resume execute | resume execute | refused | resume execute |
//! | execute, complete | enter apply | execute done | enter apply | execute done |
//! | apply, queued or errored | resume apply | refused | resume apply | refused |
//! | apply, complete | refused | refused | refused | refused |
//! | applied, any but cancelled | applied | refused | refused | refused |

use serde::Serialize;

use crate::domain::{Phase, ProcessingState};

/// What a driver was asked to do.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Drive {
    /// Go on as far as the profile allows without a human (also every turn of a driver after
    /// its first).
    Continue,
    /// `plan execute`: Strategize and Execute, never Apply.
    Execute,
    /// `plan apply`: Apply a plan whose Execute is complete.
    Apply,
    /// A spawn step running its child to the end of the child's Execute.
    Child,
}

impl Drive {
    /// Every operation, in order.
    pub const ALL: [Drive; 4] = [Drive::Continue, Drive::Execute, Drive::Apply, Drive::Child];
}

/// The work that comes next.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Work {
    /// Run (or run again) Strategize.
    Strategize,
    /// Strategize is complete: enter Execute (behind the execute gate).
    EnterExecute,
    /// Resume Execute where it stopped.
    ResumeExecute,
    /// Execute is complete and this driver goes no further.
    ExecuteDone,
    /// Execute is complete: enter Apply (behind the apply gate).
    EnterApply,
    /// Resume an Apply that did not finish.
    ResumeApply,
    /// Terminal: the plan is applied.
    Applied,
    /// Terminal: the plan is cancelled.
    Cancelled,
    /// The operation does not fit the plan's state.
    Refused,
}

/// The work after (`phase`, `state`) for `drive` (see the module's table).
pub fn next(phase: Phase, state: ProcessingState, drive: Drive) -> Work {
    use Drive as D;
    use Phase as P;
    use ProcessingState as S;
    match (phase, state, drive) {
        (_, S::Cancelled, _) => Work::Cancelled,
        (_, S::Processing, _) => Work::Refused,
        (P::Strategize, S::Queued | S::Errored, D::Apply) => Work::Refused,
        (P::Strategize, S::Queued | S::Errored, _) => Work::Strategize,
        (P::Strategize, S::Complete, D::Apply) => Work::Refused,
        (P::Strategize, S::Complete, _) => Work::EnterExecute,
        (P::Execute, S::Queued | S::Errored, D::Apply) => Work::Refused,
        (P::Execute, S::Queued | S::Errored, _) => Work::ResumeExecute,
        (P::Execute, S::Complete, D::Execute | D::Child) => Work::ExecuteDone,
        (P::Execute, S::Complete, D::Continue | D::Apply) => Work::EnterApply,
        (P::Apply, S::Queued | S::Errored, D::Continue | D::Apply) => Work::ResumeApply,
        (P::Apply, S::Queued | S::Errored, D::Execute | D::Child) => Work::Refused,
        (P::Apply, S::Complete, _) => Work::Refused,
        (P::Applied, _, D::Continue) => Work::Applied,
        (P::Applied, _, D::Execute | D::Apply | D::Child) => Work::Refused,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The module's table, row by row, as data: every phase x state x operation.
    fn expected(phase: Phase, state: ProcessingState, drive: Drive) -> Work {
        use Work as N;
        let col = Drive::ALL.iter().position(|d| *d == drive).unwrap();
        let row: [N; 4] = match (phase, state) {
            (_, ProcessingState::Cancelled) => [N::Cancelled; 4],
            (_, ProcessingState::Processing) => [N::Refused; 4],
            (Phase::Strategize, ProcessingState::Queued | ProcessingState::Errored) => {
                [N::Strategize, N::Strategize, N::Refused, N::Strategize]
            }
            (Phase::Strategize, ProcessingState::Complete) => [
                N::EnterExecute,
                N::EnterExecute,
                N::Refused,
                N::EnterExecute,
            ],
            (Phase::Execute, ProcessingState::Queued | ProcessingState::Errored) => [
                N::ResumeExecute,
                N::ResumeExecute,
                N::Refused,
                N::ResumeExecute,
            ],
            (Phase::Execute, ProcessingState::Complete) => {
                [N::EnterApply, N::ExecuteDone, N::EnterApply, N::ExecuteDone]
            }
            (Phase::Apply, ProcessingState::Queued | ProcessingState::Errored) => {
                [N::ResumeApply, N::Refused, N::ResumeApply, N::Refused]
            }
            (Phase::Apply, ProcessingState::Complete) => [N::Refused; 4],
            (Phase::Applied, _) => [N::Applied, N::Refused, N::Refused, N::Refused],
        };
        row[col]
    }

    #[test]
    fn every_phase_state_and_operation_has_the_documented_next_step() {
        let mut cells = 0;
        for phase in Phase::ALL {
            for state in ProcessingState::ALL {
                for drive in Drive::ALL {
                    assert_eq!(
                        next(*phase, *state, drive),
                        expected(*phase, *state, drive),
                        "{phase}/{state} for {drive:?}"
                    );
                    cells += 1;
                }
            }
        }
        assert_eq!(cells, Phase::ALL.len() * ProcessingState::ALL.len() * 4);
    }

    #[test]
    fn only_apply_leaves_execute_for_apply_and_nothing_leaves_a_terminal_state() {
        for drive in Drive::ALL {
            let after_execute = next(Phase::Execute, ProcessingState::Complete, drive);
            assert_eq!(
                after_execute == Work::EnterApply,
                matches!(drive, Drive::Continue | Drive::Apply)
            );
            for phase in Phase::ALL {
                assert_eq!(
                    next(*phase, ProcessingState::Cancelled, drive),
                    Work::Cancelled
                );
            }
            assert!(matches!(
                next(Phase::Applied, ProcessingState::Complete, drive),
                Work::Applied | Work::Refused
            ));
        }
    }
}
