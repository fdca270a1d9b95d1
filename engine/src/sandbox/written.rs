//! What this process wrote to each sandbox's work tree since a snapshot last made its index
//! match the work tree (docs/sandbox.md, "Checkpoints that cost what changed").
//!
//! A full snapshot (every tracked file compared, every directory walked for new files) marks
//! its sandbox *known*, with the identity of the index file it left. From then on the file
//! tools note every path they may write (their path arguments and the changes they report),
//! and every other writer (a shell command, a command or MCP tool) forgets the sandbox until
//! its own closing full snapshot marks it known again. A checkpoint that asks for the written
//! set gets the noted paths only while the index file is still the one the process left
//! (another process that snapshotted in between replaced it); otherwise it scans everything.

use std::collections::{BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::sync::{LazyLock, Mutex};

/// The identity of an index file: inode, size and modification time. libgit2 replaces the
/// file on every write, so another writer's index has another identity.
type Stamp = (u64, u64, i64, i64);

/// A sandbox whose work tree matched its index once, and what was written since.
struct Known {
    /// The index file then (left as it was while trees are updated without it).
    stamp: Stamp,
    /// The tree of the work tree at the last snapshot.
    tree: git2::Oid,
    /// Paths written since the index last matched (the last snapshot's included).
    behind_index: BTreeSet<PathBuf>,
    /// Paths written since the last snapshot.
    paths: BTreeSet<PathBuf>,
}

/// What was written since a sandbox's index last matched its work tree.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Since {
    /// The tree of the work tree then.
    pub tree: git2::Oid,
    /// The paths written since (relative to the work tree).
    pub paths: BTreeSet<PathBuf>,
    /// The paths in which the index lags behind `tree` (snapshots that updated the tree
    /// alone).
    pub behind_index: BTreeSet<PathBuf>,
}

/// Keyed by the sandbox's private git directory.
static KNOWN: LazyLock<Mutex<HashMap<PathBuf, Known>>> = LazyLock::new(Default::default);

fn stamp(git_dir: &Path) -> Option<Stamp> {
    use std::os::unix::fs::MetadataExt;
    let m = std::fs::symlink_metadata(git_dir.join("index")).ok()?;
    Some((m.ino(), m.size(), m.mtime(), m.mtime_nsec()))
}

/// The registry's key for a git directory (the same for `git`, `git/` and a path through a
/// symbolic link, as libgit2 reports it resolved).
fn key(git_dir: &Path) -> PathBuf {
    std::fs::canonicalize(git_dir).unwrap_or_else(|_| git_dir.to_path_buf())
}

fn with<T>(f: impl FnOnce(&mut HashMap<PathBuf, Known>) -> T) -> T {
    let mut map = KNOWN
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    f(&mut map)
}

/// Records that the index of the sandbox at `git_dir` matches its work tree now, whose tree is
/// `tree` (after a full snapshot, or a snapshot of the written paths, wrote it).
pub(crate) fn synced(git_dir: &Path, tree: git2::Oid) {
    let key = key(git_dir);
    match stamp(git_dir) {
        Some(stamp) => with(|m| {
            m.insert(
                key,
                Known {
                    stamp,
                    tree,
                    behind_index: BTreeSet::new(),
                    paths: BTreeSet::new(),
                },
            )
        }),
        None => with(|m| m.remove(&key)),
    };
}

/// Notes paths (relative to the work tree) that a file tool may write. Paths that cannot be
/// named exactly (absolute, with `..`, or the whole tree) make the written set unknown.
pub fn note<I: IntoIterator<Item = PathBuf>>(git_dir: &Path, paths: I) {
    use std::path::Component;
    let git_dir = &key(git_dir);
    with(|m| {
        let Some(known) = m.get_mut(git_dir) else {
            return;
        };
        for p in paths {
            let mut clean = PathBuf::new();
            for c in p.components() {
                match c {
                    Component::Normal(part) => clean.push(part),
                    Component::CurDir => {}
                    _ => {
                        m.remove(git_dir);
                        return;
                    }
                }
            }
            if clean.as_os_str().is_empty() {
                m.remove(git_dir);
                return;
            }
            known.paths.insert(clean);
        }
    });
}

/// Records a snapshot that updated the tree for the written paths without the index: `tree`
/// is the work tree's now, and the index lags behind in those paths.
pub(crate) fn advanced(git_dir: &Path, tree: git2::Oid) {
    let git_dir = key(git_dir);
    with(|m| {
        if let Some(known) = m.get_mut(&git_dir) {
            known.tree = tree;
            let paths = std::mem::take(&mut known.paths);
            known.behind_index.extend(paths);
        }
    });
}

/// Makes the written set of the sandbox unknown: something is about to write without noting
/// its paths. The next checkpoint scans the whole work tree.
pub fn forget(git_dir: &Path) {
    let git_dir = key(git_dir);
    with(|m| m.remove(&git_dir));
}

/// The paths written since the index last matched the work tree, or `None` when that is not
/// known in this process (nothing synced it here, an unnoted writer ran, or another process
/// replaced the index since).
pub(crate) fn since_sync(git_dir: &Path) -> Option<Since> {
    let now = stamp(git_dir)?;
    let git_dir = key(git_dir);
    with(|m| {
        let known = m.get(&git_dir)?;
        (known.stamp == now).then(|| Since {
            tree: known.tree,
            paths: known.paths.clone(),
            behind_index: known.behind_index.clone(),
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_written_set_is_known_only_between_a_sync_and_an_unnoted_writer_or_another_index() {
        let dir = tempfile::tempdir().unwrap();
        let git = dir.path().join("git");
        let tree = git2::Oid::from_str("4b825dc642cb6eb9a060e54bf8d69288fbee4904").unwrap();
        std::fs::create_dir_all(&git).unwrap();
        assert_eq!(since_sync(&git), None, "no index yet");
        std::fs::write(git.join("index"), "one").unwrap();
        note(&git, [PathBuf::from("a")]);
        assert_eq!(since_sync(&git), None, "nothing synced in this process");
        synced(&git, tree);
        let paths = |g: &Path| since_sync(g).map(|s| s.paths);
        assert_eq!(since_sync(&git).map(|s| s.tree), Some(tree));
        assert_eq!(paths(&git), Some(BTreeSet::new()));
        note(&git, [PathBuf::from("./d/b.txt"), PathBuf::from("a")]);
        assert_eq!(
            paths(&git),
            Some([PathBuf::from("a"), PathBuf::from("d/b.txt")].into())
        );
        note(&git, [PathBuf::from("../outside")]);
        assert_eq!(
            since_sync(&git),
            None,
            "a path that cannot be named exactly"
        );
        synced(&git, tree);
        note(&git, [PathBuf::from(".")]);
        assert_eq!(since_sync(&git), None, "the whole tree");
        synced(&git, tree);
        forget(&git);
        assert_eq!(since_sync(&git), None);
        synced(&git, tree);
        // Another writer replaces the index file.
        std::fs::write(git.join("index.new"), "two, longer").unwrap();
        std::fs::rename(git.join("index.new"), git.join("index")).unwrap();
        assert_eq!(since_sync(&git), None, "another process wrote the index");
    }
}
