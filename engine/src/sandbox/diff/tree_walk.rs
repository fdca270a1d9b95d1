//! The files that differ between two trees, found by descending only into the subtrees whose
//! ids differ (spec section 11 "reviewable diff"): a change of 10 files in a repository of
//! 20,000 reads the trees on the paths to those 10 files, where libgit2's tree diff reads every
//! tree on both sides.
//!
//! Only the plain cases are answered here. [`changed_files`] returns `None` when the trees hold
//! anything whose pairing or kind needs libgit2's rules: files both deleted and added (a rename
//! may pair them), a change of kind (file, symbolic link, directory) and submodules. The caller
//! then asks libgit2, so the list is the same either way (in git's path order).

use std::cmp::Ordering;

use git2::{FileMode, Oid, Repository, Tree, TreeEntry};

use super::{Changed, FileStatus};

/// The changed files between `old` and `new` (either may be absent: an empty tree), in git's
/// path order, or `None` when libgit2 must decide (see the module docs).
///
/// # Errors
/// git errors reading a tree.
pub(super) fn changed_files(
    repo: &Repository,
    old: Option<Oid>,
    new: Option<Oid>,
) -> Result<Option<Vec<Changed>>, git2::Error> {
    let find = |oid: Option<Oid>| oid.map(|o| repo.find_tree(o)).transpose();
    let (old, new) = (find(old)?, find(new)?);
    let mut walk = Walk {
        repo,
        out: Vec::new(),
        added: false,
        deleted: false,
    };
    let plain = walk.compare(old.as_ref(), new.as_ref(), "")?;
    Ok((plain && !(walk.added && walk.deleted)).then_some(walk.out))
}

/// One comparison in progress.
struct Walk<'r> {
    repo: &'r Repository,
    out: Vec<Changed>,
    added: bool,
    deleted: bool,
}

/// What a tree entry is, as far as the comparison cares.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    Tree,
    File,
    Link,
    Submodule,
}

/// The kind of an entry by its mode (libgit2 hands modes normalized: `040000`, `100644`,
/// `100755`, `120000`, `160000`).
fn kind(entry: &TreeEntry<'_>) -> Kind {
    match entry.filemode() {
        0o040000 => Kind::Tree,
        0o120000 => Kind::Link,
        0o160000 => Kind::Submodule,
        _ => Kind::File,
    }
}

/// The mode of a file or link entry.
fn file_mode(raw: i32) -> FileMode {
    match raw {
        0o100755 => FileMode::BlobExecutable,
        0o120000 => FileMode::Link,
        _ => FileMode::Blob,
    }
}

/// Git's order of entries in a tree: by name, a directory's name followed by `/`.
fn git_order(a: &TreeEntry<'_>, b: &TreeEntry<'_>) -> Ordering {
    let (an, bn) = (a.name_bytes(), b.name_bytes());
    let common = an.len().min(bn.len());
    an[..common].cmp(&bn[..common]).then_with(|| {
        let next = |name: &[u8], entry: &TreeEntry<'_>| {
            name.get(common)
                .copied()
                .or((kind(entry) == Kind::Tree).then_some(b'/'))
        };
        next(an, a).cmp(&next(bn, b))
    })
}

impl Walk<'_> {
    /// Compares two trees under `prefix` (`""` or `dir/`); false when libgit2 must decide.
    fn compare(
        &mut self,
        old: Option<&Tree<'_>>,
        new: Option<&Tree<'_>>,
        prefix: &str,
    ) -> Result<bool, git2::Error> {
        let olds: Vec<TreeEntry<'_>> = old.map(|t| t.iter().collect()).unwrap_or_default();
        let news: Vec<TreeEntry<'_>> = new.map(|t| t.iter().collect()).unwrap_or_default();
        let (mut i, mut j) = (0, 0);
        while i < olds.len() || j < news.len() {
            let order = match (olds.get(i), news.get(j)) {
                (Some(o), Some(n)) => git_order(o, n),
                (Some(_), None) => Ordering::Less,
                _ => Ordering::Greater,
            };
            let plain = match order {
                Ordering::Less => self.one_side(&olds[i], prefix, FileStatus::Deleted)?,
                Ordering::Greater => self.one_side(&news[j], prefix, FileStatus::Added)?,
                Ordering::Equal => self.both(&olds[i], &news[j], prefix)?,
            };
            if !plain {
                return Ok(false);
            }
            i += usize::from(order != Ordering::Greater);
            j += usize::from(order != Ordering::Less);
        }
        Ok(true)
    }

    /// An entry on both sides under one name (and both directories, or both not).
    fn both(
        &mut self,
        old: &TreeEntry<'_>,
        new: &TreeEntry<'_>,
        prefix: &str,
    ) -> Result<bool, git2::Error> {
        if old.id() == new.id() && old.filemode() == new.filemode() {
            return Ok(true);
        }
        let path = format!("{prefix}{}", String::from_utf8_lossy(new.name_bytes()));
        match (kind(old), kind(new)) {
            (Kind::Tree, Kind::Tree) => {
                let (o, n) = (
                    self.repo.find_tree(old.id())?,
                    self.repo.find_tree(new.id())?,
                );
                self.compare(Some(&o), Some(&n), &format!("{path}/"))
            }
            (a, b) if a == b && a != Kind::Submodule => {
                self.out.push(Changed {
                    status: FileStatus::Modified,
                    old_path: path.clone(),
                    new_path: path,
                    old_id: old.id(),
                    new_id: new.id(),
                    old_mode: file_mode(old.filemode()),
                    new_mode: file_mode(new.filemode()),
                });
                Ok(true)
            }
            _ => Ok(false),
        }
    }

    /// An entry on one side only: added or deleted, with everything under it.
    fn one_side(
        &mut self,
        entry: &TreeEntry<'_>,
        prefix: &str,
        status: FileStatus,
    ) -> Result<bool, git2::Error> {
        let path = format!("{prefix}{}", String::from_utf8_lossy(entry.name_bytes()));
        let added = status == FileStatus::Added;
        match kind(entry) {
            Kind::Submodule => Ok(false),
            Kind::Tree => {
                let tree = self.repo.find_tree(entry.id())?;
                let (old, new) = if added {
                    (None, Some(&tree))
                } else {
                    (Some(&tree), None)
                };
                self.compare(old, new, &format!("{path}/"))
            }
            Kind::File | Kind::Link => {
                let (zero, mode) = (Oid::ZERO_SHA1, file_mode(entry.filemode()));
                self.added |= added;
                self.deleted |= !added;
                self.out.push(Changed {
                    status,
                    old_path: path.clone(),
                    new_path: path,
                    old_id: if added { zero } else { entry.id() },
                    new_id: if added { entry.id() } else { zero },
                    old_mode: if added { FileMode::Unreadable } else { mode },
                    new_mode: if added { mode } else { FileMode::Unreadable },
                });
                Ok(true)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::{DiffRequest, libgit2_changes};
    use super::*;

    /// Writes a tree of `(path, content, mode)` files (paths with `/` make subtrees).
    fn tree(repo: &Repository, files: &[(&str, &str, i32)]) -> Oid {
        let mut index = git2::Index::new().unwrap();
        for (path, text, mode) in files {
            let id = repo.blob(text.as_bytes()).unwrap();
            let entry = git2::IndexEntry {
                ctime: git2::IndexTime::new(0, 0),
                mtime: git2::IndexTime::new(0, 0),
                dev: 0,
                ino: 0,
                mode: *mode as u32,
                uid: 0,
                gid: 0,
                file_size: 0,
                id,
                flags: 0,
                flags_extended: 0,
                path: path.as_bytes().to_vec(),
            };
            index.add(&entry).unwrap();
        }
        index.write_tree_to(repo).unwrap()
    }

    /// The walk's answer and libgit2's for the same pair of trees.
    fn both(
        repo: &Repository,
        old: &[(&str, &str, i32)],
        new: &[(&str, &str, i32)],
    ) -> (Option<Vec<Changed>>, Vec<Changed>) {
        let (o, n) = (Some(tree(repo, old)), Some(tree(repo, new)));
        let walked = changed_files(repo, o, n).unwrap();
        let request = DiffRequest {
            path: None,
            hunks: false,
        };
        (walked, libgit2_changes(repo, o, n, &request).unwrap())
    }

    const FILE: i32 = 0o100644;
    const EXEC: i32 = 0o100755;
    const LINK: i32 = 0o120000;

    /// Names whose order differs between plain bytes and git's "directory name followed by
    /// `/`" rule (`a-b`, `a.c`, `a/…`, `a0`), nested two levels deep.
    fn base() -> Vec<(&'static str, &'static str, i32)> {
        vec![
            ("a-b", "1\n", FILE),
            ("a.c", "2\n", FILE),
            ("a/x", "3\n", FILE),
            ("a/y/z", "4\n", FILE),
            ("a/y-z", "5\n", FILE),
            ("a0", "6\n", FILE),
            ("b/l", "target", LINK),
            ("run.sh", "echo\n", EXEC),
            ("z/deep/er/file", "7\n", FILE),
        ]
    }

    #[test]
    fn edits_in_nested_directories_are_listed_as_libgit2_lists_them() {
        let dir = tempfile::tempdir().unwrap();
        let repo = Repository::init(dir.path()).unwrap();
        let mut new = base();
        new[1].1 = "2 edited\n";
        new[3].1 = "4 edited\n";
        new[6].1 = "other target";
        new[7].2 = FILE;
        new[8].1 = "7 edited\n";
        let (walked, libgit2) = both(&repo, &base(), &new);
        assert_eq!(libgit2.len(), 5);
        assert_eq!(walked, Some(libgit2));
    }

    #[test]
    fn files_only_added_or_only_deleted_are_listed_as_libgit2_lists_them() {
        let dir = tempfile::tempdir().unwrap();
        let repo = Repository::init(dir.path()).unwrap();
        let mut grown = base();
        grown.extend([
            ("a/new", "n\n", FILE),
            ("new/dir/f", "m\n", EXEC),
            ("a1", "o\n", FILE),
        ]);
        for (old, new) in [(base(), grown.clone()), (grown, base())] {
            let (walked, libgit2) = both(&repo, &old, &new);
            assert_eq!(libgit2.len(), 3);
            assert_eq!(walked, Some(libgit2));
        }
        let (walked, libgit2) = changed_files(&repo, None, Some(tree(&repo, &base())))
            .map(|w| {
                let request = DiffRequest::default();
                let o = Some(tree(&repo, &base()));
                (w, libgit2_changes(&repo, None, o, &request).unwrap())
            })
            .unwrap();
        assert_eq!(walked, Some(libgit2), "everything added to an empty tree");
    }

    #[test]
    fn identical_trees_have_no_changes() {
        let dir = tempfile::tempdir().unwrap();
        let repo = Repository::init(dir.path()).unwrap();
        assert_eq!(
            both(&repo, &base(), &base()),
            (Some(Vec::new()), Vec::new())
        );
    }

    #[test]
    fn renames_kind_changes_and_submodules_are_left_to_libgit2() {
        let dir = tempfile::tempdir().unwrap();
        let repo = Repository::init(dir.path()).unwrap();
        let mut renamed = base();
        renamed[0].0 = "moved";
        let mut linked = base();
        linked[0].2 = LINK;
        let mut replaced = base();
        replaced[5] = ("a0/inside", "6\n", FILE);
        for new in [renamed, linked, replaced] {
            assert_eq!(both(&repo, &base(), &new).0, None);
        }
        let mut with_module = base();
        with_module.push(("sub", "", 0o160000));
        let mut moved_module = with_module.clone();
        moved_module[0].1 = "1 edited\n";
        let old = tree(&repo, &with_module);
        let mut index = git2::Index::new().unwrap();
        index.read_tree(&repo.find_tree(old).unwrap()).unwrap();
        let mut module = index.get_path(std::path::Path::new("sub"), 0).unwrap();
        module.id = repo.blob(b"another commit id").unwrap();
        index.add(&module).unwrap();
        let new = index.write_tree_to(&repo).unwrap();
        assert_eq!(changed_files(&repo, Some(old), Some(new)).unwrap(), None);
    }
}
