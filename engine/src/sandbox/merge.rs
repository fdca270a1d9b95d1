//! Merging a child plan's sandbox back into its parent's: a three-way merge of
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
pub enum MergeOutcome {
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
) -> Result<MergeOutcome, SandboxError> {
    if ancestor == theirs {
        return Ok(MergeOutcome::Unchanged);
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
        return Ok(MergeOutcome::Conflict { paths });
    }
    let merged = index
        .write_tree_to(&with_child)
        .map_err(SandboxError::git("writing the merged tree"))?;
    if merged == ours {
        return Ok(MergeOutcome::Unchanged);
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
    Ok(MergeOutcome::Merged {
        files,
        tree: merged.to_string(),
    })
}

#[cfg(test)]
mod tests {
    use std::fs;

    use jiff::Timestamp;

    use super::*;
    use crate::domain::plan::Plan;
    use crate::sandbox::checkpoint::{self, CheckpointRequest};
    use crate::sandbox::testing::repo_with_files;
    use crate::sandbox::{SandboxTarget, Sandboxes, TargetKind};
    use crate::store::Store;

    /// A parent sandbox of a user repository and a child sandbox branched from the parent's
    /// checkpoint; returns both and the branch point's tree.
    fn parent_and_child(dir: &std::path::Path) -> (Store, Sandbox, Sandbox, Oid) {
        let repo = dir.join("user");
        let head = repo_with_files(
            &repo,
            &[("a.txt", "one\ntwo\nthree\n"), ("d/keep.txt", "k\n")],
        );
        let mut store = Store::open(&dir.join("db")).unwrap();
        let sandboxes = Sandboxes::at(dir.join("sandboxes"));
        let parent = Plan::new("local/p", "p", Timestamp::now());
        let child = Plan::new("local/c", "c", Timestamp::now());
        store.insert_plan(&parent).unwrap();
        store.insert_plan(&child).unwrap();
        let target = |plan: &Plan, repo: std::path::PathBuf, base: String| SandboxTarget {
            plan_id: plan.plan_id,
            resource_name: "local/user".into(),
            alias: None,
            kind: TargetKind::GitCheckout {
                repo,
                base_commit: base,
            },
            read_only: false,
        };
        sandboxes
            .register_target(&mut store, &target(&parent, repo, head))
            .unwrap();
        let psb = sandboxes
            .ensure(&mut store, &parent.plan_id, "local/user")
            .unwrap();
        fs::write(
            psb.work_dir().join("before.txt"),
            "parent before the spawn\n",
        )
        .unwrap();
        let cp = checkpoint::create(
            &mut store,
            &sandboxes,
            &parent.plan_id,
            &CheckpointRequest {
                label: "spawn".into(),
                ..Default::default()
            },
        )
        .unwrap()
        .unwrap();
        let state = &cp.states[0];
        sandboxes
            .register_target(
                &mut store,
                &target(&child, psb.layout.git_dir.clone(), state.commit_oid.clone()),
            )
            .unwrap();
        let csb = sandboxes
            .ensure(&mut store, &child.plan_id, "local/user")
            .unwrap();
        let ancestor = Oid::from_str(&state.tree_oid).unwrap();
        (store, psb, csb, ancestor)
    }

    #[test]
    fn a_childs_changes_merge_into_the_parents_sandbox_beside_the_parents_own() {
        let dir = tempfile::tempdir().unwrap();
        let (_store, parent, child, ancestor) = parent_and_child(dir.path());
        assert_eq!(
            fs::read_to_string(child.work_dir().join("before.txt")).unwrap(),
            "parent before the spawn\n",
            "the child branched from the parent's state"
        );
        assert_eq!(
            merge_child(&parent, &child, ancestor, current_tree(&child).unwrap()).unwrap(),
            MergeOutcome::Unchanged
        );
        fs::write(child.work_dir().join("a.txt"), "one\ntwo\nthree\nfour\n").unwrap();
        fs::write(child.work_dir().join("new.txt"), "from the child\n").unwrap();
        fs::remove_file(child.work_dir().join("d/keep.txt")).unwrap();
        fs::write(parent.work_dir().join("a.txt"), "zero\none\ntwo\nthree\n").unwrap();
        fs::write(parent.work_dir().join("mine.txt"), "parent after\n").unwrap();
        let theirs = current_tree(&child).unwrap();
        let MergeOutcome::Merged { files, .. } = merge_child(&parent, &child, ancestor, theirs).unwrap()
        else {
            panic!("expected a merge")
        };
        assert_eq!(files, ["a.txt", "d/keep.txt", "new.txt"]);
        let read = |p: &str| fs::read_to_string(parent.work_dir().join(p)).ok();
        assert_eq!(
            read("a.txt").as_deref(),
            Some("zero\none\ntwo\nthree\nfour\n")
        );
        assert_eq!(read("new.txt").as_deref(), Some("from the child\n"));
        assert_eq!(read("mine.txt").as_deref(), Some("parent after\n"));
        assert_eq!(read("d/keep.txt"), None);
        // The parent's repository holds every object of its new state (no alternate needed).
        let own = parent.repo().unwrap();
        let tree = checkpoint::snapshot(&own).unwrap();
        own.find_tree(tree)
            .unwrap()
            .walk(git2::TreeWalkMode::PreOrder, |_, e| {
                assert!(own.find_object(e.id(), None).is_ok(), "{:?}", e.name());
                git2::TreeWalkResult::Ok
            })
            .unwrap();
    }

    #[test]
    fn a_conflicting_child_names_the_paths_and_leaves_the_parent_untouched() {
        let dir = tempfile::tempdir().unwrap();
        let (_store, parent, child, ancestor) = parent_and_child(dir.path());
        fs::write(child.work_dir().join("a.txt"), "one\nTWO (child)\nthree\n").unwrap();
        fs::write(
            parent.work_dir().join("a.txt"),
            "one\nTWO (parent)\nthree\n",
        )
        .unwrap();
        let theirs = current_tree(&child).unwrap();
        assert_eq!(
            merge_child(&parent, &child, ancestor, theirs).unwrap(),
            MergeOutcome::Conflict {
                paths: vec!["a.txt".into()]
            }
        );
        assert_eq!(
            fs::read_to_string(parent.work_dir().join("a.txt")).unwrap(),
            "one\nTWO (parent)\nthree\n"
        );
    }
}
