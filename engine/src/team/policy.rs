//! An organization's policy (spec section 22, "Approval Gates by Phase"; spec 21, "permission
//! boundaries"): rules the server enforces on every plan of the organization's namespace,
//! which no client setting can widen.

use serde::{Deserialize, Serialize};

/// Why a policy refused a call.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct PolicyDenial {
    /// The organization whose policy refused.
    pub org: String,
    /// The policy's key (`network`, `profiles.allowed`, `apply.min_approvals`, ...).
    pub key: String,
    /// What was refused and what the policy allows.
    pub message: String,
}

impl std::fmt::Display for PolicyDenial {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "the policy of `{}` refuses this ({}): {}",
            self.org, self.key, self.message
        )
    }
}
