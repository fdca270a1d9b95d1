//! Apply's staged files (`docs/apply.md`, step 1): every new file written into `JDIR/new/`
//! with the bytes a `git checkout` of the new tree would give it.
//!
//! The journal directory is flat: a file's staged copy (and, in `JDIR/old/`, its original) is
//! named by the SHA-1 of its path ([`slot`]), so a change of a thousand files in two hundred
//! directories creates and removes two directories rather than four hundred. On ext4 a
//! directory costs milliseconds to remove where a file costs microseconds.
//!
//! Where nothing could make a checkout differ from the stored blob (no attributes file
//! anywhere git reads one, `core.autocrlf` not `true`, links and file modes kept, no
//! submodule among the files), the blobs are written as they are, on several threads; a
//! checkout through libgit2 walks the whole tree for the few paths it writes. Otherwise the
//! files go through libgit2's checkout and so through the repository's filters.
//!
//! A blob written as stored whose directory already exists in the work tree is written
//! beside its target ([`temp_beside`]) and its slot is a hard link to it; the commit then
//! renames it in place. The file system allocates the new file's inode near its directory's
//! files: a thousand files created in a new directory of the git directory took ext4 335-650
//! ms where the same files in existing directories of the work tree took 19-21 ms
//! (`docs/decisions.md`, D-largerepo-8).

use std::fs;
use std::path::{Path, PathBuf};

use git2::build::CheckoutBuilder;
use git2::{FileMode, Oid, Repository};

use super::RunError;
use super::decide::Change;
use super::unfiltered::checkout_writes_blobs_as_stored;

fn git_err(what: &str) -> impl Fn(git2::Error) -> RunError + '_ {
    move |e| RunError::Sandbox(format!("{what}: {}", e.message()))
}

/// Where the journal directory `side` (`JDIR/new` or `JDIR/old`) keeps the file at `path`: a
/// name made of the SHA-1 of the path, directly in `side`.
pub(super) fn slot(side: &Path, path: &str) -> PathBuf {
    let name = Oid::hash_object(git2::ObjectType::Blob, path.as_bytes())
        .map_or_else(|_| path.replace('/', "%"), |id| id.to_string());
    side.join(name)
}

/// The temporary name a new file takes next to its target before the commit renames it in
/// place: a dot file named for the target and the journal.
pub(super) fn temp_beside(target: &Path, journal: &str) -> PathBuf {
    let name = target
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let short = &journal[journal.len().saturating_sub(10)..];
    target.with_file_name(format!(".{name}.cleveragents-{short}"))
}

/// The work tree a resource's new files may be staged beside (see the module documentation).
#[derive(Debug, Clone, Copy)]
pub struct Beside<'a> {
    /// The work tree's root.
    pub root: &'a Path,
    /// The journal's id, which names the temporary files.
    pub journal: &'a str,
}

/// Writes every new file of `changes` into `staging` as a checkout of `tree` in `user` would,
/// each at its [`slot`] (and, given `beside`, first beside its target where it can be).
///
/// # Errors
/// Git and I/O errors; a file that did not come out staged.
pub fn stage_files(
    user: &Repository,
    tree: &git2::Tree<'_>,
    changes: &[Change],
    staging: &Path,
    beside: Option<Beside<'_>>,
) -> Result<(), RunError> {
    let writes = new_files(changes);
    if writes.is_empty() {
        return Ok(());
    }
    fs::create_dir_all(staging)
        .map_err(|e| RunError::Sandbox(format!("creating {}: {e}", staging.display())))?;
    if checkout_writes_blobs_as_stored(user, tree, &writes)? {
        write_blobs(user.path(), staging, beside, &writes)?;
    } else {
        checkout_into_slots(user, tree, &writes, staging)?;
    }
    for (path, _, _) in &writes {
        if fs::symlink_metadata(slot(staging, path)).is_err() {
            return Err(RunError::Sandbox(format!(
                "{path} was not staged; nothing was applied"
            )));
        }
    }
    Ok(())
}

/// The path, blob and mode of each file `changes` writes.
fn new_files(changes: &[Change]) -> Vec<(&str, Oid, i32)> {
    changes
        .iter()
        .filter_map(|c| c.new.map(|(id, mode)| (c.path.as_str(), id, mode)))
        .collect()
}

/// Writes each blob as it is stored, a link as a link, on up to eight threads (each with its
/// own handle on the repository at `git_dir`). New files get the modes a checkout gives them
/// (`0666` or `0777` less the umask).
fn write_blobs(
    git_dir: &Path,
    staging: &Path,
    beside: Option<Beside<'_>>,
    writes: &[(&str, Oid, i32)],
) -> Result<(), RunError> {
    crate::sandbox::parallel::each_chunk(
        writes,
        || RunError::Sandbox("a staging thread panicked".into()),
        |part| write_part(git_dir, staging, beside, part),
    )
}

fn write_part(
    git_dir: &Path,
    staging: &Path,
    beside: Option<Beside<'_>>,
    part: &[(&str, Oid, i32)],
) -> Result<(), RunError> {
    let repo = Repository::open_bare(git_dir).map_err(git_err("opening the repository"))?;
    let odb = repo.odb().map_err(git_err("opening the objects"))?;
    for (path, id, mode) in part {
        let at = slot(staging, path);
        let io = |e: std::io::Error| RunError::Sandbox(format!("staging {path}: {e}"));
        let object = odb.read(*id).map_err(git_err("reading a new file"))?;
        let permissions = if *mode == i32::from(FileMode::BlobExecutable) {
            0o777
        } else {
            0o666
        };
        let write = |to: &Path| {
            crate::sandbox::git_sandbox::write_blob(to, object.data(), *mode, permissions)
        };
        match beside.and_then(|b| beside_its_target(b, path)) {
            Some(tmp) if write(&tmp).and_then(|()| fs::hard_link(&tmp, &at)).is_ok() => {}
            Some(tmp) => {
                // Beside failed (another file system, say): the slot alone, as without it.
                let _ = fs::remove_file(&tmp);
                write(&at).map_err(io)?;
            }
            None => write(&at).map_err(io)?,
        }
    }
    Ok(())
}

/// The temporary name beside `path`'s target, where the target's directory is a directory of
/// the work tree now (not a link, not missing); any earlier file of that name is removed.
fn beside_its_target(b: Beside<'_>, path: &str) -> Option<PathBuf> {
    let target = b.root.join(path);
    let dir = target.parent()?;
    if !fs::symlink_metadata(dir).is_ok_and(|m| m.is_dir()) {
        return None;
    }
    let tmp = temp_beside(&target, b.journal);
    let _ = fs::remove_file(&tmp);
    Some(tmp)
}

/// Checks `writes` out of `tree` through the repository's filters into a directory inside
/// `staging`, then moves each file to its [`slot`] and removes that directory.
fn checkout_into_slots(
    user: &Repository,
    tree: &git2::Tree<'_>,
    writes: &[(&str, Oid, i32)],
    staging: &Path,
) -> Result<(), RunError> {
    let tree_dir = staging.join("checkout");
    checkout_through_filters(user, tree, writes, &tree_dir)?;
    for (path, _, _) in writes {
        // A file the checkout did not write is reported by the caller.
        let _ = fs::rename(tree_dir.join(path), slot(staging, path));
    }
    fs::remove_dir_all(&tree_dir)
        .map_err(|e| RunError::Sandbox(format!("removing {}: {e}", tree_dir.display())))
}

/// Checks `writes` out of `tree` into `staging` through libgit2, and so through the
/// repository's filters.
fn checkout_through_filters(
    user: &Repository,
    tree: &git2::Tree<'_>,
    writes: &[(&str, Oid, i32)],
    staging: &Path,
) -> Result<(), RunError> {
    let git = git_err("checking the new files out");
    let mut co = CheckoutBuilder::new();
    co.force()
        .update_index(false)
        .refresh(false)
        .disable_pathspec_match(true)
        .recreate_missing(true)
        .target_dir(staging);
    for (path, _, _) in writes {
        co.path(*path);
    }
    // An empty in-memory index (this handle only; nothing is written): the baseline is then
    // empty, so every new file is written fresh into the empty staging directory, a file
    // where the tip has a directory included.
    let mut empty = git2::Index::new().map_err(&git)?;
    user.set_index(&mut empty).map_err(&git)?;
    user.checkout_tree(tree.as_object(), Some(&mut co))
        .map_err(&git)
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::os::unix::fs::MetadataExt;
    use std::process::Command;

    use super::*;

    fn git(dir: &Path, args: &[&str]) {
        let ok = Command::new("git")
            .args(["-c", "user.name=T", "-c", "user.email=t@t.invalid"])
            .args(args)
            .current_dir(dir)
            .status()
            .unwrap()
            .success();
        assert!(ok, "git {args:?}");
    }

    /// A repository whose own config names an attributes file that does not exist, so the
    /// user's attributes file of the machine running the test is not read.
    fn repo(dir: &Path, files: &[(&str, &[u8])]) -> Repository {
        git(dir, &["init", "-q"]);
        git(dir, &["config", "core.attributesFile", "no-such-attributes"]);
        for (path, bytes) in files {
            let at = dir.join(path);
            fs::create_dir_all(at.parent().unwrap()).unwrap();
            fs::write(&at, bytes).unwrap();
        }
        git(dir, &["add", "-A"]);
        git(dir, &["commit", "-q", "-m", "base"]);
        Repository::open(dir).unwrap()
    }

    /// The new tree of a change: `files` written over the head's tree, executable where asked,
    /// plus a link `link -> a.txt`.
    fn changed(repo: &Repository, files: &[(&str, &[u8], bool)]) -> (Oid, Vec<Change>) {
        let head = repo.head().unwrap().peel_to_tree().unwrap();
        let mut b = git2::build::TreeUpdateBuilder::new();
        let mut changes = Vec::new();
        let mut add = |path: &str, id: Oid, mode: FileMode| {
            b.upsert(path, id, mode);
            changes.push(Change {
                path: path.into(),
                old: None,
                new: Some((id, i32::from(mode))),
            });
        };
        for (path, bytes, exec) in files {
            let mode = if *exec {
                FileMode::BlobExecutable
            } else {
                FileMode::Blob
            };
            add(path, repo.blob(bytes).unwrap(), mode);
        }
        add("link", repo.blob(b"a.txt").unwrap(), FileMode::Link);
        (b.create_updated(repo, &head).unwrap(), changes)
    }

    /// Every entry under `dir`: its mode and its bytes (a link's target).
    fn listing(dir: &Path) -> BTreeMap<String, (u32, Vec<u8>)> {
        let mut out = BTreeMap::new();
        let mut stack = vec![dir.to_path_buf()];
        while let Some(d) = stack.pop() {
            for e in fs::read_dir(&d).unwrap().flatten() {
                let p = e.path();
                let m = fs::symlink_metadata(&p).unwrap();
                let rel = p.strip_prefix(dir).unwrap().display().to_string();
                let bytes = if m.file_type().is_symlink() {
                    fs::read_link(&p).unwrap().into_os_string().into_encoded_bytes()
                } else if m.is_dir() {
                    stack.push(p.clone());
                    Vec::new()
                } else {
                    fs::read(&p).unwrap()
                };
                out.insert(rel, (m.mode(), bytes));
            }
        }
        out
    }

    /// The files of `changes` as a checkout wrote them under `tree_dir`, each under the name
    /// of its slot: what staging writes.
    fn in_slots(tree_dir: &Path, changes: &[Change]) -> BTreeMap<String, (u32, Vec<u8>)> {
        let checkout = listing(tree_dir);
        changes
            .iter()
            .map(|c| {
                let name = slot(Path::new(""), &c.path).display().to_string();
                (name, checkout[&c.path].clone())
            })
            .collect()
    }

    /// A repository holding `a.txt` in a temporary directory, and the change writing `files`.
    fn repository_and_change(
        files: &[(&str, &[u8], bool)],
    ) -> (tempfile::TempDir, PathBuf, Repository, Oid, Vec<Change>) {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().join("repo");
        fs::create_dir(&root).unwrap();
        let repo = repo(&root, &[("a.txt", b"one\n")]);
        let (tree, changes) = changed(&repo, files);
        (tmp, root, repo, tree, changes)
    }

    #[test]
    fn blobs_written_as_stored_are_what_a_checkout_writes_where_no_filter_applies() {
        let (tmp, _, repo, tree, changes) = repository_and_change(&[
            ("a.txt", b"one\r\ntwo $Id$\n", false),
            ("bin/run.sh", b"#!/bin/sh\necho hi\n", true),
            ("deep/er/b.txt", b"no newline", false),
        ]);
        let tree = repo.find_tree(tree).unwrap();
        assert!(
            checkout_writes_blobs_as_stored(&repo, &tree, &new_files(&changes)).unwrap(),
            "no attributes, no autocrlf (and no /etc/gitattributes on this machine)"
        );
        let (ours, theirs) = (tmp.path().join("ours"), tmp.path().join("theirs"));
        stage_files(&repo, &tree, &changes, &ours, None).unwrap();
        checkout_through_filters(&repo, &tree, &new_files(&changes), &theirs).unwrap();
        let staged = listing(&ours);
        assert_eq!(staged.len(), 4, "one flat entry per file: {staged:?}");
        assert_eq!(staged, in_slots(&theirs, &changes));
    }

    #[test]
    fn a_file_whose_directory_exists_is_staged_beside_its_target_and_linked_into_its_slot() {
        let (tmp, root, repo, tree, changes) = repository_and_change(&[
            ("a.txt", b"one\ntwo\n", false),
            ("new/dir/b.txt", b"three\n", false),
        ]);
        let tree = repo.find_tree(tree).unwrap();
        let staging = tmp.path().join("staged");
        let journal = "01JOURNAL0123456789";
        let beside = Beside {
            root: &root,
            journal,
        };
        stage_files(&repo, &tree, &changes, &staging, Some(beside)).unwrap();

        let tmp_a = temp_beside(&root.join("a.txt"), journal);
        let slot_a = fs::metadata(slot(&staging, "a.txt")).unwrap();
        let beside_a = fs::metadata(&tmp_a).unwrap();
        assert_eq!(
            (slot_a.dev(), slot_a.ino()),
            (beside_a.dev(), beside_a.ino()),
            "the slot is a hard link of the file beside its target"
        );
        assert_eq!(fs::read(&tmp_a).unwrap(), b"one\ntwo\n");
        assert_eq!(fs::read(root.join("a.txt")).unwrap(), b"one\n", "the target is untouched");
        // `new/dir` does not exist yet: that file is staged at its slot alone.
        assert!(!root.join("new").exists());
        assert_eq!(fs::read(slot(&staging, "new/dir/b.txt")).unwrap(), b"three\n");
    }

    #[test]
    fn an_attributes_file_or_autocrlf_sends_the_files_through_the_filters() {
        // The change itself adds the attributes file.
        let (tmp, root, repo, tree, changes) = repository_and_change(&[
            (".gitattributes", b"*.txt text eol=crlf\n", false),
            ("a.txt", b"one\ntwo\n", false),
        ]);
        let tree = repo.find_tree(tree).unwrap();
        assert!(!checkout_writes_blobs_as_stored(&repo, &tree, &new_files(&changes)).unwrap());
        let staging = tmp.path().join("staged");
        stage_files(&repo, &tree, &changes, &staging, None).unwrap();
        let theirs = tmp.path().join("theirs");
        checkout_through_filters(&repo, &tree, &new_files(&changes), &theirs).unwrap();
        assert_eq!(listing(&staging), in_slots(&theirs, &changes));

        let (tree, changes) = changed(&repo, &[("a.txt", b"one\ntwo\n", false)]);
        let tree = repo.find_tree(tree).unwrap();
        assert!(checkout_writes_blobs_as_stored(&repo, &tree, &new_files(&changes)).unwrap());
        git(&root, &["config", "core.autocrlf", "true"]);
        assert!(!checkout_writes_blobs_as_stored(&repo, &tree, &new_files(&changes)).unwrap());
        git(&root, &["config", "core.autocrlf", "input"]);
        assert!(checkout_writes_blobs_as_stored(&repo, &tree, &new_files(&changes)).unwrap());
        // A linked work tree of the repository reads the attributes its common directory holds.
        let linked = tmp.path().join("linked");
        git(&root, &["worktree", "add", "-q", "--detach", linked.to_str().unwrap()]);
        let linked = Repository::open(&linked).unwrap();
        assert!(checkout_writes_blobs_as_stored(&linked, &tree, &new_files(&changes)).unwrap());
        fs::write(root.join(".git/info/attributes"), "*.txt ident\n").unwrap();
        assert!(!checkout_writes_blobs_as_stored(&repo, &tree, &new_files(&changes)).unwrap());
        assert!(!checkout_writes_blobs_as_stored(&linked, &tree, &new_files(&changes)).unwrap());
    }
}
