//! Invariants (spec section 12): the rules plans must keep, as the store keeps them.
//! Adding, listing and reconciling them lives in `crate::registry::invariants`.

use serde::Serialize;

use super::id::Id;
use super::plan::InvariantScope;

/// A registered invariant.
#[derive(Debug, Clone, PartialEq, Serialize, serde::Deserialize, schemars::JsonSchema)]
pub struct Invariant {
    /// `inv_<ULID>`.
    pub invariant_id: String,
    /// The constraint as written.
    pub text: String,
    /// Explicit conflict key, if any.
    pub key: Option<String>,
    /// Scope. Rows an action carried into a plan have scope `action` and a `plan_id`.
    pub scope: InvariantScope,
    /// Project name (project scope).
    pub project: Option<String>,
    /// Action name (action scope, also for carried rows).
    pub action: Option<String>,
    /// Plan id (plan scope, and action invariants carried into a plan).
    pub plan_id: Option<Id>,
    /// When it was added.
    pub created_at: jiff::Timestamp,
    /// Insertion order in the registry (ties within one timestamp keep this order).
    #[serde(skip)]
    pub seq: i64,
}

/// The form used to find duplicates: lowercase, whitespace collapsed, final `.`/`!`/`;`
/// and surrounding whitespace removed.
pub fn normalize(text: &str) -> String {
    let collapsed = text
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
        .to_lowercase();
    collapsed.trim_end_matches(['.', '!', ';', ' ']).to_string()
}

/// A row to insert.
#[derive(Debug, Clone)]
pub struct NewInvariant {
    /// Id.
    pub invariant_id: String,
    /// Text.
    pub text: String,
    /// Key.
    pub key: Option<String>,
    /// Scope.
    pub scope: InvariantScope,
    /// Project id.
    pub project_id: Option<String>,
    /// Action id.
    pub action_id: Option<String>,
    /// Plan id.
    pub plan_id: Option<String>,
}
