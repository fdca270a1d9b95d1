//! What can go wrong registering, finding, linking and removing resources: its own file
//! because custom resource types (which wrap it) and the resource registry (which links
//! resources of custom types by their rules) both use it.

use std::path::PathBuf;

use crate::domain::name::NameError;
use crate::store::StoreError;

/// Errors from the resource registry.
#[derive(Debug, thiserror::Error)]
pub enum ResourceError {
    /// The name is invalid or reserved.
    #[error("resource name `{name}`: {source}")]
    Name {
        /// The name as given.
        name: String,
        /// Why.
        source: NameError,
    },
    /// Users may not use `:` (reserved for discovered children).
    #[error(
        "resource name `{0}`: `:` is reserved for discovered children (like local/api:repo); choose a name without it"
    )]
    ChildName(String),
    /// A resource of that name exists and `--update` was not given.
    #[error("resource {0} already exists")]
    Exists(String),
    /// The same target (path, mount path or repository) is registered under another name.
    #[error("{what} {target} is already registered as {existing}")]
    SameTarget {
        /// The name the user wanted.
        name: String,
        /// The registered resource with that target.
        existing: String,
        /// `checkout`, `directory`, `mount` or `repository`.
        what: &'static str,
        /// The path.
        target: String,
    },
    /// The type cannot be added by users.
    #[error("resource type `{name}` {why}")]
    NotAddable {
        /// The type given.
        name: String,
        /// Why (`is discovered from its parent`, `is not a known type`).
        why: String,
    },
    /// A path given on the command line does not exist or is not a directory.
    #[error("{flag} {}: {problem}", path.display())]
    Path {
        /// The flag (`--path`).
        flag: &'static str,
        /// The path as given.
        path: PathBuf,
        /// What is wrong.
        problem: String,
    },
    /// The directory is not the top of a git work tree.
    #[error("--path {}: {problem}", path.display())]
    NotWorkTree {
        /// The path as given.
        path: PathBuf,
        /// What it is instead.
        problem: String,
    },
    /// `--branch` is not the checked-out branch.
    #[error("--branch {given}: the work tree at {} has `{checked_out}` checked out", path.display())]
    BranchMismatch {
        /// The branch given.
        given: String,
        /// The branch checked out.
        checked_out: String,
        /// The work tree.
        path: PathBuf,
    },
    /// HEAD is detached.
    #[error("--path {}: HEAD is detached (no branch is checked out)", path.display())]
    Detached {
        /// The work tree.
        path: PathBuf,
    },
    /// A path a server was asked to register is not on the server's host (spec section 21:
    /// the server reads paths on its own host).
    #[error("{flag} {}: {problem} on the server host {host}", path.display())]
    NotOnServerHost {
        /// The flag (`--path`).
        flag: &'static str,
        /// The path as given.
        path: PathBuf,
        /// What is wrong.
        problem: String,
        /// The server's host name.
        host: String,
    },
    /// A repository by a network URL does not answer.
    #[error("--url {url}: the repository cannot be reached: {message}")]
    Unreachable {
        /// The URL.
        url: String,
        /// What git said.
        message: String,
    },
    /// Reading the repository failed.
    #[error("cannot read the git repository at {}: {message}", path.display())]
    Git {
        /// The repository.
        path: PathBuf,
        /// The libgit2 message.
        message: String,
    },
    /// No resource of that name.
    #[error("resource `{0}` not found")]
    NotFound(crate::registry::lookup::Missing),
    /// An id prefix matches several items.
    #[error(transparent)]
    Ambiguous(crate::domain::IdPrefixError),
    /// The resource (or a discovered child) is linked to projects.
    #[error("resource {name} is linked to {}", projects.join(", "))]
    Linked {
        /// The resource.
        name: String,
        /// `project (via resource)` entries.
        projects: Vec<String>,
        /// The links as (project, linked resource) pairs.
        links: Vec<(String, String)>,
    },
    /// `--update` while plans that are not finished use the resource through a project.
    #[error("resource {name} is used by unfinished plans: {}", plans.join(", "))]
    UsedByPlans {
        /// The resource.
        name: String,
        /// Plan ids.
        plans: Vec<String>,
    },
    /// A discovered resource cannot be removed or replaced on its own.
    #[error("resource {name} was discovered from {owner}; remove or update {owner} instead")]
    Discovered {
        /// The discovered resource.
        name: String,
        /// The resource that discovered it.
        owner: String,
    },
    /// A manual link breaks the type rules.
    #[error("cannot link {child} under {parent}: {reason}")]
    LinkRule {
        /// Parent name.
        parent: String,
        /// Child name.
        child: String,
        /// The broken rule.
        reason: String,
    },
    /// A manual link would make a cycle.
    #[error(
        "cannot link {child} under {parent}: {child} is already an ancestor of {parent}, so the link would make a cycle"
    )]
    Cycle {
        /// Parent name.
        parent: String,
        /// Child name.
        child: String,
    },
    /// The link exists already.
    #[error("{child} is already a child of {parent}")]
    AlreadyLinked {
        /// Parent name.
        parent: String,
        /// Child name.
        child: String,
    },
    /// There is no such link.
    #[error("{child} is not a child of {parent}")]
    NotLinked {
        /// Parent name.
        parent: String,
        /// Child name.
        child: String,
    },
    /// Discovered links cannot be removed by hand.
    #[error("the link {parent} -> {child} was discovered and cannot be unlinked by hand")]
    AutoLink {
        /// Parent name.
        parent: String,
        /// Child name.
        child: String,
    },
    /// The database failed.
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// The [`ResourceError::Path`] problem of a path that is not there.
pub const PATH_MISSING: &str = "does not exist";

impl ResourceError {
    /// Whether a path given does not exist (a typo, or a relative path read from another
    /// directory than meant), rather than being of the wrong kind.
    #[must_use]
    pub fn is_missing_path(&self) -> bool {
        matches!(self, ResourceError::Path { problem, .. } if problem == PATH_MISSING)
    }
}

impl From<crate::registry::lookup::LookupError> for ResourceError {
    fn from(e: crate::registry::lookup::LookupError) -> Self {
        match e {
            crate::registry::lookup::LookupError::NotFound(m) => ResourceError::NotFound(m),
            crate::registry::lookup::LookupError::Ambiguous(a) => ResourceError::Ambiguous(a),
        }
    }
}
