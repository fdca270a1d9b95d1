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
    /// Whether the files are what the plan's Apply wrote (its commit), not its sandboxes'
    /// change: after Apply, even a partial one whose sandbox keeps the remainder.
    pub applied: bool,
    /// The commits Apply made, with their resources.
    pub commits: Vec<AppliedCommit>,
    /// The changed files, per resource.
    pub files: Vec<Artifact>,
    /// What the plan's last Apply left out (its `apply_complete` event), `[]` when nothing;
    /// `plan diff --remainder` shows it.
    #[serde(default)]
    pub left_out: serde_json::Value,
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
    // Once applied, the plan produced what its commit holds: a partial Apply keeps the
    // remainder in the sandbox, which is not the plan's change.
    let applied = plan.phase() == Phase::Applied;
    let mut changed: Vec<(String, Vec<FileDiff>)> = Vec::new();
    if !applied {
        for sb in &engine.sandboxes().active(&store, &plan.plan_id)? {
            let files = diff::sandbox_diff(sb, &DiffRequest::default())?;
            changed.push((sb.target.resource_name.clone(), files));
        }
    }
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
        left_out: if applied {
            super::plan_diff::last_left_out(&store, &plan.plan_id)?
        } else {
            serde_json::json!([])
        },
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
