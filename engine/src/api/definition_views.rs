//! Definition reads (spec sections 09, 14, 16-18): the list and show of actions, actors, automation profiles, tools and skills.
//!
//! One family of calls of the protocol ([`Request::Definition`]): its requests,
//! its views, how an [`Engine`] answers them and the typed calls on a [`Client`].

use serde::{Deserialize, Serialize};

use super::protocol::{self, Request, Response};
use super::{ApiError, Client, Engine};

/// One call of this family.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(tag = "query", rename_all = "snake_case")]
pub enum DefinitionQuery {
    /// Every action. Not answered yet.
    Actions,
}

impl DefinitionQuery {
    /// The call's name as the protocol spells it.
    pub fn name(&self) -> &'static str {
        match self {
            DefinitionQuery::Actions => "actions",
        }
    }
}

/// The answer to a [`DefinitionQuery`], one variant per call.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(tag = "kind", content = "view", rename_all = "snake_case")]
pub enum DefinitionView {
    /// Placeholder until the first call of the family is answered.
    Nothing,
}

/// Answers `request` on `engine`.
///
/// # Errors
/// [`ApiError`] as each call documents.
pub(crate) fn answer(
    _engine: &Engine,
    request: DefinitionQuery,
) -> Result<DefinitionView, ApiError> {
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
    fn definition_call(&self, request: DefinitionQuery) -> Result<DefinitionView, ApiError> {
        let asked = Request::Definition(request);
        protocol::expect(asked.name(), self.call(asked)?, |r| match r {
            Response::Definition(v) => Ok(*v),
            other => Err(other),
        })
    }
}
