//! A plan's diff (spec section 11, "Diff and review"): the change of its live sandboxes against
//! their bases, or, once applied, what Apply wrote. Computed here, rendered by each face; the
//! view carries every file with its hunks, so it reads the same through a server.

use jiff::Timestamp;
use serde::{Deserialize, Serialize};

use super::{ApiError, Engine};
use crate::domain::event::EventKind;
use crate::domain::{Id, Phase, Plan};
use crate::sandbox::applied::{self, AppliedResource};
use crate::sandbox::diff::{self, DiffRequest, DiffStats, FileDiff};
use crate::sandbox::{Sandbox, Strategy, attribution, lifetime};
use crate::store::Store;

/// What `plan diff` asks for.
#[derive(Debug, Clone, Default, Serialize, Deserialize, schemars::JsonSchema)]
pub struct DiffQuery {
    /// Plan id or unique prefix.
    pub plan: String,
    /// Only the sandbox (or applied resource) answering to this name.
    pub resource: Option<String>,
    /// Only files at or under this path.
    pub path: Option<String>,
    /// With hunks (`false`: files and line counts only).
    pub hunks: bool,
    /// After a partial Apply: the sandbox's whole change instead of what Apply wrote.
    pub remainder: bool,
    /// Attribute each hunk to its decisions and give it its review id (`docs/review.md`);
    /// the unified text needs neither.
    pub marks: bool,
}

/// `plan diff`'s answer.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(tag = "state", rename_all = "snake_case")]
pub enum DiffView {
    /// The change of the plan's live sandboxes.
    Sandboxes(SandboxesDiff),
    /// What the plan's Apply wrote.
    Applied(AppliedDiff),
}

/// [`DiffView::Sandboxes`].
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct SandboxesDiff {
    /// The plan.
    pub plan_id: Id,
    /// The selected live sandboxes' changes (empty when the plan has none, or when none
    /// answers to the query's resource).
    pub resources: Vec<ResourceDiff>,
    /// The names of every live sandbox of the plan.
    pub names: Vec<String>,
    /// Whether the plan had sandboxes that were released or removed since.
    pub released: bool,
}

/// One sandbox's part of [`SandboxesDiff`].
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ResourceDiff {
    /// The resource the sandbox holds.
    pub resource_name: String,
    /// How it is sandboxed.
    pub strategy: Strategy,
    /// The commit it started from (git checkouts).
    pub base_commit: Option<String>,
    /// Totals over [`Self::files`].
    pub stats: DiffStats,
    /// The changed files.
    pub files: Vec<FileDiff>,
}

/// [`DiffView::Applied`].
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct AppliedDiff {
    /// The plan.
    pub plan_id: Id,
    /// The selected resources Apply wrote (empty when none answers to the query's resource).
    pub resources: Vec<AppliedResource>,
    /// The names of every resource Apply wrote.
    pub names: Vec<String>,
    /// What the plan's last Apply left out (its `apply_complete` event), `[]` when nothing.
    pub left_out: serde_json::Value,
}

/// Answers `query` on `engine`; orphaned and expired sandboxes are swept first, as every
/// sandbox command does.
///
/// # Errors
/// `NOT_FOUND`, `AMBIGUOUS` for the plan; store, sandbox and git failures.
pub(crate) fn diff(engine: &Engine, query: &DiffQuery) -> Result<DiffView, ApiError> {
    let (store, plan) = open_swept(engine, &query.plan)?;
    let sandboxes = engine.sandboxes();
    let active = sandboxes.active(&store, &plan.plan_id)?;
    let request = DiffRequest {
        path: query.path.clone(),
        hunks: query.hunks,
    };
    if plan.phase() == Phase::Applied && (active.is_empty() || !query.remainder) {
        return applied_diff(&store, &plan, query.resource.as_deref(), &request);
    }
    let mut resources = Vec::new();
    for sb in active.iter().filter(|s| {
        query
            .resource
            .as_deref()
            .is_none_or(|r| s.target.answers_to(r))
    }) {
        resources.push(resource_diff(&store, sb, &request, query.marks)?);
    }
    let released = active.is_empty() && !store.sandboxes_of_plan(&plan.plan_id)?.is_empty();
    Ok(DiffView::Sandboxes(SandboxesDiff {
        plan_id: plan.plan_id,
        resources,
        names: active
            .iter()
            .map(|s| s.target.resource_name.clone())
            .collect(),
        released,
    }))
}

/// A store with the plan `input` resolved, after sweeping orphaned and expired sandboxes
/// (a failed sweep is logged, not fatal).
///
/// # Errors
/// `NOT_FOUND`, `AMBIGUOUS`, store failures.
pub(crate) fn open_swept(engine: &Engine, input: &str) -> Result<(Store, Plan), ApiError> {
    let mut store = engine.store()?;
    let retention = engine.settings().sandbox_retention_days;
    if let Err(e) = lifetime::sweep(&mut store, &engine.sandboxes(), Timestamp::now(), retention) {
        tracing::warn!(error = %e, "sandbox sweep failed");
    }
    let id = store.resolve_plan_id(input)??;
    let plan = store
        .plan(&id)?
        .ok_or(crate::lifecycle::RunError::NotFound(id))?;
    Ok((store, plan))
}

/// One live sandbox's change.
fn resource_diff(
    store: &Store,
    sb: &Sandbox,
    request: &DiffRequest,
    marks: bool,
) -> Result<ResourceDiff, ApiError> {
    let files = if marks {
        let mut files = attribution::attributed_diff(store, sb, request)?;
        // Without hunks there are no review items to name.
        if request.hunks {
            crate::review::assign_ids(&sb.record.resource_name, &mut files);
        }
        files
    } else {
        diff::sandbox_diff(sb, request)?
    };
    Ok(ResourceDiff {
        resource_name: sb.target.resource_name.clone(),
        strategy: sb.record.strategy,
        base_commit: sb.record.base_commit.clone(),
        stats: diff::stats(&files),
        files,
    })
}

/// What an applied plan wrote, from stored records (the applied commit, else the sandbox's
/// history, else the journal).
fn applied_diff(
    store: &Store,
    plan: &Plan,
    resource: Option<&str>,
    request: &DiffRequest,
) -> Result<DiffView, ApiError> {
    let all = applied::applied_changes(store, &plan.plan_id, request)?;
    let names = all.iter().map(|a| a.resource_name.clone()).collect();
    let resources = all
        .into_iter()
        .filter(|a| {
            resource
                .is_none_or(|r| a.resource_name == r || a.resource_name.ends_with(&format!("/{r}")))
        })
        .collect();
    Ok(DiffView::Applied(AppliedDiff {
        plan_id: plan.plan_id,
        resources,
        names,
        left_out: last_left_out(store, &plan.plan_id)?,
    }))
}

/// The items the plan's last Apply left out (its `apply_complete` event), `[]` when none.
pub(crate) fn last_left_out(store: &Store, plan: &Id) -> Result<serde_json::Value, ApiError> {
    let events = crate::store::events::after(store, 0, Some(plan), u32::MAX)?;
    Ok(events
        .into_iter()
        .rev()
        .find_map(|e| match e.kind {
            EventKind::ApplyComplete(c) => Some(c.left_out),
            _ => None,
        })
        .filter(|l| !l.is_null())
        .unwrap_or_else(|| serde_json::json!([])))
}
