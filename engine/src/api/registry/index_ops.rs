//! The code index of a resource as registry changes (spec section 06, "Code Index"): build it
//! after `resource add` and `resource reindex`, bring it up to date after `project
//! link-resource`, remove it after `resource remove` and `project unlink-resource`. They run
//! where the data directory is (in process, or on the server), so a client never indexes its
//! own disk for a server's resource.
//!
//! An index that cannot be built is not an error of the change: the resource stays registered
//! and the next read builds the index, so the failure comes back in the outcome.

use std::sync::Mutex;

use serde::{Deserialize, Serialize};

use super::RegistryChange;
use crate::api::{ApiError, Engine};
use crate::index::{self, IndexStatus};
use crate::registry::resources;
use crate::store::Store;

/// One progress mark of a build: `done` of `total` files.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct IndexProgress {
    /// Files indexed so far.
    pub done: u64,
    /// Files to index.
    pub total: u64,
}

/// Why a resource has no index.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum NotIndexed {
    /// `[index] enabled = false` in the configuration of the data directory.
    Off,
    /// Its type has no files to index (only git checkouts and directories are indexed).
    NoFiles,
}

/// What building or updating a resource's index did.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(tag = "outcome", rename_all = "snake_case")]
pub enum IndexOutcome {
    /// Nothing was indexed, and why.
    NotIndexed {
        /// Why.
        why: NotIndexed,
    },
    /// Built from scratch.
    Built {
        /// The index now.
        status: IndexStatus,
        /// Wall time of the build.
        duration_ms: u64,
        /// Progress marks, at most one per twentieth of the files.
        progress: Vec<IndexProgress>,
    },
    /// Brought up to date (an existing index).
    Updated {
        /// The index now.
        status: IndexStatus,
    },
    /// The build failed (the next read retries it).
    BuildFailed {
        /// Why.
        error: String,
    },
    /// The update failed.
    UpdateFailed {
        /// Why.
        error: String,
    },
}

/// Builds a resource's index from scratch (`resource add`, `resource reindex`), or with
/// `update`, brings an existing one up to date and builds a missing one (`project
/// link-resource`).
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct BuildIndex {
    /// The resource, by name or id.
    pub resource: String,
    /// Update an existing index instead of rebuilding it.
    pub update: bool,
}

impl RegistryChange for BuildIndex {
    type Output = IndexOutcome;
    fn apply(self, engine: &Engine, store: &mut Store) -> Result<Self::Output, ApiError> {
        let r = resources::find(store, &self.resource)?;
        let paths = engine.paths();
        if !index::config(paths).enabled() {
            return Ok(IndexOutcome::NotIndexed {
                why: NotIndexed::Off,
            });
        }
        if index::target(paths, &r).is_none() {
            return Ok(IndexOutcome::NotIndexed {
                why: NotIndexed::NoFiles,
            });
        }
        if self.update && index::status(paths, &r, false).text_index != index::IndexState::Disabled
        {
            return Ok(match index::refresh_resource(paths, &r) {
                Ok(_) => IndexOutcome::Updated {
                    status: index::status(paths, &r, false),
                },
                Err(e) => IndexOutcome::UpdateFailed {
                    error: e.to_string(),
                },
            });
        }
        Ok(build(engine, &r))
    }
}

/// Builds `r`'s index, keeping a progress mark per twentieth of its files.
fn build(engine: &Engine, r: &resources::Resource) -> IndexOutcome {
    let marks = Mutex::new(Vec::<IndexProgress>::new());
    let result = index::build_resource(engine.paths(), r, &|done, total| {
        if let Ok(mut m) = marks.lock() {
            let step = (total / 20).max(1);
            let last = m.last().map_or(0, |p| p.done);
            if done == total || done >= last + step {
                m.push(IndexProgress { done, total });
            }
        }
    });
    match result {
        Ok(Some(b)) => IndexOutcome::Built {
            status: index::status(engine.paths(), r, false),
            duration_ms: b.duration_ms,
            progress: marks.into_inner().unwrap_or_default(),
        },
        Ok(None) => IndexOutcome::NotIndexed {
            why: NotIndexed::Off,
        },
        Err(e) => IndexOutcome::BuildFailed {
            error: e.to_string(),
        },
    }
}

/// What removing a resource's index did.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(tag = "outcome", rename_all = "snake_case")]
pub enum IndexRemoved {
    /// There was none.
    Nothing,
    /// Removed, with the number of files it held.
    Removed {
        /// Files the index held.
        files: u64,
    },
    /// It could not be removed.
    Failed {
        /// Why.
        error: String,
    },
}

/// Removes the index of a resource that is gone or no longer linked to any project.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct RemoveIndex {
    /// The resource's name (it may no longer be registered).
    pub resource: String,
}

impl RegistryChange for RemoveIndex {
    type Output = IndexRemoved;
    fn apply(self, engine: &Engine, _: &mut Store) -> Result<Self::Output, ApiError> {
        Ok(
            match index::remove_resource(engine.paths(), &self.resource) {
                Ok(Some(files)) => IndexRemoved::Removed { files },
                Ok(None) => IndexRemoved::Nothing,
                Err(e) => IndexRemoved::Failed {
                    error: e.to_string(),
                },
            },
        )
    }
}
