//! The domain model (spec sections 08 and 27): ids, namespaced names, the plan
//! lifecycle and the plan record.

pub mod action;
pub mod actor;
pub mod apply;
pub mod approval;
pub mod budget;
pub mod check;
pub mod decision;
pub mod event;
pub mod id;
pub mod index;
pub mod invariant;
pub mod lifecycle;
pub mod limits;
pub mod messages;
pub mod name;
pub mod next;
pub mod plan;
pub mod profile;
pub mod project;
pub mod resource;
pub mod sandbox;
pub mod tool_call;
pub mod tool_host;

pub use action::ActionState;
pub use approval::{Approval, ApprovalKind, ApprovalStatus};
pub use decision::{Decision, DecisionType, Step};
pub use id::{Id, IdPrefixError, resolve_prefix};
pub use lifecycle::{LifecycleError, Phase, PlanStatus, ProcessingState, can_transition};
pub use name::{NameError, QualifiedName};
pub use next::{CorrectionMode, Next};
pub use plan::{AutomationLevel, InvariantScope, Plan, PlanInvariant, ProjectLink};
