//! The typed calls of this family on a [`Client`], whichever transport answers them.

use super::*;
use crate::api::protocol::{self, Request, Response};
use crate::api::{ApiError, Client};

impl dyn Client + '_ {
    /// The view `take` accepts, or a protocol error naming the call and the view.
    fn correction_view<T>(
        &self,
        request: CorrectionViewRequest,
        take: impl FnOnce(CorrectionView) -> Result<T, CorrectionView>,
    ) -> Result<T, ApiError> {
        let name = request.name();
        let asked = Request::CorrectionView(request);
        let view = protocol::expect(asked.name(), self.call(asked)?, |r| match r {
            Response::CorrectionView(v) => Ok(*v),
            other => Err(other),
        })?;
        take(view).map_err(|other| ApiError::Protocol {
            message: format!(
                "the call `{name}` was answered with the correction view `{}`",
                other.name()
            ),
        })
    }

    /// `plan tree`: plan `plan`'s decision tree; see [`CorrectionViewRequest::Tree`].
    ///
    /// # Errors
    /// `NOT_FOUND`, `AMBIGUOUS`; store failures; see [`Client::call`].
    pub fn decision_tree(
        &self,
        plan: &str,
        show_superseded: bool,
        short_ids: bool,
    ) -> Result<TreeView, ApiError> {
        let request = CorrectionViewRequest::Tree {
            plan: plan.to_string(),
            show_superseded,
            short_ids,
        };
        self.correction_view(request, |v| match v {
            CorrectionView::Tree(t) => Ok(*t),
            other => Err(other),
        })
    }

    /// `plan explain`: decision `decision` and what correcting it would reach.
    ///
    /// # Errors
    /// `NOT_FOUND`, `AMBIGUOUS`, `CORRECTION_FAILED`; see [`Client::call`].
    pub fn explain_decision(&self, decision: &str) -> Result<ExplainView, ApiError> {
        let request = CorrectionViewRequest::Explain {
            decision: decision.to_string(),
        };
        self.correction_view(request, |v| match v {
            CorrectionView::Explain(e) => Ok(*e),
            other => Err(other),
        })
    }

    /// What a revert of `decision` would do; with `require_revertable`, a refused revert is
    /// the error.
    ///
    /// # Errors
    /// `NOT_FOUND`, `AMBIGUOUS`, `CORRECTION_FAILED`, and with `require_revertable` the
    /// refusal (`CONFLICT`, `INVALID_INPUT`); see [`Client::call`].
    pub fn revert_preview(
        &self,
        decision: &str,
        require_revertable: bool,
    ) -> Result<RevertPreview, ApiError> {
        let request = CorrectionViewRequest::RevertPreview {
            decision: decision.to_string(),
            require_revertable,
        };
        self.correction_view(request, |v| match v {
            CorrectionView::RevertPreview(p) => Ok(*p),
            other => Err(other),
        })
    }

    /// What appending a child plan for `decision` would be; see
    /// [`CorrectionViewRequest::AppendPreview`].
    ///
    /// # Errors
    /// `NOT_FOUND`, `AMBIGUOUS`; store and sandbox failures; see [`Client::call`].
    pub fn append_preview(
        &self,
        decision: &str,
        execution_actor: Option<&str>,
        bases: bool,
    ) -> Result<AppendPreview, ApiError> {
        let request = CorrectionViewRequest::AppendPreview {
            decision: decision.to_string(),
            execution_actor: execution_actor.map(str::to_string),
            bases,
        };
        self.correction_view(request, |v| match v {
            CorrectionView::AppendPreview(p) => Ok(*p),
            other => Err(other),
        })
    }

    /// `plan diff --correction`: attempt `attempt` (id or unique prefix) and its comparison.
    ///
    /// # Errors
    /// `NOT_FOUND`, `AMBIGUOUS`; store, sandbox and git failures; see [`Client::call`].
    pub fn correction_attempt(&self, attempt: &str) -> Result<AttemptView, ApiError> {
        let request = CorrectionViewRequest::Attempt {
            attempt: attempt.to_string(),
        };
        self.correction_view(request, |v| match v {
            CorrectionView::Attempt(a) => Ok(*a),
            other => Err(other),
        })
    }
}
