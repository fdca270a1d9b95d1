//! The one permission decision (spec section 22): what a caller may do to a target, from the
//! role they hold in the target's namespace and any restriction on the target. Every call a
//! server answers is decided here; the caller's standing is worked out by the engine from the
//! records, so this function reads nothing and is tested as a table.

use serde::{Deserialize, Serialize};

use super::{Principal, Role};

/// The namespace a refusal names for what only the server's administrators may do.
pub const SERVER: &str = "(server)";

/// What a caller asks to do.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Operation {
    /// Read a plan: its status, events, decisions, diff and review.
    ReadPlan,
    /// Read a namespace's items (actions, actors, tools, skills, resources, projects).
    ReadItem,
    /// Create an item in a namespace (layer 1).
    CreateItem,
    /// Change or remove an item of a namespace (layer 1).
    EditItem,
    /// Make a plan from a namespace's action, or on its project (layer 1: who can run).
    RunAction,
    /// Register, change or remove a resource (layer 5).
    RegisterResource,
    /// Link a resource to a project or unlink it (layers 2 and 5).
    LinkResource,
    /// Make a plan use a skill (layers 3 and 4).
    UseSkill,
    /// Drive a plan: execute, answer a decision, prompt, roll back.
    DrivePlan,
    /// Mark a plan's hunks and files.
    Review,
    /// Correct a decision.
    Correct,
    /// Cancel or reject a plan.
    Cancel,
    /// Approve a plan's phase gate (layer 3).
    Approve,
    /// Apply a plan's changes to its resources (layer 2).
    Apply,
    /// Set an organization's policy.
    ChangePolicy,
    /// Add, change or remove an organization's members.
    ManageMembers,
    /// Read an organization's audit log.
    ReadAudit,
    /// Add users and organizations, issue other users' tokens.
    ManageServer,
}

impl Operation {
    /// Every operation, in the order of the permission table in `docs/server.md`.
    pub const ALL: [Operation; 18] = [
        Operation::ReadPlan,
        Operation::ReadItem,
        Operation::CreateItem,
        Operation::EditItem,
        Operation::RunAction,
        Operation::RegisterResource,
        Operation::LinkResource,
        Operation::UseSkill,
        Operation::DrivePlan,
        Operation::Review,
        Operation::Correct,
        Operation::Cancel,
        Operation::Approve,
        Operation::Apply,
        Operation::ChangePolicy,
        Operation::ManageMembers,
        Operation::ReadAudit,
        Operation::ManageServer,
    ];

    /// The least role that may do this; `None`: server administrators only.
    pub fn least_role(self) -> Option<Role> {
        use Operation as O;
        match self {
            O::ReadPlan | O::ReadItem => Some(Role::Viewer),
            O::RunAction | O::UseSkill | O::DrivePlan | O::Review | O::Correct | O::Cancel => {
                Some(Role::Member)
            }
            O::CreateItem
            | O::EditItem
            | O::RegisterResource
            | O::LinkResource
            | O::Approve
            | O::Apply => Some(Role::Maintainer),
            O::ChangePolicy | O::ManageMembers | O::ReadAudit => Some(Role::Owner),
            O::ManageServer => None,
        }
    }

    /// How the operation is said in a denial (`approve a plan`).
    pub fn phrase(self) -> &'static str {
        use Operation as O;
        match self {
            O::ReadPlan => "read a plan",
            O::ReadItem => "read its items",
            O::CreateItem => "create an item",
            O::EditItem => "change or remove an item",
            O::RunAction => "run an action",
            O::RegisterResource => "register, change or remove a resource",
            O::LinkResource => "link a resource to a project",
            O::UseSkill => "use a skill",
            O::DrivePlan => "drive a plan",
            O::Review => "review a plan",
            O::Correct => "correct a plan",
            O::Cancel => "cancel or reject a plan",
            O::Approve => "approve a plan",
            O::Apply => "apply a plan",
            O::ChangePolicy => "change its policy",
            O::ManageMembers => "manage its members",
            O::ReadAudit => "read its audit log",
            O::ManageServer => "manage the server's users and organizations",
        }
    }

    /// Whether a restriction on the target ([`Standing::restricted_to`]) applies: reading
    /// is never restricted.
    fn restrictable(self) -> bool {
        !matches!(self, Operation::ReadPlan | Operation::ReadItem)
    }
}

/// The caller's standing toward one target, worked out from the records.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Standing {
    /// The namespace the target lives in (`acme`, `alice`, `local`).
    pub namespace: String,
    /// The caller's role there; `None` when they hold none.
    pub role: Option<Role>,
    /// The least role a restriction on the target asks for (an organization's restricted
    /// resource or skill), and the target it names.
    pub restricted_to: Option<(Role, String)>,
}

/// The answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// Go ahead.
    Allow,
    /// Refused, and why.
    Deny(Denial),
}

/// Why a call was refused, and what would allow it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Denial {
    /// Who asked.
    pub user: String,
    /// What they asked to do.
    pub operation: Operation,
    /// Where.
    pub namespace: String,
    /// The role they hold there.
    pub held: Option<Role>,
    /// The least role that would allow it; `None`: only a server administrator.
    pub needed: Option<Role>,
    /// The restricted resource or skill that raised the role needed.
    pub restricted: Option<String>,
    /// What was asked of the server, when only its administrators may (says it better than
    /// the operation).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub what: Option<String>,
}

impl std::fmt::Display for Denial {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.namespace == SERVER || self.needed.is_none() {
            let what = self.what.as_deref().unwrap_or(self.operation.phrase());
            return write!(
                f,
                "{} is not a server administrator; only one may {what}",
                self.user
            );
        }
        let held = match self.held {
            Some(role) => format!("is {} {role} of `{}`", article(role), self.namespace),
            None => format!("holds no role in `{}`", self.namespace),
        };
        let needed = match (self.needed, &self.restricted) {
            (None, _) => "a server administrator".to_string(),
            (Some(role), Some(what)) => format!("{role} or above (`{what}` is restricted)"),
            (Some(role), None) => format!("{role} or above"),
        };
        write!(
            f,
            "{} {held}; to {} there needs {needed}",
            self.user,
            self.operation.phrase()
        )
    }
}

fn article(role: Role) -> &'static str {
    match role {
        Role::Owner => "an",
        _ => "a",
    }
}

/// Whether `principal` may do `operation` to a target where it stands as `standing`.
/// Server administrators may do everything; anyone else needs at least the operation's role
/// in the target's namespace, raised to a restriction's role where one applies.
pub fn decide(principal: &Principal, operation: Operation, standing: &Standing) -> Decision {
    if principal.server_admin {
        return Decision::Allow;
    }
    let restriction = standing
        .restricted_to
        .as_ref()
        .filter(|_| operation.restrictable());
    let needed = match (operation.least_role(), restriction) {
        (None, _) => None,
        (Some(least), Some((raised, _))) => Some(least.max(*raised)),
        (Some(least), None) => Some(least),
    };
    let allowed = matches!((needed, standing.role), (Some(n), Some(held)) if held >= n);
    if allowed {
        return Decision::Allow;
    }
    Decision::Deny(Denial {
        user: principal.user.clone(),
        operation,
        namespace: standing.namespace.clone(),
        held: standing.role,
        needed,
        restricted: restriction
            .filter(|(raised, _)| Some(*raised) == needed && operation.least_role() < needed)
            .map(|(_, what)| what.clone()),
        what: None,
    })
}

/// The role `principal` holds in `namespace`, given the organizations it belongs to:
/// their own personal namespace and everything for a server administrator make an owner;
/// the server host's `local` namespace makes every user a member (its administrators write
/// it); the reserved namespaces (`builtin`, the providers') make every user a viewer; an
/// organization gives the member's role; another user's namespace gives none.
pub fn role_in(principal: &Principal, namespace: &str, memberships: &[(String, Role)]) -> Option<Role> {
    if principal.server_admin || namespace == principal.user {
        return Some(Role::Owner);
    }
    if namespace == crate::domain::name::LOCAL_NAMESPACE {
        return Some(Role::Member);
    }
    // The built-in items and the providers' models are everyone's to read.
    if crate::domain::name::RESERVED_NAMESPACES.contains(&namespace) {
        return Some(Role::Viewer);
    }
    memberships
        .iter()
        .find(|(org, _)| org == namespace)
        .map(|(_, role)| *role)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::team::Credential;

    fn user(name: &str) -> Principal {
        Principal {
            user: name.to_string(),
            server_admin: false,
            credential: Credential::Token {
                token_id: "tok_x".to_string(),
            },
            address: None,
        }
    }

    fn in_acme(role: Option<Role>) -> Standing {
        Standing {
            namespace: "acme".to_string(),
            role,
            restricted_to: None,
        }
    }

    /// Rows: operation, then whether a viewer, member, maintainer and owner may do it.
    const TABLE: [(Operation, [bool; 4]); 18] = {
        use Operation as O;
        [
            (O::ReadPlan, [true, true, true, true]),
            (O::ReadItem, [true, true, true, true]),
            (O::CreateItem, [false, false, true, true]),
            (O::EditItem, [false, false, true, true]),
            (O::RunAction, [false, true, true, true]),
            (O::RegisterResource, [false, false, true, true]),
            (O::LinkResource, [false, false, true, true]),
            (O::UseSkill, [false, true, true, true]),
            (O::DrivePlan, [false, true, true, true]),
            (O::Review, [false, true, true, true]),
            (O::Correct, [false, true, true, true]),
            (O::Cancel, [false, true, true, true]),
            (O::Approve, [false, false, true, true]),
            (O::Apply, [false, false, true, true]),
            (O::ChangePolicy, [false, false, false, true]),
            (O::ManageMembers, [false, false, false, true]),
            (O::ReadAudit, [false, false, false, true]),
            (O::ManageServer, [false, false, false, false]),
        ]
    };

    #[test]
    fn each_role_may_do_exactly_what_the_table_says() {
        for (operation, expected) in TABLE {
            for (role, allowed) in Role::ALL.into_iter().zip(expected) {
                let decision = decide(&user("ann"), operation, &in_acme(Some(role)));
                assert_eq!(
                    decision == Decision::Allow,
                    allowed,
                    "{role} {operation:?}: {decision:?}"
                );
            }
        }
    }

    #[test]
    fn the_table_covers_every_operation() {
        let covered: Vec<Operation> = TABLE.iter().map(|(o, _)| *o).collect();
        assert_eq!(covered, Operation::ALL);
    }

    #[test]
    fn someone_without_a_role_may_do_nothing_and_an_administrator_everything() {
        let admin = Principal {
            server_admin: true,
            ..user("root")
        };
        for operation in Operation::ALL {
            assert!(matches!(
                decide(&user("eve"), operation, &in_acme(None)),
                Decision::Deny(_)
            ));
            assert_eq!(decide(&admin, operation, &in_acme(None)), Decision::Allow);
        }
    }

    #[test]
    fn a_restriction_raises_the_role_needed_but_never_for_reading() {
        let restricted = Standing {
            restricted_to: Some((Role::Owner, "acme/prod-db".to_string())),
            ..in_acme(Some(Role::Maintainer))
        };
        let Decision::Deny(denial) = decide(&user("ann"), Operation::LinkResource, &restricted)
        else {
            panic!("a maintainer linked an owner-only resource");
        };
        assert_eq!(denial.needed, Some(Role::Owner));
        assert_eq!(denial.restricted.as_deref(), Some("acme/prod-db"));
        assert_eq!(
            denial.to_string(),
            "ann is a maintainer of `acme`; to link a resource to a project there needs owner or above (`acme/prod-db` is restricted)"
        );
        assert_eq!(
            decide(&user("ann"), Operation::ReadItem, &restricted),
            Decision::Allow
        );
    }

    #[test]
    fn a_user_owns_their_own_namespace_and_every_user_is_a_member_of_the_hosts() {
        let ann = user("ann");
        let orgs = vec![("acme".to_string(), Role::Viewer)];
        assert_eq!(role_in(&ann, "ann", &orgs), Some(Role::Owner));
        assert_eq!(role_in(&ann, "local", &orgs), Some(Role::Member));
        assert_eq!(role_in(&ann, "acme", &orgs), Some(Role::Viewer));
        assert_eq!(role_in(&ann, "bob", &orgs), None);
    }
}
