//! Plan inspection (spec sections 10-13): the decision tree, a decision's explanation and impact, a correction's preview, the diff, checkpoints, logs, errors and artifacts of one plan.
//!
//! One family of calls of the protocol ([`Request::PlanView`]): its requests,
//! its views, how an [`Engine`] answers them and the typed calls on a [`Client`].

use serde::{Deserialize, Serialize};

use super::apply_preview::{ApplyPreviewQuery, ApplyPreviewView};
use super::plan_diff::{DiffQuery, DiffView};
use super::protocol::{self, Request, Response};
use super::{ApiError, Client, Engine};

/// One call of this family.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "query", rename_all = "snake_case")]
pub enum PlanViewRequest {
    /// A plan's changes against its bases, or what its Apply wrote (`plan diff`).
    Diff(DiffQuery),
    /// What `plan apply` shows before asking.
    ApplyPreview(ApplyPreviewQuery),
}

impl PlanViewRequest {
    /// The call's name as the protocol spells it.
    pub fn name(&self) -> &'static str {
        match self {
            PlanViewRequest::Diff(_) => "diff",
            PlanViewRequest::ApplyPreview(_) => "apply_preview",
        }
    }
}

/// The answer to a [`PlanViewRequest`], one variant per call.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "kind", content = "view", rename_all = "snake_case")]
pub enum PlanView {
    /// [`PlanViewRequest::Diff`].
    Diff(Box<DiffView>),
    /// [`PlanViewRequest::ApplyPreview`].
    ApplyPreview(Box<ApplyPreviewView>),
}

impl PlanView {
    /// The view's name, for an error that names what came back instead of what was asked.
    fn name(&self) -> &'static str {
        match self {
            PlanView::Diff(_) => "diff",
            PlanView::ApplyPreview(_) => "apply_preview",
        }
    }
}

/// Answers `request` on `engine`.
///
/// # Errors
/// [`ApiError`] as each call documents.
pub(crate) fn answer(engine: &Engine, request: PlanViewRequest) -> Result<PlanView, ApiError> {
    Ok(match request {
        PlanViewRequest::Diff(q) => PlanView::Diff(Box::new(super::plan_diff::diff(engine, &q)?)),
        PlanViewRequest::ApplyPreview(q) => {
            PlanView::ApplyPreview(Box::new(super::apply_preview::preview(engine, &q)?))
        }
    })
}

impl dyn Client + '_ {
    /// Sends one call of this family and takes its view.
    fn plan_view_call(&self, request: PlanViewRequest) -> Result<PlanView, ApiError> {
        let asked = Request::PlanView(request);
        protocol::expect(asked.name(), self.call(asked)?, |r| match r {
            Response::PlanView(v) => Ok(*v),
            other => Err(other),
        })
    }

    /// The view `take` accepts, or a protocol error naming the call and the view.
    fn plan_view<T>(
        &self,
        request: PlanViewRequest,
        take: impl FnOnce(PlanView) -> Result<T, PlanView>,
    ) -> Result<T, ApiError> {
        let asked = request.name();
        take(self.plan_view_call(request)?).map_err(|other| ApiError::Protocol {
            message: format!(
                "the call `{asked}` was answered with the plan view `{}`",
                other.name()
            ),
        })
    }

    /// `plan diff`: see [`DiffQuery`].
    ///
    /// # Errors
    /// `NOT_FOUND`, `AMBIGUOUS`; store, sandbox and git failures; see [`Client::call`].
    pub fn plan_diff(&self, query: DiffQuery) -> Result<DiffView, ApiError> {
        self.plan_view(PlanViewRequest::Diff(query), |v| match v {
            PlanView::Diff(d) => Ok(*d),
            other => Err(other),
        })
    }

    /// What `plan apply` shows before asking: see [`ApplyPreviewQuery`].
    ///
    /// # Errors
    /// `NOT_FOUND`, `AMBIGUOUS`, `INVALID_INPUT`; see [`Client::call`].
    pub fn apply_preview(&self, query: ApplyPreviewQuery) -> Result<ApplyPreviewView, ApiError> {
        self.plan_view(PlanViewRequest::ApplyPreview(query), |v| match v {
            PlanView::ApplyPreview(p) => Ok(*p),
            other => Err(other),
        })
    }
}
