//! The Apply phase (spec section 13, lifecycle issue item 8): the plan's sandboxes are merged
//! into the real resources, all or nothing.
//!
//! 1. For every target resource, everything is checked before anything is written:
//!    - git checkout: HEAD must be on the branch recorded at `plan use` (not detached, not
//!      renamed); the sandbox's changes are replayed on the base commit's tree and three-way
//!      merged with the branch's current tip (base = sandbox base, ours = tip, theirs = final
//!      checkpoint); the merge must not conflict; the user must have no uncommitted change
//!      (staged or not) in a file the plan changes;
//!    - directory: every file the plan changes must still have its base content.
//! 2. Required validations run on the merged tree (a copy in the data directory), with their
//!    timeouts; informational results are recorded.
//! 3. An apply journal (files with base and new hashes, the commit to be) is stored before the
//!    first write. Then only the changed files are written (atomically) and staged, the commit
//!    (one non-merge commit on the recorded branch, parent = the tip checked in 1, trailers
//!    `Plan-Id:` and `Action:`, author from the repository's config, hooks not run) is made
//!    the branch tip with a compare-and-swap, and the journal is completed.
//! 4. A journal left pending by a crash is completed at the next start; a file with neither its
//!    base nor its new content stops it without overwriting anything.
//!
//! Any refusal leaves every real resource byte-identical and the plan at apply / errored with
//! its sandboxes kept.

use std::fs;
use std::io::Write;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::Instant;

use git2::{FileMode, ObjectType, Oid, Repository, TreeWalkMode, TreeWalkResult};
use jiff::Timestamp;
use serde::Serialize;
use serde_json::{Value, json};

use super::execute::sandboxes;
use super::state::{self, commit};
use super::validations::{self, Outcome};
use super::{Engine, RunError};
use crate::engine::domain::approval::ApprovalStatus;
use crate::engine::domain::{Id, Phase, Plan, ProcessingState};
use crate::engine::events::EventKind;
use crate::engine::sandbox::checkpoint::snapshot;
use crate::engine::sandbox::{Sandbox, Sandboxes};
use crate::engine::store::lifecycle_run::{
    BaseKind, Journal, JournalEntry, JournalStatus, PlanBase,
};

/// How Apply ended.
#[derive(Debug, Clone, PartialEq)]
pub enum Ended {
    /// The changes are in the project.
    Applied(Value),
    /// A check refused the apply (nothing was written) or a journal could not be completed.
    Errored {
        /// Error code (`APPLY_REFUSED`, `VALIDATION_FAILED`, `APPLY_JOURNAL`).
        code: String,
        /// What failed.
        message: String,
    },
}

/// How one file changes: its new content and mode, or deletion.
#[derive(Debug, Clone)]
struct FileChange {
    path: String,
    new: Option<(Vec<u8>, i32)>,
}

/// One resource's changes, ready to write.
struct Prepared {
    base: PlanBase,
    changes: Vec<FileChange>,
    /// Git: the merged tree, the tip it was merged with, the branch.
    git: Option<(Oid, Oid, String)>,
    additions: u64,
    deletions: u64,
}

/// What `plan apply` shows before asking: per resource, the files and line counts.
#[derive(Debug, Clone, Serialize)]
pub struct Preview {
    /// Resource name.
    pub resource: String,
    /// `(status letter, path, added, removed)`.
    pub files: Vec<(String, String, u64, u64)>,
}

fn sha256(bytes: &[u8]) -> String {
    crate::engine::sandbox::confined::sha256_hex(bytes)
}

fn refused(message: String) -> RunError {
    RunError::Invalid(message)
}

/// The sandbox's changes against its base: (path, new content and mode or deletion).
fn sandbox_changes(sb: &Sandbox) -> Result<(Vec<FileChange>, Oid, Oid), RunError> {
    let _lock = sb.lock()?;
    let repo = sb.repo()?;
    let base = sb.base_commit()?;
    let base_tree = repo
        .find_commit(base)
        .and_then(|c| c.tree())
        .map_err(|e| RunError::Sandbox(e.message().to_string()))?
        .id();
    let final_tree = snapshot(&repo)?;
    let git = |e: git2::Error| RunError::Sandbox(e.message().to_string());
    let old = repo.find_tree(base_tree).map_err(git)?;
    let new = repo.find_tree(final_tree).map_err(git)?;
    let diff = repo
        .diff_tree_to_tree(Some(&old), Some(&new), None)
        .map_err(git)?;
    let mut out = Vec::new();
    for d in diff.deltas() {
        let old_path = d
            .old_file()
            .path()
            .map(|p| p.to_string_lossy().into_owned());
        let new_path = d
            .new_file()
            .path()
            .map(|p| p.to_string_lossy().into_owned());
        let new_id = d.new_file().id();
        if !new_id.is_zero() {
            let blob = repo.find_blob(new_id).map_err(git)?;
            out.push(FileChange {
                path: new_path.clone().unwrap_or_default(),
                new: Some((blob.content().to_vec(), i32::from(d.new_file().mode()))),
            });
        } else if let Some(p) = old_path.clone() {
            out.push(FileChange { path: p, new: None });
        }
        if let (Some(o), Some(n)) = (&old_path, &new_path)
            && o != n
            && !d.old_file().id().is_zero()
        {
            out.push(FileChange {
                path: o.clone(),
                new: None,
            });
        }
    }
    Ok((out, base_tree, final_tree))
}

fn line_counts(old: Option<&[u8]>, new: Option<&[u8]>) -> (u64, u64) {
    let text = |b: Option<&[u8]>| {
        b.map(|b| String::from_utf8_lossy(b).into_owned())
            .unwrap_or_default()
    };
    let (o, n) = (text(old), text(new));
    let diff = similar::TextDiff::from_lines(&o, &n);
    let mut add = 0;
    let mut del = 0;
    for c in diff.iter_all_changes() {
        match c.tag() {
            similar::ChangeTag::Insert => add += 1,
            similar::ChangeTag::Delete => del += 1,
            similar::ChangeTag::Equal => {}
        }
    }
    (add, del)
}

/// The changed files per resource, for the confirmation (`plan apply` before asking).
///
/// # Errors
/// Sandbox and store errors.
pub fn preview(engine: &Engine, plan: &Plan) -> Result<Vec<Preview>, RunError> {
    let sbs = sandboxes(engine);
    let mut out = Vec::new();
    for sb in sbs.active(engine.store(), &plan.plan_id)? {
        let (changes, base_tree, _) = sandbox_changes(&sb)?;
        let repo = sb.repo()?;
        let old_tree = repo
            .find_tree(base_tree)
            .map_err(|e| RunError::Sandbox(e.message().to_string()))?;
        let mut files = Vec::new();
        for c in changes {
            let old = old_tree
                .get_path(Path::new(&c.path))
                .ok()
                .and_then(|e| repo.find_blob(e.id()).ok())
                .map(|b| b.content().to_vec());
            let status = match (&old, &c.new) {
                (None, Some(_)) => "A",
                (Some(_), None) => "D",
                _ => "M",
            };
            let (a, d) = line_counts(old.as_deref(), c.new.as_ref().map(|n| n.0.as_slice()));
            files.push((status.to_string(), c.path, a, d));
        }
        out.push(Preview {
            resource: sb.record.resource_name.clone(),
            files,
        });
    }
    Ok(out)
}

/// Checks a git checkout and computes the merged tree (nothing is written to the work tree,
/// the index or any ref; new blobs and trees go to the object database).
fn prepare_git(base: &PlanBase, sb: &Sandbox, final_tree: Oid) -> Result<Prepared, RunError> {
    let path = Path::new(&base.path);
    let repo = Repository::open(path).map_err(|e| {
        refused(format!(
            "{}: cannot open the repository: {}",
            base.resource_name,
            e.message()
        ))
    })?;
    let git = |e: git2::Error| RunError::Sandbox(e.message().to_string());
    let head = repo.head().map_err(|e| {
        refused(format!(
            "{}: cannot read HEAD: {}",
            base.resource_name,
            e.message()
        ))
    })?;
    if !head.is_branch() {
        return Err(refused(format!(
            "{}: HEAD is detached; check out branch {} again and retry",
            base.resource_name,
            base.branch.as_deref().unwrap_or("(none recorded)")
        )));
    }
    let branch = head.shorthand().unwrap_or_default().to_string();
    let recorded = base.branch.clone().ok_or_else(|| {
        refused(format!(
            "{}: HEAD was detached at `plan use`, so there is no branch to commit to; use `agents plan export` instead",
            base.resource_name
        ))
    })?;
    if branch != recorded {
        return Err(refused(format!(
            "{}: HEAD is on branch {branch}, but the plan was made on branch {recorded}; check out {recorded} (or rename it back) and retry",
            base.resource_name
        )));
    }
    let tip = head.peel_to_commit().map_err(git)?;
    // Everything below writes objects only to the sandbox's private repository, which reads
    // the user's objects through its alternates: a refusal leaves the user's repository
    // byte-identical.
    let sr = sb.repo()?;
    let base_oid = Oid::from_str(base.base_commit.as_deref().unwrap_or_default()).map_err(git)?;
    let base_tree = sr
        .find_commit(base_oid)
        .and_then(|c| c.tree())
        .map_err(git)?;
    let theirs = sr.find_tree(final_tree).map_err(git)?;
    let tip_tree = sr
        .find_commit(tip.id())
        .and_then(|c| c.tree())
        .map_err(git)?;
    let merged = if tip.id() == base_oid {
        theirs.id()
    } else {
        let mut index = sr
            .merge_trees(&base_tree, &tip_tree, &theirs, None)
            .map_err(git)?;
        if index.has_conflicts() {
            let mut paths = Vec::new();
            if let Ok(conflicts) = index.conflicts() {
                for c in conflicts.flatten() {
                    let entry = c.our.or(c.their).or(c.ancestor);
                    if let Some(e) = entry {
                        paths.push(String::from_utf8_lossy(&e.path).into_owned());
                    }
                }
            }
            return Err(refused(format!(
                "{}: the plan's changes conflict with commits made on {branch} since the plan started, in {}; resolve by re-running the plan on the new tip, or take the work as a branch with `agents plan export`",
                base.resource_name,
                paths.join(", ")
            )));
        }
        index.write_tree_to(&sr).map_err(git)?
    };
    // Files the result changes relative to the tip: the user must have no uncommitted edits
    // there (staged or not).
    let merged_tree = sr.find_tree(merged).map_err(git)?;
    let delta = sr
        .diff_tree_to_tree(Some(&tip_tree), Some(&merged_tree), None)
        .map_err(git)?;
    let index = repo.index().map_err(git)?;
    let mut to_write = Vec::new();
    let (mut additions, mut deletions) = (0, 0);
    for d in delta.deltas() {
        let p = d
            .new_file()
            .path()
            .or(d.old_file().path())
            .map(|p| p.to_string_lossy().into_owned())
            .unwrap_or_default();
        let tip_id = tip_tree.get_path(Path::new(&p)).ok().map(|e| e.id());
        let staged = index.get_path(Path::new(&p), 0).map(|e| e.id);
        let work = path.join(&p);
        let on_disk = match fs::symlink_metadata(&work) {
            Ok(m) if m.file_type().is_symlink() => fs::read_link(&work)
                .ok()
                .map(|t| Oid::hash_object(ObjectType::Blob, t.as_os_str().as_encoded_bytes()).ok()),
            Ok(m) if m.is_file() => fs::read(&work)
                .ok()
                .map(|b| Oid::hash_object(ObjectType::Blob, &b).ok()),
            Ok(_) => Some(None),
            Err(_) => None,
        };
        let work_id = on_disk.flatten();
        if staged != tip_id || work_id != tip_id {
            return Err(refused(format!(
                "{}: {p} has uncommitted changes ({}); the plan changes this file too. Commit or stash your edit and retry",
                base.resource_name,
                if staged != tip_id {
                    "staged"
                } else {
                    "in the working tree"
                }
            )));
        }
        let new_entry = merged_tree.get_path(Path::new(&p)).ok();
        let new = match new_entry {
            Some(e) => {
                let blob = sr.find_blob(e.id()).map_err(git)?;
                Some((blob.content().to_vec(), e.filemode()))
            }
            None => None,
        };
        let old = tip_id
            .and_then(|id| sr.find_blob(id).ok())
            .map(|b| b.content().to_vec());
        let (a, dl) = line_counts(old.as_deref(), new.as_ref().map(|n| n.0.as_slice()));
        additions += a;
        deletions += dl;
        to_write.push(FileChange { path: p, new });
    }
    Ok(Prepared {
        base: base.clone(),
        changes: to_write,
        git: Some((merged, tip.id(), branch)),
        additions,
        deletions,
    })
}

/// Checks a directory: every changed file must still have its base content.
fn prepare_dir(
    base: &PlanBase,
    sb: &Sandbox,
    changes: Vec<FileChange>,
    base_tree: Oid,
) -> Result<Prepared, RunError> {
    let repo = sb.repo()?;
    let tree = repo
        .find_tree(base_tree)
        .map_err(|e| RunError::Sandbox(e.message().to_string()))?;
    let (mut additions, mut deletions) = (0, 0);
    for c in &changes {
        let base_content = tree
            .get_path(Path::new(&c.path))
            .ok()
            .and_then(|e| repo.find_blob(e.id()).ok())
            .map(|b| b.content().to_vec());
        let real = fs::read(Path::new(&base.path).join(&c.path)).ok();
        if real != base_content {
            return Err(refused(format!(
                "{}: {} was changed since the plan started; the plan changes it too, so nothing was applied",
                base.resource_name, c.path
            )));
        }
        let (a, d) = line_counts(
            base_content.as_deref(),
            c.new.as_ref().map(|n| n.0.as_slice()),
        );
        additions += a;
        deletions += d;
    }
    Ok(Prepared {
        base: base.clone(),
        changes,
        git: None,
        additions,
        deletions,
    })
}

/// Writes `tree` of `repo` into `dir` (files, executable bits, symlinks).
fn materialize(repo: &Repository, tree: Oid, dir: &Path) -> Result<(), RunError> {
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

/// Removes `.NAME.cleveragents-PID` files in `dir` left by an apply of process PID that was
/// killed between writing its temporary file and renaming it (kill -9): PID no longer runs.
fn remove_stale_temps(dir: &Path, name: &str) {
    let prefix = format!(".{name}.cleveragents-");
    let Ok(entries) = fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let file = entry.file_name();
        let Some(pid) = file
            .to_str()
            .and_then(|f| f.strip_prefix(&prefix))
            .and_then(|p| p.parse::<u32>().ok())
        else {
            continue;
        };
        if pid != std::process::id() && !Path::new(&format!("/proc/{pid}")).exists() {
            tracing::warn!(file = %entry.path().display(), "removing a temporary file left by a killed apply");
            let _ = fs::remove_file(entry.path());
        }
    }
}

/// Writes one file atomically (or removes it), with the mode git recorded.
fn write_file(root: &Path, change: &FileChange) -> std::io::Result<()> {
    let target = root.join(&change.path);
    match &change.new {
        None => match fs::remove_file(&target) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(e),
            _ => Ok(()),
        },
        Some((bytes, mode)) => {
            let dir = target.parent().unwrap_or(root);
            fs::create_dir_all(dir)?;
            let name = target
                .file_name()
                .and_then(|n| n.to_str())
                .unwrap_or("file");
            let tmp = dir.join(format!(".{name}.cleveragents-{}", std::process::id()));
            let _ = fs::remove_file(&tmp);
            remove_stale_temps(dir, name);
            let result = if *mode == i32::from(FileMode::Link) {
                std::os::unix::fs::symlink(
                    <std::ffi::OsStr as std::os::unix::ffi::OsStrExt>::from_bytes(bytes),
                    &tmp,
                )
            } else {
                (|| {
                    let mut f = fs::OpenOptions::new()
                        .write(true)
                        .create_new(true)
                        .open(&tmp)?;
                    let perm = if *mode == i32::from(FileMode::BlobExecutable) {
                        0o755
                    } else {
                        0o644
                    };
                    f.set_permissions(fs::Permissions::from_mode(perm))?;
                    f.write_all(bytes)?;
                    f.sync_all()
                })()
            };
            result
                .and_then(|()| fs::rename(&tmp, &target))
                .inspect_err(|_| {
                    let _ = fs::remove_file(&tmp);
                })
        }
    }
}

fn hash_of(path: &Path) -> Option<String> {
    match fs::symlink_metadata(path) {
        Ok(m) if m.file_type().is_symlink() => fs::read_link(path)
            .ok()
            .map(|t| sha256(t.as_os_str().as_encoded_bytes())),
        Ok(_) => fs::read(path).ok().map(|b| sha256(&b)),
        Err(_) => None,
    }
}

/// Writes one prepared resource (the journal is already stored). Returns the commit made.
fn write_resource(
    p: &Prepared,
    journal: &Journal,
    no_commit: bool,
) -> Result<Option<String>, RunError> {
    let root = Path::new(&p.base.path);
    let io = |path: &str, e: std::io::Error| {
        RunError::Sandbox(format!("writing {}: {e}", root.join(path).display()))
    };
    for c in &p.changes {
        write_file(root, c).map_err(|e| io(&c.path, e))?;
    }
    let Some((_, tip, branch)) = &p.git else {
        return Ok(None);
    };
    if no_commit {
        return Ok(None);
    }
    let repo = Repository::open(root).map_err(|e| RunError::Sandbox(e.message().to_string()))?;
    let git = |e: git2::Error| RunError::Sandbox(e.message().to_string());
    let mut index = repo.index().map_err(git)?;
    for c in &p.changes {
        if c.new.is_some() {
            index.add_path(Path::new(&c.path)).map_err(git)?;
        } else {
            let _ = index.remove_path(Path::new(&c.path));
        }
    }
    index.write().map_err(git)?;
    let commit = Oid::from_str(journal.commit_id.as_deref().unwrap_or_default()).map_err(git)?;
    repo.reference_matching(
        &format!("refs/heads/{branch}"),
        commit,
        true,
        *tip,
        "cleveragents: apply plan",
    )
    .map_err(|e| {
        RunError::Sandbox(format!(
            "moving {branch} to the new commit: {}",
            e.message()
        ))
    })?;
    Ok(Some(commit.to_string()))
}

/// Completes journals a crashed apply left pending. Returns false (and stops) when a file has
/// neither its base nor its new content.
fn recover_journals(
    engine: &mut Engine,
    plan: &Plan,
    sbs: &Sandboxes,
) -> Result<Result<bool, String>, RunError> {
    let pending = engine.store().pending_journals(&plan.plan_id)?;
    if pending.is_empty() {
        return Ok(Ok(false));
    }
    for j in pending {
        let root = PathBuf::from(&j.path);
        // The new content: from the commit (git) or the sandbox's final state (directory).
        let new_content = |path: &str| -> Option<(Vec<u8>, i32)> {
            match j.kind {
                BaseKind::GitCheckout => {
                    let repo = Repository::open(&root).ok()?;
                    let c = repo
                        .find_commit(Oid::from_str(j.commit_id.as_deref()?).ok()?)
                        .ok()?;
                    let e = c.tree().ok()?.get_path(Path::new(path)).ok()?;
                    let mode = e.filemode();
                    Some((repo.find_blob(e.id()).ok()?.content().to_vec(), mode))
                }
                BaseKind::Directory => {
                    let sb = sbs
                        .existing(engine.store(), &plan.plan_id, &j.resource_name)
                        .ok()??;
                    let repo = sb.repo().ok()?;
                    let tree = repo.find_tree(snapshot(&repo).ok()?).ok()?;
                    let e = tree.get_path(Path::new(path)).ok()?;
                    let mode = e.filemode();
                    Some((repo.find_blob(e.id()).ok()?.content().to_vec(), mode))
                }
            }
        };
        let mut todo = Vec::new();
        for e in &j.entries {
            let now = hash_of(&root.join(&e.path));
            if now == e.new_sha256 {
                continue;
            }
            if now != e.base_sha256 {
                engine
                    .store_mut()
                    .finish_journal(&j.journal_id, JournalStatus::Stopped, None)?;
                return Ok(Err(format!(
                    "{}: {} has neither its content from before the apply nor the plan's; nothing more was written. Inspect the file, then cancel the plan or apply again",
                    j.resource_name, e.path
                )));
            }
            todo.push(FileChange {
                path: e.path.clone(),
                new: if e.new_sha256.is_some() {
                    new_content(&e.path)
                } else {
                    None
                },
            });
        }
        for c in &todo {
            write_file(&root, c).map_err(|e| RunError::Sandbox(format!("{}: {e}", c.path)))?;
        }
        if j.kind == BaseKind::GitCheckout
            && let Some(commit_id) = &j.commit_id
        {
            let repo =
                Repository::open(&root).map_err(|e| RunError::Sandbox(e.message().to_string()))?;
            let commit =
                Oid::from_str(commit_id).map_err(|e| RunError::Sandbox(e.message().to_string()))?;
            let parent = repo.find_commit(commit).and_then(|c| c.parent_id(0)).ok();
            let head = repo.head().ok();
            let branch = head
                .as_ref()
                .and_then(|h| h.shorthand().ok().map(str::to_string));
            let tip = head.and_then(|h| h.target());
            if let (Some(branch), Some(tip), Some(parent)) = (branch, tip, parent)
                && tip == parent
            {
                let mut index = repo
                    .index()
                    .map_err(|e| RunError::Sandbox(e.message().to_string()))?;
                for e in &j.entries {
                    if e.new_sha256.is_some() {
                        let _ = index.add_path(Path::new(&e.path));
                    } else {
                        let _ = index.remove_path(Path::new(&e.path));
                    }
                }
                let _ = index.write();
                repo.reference_matching(
                    &format!("refs/heads/{branch}"),
                    commit,
                    true,
                    tip,
                    "cleveragents: apply plan (recovered)",
                )
                .map_err(|e| RunError::Sandbox(e.message().to_string()))?;
            }
        }
        engine
            .store_mut()
            .finish_journal(&j.journal_id, JournalStatus::Complete, None)?;
    }
    Ok(Ok(true))
}

fn fail(
    engine: &mut Engine,
    plan: &mut Plan,
    code: &str,
    message: String,
    details: Value,
) -> Result<Ended, RunError> {
    let answer = format!("agents plan apply {}", plan.plan_id);
    state::errored(engine.store_mut(), plan, code, &message, details, &answer)?;
    engine.flush(&plan.plan_id)?;
    Ok(Ended::Errored {
        code: code.to_string(),
        message,
    })
}

/// Takes an exclusive, non-blocking lock per target resource (a locked directory under
/// `<data dir>/locks/apply/`, keyed by the resource's path), so two plans never write the same
/// checkout or directory at once.
///
/// # Errors
/// [`RunError::ResourceBusy`] when another process holds one; I/O errors as
/// [`RunError::Sandbox`].
fn lock_resources(
    engine: &Engine,
    plan_id: &Id,
) -> Result<Vec<crate::engine::safe_write::DirLock>, RunError> {
    let targets: Vec<(String, String)> = engine
        .store()
        .plan_bases(plan_id)?
        .into_iter()
        .map(|b| (b.resource_name, b.path))
        .collect();
    lock_paths(
        &engine.paths().data_dir.join("locks").join("apply"),
        &targets,
    )
}

/// Locks one directory under `root` per `(resource name, path)`; see [`lock_resources`].
fn lock_paths(
    root: &Path,
    targets: &[(String, String)],
) -> Result<Vec<crate::engine::safe_write::DirLock>, RunError> {
    let mut locks = Vec::new();
    for (name, path) in targets {
        let dir = root.join(&sha256(path.as_bytes())[..16]);
        match crate::engine::safe_write::try_lock_dir(&dir) {
            Ok(Some(lock)) => locks.push(lock),
            Ok(None) => {
                return Err(RunError::ResourceBusy {
                    resource: name.clone(),
                });
            }
            Err(e) => return Err(RunError::Sandbox(format!("{}: {e}", dir.display()))),
        }
    }
    Ok(locks)
}

/// Runs Apply for a plan at (execute, complete) or (apply, queued|errored). `no_commit`
/// writes the changes to the working tree without committing.
///
/// # Errors
/// Store and sandbox errors; refusals are [`Ended::Errored`] with nothing written.
pub fn run(engine: &mut Engine, plan: &mut Plan, no_commit: bool) -> Result<Ended, RunError> {
    let started = Instant::now();
    let plan_id = plan.plan_id;
    let sbs = sandboxes(engine);
    // One apply per resource at a time: held until this function returns.
    let _resource_locks = lock_resources(engine, &plan_id)?;
    if plan.phase() == Phase::Execute {
        plan.status
            .advance(Phase::Apply)
            .map_err(|e| RunError::WrongState {
                phase: plan.phase(),
                state: plan.state(),
                message: e.to_string(),
                hints: Vec::new(),
            })?;
    }
    state::set_state(plan, ProcessingState::Processing)?;
    plan.error_code = None;
    plan.error_message = None;
    let snapshot_plan = plan.clone();
    commit(
        engine.store_mut(),
        plan,
        EventKind::ApplyStarted,
        json!({"attempt": snapshot_plan.status.attempt, "no_commit": no_commit}),
        |tx| {
            state::resolve_pending(
                tx,
                &snapshot_plan,
                Some("phase_gate"),
                ApprovalStatus::Approved,
                &json!({"answered_by": "apply"}),
            )?;
            state::resolve_pending(
                tx,
                &snapshot_plan,
                Some("errored"),
                ApprovalStatus::Approved,
                &json!({"answer": "retry"}),
            )?;
            state::reason(tx, &snapshot_plan, None)
        },
    )?;
    engine.flush(&plan_id)?;

    let recovered = match recover_journals(engine, plan, &sbs)? {
        Ok(r) => r,
        Err(message) => return fail(engine, plan, "APPLY_JOURNAL", message, Value::Null),
    };
    let mut prepared = Vec::new();
    let mut all_validations: Vec<Outcome> = Vec::new();
    if !recovered {
        engine
            .observer()
            .progress("Apply: checking every resource before writing");
        let bases = engine.store().plan_bases(&plan_id)?;
        for base in &bases {
            let Some(sb) = sbs.existing(engine.store(), &plan_id, &base.resource_name)? else {
                continue;
            };
            let (changes, base_tree, final_tree) = sandbox_changes(&sb)?;
            if changes.is_empty() {
                continue;
            }
            // A known key in the result never reaches the user's project (docs/sandbox.md).
            if let Some((path, var)) =
                crate::engine::redact::find_in_diff(&sb.repo()?, base_tree, final_tree)
                    .map_err(|e| RunError::Sandbox(e.message().to_string()))?
            {
                return fail(
                    engine,
                    plan,
                    "APPLY_REFUSED",
                    format!(
                        "{path} in {} contains the value of {var}; remove the key from the file (or correct the step that wrote it) and apply again",
                        base.resource_name
                    ),
                    json!({"resource": base.resource_name, "path": path, "secret": var}),
                );
            }
            let p = match base.kind {
                BaseKind::GitCheckout => prepare_git(base, &sb, final_tree),
                BaseKind::Directory => prepare_dir(base, &sb, changes, base_tree),
            };
            match p {
                // The merged result equals what the branch already has (another plan applied
                // the same change): nothing to write, and no empty commit.
                Ok(p) if p.changes.is_empty() => engine.observer().progress(&format!(
                    "Apply: {} already has these changes; nothing to write",
                    base.resource_name
                )),
                Ok(p) => prepared.push(p),
                Err(RunError::Invalid(message)) => {
                    return fail(
                        engine,
                        plan,
                        "APPLY_REFUSED",
                        message,
                        json!({"resource": base.resource_name}),
                    );
                }
                Err(e) => return Err(e),
            }
        }
        // Validations on the merged trees.
        engine
            .observer()
            .progress("Apply: running validations on the merged tree");
        let check_root = sbs.plan_dir(&plan_id).join("apply-check");
        let tmp = check_root.join("tmp");
        for base in &bases {
            let dir = check_root.join(base.resource_name.replace(['/', ':'], "_"));
            if !validations::any_for(engine, plan, &base.resource_name)? {
                continue;
            }
            let merged = prepared
                .iter()
                .find(|p| p.base.resource_name == base.resource_name);
            match (base.kind, merged.and_then(|p| p.git.as_ref())) {
                (BaseKind::GitCheckout, Some((tree, _, _))) => {
                    let Some(sb) = sbs.existing(engine.store(), &plan_id, &base.resource_name)?
                    else {
                        continue;
                    };
                    materialize(&sb.repo()?, *tree, &dir)?;
                }
                _ => {
                    let Some(sb) = sbs.existing(engine.store(), &plan_id, &base.resource_name)?
                    else {
                        continue;
                    };
                    let repo = sb.repo()?;
                    let tree = snapshot(&repo)?;
                    materialize(&repo, tree, &dir)?;
                }
            }
            fs::create_dir_all(&tmp).map_err(|e| RunError::Sandbox(e.to_string()))?;
            all_validations.extend(validations::run_in_dir(
                engine,
                plan,
                &base.resource_name,
                &dir,
                &tmp,
            )?);
        }
        let _ = fs::remove_dir_all(&check_root);
        if let Some(f) = all_validations.iter().find(|v| v.required && !v.passed) {
            let message = format!(
                "required validation `{}` failed on the merged tree ({}); nothing was applied",
                f.command, f.result
            );
            let mut summary = plan.validation_summary.clone().unwrap_or(json!({}));
            summary["apply"] = json!(all_validations);
            plan.validation_summary = Some(summary);
            return fail(
                engine,
                plan,
                "VALIDATION_FAILED",
                message,
                json!({"validations": all_validations}),
            );
        }
        // Journals, then writes.
        let mut written = Vec::new();
        for p in &prepared {
            let root = Path::new(&p.base.path);
            let commit_id = match (&p.git, no_commit) {
                (Some((tree, tip, _)), false) => {
                    let repo = Repository::open(root)
                        .map_err(|e| RunError::Sandbox(e.message().to_string()))?;
                    let git = |e: git2::Error| RunError::Sandbox(e.message().to_string());
                    // The merged tree, rebuilt in the user's repository from the tip's tree and
                    // the files that change (same content, so the same tree id).
                    let parent = repo.find_commit(*tip).map_err(git)?;
                    let mut builder = git2::build::TreeUpdateBuilder::new();
                    for c in &p.changes {
                        match &c.new {
                            Some((bytes, mode)) => {
                                let blob = repo.blob(bytes).map_err(git)?;
                                let mode = match *mode {
                                    m if m == i32::from(FileMode::BlobExecutable) => {
                                        FileMode::BlobExecutable
                                    }
                                    m if m == i32::from(FileMode::Link) => FileMode::Link,
                                    _ => FileMode::Blob,
                                };
                                builder.upsert(c.path.as_str(), blob, mode);
                            }
                            None => {
                                builder.remove(c.path.as_str());
                            }
                        }
                    }
                    let built = builder
                        .create_updated(&repo, &parent.tree().map_err(git)?)
                        .map_err(git)?;
                    if built != *tree {
                        tracing::warn!(%built, merged = %tree, "the rebuilt tree differs from the checked merge");
                    }
                    let tree = repo.find_tree(built).map_err(git)?;
                    let sig = crate::engine::sandbox::user_signature(&repo);
                    let message = crate::engine::sandbox::plan_commit_message(
                        plan,
                        "Applied by CleverAgents (git hooks were not run).",
                    );
                    Some(
                        repo.commit(None, &sig, &sig, &message, &tree, &[&parent])
                            .map_err(git)?
                            .to_string(),
                    )
                }
                _ => None,
            };
            let journal = Journal {
                journal_id: Id::generate(),
                plan_id,
                resource_name: p.base.resource_name.clone(),
                kind: p.base.kind,
                path: p.base.path.clone(),
                status: JournalStatus::Pending,
                entries: p
                    .changes
                    .iter()
                    .map(|c| JournalEntry {
                        path: c.path.clone(),
                        base_sha256: hash_of(&root.join(&c.path)),
                        new_sha256: c.new.as_ref().map(|n| sha256(&n.0)),
                    })
                    .collect(),
                commit_id,
                created_at: Timestamp::now(),
            };
            engine.store_mut().insert_journal(&journal)?;
            let commit = write_resource(p, &journal, no_commit)?;
            engine.store_mut().finish_journal(
                &journal.journal_id,
                JournalStatus::Complete,
                commit.as_deref(),
            )?;
            written.push(json!({
                "resource": p.base.resource_name,
                "kind": p.base.kind,
                "files": p.changes.iter().map(|c| c.path.clone()).collect::<Vec<_>>(),
                "additions": p.additions,
                "deletions": p.deletions,
                "commit": commit,
                "branch": p.git.as_ref().map(|g| g.2.clone()),
            }));
        }
        let usage = engine.store().usage_for_plan(&plan_id)?;
        let summary = json!({
            "resources": written,
            "files": prepared.iter().map(|p| p.changes.len()).sum::<usize>(),
            "additions": prepared.iter().map(|p| p.additions).sum::<u64>(),
            "deletions": prepared.iter().map(|p| p.deletions).sum::<u64>(),
            "validations": all_validations,
            "duration_ms": started.elapsed().as_millis() as u64,
            "cost_usd": usage.cost_usd,
            "tokens": usage.input_tokens + usage.output_tokens,
            "committed": !no_commit,
            "git_hooks": "not run",
        });
        return finish(engine, plan, &sbs, summary);
    }
    let summary = json!({"recovered_from_journal": true, "duration_ms": started.elapsed().as_millis() as u64});
    finish(engine, plan, &sbs, summary)
}

fn finish(
    engine: &mut Engine,
    plan: &mut Plan,
    sbs: &Sandboxes,
    summary: Value,
) -> Result<Ended, RunError> {
    let plan_id = plan.plan_id;
    let mut vs = plan.validation_summary.clone().unwrap_or(json!({}));
    vs["apply"] = summary["validations"].clone();
    vs["apply_summary"] = summary.clone();
    plan.validation_summary = Some(vs);
    state::set_state(plan, ProcessingState::Complete)?;
    plan.status
        .advance(Phase::Applied)
        .map_err(|e| RunError::WrongState {
            phase: plan.phase(),
            state: plan.state(),
            message: e.to_string(),
            hints: Vec::new(),
        })?;
    plan.completed_at = Some(Timestamp::now());
    let data = summary.clone();
    commit(
        engine.store_mut(),
        plan,
        EventKind::ApplyComplete,
        data,
        |_| Ok(()),
    )?;
    engine.flush(&plan_id)?;
    if let Err(e) =
        crate::engine::sandbox::lifetime::release_after_apply(engine.store_mut(), sbs, &plan_id)
    {
        tracing::warn!(error = %e, "sandboxes could not be released after apply");
    }
    Ok(Ended::Applied(summary))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_apply_to_the_same_resource_is_refused_while_the_first_holds_it() {
        let dir = tempfile::tempdir().unwrap();
        let targets = vec![("local/repo".to_string(), "/srv/repo".to_string())];
        let held = lock_paths(dir.path(), &targets).unwrap();
        match lock_paths(dir.path(), &targets) {
            Err(RunError::ResourceBusy { resource }) => assert_eq!(resource, "local/repo"),
            other => panic!("expected ResourceBusy, got {other:?}"),
        }
        let other = vec![("local/other".to_string(), "/srv/other".to_string())];
        assert!(
            lock_paths(dir.path(), &other).is_ok(),
            "other resources are free"
        );
        drop(held);
        assert!(
            lock_paths(dir.path(), &targets).is_ok(),
            "released with the first apply"
        );
    }
}
