//! The domain model (spec section 08 and the plan-model seed): ids, namespaced names, the plan
//! lifecycle and the plan record.

pub mod action;
pub mod approval;
pub mod decision;
pub mod id;
pub mod lifecycle;
pub mod name;
pub mod plan;

pub use action::ActionState;
pub use approval::{Approval, ApprovalKind, ApprovalStatus};
pub use decision::{Decision, DecisionType, Step};
pub use id::{Id, IdPrefixError, resolve_prefix};
pub use lifecycle::{LifecycleError, Phase, PlanStatus, ProcessingState, can_transition};
pub use name::{NameError, QualifiedName};
pub use plan::{AutomationLevel, InvariantScope, Plan, PlanInvariant, ProjectLink};
