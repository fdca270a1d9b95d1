//! Decisions and their corrections (spec sections 13 and 27): the decision tree, a decision's
//! explanation and impact, a correction's preview and a correction attempt's comparison.
//!
//! One family of calls of the protocol ([`Request::CorrectionView`]): its requests, its views,
//! how an [`Engine`] answers them and the typed calls on a [`Client`]. Corrections themselves
//! run as [`super::Op::Correct`].

mod calls;

mod reads;

mod short_ids;

pub use short_ids::ShortIds;

use std::collections::{BTreeMap, HashMap};

use serde::{Deserialize, Serialize};

use super::{ApiError, Engine};
use crate::actors::estimate::RerunCost;
use crate::correction::compare::ResourceComparison;
use crate::correction::impact::Impact;
use crate::correction::tree::{Node, Summary};
use crate::domain::decision::Decision;
use crate::domain::lifecycle::Phase;
use crate::domain::{Id, Next, Plan};
use crate::store::corrections::CorrectionAttempt;
use crate::store::lifecycle_run::PlanBase;

/// One call of this family.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(tag = "query", rename_all = "snake_case")]
pub enum CorrectionViewRequest {
    /// A plan's decision tree (`plan tree`).
    Tree {
        /// Plan id or unique prefix.
        plan: String,
        /// With the decisions corrections superseded.
        show_superseded: bool,
        /// With the shortest prefix of every decision id shown (for a printed tree).
        short_ids: bool,
    },
    /// A decision and what correcting it would reach (`plan explain`).
    Explain {
        /// Decision id or unique prefix.
        decision: String,
    },
    /// What a revert of a decision would do (`plan correct --mode revert`).
    RevertPreview {
        /// Decision id or unique prefix.
        decision: String,
        /// Answer a revert that would be refused with the refusal.
        require_revertable: bool,
    },
    /// What an appended child plan would be (`plan correct --mode append`).
    AppendPreview {
        /// Decision id or unique prefix.
        decision: String,
        /// The child plan's execution actor, when not the parent's.
        execution_actor: Option<String>,
        /// With what the child plan would be based on.
        bases: bool,
    },
    /// A correction attempt and its before/after comparison (`plan diff --correction`).
    Attempt {
        /// Attempt id or unique prefix.
        attempt: String,
    },
}

impl CorrectionViewRequest {
    /// The call's name as the protocol spells it.
    pub fn name(&self) -> &'static str {
        match self {
            CorrectionViewRequest::Tree { .. } => "tree",
            CorrectionViewRequest::Explain { .. } => "explain",
            CorrectionViewRequest::RevertPreview { .. } => "revert_preview",
            CorrectionViewRequest::AppendPreview { .. } => "append_preview",
            CorrectionViewRequest::Attempt { .. } => "attempt",
        }
    }
}

/// The answer to a [`CorrectionViewRequest`], one variant per call.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(tag = "kind", content = "view", rename_all = "snake_case")]
pub enum CorrectionView {
    /// [`CorrectionViewRequest::Tree`].
    Tree(Box<TreeView>),
    /// [`CorrectionViewRequest::Explain`].
    Explain(Box<ExplainView>),
    /// [`CorrectionViewRequest::RevertPreview`].
    RevertPreview(Box<RevertPreview>),
    /// [`CorrectionViewRequest::AppendPreview`].
    AppendPreview(Box<AppendPreview>),
    /// [`CorrectionViewRequest::Attempt`].
    Attempt(Box<AttemptView>),
}

impl CorrectionView {
    /// The view's name, for an error that names what came back instead of what was asked.
    fn name(&self) -> &'static str {
        match self {
            CorrectionView::Tree(_) => "tree",
            CorrectionView::Explain(_) => "explain",
            CorrectionView::RevertPreview(_) => "revert_preview",
            CorrectionView::AppendPreview(_) => "append_preview",
            CorrectionView::Attempt(_) => "attempt",
        }
    }
}

/// A plan's decision tree.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct TreeView {
    /// The plan.
    pub plan: Plan,
    /// Top-level nodes (normally the root `prompt_definition`).
    pub roots: Vec<Node>,
    /// Totals.
    pub summary: Summary,
    /// The plans below it, at any depth.
    pub child_plans: Vec<ChildPlan>,
    /// The shortest prefix, unique among every decision of the database, of each decision id
    /// the tree shows, by full id (only when asked for).
    #[schemars(with = "HashMap<String, String>")]
    pub short_ids: ShortIds,
}

/// One plan below a tree's plan.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ChildPlan {
    /// The child plan.
    pub plan_id: Id,
    /// Its parent.
    pub parent_plan_id: Option<Id>,
    /// Its name.
    pub name: String,
    /// `phase/state`.
    pub status: String,
}

/// A decision and what correcting it would reach.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ExplainView {
    /// The decision as stored.
    pub decision: Decision,
    /// The shortest prefix of its id unique among every decision of the database.
    pub short_id: String,
    /// What correcting it would reach.
    pub impact: Impact,
}

/// What a revert of a decision would do, and whether it would be refused.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct RevertPreview {
    /// The decision.
    pub decision: Decision,
    /// Its plan.
    pub plan: Plan,
    /// The shortest prefix of the decision's id unique among every decision.
    pub short_id: String,
    /// What the revert would invalidate, re-run and replay.
    pub impact: Impact,
    /// What re-running the steps is estimated to cost (their recorded usage).
    pub rerun: RerunCost,
    /// Why the revert would be refused, if it would.
    pub refused: Option<Refusal>,
    /// The plan runs the built-in script executor (which cannot carry guidance).
    pub script_executor: bool,
    /// Each step the impact lists, by full id: its short id and chosen option.
    pub steps: BTreeMap<String, StepLabel>,
}

/// Why a revert would be refused.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Refusal {
    /// What is wrong.
    pub message: String,
    /// When the plan's state is what is wrong: the next steps that would fit.
    pub hints: Option<Vec<Next>>,
}

/// A step as a preview lists it.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct StepLabel {
    /// The shortest prefix of its id unique among the plan's decisions.
    pub short: String,
    /// What it decided.
    pub chosen: String,
}

/// What appending a child plan that carries guidance would be.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct AppendPreview {
    /// The decision corrected.
    pub decision: Decision,
    /// The parent plan's phase.
    pub parent_phase: Phase,
    /// Why the child plan's execution actor could not carry the guidance, if it could not.
    pub actor_refusal: Option<String>,
    /// Why the child plan's model execution actor could not run now (a provider's API key
    /// not set, ...): its Execute would error with `ACTOR_UNAVAILABLE`.
    #[serde(default)]
    pub actor_unavailable: Option<String>,
    /// What the child plan would be based on (when asked for and the actor fits).
    pub bases: Vec<PlanBase>,
}

/// A correction attempt and, per resource, the original and corrected changes.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct AttemptView {
    /// The attempt.
    pub attempt: CorrectionAttempt,
    /// Each active sandbox's comparison.
    pub resources: Vec<ResourceComparison>,
}

/// Answers `request` on `engine`.
///
/// # Errors
/// [`ApiError`] as each call documents.
pub(crate) fn answer(
    engine: &Engine,
    request: CorrectionViewRequest,
) -> Result<CorrectionView, ApiError> {
    Ok(match request {
        CorrectionViewRequest::Tree {
            plan,
            show_superseded,
            short_ids,
        } => CorrectionView::Tree(Box::new(reads::tree(
            engine,
            &plan,
            show_superseded,
            short_ids,
        )?)),
        CorrectionViewRequest::Explain { decision } => {
            CorrectionView::Explain(Box::new(reads::explain(engine, &decision)?))
        }
        CorrectionViewRequest::RevertPreview {
            decision,
            require_revertable,
        } => CorrectionView::RevertPreview(Box::new(reads::revert_preview(
            engine,
            &decision,
            require_revertable,
        )?)),
        CorrectionViewRequest::AppendPreview {
            decision,
            execution_actor,
            bases,
        } => CorrectionView::AppendPreview(Box::new(reads::append_preview(
            engine,
            &decision,
            execution_actor.as_deref(),
            bases,
        )?)),
        CorrectionViewRequest::Attempt { attempt } => {
            CorrectionView::Attempt(Box::new(reads::attempt(engine, &attempt)?))
        }
    })
}
