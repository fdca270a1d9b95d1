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
use std::path::{Path, PathBuf};

use git2::{ObjectType, Oid, Repository};

use super::upper_cache::{self, Cache, Kind, Listed, Stored};
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
/// full scan answers. The upper directory's entries are compared with the last snapshot's
/// first ([`upper_cache`]): what did not change since is not stored again.
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
    let since = upper_cache::now();
    let listing = upper_cache::list(&layout.upper_dir)?;
    let mut filters = Filters::new(repo, &layout.work_dir);
    let key = upper_cache::key(repo, commit, &mut filters);
    let cache = key.as_deref().and_then(|k| Cache::read(repo.path(), k));
    if let Some(tree) = cache.as_ref().and_then(|c| c.tree_for(repo, &listing)) {
        return Ok(Some(tree));
    }
    let base = repo
        .find_commit(commit)
        .and_then(|c| c.tree())
        .map_err(SandboxError::git("reading the base tree"))?;
    let Some(written) = collect(&layout.upper_dir, &base, &listing) else {
        tracing::debug!(sandbox = %root.display(), "snapshot scans: the upper directory holds a moved directory or an unusual file");
        return Ok(None);
    };
    let known = cache.map(|c| c.unchanged(&listing)).unwrap_or_default();
    let Some((tree, stored)) = updated(repo, &base, &layout, &written, &known, &mut filters)?
    else {
        return Ok(None);
    };
    if let Some(key) = key {
        upper_cache::write(repo.path(), key, &listing, &stored, tree, since);
    }
    Ok(Some(tree))
}

/// What the sandbox wrote, from its upper directory's `listing`; `None` when something there
/// needs the full scan.
fn collect(upper: &Path, base: &git2::Tree<'_>, listing: &[Listed]) -> Option<Vec<Written>> {
    let mut out = Vec::new();
    for Listed { rel, stat } in listing {
        match stat.kind {
            Kind::Dir => {
                let in_base = base.get_path(rel).ok().map(|e| e.kind());
                let path = upper.join(rel);
                // A file of the base that became a directory, or a moved directory.
                let plain = matches!(in_base, None | Some(Some(ObjectType::Tree)));
                if !plain || marked(&path, "redirect") {
                    return None;
                }
                if in_base.is_some() && marked(&path, "opaque") {
                    out.push(Written::Hidden(rel.clone()));
                }
            }
            Kind::File | Kind::Link => out.push(Written::File(rel.clone())),
            Kind::Whiteout => out.push(Written::Removed(rel.clone())),
            Kind::Other => return None,
        }
    }
    Some(out)
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

/// `base` with every written path looked at again through the merged tree at the layout's
/// work path; `None` where a path crosses something that is not a plain directory in `base`
/// (a submodule, a file that became a directory), which the full scan answers. A file whose
/// blob is `known` is not read again. Returns the tree with the blob of every file it holds.
fn updated(
    repo: &Repository,
    base: &git2::Tree<'_>,
    layout: &Layout,
    written: &[Written],
    known: &Stored,
    filters: &mut Filters<'_>,
) -> Result<Option<(Oid, Stored)>, SandboxError> {
    let work = &layout.work_dir;
    let mut ignores = IgnoreChains::new(work);
    let mut stored_now = Stored::with_capacity(written.len());
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
                let (blob, mode) = match known.get(rel) {
                    Some(&hit) => hit,
                    None => stored(repo, work, rel, filters)?,
                };
                stored_now.insert(rel.clone(), (blob, mode));
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
    Ok(Some((tree, stored_now)))
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
