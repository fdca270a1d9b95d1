//! Plan inspection (spec sections 10-13): the decision tree, a decision's explanation and impact, a correction's preview, the diff, checkpoints, logs, errors and artifacts of one plan.
//!
//! One family of calls of the protocol ([`Request::PlanView`]): its requests,
//! its views, how an [`Engine`] answers them and the typed calls on a [`Client`].

use serde::{Deserialize, Serialize};

use super::apply_preview::{ApplyPreviewQuery, ApplyPreviewView};
use super::plan_artifacts::ArtifactsView;
use super::plan_checkpoints::{self, CheckpointRef, CheckpointsView};
use super::plan_diff::{DiffQuery, DiffView};
use super::plan_record::{self, ErrorsView, StepsView};
use super::protocol::{self, Request, Response};
use super::{ApiError, Client, Engine};

/// One call of this family.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(tag = "query", rename_all = "snake_case")]
pub enum PlanViewRequest {
    /// A plan's changes against its bases, or what its Apply wrote (`plan diff`).
    Diff(DiffQuery),
    /// What `plan apply` shows before asking.
    ApplyPreview(ApplyPreviewQuery),
    /// A plan's checkpoints (`plan checkpoints`).
    Checkpoints {
        /// Plan id or unique prefix.
        plan: String,
        /// With those a rollback discarded.
        all: bool,
    },
    /// One checkpoint of a plan, by id, unique prefix or sequence number.
    Checkpoint {
        /// Plan id or unique prefix.
        plan: String,
        /// Checkpoint id, unique prefix or sequence number.
        checkpoint: String,
    },
    /// What a plan produced: changed files and the tool calls that changed them.
    Artifacts {
        /// Plan id or unique prefix.
        plan: String,
    },
    /// A plan's steps with what they printed (`plan logs`).
    Steps {
        /// Plan id or unique prefix.
        plan: String,
    },
    /// A plan's errors (`plan errors`).
    Errors {
        /// Plan id or unique prefix.
        plan: String,
    },
}

impl PlanViewRequest {
    /// The call's name as the protocol spells it.
    pub fn name(&self) -> &'static str {
        match self {
            PlanViewRequest::Diff(_) => "diff",
            PlanViewRequest::ApplyPreview(_) => "apply_preview",
            PlanViewRequest::Checkpoints { .. } => "checkpoints",
            PlanViewRequest::Checkpoint { .. } => "checkpoint",
            PlanViewRequest::Artifacts { .. } => "artifacts",
            PlanViewRequest::Steps { .. } => "steps",
            PlanViewRequest::Errors { .. } => "errors",
        }
    }
}

/// The answer to a [`PlanViewRequest`], one variant per call.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(tag = "kind", content = "view", rename_all = "snake_case")]
pub enum PlanView {
    /// [`PlanViewRequest::Diff`].
    Diff(Box<DiffView>),
    /// [`PlanViewRequest::ApplyPreview`].
    ApplyPreview(Box<ApplyPreviewView>),
    /// [`PlanViewRequest::Checkpoints`].
    Checkpoints(Box<CheckpointsView>),
    /// [`PlanViewRequest::Checkpoint`].
    Checkpoint(Box<CheckpointRef>),
    /// [`PlanViewRequest::Artifacts`].
    Artifacts(Box<ArtifactsView>),
    /// [`PlanViewRequest::Steps`].
    Steps(Box<StepsView>),
    /// [`PlanViewRequest::Errors`].
    Errors(Box<ErrorsView>),
}

impl PlanView {
    /// The view's name, for an error that names what came back instead of what was asked.
    fn name(&self) -> &'static str {
        match self {
            PlanView::Diff(_) => "diff",
            PlanView::ApplyPreview(_) => "apply_preview",
            PlanView::Checkpoints(_) => "checkpoints",
            PlanView::Checkpoint(_) => "checkpoint",
            PlanView::Artifacts(_) => "artifacts",
            PlanView::Steps(_) => "steps",
            PlanView::Errors(_) => "errors",
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
        PlanViewRequest::Checkpoints { plan, all } => {
            PlanView::Checkpoints(Box::new(plan_checkpoints::checkpoints(engine, &plan, all)?))
        }
        PlanViewRequest::Checkpoint { plan, checkpoint } => PlanView::Checkpoint(Box::new(
            plan_checkpoints::checkpoint(engine, &plan, &checkpoint)?,
        )),
        PlanViewRequest::Artifacts { plan } => {
            PlanView::Artifacts(Box::new(super::plan_artifacts::artifacts(engine, &plan)?))
        }
        PlanViewRequest::Steps { plan } => {
            PlanView::Steps(Box::new(plan_record::steps(engine, &plan)?))
        }
        PlanViewRequest::Errors { plan } => {
            PlanView::Errors(Box::new(plan_record::errors(engine, &plan)?))
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
