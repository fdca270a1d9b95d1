//! Plan inspection (spec sections 10-13): the decision tree, a decision's explanation and impact, a correction's preview, the diff, checkpoints, logs, errors and artifacts of one plan.
//!
//! One family of calls of the protocol ([`Request::PlanView`]): its requests,
//! its views, how an [`Engine`] answers them and the typed calls on a [`Client`].

use serde::{Deserialize, Serialize};

use super::protocol::{self, Request, Response};
use super::{ApiError, Client, Engine};

/// One call of this family.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(tag = "query", rename_all = "snake_case")]
pub enum PlanViewRequest {
    /// The decision tree of a plan. Not answered yet.
    Tree,
}

impl PlanViewRequest {
    /// The call's name as the protocol spells it.
    pub fn name(&self) -> &'static str {
        match self {
            PlanViewRequest::Tree => "tree",
        }
    }
}

/// The answer to a [`PlanViewRequest`], one variant per call.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(tag = "kind", content = "view", rename_all = "snake_case")]
pub enum PlanView {
    /// Placeholder until the first call of the family is answered.
    Nothing,
}

/// Answers `request` on `engine`.
///
/// # Errors
/// [`ApiError`] as each call documents.
pub(crate) fn answer(_engine: &Engine, request: PlanViewRequest) -> Result<PlanView, ApiError> {
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
    fn plan_view_call(&self, request: PlanViewRequest) -> Result<PlanView, ApiError> {
        let asked = Request::PlanView(request);
        protocol::expect(asked.name(), self.call(asked)?, |r| match r {
            Response::PlanView(v) => Ok(*v),
            other => Err(other),
        })
    }
}
