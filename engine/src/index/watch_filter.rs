//! Which file events can change what a resource's index holds (spec section 24 "Real-time
//! Index Synchronization"; section 14 ignore patterns): the watcher follows only the
//! directories the index walk would enter (`.gitignore`, `.git/info/exclude`), drops events
//! for ignored or generated paths, reads nothing into a read (opening a file is no change),
//! and of `.git` keeps only what moves HEAD (`HEAD`, `packed-refs`, refs), never the index
//! file, objects or lock files that a status, a commit or the watcher's own update writes.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use ignore::Match;
use ignore::gitignore::Gitignore;
use notify::EventKind;

use super::walk::Policy;

/// What one event path means to the index.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// Nothing the index holds.
    Ignore,
    /// A work-tree path (relative, with `/`) changed.
    Path(String),
    /// A work-tree directory appeared: its files are new and it needs watching.
    NewDir(PathBuf),
    /// HEAD or a ref moved: the whole diff from the indexed commit is due.
    Head,
}

/// Whether an event kind can change a file's contents or existence (opening, reading and
/// closing a file cannot; neither can a change of permissions or times alone).
pub fn changes_contents(kind: &EventKind) -> bool {
    use notify::event::ModifyKind;
    match kind {
        EventKind::Access(_) => false,
        EventKind::Modify(ModifyKind::Metadata(_)) => false,
        EventKind::Any
        | EventKind::Create(_)
        | EventKind::Modify(_)
        | EventKind::Remove(_)
        | EventKind::Other => true,
    }
}

/// What in `.git` (path relative to `.git`) moves HEAD.
fn moves_head(rel: &Path) -> bool {
    if rel.extension().is_some_and(|e| e == "lock") {
        return false;
    }
    rel == Path::new("HEAD") || rel == Path::new("packed-refs") || rel.starts_with("refs")
}

/// The ignore rules of one work tree, and the paths never to follow.
pub struct Filter {
    root: PathBuf,
    /// The index's own directory when it lies inside the work tree.
    own: Option<PathBuf>,
    policy: Policy,
    /// `.gitignore` matchers by the directory holding them.
    ignores: HashMap<PathBuf, Gitignore>,
    exclude: Option<Gitignore>,
}

impl Filter {
    /// The rules of `root`, whose index lives in `index_dir`.
    pub fn new(root: &Path, index_dir: &Path, policy: Policy) -> Self {
        let own = index_dir
            .canonicalize()
            .ok()
            .filter(|d| root.canonicalize().is_ok_and(|r| d.starts_with(r)))
            .and_then(|d| {
                let r = root.canonicalize().ok()?;
                Some(root.join(d.strip_prefix(r).ok()?))
            });
        let exclude = root.join(".git/info/exclude");
        let exclude = exclude.is_file().then(|| Gitignore::new(&exclude).0);
        Self {
            root: root.to_path_buf(),
            own,
            policy,
            ignores: HashMap::new(),
            exclude,
        }
    }

    /// Reads the `.gitignore` of `dir`, if it has one.
    fn load(&mut self, dir: &Path) {
        let file = dir.join(".gitignore");
        if file.is_file() {
            self.ignores
                .insert(dir.to_path_buf(), Gitignore::new(&file).0);
        } else {
            self.ignores.remove(dir);
        }
    }

    /// Every directory under `top` (itself included) that the index walk enters, loading
    /// their `.gitignore` files on the way.
    pub fn directories(&mut self, top: &Path) -> Vec<PathBuf> {
        let own = self.own.clone();
        let walker = ignore::WalkBuilder::new(top)
            .hidden(false)
            .parents(false)
            .git_global(false)
            .git_exclude(true)
            .require_git(false)
            .follow_links(false)
            .filter_entry(move |e| {
                e.file_name() != ".git" && own.as_deref().is_none_or(|o| e.path() != o)
            })
            .build();
        let mut dirs = Vec::new();
        for e in walker.flatten() {
            if e.file_type().is_some_and(|t| t.is_dir()) {
                dirs.push(e.path().to_path_buf());
            }
        }
        for d in &dirs {
            self.load(d);
        }
        dirs
    }

    /// Whether `path` (under the root) is ignored by a `.gitignore` of its directories, the
    /// repository's exclude file, or the index policy's generated globs.
    fn ignored(&self, path: &Path, is_dir: bool) -> bool {
        let Ok(rel) = path.strip_prefix(&self.root) else {
            return true;
        };
        let rel_s = rel.to_string_lossy().replace('\\', "/");
        if !is_dir && self.policy.is_generated(&rel_s) {
            return true;
        }
        let mut dir = path.parent();
        while let Some(d) = dir.filter(|d| d.starts_with(&self.root)) {
            if let Some(gi) = self.ignores.get(d) {
                match gi.matched(path, is_dir) {
                    Match::Ignore(_) => return true,
                    Match::Whitelist(_) => return false,
                    Match::None => {}
                }
            }
            dir = d.parent();
        }
        self.exclude
            .as_ref()
            .is_some_and(|x| x.matched(path, is_dir).is_ignore())
    }

    /// What a change at `path` means; a changed `.gitignore` is read again.
    pub fn judge(&mut self, path: &Path) -> Verdict {
        let Ok(rel) = path.strip_prefix(&self.root) else {
            return Verdict::Ignore;
        };
        let mut parts = rel.components();
        if parts.next().is_some_and(|c| c.as_os_str() == ".git") {
            return if moves_head(parts.as_path()) {
                Verdict::Head
            } else {
                Verdict::Ignore
            };
        }
        if rel.as_os_str().is_empty() || self.own.as_deref().is_some_and(|o| path.starts_with(o)) {
            return Verdict::Ignore;
        }
        let is_dir = std::fs::symlink_metadata(path).is_ok_and(|m| m.is_dir());
        if self.ignored(path, is_dir) {
            return Verdict::Ignore;
        }
        if rel.file_name().is_some_and(|n| n == ".gitignore")
            && let Some(parent) = path.parent()
        {
            self.load(parent);
        }
        if is_dir {
            return Verdict::NewDir(path.to_path_buf());
        }
        Verdict::Path(rel.to_string_lossy().replace('\\', "/"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn git_internals_ignored_and_generated_paths_are_no_change() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().join("repo");
        std::fs::create_dir_all(root.join(".git/info")).unwrap();
        std::fs::create_dir_all(root.join("src")).unwrap();
        std::fs::create_dir_all(root.join("build/out")).unwrap();
        std::fs::create_dir_all(root.join("node_modules/a")).unwrap();
        std::fs::write(root.join(".gitignore"), "build/\n*.log\n").unwrap();
        std::fs::write(root.join("src/.gitignore"), "!keep.log\n").unwrap();
        std::fs::write(root.join(".git/info/exclude"), "local.txt\n").unwrap();
        let policy = Policy::new(1 << 20, vec!["**/node_modules/**".into()]).unwrap();
        let mut f = Filter::new(&root, &tmp.path().join("index"), policy);
        let dirs = f.directories(&root);
        assert!(dirs.contains(&root.join("src")));
        assert!(!dirs.iter().any(|d| d.starts_with(root.join("build"))));
        assert!(!dirs.iter().any(|d| d.starts_with(root.join(".git"))));
        for p in [
            ".git/index",
            ".git/index.lock",
            ".git/objects/ab/cdef",
            ".git/refs/heads/main.lock",
            "app.log",
            "local.txt",
            "node_modules/a/i.js",
        ] {
            assert_eq!(f.judge(&root.join(p)), Verdict::Ignore, "{p}");
        }
        for p in [".git/HEAD", ".git/refs/heads/main", ".git/packed-refs"] {
            assert_eq!(f.judge(&root.join(p)), Verdict::Head, "{p}");
        }
        assert_eq!(
            f.judge(&root.join("src/keep.log")),
            Verdict::Path("src/keep.log".into())
        );
        assert_eq!(
            f.judge(&root.join("src/lib.rs")),
            Verdict::Path("src/lib.rs".into())
        );
        assert_eq!(
            f.judge(&root.join("src")),
            Verdict::NewDir(root.join("src"))
        );
        assert!(!changes_contents(&EventKind::Access(
            notify::event::AccessKind::Open(notify::event::AccessMode::Any)
        )));
    }
}
