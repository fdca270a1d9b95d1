//! What an applied plan changed, after its work trees are gone (spec section 13, "Applied"; section
//! 11, plan diff and artifacts). Built from stored records only, in this order of preference:
//!
//! 1. a git checkout applied as a commit: the commit (recorded in the apply journal) against
//!    its parent, in the real repository: exactly what landed;
//! 2. otherwise (a directory, `--no-commit`, a commit that is gone): the sandbox's private
//!    repository, kept until the retention period ends: its base against its last checkpoint;
//! 3. otherwise: the journal's file list (paths and whether each was added, changed or
//!    deleted) without line counts or hunks.

use std::path::Path;

use git2::{Oid, Repository};
use serde::Serialize;

use super::diff::{self, DiffRequest, FileDiff, FileStatus};
use super::{Layout, SandboxError, SandboxRecord};
use crate::domain::Id;
use crate::store::Store;
use crate::store::lifecycle_run::{BaseKind, Journal, JournalStatus};

/// Where an applied resource's diff came from.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Serialize, serde::Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum Source {
    /// The applied commit against its parent, in the real repository.
    AppliedCommit,
    /// The sandbox's private repository: base against the last checkpoint.
    SandboxHistory,
    /// The apply journal: file list only.
    Journal,
}

/// One resource an applied plan wrote.
#[derive(Debug, Clone, PartialEq, Serialize, serde::Deserialize, schemars::JsonSchema)]
pub struct AppliedResource {
    /// The resource's name.
    pub resource_name: String,
    /// The commit Apply made (git checkouts applied with a commit).
    pub commit: Option<String>,
    /// Where [`Self::files`] came from.
    pub source: Source,
    /// The files, with hunks when asked for and the source has them.
    pub files: Vec<FileDiff>,
}

/// A plan's complete apply journals, one per resource written.
///
/// # Errors
/// Store errors.
fn complete_journals(store: &Store, plan_id: &Id) -> Result<Vec<Journal>, SandboxError> {
    Ok(store
        .plan_journals(plan_id)?
        .into_iter()
        .filter(|j| j.status == JournalStatus::Complete)
        .collect())
}

/// What an applied plan wrote, per resource, from its apply journals (empty when it has none:
/// a plan applied with nothing to write).
///
/// # Errors
/// Store errors; git problems fall back to the next source instead.
pub fn applied_changes(
    store: &Store,
    plan_id: &Id,
    request: &DiffRequest,
) -> Result<Vec<AppliedResource>, SandboxError> {
    let records = store.sandboxes_of_plan(plan_id)?;
    let checkpoints = store.checkpoints(plan_id)?;
    let mut out = Vec::new();
    for j in complete_journals(store, plan_id)? {
        let from_commit = match (&j.kind, &j.commit_id) {
            (BaseKind::GitCheckout, Some(c)) => commit_diff(Path::new(&j.path), c, request).ok(),
            _ => None,
        };
        let (source, files) = if let Some(files) = from_commit {
            (Source::AppliedCommit, files)
        } else if let Some(files) = records
            .iter()
            .find(|r| r.resource_name == j.resource_name)
            .and_then(|r| history_diff(r, &checkpoints, request).ok())
        {
            (Source::SandboxHistory, filter(files, request))
        } else {
            (Source::Journal, filter(journal_files(&j), request))
        };
        out.push(AppliedResource {
            resource_name: j.resource_name.clone(),
            commit: j.commit_id.clone(),
            source,
            files,
        });
    }
    Ok(out)
}

fn filter(files: Vec<FileDiff>, request: &DiffRequest) -> Vec<FileDiff> {
    let Some(p) = request.path.as_deref().map(|p| p.trim_end_matches('/')) else {
        return files;
    };
    files
        .into_iter()
        .filter(|f| f.path == p || f.path.starts_with(&format!("{p}/")))
        .collect()
}

/// `commit` against its first parent in the repository at `repo`.
fn commit_diff(
    repo: &Path,
    commit: &str,
    request: &DiffRequest,
) -> Result<Vec<FileDiff>, SandboxError> {
    let repo = Repository::open(repo).map_err(SandboxError::git("opening the repository"))?;
    let commit = Oid::from_str(commit)
        .and_then(|oid| repo.find_commit(oid))
        .map_err(SandboxError::git("finding the applied commit"))?;
    let parent = commit.parent(0).ok().map(|p| p.tree_id());
    diff::trees(&repo, parent, Some(commit.tree_id()), request)
}

/// The sandbox's base against its state at the plan's last checkpoint that is not discarded.
fn history_diff(
    record: &SandboxRecord,
    checkpoints: &[super::checkpoint::CheckpointRecord],
    request: &DiffRequest,
) -> Result<Vec<FileDiff>, SandboxError> {
    let missing = |what: &str| SandboxError::Checkpoint(format!("no {what}"));
    let base = record
        .base_commit
        .as_deref()
        .ok_or_else(|| missing("base"))?;
    let last = checkpoints
        .iter()
        .filter(|c| c.discarded_at.is_none())
        .filter_map(|c| c.states.iter().find(|s| s.sandbox_id == record.sandbox_id))
        .next_back()
        .ok_or_else(|| missing("checkpoint"))?;
    let layout = Layout::at(&record.root_dir);
    let repo = Repository::open_bare(&layout.git_dir)
        .map_err(SandboxError::git("opening the sandbox repository"))?;
    let tree = |hex: &str| {
        Oid::from_str(hex)
            .and_then(|oid| repo.find_commit(oid))
            .map(|c| c.tree_id())
            .map_err(SandboxError::git("reading a sandbox commit"))
    };
    let (old, new) = (tree(base)?, tree(&last.commit_oid)?);
    diff::trees(&repo, Some(old), Some(new), request)
}

/// The journal's files: status from which hashes it recorded, no line counts.
fn journal_files(j: &Journal) -> Vec<FileDiff> {
    j.entries
        .iter()
        .filter(|e| e.op == crate::domain::apply::EntryOp::File)
        .map(|e| FileDiff {
            path: e.path.clone(),
            old_path: None,
            status: match (&e.base_id, &e.new_id) {
                (None, _) => FileStatus::Added,
                (_, None) => FileStatus::Deleted,
                _ => FileStatus::Modified,
            },
            binary: false,
            old_size: None,
            new_size: None,
            old_mode: None,
            new_mode: None,
            additions: 0,
            deletions: 0,
            hunks: Vec::new(),
            item_id: None,
            secrets: Vec::new(),
        })
        .collect()
}
