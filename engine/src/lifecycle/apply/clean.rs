//! Which of the paths Apply changes are clean at a glance (`docs/apply.md`, step 1 of the
//! checks): as `git status` would find them, without walking the work tree.
//!
//! A path the branch tip has is clean at a glance when its index entry (stage 0, no flag that
//! changes what it means) holds the tip's blob and mode, and the file's `lstat` matches what
//! the entry recorded (kind, size, times, inode) and the entry is not racy: written before
//! the index file was, so an edit in the same clock tick cannot hide behind equal times (git's
//! rule). A path the plan adds is clean when neither the index nor the work tree has anything
//! there. Where no filter can make a file differ from its blob (the rule of
//! [`super::unfiltered`]), a file that matches its entry in all but its times is hashed instead.
//!
//! What is left is for libgit2's status of those paths alone: a status of the whole work tree
//! for a thousand scattered paths walked every directory of it, 25 ms of a 20,000-file
//! repository's Apply.

use std::collections::HashMap;
use std::fs;
use std::os::unix::fs::MetadataExt;
use std::path::Path;

use git2::{FileMode, IndexEntry, Oid, Repository};

use super::RunError;

/// An index entry flag that makes the entry mean something else than "this blob is here":
/// assume-valid (`git update-index --assume-unchanged`).
const ASSUME_VALID: u16 = 0x8000;
/// Extended flags: intent-to-add (`git add -N`) and skip-worktree (sparse checkouts).
const INTENT_TO_ADD: u16 = 1 << 13;
const SKIP_WORKTREE: u16 = 1 << 14;

/// The paths of `changes` (each with its blob and mode at the tip, if it has one) that are
/// not clean at a glance, for a full status.
///
/// # Errors
/// Git errors reading the index.
pub fn doubtful<'p>(
    repo: &Repository,
    tip_tree: &git2::Tree<'_>,
    changes: impl IntoIterator<Item = (&'p str, Option<(Oid, i32)>)>,
) -> Result<Vec<&'p str>, RunError> {
    let Some(root) = repo.workdir() else {
        return Ok(changes.into_iter().map(|(path, _)| path).collect());
    };
    let index = repo
        .index()
        .map_err(|e| RunError::Sandbox(format!("reading the index: {}", e.message())))?;
    let written = index_written(repo);
    let mut doubtful = Vec::new();
    let mut unfiltered = None;
    let mut attributes_above = HashMap::new();
    for (path, old) in changes {
        let clean = match at_a_glance(&index, root, written, path, old) {
            Glance::Clean => true,
            Glance::Doubtful => false,
            Glance::SameButTimes(entry) => {
                let no_filter = *unfiltered.get_or_insert_with(|| {
                    super::unfiltered::checkout_writes_blobs_as_stored(repo, tip_tree, &[])
                        .unwrap_or(false)
                });
                no_filter
                    && !attributes_file_above(root, path, &mut attributes_above)
                    && hashes_to(&root.join(path), entry.mode, entry.id)
            }
        };
        if !clean {
            doubtful.push(path);
        }
    }
    Ok(doubtful)
}

/// What a glance at one path found.
enum Glance {
    Clean,
    Doubtful,
    /// The entry holds the tip's blob and mode and the file is of the same kind and size,
    /// but its times or inode differ from the entry's, or the entry is racy: only its content
    /// can tell.
    SameButTimes(IndexEntry),
}

fn at_a_glance(
    index: &git2::Index,
    root: &Path,
    written: Option<(i64, i64)>,
    path: &str,
    old: Option<(Oid, i32)>,
) -> Glance {
    let path = Path::new(path);
    let at = root.join(path);
    let Some((old_id, old_mode)) = old else {
        // The plan adds the file: nothing may be there, tracked or not.
        let indexed = (0..=3).any(|stage| index.get_path(path, stage).is_some());
        let absent = matches!(fs::symlink_metadata(&at), Err(e) if e.kind() == std::io::ErrorKind::NotFound);
        return if !indexed && absent { Glance::Clean } else { Glance::Doubtful };
    };
    let Some(entry) = index.get_path(path, 0) else {
        return Glance::Doubtful;
    };
    if entry.id != old_id
        || entry.mode != old_mode as u32
        || entry.flags & ASSUME_VALID != 0
        || entry.flags_extended & (INTENT_TO_ADD | SKIP_WORKTREE) != 0
    {
        return Glance::Doubtful;
    }
    let Ok(m) = fs::symlink_metadata(&at) else {
        return Glance::Doubtful;
    };
    let kind_matches = if old_mode == i32::from(FileMode::Link) {
        m.file_type().is_symlink()
    } else {
        let executable = m.mode() & 0o100 != 0;
        m.is_file() && executable == (old_mode == i32::from(FileMode::BlobExecutable))
    };
    if !kind_matches {
        return Glance::Doubtful;
    }
    let stat_matches = entry.file_size == m.len() as u32
        && entry.mtime.seconds() == m.mtime() as i32
        && entry.mtime.nanoseconds() == m.mtime_nsec() as u32
        && entry.ctime.seconds() == m.ctime() as i32
        && entry.ctime.nanoseconds() == m.ctime_nsec() as u32
        && entry.ino == m.ino() as u32;
    let racy = written.is_none_or(|index_time| {
        (i64::from(entry.mtime.seconds()), i64::from(entry.mtime.nanoseconds())) >= index_time
    });
    if stat_matches && !racy {
        Glance::Clean
    } else {
        Glance::SameButTimes(entry)
    }
}

/// When the index file was last written (seconds, nanoseconds).
fn index_written(repo: &Repository) -> Option<(i64, i64)> {
    let m = fs::metadata(repo.path().join("index")).ok()?;
    Some((m.mtime(), m.mtime_nsec()))
}

/// Whether a `.gitattributes` file of the work tree sits in any directory above `path` (one
/// that is not in the tip's tree, an untracked or edited one, applies all the same).
fn attributes_file_above(root: &Path, path: &str, seen: &mut HashMap<String, bool>) -> bool {
    let mut dir = Path::new(path).parent();
    while let Some(d) = dir {
        let key = d.to_string_lossy().into_owned();
        let here = *seen
            .entry(key)
            .or_insert_with(|| fs::symlink_metadata(root.join(d).join(".gitattributes")).is_ok());
        if here {
            return true;
        }
        dir = d.parent();
    }
    false
}

/// Whether the file at `at` (a link's target for a link) hashes to `id` as a blob.
fn hashes_to(at: &Path, mode: u32, id: Oid) -> bool {
    let bytes = if mode == u32::from(FileMode::Link) {
        fs::read_link(at).map(|t| t.into_os_string().into_encoded_bytes())
    } else {
        fs::read(at)
    };
    bytes
        .ok()
        .and_then(|b| Oid::hash_object(git2::ObjectType::Blob, &b).ok())
        == Some(id)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sandbox::testing::git;

    /// A repository with `a.txt`, `b.txt` and `run.sh` committed, its index refreshed a
    /// second later so no entry is racy.
    fn repo() -> (tempfile::TempDir, Repository) {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        git(root, &["init", "-q"]);
        git(root, &["config", "core.attributesFile", "no-such-attributes"]);
        fs::write(root.join("a.txt"), "a\n").unwrap();
        fs::write(root.join("b.txt"), "b\n").unwrap();
        fs::write(root.join("run.sh"), "#!/bin/sh\n").unwrap();
        git(root, &["add", "-A"]);
        git(root, &["commit", "-qm", "one"]);
        std::thread::sleep(std::time::Duration::from_millis(1100));
        git(root, &["update-index", "--really-refresh"]);
        let repo = Repository::open(root).unwrap();
        (dir, repo)
    }

    /// The paths of `paths` not clean at a glance, each with its blob and mode at the tip.
    fn doubtful_paths<'p>(repo: &Repository, paths: &[&'p str]) -> Vec<&'p str> {
        let tip = repo.head().unwrap().peel_to_tree().unwrap();
        let old = |path: &str| {
            tip.get_path(Path::new(path))
                .ok()
                .map(|e| (e.id(), e.filemode()))
        };
        doubtful(repo, &tip, paths.iter().map(|p| (*p, old(p)))).unwrap()
    }

    #[test]
    fn untouched_files_and_absent_new_paths_are_clean_at_a_glance() {
        let (_dir, repo) = repo();
        assert!(doubtful_paths(&repo, &["a.txt", "run.sh", "new.txt", "d/new.txt"]).is_empty());
    }

    #[test]
    fn an_edit_a_staged_change_a_mode_change_or_a_file_in_the_way_is_doubtful() {
        let (dir, repo) = repo();
        let root = dir.path();
        // Same size, same second: only the content tells.
        fs::write(root.join("a.txt"), "A\n").unwrap();
        fs::write(root.join("b.txt"), "staged\n").unwrap();
        git(root, &["add", "b.txt"]);
        use std::os::unix::fs::PermissionsExt;
        fs::set_permissions(root.join("run.sh"), fs::Permissions::from_mode(0o755)).unwrap();
        fs::write(root.join("new.txt"), "untracked\n").unwrap();
        let repo = Repository::open(repo.path()).unwrap();
        assert_eq!(
            doubtful_paths(&repo, &["a.txt", "b.txt", "run.sh", "new.txt"]),
            ["a.txt", "b.txt", "run.sh", "new.txt"]
        );
    }

    #[test]
    fn a_file_rewritten_with_the_same_bytes_is_hashed_and_found_clean() {
        let (dir, repo) = repo();
        fs::write(dir.path().join("a.txt"), "a\n").unwrap();
        assert!(doubtful_paths(&repo, &["a.txt"]).is_empty());
        // Unless an attributes file could filter it: then the status decides.
        fs::write(dir.path().join(".gitattributes"), "*.txt text\n").unwrap();
        assert_eq!(doubtful_paths(&repo, &["a.txt"]), ["a.txt"]);
    }
}
