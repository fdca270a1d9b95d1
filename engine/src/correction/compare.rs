//! `plan diff --correction` (spec section 13): a correction attempt's changes before and
//! after, each against the sandbox's base, and the corrected-vs-original difference.

use git2::{Oid, Repository};
use serde::Serialize;
use serde_json::Value;

use crate::sandbox::diff::{self, DiffRequest, FileDiff};
use crate::sandbox::{PLAN_REF, Sandbox, SandboxError, Sandboxes};
use crate::store::Store;
use crate::store::corrections::CorrectionAttempt;

/// One resource's side of a correction attempt.
#[derive(Debug, Clone, Serialize, serde::Deserialize, schemars::JsonSchema)]
pub struct ResourceComparison {
    /// The resource.
    pub resource_name: String,
    /// The original attempt's changes against the sandbox base.
    pub before: Vec<FileDiff>,
    /// The corrected attempt's changes against the sandbox base.
    pub after: Vec<FileDiff>,
    /// What the correction changed: original final tree -> corrected final tree.
    pub changes: Vec<FileDiff>,
}

/// The comparison of `attempt` for each active sandbox of its plan. A sandbox the attempt did
/// not record falls back to its base (before) and its current plan commit (after).
///
/// # Errors
/// [`SandboxError`] for store, sandbox and git failures.
pub fn compare(
    store: &Store,
    sandboxes: &Sandboxes,
    attempt: &CorrectionAttempt,
) -> Result<Vec<ResourceComparison>, SandboxError> {
    let before = final_states(&attempt.original);
    let after = final_states(&attempt.result);
    sandboxes
        .active(store, &attempt.plan_id)?
        .iter()
        .map(|sb| resource(sb, &before, &after))
        .collect()
}

fn resource(
    sb: &Sandbox,
    before: &[(String, String)],
    after: &[(String, String)],
) -> Result<ResourceComparison, SandboxError> {
    let repo = sb.repo()?;
    let base = repo
        .find_commit(sb.base_commit()?)
        .and_then(|c| c.tree())
        .map(|t| t.id())
        .ok();
    let sid = sb.record.sandbox_id.to_string();
    let find = |v: &[(String, String)]| {
        v.iter()
            .find(|(s, _)| *s == sid)
            .and_then(|(_, t)| Oid::from_str(t).ok())
    };
    let old = find(before).or(base);
    let new = find(after).or_else(|| plan_tree(&repo));
    Ok(ResourceComparison {
        resource_name: sb.record.resource_name.clone(),
        before: files(&repo, base, old)?,
        after: files(&repo, base, new)?,
        changes: files(&repo, old, new)?,
    })
}

/// `(sandbox id, tree oid)` of a stored attempt's `final_states`.
fn final_states(v: &Value) -> Vec<(String, String)> {
    v["final_states"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|s| {
                    Some((
                        s["sandbox_id"].as_str()?.to_string(),
                        s["tree_oid"].as_str()?.to_string(),
                    ))
                })
                .collect()
        })
        .unwrap_or_default()
}

fn plan_tree(repo: &Repository) -> Option<Oid> {
    repo.find_reference(PLAN_REF)
        .and_then(|r| r.peel_to_commit())
        .and_then(|c| c.tree())
        .map(|t| t.id())
        .ok()
}

fn files(
    repo: &Repository,
    old: Option<Oid>,
    new: Option<Oid>,
) -> Result<Vec<FileDiff>, SandboxError> {
    diff::trees(
        repo,
        old,
        new,
        &DiffRequest {
            path: None,
            hunks: true,
        },
    )
}
