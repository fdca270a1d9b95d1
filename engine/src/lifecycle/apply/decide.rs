//! Apply's checks (spec section 13, "all or nothing"): everything about one resource is decided
//! before anything is written, and the result is a [`Decided`] write plan. Nothing here writes
//! to the user's repository or directory; merged trees go to the sandbox's private repository.
//!
//! Order for a git checkout (see `docs/apply.md`): git locks, HEAD on the recorded branch, the
//! three-way merge of the target tree with the branch tip, then per changed path: symbolic
//! links and files on every path prefix, the index and the work tree compared as git does
//! (through the filters and `core.filemode`), what stands where a directory or file must go,
//! and finally free space for the new content.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::fs;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use git2::{FileMode, Oid, Repository, Status, StatusOptions};

use super::RunError;
use crate::store::lifecycle_run::PlanBase;

/// One path the write changes: its mode before (absent: `None`) and its new blob and mode
/// (deleted: `None`). Ids are git object ids in the sandbox's repository (which reads the
/// user's objects through its alternates).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Change {
    /// `/`-separated path relative to the resource root.
    pub path: String,
    /// The blob and mode before (at the branch tip, or the directory's base).
    pub old: Option<(Oid, i32)>,
    /// The blob and mode to write.
    pub new: Option<(Oid, i32)>,
}

/// What a file looked like when it was checked: the write re-checks it just before replacing
/// it, so an edit made meanwhile is refused instead of overwritten.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Fingerprint {
    dev: u64,
    ino: u64,
    mode: u32,
    len: u64,
    mtime_ns: i128,
    ctime_ns: i128,
}

impl Fingerprint {
    /// Whether it was a directory.
    pub fn is_dir(&self) -> bool {
        self.mode & 0o170_000 == 0o040_000
    }

    /// The fingerprint of `path` (not following a final symbolic link); `None` when absent.
    pub fn of(path: &Path) -> Option<Self> {
        let m = fs::symlink_metadata(path).ok()?;
        Some(Self {
            dev: m.dev(),
            ino: m.ino(),
            mode: m.mode(),
            len: m.len(),
            mtime_ns: i128::from(m.mtime()) * 1_000_000_000 + i128::from(m.mtime_nsec()),
            ctime_ns: i128::from(m.ctime()) * 1_000_000_000 + i128::from(m.ctime_nsec()),
        })
    }
}

/// Git specifics of a decided write.
#[derive(Debug, Clone)]
pub struct GitWrite {
    /// The branch HEAD is on (the one recorded at `plan use`).
    pub branch: String,
    /// Its tip when checked: the new commit's parent and the compare-and-swap's old value.
    pub tip: Oid,
    /// The tree to commit (merged with the tip), in the sandbox's repository.
    pub tree: Oid,
    /// The work tree's git directory (`.git`, or `.git/worktrees/NAME`).
    pub git_dir: PathBuf,
}

/// One resource's write, fully decided.
#[derive(Debug, Clone)]
pub struct Decided {
    /// The resource.
    pub base: PlanBase,
    /// The sandbox's private git directory (holds the new blobs).
    pub sandbox_git: PathBuf,
    /// Git checkout specifics (`None`: a directory).
    pub git: Option<GitWrite>,
    /// Paths that change, deletions first.
    pub changes: Vec<Change>,
    /// Directories to create (parents first) and to remove (deepest first).
    pub mkdirs: Vec<String>,
    /// Directories that become files; each is empty once its tracked files are deleted.
    pub rmdirs: Vec<String>,
    /// Every changed path's state when checked.
    pub seen: HashMap<String, Option<Fingerprint>>,
    /// Bytes of new content.
    pub new_bytes: u64,
}

fn refused(message: String) -> RunError {
    RunError::Invalid(message)
}

fn git_err(what: &str) -> impl Fn(git2::Error) -> RunError + '_ {
    move |e| RunError::Sandbox(format!("{what}: {}", e.message()))
}

/// The changes from `old` to `new` (two trees of `repo`), deletions first, then writes in path
/// order. A file that becomes a directory (or back) is a deletion plus writes.
///
/// # Errors
/// Git errors.
pub fn tree_changes(repo: &Repository, old: Oid, new: Oid) -> Result<Vec<Change>, RunError> {
    let git = git_err("comparing trees");
    let old_t = repo.find_tree(old).map_err(&git)?;
    let new_t = repo.find_tree(new).map_err(&git)?;
    let diff = repo
        .diff_tree_to_tree(Some(&old_t), Some(&new_t), None)
        .map_err(&git)?;
    let mut deletes = Vec::new();
    let mut writes = Vec::new();
    for d in diff.deltas() {
        let side = |f: git2::DiffFile<'_>| {
            (!f.id().is_zero()).then(|| {
                (
                    f.path()
                        .map(|p| p.to_string_lossy().into_owned())
                        .unwrap_or_default(),
                    f.id(),
                    i32::from(f.mode()),
                )
            })
        };
        let (o, n) = (side(d.old_file()), side(d.new_file()));
        match (o, n) {
            (Some((op, oid, om)), Some((np, nid, nm))) if op == np && !is_tree(om) => {
                writes.push(Change {
                    path: np,
                    old: Some((oid, om)),
                    new: Some((nid, nm)),
                })
            }
            (o, n) => {
                if let Some((p, id, m)) = o {
                    deletes.push(Change {
                        path: p,
                        old: Some((id, m)),
                        new: None,
                    });
                }
                if let Some((p, id, m)) = n {
                    writes.push(Change {
                        path: p,
                        old: None,
                        new: Some((id, m)),
                    });
                }
            }
        }
    }
    // A path both deleted and written (a typechange reported as two deltas) is one write.
    let written: HashMap<String, (Oid, i32)> = writes
        .iter()
        .filter_map(|c| c.new.map(|n| (c.path.clone(), n)))
        .collect();
    let mut out: Vec<Change> = Vec::new();
    let mut merged_old: HashMap<String, (Oid, i32)> = HashMap::new();
    for c in deletes {
        if written.contains_key(&c.path) {
            merged_old.insert(c.path.clone(), c.old.unwrap_or((Oid::ZERO_SHA1, 0)));
        } else {
            out.push(c);
        }
    }
    // Deepest first, so a directory's files go before the directory becomes a file.
    out.sort_by(|a, b| b.path.cmp(&a.path));
    writes.sort_by(|a, b| a.path.cmp(&b.path));
    for mut w in writes {
        if let Some(o) = merged_old.remove(&w.path) {
            w.old = Some(o);
        }
        out.push(w);
    }
    Ok(out)
}

fn is_tree(mode: i32) -> bool {
    mode == i32::from(FileMode::Tree)
}

/// The proper prefixes of `path` (`a`, `a/b` for `a/b/c`).
fn prefixes(path: &str) -> impl Iterator<Item = &str> {
    path.match_indices('/').map(move |(i, _)| &path[..i])
}

/// Checks every path prefix of every change in `root`: a symbolic link there would send the
/// write outside the resource (or elsewhere inside it), a file there must be one this write
/// deletes. Returns the directories to create, parents first.
fn check_prefixes(name: &str, root: &Path, changes: &[Change]) -> Result<Vec<String>, RunError> {
    let deleted: HashSet<&str> = changes
        .iter()
        .filter(|c| c.new.is_none())
        .map(|c| c.path.as_str())
        .collect();
    let mut mkdirs = BTreeSet::new();
    let mut checked = HashSet::new();
    for c in changes {
        for prefix in prefixes(&c.path) {
            if !checked.insert(prefix) {
                continue;
            }
            let at = root.join(prefix);
            match fs::symlink_metadata(&at) {
                Ok(m) if m.file_type().is_symlink() && !deleted.contains(prefix) => {
                    let target = fs::read_link(&at)
                        .map(|t| t.display().to_string())
                        .unwrap_or_default();
                    return Err(refused(format!(
                        "{name}: {prefix} is a symbolic link (to {target}) in the working tree, and the plan writes {} through it; nothing was applied. Replace the link with a directory (or remove it) and retry",
                        c.path
                    )));
                }
                Ok(m) if m.is_dir() => {}
                Ok(_) if deleted.contains(prefix) => {
                    if c.new.is_some() {
                        mkdirs.insert(prefix.to_string());
                    }
                }
                Ok(_) => {
                    return Err(refused(format!(
                        "{name}: {prefix} is a file in the working tree, where the plan needs a directory for {}; nothing was applied. Move it away and retry",
                        c.path
                    )));
                }
                Err(_) => {
                    if c.new.is_some() {
                        mkdirs.insert(prefix.to_string());
                    }
                }
            }
        }
    }
    // Parents first (a BTreeSet orders `a` before `a/b`).
    Ok(mkdirs.into_iter().collect())
}

/// A path the write puts a file at, where the work tree has a directory: every file below
/// must be one the write deletes (tracked and clean); returns the directories to remove.
fn check_dirs_in_the_way(
    name: &str,
    root: &Path,
    changes: &[Change],
) -> Result<Vec<String>, RunError> {
    let deleted: HashSet<&str> = changes
        .iter()
        .filter(|c| c.new.is_none())
        .map(|c| c.path.as_str())
        .collect();
    let mut rmdirs = Vec::new();
    for c in changes.iter().filter(|c| c.new.is_some()) {
        let at = root.join(&c.path);
        let Ok(m) = fs::symlink_metadata(&at) else {
            continue;
        };
        if !m.is_dir() {
            continue;
        }
        let (files, dirs) = below(&at)?;
        for file in files {
            let rel = rel_of(root, &file);
            if !deleted.contains(rel.as_str()) {
                return Err(refused(format!(
                    "{name}: the plan replaces the directory {} with a file, but {rel} in it is not a tracked file the plan removes (untracked or ignored); nothing was applied. Move it away and retry",
                    c.path
                )));
            }
        }
        rmdirs.extend(dirs.iter().map(|d| rel_of(root, d)));
        rmdirs.push(c.path.clone());
    }
    rmdirs.sort_by(|a, b| b.cmp(a));
    rmdirs.dedup();
    Ok(rmdirs)
}

fn rel_of(root: &Path, p: &Path) -> String {
    p.strip_prefix(root)
        .unwrap_or(p)
        .to_string_lossy()
        .into_owned()
}

/// Every non-directory and every directory below `dir` (not following links).
fn below(dir: &Path) -> Result<(Vec<PathBuf>, Vec<PathBuf>), RunError> {
    let (mut files, mut dirs) = (Vec::new(), Vec::new());
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let entries =
            fs::read_dir(&d).map_err(|e| RunError::Sandbox(format!("{}: {e}", d.display())))?;
        for entry in entries.flatten() {
            let p = entry.path();
            if entry.file_type().is_ok_and(|t| t.is_dir()) {
                dirs.push(p.clone());
                stack.push(p);
            } else {
                files.push(p);
            }
        }
    }
    Ok((files, dirs))
}

/// A lock file git (or another tool) holds in `git_dir`/`common_dir`, if any.
fn held_git_lock(git_dir: &Path, common_dir: &Path, branch: &str) -> Option<PathBuf> {
    [
        git_dir.join("index.lock"),
        git_dir.join("HEAD.lock"),
        common_dir.join("packed-refs.lock"),
        common_dir.join(format!("refs/heads/{branch}.lock")),
    ]
    .into_iter()
    .find(|p| fs::symlink_metadata(p).is_ok())
}

fn status_words(s: Status) -> &'static str {
    if s.is_conflicted() {
        "unresolved merge conflict"
    } else if s.intersects(
        Status::INDEX_NEW
            | Status::INDEX_MODIFIED
            | Status::INDEX_DELETED
            | Status::INDEX_RENAMED
            | Status::INDEX_TYPECHANGE,
    ) {
        "staged"
    } else if s.is_wt_new() {
        "untracked file"
    } else if s.is_ignored() {
        "ignored file"
    } else {
        "in the working tree"
    }
}

/// Refuses when any changed path has an uncommitted change (staged or not, content or mode,
/// compared through git's filters as `git status` does) or an untracked or ignored file where
/// the plan adds one.
fn check_clean(
    name: &str,
    repo: &Repository,
    tip: Oid,
    changes: &[Change],
) -> Result<(), RunError> {
    let tip_tree = repo
        .find_commit(tip)
        .and_then(|c| c.tree())
        .map_err(git_err("reading the tip"))?;
    // Only what a glance cannot clear goes to the status (see `super::clean`).
    let doubtful =
        super::clean::doubtful(repo, &tip_tree, changes.iter().map(|c| (c.path.as_str(), c.old)))?;
    if doubtful.is_empty() {
        return Ok(());
    }
    let mut opts = StatusOptions::new();
    opts.include_untracked(true)
        .recurse_untracked_dirs(true)
        .include_ignored(true)
        .recurse_ignored_dirs(true)
        .exclude_submodules(true)
        .disable_pathspec_match(true)
        .include_unmodified(false);
    for path in &doubtful {
        opts.pathspec(path);
    }
    let statuses = repo
        .statuses(Some(&mut opts))
        .map_err(git_err("reading the working tree's status"))?;
    if let Some(entry) = statuses.iter().find(|e| e.status() != Status::CURRENT) {
        let path = entry.path().unwrap_or_default().to_string();
        let what = status_words(entry.status());
        let change = changes.iter().find(|c| c.path == path);
        let hint = if matches!(what, "untracked file" | "ignored file") {
            "Move it away"
        } else {
            "Commit or stash your change"
        };
        let mode_note = match (entry.status().contains(Status::WT_MODIFIED), change) {
            (true, Some(c)) if c.old.is_some() => " (content or mode: `git diff` shows it)",
            _ => "",
        };
        return Err(refused(format!(
            "{name}: {path} has uncommitted changes ({what}){mode_note}; the plan changes this file too, so nothing was applied. {hint} and retry"
        )));
    }
    Ok(())
}

/// Free space on the file system holding `path`, in bytes (`None` when unknown).
pub fn free_bytes(path: &Path) -> Option<u64> {
    let st = rustix::fs::statvfs(path).ok()?;
    Some(st.f_bavail.saturating_mul(st.f_frsize))
}

/// Refuses when the file systems of `root` and `git_dir` lack room for the staged copy of the
/// new content, its objects and a new index (an estimate with a 1 MiB margin).
fn check_space(
    name: &str,
    root: &Path,
    git_dir: Option<&Path>,
    new_bytes: u64,
) -> Result<(), RunError> {
    let index = git_dir
        .and_then(|g| fs::metadata(g.join("index")).ok())
        .map_or(0, |m| m.len());
    let needed = new_bytes.saturating_mul(2) + index + (1 << 20);
    for at in std::iter::once(root).chain(git_dir) {
        if let Some(free) = free_bytes(at)
            && free < needed
        {
            return Err(refused(format!(
                "{name}: applying needs about {} KiB free on the file system of {}, but only {} KiB are available; nothing was applied. Free some space and retry",
                needed / 1024,
                at.display(),
                free / 1024
            )));
        }
    }
    Ok(())
}

/// The total size of the new blobs of `changes`, from `known` where it holds them.
fn blob_sizes(
    repo: &Repository,
    changes: &[Change],
    known: &HashMap<Oid, u64>,
) -> Result<u64, RunError> {
    let odb = repo.odb().map_err(git_err("opening the objects"))?;
    let mut total = 0;
    for c in changes {
        if let Some((id, _)) = c.new {
            total += match known.get(&id) {
                Some(size) => *size,
                None => odb.read_header(id).map_err(git_err("reading a new blob"))?.0 as u64,
            };
        }
    }
    Ok(total)
}

/// The new files of a plan's change, read once: each new blob's size (for the room
/// [`check_space`] asks for) and the files git's clean filters could store differently
/// ([`normalize`] cleans those alone).
struct NewFiles {
    sizes: HashMap<Oid, u64>,
    bytes: u64,
    to_clean: Vec<Change>,
}

fn read_new_files(
    user: &Repository,
    sr: &Repository,
    base_tree: Oid,
    target: Oid,
) -> Result<NewFiles, RunError> {
    let git = git_err("reading the new files");
    let refuses_unsafe_crlf = user
        .config()
        .and_then(|c| c.get_bool("core.safecrlf"))
        .unwrap_or(false);
    let mut new = NewFiles {
        sizes: HashMap::new(),
        bytes: 0,
        to_clean: Vec::new(),
    };
    for c in tree_changes(sr, base_tree, target)? {
        let Some((id, mode)) = c.new else { continue };
        let blob = sr.find_blob(id).map_err(&git)?;
        let size = blob.size() as u64;
        new.bytes += size;
        new.sizes.insert(id, size);
        if mode != i32::from(FileMode::Link)
            && (refuses_unsafe_crlf || clean_can_change(blob.content()))
        {
            new.to_clean.push(c);
        }
    }
    Ok(new)
}

fn seen(root: &Path, changes: &[Change]) -> HashMap<String, Option<Fingerprint>> {
    changes
        .iter()
        .map(|c| (c.path.clone(), Fingerprint::of(&root.join(&c.path))))
        .collect()
}

/// Decides a git checkout's write: `target` is the tree to apply (the reviewed one, in the
/// sandbox's repository `sr`), relative to the plan's base commit.
///
/// # Errors
/// [`RunError::Invalid`] for a refusal (with what was found and what to do); git errors.
pub fn git(base: &PlanBase, sr: &Repository, target: Oid) -> Result<Decided, RunError> {
    let name = &base.resource_name;
    let root = Path::new(&base.path);
    let repo = Repository::open(root).map_err(|e| {
        refused(format!(
            "{name}: cannot open the repository at {}: {}",
            root.display(),
            e.message()
        ))
    })?;
    let recorded = base.branch.clone().ok_or_else(|| {
        refused(format!(
            // A command inside a sentence stays (D-commands-2): it explains the error rather than suggesting the next step.
            "{name}: HEAD was detached at `plan use`, so there is no branch to commit to; use `agents plan export` instead"
        ))
    })?;
    if let Some(lock) = held_git_lock(repo.path(), repo.commondir(), &recorded) {
        return Err(refused(format!(
            "{name}: {} exists: another git process is running, or one was killed and left it; nothing was applied. Remove {} if no git process runs, then retry",
            lock.display(),
            lock.display()
        )));
    }
    let head = repo
        .head()
        .map_err(|e| refused(format!("{name}: cannot read HEAD: {}", e.message())))?;
    if !head.is_branch() {
        return Err(refused(format!(
            "{name}: HEAD is detached; check out branch {recorded} again and retry"
        )));
    }
    let branch = head.shorthand().unwrap_or_default().to_string();
    if branch != recorded {
        return Err(refused(format!(
            "{name}: HEAD is on branch {branch}, but the plan was made on branch {recorded}; check out {recorded} (or rename it back) and retry"
        )));
    }
    let tip = head.peel_to_commit().map_err(git_err("reading HEAD"))?.id();
    // Room for the new content first: cleaning it already writes objects.
    let base_oid = Oid::from_str(base.base_commit.as_deref().unwrap_or_default())
        .map_err(git_err("reading the base commit"))?;
    let base_tree = sr
        .find_commit(base_oid)
        .map_err(git_err("reading the base commit"))?
        .tree_id();
    let new_files = read_new_files(&repo, sr, base_tree, target)?;
    check_space(name, root, Some(repo.path()), new_files.bytes)?;
    let target = normalize(&repo, sr, target, &new_files.to_clean)?;
    let merged = merge_with_tip(name, &branch, base, sr, target, tip)?;
    let tip_tree = sr
        .find_commit(tip)
        .map_err(git_err("reading the tip"))?
        .tree_id();
    let changes = tree_changes(sr, tip_tree, merged)?;
    let mkdirs = check_prefixes(name, root, &changes)?;
    check_clean(name, &repo, tip, &changes)?;
    let rmdirs = check_dirs_in_the_way(name, root, &changes)?;
    let new_bytes = blob_sizes(sr, &changes, &new_files.sizes)?;
    check_space(name, root, Some(repo.path()), new_bytes)?;
    Ok(Decided {
        base: base.clone(),
        sandbox_git: sr.path().to_path_buf(),
        git: Some(GitWrite {
            branch,
            tip,
            tree: merged,
            git_dir: repo.path().to_path_buf(),
        }),
        seen: seen(root, &changes),
        changes,
        mkdirs,
        rmdirs,
        new_bytes,
    })
}

/// The target tree with every file of `to_clean` (those [`read_new_files`] found git's clean
/// filters could change) cleaned by the user's repository's filters (`core.autocrlf`,
/// `.gitattributes`), as `git add` would store it: the sandbox keeps work tree bytes as they
/// are. Cleaned blobs go to the sandbox's object database; nothing is written to the user's
/// repository.
fn normalize(
    user: &Repository,
    sr: &Repository,
    target: Oid,
    to_clean: &[Change],
) -> Result<Oid, RunError> {
    if to_clean.is_empty() {
        return Ok(target);
    }
    let git = git_err("cleaning the new files through the repository's filters");
    // A second handle on the user's repository (its config and attributes decide the filters)
    // that writes into the sandbox's object database: nothing is written to the user's.
    let cleaner = Repository::open(user.workdir().unwrap_or(user.path())).map_err(&git)?;
    cleaner.set_odb(&sr.odb().map_err(&git)?).map_err(&git)?;
    let mut builder = git2::build::TreeUpdateBuilder::new();
    let mut any = false;
    for c in to_clean {
        let Some((id, mode)) = c.new else { continue };
        let blob = sr.find_blob(id).map_err(&git)?;
        let mut w = cleaner
            .blob_writer(Some(Path::new(&c.path)))
            .map_err(&git)?;
        std::io::Write::write_all(&mut w, blob.content())
            .map_err(|e| RunError::Sandbox(format!("{}: {e}", c.path)))?;
        let clean = w.commit().map_err(&git)?;
        if clean != id {
            let mode = if mode == i32::from(FileMode::BlobExecutable) {
                FileMode::BlobExecutable
            } else {
                FileMode::Blob
            };
            builder.upsert(c.path.as_str(), clean, mode);
            any = true;
        }
    }
    if !any {
        return Ok(target);
    }
    let tree = sr.find_tree(target).map_err(&git)?;
    builder.create_updated(sr, &tree).map_err(&git)
}

/// Whether git's clean filters can store `bytes` differently from how they are. libgit2 runs
/// two (it runs no external filter drivers): end-of-line conversion, which only removes
/// carriage returns, and `ident`, which only collapses `$Id: ...$`. Content with neither is
/// stored as it is, so it need not go through a filtered write (one temporary file per blob).
/// With `core.safecrlf` set, a conversion the other way can refuse content without a
/// carriage return, so every file is cleaned then.
fn clean_can_change(bytes: &[u8]) -> bool {
    bytes.contains(&b'\r') || bytes.windows(3).any(|w| w == b"$Id")
}

/// The target tree three-way merged with the branch tip (base = the plan's base commit).
fn merge_with_tip(
    name: &str,
    branch: &str,
    base: &PlanBase,
    sr: &Repository,
    target: Oid,
    tip: Oid,
) -> Result<Oid, RunError> {
    let git = git_err("merging with the branch tip");
    let base_oid = Oid::from_str(base.base_commit.as_deref().unwrap_or_default()).map_err(&git)?;
    if tip == base_oid {
        return Ok(target);
    }
    let base_tree = sr
        .find_commit(base_oid)
        .and_then(|c| c.tree())
        .map_err(&git)?;
    let tip_tree = sr.find_commit(tip).and_then(|c| c.tree()).map_err(&git)?;
    let theirs = sr.find_tree(target).map_err(&git)?;
    let mut index = sr
        .merge_trees(&base_tree, &tip_tree, &theirs, None)
        .map_err(&git)?;
    if index.has_conflicts() {
        let mut paths = Vec::new();
        if let Ok(conflicts) = index.conflicts() {
            for c in conflicts.flatten() {
                if let Some(e) = c.our.or(c.their).or(c.ancestor) {
                    paths.push(String::from_utf8_lossy(&e.path).into_owned());
                }
            }
        }
        return Err(refused(format!(
            // A command inside a sentence stays (D-commands-2): it explains the error rather than suggesting the next step.
            "{name}: the plan's changes conflict with commits made on {branch} since the plan started, in {}; resolve by re-running the plan on the new tip, or take the work as a branch with `agents plan export`",
            paths.join(", ")
        )));
    }
    index.write_tree_to(sr).map_err(&git)
}

/// Decides a directory's write: every changed file must still have its base content (and
/// mode), and nothing on a path prefix may be a symbolic link.
///
/// # Errors
/// [`RunError::Invalid`] for a refusal; git errors.
pub fn dir(
    base: &PlanBase,
    sr: &Repository,
    base_tree: Oid,
    target: Oid,
) -> Result<Decided, RunError> {
    let name = &base.resource_name;
    let root = Path::new(&base.path);
    let changes = tree_changes(sr, base_tree, target)?;
    let mkdirs = check_prefixes(name, root, &changes)?;
    for c in &changes {
        let at = root.join(&c.path);
        let now = content_of(&at);
        let expected = match c.old {
            Some((id, mode)) => Some((
                sr.find_blob(id)
                    .map_err(git_err("reading a base file"))?
                    .content()
                    .to_vec(),
                mode,
            )),
            None => None,
        };
        let same = match (&now, &expected) {
            (None, None) => true,
            (Some((bytes, mode)), Some((want, want_mode))) => bytes == want && mode == want_mode,
            _ => false,
        };
        // A directory where the plan puts a file is checked with the directories below.
        let dir_in_the_way = c.new.is_some() && fs::symlink_metadata(&at).is_ok_and(|m| m.is_dir());
        if !(same || dir_in_the_way) {
            return Err(refused(format!(
                "{name}: {} was changed since the plan started; the plan changes it too, so nothing was applied",
                c.path
            )));
        }
    }
    let rmdirs = check_dirs_in_the_way(name, root, &changes)?;
    let new_bytes = blob_sizes(sr, &changes, &HashMap::new())?;
    check_space(name, root, None, new_bytes)?;
    Ok(Decided {
        base: base.clone(),
        sandbox_git: sr.path().to_path_buf(),
        git: None,
        seen: seen(root, &changes),
        changes,
        mkdirs,
        rmdirs,
        new_bytes,
    })
}

/// A file's bytes and git mode (a symbolic link's bytes are its target); `None` when absent or
/// a directory.
pub fn content_of(path: &Path) -> Option<(Vec<u8>, i32)> {
    let m = fs::symlink_metadata(path).ok()?;
    if m.file_type().is_symlink() {
        let t = fs::read_link(path).ok()?;
        return Some((
            t.into_os_string().into_encoded_bytes(),
            i32::from(FileMode::Link),
        ));
    }
    if m.is_dir() {
        return None;
    }
    let exec = m.mode() & 0o111 != 0;
    Some((
        fs::read(path).ok()?,
        i32::from(if exec {
            FileMode::BlobExecutable
        } else {
            FileMode::Blob
        }),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_prefixes_of_a_path_are_its_parent_directories() {
        assert_eq!(prefixes("a/b/c").collect::<Vec<_>>(), ["a", "a/b"]);
        assert_eq!(prefixes("a").count(), 0);
    }
}
