//! The trees a plan's changes are reviewed and applied as: what each sandbox holds now, what
//! was recorded with the apply gate (the tree the user reviewed and Apply commits), and writing
//! a tree out to a directory (where validations and invariant checks look at it).

use std::collections::BTreeMap;
use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use git2::{FileMode, ObjectType, Oid, Repository, TreeWalkMode, TreeWalkResult};
use serde_json::{Value, json};

use super::{Lifecycle, RunError};
use crate::domain::approval::{ApprovalKind, ApprovalStatus};
use crate::domain::{Id, Plan};
use crate::sandbox::Sandbox;
use crate::sandbox::checkpoint::snapshot;
use crate::sandbox::diff::{DiffRequest, DiffStats, sandbox_diff_each};

/// The sandbox's tree now (a snapshot of its work tree, under its lock).
pub(crate) fn current_tree(sb: &Sandbox) -> Result<Oid, RunError> {
    let _lock = sb.lock()?;
    Ok(snapshot(&sb.repo()?)?)
}

/// Every active sandbox's tree now, by resource name: recorded with the apply gate when Execute
/// finishes (the tree the user reviews and Apply commits).
///
/// # Errors
/// Sandbox and store errors.
pub fn reviewable_trees(engine: &Lifecycle, plan: &Plan) -> Result<Value, RunError> {
    let mut out = serde_json::Map::new();
    for sb in engine.sandboxes().active(engine.store(), &plan.plan_id)? {
        out.insert(
            sb.record.resource_name.clone(),
            json!(current_tree(&sb)?.to_string()),
        );
    }
    Ok(Value::Object(out))
}

/// What every active sandbox changes against its base, summed (files, added and removed
/// lines, counted as `plan diff` counts them): what the apply gate asks about.
///
/// # Errors
/// Sandbox and store errors.
pub fn reviewable_changes(engine: &Lifecycle, plan: &Plan) -> Result<DiffStats, RunError> {
    let mut total = DiffStats::default();
    let request = DiffRequest {
        path: None,
        hunks: false,
    };
    for sb in engine.sandboxes().active(engine.store(), &plan.plan_id)? {
        for s in sandbox_diff_each(&sb, &request, &|f| DiffStats::of(&f))? {
            total += s;
        }
    }
    Ok(total)
}

/// The trees recorded with the plan's latest apply gate (empty when none was raised, as under
/// a profile that applies without asking).
///
/// # Errors
/// Store errors.
pub fn reviewed_trees(engine: &Lifecycle, plan_id: &Id) -> Result<BTreeMap<String, Oid>, RunError> {
    reviewed_trees_in(engine.store(), plan_id)
}

/// As [`reviewed_trees`], from a store alone (for `plan review`).
///
/// # Errors
/// Store errors.
pub fn reviewed_trees_in(
    store: &crate::store::Store,
    plan_id: &Id,
) -> Result<BTreeMap<String, Oid>, RunError> {
    let gate = store.approvals_of(plan_id)?.into_iter().rev().find(|a| {
        a.kind == ApprovalKind::PhaseGate
            && a.context["gate"] == "apply"
            && matches!(a.status, ApprovalStatus::Pending | ApprovalStatus::Approved)
    });
    let mut out = BTreeMap::new();
    if let Some(trees) = gate.as_ref().and_then(|g| g.context["trees"].as_object()) {
        for (name, tree) in trees {
            if let Some(oid) = tree.as_str().and_then(|t| Oid::from_str(t).ok()) {
                out.insert(name.clone(), oid);
            }
        }
    }
    Ok(out)
}

/// Writes `tree` of `repo` into `dir` (files, executable bits, symlinks).
pub(crate) fn materialize(repo: &Repository, tree: Oid, dir: &Path) -> Result<(), RunError> {
    let _ = fs::remove_dir_all(dir);
    fs::create_dir_all(dir).map_err(|e| RunError::Sandbox(format!("{}: {e}", dir.display())))?;
    let tree = repo
        .find_tree(tree)
        .map_err(|e| RunError::Sandbox(e.message().to_string()))?;
    let mut failure = None;
    tree.walk(TreeWalkMode::PreOrder, |root, entry| {
        let Ok(name) = entry.name() else {
            return TreeWalkResult::Skip;
        };
        let path = dir.join(root).join(name);
        let result = match entry.kind() {
            Some(ObjectType::Tree) => fs::create_dir_all(&path),
            Some(ObjectType::Blob) => match repo.find_blob(entry.id()) {
                Ok(blob) if entry.filemode() == i32::from(FileMode::Link) => {
                    std::os::unix::fs::symlink(
                        <std::ffi::OsStr as std::os::unix::ffi::OsStrExt>::from_bytes(
                            blob.content(),
                        ),
                        &path,
                    )
                }
                Ok(blob) => fs::write(&path, blob.content()).and_then(|()| {
                    let mode = if entry.filemode() == i32::from(FileMode::BlobExecutable) {
                        0o755
                    } else {
                        0o644
                    };
                    fs::set_permissions(&path, fs::Permissions::from_mode(mode))
                }),
                Err(e) => Err(std::io::Error::other(e.message().to_string())),
            },
            _ => Ok(()),
        };
        match result {
            Ok(()) => TreeWalkResult::Ok,
            Err(e) => {
                failure = Some(format!("{}: {e}", path.display()));
                TreeWalkResult::Abort
            }
        }
    })
    .ok();
    match failure {
        Some(f) => Err(RunError::Sandbox(f)),
        None => Ok(()),
    }
}
