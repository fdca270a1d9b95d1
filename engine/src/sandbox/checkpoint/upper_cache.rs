//! A shared sandbox's last snapshot, remembered by what its upper directory looked like
//! (`docs/sandbox.md`, "Shared checkouts"; D-largerepo-7).
//!
//! A snapshot of a shared sandbox stores every file its upper directory holds and rebuilds
//! the trees above them: for a plan that changed 1,000 files, most of `plan diff`'s time,
//! though the step's checkpoint computed the same tree moments before. As git's index does
//! for a work tree, each snapshot here writes every upper entry's kind, mode, inode, size and
//! times beside the blob it stored and the tree it gave. A later snapshot whose entries all
//! match reuses the tree; one where some differ stores only those again.
//!
//! An entry changed in or after the clock tick its snapshot began in is "racy": it could
//! change again within that tick without its times moving, so its blob is not remembered
//! (nor the tree). Writing a file sets its change time, which nothing can set back, so an
//! entry whose times match was not written since.

use std::collections::HashMap;
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::{Path, PathBuf};

use git2::{FileMode, Oid, Repository};
use serde::{Deserialize, Serialize};

use super::Filters;
use crate::sandbox::SandboxError;

/// The file, in the sandbox's private repository (beside its index), so that nothing of the
/// sandbox's own directory changes but what its parts do.
const FILE: &str = "snapshot-cache.json";

/// Bumped when what a cache means changes, so an older one is never trusted.
const VERSION: u32 = 1;

/// What an upper directory entry is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(super) enum Kind {
    Dir,
    File,
    Link,
    /// A character device 0/0: the overlay's mark of a removed path.
    Whiteout,
    /// Anything else, which only the full scan answers.
    Other,
}

/// What one entry looked like.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(super) struct Stat {
    pub kind: Kind,
    mode: u32,
    ino: u64,
    size: u64,
    /// Nanoseconds since the epoch.
    mtime: i64,
    ctime: i64,
}

impl Stat {
    fn of(meta: &std::fs::Metadata) -> Self {
        let kind = meta.file_type();
        let kind = if kind.is_dir() {
            Kind::Dir
        } else if kind.is_file() {
            Kind::File
        } else if kind.is_symlink() {
            Kind::Link
        } else if kind.is_char_device() && meta.rdev() == 0 {
            Kind::Whiteout
        } else {
            Kind::Other
        };
        Self {
            kind,
            mode: meta.mode(),
            ino: meta.ino(),
            size: meta.size(),
            mtime: meta.mtime() * 1_000_000_000 + meta.mtime_nsec(),
            ctime: meta.ctime() * 1_000_000_000 + meta.ctime_nsec(),
        }
    }

    /// Whether the entry may have changed in or after the tick `since` began.
    fn racy(&self, since: i64) -> bool {
        self.mtime >= since || self.ctime >= since
    }
}

/// One entry of an upper directory, by its path relative to it.
pub(super) struct Listed {
    pub rel: PathBuf,
    pub stat: Stat,
}

/// Every entry beneath `upper` but `.git` and its aliases (never part of a snapshot), parents
/// before what they hold, each directory's entries by name: the order of `Path`'s comparison.
///
/// # Errors
/// [`SandboxError::Io`] when a directory cannot be read.
pub(super) fn list(upper: &Path) -> Result<Vec<Listed>, SandboxError> {
    let mut out = Vec::new();
    list_into(upper, &mut PathBuf::new(), &mut out)?;
    Ok(out)
}

fn list_into(upper: &Path, rel: &mut PathBuf, out: &mut Vec<Listed>) -> Result<(), SandboxError> {
    let dir = upper.join(&*rel);
    let mut names = Vec::new();
    for entry in std::fs::read_dir(&dir).map_err(SandboxError::io("read", &dir))? {
        let name = entry.map_err(SandboxError::io("read", &dir))?.file_name();
        use std::os::unix::ffi::OsStrExt;
        if !crate::sandbox::confined::is_git_alias(name.as_bytes()) {
            names.push(name);
        }
    }
    names.sort();
    for name in names {
        rel.push(&name);
        let path = upper.join(&*rel);
        let meta = std::fs::symlink_metadata(&path).map_err(SandboxError::io("read", &path))?;
        let stat = Stat::of(&meta);
        out.push(Listed {
            rel: rel.clone(),
            stat,
        });
        if stat.kind == Kind::Dir {
            list_into(upper, rel, out)?;
        }
        rel.pop();
    }
    Ok(())
}

/// The start of the current clock tick, as the file system stamps what is written from now
/// on (nanoseconds since the epoch): taken before a listing, so anything written after it is
/// racy.
pub(super) fn now() -> i64 {
    let t = rustix::time::clock_gettime(rustix::time::ClockId::RealtimeCoarse);
    t.tv_sec * 1_000_000_000 + t.tv_nsec
}

/// What decides a snapshot's blobs besides the entries themselves: the base commit, `HEAD`'s
/// tree (whose attribute files apply) and the object database itself (a sandbox made again
/// has a new one). `None`: the configuration or an attribute file outside the work tree may
/// filter any file, and no cache is kept.
pub(super) fn key(repo: &Repository, base: Oid, filters: &mut Filters<'_>) -> Option<String> {
    if filters.everywhere() {
        return None;
    }
    let head = filters.head_tree()?;
    let objects = std::fs::metadata(repo.path().join("objects")).ok()?.ino();
    Some(format!("{base} {head} {objects}"))
}

/// A blob stored for a path, with its tree mode.
pub(super) type Stored = HashMap<PathBuf, (Oid, FileMode)>;

/// The last snapshot's entries, blobs and tree.
#[derive(Serialize, Deserialize)]
pub(super) struct Cache {
    version: u32,
    key: String,
    /// `None` when an entry was racy.
    tree: Option<String>,
    entries: Vec<Entry>,
}

#[derive(Serialize, Deserialize)]
struct Entry {
    path: String,
    stat: Stat,
    /// The blob and tree mode stored for a file or link; `None` for anything else, for a new
    /// file a `.gitignore` leaves out, and for a racy entry.
    blob: Option<(String, u32)>,
}

impl Cache {
    /// The cache the sandbox repository at `git_dir` holds for `key`, if any.
    pub(super) fn read(git_dir: &Path, key: &str) -> Option<Self> {
        let text = std::fs::read(git_dir.join(FILE)).ok()?;
        let cache: Self = serde_json::from_slice(&text).ok()?;
        (cache.version == VERSION && cache.key == key).then_some(cache)
    }

    /// The tree of the last snapshot when the upper directory still looks exactly as it did
    /// and the tree is still there.
    pub(super) fn tree_for(&self, repo: &Repository, listing: &[Listed]) -> Option<Oid> {
        let same = self.entries.len() == listing.len()
            && self
                .entries
                .iter()
                .zip(listing)
                .all(|(e, l)| e.stat == l.stat && Path::new(&e.path) == l.rel);
        let tree = Oid::from_str(self.tree.as_deref()?).ok()?;
        (same && repo.odb().ok()?.exists(tree)).then_some(tree)
    }

    /// The blobs of the entries that look as they did; none when an attribute file changed,
    /// which may change how any file is stored.
    pub(super) fn unchanged(&self, listing: &[Listed]) -> Stored {
        let now: HashMap<&Path, &Stat> = listing.iter().map(|l| (l.rel.as_path(), &l.stat)).collect();
        let before: HashMap<&Path, &Entry> =
            self.entries.iter().map(|e| (Path::new(&e.path), e)).collect();
        let attributes_changed = now
            .keys()
            .chain(before.keys())
            .filter(|p| p.file_name().is_some_and(|n| n == ".gitattributes"))
            .any(|p| now.get(p).copied() != before.get(p).map(|e| &e.stat));
        if attributes_changed {
            return Stored::new();
        }
        self.entries
            .iter()
            .filter(|e| now.get(Path::new(&e.path)) == Some(&&e.stat))
            .filter_map(|e| {
                let (blob, mode) = e.blob.as_ref()?;
                let mode = mode_of(*mode)?;
                Some((PathBuf::from(&e.path), (Oid::from_str(blob).ok()?, mode)))
            })
            .collect()
    }
}

fn mode_of(raw: u32) -> Option<FileMode> {
    [FileMode::Blob, FileMode::BlobExecutable, FileMode::Link]
        .into_iter()
        .find(|m| u32::from(*m) == raw)
}

/// Remembers a snapshot of the sandbox repository at `git_dir`: its `listing` (taken after `since`, see
/// [`now`]), the blobs it `stored` and the `tree` it gave. Best effort: a cache that cannot
/// be written only costs the next snapshot its speed, and a path that is not UTF-8 keeps none.
pub(super) fn write(
    git_dir: &Path,
    key: String,
    listing: &[Listed],
    stored: &Stored,
    tree: Oid,
    since: i64,
) {
    let mut racy = false;
    let mut entries = Vec::with_capacity(listing.len());
    for l in listing {
        let Some(path) = l.rel.to_str() else {
            return;
        };
        let fresh = l.stat.racy(since);
        racy |= fresh;
        let blob = stored
            .get(&l.rel)
            .filter(|_| !fresh)
            .map(|(oid, mode)| (oid.to_string(), u32::from(*mode)));
        entries.push(Entry {
            path: path.to_owned(),
            stat: l.stat,
            blob,
        });
    }
    let cache = Cache {
        version: VERSION,
        key,
        tree: (!racy).then(|| tree.to_string()),
        entries,
    };
    let Ok(text) = serde_json::to_vec(&cache) else {
        return;
    };
    let tmp = git_dir.join(format!("{FILE}.{}", std::process::id()));
    if std::fs::write(&tmp, text).is_err() || std::fs::rename(&tmp, git_dir.join(FILE)).is_err() {
        let _ = std::fs::remove_file(&tmp);
        tracing::debug!(sandbox = %git_dir.display(), "the snapshot cache could not be written");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A repository with one empty tree, and an upper directory holding `a.txt`.
    fn setup() -> (tempfile::TempDir, Repository, Oid, PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let repo = Repository::init_bare(dir.path().join("git")).unwrap();
        let tree = repo.treebuilder(None).unwrap().write().unwrap();
        let upper = dir.path().join("upper");
        std::fs::create_dir_all(upper.join("src")).unwrap();
        std::fs::write(upper.join("src/a.txt"), "alpha\n").unwrap();
        (dir, repo, tree, upper)
    }

    fn stored_a(repo: &Repository, upper: &Path) -> Stored {
        let blob = repo.blob_path(&upper.join("src/a.txt")).unwrap();
        Stored::from([(PathBuf::from("src/a.txt"), (blob, FileMode::Blob))])
    }

    /// A time after everything written so far: what a later snapshot's listing began at.
    fn later() -> i64 {
        now() + 60_000_000_000
    }

    #[test]
    fn an_unchanged_upper_directory_gives_the_last_tree_and_every_blob() {
        let (dir, repo, tree, upper) = setup();
        let listing = list(&upper).unwrap();
        let paths: Vec<_> = listing.iter().map(|l| l.rel.clone()).collect();
        assert_eq!(paths, [PathBuf::from("src"), PathBuf::from("src/a.txt")]);
        write(dir.path(), "k".into(), &listing, &stored_a(&repo, &upper), tree, later());

        let cache = Cache::read(dir.path(), "k").unwrap();
        assert_eq!(cache.tree_for(&repo, &list(&upper).unwrap()), Some(tree));
        assert_eq!(cache.unchanged(&list(&upper).unwrap()), stored_a(&repo, &upper));
        assert!(Cache::read(dir.path(), "another key").is_none());
    }

    #[test]
    fn an_entry_written_since_is_stored_again_and_the_tree_computed_again() {
        let (dir, repo, tree, upper) = setup();
        let listing = list(&upper).unwrap();
        write(dir.path(), "k".into(), &listing, &stored_a(&repo, &upper), tree, later());
        // The same size: only the times tell.
        std::fs::write(upper.join("src/a.txt"), "ALPHA\n").unwrap();
        let cache = Cache::read(dir.path(), "k").unwrap();
        let now = list(&upper).unwrap();
        assert_eq!(cache.tree_for(&repo, &now), None);
        assert!(cache.unchanged(&now).is_empty());
        // A new entry: the tree is computed again, the old blob still counts.
        std::fs::write(upper.join("b.txt"), "b\n").unwrap();
        let listing = list(&upper).unwrap();
        write(dir.path(), "k".into(), &listing, &stored_a(&repo, &upper), tree, later());
        std::fs::write(upper.join("c.txt"), "c\n").unwrap();
        let cache = Cache::read(dir.path(), "k").unwrap();
        let now = list(&upper).unwrap();
        assert_eq!(cache.tree_for(&repo, &now), None);
        assert_eq!(cache.unchanged(&now), stored_a(&repo, &upper));
    }

    #[test]
    fn an_entry_changed_in_the_tick_its_snapshot_began_is_never_trusted() {
        let (dir, repo, tree, upper) = setup();
        let since = now();
        let listing = list(&upper).unwrap();
        write(dir.path(), "k".into(), &listing, &stored_a(&repo, &upper), tree, since);
        let cache = Cache::read(dir.path(), "k").unwrap();
        let now = list(&upper).unwrap();
        assert_eq!(cache.tree_for(&repo, &now), None);
        assert!(cache.unchanged(&now).is_empty());
    }

    #[test]
    fn a_changed_attribute_file_makes_every_blob_stored_again() {
        let (dir, repo, tree, upper) = setup();
        let listing = list(&upper).unwrap();
        write(dir.path(), "k".into(), &listing, &stored_a(&repo, &upper), tree, later());
        std::fs::write(upper.join("src/.gitattributes"), "*.txt text eol=crlf\n").unwrap();
        let cache = Cache::read(dir.path(), "k").unwrap();
        assert!(cache.unchanged(&list(&upper).unwrap()).is_empty());
    }
}
