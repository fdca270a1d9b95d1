//! Resources (spec section 23): namespaced things plans work on, and the edges between
//! them, as the store keeps them. Registering and discovering them lives in
//! `crate::registry::resources`.

use serde::Serialize;
use serde_json::{Map, Value};

use super::id::Id;

/// A registered resource.
#[derive(Debug, Clone, PartialEq, Serialize, serde::Deserialize, schemars::JsonSchema)]
pub struct Resource {
    /// Resource id (ULID).
    pub resource_id: Id,
    /// Namespaced name; discovered children append `:child` segments.
    pub name: String,
    /// Type name.
    pub type_name: String,
    /// Description.
    pub description: Option<String>,
    /// Type-specific properties (path, branch, url, counts).
    pub properties: Map<String, Value>,
    /// For discovered resources: the registered resource whose discovery created it.
    pub owner_id: Option<Id>,
    /// Registration time.
    pub created_at: jiff::Timestamp,
    /// Last change.
    pub updated_at: jiff::Timestamp,
}

/// A parent/child edge.
#[derive(Debug, Clone, PartialEq, Serialize, serde::Deserialize, schemars::JsonSchema)]
pub struct Edge {
    /// The other resource.
    pub resource: Resource,
    /// Created by discovery.
    pub auto: bool,
}
