//! The roles a member holds in an organization (spec section 22), weakest first: each role
//! may do what the ones before it may.

use serde::{Deserialize, Serialize};

/// A member's role in an organization.
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
pub enum Role {
    /// Reads the organization's plans and items.
    Viewer,
    /// Also runs the organization's actions, reviews and corrects plans.
    Member,
    /// Also creates and edits items, registers and links resources, approves and applies.
    Maintainer,
    /// Also manages members and the organization's policy, and reads its audit log.
    Owner,
}

impl Role {
    /// Every role, weakest first.
    pub const ALL: [Role; 4] = [Role::Viewer, Role::Member, Role::Maintainer, Role::Owner];

    /// The role as it is written (`maintainer`).
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Viewer => "viewer",
            Role::Member => "member",
            Role::Maintainer => "maintainer",
            Role::Owner => "owner",
        }
    }

    /// Parses a role as written; `None` for anything else.
    pub fn parse(text: &str) -> Option<Role> {
        Role::ALL.into_iter().find(|r| r.as_str() == text)
    }
}

impl std::fmt::Display for Role {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn roles_are_ordered_weakest_first_and_read_back_as_written() {
        assert!(Role::Viewer < Role::Member && Role::Member < Role::Maintainer);
        assert!(Role::Maintainer < Role::Owner);
        for role in Role::ALL {
            assert_eq!(Role::parse(role.as_str()), Some(role));
        }
        assert_eq!(Role::parse("admin"), None);
    }
}
