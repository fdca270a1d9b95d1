//! Keeping an index current while the user works (spec section 24 "Real-time Index
//! Synchronization"): a [`Watcher`] follows the directories of a resource's work tree that
//! the index walk enters (see [`super::watch_filter`]) and, a short quiet moment after the
//! last change, re-indexes the paths that changed with [`super::build::update_paths`] (the
//! whole [`super::build::update`] when HEAD moved or events were lost), so a search sees an
//! edit within about a second without waiting for the next read.
//!
//! It reacts to events only: no timer, no rescan, and nothing while nothing changes. Its own
//! work cannot wake it: reading files is no change, `.git` internals other than HEAD and refs
//! are not followed, and the index directory is skipped when it lies inside the work tree.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use notify::{RecursiveMode, Watcher as _};

use super::build::{self, UpdateReport};
use super::walk::Policy;
use super::watch_filter::{Filter, Verdict, changes_contents};
use super::{IndexError, store};

/// How long the directory must stay quiet before the index is updated.
pub const QUIET: Duration = Duration::from_millis(150);

/// What the watcher last did: the update's report or its error.
pub type LastUpdate = Arc<Mutex<Option<Result<UpdateReport, String>>>>;

/// What reaches the watcher's thread.
enum Msg {
    /// Paths that may have changed; `true` when the event stream lost events.
    Changed(Vec<PathBuf>, bool),
    /// The watcher is dropped.
    Stop,
}

/// Follows one resource's work tree and updates its index after changes; stops when
/// dropped.
pub struct Watcher {
    stop: mpsc::Sender<Msg>,
    thread: Option<JoinHandle<()>>,
    last: LastUpdate,
    updates: Arc<AtomicU64>,
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

/// What one quiet-separated burst of events asks for.
#[derive(Default)]
struct Burst {
    paths: BTreeSet<String>,
    dirs: Vec<PathBuf>,
    full: bool,
}

impl Burst {
    fn add(&mut self, filter: &mut Filter, paths: Vec<PathBuf>, lost: bool) {
        self.full |= lost;
        for p in paths {
            match filter.judge(&p) {
                Verdict::Ignore => {}
                Verdict::Head => self.full = true,
                Verdict::Path(rel) => {
                    self.paths.insert(rel);
                }
                Verdict::NewDir(d) => self.dirs.push(d),
            }
        }
    }

    fn is_empty(&self) -> bool {
        !self.full && self.paths.is_empty() && self.dirs.is_empty()
    }
}

/// Follows `dirs`, each without recursion (new directories are added as they appear).
fn follow(watcher: &mut notify::RecommendedWatcher, dirs: &[PathBuf]) {
    for d in dirs {
        if let Err(e) = watcher.watch(d, RecursiveMode::NonRecursive) {
            tracing::debug!(dir = %d.display(), error = %e, "directory not watched");
        }
    }
}

/// The thread's state: the index, its rules and what it reports.
struct Worker {
    dir: PathBuf,
    policy: Policy,
    filter: Filter,
    watcher: notify::RecommendedWatcher,
    last: LastUpdate,
    updates: Arc<AtomicU64>,
}

impl Worker {
    /// Each burst of changes: wait until quiet, then update once; ends on [`Msg::Stop`].
    fn run(mut self, rx: &Receiver<Msg>) {
        while let Ok(Msg::Changed(paths, lost)) = rx.recv() {
            let mut burst = Burst::default();
            burst.add(&mut self.filter, paths, lost);
            loop {
                match rx.recv_timeout(QUIET) {
                    Ok(Msg::Changed(paths, lost)) => burst.add(&mut self.filter, paths, lost),
                    Err(RecvTimeoutError::Timeout) => break,
                    Ok(Msg::Stop) | Err(RecvTimeoutError::Disconnected) => return,
                }
            }
            if !burst.is_empty() {
                self.update(burst);
            }
        }
    }

    fn update(&mut self, mut burst: Burst) {
        for d in std::mem::take(&mut burst.dirs) {
            let dirs = self.filter.directories(&d);
            follow(&mut self.watcher, &dirs);
            // Its files, by the rules of the whole tree (a parent's `.gitignore` too).
            for f in super::walk::walk(&d, &self.policy).0 {
                if let Verdict::Path(rel) = self.filter.judge(&d.join(&f.path)) {
                    burst.paths.insert(rel);
                }
            }
        }
        let r = if burst.full {
            build::update(&self.dir, &self.policy)
        } else {
            build::update_paths(&self.dir, &self.policy, &burst.paths)
        }
        .map_err(|e| e.to_string());
        if let Err(e) = &r {
            tracing::warn!(dir = %self.dir.display(), error = %e, "index update after a change failed");
        }
        self.updates.fetch_add(1, Ordering::Relaxed);
        if let Ok(mut slot) = self.last.lock() {
            *slot = Some(r);
        }
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
        let (tx, rx) = mpsc::channel::<Msg>();
        let events = tx.clone();
        let mut watcher = notify::recommended_watcher(move |res: notify::Result<notify::Event>| {
            let Ok(event) = res else { return };
            let lost = event.need_rescan();
            if lost || changes_contents(&event.kind) {
                let _ = events.send(Msg::Changed(event.paths, lost));
            }
        })
        .map_err(|e| IndexError::Io(format!("watching {}: {e}", root.display())))?;
        let mut filter = Filter::new(&root, dir, policy.clone());
        let dirs = filter.directories(&root);
        if dirs.is_empty() {
            return Err(IndexError::Io(format!(
                "watching {}: not a directory",
                root.display()
            )));
        }
        follow(&mut watcher, &dirs);
        let git = root.join(".git");
        if git.is_dir() {
            follow(&mut watcher, std::slice::from_ref(&git));
            if let Err(e) = watcher.watch(&git.join("refs"), RecursiveMode::Recursive) {
                tracing::debug!(error = %e, "refs not watched");
            }
        }
        let last: LastUpdate = Arc::default();
        let updates: Arc<AtomicU64> = Arc::default();
        let worker = Worker {
            dir: dir.to_path_buf(),
            policy,
            filter,
            watcher,
            last: last.clone(),
            updates: updates.clone(),
        };
        let thread = std::thread::Builder::new()
            .name("index-watch".into())
            .spawn(move || worker.run(&rx))
            .map_err(|e| IndexError::Io(format!("starting the index watcher: {e}")))?;
        Ok(Self {
            stop: tx,
            thread: Some(thread),
            last,
            updates,
            resource: manifest.resource,
        })
    }

    /// How many updates the watcher has run.
    pub fn updates(&self) -> u64 {
        self.updates.load(Ordering::Relaxed)
    }

    /// What the last update after a change did, if one ran.
    pub fn last_update(&self) -> Option<Result<UpdateReport, String>> {
        self.last.lock().ok().and_then(|s| s.clone())
    }
}

impl Drop for Watcher {
    fn drop(&mut self) {
        // The thread ends after its update, dropping the notify watcher with it.
        let _ = self.stop.send(Msg::Stop);
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

    /// Waits until the watcher has run an update and then stayed without one for `quiet`.
    fn settle(w: &Watcher, quiet: Duration) -> u64 {
        let started = Instant::now();
        while w.updates() == 0 && started.elapsed() < Duration::from_secs(5) {
            std::thread::sleep(Duration::from_millis(20));
        }
        loop {
            let before = w.updates();
            std::thread::sleep(quiet);
            if w.updates() == before || started.elapsed() > Duration::from_secs(10) {
                return w.updates();
            }
        }
    }

    #[test]
    fn the_watcher_does_not_react_to_its_own_work_or_to_git_internals() {
        let tmp = tempfile::tempdir().unwrap();
        let repo = tmp.path().join("repo");
        let files: Vec<(String, String)> = (0..200)
            .map(|i| {
                (
                    format!("d{}/f{i}.rs", i % 20),
                    format!("pub fn f{i}() {{}}\n"),
                )
            })
            .collect();
        let refs: Vec<(&str, &str)> = files
            .iter()
            .map(|(p, c)| (p.as_str(), c.as_str()))
            .collect();
        repo_with_files(&repo, &refs);
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
        // A change to many files, as an Apply makes: one burst, one update (or a few), then
        // nothing while nothing changes.
        for (p, _) in &files {
            std::fs::write(repo.join(p), "pub fn changed_everywhere() {}\n").unwrap();
        }
        let after_burst = settle(&w, Duration::from_millis(1500));
        std::thread::sleep(Duration::from_secs(2));
        assert_eq!(
            w.updates(),
            after_burst,
            "the watcher kept updating while nothing changed"
        );
        // Reading the work tree, a status that rewrites `.git/index`, and git's own objects
        // change nothing the index holds.
        let _ = std::fs::read(repo.join("d0/f0.rs")).unwrap();
        let status = std::process::Command::new("git")
            .args(["-C", repo.to_str().unwrap(), "status", "--porcelain"])
            .output()
            .unwrap();
        assert!(status.status.success());
        std::fs::write(repo.join(".git/index.lock"), b"x").unwrap();
        std::fs::remove_file(repo.join(".git/index.lock")).unwrap();
        std::fs::create_dir_all(repo.join(".git/objects/zz")).unwrap();
        std::fs::write(repo.join(".git/objects/zz/obj"), b"x").unwrap();
        std::thread::sleep(QUIET * 4);
        assert_eq!(
            w.updates(),
            after_burst,
            "a read or git's internals started an update"
        );
    }

    /// Waits up to 3 s for `word` to become searchable (`true`) or to disappear (`false`).
    fn eventually(dir: &Path, word: &str, present: bool) -> bool {
        let started = Instant::now();
        while finds(dir, word) != present {
            if started.elapsed() > Duration::from_secs(3) {
                return false;
            }
            std::thread::sleep(Duration::from_millis(30));
        }
        true
    }

    #[test]
    fn new_directories_removals_and_commits_reach_the_index_and_ignored_files_do_not() {
        let tmp = tempfile::tempdir().unwrap();
        let repo = tmp.path().join("repo");
        repo_with_files(
            &repo,
            &[
                (".gitignore", "*.log\n"),
                ("src/old.rs", "pub fn soon_removed_marker() {}\n"),
            ],
        );
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
        std::fs::create_dir_all(repo.join("pkg/deep")).unwrap();
        std::fs::write(
            repo.join("pkg/deep/new.rs"),
            "pub fn in_a_new_directory() {}\n",
        )
        .unwrap();
        std::fs::write(repo.join("pkg/trace.log"), "zebraflagpole\n").unwrap();
        std::fs::remove_file(repo.join("src/old.rs")).unwrap();
        assert!(
            eventually(&dir, "in_a_new_directory", true),
            "{:?}",
            w.last_update()
        );
        assert!(
            eventually(&dir, "soon_removed_marker", false),
            "{:?}",
            w.last_update()
        );
        // A file in the new directory, written after it was followed.
        std::fs::write(
            repo.join("pkg/deep/later.rs"),
            "pub fn written_later() {}\n",
        )
        .unwrap();
        assert!(
            eventually(&dir, "written_later", true),
            "{:?}",
            w.last_update()
        );
        assert!(!finds(&dir, "zebraflagpole"));
        // A commit moves HEAD: the whole update runs and records the new commit.
        let git = |args: &[&str]| {
            let out = std::process::Command::new("git")
                .args(["-c", "user.name=t", "-c", "user.email=t@t.invalid"])
                .args(args)
                .current_dir(&repo)
                .output()
                .unwrap();
            assert!(out.status.success(), "git {args:?}");
        };
        git(&["add", "-A"]);
        git(&["commit", "-q", "-m", "more"]);
        let head = String::from_utf8(
            std::process::Command::new("git")
                .args(["rev-parse", "HEAD"])
                .current_dir(&repo)
                .output()
                .unwrap()
                .stdout,
        )
        .unwrap();
        let started = Instant::now();
        while store::read_manifest(&dir)
            .unwrap()
            .indexed_commit
            .as_deref()
            != Some(head.trim())
        {
            assert!(
                started.elapsed() < Duration::from_secs(3),
                "HEAD not followed"
            );
            std::thread::sleep(Duration::from_millis(30));
        }
        assert_eq!(build::pending(&dir, &Policy::default()).unwrap(), 0);
    }
}
