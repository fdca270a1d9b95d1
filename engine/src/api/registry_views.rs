//! Registry reads (spec sections 05-08): resources, resource types, projects and invariants (list and show), the resolved configuration, the diagnostics and the code index.
//!
//! One family of calls of the protocol ([`Request::Registry`]): its requests,
//! its views, how an [`Engine`] answers them and the typed calls on a [`Client`].

use serde::{Deserialize, Serialize};

use super::protocol::{self, Request, Response};
use super::{ApiError, Client, Engine};

/// One call of this family.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(tag = "query", rename_all = "snake_case")]
pub enum RegistryQuery {
    /// Every registered resource. Not answered yet.
    Resources,
}

impl RegistryQuery {
    /// The call's name as the protocol spells it.
    pub fn name(&self) -> &'static str {
        match self {
            RegistryQuery::Resources => "resources",
        }
    }
}

/// The answer to a [`RegistryQuery`], one variant per call.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(tag = "kind", content = "view", rename_all = "snake_case")]
pub enum RegistryView {
    /// Placeholder until the first call of the family is answered.
    Nothing,
}

/// Answers `request` on `engine`.
///
/// # Errors
/// [`ApiError`] as each call documents.
pub(crate) fn answer(_engine: &Engine, request: RegistryQuery) -> Result<RegistryView, ApiError> {
    Err(ApiError::NotSupported {
        what: format!("the `{}` call", request.name()),
    })
}

impl dyn Client + '_ {
    /// Sends one call of this family and takes its view.
    #[expect(
        dead_code,
        reason = "the family's typed calls use it once they are answered"
    )]
    fn registry_call(&self, request: RegistryQuery) -> Result<RegistryView, ApiError> {
        let asked = Request::Registry(request);
        protocol::expect(asked.name(), self.call(asked)?, |r| match r {
            Response::Registry(v) => Ok(*v),
            other => Err(other),
        })
    }
}
