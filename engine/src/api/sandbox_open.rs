//! A plan's sandbox opened for a person (`agents plan shell`): its work tree, readable and
//! writable at its path while the value lives. For a sandbox that shares its base's checkout
//! the overlay is mounted in this process, so a command it starts (which copies the
//! process's mount namespace) sees and writes the plan's tree (`docs/sandbox.md`, "Shared
//! checkouts"). What is written there is seen by the plan's next snapshot, as a step's
//! writes are.

use std::path::{Path, PathBuf};

use super::{ApiError, Engine};
use crate::sandbox::Sandbox;

/// An open sandbox of a plan; its work tree stays mounted until it is dropped.
#[derive(Debug)]
pub struct OpenSandbox {
    /// The resource the sandbox is of.
    pub resource: String,
    /// Whether the sandbox shares its base's checkout through an overlay.
    pub shared: bool,
    sandbox: Sandbox,
}

impl OpenSandbox {
    /// The sandbox's work tree.
    pub fn work_dir(&self) -> &Path {
        self.sandbox.work_dir()
    }

    /// The sandbox's private repository, whose index and commits are the work tree's (for
    /// `GIT_DIR`, with the work tree as `GIT_WORK_TREE`).
    pub fn git_dir(&self) -> &Path {
        &self.sandbox.layout.git_dir
    }

    /// The plan's changes in this sandbox as an overlay keeps them (`None` for a full
    /// checkout, whose work tree holds them).
    pub fn upper_dir(&self) -> Option<PathBuf> {
        self.shared.then(|| self.sandbox.layout.upper_dir.clone())
    }
}

impl Engine {
    /// Opens the sandbox of `plan` (an id or unique prefix) for `resource`, which may be left
    /// out when the plan has one sandbox. Local only: the work tree is on this machine.
    ///
    /// # Errors
    /// `NOT_FOUND` / `AMBIGUOUS` for the plan, [`super::export::ExportError`] when no single
    /// sandbox answers, [`ApiError::Sandbox`] when its overlay cannot be mounted here.
    pub fn open_sandbox(
        &self,
        plan: &str,
        resource: Option<&str>,
    ) -> Result<OpenSandbox, ApiError> {
        let (store, plan) = super::plan_diff::open_swept(self, plan)?;
        let active = self.sandboxes().active(&store, &plan.plan_id)?;
        if active.is_empty() && !store.sandboxes_of_plan(&plan.plan_id)?.is_empty() {
            return Err(ApiError::InvalidInput {
                message: format!(
                    "the sandboxes of plan {} were released (after Apply) or removed (by \
                     `agents plan cleanup` or after the retention period): there is no work \
                     tree to open",
                    plan.plan_id
                ),
            });
        }
        let chosen = super::export::choose(&active, resource)?.record.sandbox_id;
        let sandbox = active
            .into_iter()
            .find(|s| s.record.sandbox_id == chosen)
            .ok_or(super::export::ExportError::NoSandbox)?;
        Ok(OpenSandbox {
            resource: sandbox.target.resource_name.clone(),
            shared: sandbox.layout.shared_base().is_some(),
            sandbox,
        })
    }
}
