//! The typed calls of this family on a [`Client`], whichever transport answers them.

use super::*;
use crate::api::protocol::{self, Request, Response};
use crate::api::{ApiError, Client};

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

    /// `plan checkpoints`: plan `plan`'s checkpoints, with the discarded ones when `all`.
    ///
    /// # Errors
    /// `NOT_FOUND`, `AMBIGUOUS`; see [`Client::call`].
    pub fn checkpoints(&self, plan: &str, all: bool) -> Result<CheckpointsView, ApiError> {
        let request = PlanViewRequest::Checkpoints {
            plan: plan.to_string(),
            all,
        };
        self.plan_view(request, |v| match v {
            PlanView::Checkpoints(c) => Ok(*c),
            other => Err(other),
        })
    }

    /// Checkpoint `checkpoint` (id, unique prefix or sequence number) of plan `plan`.
    ///
    /// # Errors
    /// `NOT_FOUND`, `AMBIGUOUS`, `INVALID_INPUT`; see [`Client::call`].
    pub fn checkpoint(&self, plan: &str, checkpoint: &str) -> Result<CheckpointRef, ApiError> {
        let request = PlanViewRequest::Checkpoint {
            plan: plan.to_string(),
            checkpoint: checkpoint.to_string(),
        };
        self.plan_view(request, |v| match v {
            PlanView::Checkpoint(c) => Ok(*c),
            other => Err(other),
        })
    }

    /// `plan artifacts`: what plan `plan` produced.
    ///
    /// # Errors
    /// `NOT_FOUND`, `AMBIGUOUS`; store, sandbox and git failures; see [`Client::call`].
    pub fn artifacts(&self, plan: &str) -> Result<ArtifactsView, ApiError> {
        let request = PlanViewRequest::Artifacts {
            plan: plan.to_string(),
        };
        self.plan_view(request, |v| match v {
            PlanView::Artifacts(a) => Ok(*a),
            other => Err(other),
        })
    }

    /// `plan logs`: plan `plan`'s steps with what they printed.
    ///
    /// # Errors
    /// `NOT_FOUND`, `AMBIGUOUS`; see [`Client::call`].
    pub fn plan_steps(&self, plan: &str) -> Result<StepsView, ApiError> {
        let request = PlanViewRequest::Steps {
            plan: plan.to_string(),
        };
        self.plan_view(request, |v| match v {
            PlanView::Steps(s) => Ok(*s),
            other => Err(other),
        })
    }

    /// `plan errors`: plan `plan`'s row and errors.
    ///
    /// # Errors
    /// `NOT_FOUND`, `AMBIGUOUS`; see [`Client::call`].
    pub fn plan_errors(&self, plan: &str) -> Result<ErrorsView, ApiError> {
        let request = PlanViewRequest::Errors {
            plan: plan.to_string(),
        };
        self.plan_view(request, |v| match v {
            PlanView::Errors(e) => Ok(*e),
            other => Err(other),
        })
    }
}
