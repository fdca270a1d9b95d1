//! Plan inspection (spec sections 10-13): the decision tree, a decision's explanation and impact, a correction's preview, the diff, checkpoints, logs, errors and artifacts of one plan.
//!
//! One family of calls of the protocol ([`Request::PlanView`]): its requests,
//! its views, how an [`Engine`] answers them and the typed calls on a [`Client`].

mod calls;

use serde::{Deserialize, Serialize};

use super::apply_preview::{ApplyPreviewQuery, ApplyPreviewView};
use super::plan_artifacts::ArtifactsView;
use super::plan_checkpoints::{self, CheckpointRef, CheckpointsView};
use super::plan_diff::{DiffQuery, DiffView};
use super::plan_record::{self, ErrorsView, StepsView};
use super::{ApiError, Engine};

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
    /// The plan asked about, as given (id or unique prefix).
    pub fn plan(&self) -> &str {
        match self {
            PlanViewRequest::Diff(q) => &q.plan,
            PlanViewRequest::ApplyPreview(q) => &q.plan,
            PlanViewRequest::Checkpoints { plan, .. }
            | PlanViewRequest::Checkpoint { plan, .. }
            | PlanViewRequest::Artifacts { plan }
            | PlanViewRequest::Steps { plan }
            | PlanViewRequest::Errors { plan } => plan,
        }
    }

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
