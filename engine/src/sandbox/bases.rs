//! The bases of a plan's target resources, recorded at `plan use` (spec section 10:
//! "Strategize reads the base recorded at plan use"): for a git checkout the commit HEAD
//! pointed to and the branch checked out; for a directory its path. Execute sandboxes from
//! these, and Apply merges against them. A resource shared by two target projects gets one
//! base (and later one sandbox).

use std::path::Path;

use crate::domain::project::Project;
use crate::store::lifecycle_run::{BaseKind, PlanBase};
use crate::store::{Store, StoreError};

/// Why a base could not be recorded.
#[derive(Debug, thiserror::Error)]
pub enum BaseError {
    /// The checkout cannot be read.
    #[error("resource {resource}: cannot read the git checkout at {path}: {message}")]
    Git {
        /// The resource.
        resource: String,
        /// Its path.
        path: String,
        /// What git said.
        message: String,
    },
    /// The database failed.
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// HEAD's commit and branch of the checkout at `path` (`None` branch for a detached HEAD).
///
/// # Errors
/// A message when the repository cannot be opened or has no commit yet.
pub fn head_of(path: &Path) -> Result<(String, Option<String>), String> {
    let repo = git2::Repository::open(path).map_err(|e| e.message().to_string())?;
    let head = repo
        .head()
        .map_err(|e| format!("{} (a repository needs at least one commit)", e.message()))?;
    let commit = head
        .peel_to_commit()
        .map_err(|e| e.message().to_string())?
        .id()
        .to_string();
    let branch = if head.is_branch() {
        head.shorthand().ok().map(str::to_string)
    } else {
        None
    };
    Ok((commit, branch))
}

/// The bases of `projects`' linked resources, in project and link order. A repository by URL
/// (`git`) is worked on in the engine's clone of it under `data_dir`, brought to its branch's
/// tip now ([`super::remote`]). Resource types that cannot be sandboxed (branches, commits,
/// ...) are skipped.
///
/// # Errors
/// [`BaseError::Git`] for a checkout without commits or that cannot be opened, or a
/// repository that cannot be reached.
pub fn collect(
    store: &Store,
    data_dir: &Path,
    projects: &[Project],
    read_only_action: bool,
) -> Result<Vec<PlanBase>, BaseError> {
    let mut out: Vec<PlanBase> = Vec::new();
    for project in projects {
        for link in store.project_resources(&project.project_id)? {
            let r = &link.resource;
            if out.iter().any(|b| b.resource_name == r.name) {
                continue;
            }
            if r.handler_type() == "git" {
                let (clone, commit, branch) =
                    super::remote::prepare(data_dir, r).map_err(|message| BaseError::Git {
                        resource: r.name.clone(),
                        path: r.prop("url").unwrap_or_default().to_string(),
                        message,
                    })?;
                out.push(PlanBase {
                    resource_name: r.name.clone(),
                    project_name: project.name.clone(),
                    alias: link.alias.clone(),
                    kind: BaseKind::GitCheckout,
                    path: clone.display().to_string(),
                    base_commit: Some(commit),
                    branch: Some(branch),
                    read_only: link.read_only || read_only_action || r.read_only_type(),
                });
                continue;
            }
            let Some(path) = r.prop("path").map(str::to_string) else {
                continue;
            };
            let (kind, base_commit, branch) = match r.handler_type() {
                "git-checkout" => {
                    let (commit, branch) =
                        head_of(Path::new(&path)).map_err(|message| BaseError::Git {
                            resource: r.name.clone(),
                            path: path.clone(),
                            message,
                        })?;
                    (BaseKind::GitCheckout, Some(commit), branch)
                }
                "fs-directory" | "fs-mount" => (BaseKind::Directory, None, None),
                _ => continue,
            };
            out.push(PlanBase {
                resource_name: r.name.clone(),
                project_name: project.name.clone(),
                alias: link.alias.clone(),
                kind,
                path,
                base_commit,
                branch,
                read_only: link.read_only || read_only_action || r.read_only_type(),
            });
        }
    }
    Ok(out)
}
