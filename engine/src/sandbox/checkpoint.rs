//! Checkpoints and exact rollback (spec section 11 "Checkpointing in Execute").
//!
//! A snapshot updates the sandbox's private index from the work tree in one pass (modified,
//! new and deleted files, including whatever shell commands did; ignored files are neither
//! captured nor restored; submodules stay gitlinks) and writes it as a tree. A checkpoint
//! commits that tree on the plan branch of every active sandbox of the plan and keeps a ref per
//! checkpoint, so later rollbacks never lose an earlier state. Rolling back checks the
//! checkpoint's tree out with `force` and `remove_untracked`, moves the plan branch there and
//! then verifies that a new snapshot has exactly the checkpoint's tree hash.
//!
//! Empty directories are not part of a snapshot (as in git); see `docs/decisions.md`.

use std::path::PathBuf;

use git2::{Oid, Repository, build::CheckoutBuilder};
use jiff::Timestamp;
use serde::Serialize;

use super::{
    CHECKPOINT_REF_PREFIX, CheckpointId, PLAN_REF, Sandbox, SandboxError, Sandboxes, signature,
};
use crate::domain::id::Id;
use crate::domain::lifecycle::PlanStatus;
pub use crate::domain::sandbox::{CheckpointRecord, CheckpointState};
use crate::store::Store;

mod filters;
mod index_file;
mod overlay_tree;
mod upper_cache;

use filters::Filters;

/// Updates the private index from the work tree and writes it as a tree; returns the tree id.
/// The index file is rewritten only when something changed.
///
/// # Errors
/// [`SandboxError::Git`].
pub fn snapshot(repo: &Repository) -> Result<Oid, SandboxError> {
    snapshot_with(repo, false)
}

/// As [`snapshot`], always rewriting the index file (checkpoints and rollbacks do, so the
/// stored tree cache stays valid and later snapshots rebuild only changed directories).
/// A sandbox that shares its base's checkout, held mounted by this process, is read from its
/// overlay's upper directory instead, and its index is left as it is ([`overlay_tree`]).
///
/// # Errors
/// [`SandboxError::Git`].
pub fn snapshot_with(repo: &Repository, persist: bool) -> Result<Oid, SandboxError> {
    // A sandbox that shares its base's checkout knows what it wrote: its upper directory.
    if let Some(tree) = overlay_tree::tree(repo)? {
        return Ok(tree);
    }
    scan(repo, persist)
}

/// As [`snapshot_with`], comparing the whole work tree with the index whatever the sandbox.
fn scan(repo: &Repository, persist: bool) -> Result<Oid, SandboxError> {
    // A snapshot that may leave the index as it is compares the work tree with the index file
    // read directly (see `index_file`); when nothing differs and the index caches its whole
    // tree, that tree is the snapshot, as libgit2's `write_tree` would return it, and libgit2
    // never opens the index. Its callers hold the sandbox lock, so the index read here is the
    // one libgit2 reads below when something did change.
    let known = if persist {
        None
    } else {
        std::fs::read(repo.path().join("index"))
            .ok()
            .and_then(|bytes| index_file::parse(&bytes))
    };
    let (removed, added) = match known {
        Some(file) => {
            let changes = work_tree_changes(repo, &file.tracked, &file.gitlinks)?;
            if let (Some(tree), ([], [])) = (file.tree, (&changes.0[..], &changes.1[..])) {
                super::written::synced(repo.path(), tree);
                return Ok(tree);
            }
            changes
        }
        None => {
            let index = repo
                .index()
                .map_err(SandboxError::git("opening the index"))?;
            workdir_changes(repo, &index)?
        }
    };
    let mut index = repo
        .index()
        .map_err(SandboxError::git("opening the index"))?;
    for path in &removed {
        index.remove_path(path).map_err(SandboxError::git(format!(
            "removing {} from the index",
            path.display()
        )))?;
    }
    for path in &added {
        index.add_path(path).map_err(SandboxError::git(format!(
            "adding {} to the index",
            path.display()
        )))?;
    }
    let tree = index
        .write_tree()
        .map_err(SandboxError::git("writing the snapshot tree"))?;
    // Written after the tree, so the index keeps a valid tree cache and the next snapshot
    // only rebuilds the trees of directories that change.
    if persist || !removed.is_empty() || !added.is_empty() {
        index
            .write()
            .map_err(SandboxError::git("writing the index"))?;
    }
    super::written::synced(repo.path(), tree);
    Ok(tree)
}

/// As [`snapshot_with`] (the index file always rewritten), looking only at the paths written
/// since the index last matched the work tree when this process knows them
/// ([`super::written`]): the paths the file tools noted, since a full snapshot or the closing
/// snapshot of a shell command. Falls back to the full scan whenever that set is unknown or
/// a noted path cannot be looked at alone (a parent replaced by a link or a file, a
/// submodule, something that is neither a file, a link nor a directory).
///
/// # Errors
/// [`SandboxError::Git`].
pub fn snapshot_written(repo: &Repository) -> Result<Oid, SandboxError> {
    if let Some(tree) = overlay_tree::tree(repo)? {
        return Ok(tree);
    }
    if let Some(since) = super::written::since_sync(repo.path()) {
        if since.paths.is_empty() {
            return Ok(since.tree);
        }
        if let Some(tree) = tree_updated(repo, since.tree, &since.paths)? {
            super::written::advanced(repo.path(), tree);
            return Ok(tree);
        }
        let mut all = since.behind_index;
        all.extend(since.paths);
        if let Some(tree) = snapshot_paths(repo, &all)? {
            return Ok(tree);
        }
    }
    snapshot_with(repo, true)
}

/// The tree of a sandbox's work tree just before a command (a shell command, a command tool,
/// an MCP tool) runs in it, whose writes nobody notes: after this the sandbox's written set
/// is unknown until [`after_command`] (docs/sandbox.md, "Checkpoints that cost what changed").
/// When this process knows what was written since the index last matched the work tree, only
/// those paths are looked at ([`snapshot_written`]; nothing at all when nothing was written,
/// as after the step's start checkpoint or another command's closing snapshot).
///
/// # Errors
/// [`SandboxError::Git`].
pub fn before_command(repo: &Repository) -> Result<Oid, SandboxError> {
    let tree = snapshot_written(repo)?;
    super::written::forget(repo.path());
    Ok(tree)
}

/// The tree of a sandbox's work tree after a command ran in it (see [`before_command`]): a
/// full snapshot, which makes the written set known again unless `may_still_write` (an
/// unconfined command may have left processes behind; an MCP server outlives its call).
///
/// # Errors
/// [`SandboxError::Git`].
pub fn after_command(repo: &Repository, may_still_write: bool) -> Result<Oid, SandboxError> {
    let tree = snapshot(repo)?;
    if may_still_write {
        super::written::forget(repo.path());
    }
    Ok(tree)
}

/// The last snapshot's tree with the written files (and links) hashed again and the gone ones
/// removed, without reading or writing the index. `None`: a path is a directory, or was one,
/// or lies beneath something that is not a plain directory (the index answers those).
fn tree_updated(
    repo: &Repository,
    base: Oid,
    paths: &std::collections::BTreeSet<PathBuf>,
) -> Result<Option<Oid>, SandboxError> {
    use git2::ObjectType;
    use std::os::unix::ffi::OsStrExt;
    let work = repo
        .workdir()
        .ok_or_else(|| SandboxError::Checkpoint("the sandbox has no work tree".into()))?
        .to_path_buf();
    let base_tree = repo
        .find_tree(base)
        .map_err(SandboxError::git("reading the last snapshot's tree"))?;
    let mut ignores = IgnoreChains::new(&work);
    let mut filters = Filters::new(repo, &work);
    let mut update = git2::build::TreeUpdateBuilder::new();
    for rel in paths {
        if rel
            .components()
            .any(|c| crate::sandbox::confined::is_git_alias(c.as_os_str().as_bytes()))
        {
            continue;
        }
        // Every parent must be a plain directory in the tree (or absent from it).
        let mut at = PathBuf::new();
        for c in rel.components() {
            at.push(c);
            if let Ok(e) = base_tree.get_path(&at) {
                let last = at.as_path() == rel.as_path();
                if e.filemode() == 0o160000 || (!last && e.kind() != Some(ObjectType::Tree)) {
                    return Ok(None);
                }
                if last && e.kind() == Some(ObjectType::Tree) {
                    return Ok(None);
                }
            }
        }
        let in_tree = base_tree.get_path(rel).is_ok();
        match look(&work, rel) {
            None | Some(Now::Dir) => return Ok(None),
            Some(Now::Gone) => {
                if in_tree {
                    update.remove(rel);
                }
            }
            Some(Now::File) => {
                if !in_tree && !ignores.file_counts(rel.as_os_str().as_bytes()) {
                    continue;
                }
                let (blob, mode) = stored(repo, &work, rel, &mut filters)?;
                update.upsert(rel, blob, mode);
            }
        }
    }
    let tree = update
        .create_updated(repo, &base_tree)
        .map_err(SandboxError::git("writing the snapshot tree"))?;
    Ok(Some(tree))
}

/// Stores the file or link at `rel` beneath `work` as a blob; returns it with its tree mode.
/// `filters`: the snapshot's answers for `repo` ([`Filters`]).
fn stored(
    repo: &Repository,
    work: &std::path::Path,
    rel: &std::path::Path,
    filters: &mut Filters<'_>,
) -> Result<(Oid, git2::FileMode), SandboxError> {
    use git2::FileMode;
    use std::os::unix::ffi::OsStrExt;
    use std::os::unix::fs::PermissionsExt;
    let abs = work.join(rel);
    let meta = std::fs::symlink_metadata(&abs).map_err(SandboxError::io("read", &abs))?;
    if meta.file_type().is_symlink() {
        let target = std::fs::read_link(&abs).map_err(SandboxError::io("read", &abs))?;
        let blob = repo
            .blob(target.as_os_str().as_bytes())
            .map_err(SandboxError::git("storing a link"))?;
        return Ok((blob, FileMode::Link));
    }
    let blob = match filters
        .none_for(rel)
        .then(|| stored_already(repo, &abs))
        .flatten()
    {
        Some(blob) => blob,
        None => repo
            .blob_path(&abs)
            .map_err(SandboxError::git(format!("storing {}", rel.display())))?,
    };
    let exec = meta.permissions().mode() & 0o100 != 0;
    let mode = if exec {
        FileMode::BlobExecutable
    } else {
        FileMode::Blob
    };
    Ok((blob, mode))
}

/// The blob of the file at `abs`, which git stores unfiltered, when the repository has it
/// already. Hashing reads the file once, where libgit2's `blob_path` deflates it into a
/// temporary object file that it removes again when the object exists: a snapshot after a
/// checkpoint stores nothing new.
fn stored_already(repo: &Repository, abs: &std::path::Path) -> Option<Oid> {
    let blob = Oid::hash_file(git2::ObjectType::Blob, abs).ok()?;
    repo.odb().ok()?.exists(blob).then_some(blob)
}

/// What one written path is now.
enum Now {
    /// Gone (or beneath something that is no longer a directory).
    Gone,
    /// A regular file or a symbolic link.
    File,
    /// A real directory.
    Dir,
}

/// Looks at one written path beneath the work tree without following links. `None`: it cannot
/// be looked at alone (a parent is a link or a file; an unusual kind of file).
fn look(work: &std::path::Path, rel: &std::path::Path) -> Option<Now> {
    let mut at = work.to_path_buf();
    let parts: Vec<_> = rel.components().collect();
    for (i, part) in parts.iter().enumerate() {
        at.push(part);
        let Ok(m) = std::fs::symlink_metadata(&at) else {
            return Some(Now::Gone);
        };
        let kind = m.file_type();
        if i + 1 == parts.len() {
            return if kind.is_dir() {
                Some(Now::Dir)
            } else if kind.is_file() || kind.is_symlink() {
                Some(Now::File)
            } else {
                None
            };
        }
        if !kind.is_dir() {
            return None;
        }
    }
    None
}

/// Updates the index for the written `paths` only (each a file, a link or a directory whose
/// whole subtree is looked at), writes the tree and the index; the rest of the index is
/// trusted to match the work tree. `None`: a path cannot be looked at alone (see
/// [`snapshot_written`]).
fn snapshot_paths(
    repo: &Repository,
    paths: &std::collections::BTreeSet<PathBuf>,
) -> Result<Option<Oid>, SandboxError> {
    use std::os::unix::ffi::OsStrExt;
    let work = repo
        .workdir()
        .ok_or_else(|| SandboxError::Checkpoint("the sandbox has no work tree".into()))?
        .to_path_buf();
    let mut index = repo
        .index()
        .map_err(SandboxError::git("opening the index"))?;
    let mut ignores = IgnoreChains::new(&work);
    for rel in paths {
        let bytes = rel.as_os_str().as_bytes();
        if rel
            .components()
            .any(|c| crate::sandbox::confined::is_git_alias(c.as_os_str().as_bytes()))
        {
            // Never part of a snapshot (the walk skips `.git` entries).
            continue;
        }
        if under_gitlink(&index, rel) {
            return Ok(None);
        }
        let Some(now) = look(&work, rel) else {
            return Ok(None);
        };
        let tracked = index.get_path(rel, 0).is_some();
        let remove_below = |index: &mut git2::Index| {
            index.remove_dir(rel, 0).map_err(SandboxError::git(format!(
                "removing {} from the index",
                rel.display()
            )))
        };
        match now {
            Now::Gone => {
                if tracked {
                    remove_path(&mut index, rel)?;
                }
                remove_below(&mut index)?;
            }
            Now::File => {
                remove_below(&mut index)?;
                if tracked || ignores.file_counts(bytes) {
                    add_path(&mut index, rel)?;
                }
            }
            Now::Dir => {
                if tracked {
                    remove_path(&mut index, rel)?;
                }
                if !subtree(&mut index, &work, rel, &mut ignores)? {
                    return Ok(None);
                }
            }
        }
    }
    let tree = index
        .write_tree()
        .map_err(SandboxError::git("writing the snapshot tree"))?;
    index
        .write()
        .map_err(SandboxError::git("writing the index"))?;
    super::written::synced(repo.path(), tree);
    Ok(Some(tree))
}

fn remove_path(index: &mut git2::Index, rel: &std::path::Path) -> Result<(), SandboxError> {
    index.remove_path(rel).map_err(SandboxError::git(format!(
        "removing {} from the index",
        rel.display()
    )))
}

fn add_path(index: &mut git2::Index, rel: &std::path::Path) -> Result<(), SandboxError> {
    index.add_path(rel).map_err(SandboxError::git(format!(
        "adding {} to the index",
        rel.display()
    )))
}

/// Whether `rel` or one of its parents is a submodule's gitlink.
fn under_gitlink(index: &git2::Index, rel: &std::path::Path) -> bool {
    let mut at = PathBuf::new();
    rel.components().any(|c| {
        at.push(c);
        index.get_path(&at, 0).is_some_and(|e| e.mode == 0o160000)
    })
}

/// A written directory: its tracked files are looked at again (gone, replaced or possibly
/// modified) and its untracked files found as the full walk finds them. `false`: something
/// beneath it cannot be looked at alone.
fn subtree(
    index: &mut git2::Index,
    work: &std::path::Path,
    rel: &std::path::Path,
    ignores: &mut IgnoreChains,
) -> Result<bool, SandboxError> {
    use std::collections::HashSet;
    use std::os::unix::ffi::OsStrExt;
    let mut prefix = rel.as_os_str().as_bytes().to_vec();
    prefix.push(b'/');
    let mut below = Vec::new();
    let mut gitlinks = HashSet::new();
    for e in index.iter() {
        if e.path.starts_with(&prefix) {
            if e.mode == 0o160000 {
                gitlinks.insert(e.path);
            } else {
                below.push(PathBuf::from(std::ffi::OsStr::from_bytes(&e.path)));
            }
        }
    }
    for path in &below {
        match look(work, path) {
            None => return Ok(false),
            Some(Now::File) => add_path(index, path)?,
            Some(Now::Gone | Now::Dir) => remove_path(index, path)?,
        }
    }
    let known: HashSet<&[u8]> = below.iter().map(|p| p.as_os_str().as_bytes()).collect();
    let dir = rel.as_os_str().as_bytes();
    if ignores.inside(dir).is_some() {
        // The walk reads the directory's own `.gitignore` when it enters it.
        let parent = dir
            .iter()
            .rposition(|b| *b == b'/')
            .map_or(&b""[..], |i| &dir[..i]);
        let chain = ignores.inside(parent).unwrap_or_default();
        for path in untracked_under(work, dir, chain, &known, &gitlinks) {
            add_path(index, &path)?;
        }
    }
    Ok(true)
}

/// The `.gitignore` files that apply inside each directory, gathered as the full walk gathers
/// them (deepest last), for written paths looked at one by one.
struct IgnoreChains {
    work: PathBuf,
    /// `None`: the walk never enters the directory (it or a parent is ignored, or a `.git`).
    dirs:
        std::collections::HashMap<Vec<u8>, Option<Vec<std::rc::Rc<ignore::gitignore::Gitignore>>>>,
}

impl IgnoreChains {
    fn new(work: &std::path::Path) -> Self {
        Self {
            work: work.to_path_buf(),
            dirs: Default::default(),
        }
    }

    /// The chain that applies to the entries of directory `dir` (`b""`: the root), or `None`
    /// when the walk would not enter it.
    fn inside(&mut self, dir: &[u8]) -> Option<Vec<std::rc::Rc<ignore::gitignore::Gitignore>>> {
        use std::ffi::OsStr;
        use std::os::unix::ffi::OsStrExt;
        if let Some(known) = self.dirs.get(dir) {
            return known.clone();
        }
        let chain = if dir.is_empty() {
            Some(Vec::new())
        } else {
            let (parent, name) = match dir.iter().rposition(|b| *b == b'/') {
                Some(i) => (&dir[..i], &dir[i + 1..]),
                None => (&b""[..], dir),
            };
            self.inside(parent).filter(|chain| {
                !crate::sandbox::confined::is_git_alias(name)
                    && !ignored(chain, &self.work.join(OsStr::from_bytes(dir)), true)
            })
        };
        let chain = chain.map(|mut chain| {
            let abs = self.work.join(OsStr::from_bytes(dir));
            if std::fs::symlink_metadata(abs.join(".gitignore")).is_ok_and(|m| m.is_file()) {
                let mut builder = ignore::gitignore::GitignoreBuilder::new(&abs);
                builder.add(abs.join(".gitignore"));
                if let Ok(gi) = builder.build() {
                    chain.push(std::rc::Rc::new(gi));
                }
            }
            chain
        });
        self.dirs.insert(dir.to_vec(), chain.clone());
        chain
    }

    /// Whether an untracked file at `rel` belongs in a snapshot (the walk would find it and no
    /// `.gitignore` excludes it).
    fn file_counts(&mut self, rel: &[u8]) -> bool {
        use std::ffi::OsStr;
        use std::os::unix::ffi::OsStrExt;
        let parent = match rel.iter().rposition(|b| *b == b'/') {
            Some(i) => &rel[..i],
            None => &b""[..],
        };
        self.inside(parent)
            .is_some_and(|chain| !ignored(&chain, &self.work.join(OsStr::from_bytes(rel)), false))
    }
}

/// Whether the deepest `.gitignore` with an opinion on `path` ignores it.
fn ignored(
    chain: &[std::rc::Rc<ignore::gitignore::Gitignore>],
    path: &std::path::Path,
    is_dir: bool,
) -> bool {
    use ignore::Match;
    for gi in chain.iter().rev() {
        match gi.matched(path, is_dir) {
            Match::Ignore(_) => return true,
            Match::Whitelist(_) => return false,
            Match::None => {}
        }
    }
    false
}

/// One index entry's stat data, as compared with the work tree.
struct Tracked {
    path: PathBuf,
    mode: u32,
    size: u32,
    mtime: (i32, u32),
    ctime: (i32, u32),
    ino: u32,
}

/// What differs between the index and the work tree: paths to remove from the index (tracked
/// and gone, or replaced by a directory) and paths to (re)add (new and not ignored, or
/// possibly modified). Tracked entries are compared by `lstat` in parallel (size, times, inode,
/// kind, executable bit; entries written in the same clock tick as the index are always
/// rehashed); new files come from a parallel walk that honours `.gitignore` files and skips
/// `.git` directories. Submodule gitlinks are left as they are. Being eager is safe: a path
/// re-added with unchanged content keeps its blob id.
fn workdir_changes(
    repo: &Repository,
    index: &git2::Index,
) -> Result<(Vec<PathBuf>, Vec<PathBuf>), SandboxError> {
    use std::collections::HashSet;
    use std::os::unix::ffi::OsStrExt;

    let mut tracked = Vec::with_capacity(index.len());
    let mut gitlinks: HashSet<Vec<u8>> = HashSet::new();
    for e in index.iter() {
        if e.mode == 0o160000 {
            gitlinks.insert(e.path);
            continue;
        }
        tracked.push(Tracked {
            path: PathBuf::from(std::ffi::OsStr::from_bytes(&e.path)),
            mode: e.mode,
            size: e.file_size,
            mtime: (e.mtime.seconds(), e.mtime.nanoseconds()),
            ctime: (e.ctime.seconds(), e.ctime.nanoseconds()),
            ino: e.ino,
        });
    }
    work_tree_changes(repo, &tracked, &gitlinks)
}

/// [`workdir_changes`] for the index's `tracked` entries and `gitlinks`.
fn work_tree_changes(
    repo: &Repository,
    tracked: &[Tracked],
    gitlinks: &std::collections::HashSet<Vec<u8>>,
) -> Result<(Vec<PathBuf>, Vec<PathBuf>), SandboxError> {
    use std::collections::HashSet;
    use std::os::unix::ffi::OsStrExt;
    use std::os::unix::fs::MetadataExt;

    let work = repo
        .workdir()
        .ok_or_else(|| SandboxError::Checkpoint("the sandbox has no work tree".into()))?
        .to_path_buf();
    let index_time = std::fs::metadata(repo.path().join("index"))
        .ok()
        .map(|m| (m.mtime(), m.mtime_nsec()));
    let known: HashSet<&[u8]> = tracked
        .iter()
        .map(|t| t.path.as_os_str().as_bytes())
        .collect();
    let threads = super::parallel::threads();
    let chunk = tracked.len().div_ceil(threads).max(1);
    // The walk for untracked files runs beside the comparison of tracked ones: it is one
    // thread's work, which would otherwise leave the other cores idle after the comparison.
    let (compared, mut untracked) = std::thread::scope(|scope| {
        let walk = scope.spawn(|| untracked_files(&work, &known, gitlinks));
        let handles: Vec<_> = tracked
            .chunks(chunk)
            .map(|part| {
                let work = &work;
                scope.spawn(move || {
                    use rustix::fs::{AtFlags, Mode, OFlags, ResolveFlags};
                    let mut removed = Vec::new();
                    let mut changed = Vec::new();
                    let Ok(root) = rustix::fs::open(
                        work,
                        OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
                        Mode::empty(),
                    ) else {
                        return (part.iter().map(|t| t.path.clone()).collect(), Vec::new());
                    };
                    // The directory of the previous entry: entries are in path order, so most
                    // lookups reuse it. Parents are opened without following any symbolic
                    // link, so a tracked directory replaced by a link counts as gone.
                    let mut parent: Option<(Vec<u8>, Option<std::os::fd::OwnedFd>)> = None;
                    for t in part {
                        let bytes = t.path.as_os_str().as_bytes();
                        let (dir, name) = match bytes.iter().rposition(|b| *b == b'/') {
                            Some(i) => (&bytes[..i], &bytes[i + 1..]),
                            None => (&b""[..], bytes),
                        };
                        if parent.as_ref().is_none_or(|(d, _)| d.as_slice() != dir) {
                            let dir_path = if dir.is_empty() { &b"."[..] } else { dir };
                            let fd = rustix::fs::openat2(
                                &root,
                                std::ffi::OsStr::from_bytes(dir_path),
                                OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
                                Mode::empty(),
                                ResolveFlags::BENEATH | ResolveFlags::NO_SYMLINKS,
                            )
                            .ok();
                            parent = Some((dir.to_vec(), fd));
                        }
                        let st = match parent.as_ref().and_then(|(_, fd)| fd.as_ref()) {
                            Some(fd) => rustix::fs::statat(
                                fd,
                                std::ffi::OsStr::from_bytes(name),
                                AtFlags::SYMLINK_NOFOLLOW,
                            )
                            .ok(),
                            None => None,
                        };
                        let Some(st) = st else {
                            removed.push(t.path.clone());
                            continue;
                        };
                        let kind = st.st_mode & 0o170000;
                        if kind == 0o040000 {
                            removed.push(t.path.clone());
                            continue;
                        }
                        let mtime = (st.st_mtime, st.st_mtime_nsec as i64);
                        let exec_now = kind == 0o100000 && st.st_mode & 0o100 != 0;
                        let racy = index_time.is_none_or(|it| mtime >= it);
                        let differs = (kind == 0o120000) != (t.mode == 0o120000)
                            || (t.mode == 0o100755) != exec_now
                            || st.st_size as u32 != t.size
                            || (st.st_mtime as i32, st.st_mtime_nsec as u32) != t.mtime
                            || (st.st_ctime as i32, st.st_ctime_nsec as u32) != t.ctime
                            || st.st_ino as u32 != t.ino;
                        if differs || racy {
                            changed.push(t.path.clone());
                        }
                    }
                    (removed, changed)
                })
            })
            .collect();
        let compared: Vec<(Vec<PathBuf>, Vec<PathBuf>)> = handles.into_iter().map(joined).collect();
        (compared, joined(walk))
    });
    let mut removed = Vec::new();
    let mut added = Vec::new();
    for (r, c) in compared {
        removed.extend(r);
        added.extend(c);
    }
    untracked.sort();
    removed.sort();
    added.sort();
    added.extend(untracked);
    Ok((removed, added))
}

/// What a scoped thread returned (its panic carried on).
fn joined<T>(handle: std::thread::ScopedJoinHandle<'_, T>) -> T {
    handle
        .join()
        .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
}

/// Files in the work tree that the index does not track and `.gitignore` files do not
/// exclude. One pass over the directories with `getdents` (no `stat` unless the file system
/// does not report entry types); ignore rules are consulted only for names the index does not
/// know, deepest `.gitignore` first, as git does. Ignored directories, `.git` entries and
/// submodule gitlinks are not entered; symbolic links are never followed.
fn untracked_files(
    work: &std::path::Path,
    known: &std::collections::HashSet<&[u8]>,
    gitlinks: &std::collections::HashSet<Vec<u8>>,
) -> Vec<PathBuf> {
    untracked_under(work, b"", Vec::new(), known, gitlinks)
}

/// As [`untracked_files`], beneath directory `start` (`b""`: the root) whose applicable
/// `.gitignore` files, from its parents, are `chain`.
fn untracked_under(
    work: &std::path::Path,
    start: &[u8],
    chain: Vec<std::rc::Rc<ignore::gitignore::Gitignore>>,
    known: &std::collections::HashSet<&[u8]>,
    gitlinks: &std::collections::HashSet<Vec<u8>>,
) -> Vec<PathBuf> {
    use ignore::gitignore::GitignoreBuilder;
    use rustix::fs::{AtFlags, FileType, Mode, OFlags};
    use std::ffi::OsStr;
    use std::os::unix::ffi::OsStrExt;
    use std::rc::Rc;

    let mut out = Vec::new();
    let mut stack: Vec<(Vec<u8>, Vec<Rc<ignore::gitignore::Gitignore>>)> =
        vec![(start.to_vec(), chain)];
    while let Some((rel, mut chain)) = stack.pop() {
        let abs = work.join(OsStr::from_bytes(&rel));
        let Ok(fd) = rustix::fs::open(
            &abs,
            OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::empty(),
        ) else {
            continue;
        };
        let Ok(mut dir) = rustix::fs::Dir::read_from(&fd) else {
            continue;
        };
        // The names, one after another in `names`, each entry its end there and its kind (one
        // allocation per directory, not per name).
        let mut names = Vec::new();
        let mut entries = Vec::new();
        while let Some(Ok(entry)) = dir.read() {
            let name = entry.file_name().to_bytes();
            if name == b"." || name == b".." {
                continue;
            }
            let mut kind = entry.file_type();
            if kind == FileType::Unknown {
                kind = rustix::fs::statat(&fd, entry.file_name(), AtFlags::SYMLINK_NOFOLLOW)
                    .map(|st| FileType::from_raw_mode(st.st_mode))
                    .unwrap_or(FileType::Unknown);
            }
            names.extend_from_slice(name);
            entries.push((names.len(), kind));
        }
        let named = |i: usize| {
            let start = if i == 0 { 0 } else { entries[i - 1].0 };
            (&names[start..entries[i].0], entries[i].1)
        };
        if (0..entries.len())
            .map(named)
            .any(|(n, k)| n == b".gitignore" && k == FileType::RegularFile)
        {
            let mut builder = GitignoreBuilder::new(&abs);
            builder.add(abs.join(".gitignore"));
            if let Ok(gi) = builder.build() {
                chain.push(Rc::new(gi));
            }
        }
        // Each entry's path is made in the same buffer and copied only when kept.
        let mut child = Vec::with_capacity(rel.len() + 64);
        for (name, kind) in (0..entries.len()).map(named) {
            if crate::sandbox::confined::is_git_alias(name) {
                continue;
            }
            child.clear();
            child.extend_from_slice(&rel);
            if !child.is_empty() {
                child.push(b'/');
            }
            child.extend_from_slice(name);
            let is_dir = kind == FileType::Directory;
            if is_dir && gitlinks.contains(&child) {
                continue;
            }
            if !is_dir && known.contains(child.as_slice()) {
                continue;
            }
            if !matches!(
                kind,
                FileType::Directory | FileType::RegularFile | FileType::Symlink
            ) {
                continue;
            }
            if ignored(&chain, &work.join(OsStr::from_bytes(&child)), is_dir) {
                continue;
            }
            if is_dir {
                stack.push((child.clone(), chain.clone()));
            } else {
                out.push(PathBuf::from(OsStr::from_bytes(&child)));
            }
        }
    }
    out
}

/// The number of files that differ between two trees.
///
/// # Errors
/// [`SandboxError::Git`].
pub fn count_changed(repo: &Repository, old: Oid, new: Oid) -> Result<u64, SandboxError> {
    if old == new {
        return Ok(0);
    }
    let old = repo
        .find_tree(old)
        .map_err(SandboxError::git("reading a tree"))?;
    let new = repo
        .find_tree(new)
        .map_err(SandboxError::git("reading a tree"))?;
    let diff = repo
        .diff_tree_to_tree(Some(&old), Some(&new), None)
        .map_err(SandboxError::git("comparing trees"))?;
    Ok(diff.deltas().len() as u64)
}

/// The tree of the commit the plan branch points to.
fn head_commit(repo: &Repository) -> Result<git2::Commit<'_>, SandboxError> {
    repo.find_reference(PLAN_REF)
        .and_then(|r| r.peel_to_commit())
        .map_err(SandboxError::git("reading the plan branch"))
}

/// What a checkpoint is for.
#[derive(Debug, Clone, Default)]
pub struct CheckpointRequest {
    /// Step description.
    pub step: Option<String>,
    /// Decision id.
    pub decision_id: Option<String>,
    /// Label (`start`, `end`).
    pub label: String,
    /// When true and nothing changed since the latest checkpoint, that checkpoint is returned
    /// instead of a new one (used for the start of a step that follows another step's end).
    pub reuse_if_unchanged: bool,
    /// Look only at the paths written since each sandbox's index last matched its work tree,
    /// when this process knows them ([`snapshot_written`]); false: scan every work tree.
    pub written_only: bool,
}

/// Takes a checkpoint of every active sandbox of the plan. Returns `None` when the plan has no
/// sandbox yet (there is nothing to capture).
///
/// # Errors
/// Git, I/O and store errors.
pub fn create(
    store: &mut Store,
    sandboxes: &Sandboxes,
    plan_id: &Id,
    request: &CheckpointRequest,
) -> Result<Option<CheckpointRecord>, SandboxError> {
    let active = sandboxes.active(store, plan_id)?;
    if active.is_empty() {
        return Ok(None);
    }
    let latest = store.latest_checkpoint(plan_id)?;
    let mut locks = Vec::new();
    let mut snaps = Vec::new();
    let mut files_changed = 0;
    let mut unchanged = true;
    for sb in &active {
        locks.push(sb.lock()?);
        let repo = sb.repo()?;
        let tree = if request.written_only {
            snapshot_written(&repo)?
        } else {
            snapshot_with(&repo, true)?
        };
        let (parent_id, parent_tree) = {
            let parent = head_commit(&repo)?;
            (parent.id(), parent.tree_id())
        };
        files_changed += count_changed(&repo, parent_tree, tree)?;
        let recorded = latest.as_ref().and_then(|cp| {
            cp.states
                .iter()
                .find(|s| s.sandbox_id == sb.record.sandbox_id)
                .map(|s| s.commit_oid == parent_id.to_string())
        });
        if parent_tree != tree || recorded != Some(true) {
            unchanged = false;
        }
        snaps.push((sb, repo, tree));
    }
    if request.reuse_if_unchanged
        && unchanged
        && let Some(latest) = latest
    {
        return Ok(Some(latest));
    }
    let id = CheckpointId::generate();
    let sig = signature()?;
    let mut states = Vec::new();
    for (sb, repo, tree) in &snaps {
        let parent = head_commit(repo)?;
        let tree_obj = repo
            .find_tree(*tree)
            .map_err(SandboxError::git("reading the snapshot tree"))?;
        let message = format!(
            "Checkpoint {id}: {}\n\nPlan: {plan_id}\nResource: {}\nStep: {}\n",
            request.label,
            sb.record.resource_name,
            request.step.as_deref().unwrap_or("-")
        );
        let commit = repo
            .commit(Some(PLAN_REF), &sig, &sig, &message, &tree_obj, &[&parent])
            .map_err(SandboxError::git("committing the checkpoint"))?;
        repo.reference(
            &format!("{CHECKPOINT_REF_PREFIX}{id}"),
            commit,
            true,
            "checkpoint",
        )
        .map_err(SandboxError::git("creating the checkpoint ref"))?;
        sandboxes.keep(sb, commit, &format!("checkpoints/{id}"))?;
        states.push(CheckpointState {
            sandbox_id: sb.record.sandbox_id,
            commit_oid: commit.to_string(),
            tree_oid: tree.to_string(),
        });
    }
    let record = CheckpointRecord {
        checkpoint_id: id,
        plan_id: *plan_id,
        seq: 0,
        step: request.step.clone(),
        decision_id: request.decision_id.clone(),
        label: request.label.clone(),
        files_changed,
        tool_call_seq: store.max_tool_call_seq(plan_id)?,
        created_at: Timestamp::now(),
        discarded_at: None,
        states,
    };
    let record = store.insert_checkpoint(&record)?;
    drop(locks);
    Ok(Some(record))
}

/// Records the plan's base as its first checkpoint (label `base`), when the plan has no
/// checkpoint yet and no sandbox to capture: Execute calls it where step 1 starts before any
/// sandbox exists, so that `plan rollback` can return to the state before step 1. The record
/// names no sandbox state: rolling back to it restores every sandbox to its base commit (as
/// for any sandbox a checkpoint does not name). It names no decision either, so attribution
/// and a step's own start and end are not affected. Returns `None` when the plan already
/// has a checkpoint.
///
/// # Errors
/// Store errors.
pub fn record_base(
    store: &mut Store,
    plan_id: &Id,
    step: &str,
) -> Result<Option<CheckpointRecord>, SandboxError> {
    if store.latest_checkpoint(plan_id)?.is_some() {
        return Ok(None);
    }
    let record = CheckpointRecord {
        checkpoint_id: CheckpointId::generate(),
        plan_id: *plan_id,
        seq: 0,
        step: Some(step.to_string()),
        decision_id: None,
        label: BASE_LABEL.to_string(),
        files_changed: 0,
        tool_call_seq: store.max_tool_call_seq(plan_id)?,
        created_at: Timestamp::now(),
        discarded_at: None,
        states: Vec::new(),
    };
    Ok(Some(store.insert_checkpoint(&record)?))
}

/// The label of the checkpoint [`record_base`] makes.
pub const BASE_LABEL: &str = "base";

/// Restores one sandbox's work tree and index to `commit` exactly (ignored files are left
/// alone) and moves the plan branch there.
///
/// # Errors
/// [`SandboxError::Git`]; [`SandboxError::Checkpoint`] when the restored state does not have
/// the commit's tree hash.
pub fn restore(sandbox: &Sandbox, commit: Oid) -> Result<(), SandboxError> {
    let repo = sandbox.repo()?;
    let commit = repo
        .find_commit(commit)
        .map_err(SandboxError::git("finding the checkpoint commit"))?;
    // Capture the current state in the index first (a shared sandbox's snapshot leaves the
    // index alone), so that everything not in the checkpoint is tracked there and the
    // checkout removes it; ignored files stay out of the index and stay.
    scan(&repo, false)?;
    let mut checkout = CheckoutBuilder::new();
    checkout.force().remove_untracked(true);
    repo.checkout_tree(commit.as_object(), Some(&mut checkout))
        .map_err(SandboxError::git("restoring the checkpoint"))?;
    repo.reference(PLAN_REF, commit.id(), true, "rollback")
        .map_err(SandboxError::git("moving the plan branch"))?;
    let tree = snapshot_with(&repo, true)?;
    if tree != commit.tree_id() {
        return Err(SandboxError::Checkpoint(format!(
            "restoring {} left tree {tree}, expected {}",
            sandbox.record.resource_name,
            commit.tree_id()
        )));
    }
    Ok(())
}

/// The trees of every active sandbox of the plan, as they are now (an internal checkpoint of
/// a step's journal, taken after a tool call that may have written: no commit, no ref, not
/// listed by `plan checkpoints`). Pairs of (sandbox id, tree id). `written_only`: as
/// [`CheckpointRequest::written_only`].
///
/// # Errors
/// Git, I/O and store errors.
pub fn trees(
    store: &Store,
    sandboxes: &Sandboxes,
    plan_id: &Id,
    written_only: bool,
) -> Result<Vec<(String, String)>, SandboxError> {
    let mut out = Vec::new();
    for sb in sandboxes.active(store, plan_id)? {
        let _lock = sb.lock()?;
        let repo = sb.repo()?;
        let tree = if written_only {
            snapshot_written(&repo)?
        } else {
            snapshot_with(&repo, true)?
        };
        sandboxes.keep(&sb, tree, &format!("trees/{tree}"))?;
        out.push((sb.record.sandbox_id.to_string(), tree.to_string()));
    }
    Ok(out)
}

/// Restores one sandbox's work tree and index to `tree` exactly (ignored files are left
/// alone), leaving the plan branch where it is: the state after a journaled tool call.
///
/// # Errors
/// [`SandboxError::Git`]; [`SandboxError::Checkpoint`] when the restored state does not have
/// the tree's hash.
pub fn restore_tree(sandbox: &Sandbox, tree: Oid) -> Result<(), SandboxError> {
    let repo = sandbox.repo()?;
    let target = repo
        .find_tree(tree)
        .map_err(SandboxError::git("finding the journaled tree"))?;
    scan(&repo, false)?;
    let mut checkout = CheckoutBuilder::new();
    checkout.force().remove_untracked(true);
    repo.checkout_tree(target.as_object(), Some(&mut checkout))
        .map_err(SandboxError::git("restoring the journaled tree"))?;
    let now = snapshot_with(&repo, true)?;
    if now != tree {
        return Err(SandboxError::Checkpoint(format!(
            "restoring {} left tree {now}, expected {tree}",
            sandbox.record.resource_name
        )));
    }
    Ok(())
}

/// What a rollback did.
#[derive(Debug, Clone, Serialize, serde::Deserialize, schemars::JsonSchema)]
pub struct RollbackOutcome {
    /// The checkpoint restored.
    pub checkpoint: CheckpointRecord,
    /// Sandboxes restored (resource names).
    pub resources: Vec<String>,
    /// Later checkpoints marked discarded.
    pub discarded_checkpoints: u64,
    /// Later tool calls marked discarded.
    pub discarded_tool_calls: u64,
    /// The plan's status afterwards (execute / queued).
    pub status: PlanStatus,
}

/// Rolls every sandbox of the plan back to a checkpoint (sandboxes created after it go back to
/// their base), marks later checkpoints, tool calls and changes discarded and leaves the plan
/// at execute / queued. Files are restored first and the records second, in one transaction;
/// repeating an interrupted rollback finishes it.
///
/// # Errors
/// [`SandboxError::Checkpoint`] for a checkpoint of another plan or one already discarded,
/// [`SandboxError::PlanNotFound`], lifecycle refusal for applied plans (as
/// [`SandboxError::Checkpoint`]), git and store errors.
pub fn rollback(
    store: &mut Store,
    sandboxes: &Sandboxes,
    plan_id: &Id,
    checkpoint: &CheckpointId,
) -> Result<RollbackOutcome, SandboxError> {
    let plan = store
        .plan(plan_id)?
        .ok_or(SandboxError::PlanNotFound(*plan_id))?;
    let mut status = plan.status;
    status
        .rollback_to()
        .map_err(|e| SandboxError::Checkpoint(e.to_string()))?;
    let cp = store
        .checkpoint(checkpoint)?
        .filter(|c| c.plan_id == *plan_id)
        .ok_or_else(|| {
            SandboxError::Checkpoint(format!("plan {plan_id} has no checkpoint {checkpoint}"))
        })?;
    if cp.discarded_at.is_some() {
        return Err(SandboxError::Checkpoint(format!(
            "checkpoint {checkpoint} was discarded by an earlier rollback"
        )));
    }
    let active = sandboxes.active(store, plan_id)?;
    let mut resources = Vec::new();
    for sb in &active {
        let _lock = sb.lock()?;
        let target = match cp
            .states
            .iter()
            .find(|s| s.sandbox_id == sb.record.sandbox_id)
        {
            Some(state) => Oid::from_str(&state.commit_oid)
                .map_err(SandboxError::git("reading a checkpoint commit id"))?,
            None => sb.base_commit()?,
        };
        restore(sb, target)?;
        resources.push(sb.record.resource_name.clone());
    }
    let (discarded_checkpoints, discarded_tool_calls) =
        store.record_rollback(&cp, status, Timestamp::now())?;
    Ok(RollbackOutcome {
        checkpoint: cp,
        resources,
        discarded_checkpoints,
        discarded_tool_calls,
        status,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::plan::Plan;
    use crate::sandbox::testing::repo_with_files;
    use crate::sandbox::{SandboxTarget, TargetKind};
    use std::fs;

    fn setup() -> (tempfile::TempDir, Store, Sandboxes, Id, Sandbox) {
        let dir = tempfile::tempdir().unwrap();
        let repo = dir.path().join("user");
        let head = repo_with_files(
            &repo,
            &[
                ("a.txt", "a\n"),
                ("d/b.txt", "b\n"),
                (".gitignore", "*.log\n"),
            ],
        );
        let mut store = Store::open(&dir.path().join("db")).unwrap();
        let plan = Plan::new("local/x", "x", Timestamp::now());
        store.insert_plan(&plan).unwrap();
        let sandboxes = Sandboxes::at(dir.path().join("sandboxes"));
        sandboxes
            .register_target(
                &mut store,
                &SandboxTarget {
                    plan_id: plan.plan_id,
                    resource_name: "local/user".into(),
                    alias: None,
                    kind: TargetKind::GitCheckout {
                        repo,
                        base_commit: head,
                    },
                    read_only: false,
                },
            )
            .unwrap();
        let sb = sandboxes
            .ensure(&mut store, &plan.plan_id, "local/user")
            .unwrap();
        (dir, store, sandboxes, plan.plan_id, sb)
    }

    fn cp(store: &mut Store, sandboxes: &Sandboxes, plan: &Id, label: &str) -> CheckpointRecord {
        create(
            store,
            sandboxes,
            plan,
            &CheckpointRequest {
                label: label.into(),
                ..Default::default()
            },
        )
        .unwrap()
        .unwrap()
    }

    #[test]
    fn rollback_restores_content_modes_deletions_and_removes_new_files_but_not_ignored_ones() {
        use std::os::unix::fs::PermissionsExt;
        let (_dir, mut store, sandboxes, plan, sb) = setup();
        let w = sb.work_dir().to_path_buf();
        let first = cp(&mut store, &sandboxes, &plan, "start");
        fs::write(w.join("a.txt"), "changed\n").unwrap();
        fs::remove_file(w.join("d/b.txt")).unwrap();
        fs::create_dir_all(w.join("e/f")).unwrap();
        fs::write(w.join("e/f/new.txt"), "new\n").unwrap();
        fs::write(w.join("run.sh"), "#!/bin/sh\n").unwrap();
        fs::set_permissions(w.join("run.sh"), fs::Permissions::from_mode(0o755)).unwrap();
        std::os::unix::fs::symlink("a.txt", w.join("link")).unwrap();
        fs::write(w.join("keep.log"), "ignored\n").unwrap();
        let second = cp(&mut store, &sandboxes, &plan, "end");
        assert_eq!(second.files_changed, 5);
        assert_ne!(first.states[0].tree_oid, second.states[0].tree_oid);
        fs::write(w.join("stray.txt"), "after\n").unwrap();
        fs::write(w.join("a.txt"), "changed again\n").unwrap();

        let out = rollback(&mut store, &sandboxes, &plan, &second.checkpoint_id).unwrap();
        assert_eq!(out.discarded_checkpoints, 0);
        assert!(!w.join("stray.txt").exists());
        assert_eq!(fs::read_to_string(w.join("a.txt")).unwrap(), "changed\n");
        assert_eq!(
            fs::metadata(w.join("run.sh")).unwrap().permissions().mode() & 0o777,
            0o755
        );

        rollback(&mut store, &sandboxes, &plan, &first.checkpoint_id).unwrap();
        assert_eq!(fs::read_to_string(w.join("a.txt")).unwrap(), "a\n");
        assert_eq!(fs::read_to_string(w.join("d/b.txt")).unwrap(), "b\n");
        assert!(!w.join("e").exists(), "new directories go with their files");
        assert!(!w.join("run.sh").exists() && fs::symlink_metadata(w.join("link")).is_err());
        assert_eq!(
            fs::read_to_string(w.join("keep.log")).unwrap(),
            "ignored\n",
            "ignored files are left alone"
        );
        let repo = sb.repo().unwrap();
        assert_eq!(
            snapshot(&repo).unwrap().to_string(),
            first.states[0].tree_oid
        );
        let err = rollback(&mut store, &sandboxes, &plan, &second.checkpoint_id).unwrap_err();
        assert!(err.to_string().contains("discarded"), "{err}");
        let p = store.plan(&plan).unwrap().unwrap();
        assert_eq!(
            (p.phase(), p.state()),
            (
                crate::domain::lifecycle::Phase::Execute,
                crate::domain::lifecycle::ProcessingState::Queued
            )
        );
    }

    /// The tree git itself computes for a directory (`git add -A && git write-tree` in a
    /// throwaway repository without global excludes).
    fn git_tree(dir: &std::path::Path) -> String {
        let tmp = tempfile::tempdir().unwrap();
        let g = tmp.path().join("g");
        let run = |args: &[&str], with_work: bool| {
            let mut c = std::process::Command::new("git");
            c.arg("-c")
                .arg("core.excludesFile=/dev/null")
                .arg("--git-dir")
                .arg(&g);
            if with_work {
                c.arg("--work-tree").arg(dir);
            }
            let out = c
                .args(args)
                .env("GIT_CONFIG_NOSYSTEM", "1")
                .env("HOME", tmp.path())
                .output()
                .unwrap();
            assert!(
                out.status.success(),
                "{}",
                String::from_utf8_lossy(&out.stderr)
            );
            String::from_utf8(out.stdout).unwrap().trim().to_string()
        };
        run(&["init", "-q", "--bare"], false);
        run(&["add", "-A"], true);
        run(&["write-tree"], true)
    }

    #[test]
    fn snapshots_see_every_kind_of_change_exactly_as_git_does() {
        use std::os::unix::fs::PermissionsExt;
        let (_dir, _store, _sandboxes, _plan, sb) = setup();
        let w = sb.work_dir().to_path_buf();
        let repo = sb.repo().unwrap();
        assert_eq!(snapshot(&repo).unwrap().to_string(), git_tree(&w));
        // Same-size rewrites right after a snapshot (racy timestamps) are seen.
        fs::write(w.join("a.txt"), "z\n").unwrap();
        assert_eq!(snapshot(&repo).unwrap().to_string(), git_tree(&w));
        fs::write(w.join("a.txt"), "y\n").unwrap();
        assert_eq!(snapshot(&repo).unwrap().to_string(), git_tree(&w));
        fs::set_permissions(w.join("a.txt"), fs::Permissions::from_mode(0o755)).unwrap();
        fs::remove_file(w.join("d/b.txt")).unwrap();
        fs::create_dir_all(w.join("d/b.txt")).unwrap();
        fs::write(w.join("d/b.txt/inner"), "now a directory\n").unwrap();
        fs::create_dir_all(w.join("new/deep")).unwrap();
        fs::write(w.join("new/deep/x.rs"), "x").unwrap();
        fs::write(w.join("new/.gitignore"), "*.tmp\n!keep.tmp\n").unwrap();
        fs::write(w.join("new/drop.tmp"), "ignored").unwrap();
        fs::write(w.join("new/keep.tmp"), "kept").unwrap();
        fs::write(w.join("trace.log"), "ignored by the root .gitignore").unwrap();
        fs::create_dir_all(w.join("nested/.git")).unwrap();
        fs::write(w.join("nested/.git/config"), "never captured").unwrap();
        fs::write(w.join("nested/file"), "captured").unwrap();
        std::os::unix::fs::symlink("a.txt", w.join("alias")).unwrap();
        let ours = snapshot(&repo).unwrap().to_string();
        let tree = repo.find_tree(git2::Oid::from_str(&ours).unwrap()).unwrap();
        assert!(
            tree.get_path(std::path::Path::new("nested/.git/config"))
                .is_err()
        );
        assert!(tree.get_path(std::path::Path::new("new/drop.tmp")).is_err());
        assert!(tree.get_path(std::path::Path::new("new/keep.tmp")).is_ok());
        // git would treat nested/ as a repository; without its .git it sees what we see.
        fs::remove_dir_all(w.join("nested/.git")).unwrap();
        assert_eq!(ours, git_tree(&w));
        // A link replaced by a file, and a file by a link.
        fs::remove_file(w.join("alias")).unwrap();
        fs::write(w.join("alias"), "a file now").unwrap();
        fs::remove_file(w.join("new/deep/x.rs")).unwrap();
        std::os::unix::fs::symlink("../../a.txt", w.join("new/deep/x.rs")).unwrap();
        assert_eq!(snapshot(&repo).unwrap().to_string(), git_tree(&w));
        // A tracked directory replaced by a link to a directory with the same file names:
        // its files are gone, the link is new (nothing is read through the link).
        let elsewhere = _dir.path().join("elsewhere");
        fs::create_dir_all(elsewhere.join("b.txt")).unwrap();
        fs::write(elsewhere.join("b.txt/inner"), "now a directory\n").unwrap();
        fs::remove_dir_all(w.join("d")).unwrap();
        std::os::unix::fs::symlink(&elsewhere, w.join("d")).unwrap();
        fs::create_dir_all(w.join("d2")).unwrap();
        let ours = snapshot(&repo).unwrap();
        assert_eq!(ours.to_string(), git_tree(&w));
        let tree = repo.find_tree(ours).unwrap();
        assert_eq!(
            tree.get_path(std::path::Path::new("d")).unwrap().filemode(),
            0o120000
        );
    }

    #[test]
    fn a_snapshot_of_the_written_paths_equals_a_full_one_for_every_kind_of_change() {
        use crate::sandbox::written;
        let (dir, _store, _sandboxes, _plan, sb) = setup();
        let w = sb.work_dir().to_path_buf();
        let repo = sb.repo().unwrap();
        let git = sb.layout.git_dir.clone();
        let check = |paths: &[&str], what: &str| {
            written::note(&git, paths.iter().map(PathBuf::from));
            assert!(written::since_sync(repo.path()).is_some(), "{what}: known");
            let ours = snapshot_written(&repo).unwrap().to_string();
            assert_eq!(ours, git_tree(&w), "{what}");
            assert_eq!(
                written::since_sync(repo.path()).map(|s| s.paths),
                Some(Default::default()),
                "{what}: the index matches the work tree again"
            );
        };
        snapshot_with(&repo, true).unwrap();
        fs::write(w.join("a.txt"), "changed\n").unwrap();
        check(&["a.txt"], "a modified file");
        fs::create_dir_all(w.join("n/deep")).unwrap();
        fs::write(w.join("n/deep/x.rs"), "x").unwrap();
        fs::write(w.join("n/.gitignore"), "*.tmp\n!keep.tmp\n").unwrap();
        fs::write(w.join("n/drop.tmp"), "ignored").unwrap();
        fs::write(w.join("n/keep.tmp"), "kept").unwrap();
        fs::write(w.join("trace.log"), "ignored by the root .gitignore").unwrap();
        check(&["n"], "a new directory, walked as the full scan walks it");
        fs::write(w.join("n/later.tmp"), "ignored").unwrap();
        fs::write(w.join("n/deep/y.log"), "ignored").unwrap();
        fs::write(w.join("n/deep/z.rs"), "z").unwrap();
        check(
            &["n/later.tmp", "n/deep/y.log", "n/deep/z.rs", "trace.log"],
            "new files, ignored ones left out",
        );
        fs::remove_file(w.join("d/b.txt")).unwrap();
        fs::create_dir_all(w.join("d/b.txt")).unwrap();
        fs::write(w.join("d/b.txt/inner"), "a directory now").unwrap();
        check(&["d/b.txt"], "a file replaced by a directory");
        fs::remove_dir_all(w.join("d/b.txt")).unwrap();
        fs::write(w.join("d/b.txt"), "a file again").unwrap();
        check(&["d/b.txt"], "a directory replaced by a file");
        fs::rename(w.join("n"), w.join("m")).unwrap();
        check(&["n", "m"], "a moved directory");
        fs::remove_dir_all(w.join("m")).unwrap();
        check(&["m/deep/x.rs", "m"], "a deleted directory");
        std::os::unix::fs::symlink("a.txt", w.join("alias")).unwrap();
        check(
            &["alias", ".git/config", "gone/never"],
            "a link; .git and absent paths",
        );
        // A parent replaced by a link cannot be looked at alone: the full scan answers.
        let elsewhere = dir.path().join("elsewhere");
        fs::create_dir_all(&elsewhere).unwrap();
        fs::write(elsewhere.join("b.txt"), "b\n").unwrap();
        fs::remove_dir_all(w.join("d")).unwrap();
        std::os::unix::fs::symlink(&elsewhere, w.join("d")).unwrap();
        check(&["d/b.txt"], "a parent replaced by a link");
    }

    #[test]
    fn a_snapshot_reads_the_cached_tree_when_nothing_changed_and_still_sees_every_edit_by_hand() {
        let (_dir, _store, _sandboxes, _plan, sb) = setup();
        let w = sb.work_dir().to_path_buf();
        let repo = sb.repo().unwrap();
        let index = sb.layout.git_dir.join("index");
        let first = snapshot_with(&repo, true).unwrap();
        let written = fs::read(&index).unwrap();
        assert_eq!(snapshot(&repo).unwrap(), first, "nothing changed");
        assert_eq!(fs::read(&index).unwrap(), written, "the index is left as it is");
        // The same size, written by hand after the index.
        fs::write(w.join("a.txt"), "A\n").unwrap();
        let edited = snapshot(&repo).unwrap();
        assert_ne!(edited, first);
        assert_eq!(edited.to_string(), git_tree(&w), "an edit by hand");
        assert_eq!(snapshot(&repo).unwrap(), edited, "and again, from the index it wrote");
        fs::write(w.join("d/new.txt"), "new\n").unwrap();
        fs::write(w.join("d/skip.log"), "ignored\n").unwrap();
        assert_eq!(snapshot(&repo).unwrap().to_string(), git_tree(&w), "a new file");
        fs::remove_file(w.join("a.txt")).unwrap();
        assert_eq!(snapshot(&repo).unwrap().to_string(), git_tree(&w), "a removed file");
    }

    #[test]
    fn a_written_only_checkpoint_scans_everything_when_the_written_set_is_unknown() {
        use crate::sandbox::written;
        let (_dir, mut store, sandboxes, plan, sb) = setup();
        let w = sb.work_dir().to_path_buf();
        let request = CheckpointRequest {
            label: "end".into(),
            written_only: true,
            ..Default::default()
        };
        cp(&mut store, &sandboxes, &plan, "start");
        // Written without a note, then the set is forgotten (what every writer other than
        // a file tool does before it runs).
        fs::write(w.join("a.txt"), "by a command\n").unwrap();
        written::forget(&sb.layout.git_dir);
        let end = create(&mut store, &sandboxes, &plan, &request)
            .unwrap()
            .unwrap();
        assert_eq!(end.states[0].tree_oid, git_tree(&w));
        assert_eq!(end.files_changed, 1);
    }

    #[test]
    fn an_unchanged_sandbox_reuses_the_latest_checkpoint_when_asked() {
        let (_dir, mut store, sandboxes, plan, _sb) = setup();
        let a = cp(&mut store, &sandboxes, &plan, "end");
        let request = CheckpointRequest {
            label: "start".into(),
            reuse_if_unchanged: true,
            ..Default::default()
        };
        let b = create(&mut store, &sandboxes, &plan, &request)
            .unwrap()
            .unwrap();
        assert_eq!(a.checkpoint_id, b.checkpoint_id);
        assert_eq!(store.checkpoints(&plan).unwrap().len(), 1);
    }
}
