//! Sandbox records (spec sections 11 and 23): what a plan sandboxes, how, and the checkpoints
//! taken in it, as the store keeps them. The work on them lives in `crate::sandbox`.

use std::fmt;
use std::path::{Path, PathBuf};
use std::str::FromStr;

use jiff::Timestamp;
use serde::Serialize;

use super::id::Id;
use super::lifecycle::str_enum;

/// Where a sandbox's content comes from: the plain description of a resource that the
/// registries hand over (spec section 23, `git-checkout` and `fs-directory`/`fs-mount`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum TargetKind {
    /// A git checkout, sandboxed at `base_commit` (the commit HEAD pointed to at `plan use`).
    GitCheckout {
        /// The checkout's work tree (or any path inside the repository).
        repo: PathBuf,
        /// Full hex id of the base commit.
        base_commit: String,
    },
    /// A plain directory, copied when the sandbox is created.
    Directory {
        /// The directory.
        root: PathBuf,
    },
}

impl TargetKind {
    /// `git_checkout` or `directory`, as stored.
    pub fn as_str(&self) -> &'static str {
        match self {
            TargetKind::GitCheckout { .. } => "git_checkout",
            TargetKind::Directory { .. } => "directory",
        }
    }

    /// The sandbox strategy this kind uses.
    pub fn strategy(&self) -> Strategy {
        match self {
            TargetKind::GitCheckout { .. } => Strategy::GitWorktree,
            TargetKind::Directory { .. } => Strategy::CopyOnWrite,
        }
    }

    /// The user's path (repository or directory).
    pub fn source_path(&self) -> &Path {
        match self {
            TargetKind::GitCheckout { repo, .. } => repo,
            TargetKind::Directory { root } => root,
        }
    }
}

/// One resource a plan may sandbox.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SandboxTarget {
    /// The plan.
    pub plan_id: Id,
    /// The resource's namespaced name (`local/api-repo`).
    pub resource_name: String,
    /// The project link's alias, used for binding (`path://ALIAS/...`, slot-name hints).
    pub alias: Option<String>,
    /// What to sandbox.
    #[serde(flatten)]
    pub kind: TargetKind,
    /// Whether the project link is read-only: writing tools are refused.
    pub read_only: bool,
}

impl SandboxTarget {
    /// The short name used in `path://NAME/` when there is no alias: the part after the last
    /// `/` of the resource name.
    pub fn short_name(&self) -> &str {
        self.resource_name
            .rsplit('/')
            .next()
            .unwrap_or(&self.resource_name)
    }

    /// Whether `name` selects this target: its alias, full resource name or short name.
    pub fn answers_to(&self, name: &str) -> bool {
        self.alias.as_deref() == Some(name)
            || self.resource_name == name
            || self.short_name() == name
    }
}

/// How a resource is sandboxed (spec section 23).
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Serialize, serde::Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum Strategy {
    /// A private repository that borrows the user's objects.
    GitWorktree,
    /// A reflink-or-copy of a directory with a private git directory.
    CopyOnWrite,
}

str_enum!(Strategy { GitWorktree => "git_worktree", CopyOnWrite => "copy_on_write" });

/// Where a sandbox is in its life.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Serialize, serde::Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum SandboxState {
    /// Being created; a crash here leaves a partial directory that the next access replaces.
    Creating,
    /// Usable.
    Active,
    /// Work tree removed (after apply); the private repository and its refs are kept.
    Released,
    /// Everything removed.
    Removed,
}

str_enum!(SandboxState {
    Creating => "creating",
    Active => "active",
    Released => "released",
    Removed => "removed",
});

/// A sandbox as stored.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SandboxRecord {
    /// Sandbox id.
    pub sandbox_id: Id,
    /// The plan.
    pub plan_id: Id,
    /// The resource.
    pub resource_name: String,
    /// Strategy.
    pub strategy: Strategy,
    /// State.
    pub state: SandboxState,
    /// `<data dir>/sandboxes/<plan id>/<sandbox id>`.
    pub root_dir: PathBuf,
    /// The base commit in the private repository (git: the user's commit; directory: the
    /// commit of the copied state). Set once the sandbox is active.
    pub base_commit: Option<String>,
    /// Creation time.
    pub created_at: Timestamp,
    /// When the work tree was removed.
    pub released_at: Option<Timestamp>,
    /// When everything was removed.
    pub removed_at: Option<Timestamp>,
}

/// A checkpoint id: `cp_` followed by a ULID.
#[derive(
    Debug,
    Clone,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Hash,
    Serialize,
    serde::Deserialize,
    schemars::JsonSchema,
)]
#[serde(transparent)]
pub struct CheckpointId(String);

impl CheckpointId {
    /// A new id.
    pub fn generate() -> Self {
        Self(format!("cp_{}", Id::generate()))
    }

    /// The id text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for CheckpointId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl FromStr for CheckpointId {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let rest = s
            .strip_prefix("cp_")
            .ok_or_else(|| format!("`{s}` is not a checkpoint id (cp_...)"))?;
        let id: Id = rest
            .parse()
            .map_err(|e| format!("`{s}` is not a checkpoint id: {e}"))?;
        Ok(Self(format!("cp_{id}")))
    }
}

/// One sandbox's state at a checkpoint.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, serde::Deserialize, schemars::JsonSchema)]
pub struct CheckpointState {
    /// The sandbox.
    pub sandbox_id: Id,
    /// The checkpoint commit in the sandbox's private repository (hex).
    pub commit_oid: String,
    /// Its tree (hex): equal tree ids mean byte-identical captured content.
    pub tree_oid: String,
}

/// A plan-wide checkpoint as stored.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, serde::Deserialize, schemars::JsonSchema)]
pub struct CheckpointRecord {
    /// `cp_...`.
    pub checkpoint_id: CheckpointId,
    /// The plan.
    pub plan_id: Id,
    /// 1, 2, ... within the plan.
    pub seq: u32,
    /// The step it belongs to (`start of step 3`, `tool run: write_file`).
    pub step: Option<String>,
    /// The decision being executed, if any.
    pub decision_id: Option<String>,
    /// A short label (`start`, `end`).
    pub label: String,
    /// Files that differ from the previous checkpoint (over all sandboxes).
    pub files_changed: u64,
    /// The highest tool-call sequence number logged when it was taken.
    pub tool_call_seq: u64,
    /// When it was taken.
    pub created_at: Timestamp,
    /// When a rollback to an earlier checkpoint discarded it.
    pub discarded_at: Option<Timestamp>,
    /// One state per sandbox that existed then.
    pub states: Vec<CheckpointState>,
}
