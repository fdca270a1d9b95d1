//! Sessions, child plans and actor runs (spec sections 19-20, 11): what the orchestrator conversation, `plan children` and `actor run` read and do, and the reads the TUI makes.
//!
//! One family of calls of the protocol ([`Request::Session`]): its requests,
//! its views, how an [`Engine`] answers them and the typed calls on a [`Client`].

use serde::{Deserialize, Serialize};

use super::protocol::{self, Request, Response};
use super::{ApiError, Client, Engine};

/// One call of this family.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(tag = "query", rename_all = "snake_case")]
pub enum SessionRequest {
    /// Every session. Not answered yet.
    Sessions,
}

impl SessionRequest {
    /// The call's name as the protocol spells it.
    pub fn name(&self) -> &'static str {
        match self {
            SessionRequest::Sessions => "sessions",
        }
    }
}

/// The answer to a [`SessionRequest`], one variant per call.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(tag = "kind", content = "view", rename_all = "snake_case")]
pub enum SessionView {
    /// Placeholder until the first call of the family is answered.
    Nothing,
}

/// Answers `request` on `engine`.
///
/// # Errors
/// [`ApiError`] as each call documents.
pub(crate) fn answer(_engine: &Engine, request: SessionRequest) -> Result<SessionView, ApiError> {
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
    fn session_call(&self, request: SessionRequest) -> Result<SessionView, ApiError> {
        let asked = Request::Session(request);
        protocol::expect(asked.name(), self.call(asked)?, |r| match r {
            Response::Session(v) => Ok(*v),
            other => Err(other),
        })
    }
}
