//! Team mode (spec sections 15, 21 and 22): the server's users and organizations, the roles
//! members hold in them, the principal every call carries and the one permission decision.

pub mod permissions;
pub mod policy;
pub mod principal;
pub mod roles;

pub use permissions::{Decision, Denial, Operation, Standing, decide};
pub use principal::{Credential, Principal};
pub use roles::Role;
