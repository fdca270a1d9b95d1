//! The engine's typed failures that an [`super::ApiError`] carries, re-exported so that a face
//! can render each with its own hints (the edge renders; the engine only types them).

pub use crate::lease::LeaseError;
pub use crate::lifecycle::RunError;
pub use crate::registry::actions::{ActionError, ArgumentError};
pub use crate::registry::actors::ActorError;
pub use crate::registry::invariants::InvariantError;
pub use crate::registry::lookup::Missing;
pub use crate::registry::plan_use::PlanUseError;
pub use crate::registry::profiles::ProfileError;
pub use crate::registry::projects::ProjectError;
pub use crate::registry::resources::ResourceError;
pub use crate::registry::tool_registration::RegisterError;
pub use crate::registry::yaml::YamlError;
pub use crate::review::ReviewError;
pub use crate::sandbox::SandboxError;
pub use crate::skill_registry::SkillRegError;
pub use crate::skills::SkillError;
pub use crate::store::StoreError;
pub use crate::system::InitError;
pub use crate::tools::runner::RunnerError;
