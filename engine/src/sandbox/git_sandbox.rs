//! The `git_worktree` strategy for `git-checkout` resources (spec section 23).
//!
//! The sandbox is a separate bare repository under the data directory whose
//! `objects/info/alternates` names the user's object directory, so the base commit and its
//! history are readable without copying them. The work tree is checked out from the base
//! commit with libgit2. New objects (checkpoints) are written to the private repository only.
//! The user's repository is opened read-only: no branch, ref, index, config or
//! `.git/worktrees` entry is ever written there (see `docs/decisions.md`).

use std::fs;
use std::path::{Path, PathBuf};

use git2::{Oid, Repository, RepositoryInitOptions, Status, StatusOptions};
use serde::Serialize;

use super::{Layout, PLAN_REF, SandboxError, open_repo};

/// What `plan use` should tell the user about a git checkout before sandboxing it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Preflight {
    /// The commit HEAD points to (the plan's base), full hex.
    pub head_commit: String,
    /// The branch HEAD points to, if any.
    pub branch: Option<String>,
    /// Files with uncommitted changes (modified, staged, deleted or untracked, not ignored);
    /// they are not visible to the plan.
    pub uncommitted_files: usize,
    /// Whether the base commit has submodules (they stay gitlinks in the sandbox).
    pub has_submodules: bool,
    /// Filter drivers named in the root `.gitattributes` (such as `lfs`); files using them are
    /// copied as stored, without running the filter.
    pub filter_drivers: Vec<String>,
}

impl Preflight {
    /// Warnings to show at `plan use`, one sentence each.
    pub fn warnings(&self) -> Vec<String> {
        let mut out = Vec::new();
        if self.uncommitted_files > 0 {
            out.push(format!(
                "{} uncommitted files are not visible to this plan",
                self.uncommitted_files
            ));
        }
        if self.has_submodules {
            out.push(
                "submodules stay as gitlinks in the sandbox; their contents are not checked out"
                    .into(),
            );
        }
        if !self.filter_drivers.is_empty() {
            out.push(format!(
                "files using filter drivers ({}) are copied as stored (for LFS: pointer files)",
                self.filter_drivers.join(", ")
            ));
        }
        out
    }
}

/// Inspects a user's checkout without writing to it: HEAD, uncommitted files, submodules and
/// filter drivers.
///
/// # Errors
/// [`SandboxError::InvalidTarget`] when `repo` is not a git checkout or HEAD is unborn.
pub fn preflight(repo: &Path) -> Result<Preflight, SandboxError> {
    let user = open_user(repo)?;
    let head = user.head().map_err(|e| {
        SandboxError::InvalidTarget(format!(
            "{} has no commit checked out ({}); commit something first",
            repo.display(),
            e.message()
        ))
    })?;
    let commit = head
        .peel_to_commit()
        .map_err(SandboxError::git("reading HEAD"))?;
    let branch = head
        .is_branch()
        .then(|| head.shorthand().ok().map(str::to_string))
        .flatten();
    let mut opts = StatusOptions::new();
    opts.include_untracked(true)
        .recurse_untracked_dirs(true)
        .include_ignored(false)
        .exclude_submodules(true);
    let statuses = user
        .statuses(Some(&mut opts))
        .map_err(SandboxError::git("reading the checkout's status"))?;
    let uncommitted_files = statuses
        .iter()
        .filter(|s| s.status() != Status::CURRENT && !s.status().contains(Status::IGNORED))
        .count();
    let tree = commit
        .tree()
        .map_err(SandboxError::git("reading HEAD's tree"))?;
    let has_submodules = tree.get_name(".gitmodules").is_some();
    let mut filter_drivers = Vec::new();
    if let Some(entry) = tree.get_name(".gitattributes")
        && let Ok(blob) = user.find_blob(entry.id())
    {
        for word in String::from_utf8_lossy(blob.content()).split_whitespace() {
            if let Some(name) = word.strip_prefix("filter=")
                && !filter_drivers.iter().any(|f| f == name)
            {
                filter_drivers.push(name.to_string());
            }
        }
    }
    Ok(Preflight {
        head_commit: commit.id().to_string(),
        branch,
        uncommitted_files,
        has_submodules,
        filter_drivers,
    })
}

fn open_user(repo: &Path) -> Result<Repository, SandboxError> {
    Repository::open(repo).map_err(|e| {
        SandboxError::InvalidTarget(format!(
            "{} is not a git checkout: {}",
            repo.display(),
            e.message()
        ))
    })
}

/// The user's object directory (shared by all worktrees of the repository), absolute.
fn user_objects_dir(user: &Repository) -> Result<PathBuf, SandboxError> {
    let objects = user.commondir().join("objects");
    fs::canonicalize(&objects).map_err(SandboxError::io("resolve", &objects))
}

/// Checks that `base_commit` names a commit in `repo`.
///
/// # Errors
/// [`SandboxError::InvalidTarget`].
pub fn check_base(repo: &Path, base_commit: &str) -> Result<(), SandboxError> {
    let user = open_user(repo)?;
    let oid = Oid::from_str(base_commit).map_err(|_| {
        SandboxError::InvalidTarget(format!("base commit `{base_commit}` is not a commit id"))
    })?;
    user.find_commit(oid).map_err(|_| {
        SandboxError::InvalidTarget(format!(
            "base commit {base_commit} is not in {}",
            repo.display()
        ))
    })?;
    Ok(())
}

/// Creates the private repository in `layout.git_dir`, borrows the user's objects, points the
/// plan branch at the base commit and checks it out into `layout.work_dir` (which must exist
/// and be empty). Returns the base commit id.
///
/// # Errors
/// [`SandboxError::InvalidTarget`] for a missing repository or commit, git and I/O errors.
pub fn create(layout: &Layout, repo: &Path, base_commit: &str) -> Result<Oid, SandboxError> {
    let (sandbox, oid) = init_at_base(layout, repo, base_commit)?;
    let tree = sandbox
        .find_commit(oid)
        .and_then(|c| c.tree())
        .map_err(SandboxError::git("reading the base tree"))?;
    checkout(layout, &sandbox, &tree)?;
    Ok(oid)
}

/// Creates the private repository in `layout.git_dir`, borrowing the user's objects, with
/// the plan branch and HEAD at the base commit; nothing is checked out. Returns the opened
/// repository and the base commit id.
///
/// # Errors
/// As [`create`].
pub(crate) fn init_at_base(
    layout: &Layout,
    repo: &Path,
    base_commit: &str,
) -> Result<(Repository, Oid), SandboxError> {
    init_borrowing(layout, repo)?;
    let sandbox = open_repo(layout)?;
    let oid = Oid::from_str(base_commit).map_err(|_| {
        SandboxError::InvalidTarget(format!("base commit `{base_commit}` is not a commit id"))
    })?;
    let commit = sandbox.find_commit(oid).map_err(|_| {
        SandboxError::InvalidTarget(format!(
            "base commit {base_commit} is not in {}",
            repo.display()
        ))
    })?;
    sandbox
        .reference(PLAN_REF, oid, true, "sandbox created at the plan's base")
        .map_err(SandboxError::git("creating the plan branch"))?;
    sandbox
        .set_head(PLAN_REF)
        .map_err(SandboxError::git("pointing HEAD at the plan branch"))?;
    drop(commit);
    Ok((sandbox, oid))
}

/// Creates the private repository in `layout.git_dir`, borrowing the objects of the user's
/// repository at `repo`.
///
/// # Errors
/// [`SandboxError::InvalidTarget`] when `repo` is not a git checkout, git and I/O errors.
pub(crate) fn init_borrowing(layout: &Layout, repo: &Path) -> Result<(), SandboxError> {
    let user = open_user(repo)?;
    let objects = user_objects_dir(&user)?;
    drop(user);
    init_private(&layout.git_dir)?;
    let alternates = layout.git_dir.join("objects/info/alternates");
    fs::write(&alternates, format!("{}\n", objects.display()))
        .map_err(SandboxError::io("write", &alternates))?;
    Ok(())
}

/// One entry to write: path (validated), blob or commit id, git file mode.
struct Item {
    path: String,
    id: Oid,
    mode: i32,
}

/// Refuses tree entry names that could escape or touch git metadata (`..`, `.`, `.git`,
/// separators, NUL); git's own fsck refuses them too, but a crafted object could hold them.
fn safe_name(name: &str) -> bool {
    !name.is_empty()
        && name != "."
        && name != ".."
        && !name.eq_ignore_ascii_case(".git")
        && !name.contains(['/', '\0'])
}

/// Writes `tree` into the (empty) work tree exactly as stored (no filters, no line-ending
/// conversion), in parallel, then builds the index with each file's stat data so the first
/// snapshot does not rehash anything. Files are created with `O_EXCL`, so nothing is written
/// through a symbolic link.
pub(crate) fn checkout(
    layout: &Layout,
    repo: &Repository,
    tree: &git2::Tree<'_>,
) -> Result<(), SandboxError> {
    let mut items = Vec::new();
    let mut dirs = Vec::new();
    let mut bad = None;
    tree.walk(git2::TreeWalkMode::PreOrder, |root, entry| {
        let Some(name) = entry.name().ok().filter(|n| safe_name(n)) else {
            bad = Some(format!(
                "{root}{}",
                String::from_utf8_lossy(entry.name_bytes())
            ));
            return git2::TreeWalkResult::Abort;
        };
        let path = format!("{root}{name}");
        match entry.kind() {
            Some(git2::ObjectType::Tree) => dirs.push(path),
            Some(git2::ObjectType::Blob) | Some(git2::ObjectType::Commit) => items.push(Item {
                path,
                id: entry.id(),
                mode: entry.filemode(),
            }),
            _ => {}
        }
        git2::TreeWalkResult::Ok
    })
    .map_err(SandboxError::git("listing the base tree"))?;
    if let Some(path) = bad {
        return Err(SandboxError::InvalidTarget(format!(
            "the base commit holds an unsafe path `{path}`; it cannot be sandboxed"
        )));
    }
    for dir in &dirs {
        let p = layout.work_dir.join(dir);
        fs::create_dir(&p).map_err(SandboxError::io("create", &p))?;
    }
    super::parallel::each_chunk(
        &items,
        || SandboxError::Checkpoint("a checkout thread panicked".into()),
        |part| write_items(layout, part),
    )?;
    let mut index = repo
        .index()
        .map_err(SandboxError::git("opening the index"))?;
    index
        .clear()
        .map_err(SandboxError::git("clearing the index"))?;
    for item in &items {
        let full = layout.work_dir.join(&item.path);
        let meta = if item.mode == 0o160000 {
            None
        } else {
            Some(fs::symlink_metadata(&full).map_err(SandboxError::io("read", &full))?)
        };
        index
            .add(&index_entry(item, meta.as_ref()))
            .map_err(SandboxError::git(format!("indexing {}", item.path)))?;
    }
    // Writing the tree fills the index's tree cache, which the file then keeps.
    let written = index.write_tree().map_err(SandboxError::git(
        "checking the index against the base tree",
    ))?;
    if written != tree.id() {
        return Err(SandboxError::Checkpoint(format!(
            "the checked-out index has tree {written}, expected {}",
            tree.id()
        )));
    }
    index
        .write()
        .map_err(SandboxError::git("writing the index"))?;
    Ok(())
}

/// Writes a blob's `data` at `path` as a checkout writes an entry of `mode`: a link to the
/// target it holds, or a new file created with `permissions` (less the umask).
pub(crate) fn write_blob(
    path: &Path,
    data: &[u8],
    mode: i32,
    permissions: u32,
) -> std::io::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    if mode == i32::from(git2::FileMode::Link) {
        use std::os::unix::ffi::OsStrExt;
        return std::os::unix::fs::symlink(std::ffi::OsStr::from_bytes(data), path);
    }
    fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(permissions)
        .open(path)?
        .write_all(data)
}

fn write_items(layout: &Layout, items: &[Item]) -> Result<(), SandboxError> {
    use std::os::unix::fs::PermissionsExt;
    let repo = open_repo(layout)?;
    let odb = repo
        .odb()
        .map_err(SandboxError::git("opening the objects"))?;
    for item in items {
        let path = layout.work_dir.join(&item.path);
        if item.mode == 0o160000 {
            // A submodule stays a gitlink: an empty directory, as git leaves it.
            fs::create_dir(&path).map_err(SandboxError::io("create", &path))?;
            continue;
        }
        let object = odb
            .read(item.id)
            .map_err(SandboxError::git(format!("reading {}", item.path)))?;
        let permissions = if item.mode == 0o100755 { 0o755 } else { 0o644 };
        write_blob(&path, object.data(), item.mode, permissions)
            .map_err(SandboxError::io("write", &path))?;
        if item.mode == 0o100755 {
            // The umask may have cleared execute bits.
            fs::set_permissions(&path, fs::Permissions::from_mode(0o755))
                .map_err(SandboxError::io("set permissions of", &path))?;
        }
    }
    Ok(())
}

fn index_entry(item: &Item, meta: Option<&fs::Metadata>) -> git2::IndexEntry {
    use std::os::unix::fs::MetadataExt;
    let time = |s: i64, ns: i64| git2::IndexTime::new(s as i32, ns as u32);
    let (ctime, mtime, dev, ino, uid, gid, size) = match meta {
        Some(m) => (
            time(m.ctime(), m.ctime_nsec()),
            time(m.mtime(), m.mtime_nsec()),
            m.dev() as u32,
            m.ino() as u32,
            m.uid(),
            m.gid(),
            m.len() as u32,
        ),
        None => (time(0, 0), time(0, 0), 0, 0, 0, 0, 0),
    };
    git2::IndexEntry {
        ctime,
        mtime,
        dev,
        ino,
        mode: item.mode as u32,
        uid,
        gid,
        file_size: size,
        id: item.id,
        flags: item.path.len().min(0xfff) as u16,
        flags_extended: 0,
        path: item.path.as_bytes().to_vec(),
    }
}

/// Initializes an empty bare repository with settings that make the work tree byte-exact:
/// no line-ending conversion, file modes and symlinks kept.
pub(crate) fn init_private(git_dir: &Path) -> Result<Repository, SandboxError> {
    let mut opts = RepositoryInitOptions::new();
    opts.bare(true).mkpath(true).initial_head(PLAN_REF);
    let repo = Repository::init_opts(git_dir, &opts)
        .map_err(SandboxError::git(format!("creating {}", git_dir.display())))?;
    {
        let mut config = repo
            .config()
            .map_err(SandboxError::git("opening the sandbox config"))?;
        for (key, value) in [
            ("core.autocrlf", "false"),
            ("core.filemode", "true"),
            ("core.symlinks", "true"),
            ("core.safecrlf", "false"),
            ("gc.auto", "0"),
            // The user's global excludes do not decide what a plan captures.
            ("core.excludesFile", "/dev/null"),
        ] {
            config
                .set_str(key, value)
                .map_err(SandboxError::git(format!("setting {key}")))?;
        }
    }
    Ok(repo)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sandbox::testing::{git, repo_with_files};

    #[test]
    fn preflight_counts_uncommitted_files_and_finds_filters() {
        let dir = tempfile::tempdir().unwrap();
        let head = repo_with_files(
            dir.path(),
            &[
                ("a.txt", "a\n"),
                (".gitattributes", "*.bin filter=lfs diff=lfs\n"),
            ],
        );
        fs::write(dir.path().join("a.txt"), "changed\n").unwrap();
        fs::write(dir.path().join("new.txt"), "new\n").unwrap();
        let p = preflight(dir.path()).unwrap();
        assert_eq!(p.head_commit, head);
        assert_eq!(p.branch.as_deref(), Some("main"));
        assert_eq!(p.uncommitted_files, 2);
        assert_eq!(p.filter_drivers, ["lfs"]);
        assert!(!p.has_submodules);
        assert_eq!(
            p.warnings()[0],
            "2 uncommitted files are not visible to this plan"
        );
    }

    #[test]
    fn the_sandbox_checks_out_the_base_commit_not_the_uncommitted_state() {
        let dir = tempfile::tempdir().unwrap();
        let user = dir.path().join("user");
        let head = repo_with_files(&user, &[("a.txt", "committed\n"), ("d/b.txt", "b\n")]);
        fs::write(user.join("a.txt"), "uncommitted\n").unwrap();
        let layout = Layout::at(&dir.path().join("sb"));
        fs::create_dir_all(&layout.work_dir).unwrap();
        let base = create(&layout, &user, &head).unwrap();
        assert_eq!(base.to_string(), head);
        assert_eq!(
            fs::read_to_string(layout.work_dir.join("a.txt")).unwrap(),
            "committed\n"
        );
        assert_eq!(
            fs::read_to_string(layout.work_dir.join("d/b.txt")).unwrap(),
            "b\n"
        );
        assert!(
            !layout.work_dir.join(".git").exists(),
            "no git metadata in the work tree"
        );
        // The private repository did not copy the user's objects.
        let sandbox_objects: Vec<_> = fs::read_dir(layout.git_dir.join("objects"))
            .unwrap()
            .filter_map(|e| e.ok())
            .filter(|e| e.file_name().len() == 2)
            .collect();
        assert!(
            sandbox_objects.is_empty(),
            "objects are borrowed, not copied"
        );
        assert_eq!(git(&user, &["branch", "--list"]), "* main");
        let repo = open_repo(&layout).unwrap();
        let base_tree = repo.find_commit(base).unwrap().tree_id();
        assert_eq!(
            crate::sandbox::checkpoint::snapshot(&repo).unwrap(),
            base_tree,
            "the checked-out work tree is exactly the base tree"
        );
    }

    #[test]
    fn modes_links_and_submodule_gitlinks_are_checked_out_as_stored() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let user = dir.path().join("user");
        // Git stores a.txt normalized to LF; its own checkout would write CRLF back.
        repo_with_files(
            &user,
            &[
                (".gitattributes", "*.txt text eol=crlf\n"),
                ("a.txt", "a\r\n"),
                ("run.sh", "#!/bin/sh\n"),
            ],
        );
        fs::set_permissions(user.join("run.sh"), fs::Permissions::from_mode(0o755)).unwrap();
        std::os::unix::fs::symlink("a.txt", user.join("link")).unwrap();
        git(&user, &["add", "-A"]);
        // A gitlink entry, as a submodule leaves in the tree.
        let sub = "1234567890123456789012345678901234567890";
        git(
            &user,
            &[
                "update-index",
                "--add",
                "--cacheinfo",
                &format!("160000,{sub},vendor/lib"),
            ],
        );
        git(&user, &["commit", "-q", "-m", "more"]);
        let head = git(&user, &["rev-parse", "HEAD"]);
        let layout = Layout::at(&dir.path().join("sb"));
        fs::create_dir_all(&layout.work_dir).unwrap();
        let base = create(&layout, &user, &head).unwrap();
        let w = &layout.work_dir;
        assert_eq!(
            fs::read(w.join("a.txt")).unwrap(),
            b"a\n",
            "files are written as stored, without filters"
        );
        assert_eq!(
            fs::metadata(w.join("run.sh")).unwrap().permissions().mode() & 0o777,
            0o755
        );
        assert_eq!(fs::read_link(w.join("link")).unwrap(), Path::new("a.txt"));
        assert!(w.join("vendor/lib").is_dir());
        let repo = open_repo(&layout).unwrap();
        let base_tree = repo.find_commit(base).unwrap().tree_id();
        assert_eq!(
            crate::sandbox::checkpoint::snapshot(&repo).unwrap(),
            base_tree
        );
    }

    #[test]
    fn an_unknown_base_commit_is_refused_clearly() {
        let dir = tempfile::tempdir().unwrap();
        repo_with_files(dir.path(), &[("a", "a")]);
        let err = check_base(dir.path(), &"0".repeat(40)).unwrap_err();
        assert!(err.to_string().contains("is not in"), "{err}");
        let err = check_base(&dir.path().join("nope"), "abc").unwrap_err();
        assert!(err.to_string().contains("not a git checkout"), "{err}");
    }
}
