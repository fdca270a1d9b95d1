//! What `plan apply` shows before it asks (spec section 11, "Apply"): the whole change per
//! resource and file, or, when the review marks items or `--only`/`--exclude` select some,
//! what would be written and what left out (`docs/review.md`).

use serde::{Deserialize, Serialize};

use super::{ApiError, Engine};
use crate::domain::Plan;
use crate::lifecycle::apply::Preview;
use crate::review::partial::{self, ApplyRequest, LeftOut, Selection, Written};

/// What `plan apply` asks to preview.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ApplyPreviewQuery {
    /// Plan id or unique prefix.
    pub plan: String,
    /// The selection Apply would be run with.
    pub selection: ApplyRequest,
}

/// The preview of one plan's Apply.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ApplyPreviewView {
    /// The plan's row.
    pub plan: Plan,
    /// What Apply would write; `None` when the plan cannot be applied now (running Apply
    /// names what is wrong).
    pub shown: Option<ApplyShown>,
}

/// What [`ApplyPreviewView::shown`] holds.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum ApplyShown {
    /// Nothing marked or selected: the whole reviewed change.
    Whole {
        /// Per resource, its files and line counts.
        resources: Vec<Preview>,
    },
    /// Only what the review marks and the selection let through.
    Partial {
        /// The files with at least one written item.
        written: Vec<Written>,
        /// Every item left out, in review order.
        left_out: Vec<LeftOut>,
        /// How many review items there are in all.
        total_items: usize,
    },
}

/// Answers `query` on `engine` (an Apply interrupted by a crash is recovered first).
///
/// # Errors
/// `NOT_FOUND`, `AMBIGUOUS`; `INVALID_INPUT` for a bad `--only`/`--exclude` pattern; store,
/// sandbox and git failures.
pub(crate) fn preview(
    engine: &Engine,
    query: &ApplyPreviewQuery,
) -> Result<ApplyPreviewView, ApiError> {
    let id = engine.resolve_plan(&query.plan)?;
    let whole = engine.apply_preview(&id)?;
    let plan = engine
        .store()?
        .plan(&id)?
        .ok_or(crate::lifecycle::RunError::NotFound(id))?;
    let Some(whole) = whole else {
        return Ok(ApplyPreviewView { plan, shown: None });
    };
    let selection = Selection::new(&query.selection)?;
    let review = engine.review(&id)?;
    let shown = if review.any_marked() || !selection.is_empty() {
        let (written, left_out) = partial::outline(&review, &selection);
        ApplyShown::Partial {
            written,
            left_out,
            total_items: review.files.iter().map(|f| f.items.len()).sum(),
        }
    } else {
        ApplyShown::Whole { resources: whole }
    };
    Ok(ApplyPreviewView {
        plan,
        shown: Some(shown),
    })
}
