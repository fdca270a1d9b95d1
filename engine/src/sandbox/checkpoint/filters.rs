//! Whether git would pass a written file through a filter on its way into the repository
//! (`core.autocrlf`, or a `text`, `eol`, `crlf`, `filter`, `ident` or `working-tree-encoding`
//! attribute), asked for the files one snapshot stores.
//!
//! libgit2 answers an attribute lookup by resolving the file's whole path and probing every
//! directory above it for a `.gitattributes`: six lookups cost about a hundred system calls
//! per file, most of a 1,000-file snapshot's time. Here the configuration is read once per
//! snapshot, and each directory is looked at once for an attribute file; only a file that
//! one of them could apply to is asked about attribute by attribute.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use git2::Repository;

/// The attributes that make git filter a file.
const FILTERS: [&str; 6] = ["text", "eol", "crlf", "filter", "ident", "working-tree-encoding"];

/// The answers of one snapshot.
pub(super) struct Filters<'r> {
    repo: &'r Repository,
    work: PathBuf,
    /// What holds for every file, read at the first question (a snapshot that stores
    /// nothing asks none).
    ready: Option<Ready<'r>>,
    /// Directories (relative to the work tree) by whether they hold an attribute file.
    dirs: HashMap<PathBuf, bool>,
}

/// What one snapshot reads once for all its files.
struct Ready<'r> {
    /// `core.autocrlf` asks every file to be filtered.
    by_config: bool,
    /// An attribute file outside the work tree exists, which may apply to any path.
    outside: bool,
    /// The tree whose `.gitattributes` files apply besides the work tree's (git reads a
    /// removed one from the index, which holds the repository's `HEAD` in a sandbox).
    head: Option<git2::Tree<'r>>,
}

impl<'r> Ready<'r> {
    fn of(repo: &'r Repository) -> Self {
        let config = repo.config().ok();
        Self {
            by_config: by_config(config.as_ref()),
            outside: config
                .as_ref()
                .is_none_or(|c| outside_attribute_files(repo, c)),
            head: repo.head().and_then(|h| h.peel_to_tree()).ok(),
        }
    }
}

impl<'r> Filters<'r> {
    /// The answers for files of `repo`'s work tree `work`.
    pub(super) fn new(repo: &'r Repository, work: &Path) -> Self {
        Self {
            repo,
            work: work.to_path_buf(),
            ready: None,
            dirs: HashMap::new(),
        }
    }

    fn ready(&mut self) -> &Ready<'r> {
        let repo = self.repo;
        self.ready.get_or_insert_with(|| Ready::of(repo))
    }

    /// Whether the configuration or an attribute file outside the work tree may filter any
    /// file, whatever its path.
    pub(super) fn everywhere(&mut self) -> bool {
        let ready = self.ready();
        ready.by_config || ready.outside
    }

    /// The tree of the repository's `HEAD`, whose attribute files apply besides the work
    /// tree's (read once with the rest).
    pub(super) fn head_tree(&mut self) -> Option<git2::Oid> {
        self.ready().head.as_ref().map(git2::Tree::id)
    }

    /// Whether the file at `rel` (relative to the work tree) is stored as it is.
    pub(super) fn none_for(&mut self, rel: &Path) -> bool {
        let (by_config, outside) = {
            let ready = self.ready();
            (ready.by_config, ready.outside)
        };
        if by_config {
            return false;
        }
        if !outside && !self.attribute_file_above(rel) {
            return true;
        }
        let flags = git2::AttrCheckFlags::default();
        FILTERS
            .iter()
            .all(|name| matches!(self.repo.get_attr(rel, name, flags), Ok(None)))
    }

    /// Whether a directory above `rel` (the work tree's root included) holds an attribute
    /// file, in the work tree or in `HEAD`.
    fn attribute_file_above(&mut self, rel: &Path) -> bool {
        rel.ancestors()
            .skip(1)
            .any(|dir| self.holds_attribute_file(dir))
    }

    fn holds_attribute_file(&mut self, dir: &Path) -> bool {
        if let Some(&known) = self.dirs.get(dir) {
            return known;
        }
        let file = dir.join(".gitattributes");
        let holds = std::fs::symlink_metadata(self.work.join(&file)).is_ok()
            || self
                .ready()
                .head
                .as_ref()
                .is_some_and(|t| t.get_path(&file).is_ok());
        self.dirs.insert(dir.to_path_buf(), holds);
        holds
    }
}

/// Whether the configuration asks every file to be filtered (`core.autocrlf` other than
/// `false`).
fn by_config(config: Option<&git2::Config>) -> bool {
    !config.is_some_and(|c| c.get_string("core.autocrlf").map_or(true, |v| v == "false"))
}

/// Whether an attribute file that applies to every path exists: the repository's
/// `info/attributes`, `core.attributesFile`, the user's (`$XDG_CONFIG_HOME/git/attributes`
/// or `~/.config/git/attributes`) or the system's (`/etc/gitattributes`). Any doubt counts
/// as one.
fn outside_attribute_files(repo: &Repository, config: &git2::Config) -> bool {
    if config.get_path("core.attributesFile").is_ok() {
        return true;
    }
    let user = std::env::var_os("XDG_CONFIG_HOME")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".config")))
        .map(|dir| dir.join("git/attributes"));
    [
        Some(repo.path().join("info/attributes")),
        user,
        Some(PathBuf::from("/etc/gitattributes")),
    ]
    .into_iter()
    .flatten()
    .any(|f| f.exists())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn repo_with(files: &[(&str, &str)]) -> (tempfile::TempDir, Repository) {
        let dir = tempfile::tempdir().unwrap();
        let repo = Repository::init(dir.path()).unwrap();
        for (path, text) in files {
            let abs = dir.path().join(path);
            std::fs::create_dir_all(abs.parent().unwrap()).unwrap();
            std::fs::write(abs, text).unwrap();
        }
        (dir, repo)
    }

    #[test]
    fn a_file_with_no_attribute_file_above_it_is_stored_as_it_is() {
        let (dir, repo) = repo_with(&[("src/deep/a.rs", "a\n")]);
        let mut filters = Filters::new(&repo, dir.path());
        assert!(filters.none_for(Path::new("src/deep/a.rs")));
    }

    #[test]
    fn an_attribute_file_above_a_file_is_asked_about_it() {
        let (dir, repo) = repo_with(&[
            ("src/.gitattributes", "*.txt text eol=crlf\n"),
            ("src/deep/a.txt", "a\n"),
            ("src/deep/b.rs", "b\n"),
            ("other/c.txt", "c\n"),
        ]);
        let mut filters = Filters::new(&repo, dir.path());
        assert!(!filters.none_for(Path::new("src/deep/a.txt")));
        assert!(filters.none_for(Path::new("src/deep/b.rs")));
        assert!(filters.none_for(Path::new("other/c.txt")));
    }

    #[test]
    fn the_repositorys_own_attribute_file_and_autocrlf_count_for_every_file() {
        let (dir, repo) = repo_with(&[("a.txt", "a\n")]);
        std::fs::create_dir_all(repo.path().join("info")).unwrap();
        std::fs::write(repo.path().join("info/attributes"), "*.txt text\n").unwrap();
        assert!(!Filters::new(&repo, dir.path()).none_for(Path::new("a.txt")));
        std::fs::remove_file(repo.path().join("info/attributes")).unwrap();
        repo.config().unwrap().set_str("core.autocrlf", "true").unwrap();
        assert!(!Filters::new(&repo, dir.path()).none_for(Path::new("a.txt")));
    }
}
