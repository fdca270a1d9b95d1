//! One read-only checkout per (repository, base commit), shared by every sandbox at that base
//! through an overlay (`docs/sandbox.md`, "Shared checkouts"; D-largerepo-2 to 4).
//!
//! ```text
//! <sandboxes>/bases/<base commit>-<repository hash>/
//!     git/     a private repository borrowing the user's objects; its index holds the stat
//!              data of every checked-out file, which each sandbox copies as its own
//!     work/    the checkout: the overlays' lower directory, never written after creation
//! <sandboxes>/bases/<key>.lock   serializes building, using and removing that base
//! ```
//!
//! A base is built by the ordinary checkout into `<key>.building` and renamed into place,
//! so a base that exists is whole. A sandbox names its base in its `base` file, written
//! while the base's lock is held; [`sweep`] removes, under the same lock, a base that no
//! active or half-created sandbox names.

use std::collections::BTreeSet;
use std::fs;
use std::path::{Path, PathBuf};

use git2::Oid;

use super::{
    Layout, SandboxError, SandboxLock, SandboxState, git_sandbox, lock_file, remove_dir_if_exists,
};
use crate::store::Store;

/// The directory under the sandboxes root that holds the shared checkouts.
pub const BASES_DIR: &str = "bases";

/// The checkout (an overlay's lower directory) of the shared base at `base`.
pub fn work_of(base: &Path) -> PathBuf {
    base.join("work")
}

/// The name of the base of `repo` at `commit`: the commit and a hash of the repository's
/// path, so two repositories at the same commit never share a checkout by accident.
fn key(repo: &Path, commit: &str) -> Result<String, SandboxError> {
    use std::os::unix::ffi::OsStrExt;
    let repo = fs::canonicalize(repo).map_err(SandboxError::io("resolve", repo))?;
    let hash = Oid::hash_object(git2::ObjectType::Blob, repo.as_os_str().as_bytes())
        .map_err(SandboxError::git("hashing the repository path"))?;
    Ok(format!("{commit}-{}", &hash.to_string()[..12]))
}

/// The base commit of the shared base at `base` (the first part of its name, see [`key`]).
pub(crate) fn commit_of(base: &Path) -> Option<Oid> {
    let name = base.file_name()?.to_str()?;
    Oid::from_str(name.split_once('-')?.0).ok()
}

fn lock(bases: &Path, key: &str) -> Result<SandboxLock, SandboxError> {
    lock_file(&bases.join(format!("{key}.lock")))
}

/// The shared base of `repo` at `commit` under `root`, built first when missing, with its
/// lock held (the caller records its use before letting go).
fn ensure(root: &Path, repo: &Path, commit: &str) -> Result<(PathBuf, SandboxLock), SandboxError> {
    let bases = root.join(BASES_DIR);
    fs::create_dir_all(&bases).map_err(SandboxError::io("create", &bases))?;
    let key = key(repo, commit)?;
    ensure_at(&bases, &key, repo, commit)
}

/// Builds again the shared base at `base` that a sandbox names but that is gone (removed by
/// hand): the sandbox's upper directory still applies on top of the same commit. Its index
/// then holds the old checkout's stat data, so its next snapshot hashes every file once.
///
/// # Errors
/// As [`create_sandbox`].
pub(crate) fn restore(base: &Path, repo: &Path, commit: &str) -> Result<(), SandboxError> {
    let (Some(bases), Some(key)) = (base.parent(), base.file_name()) else {
        return Err(SandboxError::Overlay(format!(
            "{} does not name a shared checkout",
            base.display()
        )));
    };
    ensure_at(bases, &key.to_string_lossy(), repo, commit).map(drop)
}

fn ensure_at(
    bases: &Path,
    key: &str,
    repo: &Path,
    commit: &str,
) -> Result<(PathBuf, SandboxLock), SandboxError> {
    let held = lock(bases, key)?;
    let base = bases.join(key);
    if base.join("git/index").is_file() && work_of(&base).is_dir() {
        return Ok((base, held));
    }
    // A base cut short by a crash (while building, or while being removed).
    remove_dir_if_exists(&base)?;
    let building = bases.join(format!("{key}.building"));
    remove_dir_if_exists(&building)?;
    let layout = Layout::at(&building);
    let built = fs::create_dir_all(&layout.work_dir)
        .map_err(SandboxError::io("create", &layout.work_dir))
        .and_then(|()| git_sandbox::create(&layout, repo, commit))
        .and_then(|_| fs::rename(&building, &base).map_err(SandboxError::io("rename", &base)));
    if let Err(e) = built {
        let _ = remove_dir_if_exists(&building);
        return Err(e);
    }
    tracing::info!(base = %base.display(), "shared checkout built");
    Ok((base, held))
}

/// Creates the sandbox of `layout` at `commit` of `repo` over the shared base (built first
/// when missing): a private repository with the base's index, and the overlay's upper and
/// work directories, mounted in this process. Returns the base commit id and the mount,
/// which the caller holds until the sandbox value shares it.
///
/// # Errors
/// As [`git_sandbox::create`], I/O errors, and [`SandboxError::Overlay`] when the overlay
/// cannot be mounted.
pub(crate) fn create_sandbox(
    root: &Path,
    layout: &Layout,
    repo: &Path,
    commit: &str,
) -> Result<(Oid, super::overlay::MountGuard), SandboxError> {
    let (base, _held) = ensure(root, repo, commit)?;
    let (sandbox, oid) = git_sandbox::init_at_base(layout, repo, commit)?;
    // git run in the sandbox (a step's read-only git, `plan shell`) compares the work tree
    // with the index, which holds the base, or the checkpoint a rollback restored; the
    // snapshots never write it. HEAD stays at the base, where checkpoints move only the plan
    // branch, so git never sees a commit ahead of its index and shows the plan's change the
    // wrong way round.
    sandbox
        .set_head_detached(oid)
        .map_err(SandboxError::git("pointing HEAD at the base"))?;
    drop(sandbox);
    let index = layout.git_dir.join("index");
    // The base's stat data is what an `lstat` through the overlay reports for a file the
    // sandbox has not written (the lower file's inode, times and size), so a fresh sandbox's
    // snapshot finds nothing changed without hashing.
    fs::copy(base.join("git/index"), &index).map_err(SandboxError::io("copy", &index))?;
    for dir in [&layout.upper_dir, &layout.overlay_work_dir] {
        fs::create_dir_all(dir).map_err(SandboxError::io("create", dir))?;
    }
    let text = format!("{}\n", base.display());
    fs::write(&layout.base_file, text).map_err(SandboxError::io("write", &layout.base_file))?;
    Ok((oid, super::overlay::mount(layout, &work_of(&base))?))
}

/// Lets the owner remove what the kernel left in an overlay's work directory (a directory
/// without permissions): a removal outside this process's namespace must be able to read it.
pub(crate) fn open_overlay_work(layout: &Layout) {
    // One work directory per mount (`overlay::mount`), and the one an earlier version used.
    super::overlay::open_scratch(&layout.overlay_work_dir);
    for mount in fs::read_dir(&layout.overlay_work_dir).into_iter().flatten().flatten() {
        super::overlay::open_scratch(&mount.path());
    }
}

/// The keys of the bases that active or half-created sandboxes name.
fn in_use(store: &Store) -> Result<BTreeSet<String>, SandboxError> {
    let mut used = BTreeSet::new();
    for record in store.all_sandboxes()? {
        if matches!(record.state, SandboxState::Active | SandboxState::Creating)
            && let Some(base) = record.layout().shared_base()
            && let Some(name) = base.file_name()
        {
            used.insert(name.to_string_lossy().into_owned());
        }
    }
    Ok(used)
}

/// Removes the shared bases under `root` that no active or half-created sandbox names, each
/// under its lock, so a sandbox being created at that base either finds it or builds it
/// again. Returns the removed directories.
///
/// # Errors
/// Store and I/O errors.
pub fn sweep(store: &Store, root: &Path) -> Result<Vec<String>, SandboxError> {
    let bases = root.join(BASES_DIR);
    let Ok(entries) = fs::read_dir(&bases) else {
        return Ok(Vec::new());
    };
    let keys: Vec<String> = entries
        .flatten()
        .filter(|e| e.path().is_dir() && !e.file_name().to_string_lossy().starts_with('.'))
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .map(|n| n.strip_suffix(".building").unwrap_or(&n).to_string())
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    let mut removed = Vec::new();
    for key in keys {
        if in_use(store)?.contains(&key) {
            continue;
        }
        let _held = lock(&bases, &key)?;
        // Read again under the lock: a sandbox may have named the base meanwhile.
        if in_use(store)?.contains(&key) {
            continue;
        }
        for dir in [bases.join(&key), bases.join(format!("{key}.building"))] {
            if dir.exists() {
                take_away(&bases, &dir)?;
                removed.push(dir.display().to_string());
            }
        }
    }
    remove_stale_trash(&bases.join(TRASH_DIR));
    Ok(removed)
}

/// Where removed bases wait for their deletion, beneath the bases directory.
const TRASH_DIR: &str = ".removing";

/// Takes the base directory `dir` away at once (renamed into [`TRASH_DIR`]) and deletes it in
/// the background: a shared checkout is as large as the repository, and the command that
/// found it unused should not wait for every file to go.
fn take_away(bases: &Path, dir: &Path) -> Result<(), SandboxError> {
    let trash_dir = bases.join(TRASH_DIR);
    let name = dir.file_name().unwrap_or_default().to_string_lossy();
    let trash = trash_dir.join(format!("{name}-{}", crate::domain::id::Id::generate()));
    let moved = fs::create_dir_all(&trash_dir).and_then(|()| fs::rename(dir, &trash));
    match moved {
        Ok(()) => super::remove_in_background(&trash),
        Err(_) => remove_dir_if_exists(dir),
    }
}

/// Deletes what an interrupted background deletion left in `trash_dir`: entries moved there
/// more than an hour ago, which no deletion still works on.
fn remove_stale_trash(trash_dir: &Path) {
    use std::os::unix::fs::MetadataExt;
    let Ok(entries) = fs::read_dir(trash_dir) else {
        return;
    };
    let hour_ago = jiff::Timestamp::now().as_second() - 3600;
    for e in entries.flatten() {
        if e.metadata().is_ok_and(|m| m.ctime() < hour_ago) {
            let _ = super::remove_in_background(&e.path());
        }
    }
}
