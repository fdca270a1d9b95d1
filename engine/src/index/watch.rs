//! Keeping an index current while the user works (spec section 24 "Real-time Index
//! Synchronization"): a [`Watcher`] follows a resource's directory with `notify` and, a
//! short quiet moment after the last change, brings the index up to date with
//! [`super::build::update`] (the same incremental update every read does first), so a search
//! sees an edit within about a second without waiting for the next read.

use std::path::{Path, PathBuf};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use notify::{RecursiveMode, Watcher as _};

use super::build::{self, UpdateReport};
use super::walk::Policy;
use super::{IndexError, store};

/// How long the directory must stay quiet before the index is updated.
pub const QUIET: Duration = Duration::from_millis(150);

/// What the watcher last did: the update's report or its error.
pub type LastUpdate = Arc<Mutex<Option<Result<UpdateReport, String>>>>;

/// Follows one resource's directory and updates its index after changes; stops when
/// dropped.
pub struct Watcher {
    watcher: Option<notify::RecommendedWatcher>,
    thread: Option<JoinHandle<()>>,
    last: LastUpdate,
    /// The resource's name.
    pub resource: String,
}

impl std::fmt::Debug for Watcher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Watcher")
            .field("resource", &self.resource)
            .finish_non_exhaustive()
    }
}

/// Whether a changed path can change what the index holds: anything in the work tree, and
/// in `.git` only what moves HEAD (`HEAD`, refs, the index file of `git add`).
fn relevant(root: &Path, path: &Path) -> bool {
    let Ok(rel) = path.strip_prefix(root) else {
        return true;
    };
    let mut parts = rel.components();
    match parts.next() {
        Some(c) if c.as_os_str() == ".git" => {
            let rest: PathBuf = parts.collect();
            rest == Path::new("HEAD") || rest.starts_with("refs") || rest == Path::new("index")
        }
        _ => true,
    }
}

impl Watcher {
    /// Starts following the resource whose index is in `dir`.
    ///
    /// # Errors
    /// [`IndexError::Missing`] without an index; [`IndexError::Io`] when the directory cannot
    /// be watched.
    pub fn start(dir: &Path, policy: Policy) -> Result<Self, IndexError> {
        let manifest = store::read_manifest(dir).ok_or(IndexError::Missing)?;
        let root = manifest.root.clone();
        let (tx, rx) = mpsc::channel::<()>();
        let filter_root = root.clone();
        let mut watcher = notify::recommended_watcher(move |res: notify::Result<notify::Event>| {
            if let Ok(event) = res
                && event.paths.iter().any(|p| relevant(&filter_root, p))
            {
                let _ = tx.send(());
            }
        })
        .map_err(|e| IndexError::Io(format!("watching {}: {e}", root.display())))?;
        watcher
            .watch(&root, RecursiveMode::Recursive)
            .map_err(|e| IndexError::Io(format!("watching {}: {e}", root.display())))?;
        let last: LastUpdate = Arc::default();
        let (dir, out) = (dir.to_path_buf(), last.clone());
        let thread = std::thread::Builder::new()
            .name("index-watch".into())
            .spawn(move || {
                // Each burst of changes: wait until quiet, then update once.
                while rx.recv().is_ok() {
                    loop {
                        match rx.recv_timeout(QUIET) {
                            Ok(()) => continue,
                            Err(RecvTimeoutError::Timeout) => break,
                            Err(RecvTimeoutError::Disconnected) => return,
                        }
                    }
                    let r = build::update(&dir, &policy).map_err(|e| e.to_string());
                    if let Err(e) = &r {
                        tracing::warn!(dir = %dir.display(), error = %e, "index update after a change failed");
                    }
                    if let Ok(mut slot) = out.lock() {
                        *slot = Some(r);
                    }
                }
            })
            .map_err(|e| IndexError::Io(format!("starting the index watcher: {e}")))?;
        Ok(Self {
            watcher: Some(watcher),
            thread: Some(thread),
            last,
            resource: manifest.resource,
        })
    }

    /// What the last update after a change did, if one ran.
    pub fn last_update(&self) -> Option<Result<UpdateReport, String>> {
        self.last.lock().ok().and_then(|s| s.clone())
    }
}

impl Drop for Watcher {
    fn drop(&mut self) {
        // Dropping the notify watcher closes the channel; the thread ends after its update.
        self.watcher.take();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Starts a watcher for every index in the data directory of `paths` (none when indexing
/// is disabled); an index whose directory cannot be watched is logged and left to the
/// update before each read.
pub fn watch_all(paths: &crate::paths::Paths) -> Vec<Watcher> {
    let config = super::config(paths);
    if !config.enabled() {
        return Vec::new();
    }
    let policy = config.policy().unwrap_or_default();
    let Ok(entries) = std::fs::read_dir(store::indexes_dir(paths)) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for e in entries.flatten() {
        match Watcher::start(&e.path(), policy.clone()) {
            Ok(w) => out.push(w),
            Err(IndexError::Missing) => {}
            Err(err) => {
                tracing::warn!(dir = %e.path().display(), error = %err, "index not watched");
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::index::view::{SearchQuery, View};
    use crate::index::{Source, build};
    use crate::sandbox::testing::repo_with_files;
    use std::time::Instant;

    fn finds(dir: &Path, word: &str) -> bool {
        View::open(dir, None, &Policy::default())
            .and_then(|v| {
                v.search(&SearchQuery {
                    query: word.into(),
                    limit: 5,
                    ..Default::default()
                })
            })
            .is_ok_and(|h| !h.is_empty())
    }

    #[test]
    fn an_edit_is_searchable_within_two_seconds_while_watched() {
        let tmp = tempfile::tempdir().unwrap();
        let repo = tmp.path().join("repo");
        repo_with_files(&repo, &[("src/lib.rs", "pub fn first_thing() {}\n")]);
        let dir = tmp.path().join("index");
        build::build(
            &dir,
            "local/w",
            &repo,
            Source::Git,
            &Policy::default(),
            &|_, _| {},
        )
        .unwrap();
        let w = Watcher::start(&dir, Policy::default()).unwrap();
        assert_eq!(w.resource, "local/w");
        std::fs::write(
            repo.join("src/lib.rs"),
            "pub fn watched_change_marker() {}\n",
        )
        .unwrap();
        let started = Instant::now();
        while !finds(&dir, "watched_change_marker") {
            assert!(
                started.elapsed() < Duration::from_secs(2),
                "not searchable after 2 s; last update: {:?}",
                w.last_update()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        // The watcher, not a read, brought it in; once its update is done, nothing is
        // pending.
        while w.last_update().is_none() && started.elapsed() < Duration::from_secs(4) {
            std::thread::sleep(Duration::from_millis(20));
        }
        assert!(
            w.last_update().is_some_and(|r| r.is_ok()),
            "{:?}",
            w.last_update()
        );
        assert_eq!(build::pending(&dir, &Policy::default()).unwrap(), 0);
        drop(w);
    }
}
