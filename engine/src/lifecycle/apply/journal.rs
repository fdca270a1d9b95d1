//! Apply's writes and their undo (spec section 13, "all or nothing"; `docs/apply.md`).
//!
//! A decided write ([`Decided`]) goes in two steps, each undoable from its journal directory
//! alone (so the undo after `kill -9` is the same code as the undo after an error):
//!
//! 1. [`stage`]: the new blobs, tree and commit go into the user's object database, and every
//!    new file is staged in `JDIR/new/` as a checkout would write it ([`super::staging`]:
//!    through git's filters where any apply; where none does and its directory exists, first
//!    beside its target, linked into `JDIR/new/`). No file of the work tree, the index or any
//!    ref is changed.
//! 2. [`commit`]: git's `index.lock` is taken (a hard link of `JDIR/lock`, so an undo knows it
//!    is its own); then file by file (on several threads), each re-checked just before it is
//!    replaced, the old file is kept as a hard link in `JDIR/old/` and the staged one renamed
//!    into place (both directories flat, a file at its [`slot`](super::staging::slot)); then
//!    the new index is written into the lock and renamed over `index`; then the branch moves
//!    with a compare-and-swap from the tip that was checked.
//!
//! [`rollback`] undoes whatever of that happened, in reverse, and never touches a file whose
//! content is neither Apply's nor the original (it is reported instead).
//!
//! `JDIR` is `<git dir>/cleveragents-apply/<journal id>` for a git checkout (the file system of
//! the repository, so renames and hard links work) and `<data dir>/apply-journals/<journal
//! id>` for a directory.

use std::collections::HashMap;
use std::fs;
use std::io::{ErrorKind, Write};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use git2::{FileMode, IndexEntry, IndexTime, Oid, Repository};

use super::RunError;
use super::decide::{Change, Decided, Fingerprint, content_of};
use super::staging::{Beside, slot, temp_beside};
pub use crate::domain::apply::EntryOp;

/// Where one resource's journal directory is.
pub fn jdir(git_dir: Option<&Path>, data_dir: &Path, journal: &str) -> PathBuf {
    match git_dir {
        Some(g) => g.join("cleveragents-apply").join(journal),
        None => data_dir.join("apply-journals").join(journal),
    }
}

fn io(what: impl std::fmt::Display) -> impl Fn(std::io::Error) -> RunError {
    move |e| RunError::Sandbox(format!("{what}: {e}"))
}

fn git_err(what: &str) -> impl Fn(git2::Error) -> RunError + '_ {
    move |e| RunError::Sandbox(format!("{what}: {}", e.message()))
}

fn same_file(a: &Path, b: &Path) -> bool {
    match (fs::symlink_metadata(a), fs::symlink_metadata(b)) {
        (Ok(x), Ok(y)) => x.dev() == y.dev() && x.ino() == y.ino(),
        _ => false,
    }
}

/// The same file, or (where a copy stood in for a hard link across file systems) the same
/// content and mode.
fn same_or_equal(a: &Path, b: &Path) -> bool {
    same_file(a, b) || content_of(a).is_some_and(|x| Some(x) == content_of(b))
}

/// Hard-links `from` to `to`, or copies it where the two are on different file systems;
/// `to`'s directory is made when it is missing (it seldom is: the journal's sides and the
/// target's directory are made before).
fn link_or_copy(from: &Path, to: &Path) -> std::io::Result<()> {
    match link_or_copy_into_existing(from, to) {
        Err(e) if e.kind() == ErrorKind::NotFound && fs::symlink_metadata(from).is_ok() => {
            if let Some(parent) = to.parent() {
                fs::create_dir_all(parent)?;
            }
            link_or_copy_into_existing(from, to)
        }
        other => other,
    }
}

fn link_or_copy_into_existing(from: &Path, to: &Path) -> std::io::Result<()> {
    match fs::hard_link(from, to) {
        Err(e) if e.raw_os_error() == Some(rustix::io::Errno::XDEV.raw_os_error()) => {
            let m = fs::symlink_metadata(from)?;
            if m.file_type().is_symlink() {
                std::os::unix::fs::symlink(fs::read_link(from)?, to)
            } else {
                fs::copy(from, to).map(|_| ())
            }
        }
        other => other,
    }
}

/// Step 1: writes the objects (git) and the staged files. Returns the new commit (git, unless
/// `no_commit`).
///
/// # Errors
/// Git and I/O errors (the full disk among them); nothing outside `jdir` and the object
/// database is left written (the files staged beside their targets are removed again).
pub fn stage(
    d: &Decided,
    jdir: &Path,
    journal: &str,
    message: &str,
    no_commit: bool,
) -> Result<Option<Oid>, RunError> {
    let staged = stage_all(d, jdir, journal, message, no_commit);
    if staged.is_err() {
        remove_staged_beside(d, journal);
    }
    staged
}

/// Undoes [`stage`] of a write whose [`commit`] never began: the files staged beside their
/// targets and the journal directory (the objects stay, unreferenced, as after a failed
/// `git commit`).
pub fn unstage(d: &Decided, jdir: &Path, journal: &str) {
    remove_staged_beside(d, journal);
    remove_jdir(jdir);
}

/// Removes the files [`stage`] wrote beside their targets.
fn remove_staged_beside(d: &Decided, journal: &str) {
    let root = Path::new(&d.base.path);
    for c in d.changes.iter().filter(|c| c.new.is_some()) {
        let _ = fs::remove_file(temp_beside(&root.join(&c.path), journal));
    }
}

fn stage_all(
    d: &Decided,
    jdir: &Path,
    journal: &str,
    message: &str,
    no_commit: bool,
) -> Result<Option<Oid>, RunError> {
    let _ = fs::remove_dir_all(jdir);
    fs::create_dir_all(jdir.join("new")).map_err(io(jdir.display()))?;
    let sr = Repository::open(&d.sandbox_git).map_err(git_err("opening the sandbox"))?;
    let root = Path::new(&d.base.path);
    let Some(g) = &d.git else {
        for c in &d.changes {
            if let Some((id, mode)) = c.new {
                let blob = sr.find_blob(id).map_err(git_err("reading a new file"))?;
                write_new(&slot(&jdir.join("new"), &c.path), blob.content(), mode)
                    .map_err(io(&c.path))?;
            }
        }
        record_staged(jdir, &d.changes)?;
        return Ok(None);
    };
    let user = Repository::open(root).map_err(git_err("opening the repository"))?;
    let git = git_err("writing objects");
    let tip = user.find_commit(g.tip).map_err(&git)?;
    copy_missing(&sr, &user, g.tree)?;
    let tree = g.tree;
    let tree_obj = user.find_tree(tree).map_err(&git)?;
    let commit = if no_commit {
        None
    } else {
        let sig = crate::sandbox::user_signature(&user);
        Some(
            user.commit(None, &sig, &sig, message, &tree_obj, &[&tip])
                .map_err(&git)?,
        )
    };
    // The new files as a checkout of the new tree would write them.
    let beside = Beside { root, journal };
    super::staging::stage_files(&user, &tree_obj, &d.changes, &jdir.join("new"), Some(beside))?;
    record_staged(jdir, &d.changes)?;
    Ok(commit)
}

/// The file of `JDIR` that records each staged file's size and modification time. A file Apply
/// put in place shares its inode with its staged copy (a hard link), so after an edit in place
/// the two still look the same; the undo compares the file with what was recorded instead.
const STAGED_STATS: &str = "staged-stats";

/// A file's modification time in nanoseconds.
fn mtime_ns(m: &fs::Metadata) -> i128 {
    i128::from(m.mtime()) * 1_000_000_000 + i128::from(m.mtime_nsec())
}

/// Writes [`STAGED_STATS`]: a line `<slot name> <size> <mtime ns>` per staged file.
fn record_staged(jdir: &Path, changes: &[Change]) -> Result<(), RunError> {
    let new = jdir.join("new");
    let mut lines = String::new();
    for c in changes.iter().filter(|c| c.new.is_some()) {
        let at = slot(&new, &c.path);
        if let (Ok(m), Some(name)) = (fs::symlink_metadata(&at), at.file_name()) {
            let name = name.to_string_lossy();
            lines.push_str(&format!("{name} {} {}\n", m.len(), mtime_ns(&m)));
        }
    }
    let file = jdir.join(STAGED_STATS);
    fs::write(&file, lines).map_err(io(file.display()))
}

/// Reads [`STAGED_STATS`] (`None` for a journal written before it existed).
fn staged_stats(jdir: &Path) -> Option<HashMap<String, (u64, i128)>> {
    let text = fs::read_to_string(jdir.join(STAGED_STATS)).ok()?;
    Some(
        text.lines()
            .filter_map(|line| {
                let mut parts = line.split(' ');
                let name = parts.next()?.to_string();
                let len = parts.next()?.parse().ok()?;
                let mtime = parts.next()?.parse().ok()?;
                Some((name, (len, mtime)))
            })
            .collect(),
    )
}

/// Whether `at` holds what Apply staged at `staged`: the same file not changed since it was
/// staged (its size and modification time as recorded), or a file of the same content and
/// mode (where a copy stood in for a hard link).
fn is_apply_content(
    at: &Path,
    staged: &Path,
    stats: Option<&HashMap<String, (u64, i128)>>,
) -> bool {
    if !same_file(at, staged) {
        return same_or_equal(at, staged);
    }
    let recorded = staged
        .file_name()
        .and_then(|n| stats?.get(n.to_string_lossy().as_ref()));
    match (recorded, fs::symlink_metadata(at)) {
        (Some((len, mtime)), Ok(m)) => m.len() == *len && mtime_ns(&m) == *mtime,
        // Not recorded: a journal written before the record existed.
        (None, Ok(_)) => stats.is_none(),
        (_, Err(_)) => false,
    }
}

/// Copies `tree` and every object below it that `to` lacks from `from` (a subtree `to` has is
/// complete there, so only what changed is walked). The missing objects go in as one pack, as
/// `git push` or `git fetch` would bring them: a thousand changed files are then a few files
/// written instead of one loose object file each.
fn copy_missing(from: &Repository, to: &Repository, tree: Oid) -> Result<(), RunError> {
    let git = git_err("copying objects into the repository");
    let dst = to.odb().map_err(&git)?;
    let mut missing = Vec::new();
    let mut stack = vec![tree];
    while let Some(oid) = stack.pop() {
        if dst.exists(oid) {
            continue;
        }
        if let Ok(t) = from.find_tree(oid) {
            for entry in t.iter() {
                if matches!(
                    entry.kind(),
                    Some(git2::ObjectType::Tree | git2::ObjectType::Blob)
                ) {
                    stack.push(entry.id());
                }
            }
        }
        missing.push(oid);
    }
    if missing.is_empty() {
        return Ok(());
    }
    without_delta_search(from);
    let mut pack = from.packbuilder().map_err(&git)?;
    for oid in &missing {
        pack.insert_object(*oid, None).map_err(&git)?;
    }
    let mut buf = git2::Buf::new();
    pack.write_buf(&mut buf).map_err(&git)?;
    let mut writer = dst.packwriter().map_err(&git)?;
    writer
        .write_all(&buf)
        .map_err(|e| RunError::Sandbox(format!("copying objects into the repository: {e}")))?;
    writer.commit().map_err(&git)?;
    Ok(())
}

/// Lets the packs Apply writes hold each object whole. libgit2's pack builder searches for
/// deltas between the new objects (most of the time of packing a 1,000-file change) and has no
/// switch for it, but stops trying when its delta window may hold no more than one byte
/// (`pack.windowMemory`, set in the sandbox's own repository, which the builder reads).
/// `git gc` in the user's repository deltifies them later, as it does loose objects.
fn without_delta_search(sandbox: &Repository) {
    const WINDOW_MEMORY: &str = "pack.windowMemory";
    if let Ok(mut config) = sandbox.config()
        && config.get_i64(WINDOW_MEMORY).ok() != Some(1)
    {
        // Without the setting packing is slower, not wrong.
        let _ = config.set_i64(WINDOW_MEMORY, 1);
    }
}

fn write_new(path: &Path, bytes: &[u8], mode: i32) -> std::io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    if let Some(parent) = path.parent() {
        fs::create_dir_all(parent)?;
    }
    if mode == i32::from(FileMode::Link) {
        return std::os::unix::fs::symlink(
            <std::ffi::OsStr as std::os::unix::ffi::OsStrExt>::from_bytes(bytes),
            path,
        );
    }
    let mut f = fs::File::create(path)?;
    f.write_all(bytes)?;
    f.sync_all()?;
    let perm = if mode == i32::from(FileMode::BlobExecutable) {
        0o755
    } else {
        0o644
    };
    fs::set_permissions(path, fs::Permissions::from_mode(perm))
}

/// Step 2: the work tree file by file, then the index, then the branch (see the module
/// documentation). On an error the caller runs [`rollback`].
///
/// # Errors
/// [`RunError::Invalid`] for what the user can fix (a file edited meanwhile, a git process
/// that took a lock, the branch moved), with what to do; I/O and git errors.
pub fn commit(
    d: &Decided,
    jdir: &Path,
    journal: &str,
    commit: Option<Oid>,
) -> Result<(), RunError> {
    let root = Path::new(&d.base.path);
    let name = &d.base.resource_name;
    if let Some(g) = &d.git {
        take_index_lock(name, &g.git_dir, jdir)?;
    }
    let old = jdir.join("old");
    let new = jdir.join("new");
    // One flat directory for every original kept, made once.
    fs::create_dir_all(&old).map_err(io(jdir.display()))?;
    // What is at `path` now, refused when it is not what the checks saw.
    let recheck = |path: &str| -> Result<Option<Fingerprint>, RunError> {
        let now = Fingerprint::of(&root.join(path));
        // A directory that becomes this file was removed just before.
        let expected = if d.rmdirs.iter().any(|r| r == path) {
            None
        } else {
            d.seen.get(path).copied().flatten()
        };
        if expected != now {
            return Err(RunError::Invalid(format!(
                // A command inside a sentence stays (D-commands-2): it explains the error rather than suggesting the next step.
                "{name}: {path} changed while Apply was writing (someone edited, created or removed it); nothing was applied, every file is as it was. Run `agents plan apply` again when the edit is done"
            )));
        }
        Ok(now)
    };
    for c in d.changes.iter().filter(|c| c.new.is_none()) {
        recheck(&c.path)?;
        let at = root.join(&c.path);
        if fs::symlink_metadata(&at).is_ok() {
            fs::rename(&at, slot(&old, &c.path)).map_err(io(at.display()))?;
        }
    }
    for dir in &d.rmdirs {
        let at = root.join(dir);
        fs::remove_dir(&at).map_err(|e| {
            RunError::Invalid(format!(
                "{name}: {dir} must become a file but could not be removed ({e}); something was created in it during Apply; nothing was applied"
            ))
        })?;
    }
    remove_emptied_dirs(d, root);
    for dir in &d.mkdirs {
        let at = root.join(dir);
        match fs::create_dir(&at) {
            Err(e) if e.kind() != ErrorKind::AlreadyExists => {
                return Err(io(at.display())(e));
            }
            _ => {}
        }
    }
    // The files are independent of each other: several threads put them in place (a failure
    // on one stops its thread; the caller's undo handles whatever was done).
    let writes: Vec<&Change> = d.changes.iter().filter(|c| c.new.is_some()).collect();
    crate::sandbox::parallel::each_chunk(
        &writes,
        || RunError::Sandbox("a thread writing the work tree panicked".into()),
        |part| {
            part.iter().try_for_each(|c| {
                let at = root.join(&c.path);
                let staged = slot(&new, &c.path);
                let tmp = temp_beside(&at, journal);
                // Staged beside its target already, unless its directory was made just now.
                if !same_file(&tmp, &staged) {
                    let _ = fs::remove_file(&tmp);
                    link_or_copy(&staged, &tmp).map_err(io(tmp.display()))?;
                }
                if recheck(&c.path)?.is_some_and(|now| !now.is_dir()) {
                    link_or_copy(&at, &slot(&old, &c.path)).map_err(io(jdir.display()))?;
                }
                fs::rename(&tmp, &at).map_err(io(at.display()))
            })
        },
    )?;
    fault(name, "after-files")?;
    let Some(g) = &d.git else {
        return Ok(());
    };
    let Some(commit) = commit else {
        // `--no-commit`: the work tree only; the index is left as it was.
        release_index_lock(&g.git_dir, jdir);
        return Ok(());
    };
    write_index(d, &g.git_dir, jdir)?;
    let repo = Repository::open(root).map_err(git_err("opening the repository"))?;
    repo.reference_matching(
        &format!("refs/heads/{}", g.branch),
        commit,
        true,
        g.tip,
        "cleveragents: apply plan",
    )
    .map_err(|e| {
        let now = repo
            .refname_to_id(&format!("refs/heads/{}", g.branch))
            .map(|o| o.to_string())
            .unwrap_or_else(|_| "unknown".into());
        RunError::Invalid(format!(
            // A command inside a sentence stays (D-commands-2): it explains the error rather than suggesting the next step.
            "{name}: branch {} moved while Apply was writing (from {} to {now}: {}); nothing was applied, every file is as it was. Run `agents plan apply` again to apply on the new tip",
            g.branch,
            g.tip,
            e.message()
        ))
    })?;
    Ok(())
}

/// Fault injection for the reliability tests: `CLEVERAGENTS_APPLY_FAULT=<resource>:<point>`
/// makes the write of that resource fail at `point` (`after-files`: its work tree is written,
/// its index and branch not yet), as an I/O error there would; `abort-after-files` kills the
/// process there instead, as `kill -9` would.
fn fault(resource: &str, point: &str) -> Result<(), RunError> {
    match std::env::var("CLEVERAGENTS_APPLY_FAULT") {
        Ok(v) if v == format!("{resource}:abort-{point}") => std::process::abort(),
        Ok(v) if v == format!("{resource}:{point}") => Err(RunError::Sandbox(format!(
            "{resource}: writing failed at {point} (injected by CLEVERAGENTS_APPLY_FAULT); nothing was applied"
        ))),
        _ => Ok(()),
    }
}

/// Removes the directories the deletions left empty, as a git checkout does (a directory still
/// holding anything, or needed by a new file, stays). The undo recreates them with the files.
fn remove_emptied_dirs(d: &Decided, root: &Path) {
    let needed: std::collections::HashSet<&str> = d
        .changes
        .iter()
        .filter(|c| c.new.is_some())
        .flat_map(|c| c.path.match_indices('/').map(|(i, _)| &c.path[..i]))
        .collect();
    for c in d.changes.iter().filter(|c| c.new.is_none()) {
        let mut parent = Path::new(&c.path).parent();
        while let Some(p) = parent.filter(|p| !p.as_os_str().is_empty()) {
            let rel = p.to_string_lossy();
            if needed.contains(rel.as_ref()) || fs::remove_dir(root.join(p)).is_err() {
                break;
            }
            parent = p.parent();
        }
    }
}

/// Takes git's index lock as a hard link of `JDIR/lock`.
fn take_index_lock(name: &str, git_dir: &Path, jdir: &Path) -> Result<(), RunError> {
    let mine = jdir.join("lock");
    fs::write(&mine, b"").map_err(io(mine.display()))?;
    let lock = git_dir.join("index.lock");
    match fs::hard_link(&mine, &lock) {
        Ok(()) => {}
        Err(e) if e.kind() == ErrorKind::AlreadyExists => {
            return Err(RunError::Invalid(format!(
                "{name}: {} appeared while Apply was starting (a git process is running); nothing was applied. Retry when it ends, or remove {} if no git process runs",
                lock.display(),
                lock.display()
            )));
        }
        Err(e) => return Err(io(lock.display())(e)),
    }
    if git_dir.join("index").exists() {
        fs::copy(git_dir.join("index"), jdir.join("index.old")).map_err(io("saving the index"))?;
    }
    Ok(())
}

fn release_index_lock(git_dir: &Path, jdir: &Path) {
    let lock = git_dir.join("index.lock");
    if same_file(&lock, &jdir.join("lock")) {
        let _ = fs::remove_file(lock);
    }
}

/// Builds the new index from the old one (only the changed paths differ, with the stat data
/// of the files just written), writes it into the held lock and renames it over `index`.
fn write_index(d: &Decided, git_dir: &Path, jdir: &Path) -> Result<(), RunError> {
    let root = Path::new(&d.base.path);
    let building = jdir.join("index.new");
    if jdir.join("index.old").exists() {
        fs::copy(jdir.join("index.old"), &building).map_err(io("copying the index"))?;
    }
    let git = git_err("updating the index");
    let mut index = git2::Index::open(&building).map_err(&git)?;
    for c in &d.changes {
        match c.new {
            None => {
                let _ = index.remove(Path::new(&c.path), 0);
            }
            Some((id, mode)) => {
                let m = fs::symlink_metadata(root.join(&c.path)).map_err(io(&c.path))?;
                index.add(&entry(&c.path, id, mode, &m)).map_err(&git)?;
            }
        }
    }
    index.write().map_err(&git)?;
    let bytes = fs::read(&building).map_err(io("reading the new index"))?;
    let lock = git_dir.join("index.lock");
    let mut f = fs::OpenOptions::new()
        .write(true)
        .truncate(true)
        .open(&lock)
        .map_err(io(lock.display()))?;
    f.write_all(&bytes).map_err(io(lock.display()))?;
    f.sync_all().map_err(io(lock.display()))?;
    fs::rename(&lock, git_dir.join("index")).map_err(io("replacing the index"))
}

fn entry(path: &str, id: Oid, mode: i32, m: &fs::Metadata) -> IndexEntry {
    let t = |s: i64, ns: i64| IndexTime::new(s as i32, ns as u32);
    IndexEntry {
        ctime: t(m.ctime(), m.ctime_nsec()),
        mtime: t(m.mtime(), m.mtime_nsec()),
        dev: m.dev() as u32,
        ino: m.ino() as u32,
        mode: mode as u32,
        uid: m.uid(),
        gid: m.gid(),
        file_size: m.len() as u32,
        id,
        flags: path.len().min(0xfff) as u16,
        flags_extended: 0,
        path: path.as_bytes().to_vec(),
    }
}

/// What an undo needs to know about the branch.
#[derive(Debug, Clone)]
pub struct BranchUndo {
    /// The work tree's git directory.
    pub git_dir: PathBuf,
    /// The branch.
    pub branch: String,
    /// The tip before Apply.
    pub old_tip: Oid,
    /// The commit Apply made (or was to make).
    pub new_commit: Option<Oid>,
}

/// One journal entry as the undo reads it.
#[derive(Debug, Clone)]
pub struct UndoEntry {
    /// Path relative to the root.
    pub path: String,
    /// What it records.
    pub op: EntryOp,
    /// Whether Apply writes (true) or deletes (false) the file.
    pub writes: bool,
}

/// Where `side` of a journal directory keeps `path`: its [`slot`], or the path itself below
/// `side` where a journal written before the slots holds it there.
fn kept_at(side: &Path, path: &str) -> PathBuf {
    let at = slot(side, path);
    if fs::symlink_metadata(&at).is_err() && fs::symlink_metadata(side.join(path)).is_ok() {
        return side.join(path);
    }
    at
}

/// Moves an original the undo could not put back to `JDIR/kept/<path>`, where the user finds
/// it by its path. Where the move fails it stays at its slot, still kept.
fn keep_original(jdir: &Path, backup: &Path, path: &str) {
    let to = jdir.join("kept").join(path);
    if to.parent().is_some_and(|p| fs::create_dir_all(p).is_ok()) {
        let _ = fs::rename(backup, &to);
    }
}

/// Undoes a resource's write (any part of it): the branch back to the old tip if it points at
/// Apply's commit, the index back if it is Apply's, every file back from `JDIR/old/` if it is
/// Apply's, created directories removed, removed ones recreated; then `jdir` is removed.
/// Idempotent. Returns what it had to leave (someone else's change since).
///
/// # Errors
/// I/O and git errors (the undo can be repeated).
pub fn rollback(
    root: &Path,
    jdir: &Path,
    journal: &str,
    entries: &[UndoEntry],
    branch: Option<&BranchUndo>,
) -> Result<Vec<String>, RunError> {
    let mut kept = Vec::new();
    if let Some(b) = branch {
        undo_branch(root, b, &mut kept)?;
        undo_index(&b.git_dir, jdir, &mut kept)?;
    }
    let old = jdir.join("old");
    let new = jdir.join("new");
    let stats = staged_stats(jdir);
    for e in entries.iter().rev() {
        let at = root.join(&e.path);
        match e.op {
            EntryOp::File if e.writes => {
                let _ = fs::remove_file(temp_beside(&at, journal));
                let backup = kept_at(&old, &e.path);
                if is_apply_content(&at, &kept_at(&new, &e.path), stats.as_ref()) {
                    if fs::symlink_metadata(&backup).is_ok() {
                        fs::rename(&backup, &at).map_err(io(at.display()))?;
                    } else {
                        fs::remove_file(&at).map_err(io(at.display()))?;
                    }
                } else if fs::symlink_metadata(&at).is_err()
                    && fs::symlink_metadata(&backup).is_ok()
                {
                    fs::rename(&backup, &at).map_err(io(at.display()))?;
                } else if fs::symlink_metadata(&backup).is_ok() && !same_or_equal(&at, &backup) {
                    keep_original(jdir, &backup, &e.path);
                    kept.push(e.path.clone());
                }
            }
            EntryOp::File => {
                let backup = kept_at(&old, &e.path);
                if fs::symlink_metadata(&backup).is_ok() {
                    if fs::symlink_metadata(&at).is_err() {
                        if let Some(parent) = at.parent() {
                            fs::create_dir_all(parent).map_err(io(parent.display()))?;
                        }
                        fs::rename(&backup, &at).map_err(io(at.display()))?;
                    } else {
                        keep_original(jdir, &backup, &e.path);
                        kept.push(e.path.clone());
                    }
                }
            }
            EntryOp::MakeDir => {
                let _ = fs::remove_dir(&at);
            }
            EntryOp::RemoveDir => {
                if fs::symlink_metadata(&at).is_err() {
                    fs::create_dir_all(&at).map_err(io(at.display()))?;
                }
            }
        }
    }
    // What could not be put back stays in the journal directory, never lost.
    if kept.is_empty() {
        remove_jdir(jdir);
    }
    Ok(kept)
}

fn undo_branch(root: &Path, b: &BranchUndo, kept: &mut Vec<String>) -> Result<(), RunError> {
    let Some(new) = b.new_commit.filter(|_| !b.old_tip.is_zero()) else {
        return Ok(());
    };
    let repo = Repository::open(root).map_err(git_err("opening the repository"))?;
    let refname = format!("refs/heads/{}", b.branch);
    // A compare-and-swap killed halfway leaves its lock holding the new id.
    let lock = repo.commondir().join(format!("{refname}.lock"));
    if fs::read_to_string(&lock).is_ok_and(|t| t.trim() == new.to_string()) {
        let _ = fs::remove_file(&lock);
    }
    match repo.refname_to_id(&refname) {
        Ok(now) if now == new => {
            repo.reference_matching(
                &refname,
                b.old_tip,
                true,
                new,
                "cleveragents: apply rolled back",
            )
            .map_err(git_err("moving the branch back"))?;
        }
        Ok(now) if now == b.old_tip => {}
        // Moved by someone else: Apply's commit is in its history only if the swap happened.
        Ok(now) if repo.graph_descendant_of(now, new).unwrap_or(false) => kept.push(format!(
            "branch {} (now at {now}, on top of Apply's commit {new})",
            b.branch
        )),
        Ok(_) => {}
        Err(_) => kept.push(format!("branch {} (missing)", b.branch)),
    }
    Ok(())
}

fn undo_index(git_dir: &Path, jdir: &Path, kept: &mut Vec<String>) -> Result<(), RunError> {
    let mine = jdir.join("lock");
    let lock = git_dir.join("index.lock");
    let index = git_dir.join("index");
    if same_file(&lock, &mine) {
        fs::remove_file(&lock).map_err(io(lock.display()))?;
    }
    if !same_file(&index, &mine) {
        return Ok(());
    }
    let saved = jdir.join("index.old");
    if !saved.exists() {
        fs::remove_file(&index).map_err(io(index.display()))?;
        return Ok(());
    }
    let undo = jdir.join("lock-undo");
    let _ = fs::remove_file(&undo);
    fs::copy(&saved, &undo).map_err(io(undo.display()))?;
    match fs::hard_link(&undo, &lock) {
        Ok(()) => fs::rename(&lock, &index).map_err(io(index.display())),
        Err(e) if e.kind() == ErrorKind::AlreadyExists => {
            kept.push(format!(
                "{} (a git process holds {}; restore {} over it when it ends)",
                index.display(),
                lock.display(),
                saved.display()
            ));
            Ok(())
        }
        Err(e) => Err(io(lock.display())(e)),
    }
}

/// Removes a journal directory after the commit point, when nothing needs it any more: it is
/// renamed out of its `cleveragents-apply` parent (removed when empty) and deleted in the
/// background, so Apply does not wait for a link per changed file to be unlinked. Where the
/// rename fails it is removed here.
pub fn discard_jdir(jdir: &Path) {
    let trash = jdir.parent().and_then(Path::parent).zip(jdir.file_name()).map(|(above, name)| {
        above.join(format!(".cleveragents-apply-removing-{}", name.to_string_lossy()))
    });
    match trash {
        Some(trash) if fs::rename(jdir, &trash).is_ok() => {
            if let Some(parent) = jdir.parent() {
                let _ = fs::remove_dir(parent);
            }
            let _ = crate::sandbox::remove_in_background(&trash);
        }
        _ => remove_jdir(jdir),
    }
}

/// Removes a journal directory (and its `cleveragents-apply` parent when empty).
pub fn remove_jdir(jdir: &Path) {
    let _ = fs::remove_dir_all(jdir);
    if let Some(parent) = jdir.parent() {
        let _ = fs::remove_dir(parent);
    }
}
