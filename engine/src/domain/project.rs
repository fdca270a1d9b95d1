//! Projects (spec section 14): the boundary a plan works within, its linked resources and
//! validations, as the store keeps them. Creating and editing them lives in
//! `crate::registry::projects`.

use serde::Serialize;

use super::id::Id;
use super::resource::Resource;

/// A project.
#[derive(Debug, Clone, PartialEq, Serialize, serde::Deserialize, schemars::JsonSchema)]
pub struct Project {
    /// Project id (ULID).
    pub project_id: Id,
    /// Namespaced name.
    pub name: String,
    /// Description.
    pub description: Option<String>,
    /// Invariant reconciliation actor for plans targeting this project.
    pub invariant_actor: Option<String>,
    /// Automation profile for plans targeting this project (`None`: inherits global).
    pub automation_profile: Option<String>,
    /// Creation time.
    pub created_at: jiff::Timestamp,
    /// Last change.
    pub updated_at: jiff::Timestamp,
}

/// A resource linked to a project.
#[derive(Debug, Clone, PartialEq, Serialize, serde::Deserialize, schemars::JsonSchema)]
pub struct LinkedResource {
    /// The resource.
    pub resource: Resource,
    /// Short name within the project.
    pub alias: Option<String>,
    /// Read-only within this project.
    pub read_only: bool,
}

/// A validation command.
#[derive(Debug, Clone, PartialEq, Serialize, serde::Deserialize, schemars::JsonSchema)]
pub struct Validation {
    /// `val_<ULID>`.
    pub validation_id: String,
    /// Project name.
    pub project: String,
    /// Shell command.
    pub command: String,
    /// What it checks.
    pub description: Option<String>,
    /// Required (blocks on failure) or informational.
    pub required: bool,
    /// Timeout in seconds.
    pub timeout_secs: u64,
    /// Resource it is scoped to (name), if any.
    pub resource: Option<String>,
    /// Runs with the host network (else in a network namespace with only loopback, where
    /// tests may still listen on 127.0.0.1).
    pub network: bool,
    /// When it was added.
    pub created_at: jiff::Timestamp,
}
