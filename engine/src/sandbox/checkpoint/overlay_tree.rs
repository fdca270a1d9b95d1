//! The tree of a sandbox that shares its base's checkout, read from its overlay's upper
//! directory (`docs/sandbox.md`, "Shared checkouts"; D-largerepo-5).
//!
//! Everything such a sandbox ever wrote is in its upper directory: a file or link created or
//! copied up, a whiteout (a character device 0/0) where something of the base was removed.
//! The base commit's tree with exactly those paths looked at again (through the merged tree,
//! so the kernel's view decides their content and mode) is the work tree's tree, found
//! without walking the rest of the checkout and without the index. A directory the overlay
//! marked opaque (made again after a removal) hides the base's files beneath it. A directory
//! marked redirected (moved, as root), a file of the base that became a directory, a path
//! under a submodule and anything that is neither a file, a link, a directory nor a whiteout
//! are left to the caller, which scans the whole work tree as for a full checkout.

use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::{Path, PathBuf};

use git2::{ObjectType, Oid, Repository};

use super::{Filters, IgnoreChains, stored};
use crate::sandbox::{Layout, SandboxError, overlay, shared_base};

/// One path the sandbox wrote.
enum Written {
    /// A file or link, to be stored from the merged tree.
    File(PathBuf),
    /// A whiteout: the base's file or directory at this path is gone.
    Removed(PathBuf),
    /// An opaque directory over a directory of the base: the base's files beneath it that
    /// the upper directory does not hold are gone (it was removed and made again).
    Hidden(PathBuf),
}

/// The tree of `repo`'s work tree when it is a shared sandbox's overlay held mounted by this
/// process; `None` when it is not one, or when its upper directory holds something only the
/// full scan answers.
///
/// # Errors
/// [`SandboxError`] for git and I/O failures.
pub(super) fn tree(repo: &Repository) -> Result<Option<Oid>, SandboxError> {
    let Some(root) = repo.path().parent() else {
        return Ok(None);
    };
    let layout = Layout::at(root);
    let Some(commit) = layout.shared_base().and_then(|b| shared_base::commit_of(&b)) else {
        return Ok(None);
    };
    if !overlay::held(&layout.work_dir) {
        tracing::debug!(sandbox = %root.display(), "snapshot scans: the overlay is not held here");
        return Ok(None);
    }
    let base = repo
        .find_commit(commit)
        .and_then(|c| c.tree())
        .map_err(SandboxError::git("reading the base tree"))?;
    let mut written = Vec::new();
    if !collect(&layout.upper_dir, &base, &mut PathBuf::new(), &mut written)? {
        tracing::debug!(sandbox = %root.display(), "snapshot scans: the upper directory holds a moved directory or an unusual file");
        return Ok(None);
    }
    updated(repo, &base, &layout, &written)
}

/// Appends what the sandbox wrote beneath `upper/rel` to `out`; `false` when something
/// there needs the full scan.
fn collect(
    upper: &Path,
    base: &git2::Tree<'_>,
    rel: &mut PathBuf,
    out: &mut Vec<Written>,
) -> Result<bool, SandboxError> {
    let dir = upper.join(&*rel);
    let entries = std::fs::read_dir(&dir).map_err(SandboxError::io("read", &dir))?;
    for entry in entries {
        let entry = entry.map_err(SandboxError::io("read", &dir))?;
        let name = entry.file_name();
        if crate::sandbox::confined::is_git_alias(name.as_bytes()) {
            // Never part of a snapshot (the full walk skips `.git` entries too).
            continue;
        }
        rel.push(&name);
        let kind = entry.file_type().map_err(SandboxError::io("read", &dir))?;
        let path = upper.join(&*rel);
        let answered = if kind.is_dir() {
            let in_base = base.get_path(rel).ok().map(|e| e.kind());
            if in_base.is_some() && marked(&path, "opaque") {
                out.push(Written::Hidden(rel.clone()));
            }
            // A file of the base that became a directory is left to the full scan.
            let plain = matches!(in_base, None | Some(Some(ObjectType::Tree)));
            plain && !marked(&path, "redirect") && collect(upper, base, rel, out)?
        } else if kind.is_file() || kind.is_symlink() {
            out.push(Written::File(rel.clone()));
            true
        } else if kind.is_char_device() && is_whiteout(&path) {
            out.push(Written::Removed(rel.clone()));
            true
        } else {
            false
        };
        rel.pop();
        if !answered {
            return Ok(false);
        }
    }
    Ok(true)
}

/// Whether the overlay marked the upper directory `dir` (`opaque`: made after the lower one
/// was removed, or new; `redirect`: moved), as a mount of either kind writes it (`trusted.`
/// as root, `user.` with `userxattr`).
fn marked(dir: &Path, what: &str) -> bool {
    ["trusted", "user"].iter().any(|ns| {
        let name = format!("{ns}.overlay.{what}");
        rustix::fs::lgetxattr(dir, name.as_str(), &mut [0u8; 0][..]).is_ok()
    })
}

/// Whether the character device at `path` is an overlay whiteout (device number 0/0).
fn is_whiteout(path: &Path) -> bool {
    std::fs::symlink_metadata(path).is_ok_and(|m| m.rdev() == 0)
}

/// `base` with every written path looked at again through the merged tree at the layout's
/// work path; `None` where a path crosses something that is not a plain directory in `base`
/// (a submodule, a file that became a directory), which the full scan answers.
fn updated(
    repo: &Repository,
    base: &git2::Tree<'_>,
    layout: &Layout,
    written: &[Written],
) -> Result<Option<Oid>, SandboxError> {
    let work = &layout.work_dir;
    let mut ignores = IgnoreChains::new(work);
    let mut filters = Filters::new(repo, work);
    let mut update = git2::build::TreeUpdateBuilder::new();
    // A path is removed once, though a whiteout and an opaque directory above it both hide it.
    let mut removed = std::collections::BTreeSet::new();
    for item in written {
        let (Written::File(rel) | Written::Removed(rel) | Written::Hidden(rel)) = item;
        if !plain_parents(base, rel) {
            tracing::debug!(path = %rel.display(), "snapshot scans: a written path crosses a submodule or a file");
            return Ok(None);
        }
        let in_base = base.get_path(rel).ok();
        match item {
            Written::Removed(_) => {
                if in_base.is_some() {
                    removed.insert(rel.clone());
                }
            }
            Written::Hidden(_) => removed.extend(hidden(repo, base, &layout.upper_dir, rel)?),
            Written::File(_) => {
                if in_base.as_ref().is_some_and(|e| e.kind() == Some(ObjectType::Tree)) {
                    return Ok(None);
                }
                if in_base.is_none() && !ignores.file_counts(rel.as_os_str().as_bytes()) {
                    continue;
                }
                let (blob, mode) = stored(repo, work, rel, &mut filters)?;
                update.upsert(rel, blob, mode);
            }
        }
    }
    for gone in &removed {
        update.remove(gone);
    }
    let tree = update
        .create_updated(repo, base)
        .map_err(SandboxError::git("writing the snapshot tree"))?;
    Ok(Some(tree))
}

/// The paths of the base's files beneath the opaque directory `rel` that its upper directory
/// does not hold as a file or link: the overlay hides them.
fn hidden(
    repo: &Repository,
    base: &git2::Tree<'_>,
    upper: &Path,
    rel: &Path,
) -> Result<Vec<PathBuf>, SandboxError> {
    let below = base
        .get_path(rel)
        .and_then(|e| e.to_object(repo))
        .and_then(|o| o.peel_to_tree())
        .map_err(SandboxError::git("reading the base tree"))?;
    let mut gone = Vec::new();
    below
        .walk(git2::TreeWalkMode::PreOrder, |dir, entry| {
            if entry.kind() == Some(ObjectType::Tree) {
                return git2::TreeWalkResult::Ok;
            }
            let path = rel
                .join(std::ffi::OsStr::from_bytes(dir.as_bytes()))
                .join(std::ffi::OsStr::from_bytes(entry.name_bytes()));
            let held = std::fs::symlink_metadata(upper.join(&path))
                .is_ok_and(|m| m.is_file() || m.file_type().is_symlink());
            if !held {
                gone.push(path);
            }
            git2::TreeWalkResult::Ok
        })
        .map_err(SandboxError::git("reading the base tree"))?;
    Ok(gone)
}

/// Whether every parent of `rel` is a directory in `base` or absent from it, and `rel` is no
/// submodule.
fn plain_parents(base: &git2::Tree<'_>, rel: &Path) -> bool {
    let mut at = PathBuf::new();
    for c in rel.components() {
        at.push(c);
        if let Ok(e) = base.get_path(&at) {
            let last = at.as_path() == rel;
            if e.filemode() == 0o160000 || (!last && e.kind() != Some(ObjectType::Tree)) {
                return false;
            }
        }
    }
    true
}
