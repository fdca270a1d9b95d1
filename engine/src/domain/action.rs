//! Action states (spec section 09): actions are reusable definitions, separate from plans.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use super::lifecycle::str_enum;

/// The state of an action definition.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ActionState {
    /// Being written; not offered for `plan use` by default.
    Draft,
    /// Validated and usable.
    Available,
    /// Hidden from lists; existing plans are unchanged.
    Archived,
}

str_enum!(ActionState { Draft => "draft", Available => "available", Archived => "archived" });

impl ActionState {
    /// Whether an action may move from `self` to `to`: draft -> available, available ->
    /// archived, draft -> archived, and archived -> available (restoring an archived action).
    pub fn can_become(self, to: ActionState) -> bool {
        use ActionState::*;
        matches!(
            (self, to),
            (Draft, Available) | (Available, Archived) | (Draft, Archived) | (Archived, Available)
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn actions_never_return_to_draft() {
        for s in ActionState::ALL {
            assert!(!s.can_become(ActionState::Draft));
            assert!(!s.can_become(*s));
        }
        assert!(ActionState::Draft.can_become(ActionState::Available));
        assert!(ActionState::Available.can_become(ActionState::Archived));
    }
}
