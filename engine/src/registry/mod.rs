//! Registries (spec sections 09, 12, 14, 16, 23, 27): what agents may touch (resources,
//! projects), reusable work (actions), who does it (actors), the constraints (invariants), how
//! much runs without a human (automation profiles), and creating a plan from them.
//!
//! Each module validates input and returns typed errors; persistence is in
//! [`crate::store`]. Nothing here knows about terminals.

pub mod actions;
pub mod actors;
pub mod custom_types;
pub mod invariant_form;
pub mod invariants;
pub mod lookup;
pub mod plan_use;
pub mod profiles;
pub mod projects;
pub mod resource_error;
pub mod resource_types;
pub mod resources;
pub mod template;
pub mod tool_registration;
pub mod yaml;

/// The current time, as stored.
pub(crate) fn now() -> jiff::Timestamp {
    jiff::Timestamp::now()
}
