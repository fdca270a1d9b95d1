//! What a plan produced (spec section 18, "Change tracking"): its changed files, each with
//! the tool calls that changed it, from the live sandboxes or, once applied, from the records.

use serde::{Deserialize, Serialize};

use super::plan_diff::open_swept;
use super::{ApiError, Engine};
use crate::domain::tool_call::{ChangeRecord, ToolCallRecord};
use crate::domain::{Id, Phase};
use crate::sandbox::applied;
use crate::sandbox::diff::{self, DiffRequest, FileDiff};

/// `plan artifacts`' answer.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ArtifactsView {
    /// The plan.
    pub plan_id: Id,
    /// Whether the files come from the plan's Apply (its sandboxes are gone).
    pub applied: bool,
    /// The commits Apply made, with their resources.
    pub commits: Vec<AppliedCommit>,
    /// The changed files, per resource.
    pub files: Vec<Artifact>,
    /// Every change the plan's tool calls recorded.
    pub changes: Vec<ChangeRecord>,
    /// Every tool call of the plan.
    pub tool_calls: Vec<ToolCallRecord>,
}

/// A commit Apply made.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct AppliedCommit {
    /// The resource it was made in.
    pub resource_name: String,
    /// Its id.
    pub commit: String,
}

/// One changed file of [`ArtifactsView`].
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Artifact {
    /// The resource it belongs to.
    pub resource_name: String,
    /// The file, without hunks.
    pub file: FileDiff,
    /// The sequence numbers of the live tool calls that changed it.
    pub tool_calls: Vec<u64>,
}

/// The artifacts of plan `input`.
///
/// # Errors
/// `NOT_FOUND`, `AMBIGUOUS`; store, sandbox and git failures.
pub(crate) fn artifacts(engine: &Engine, input: &str) -> Result<ArtifactsView, ApiError> {
    let (store, plan) = open_swept(engine, input)?;
    let changes = store.changes(&plan.plan_id, false)?;
    let calls = store.tool_calls(&plan.plan_id)?;
    let active = engine.sandboxes().active(&store, &plan.plan_id)?;
    let mut changed: Vec<(String, Vec<FileDiff>)> = Vec::new();
    for sb in &active {
        let files = diff::sandbox_diff(sb, &DiffRequest::default())?;
        changed.push((sb.target.resource_name.clone(), files));
    }
    let applied = active.is_empty() && plan.phase() == Phase::Applied;
    let mut commits = Vec::new();
    if applied {
        for a in applied::applied_changes(&store, &plan.plan_id, &DiffRequest::default())? {
            if let Some(commit) = a.commit {
                commits.push(AppliedCommit {
                    resource_name: a.resource_name.clone(),
                    commit,
                });
            }
            changed.push((a.resource_name, a.files));
        }
    }
    let files = changed
        .into_iter()
        .flat_map(|(resource_name, files)| {
            files
                .into_iter()
                .map(move |file| (resource_name.clone(), file))
        })
        .map(|(resource_name, file)| Artifact {
            tool_calls: made_by(&calls, &changes, &resource_name, &file.path),
            resource_name,
            file,
        })
        .collect();
    Ok(ArtifactsView {
        plan_id: plan.plan_id,
        applied,
        commits,
        files,
        changes,
        tool_calls: calls,
    })
}

/// The sequence numbers of the live tool calls that changed `path` (or a file under it) of
/// `resource`.
fn made_by(
    calls: &[ToolCallRecord],
    changes: &[ChangeRecord],
    resource: &str,
    path: &str,
) -> Vec<u64> {
    let under = format!("{path}/");
    calls
        .iter()
        .filter(|c| c.discarded_at.is_none())
        .filter(|c| {
            changes.iter().any(|ch| {
                ch.call_id == c.call_id
                    && ch.resource_name == resource
                    && (ch.change.path == path || ch.change.path.starts_with(&under))
            })
        })
        .map(|c| c.seq)
        .collect()
}
