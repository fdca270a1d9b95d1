//! Merging a child plan's sandbox back into its parent's (issue 7 item 6): a three-way merge of
//! trees with libgit2 (`merge_trees`), where the ancestor is the parent's state the child
//! branched from, "ours" is the parent's sandbox now (siblings may have merged meanwhile) and
//! "theirs" is the child's final state.
//!
//! The child's private repository borrows the parent's objects, not the other way round, so
//! the merge reads the child's objects through an in-memory alternate and copies the objects
//! the merged tree needs into the parent's repository before checking the merged tree out. Nothing
//! in the parent's sandbox changes when the merge conflicts.

use git2::{Oid, Repository, build::CheckoutBuilder};
use serde::Serialize;

use super::checkpoint::{snapshot, snapshot_with};
use super::{Sandbox, SandboxError};

/// What merging one child sandbox did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "outcome", rename_all = "snake_case")]
pub enum Merged {
    /// The child changed nothing in this resource.
    Unchanged,
    /// The child's changes are in the parent's work tree now.
    Merged {
        /// Files that the merge changed in the parent's work tree.
        files: Vec<String>,
        /// The merged tree (hex).
        tree: String,
    },
    /// The child's changes conflict with the parent's; the parent's sandbox is unchanged.
    Conflict {
        /// The conflicting paths.
        paths: Vec<String>,
    },
}

/// The tree a child sandbox holds now (its work tree, snapshotted).
///
/// # Errors
/// [`SandboxError::Git`].
pub fn current_tree(sb: &Sandbox) -> Result<Oid, SandboxError> {
    let _lock = sb.lock()?;
    snapshot(&sb.repo()?)
}

fn changed_paths(repo: &Repository, old: Oid, new: Oid) -> Result<Vec<String>, SandboxError> {
    let old = repo
        .find_tree(old)
        .map_err(SandboxError::git("reading a tree"))?;
    let new = repo
        .find_tree(new)
        .map_err(SandboxError::git("reading a tree"))?;
    let diff = repo
        .diff_tree_to_tree(Some(&old), Some(&new), None)
        .map_err(SandboxError::git("comparing trees"))?;
    Ok(diff
        .deltas()
        .filter_map(|d| {
            d.new_file()
                .path()
                .or_else(|| d.old_file().path())
                .map(|p| p.display().to_string())
        })
        .collect())
}

/// Merges `child` (a sandbox whose repository borrows `parent`'s objects) into `parent`:
/// `ancestor` is the parent's tree the child branched from, `theirs` the child's final tree.
///
/// # Errors
/// Git and I/O errors; [`SandboxError::Checkpoint`] when the merged tree does not check out
/// exactly.
pub fn merge_child(
    parent: &Sandbox,
    child: &Sandbox,
    ancestor: Oid,
    theirs: Oid,
) -> Result<Merged, SandboxError> {
    if ancestor == theirs {
        return Ok(Merged::Unchanged);
    }
    let _lock = parent.lock()?;
    // One handle that also reads the child's objects, one that sees only the parent's own.
    let with_child = parent.repo()?;
    let child_objects = child.layout.git_dir.join("objects");
    with_child
        .odb()
        .and_then(|odb| odb.add_disk_alternate(&child_objects.to_string_lossy()))
        .map_err(SandboxError::git("reading the child's objects"))?;
    let ours = snapshot_with(&with_child, true)?;
    let find = |oid: Oid| {
        with_child
            .find_tree(oid)
            .map_err(SandboxError::git("reading a tree to merge"))
    };
    let (anc_t, ours_t, theirs_t) = (find(ancestor)?, find(ours)?, find(theirs)?);
    let mut index = with_child
        .merge_trees(&anc_t, &ours_t, &theirs_t, None)
        .map_err(SandboxError::git("merging the child's tree"))?;
    if index.has_conflicts() {
        let mut paths = Vec::new();
        for c in index
            .conflicts()
            .map_err(SandboxError::git("listing conflicts"))?
        {
            let c = c.map_err(SandboxError::git("reading a conflict"))?;
            if let Some(e) = c.our.or(c.their).or(c.ancestor) {
                paths.push(String::from_utf8_lossy(&e.path).into_owned());
            }
        }
        paths.sort();
        paths.dedup();
        return Ok(Merged::Conflict { paths });
    }
    let merged = index
        .write_tree_to(&with_child)
        .map_err(SandboxError::git("writing the merged tree"))?;
    if merged == ours {
        return Ok(Merged::Unchanged);
    }
    // Copy the objects the merged tree needs that only the child's repository holds (libgit2
    // does not write an object that any backend, alternates included, already has).
    let own = parent.repo()?;
    let own_odb = own
        .odb()
        .map_err(SandboxError::git("opening the parent's objects"))?;
    let all_odb = with_child
        .odb()
        .map_err(SandboxError::git("opening the objects"))?;
    let tree = with_child.find_tree(merged).map_err(SandboxError::git(
        "reading the merged tree (with the child's objects)",
    ))?;
    let mut missing = Vec::new();
    if !own_odb.exists(merged) {
        missing.push(merged);
    }
    tree.walk(git2::TreeWalkMode::PreOrder, |_, entry| {
        let wanted = matches!(
            entry.kind(),
            Some(git2::ObjectType::Blob | git2::ObjectType::Tree)
        );
        if wanted && !own_odb.exists(entry.id()) {
            missing.push(entry.id());
        }
        git2::TreeWalkResult::Ok
    })
    .map_err(SandboxError::git("listing the merged tree"))?;
    for id in missing {
        let obj = all_odb
            .read(id)
            .map_err(SandboxError::git("reading a child's object"))?;
        own_odb
            .write(obj.kind(), obj.data())
            .map_err(SandboxError::git("copying a child's object"))?;
    }
    let files = changed_paths(&with_child, ours, merged)?;
    let mut checkout = CheckoutBuilder::new();
    checkout.force();
    own.checkout_tree(
        own.find_tree(merged)
            .map_err(SandboxError::git("reading the merged tree"))?
            .as_object(),
        Some(&mut checkout),
    )
    .map_err(SandboxError::git("checking the merged tree out"))?;
    let now = snapshot_with(&own, true)?;
    if now != merged {
        return Err(SandboxError::Checkpoint(format!(
            "merging into {} left tree {now}, expected {merged}",
            parent.record.resource_name
        )));
    }
    Ok(Merged::Merged {
        files,
        tree: merged.to_string(),
    })
}
