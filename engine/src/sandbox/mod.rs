//! Sandboxes: where a plan's work happens until Apply (spec section 11 "Execution Workspace /
//! Sandbox Model", section 23 "Sandbox strategy" and "Lazy sandboxing").
//!
//! One sandbox exists per (plan, resource), created lazily on first access from a
//! [`SandboxTarget`] recorded when the plan was created. Both strategies end in the same shape,
//! so checkpoints, diffs, rollback and Apply share one code path:
//!
//! ```text
//! <data dir>/sandboxes/<plan id>/
//!     home/                  per-plan HOME, XDG_CACHE_HOME and TMPDIR for shell commands
//!     <sandbox id>/
//!         git/               a private bare repository (never inside the work tree)
//!         work/              the work tree that tools see
//!         lock               serializes mutations of this sandbox across processes
//!         base, upper/, overlay/  a sandbox that shares its base's checkout (see below)
//!     bases/<key>/           one read-only checkout per (repository, base commit)
//! ```
//!
//! - [`git_sandbox`] (`git_worktree`): the private repository borrows the user's objects
//!   through `objects/info/alternates` and checks out the base commit. Nothing is written to
//!   the user's repository.
//!   In a process that entered a mount namespace of its own ([`overlay`]), every sandbox of
//!   a base shares one checkout of it ([`shared_base`]): its `work/` is an overlay of that
//!   checkout with the sandbox's own `upper/`, mounted in this process only.
//! - [`dir_sandbox`] (`copy_on_write`): a reflink-or-copy of the directory honouring ignore
//!   files, then a first commit of that state in the private repository.
//! - [`checkpoint`]: snapshots of the work tree as trees and commits, and exact rollback.
//! - [`checkpoint_store`]: a copy of every checkpoint where other server instances read it,
//!   so a sandbox whose machine is gone is rebuilt at its last checkpoint.
//! - [`diff`]: per-file diffs against the base with stats, binary and rename detection.
//! - [`confined`]: file operations that the kernel keeps beneath the work tree.
//! - [`landlock`]: kernel confinement of shell commands.
//! - [`export`]: `plan export` to a branch or a patch.
//! - [`lifetime`]: release after apply, retention, cleanup and orphan removal.
//! - [`merge`]: three-way merge of a child plan's sandbox back into its parent's.

pub mod applied;
pub mod attribution;
pub mod bases;
pub mod checkpoint;
pub mod checkpoint_store;
pub mod confined;
pub mod diff;
pub mod dir_sandbox;
pub mod export;
pub mod git_sandbox;
pub mod landlock;
pub mod launcher;
pub mod lifetime;
pub mod merge;
pub mod overlay;
pub(crate) mod parallel;
pub mod remote;
pub mod replay;
pub mod shared_base;
pub mod sys;
pub mod written;

use std::fs;
use std::path::{Path, PathBuf};

use jiff::Timestamp;

use crate::domain::id::Id;
pub use crate::domain::sandbox::{
    CheckpointId, SandboxRecord, SandboxState, SandboxTarget, Strategy, TargetKind,
};
use crate::paths::Paths;
use crate::store::{Store, StoreError};

/// Directory (inside the data directory) that holds every sandbox.
pub const SANDBOXES_DIR: &str = "sandboxes";
/// Name of the branch, inside a sandbox's private repository, that carries its checkpoints.
pub const PLAN_REF: &str = "refs/heads/cleveragents/plan";
/// Prefix of the refs that keep every checkpoint commit reachable (one ref per checkpoint).
pub const CHECKPOINT_REF_PREFIX: &str = "refs/cleveragents/checkpoints/";
pub use crate::config::DEFAULT_RETENTION_DAYS;

impl SandboxRecord {
    /// The directories of this sandbox.
    pub fn layout(&self) -> Layout {
        Layout::at(&self.root_dir)
    }
}

/// The directories of one sandbox.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Layout {
    /// `<sandbox>/`.
    pub root: PathBuf,
    /// The private bare repository.
    pub git_dir: PathBuf,
    /// The work tree.
    pub work_dir: PathBuf,
    /// The lock file.
    pub lock_file: PathBuf,
    /// A sandbox that shares its base's checkout: the file naming that checkout.
    pub base_file: PathBuf,
    /// ... its overlay's upper directory (what the sandbox changed).
    pub upper_dir: PathBuf,
    /// ... and the overlay's own work directory.
    pub overlay_work_dir: PathBuf,
}

impl Layout {
    /// The layout under `root`.
    pub fn at(root: &Path) -> Self {
        Self {
            root: root.to_path_buf(),
            git_dir: root.join("git"),
            work_dir: root.join("work"),
            lock_file: root.join("lock"),
            base_file: root.join("base"),
            upper_dir: root.join("upper"),
            overlay_work_dir: root.join("overlay"),
        }
    }

    /// The shared checkout this sandbox's work tree is an overlay of, when it is one.
    pub fn shared_base(&self) -> Option<PathBuf> {
        let text = fs::read_to_string(&self.base_file).ok()?;
        Some(PathBuf::from(text.trim_end_matches('\n')))
    }
}

/// Errors from creating, opening or changing sandboxes.
#[derive(Debug, thiserror::Error)]
pub enum SandboxError {
    /// The database failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// A git operation failed.
    #[error("git error in {context}: {source}")]
    Git {
        /// What was being done.
        context: String,
        /// The libgit2 error.
        source: git2::Error,
    },
    /// A file operation failed.
    #[error("cannot {action} {path}: {source}")]
    Io {
        /// What was being done.
        action: &'static str,
        /// The path.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// The plan does not exist.
    #[error("plan {0} does not exist")]
    PlanNotFound(Id),
    /// The plan has no target with this resource name.
    #[error("plan {plan_id} has no resource `{resource}` to sandbox")]
    NoTarget {
        /// The plan.
        plan_id: Id,
        /// The resource asked for.
        resource: String,
    },
    /// A target was described wrongly (missing path, unknown commit, ...).
    #[error("{0}")]
    InvalidTarget(String),
    /// A target for this (plan, resource) exists already with another definition.
    #[error("plan {plan_id} already has a different target for `{resource}`")]
    TargetConflict {
        /// The plan.
        plan_id: Id,
        /// The resource.
        resource: String,
    },
    /// The sandbox's files were released or removed.
    #[error("the sandbox of {resource} for plan {plan_id} is {state}: its files are gone")]
    Gone {
        /// The plan.
        plan_id: Id,
        /// The resource.
        resource: String,
        /// Its state.
        state: SandboxState,
    },
    /// A checkpoint does not belong to the plan or is unusable.
    #[error("{0}")]
    Checkpoint(String),
    /// The sandbox shares a checkout through an overlay that cannot be mounted here.
    #[error("{0}")]
    Overlay(String),
    /// The sandbox's directory is not on this machine (it was made by another instance, whose
    /// disk this one cannot read) and no checkpoint store is configured to rebuild it from.
    #[error(
        "the sandbox of {resource} for plan {plan_id} is not on this machine: {path} does not \
         exist, and no `checkpoint-store` is configured to rebuild it from"
    )]
    Missing {
        /// The plan.
        plan_id: Id,
        /// The resource.
        resource: String,
        /// The directory the sandbox was recorded at.
        path: PathBuf,
    },
}

impl SandboxError {
    pub(crate) fn git(context: impl Into<String>) -> impl FnOnce(git2::Error) -> SandboxError {
        let context = context.into();
        move |source| SandboxError::Git { context, source }
    }

    pub(crate) fn io(action: &'static str, path: &Path) -> impl FnOnce(std::io::Error) -> Self {
        let path = path.to_path_buf();
        move |source| SandboxError::Io {
            action,
            path,
            source,
        }
    }
}

/// An active sandbox, ready for tools.
#[derive(Debug, Clone)]
pub struct Sandbox {
    /// The stored record.
    pub record: SandboxRecord,
    /// What it sandboxes.
    pub target: SandboxTarget,
    /// Its directories.
    pub layout: Layout,
    /// Keeps the overlay of a sandbox that shares its base's checkout mounted.
    mounted: overlay::MountGuard,
}

/// An exclusive lock on a sandbox, held while it is changed (released on drop).
#[derive(Debug)]
pub struct SandboxLock {
    _file: fs::File,
}

impl Sandbox {
    /// The sandbox of `record`, its overlay mounted in this process when it shares its
    /// base's checkout.
    ///
    /// # Errors
    /// [`SandboxError::Overlay`] when the overlay cannot be mounted here.
    fn open(record: SandboxRecord, target: SandboxTarget) -> Result<Self, SandboxError> {
        let layout = record.layout();
        let mounted = match layout.shared_base() {
            Some(base) => {
                if let TargetKind::GitCheckout { repo, base_commit } = &target.kind
                    && overlay::in_use()
                    && !shared_base::work_of(&base).is_dir()
                {
                    shared_base::restore(&base, repo, base_commit)?;
                }
                overlay::mount(&layout, &shared_base::work_of(&base))?
            }
            None => overlay::MountGuard::default(),
        };
        Ok(Sandbox {
            record,
            target,
            layout,
            mounted,
        })
    }

    /// A guard that keeps this sandbox's work tree readable after the sandbox is dropped
    /// (its overlay mounted, for a sandbox that shares its base's checkout).
    pub fn keep_mounted(&self) -> overlay::MountGuard {
        self.mounted.clone()
    }

    /// The work tree tools operate on.
    pub fn work_dir(&self) -> &Path {
        &self.layout.work_dir
    }

    /// Opens the private repository with the work tree attached (nothing is written to disk
    /// to attach it).
    ///
    /// # Errors
    /// [`SandboxError::Git`].
    pub fn repo(&self) -> Result<git2::Repository, SandboxError> {
        open_repo(&self.layout)
    }

    /// The base commit's id in the private repository.
    ///
    /// # Errors
    /// [`SandboxError::Checkpoint`] when the record has no base (never for active sandboxes).
    pub fn base_commit(&self) -> Result<git2::Oid, SandboxError> {
        let text =
            self.record.base_commit.as_deref().ok_or_else(|| {
                SandboxError::Checkpoint("the sandbox has no base commit yet".into())
            })?;
        git2::Oid::from_str(text).map_err(SandboxError::git("reading the base commit id"))
    }

    /// Takes the sandbox's exclusive lock, waiting for another process that holds it.
    ///
    /// # Errors
    /// [`SandboxError::Io`].
    pub fn lock(&self) -> Result<SandboxLock, SandboxError> {
        let lock = lock_file(&self.layout.lock_file)?;
        // Every writer of the private repository's index and refs holds this lock, and the
        // kernel releases it when its process dies: a git lock file found now was left by a
        // process killed mid-write (kill -9) and would block the plan for ever.
        remove_stale_git_locks(&self.layout.git_dir);
        Ok(lock)
    }
}

/// Removes `index.lock`, `HEAD.lock`, `packed-refs.lock` and `refs/**/*.lock` in a sandbox's
/// private git directory. Only call with the sandbox lock held.
fn remove_stale_git_locks(git_dir: &Path) {
    let mut found: Vec<PathBuf> = ["index.lock", "HEAD.lock", "packed-refs.lock"]
        .iter()
        .map(|n| git_dir.join(n))
        .filter(|p| p.exists())
        .collect();
    let mut dirs = vec![git_dir.join("refs")];
    while let Some(dir) = dirs.pop() {
        let Ok(entries) = fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            if entry.file_type().is_ok_and(|t| t.is_dir()) {
                dirs.push(path);
            } else if path.extension().is_some_and(|e| e == "lock") {
                found.push(path);
            }
        }
    }
    for path in found {
        tracing::warn!(file = %path.display(), "removing a git lock left by a killed process");
        let _ = fs::remove_file(&path);
    }
}

fn lock_file(path: &Path) -> Result<SandboxLock, SandboxError> {
    let file = fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(path)
        .map_err(SandboxError::io("open lock", path))?;
    file.lock().map_err(SandboxError::io("lock", path))?;
    Ok(SandboxLock { _file: file })
}

/// Opens a sandbox's private repository with its work tree attached in memory.
pub(crate) fn open_repo(layout: &Layout) -> Result<git2::Repository, SandboxError> {
    // Objects are read as git reads them, without hashing each one again on every read: a
    // large diff or Apply reads thousands of blobs, and `git fsck` is what checks them. The
    // setting is libgit2's, for the whole process.
    static READ_AS_GIT_DOES: std::sync::Once = std::sync::Once::new();
    READ_AS_GIT_DOES.call_once(|| git2::opts::strict_hash_verification(false));
    let repo = git2::Repository::open_bare(&layout.git_dir).map_err(SandboxError::git(format!(
        "opening {}",
        layout.git_dir.display()
    )))?;
    repo.set_workdir(&layout.work_dir, false)
        .map_err(SandboxError::git("attaching the work tree"))?;
    Ok(repo)
}

/// The fixed identity of commits CleverAgents writes in sandbox repositories.
/// The author and committer of commits made in a user's repository (Apply, `plan export
/// --branch`): the repository's `user.name` / `user.email`, else `CleverAgents
/// <cleveragents@localhost>`.
pub fn user_signature(repo: &git2::Repository) -> git2::Signature<'static> {
    repo.signature()
        .map(|s| s.to_owned())
        .or_else(|_| git2::Signature::now("CleverAgents", "cleveragents@localhost"))
        .expect("a fixed signature is valid")
}

/// The message of a commit made for a plan in a user's repository: the plan's description
/// (first line) as subject, `note` as body, and the trailers `Plan-Id:` and `Action:`. Apply
/// and `plan export --branch` both use it, so their commits differ only in the note.
pub fn plan_commit_message(plan: &crate::domain::plan::Plan, note: &str) -> String {
    let subject = plan
        .description
        .clone()
        .filter(|d| !d.trim().is_empty())
        .unwrap_or_else(|| format!("Apply {}", plan.action_name));
    format!(
        "{}\n\n{note}\n\nPlan-Id: {}\nAction: {}\n",
        subject.lines().next().unwrap_or_default(),
        plan.plan_id,
        plan.action_name
    )
}

pub(crate) fn signature() -> Result<git2::Signature<'static>, SandboxError> {
    git2::Signature::now("CleverAgents", "cleveragents@localhost")
        .map_err(SandboxError::git("creating a signature"))
}

/// Creates and finds sandboxes under `<data dir>/sandboxes`.
#[derive(Debug, Clone)]
pub struct Sandboxes {
    root: PathBuf,
    config_path: Option<PathBuf>,
    checkpoint_store: Option<checkpoint_store::CheckpointStore>,
}

impl Sandboxes {
    /// The sandboxes of a data directory, with the checkpoint store its `config.toml` names
    /// (`checkpoint-store`; none when the file cannot be used: the command that loads it
    /// reports why).
    pub fn new(paths: &Paths) -> Self {
        let checkpoint_store = crate::config::Config::load(&paths.config_path)
            .ok()
            .and_then(|c| c.checkpoint_store().map(checkpoint_store::CheckpointStore::at));
        Self {
            root: paths.data_dir.join(SANDBOXES_DIR),
            config_path: Some(paths.config_path.clone()),
            checkpoint_store,
        }
    }

    /// The sandboxes under an explicit directory (tests, benchmarks), without a checkpoint
    /// store.
    pub fn at(root: impl Into<PathBuf>) -> Self {
        Self {
            root: root.into(),
            config_path: None,
            checkpoint_store: None,
        }
    }

    /// These sandboxes with checkpoints also kept in `store` (or not).
    #[must_use]
    pub fn with_checkpoint_store(
        mut self,
        store: Option<checkpoint_store::CheckpointStore>,
    ) -> Self {
        self.checkpoint_store = store;
        self
    }

    /// Where checkpoints are also kept for other instances, when configured.
    pub fn checkpoint_store(&self) -> Option<&checkpoint_store::CheckpointStore> {
        self.checkpoint_store.as_ref()
    }

    /// Copies `object` (a base or checkpoint commit, or a journaled tree) of `sandbox` to the
    /// checkpoint store as `name`, when one is configured.
    ///
    /// # Errors
    /// [`SandboxError`] when the store cannot be written.
    pub(crate) fn keep(
        &self,
        sandbox: &Sandbox,
        object: git2::Oid,
        name: &str,
    ) -> Result<(), SandboxError> {
        match &self.checkpoint_store {
            Some(store) => store.push(
                &sandbox.layout,
                &sandbox.record.plan_id,
                &sandbox.record.sandbox_id,
                object,
                name,
            ),
            None => Ok(()),
        }
    }

    /// The configuration file of the data directory, when known (tools read its `[index]`
    /// policy).
    pub fn config_path(&self) -> Option<&Path> {
        self.config_path.as_deref()
    }

    /// `<data dir>/sandboxes`.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// `<data dir>/sandboxes/<plan id>`.
    pub fn plan_dir(&self, plan_id: &Id) -> PathBuf {
        self.root.join(plan_id.to_string())
    }

    /// The per-plan writable directory for shell commands (HOME, XDG_CACHE_HOME, TMPDIR),
    /// created if missing. Returns `(home, cache, tmp)`.
    ///
    /// # Errors
    /// [`SandboxError::Io`].
    pub fn plan_home(&self, plan_id: &Id) -> Result<(PathBuf, PathBuf, PathBuf), SandboxError> {
        let home = self.plan_dir(plan_id).join("home");
        let cache = home.join(".cache");
        let tmp = home.join("tmp");
        for dir in [&cache, &tmp] {
            fs::create_dir_all(dir).map_err(SandboxError::io("create", dir))?;
        }
        Ok((home, cache, tmp))
    }

    /// Records what a plan may sandbox. Checks that the path exists and, for git, that the
    /// base commit exists in the repository. Registering the same target again is a no-op;
    /// a different definition for the same (plan, resource) is a [`SandboxError::TargetConflict`].
    ///
    /// # Errors
    /// [`SandboxError::InvalidTarget`], [`SandboxError::TargetConflict`],
    /// [`SandboxError::PlanNotFound`], [`SandboxError::Store`].
    pub fn register_target(
        &self,
        store: &mut Store,
        target: &SandboxTarget,
    ) -> Result<(), SandboxError> {
        if store.plan(&target.plan_id)?.is_none() {
            return Err(SandboxError::PlanNotFound(target.plan_id));
        }
        let source = target.kind.source_path();
        if !source.is_absolute() {
            return Err(SandboxError::InvalidTarget(format!(
                "resource path {} must be absolute",
                source.display()
            )));
        }
        if !source.is_dir() {
            return Err(SandboxError::InvalidTarget(format!(
                "resource path {} is not a directory",
                source.display()
            )));
        }
        if let TargetKind::GitCheckout { repo, base_commit } = &target.kind {
            git_sandbox::check_base(repo, base_commit)?;
        }
        if let Some(existing) = store.sandbox_target(&target.plan_id, &target.resource_name)? {
            return if &existing == target {
                Ok(())
            } else {
                Err(SandboxError::TargetConflict {
                    plan_id: target.plan_id,
                    resource: target.resource_name.clone(),
                })
            };
        }
        store.insert_sandbox_target(target, Timestamp::now())?;
        Ok(())
    }

    /// The active sandbox of (plan, resource), creating it first if it does not exist
    /// (lazy sandboxing). A sandbox left half-created by a crash is removed and created anew.
    ///
    /// # Errors
    /// [`SandboxError::NoTarget`], [`SandboxError::Gone`] for a released or removed sandbox,
    /// creation errors (git, I/O, store).
    pub fn ensure(
        &self,
        store: &mut Store,
        plan_id: &Id,
        resource: &str,
    ) -> Result<Sandbox, SandboxError> {
        let target =
            store
                .sandbox_target(plan_id, resource)?
                .ok_or_else(|| SandboxError::NoTarget {
                    plan_id: *plan_id,
                    resource: resource.to_string(),
                })?;
        // Creation is serialized per plan so that two processes never build the same sandbox.
        fs::create_dir_all(self.plan_dir(plan_id))
            .map_err(SandboxError::io("create", &self.plan_dir(plan_id)))?;
        let _plan_lock = lock_file(&self.plan_dir(plan_id).join("lock"))?;
        if let Some(record) = store.sandbox(plan_id, resource)? {
            match record.state {
                SandboxState::Active => {
                    drop(_plan_lock);
                    let record = self.here(store, record, &target)?;
                    return Sandbox::open(record, target);
                }
                SandboxState::Creating => {
                    tracing::warn!(sandbox = %record.sandbox_id, "removing a half-created sandbox");
                    remove_sandbox_dir(&record.root_dir)?;
                    store.delete_sandbox(&record.sandbox_id)?;
                }
                state => {
                    return Err(SandboxError::Gone {
                        plan_id: *plan_id,
                        resource: resource.to_string(),
                        state,
                    });
                }
            }
        }
        self.create(store, target)
    }

    /// The sandbox of (plan, resource) if it exists and is active; never creates one.
    ///
    /// # Errors
    /// [`SandboxError::Store`].
    pub fn existing(
        &self,
        store: &Store,
        plan_id: &Id,
        resource: &str,
    ) -> Result<Option<Sandbox>, SandboxError> {
        let Some(record) = store.sandbox(plan_id, resource)? else {
            return Ok(None);
        };
        if record.state != SandboxState::Active {
            return Ok(None);
        }
        let Some(target) = store.sandbox_target(plan_id, resource)? else {
            return Ok(None);
        };
        let record = self.here(store, record, &target)?;
        Sandbox::open(record, target).map(Some)
    }

    /// Every active sandbox of a plan, in creation order.
    ///
    /// # Errors
    /// [`SandboxError::Store`].
    pub fn active(&self, store: &Store, plan_id: &Id) -> Result<Vec<Sandbox>, SandboxError> {
        let mut out = Vec::new();
        for record in store.sandboxes_of_plan(plan_id)? {
            if record.state == SandboxState::Active
                && let Some(sb) = self.existing(store, plan_id, &record.resource_name)?
            {
                out.push(sb);
            }
        }
        Ok(out)
    }

    fn create(&self, store: &mut Store, target: SandboxTarget) -> Result<Sandbox, SandboxError> {
        let sandbox_id = Id::generate();
        let root_dir = self.plan_dir(&target.plan_id).join(sandbox_id.to_string());
        let mut record = SandboxRecord {
            sandbox_id,
            plan_id: target.plan_id,
            resource_name: target.resource_name.clone(),
            strategy: target.kind.strategy(),
            state: SandboxState::Creating,
            root_dir,
            base_commit: None,
            created_at: Timestamp::now(),
            released_at: None,
            removed_at: None,
        };
        // The row comes first, so a crash leaves a `creating` row that says which directory to
        // remove, never an unknown directory.
        store.insert_sandbox(&record)?;
        let layout = record.layout();
        // Held until the sandbox value shares it, so the overlay is mounted once.
        let mut first_mount = overlay::MountGuard::default();
        let built = fs::create_dir_all(&layout.work_dir)
            .map_err(SandboxError::io("create", &layout.work_dir))
            .and_then(|()| match &target.kind {
                // Every overlay path is beneath the root, named by ids and hashes otherwise.
                TargetKind::GitCheckout { repo, base_commit }
                    if overlay::in_use() && overlay::nameable(&[&self.root]) =>
                {
                    shared_base::create_sandbox(&self.root, &layout, repo, base_commit)
                        .map(|(base, mounted)| {
                            first_mount = mounted;
                            base
                        })
                        .or_else(|e| match e {
                            SandboxError::Overlay(_) => {
                                full_checkout_instead(&layout, repo, base_commit, &e)
                            }
                            other => Err(other),
                        })
                }
                TargetKind::GitCheckout { repo, base_commit } => {
                    git_sandbox::create(&layout, repo, base_commit)
                }
                TargetKind::Directory { root } => dir_sandbox::create(&layout, root),
            });
        let built = built.and_then(|base| match &self.checkpoint_store {
            Some(cs) => cs
                .push(&layout, &record.plan_id, &record.sandbox_id, base, "base")
                .map(|()| base),
            None => Ok(base),
        });
        let base = match built {
            Ok(base) => base,
            Err(e) => {
                let _ = remove_sandbox_dir(&layout.root);
                let _ = store.delete_sandbox(&record.sandbox_id);
                return Err(e);
            }
        };
        record.base_commit = Some(base.to_string());
        record.state = SandboxState::Active;
        store.activate_sandbox(&record.sandbox_id, &base.to_string())?;
        tracing::info!(plan = %record.plan_id, resource = %record.resource_name,
            strategy = %record.strategy, shared = layout.shared_base().is_some(),
            "sandbox created");
        let sandbox = Sandbox::open(record, target);
        drop(first_mount);
        sandbox
    }
}

/// Makes the sandbox of `layout` a full checkout after its shared checkout could not be
/// mounted (`why`): the kernel or the file system refused the overlay, which then stays off
/// for this process (docs/sandbox.md, "Shared checkouts").
fn full_checkout_instead(
    layout: &Layout,
    repo: &Path,
    base_commit: &str,
    why: &SandboxError,
) -> Result<git2::Oid, SandboxError> {
    tracing::warn!(sandbox = %layout.root.display(), error = %why,
        "shared checkouts are off for this process: a full checkout instead");
    overlay::refused(&why.to_string());
    remove_sandbox_dir(&layout.root)?;
    fs::create_dir_all(&layout.work_dir).map_err(SandboxError::io("create", &layout.work_dir))?;
    git_sandbox::create(layout, repo, base_commit)
}

impl Sandboxes {
    /// `record` as this machine reaches it. A sandbox whose directory exists here is used
    /// where it is. One made on another machine (its recorded directory is not here) is
    /// rebuilt from the checkpoint store under this data directory, at its newest checkpoint,
    /// unless a copy there is at that checkpoint already. The process that holds the plan's
    /// lease (the instance that took it over) records the new directory, so the sandbox
    /// moves with its driver; any other process (`plan diff`, review, apply from another
    /// instance) reads its own copy and leaves the record to the driver.
    fn here(
        &self,
        store: &Store,
        mut record: SandboxRecord,
        target: &SandboxTarget,
    ) -> Result<SandboxRecord, SandboxError> {
        if record.state != SandboxState::Active || record.root_dir.exists() {
            return Ok(record);
        }
        let Some(cs) = &self.checkpoint_store else {
            return Err(SandboxError::Missing {
                plan_id: record.plan_id,
                resource: record.resource_name.clone(),
                path: record.root_dir.clone(),
            });
        };
        let plan_dir = self.plan_dir(&record.plan_id);
        fs::create_dir_all(&plan_dir).map_err(SandboxError::io("create", &plan_dir))?;
        let _plan_lock = lock_file(&plan_dir.join("lock"))?;
        let local = Layout::at(&plan_dir.join(record.sandbox_id.to_string()));
        let want = newest_commit(store, &record)?;
        let current = git2::Repository::open_bare(&local.git_dir)
            .ok()
            .and_then(|r| r.refname_to_id(PLAN_REF).ok());
        if current != Some(want) || !local.work_dir.is_dir() {
            if let Err(e) = self.rebuild(cs, store, &record, target, &local, want) {
                let _ = remove_sandbox_dir(&local.root);
                return Err(e);
            }
            tracing::info!(plan = %record.plan_id, resource = %record.resource_name,
                commit = %want, dir = %local.root.display(),
                "sandbox rebuilt from the checkpoint store");
        }
        let driving = crate::lease::holder(store, &record.plan_id)?.is_some_and(|l| {
            l.pid == std::process::id() && l.host == crate::lease::host_name()
        });
        if driving {
            // The driver may resume a step from a tree its journal recorded after the
            // checkpoint a reader's copy was made at: every tree the store keeps comes along.
            cs.fetch(&local, &record.plan_id, &record.sandbox_id)?;
            store.move_sandbox(&record.sandbox_id, &local.root)?;
        }
        record.root_dir = local.root;
        Ok(record)
    }
}

/// The commit a sandbox is at after its newest checkpoint that was not discarded (its base
/// when no checkpoint holds it).
fn newest_commit(store: &Store, record: &SandboxRecord) -> Result<git2::Oid, SandboxError> {
    let checkpoints = store.checkpoints(&record.plan_id)?;
    let text = checkpoints
        .iter()
        .rev()
        .filter(|c| c.discarded_at.is_none())
        .find_map(|c| {
            c.states
                .iter()
                .find(|s| s.sandbox_id == record.sandbox_id)
                .map(|s| s.commit_oid.clone())
        })
        .or_else(|| record.base_commit.clone())
        .ok_or_else(|| SandboxError::Checkpoint("the sandbox has no base commit yet".into()))?;
    git2::Oid::from_str(&text).map_err(SandboxError::git("reading a checkpoint commit id"))
}

impl Sandboxes {
    /// Builds the sandbox of `record` anew in `layout` from the checkpoint store, at `commit`:
    /// its private repository (borrowing the user's objects again for a git checkout), the
    /// store's objects of the sandbox, the plan branch and one ref per checkpoint, and the
    /// work tree and index of `commit`.
    fn rebuild(
        &self,
        cs: &checkpoint_store::CheckpointStore,
        store: &Store,
        record: &SandboxRecord,
        target: &SandboxTarget,
        layout: &Layout,
        commit: git2::Oid,
    ) -> Result<(), SandboxError> {
        remove_sandbox_dir(&layout.root)?;
        fs::create_dir_all(&layout.work_dir)
            .map_err(SandboxError::io("create", &layout.work_dir))?;
        match &target.kind {
            TargetKind::GitCheckout { repo, .. } => {
                let repo = self.borrowed_from(store, repo)?;
                git_sandbox::init_borrowing(layout, &repo)?;
            }
            TargetKind::Directory { .. } => {
                git_sandbox::init_private(&layout.git_dir)?;
            }
        }
        rebuild_at(cs, store, record, layout, commit)
    }

    /// The repository a git sandbox borrows from on this machine: `repo` itself when it is
    /// here, else, for a child plan branched from its parent's sandbox (`repo` is the parent's
    /// private repository, `<sandboxes>/<plan>/<sandbox>/git`, on another machine), the
    /// parent's sandbox as this machine reaches it (rebuilt from the store if need be).
    fn borrowed_from(&self, store: &Store, repo: &Path) -> Result<PathBuf, SandboxError> {
        if repo.exists() || repo.file_name().is_none_or(|n| n != "git") {
            return Ok(repo.to_path_buf());
        }
        let ids = repo
            .parent()
            .and_then(|sandbox| Some((sandbox.file_name()?, sandbox.parent()?.file_name()?)));
        let Some((sandbox, plan)) = ids.and_then(|(s, p)| {
            Some((
                s.to_str()?.parse::<Id>().ok()?,
                p.to_str()?.parse::<Id>().ok()?,
            ))
        }) else {
            return Ok(repo.to_path_buf());
        };
        let Some(parent) = store
            .sandboxes_of_plan(&plan)?
            .into_iter()
            .find(|r| r.sandbox_id == sandbox && r.state == SandboxState::Active)
        else {
            return Ok(repo.to_path_buf());
        };
        let Some(target) = store.sandbox_target(&plan, &parent.resource_name)? else {
            return Ok(repo.to_path_buf());
        };
        Ok(self.here(store, parent, &target)?.layout().git_dir)
    }
}

/// The second half of [`Sandboxes::rebuild`], once the private repository exists.
fn rebuild_at(
    cs: &checkpoint_store::CheckpointStore,
    store: &Store,
    record: &SandboxRecord,
    layout: &Layout,
    commit: git2::Oid,
) -> Result<(), SandboxError> {
    cs.fetch(layout, &record.plan_id, &record.sandbox_id)?;
    let repo = open_repo(layout)?;
    let found = repo.find_commit(commit).map_err(|_| {
        SandboxError::Checkpoint(format!(
            "the checkpoint store {} lacks commit {commit} of the sandbox of {} for plan {}",
            cs.dir().display(),
            record.resource_name,
            record.plan_id
        ))
    })?;
    repo.reference(PLAN_REF, commit, true, "rebuilt from the checkpoint store")
        .map_err(SandboxError::git("creating the plan branch"))?;
    repo.set_head(PLAN_REF)
        .map_err(SandboxError::git("pointing HEAD at the plan branch"))?;
    for cp in store.checkpoints(&record.plan_id)? {
        if let Some(state) = cp
            .states
            .iter()
            .find(|s| s.sandbox_id == record.sandbox_id)
            && let Ok(oid) = git2::Oid::from_str(&state.commit_oid)
            && repo.find_commit(oid).is_ok()
        {
            repo.reference(
                &format!("{CHECKPOINT_REF_PREFIX}{}", cp.checkpoint_id),
                oid,
                true,
                "checkpoint",
            )
            .map_err(SandboxError::git("creating a checkpoint ref"))?;
        }
    }
    let tree = found
        .tree()
        .map_err(SandboxError::git("reading the checkpoint's tree"))?;
    git_sandbox::checkout(layout, &repo, &tree)
}

/// Removes a sandbox's directory, its overlay first unmounted in this process.
pub(crate) fn remove_sandbox_dir(root: &Path) -> Result<(), SandboxError> {
    let layout = Layout::at(root);
    overlay::unmount_now(&layout.work_dir);
    shared_base::open_overlay_work(&layout);
    remove_dir_if_exists(root)
}

/// Deletes the directory tree `trash` (already out of the way, renamed by the caller) in the
/// background: a detached `rm -rf`, so that a command does not wait for the deletion of
/// every file of a checkout. The `rm` runs in a process group of its own, so an interrupt
/// meant for the command (Ctrl-C) does not stop it half-way. Where the process cannot be
/// started the tree is removed here.
pub(crate) fn remove_in_background(trash: &Path) -> Result<(), SandboxError> {
    use std::os::unix::process::CommandExt;
    let spawned = std::process::Command::new("rm")
        .process_group(0)
        .arg("-rf")
        .arg("--")
        .arg(trash)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn();
    match spawned {
        // Reaped by a thread in a long-running process (the TUI); a command that exits first
        // leaves it to finish on its own.
        Ok(mut child) => {
            std::thread::spawn(move || child.wait());
            Ok(())
        }
        Err(_) => remove_dir_if_exists(trash),
    }
}

/// Removes a directory tree if it exists.
pub(crate) fn remove_dir_if_exists(path: &Path) -> Result<(), SandboxError> {
    match fs::remove_dir_all(path) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(SandboxError::io("remove", path)(e)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::plan::Plan;

    #[test]
    fn a_sandbox_left_half_created_by_a_crash_is_rebuilt_and_an_existing_one_reused() {
        let dir = tempfile::tempdir().unwrap();
        let repo = dir.path().join("user");
        let head = testing::repo_with_files(&repo, &[("a.txt", "a\n")]);
        let mut store = Store::open(&dir.path().join("db")).unwrap();
        let plan = Plan::new("local/x", "x", Timestamp::now());
        store.insert_plan(&plan).unwrap();
        let sandboxes = Sandboxes::at(dir.path().join("sandboxes"));
        let target = SandboxTarget {
            plan_id: plan.plan_id,
            resource_name: "local/user".into(),
            alias: None,
            kind: TargetKind::GitCheckout {
                repo: repo.clone(),
                base_commit: head.clone(),
            },
            read_only: false,
        };
        sandboxes.register_target(&mut store, &target).unwrap();
        sandboxes.register_target(&mut store, &target).unwrap();
        let mut other = target.clone();
        other.read_only = true;
        assert!(matches!(
            sandboxes.register_target(&mut store, &other),
            Err(SandboxError::TargetConflict { .. })
        ));
        // A crash after the row was written and half the files were copied.
        let crashed = SandboxRecord {
            sandbox_id: Id::generate(),
            plan_id: plan.plan_id,
            resource_name: "local/user".into(),
            strategy: Strategy::GitWorktree,
            state: SandboxState::Creating,
            root_dir: sandboxes
                .plan_dir(&plan.plan_id)
                .join("01ARZ3NDEKTSV4RRFFQ69G5FAV"),
            base_commit: None,
            created_at: Timestamp::now(),
            released_at: None,
            removed_at: None,
        };
        store.insert_sandbox(&crashed).unwrap();
        fs::create_dir_all(crashed.root_dir.join("work")).unwrap();
        fs::write(crashed.root_dir.join("work/partial"), "x").unwrap();
        let sb = sandboxes
            .ensure(&mut store, &plan.plan_id, "local/user")
            .unwrap();
        assert_ne!(sb.record.sandbox_id, crashed.sandbox_id);
        assert!(
            !crashed.root_dir.exists(),
            "the partial directory is removed"
        );
        assert_eq!(
            fs::read_to_string(sb.work_dir().join("a.txt")).unwrap(),
            "a\n"
        );
        assert_eq!(
            store.plan(&plan.plan_id).unwrap().unwrap().sandbox_refs,
            [sb.record.sandbox_id.to_string()]
        );
        // After a restart the same sandbox is found again.
        drop(store);
        let mut store = Store::open(&dir.path().join("db")).unwrap();
        let again = sandboxes
            .ensure(&mut store, &plan.plan_id, "local/user")
            .unwrap();
        assert_eq!(again.record.sandbox_id, sb.record.sandbox_id);
        assert!(matches!(
            sandboxes.ensure(&mut store, &plan.plan_id, "local/nope"),
            Err(SandboxError::NoTarget { .. })
        ));
    }

    #[test]
    fn checkpoint_ids_parse_only_with_their_prefix() {
        let id = CheckpointId::generate();
        assert_eq!(id.as_str().parse::<CheckpointId>().unwrap(), id);
        assert!(
            "01ARZ3NDEKTSV4RRFFQ69G5FAV"
                .parse::<CheckpointId>()
                .is_err()
        );
        assert!("cp_nope".parse::<CheckpointId>().is_err());
    }
}

#[cfg(test)]
pub(crate) mod testing {
    //! Temp git repositories and plans for sandbox tests.

    use std::path::Path;
    use std::process::Command;

    /// Runs git in `dir` with a fixed identity; panics on failure.
    pub fn git(dir: &Path, args: &[&str]) -> String {
        let out = Command::new("git")
            .args(args)
            .current_dir(dir)
            .env("GIT_AUTHOR_NAME", "t")
            .env("GIT_AUTHOR_EMAIL", "t@example.com")
            .env("GIT_COMMITTER_NAME", "t")
            .env("GIT_COMMITTER_EMAIL", "t@example.com")
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("HOME", dir)
            .output()
            .expect("git runs");
        assert!(
            out.status.success(),
            "git {args:?} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap().trim().to_string()
    }

    /// A repository with a few committed files; returns the HEAD commit id.
    pub fn repo_with_files(dir: &Path, files: &[(&str, &str)]) -> String {
        std::fs::create_dir_all(dir).unwrap();
        git(dir, &["init", "-q", "-b", "main"]);
        for (path, content) in files {
            let p = dir.join(path);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, content).unwrap();
        }
        git(dir, &["add", "-A"]);
        git(dir, &["commit", "-q", "-m", "initial"]);
        git(dir, &["rev-parse", "HEAD"])
    }
}
