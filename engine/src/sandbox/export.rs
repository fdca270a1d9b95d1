//! Taking a sandbox's work out on request (`agents plan export`): as a branch in the
//! user's repository, or as a patch file that `git apply` accepts. This is the only code that
//! writes to a user's repository before Apply, and only when the user asks for it.

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};

use git2::{DiffFindOptions, DiffFormat, DiffOptions, Oid, Repository};
use serde::Serialize;

use super::checkpoint::{count_changed, snapshot};
use super::{Sandbox, SandboxError, TargetKind};

/// What an export wrote.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, serde::Deserialize, schemars::JsonSchema)]
pub struct ExportOutcome {
    /// The resource exported.
    pub resource_name: String,
    /// The branch created (`--branch`).
    pub branch: Option<String>,
    /// The patch file written (`--patch`).
    pub patch: Option<PathBuf>,
    /// The exported commit (branch exports).
    pub commit: Option<String>,
    /// The base commit it builds on.
    pub base_commit: String,
    /// Files changed relative to the base.
    pub files_changed: u64,
}

/// The repository, base commit, base tree and the tree to export: `tree` when given (the
/// reviewed part Apply would write), else a snapshot of the work tree.
fn state(
    sandbox: &Sandbox,
    tree: Option<Oid>,
) -> Result<(Repository, Oid, Oid, Oid), SandboxError> {
    let repo = sandbox.repo()?;
    let base = sandbox.base_commit()?;
    let base_tree = repo
        .find_commit(base)
        .and_then(|c| c.tree())
        .map_err(SandboxError::git("reading the base tree"))?
        .id();
    let tree = match tree {
        Some(t) => t,
        None => snapshot(&repo)?,
    };
    Ok((repo, base, base_tree, tree))
}

/// Commits the sandbox's current state (or `tree`, a tree of the sandbox's repository) on top
/// of its base commit and creates `branch` in the user's repository pointing at it, copying
/// only the objects the user's repository lacks.
/// The author is the one Apply uses ([`super::user_signature`]).
/// An existing branch is replaced only with `force`.
///
/// # Errors
/// [`SandboxError::InvalidTarget`] for a directory resource, an invalid or existing branch
/// name, or nothing to export; git errors.
pub fn to_branch(
    sandbox: &Sandbox,
    tree: Option<Oid>,
    branch: &str,
    message: &str,
    force: bool,
) -> Result<ExportOutcome, SandboxError> {
    let TargetKind::GitCheckout {
        repo: user_path, ..
    } = &sandbox.target.kind
    else {
        return Err(SandboxError::InvalidTarget(format!(
            "{} is a directory, not a git checkout; export it with --patch",
            sandbox.target.resource_name
        )));
    };
    if !git2::Branch::name_is_valid(branch).unwrap_or(false) {
        return Err(SandboxError::InvalidTarget(format!(
            "`{branch}` is not a valid branch name"
        )));
    }
    let (repo, base, base_tree, tree) = state(sandbox, tree)?;
    let files_changed = count_changed(&repo, base_tree, tree)?;
    if files_changed == 0 {
        return Err(SandboxError::InvalidTarget(format!(
            "the sandbox of {} has no changes to export",
            sandbox.target.resource_name
        )));
    }
    let user = Repository::open(user_path).map_err(SandboxError::git(format!(
        "opening {}",
        user_path.display()
    )))?;
    let refname = format!("refs/heads/{branch}");
    if let Some(worktree) = checked_out_in(&user, &refname) {
        return Err(SandboxError::InvalidTarget(format!(
            "branch `{branch}` is checked out in {}; exporting would move it under its index and working tree, so nothing was exported (--force only replaces branches that are not checked out). Choose another name",
            worktree.display()
        )));
    }
    if user.find_reference(&refname).is_ok() && !force {
        return Err(SandboxError::InvalidTarget(format!(
            "branch `{branch}` already exists in {}; choose another name or pass --force",
            user_path.display()
        )));
    }
    let sig = super::user_signature(&user);
    let tree_obj = repo
        .find_tree(tree)
        .map_err(SandboxError::git("reading the snapshot"))?;
    let parent = repo
        .find_commit(base)
        .map_err(SandboxError::git("reading the base commit"))?;
    let commit = repo
        .commit(None, &sig, &sig, message, &tree_obj, &[&parent])
        .map_err(SandboxError::git("committing the export"))?;
    copy_missing(&repo, &user, commit)?;
    user.reference(&refname, commit, force, "cleveragents plan export")
        .map_err(SandboxError::git(format!("creating branch {branch}")))?;
    Ok(ExportOutcome {
        resource_name: sandbox.target.resource_name.clone(),
        branch: Some(branch.to_string()),
        patch: None,
        commit: Some(commit.to_string()),
        base_commit: base.to_string(),
        files_changed,
    })
}

/// The work tree (main or linked) whose HEAD is on `refname`, as git refuses to move such a
/// branch.
fn checked_out_in(repo: &Repository, refname: &str) -> Option<PathBuf> {
    let on = |r: &Repository| {
        r.find_reference("HEAD")
            .ok()
            .and_then(|h| h.symbolic_target().ok().flatten().map(str::to_string))
            .is_some_and(|t| t == refname)
    };
    if on(repo) {
        return Some(repo.workdir().unwrap_or(repo.path()).to_path_buf());
    }
    let names = repo.worktrees().ok()?;
    for name in names.iter().flatten().flatten() {
        if let Ok(wt) = repo.find_worktree(name)
            && let Ok(r) = Repository::open_from_worktree(&wt)
            && on(&r)
        {
            return Some(wt.path().to_path_buf());
        }
    }
    None
}

/// Copies `commit` and every object it reaches that `to` does not have (a tree already present
/// is taken to be complete).
fn copy_missing(from: &Repository, to: &Repository, commit: Oid) -> Result<(), SandboxError> {
    let src = from
        .odb()
        .map_err(SandboxError::git("opening the sandbox objects"))?;
    let dst = to
        .odb()
        .map_err(SandboxError::git("opening the repository objects"))?;
    let mut stack = vec![commit];
    while let Some(oid) = stack.pop() {
        if dst.exists(oid) {
            continue;
        }
        let object = src
            .read(oid)
            .map_err(SandboxError::git(format!("reading object {oid}")))?;
        match object.kind() {
            git2::ObjectType::Commit => {
                let c = from
                    .find_commit(oid)
                    .map_err(SandboxError::git("reading a commit"))?;
                stack.push(c.tree_id());
            }
            git2::ObjectType::Tree => {
                let t = from
                    .find_tree(oid)
                    .map_err(SandboxError::git("reading a tree"))?;
                for entry in t.iter() {
                    if matches!(
                        entry.kind(),
                        Some(git2::ObjectType::Tree | git2::ObjectType::Blob)
                    ) {
                        stack.push(entry.id());
                    }
                }
            }
            _ => {}
        }
        dst.write(object.kind(), object.data())
            .map_err(SandboxError::git(format!("writing object {oid}")))?;
    }
    Ok(())
}

/// The sandbox's changes (or `tree`'s) against its base as a git patch (binary changes
/// included).
///
/// # Errors
/// Git errors.
pub fn patch_text(
    sandbox: &Sandbox,
    tree: Option<Oid>,
) -> Result<(Vec<u8>, u64, String), SandboxError> {
    let (repo, base, base_tree, tree) = state(sandbox, tree)?;
    let old = repo
        .find_tree(base_tree)
        .map_err(SandboxError::git("reading a tree"))?;
    let new = repo
        .find_tree(tree)
        .map_err(SandboxError::git("reading a tree"))?;
    let mut opts = DiffOptions::new();
    opts.show_binary(true);
    let mut diff = repo
        .diff_tree_to_tree(Some(&old), Some(&new), Some(&mut opts))
        .map_err(SandboxError::git("comparing trees"))?;
    diff.find_similar(Some(DiffFindOptions::new().renames(true)))
        .map_err(SandboxError::git("detecting renames"))?;
    let mut out = Vec::new();
    diff.print(DiffFormat::Patch, |_, _, line| {
        if matches!(line.origin(), '+' | '-' | ' ') {
            out.push(line.origin() as u8);
        }
        out.extend_from_slice(line.content());
        true
    })
    .map_err(SandboxError::git("writing the patch"))?;
    Ok((out, diff.deltas().len() as u64, base.to_string()))
}

/// Writes the patch of the sandbox (or of `tree`) to `file` (refusing to replace an existing file unless `force`).
///
/// # Errors
/// [`SandboxError::InvalidTarget`] for an existing file or nothing to export; I/O and git
/// errors.
pub fn to_patch(
    sandbox: &Sandbox,
    tree: Option<Oid>,
    file: &Path,
    force: bool,
) -> Result<ExportOutcome, SandboxError> {
    if file.exists() && !force {
        return Err(SandboxError::InvalidTarget(format!(
            "{} already exists; choose another file or pass --force",
            file.display()
        )));
    }
    let (bytes, files_changed, base) = patch_text(sandbox, tree)?;
    if files_changed == 0 {
        return Err(SandboxError::InvalidTarget(format!(
            "the sandbox of {} has no changes to export",
            sandbox.target.resource_name
        )));
    }
    let dir = file
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let tmp = dir.join(format!(".cleveragents-patch-{}", std::process::id()));
    let write = || -> std::io::Result<()> {
        let mut f = fs::File::create(&tmp)?;
        f.write_all(&bytes)?;
        f.sync_all()?;
        fs::rename(&tmp, file)
    };
    write().map_err(|e| {
        let _ = fs::remove_file(&tmp);
        SandboxError::io("write", file)(e)
    })?;
    Ok(ExportOutcome {
        resource_name: sandbox.target.resource_name.clone(),
        branch: None,
        patch: Some(file.to_path_buf()),
        commit: None,
        base_commit: base,
        files_changed,
    })
}
