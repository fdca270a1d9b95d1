//! The `copy_on_write` strategy for `fs-directory` / `fs-mount` resources (spec section
//! 23).
//!
//! The directory is copied into the work tree file by file with `reflink-copy` (a
//! copy-on-write clone where the filesystem supports it, a plain copy otherwise). `.gitignore`
//! and `.ignore` files are honoured, `.git` directories are never copied, symbolic links are
//! recreated as links (never followed), and file modes are kept. The copied state is then
//! committed in a private repository outside the copy; that commit is the sandbox's base, so
//! checkpoints, diffs and rollback work exactly as for git sandboxes.

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use git2::Oid;

use super::checkpoint::snapshot;
use super::git_sandbox::init_private;
use super::{Layout, PLAN_REF, SandboxError, open_repo, signature};

/// How many files a copy may hold before it is refused (a guard against sandboxing `/`).
pub const MAX_FILES: usize = 2_000_000;

/// Copies `source` into `layout.work_dir` and commits the copy as the base. Returns the base
/// commit id.
///
/// # Errors
/// I/O errors naming the file, git errors, [`SandboxError::InvalidTarget`] for a source that is
/// not a directory or holds more than [`MAX_FILES`] entries.
pub fn create(layout: &Layout, source: &Path) -> Result<Oid, SandboxError> {
    if !source.is_dir() {
        return Err(SandboxError::InvalidTarget(format!(
            "{} is not a directory",
            source.display()
        )));
    }
    copy_tree(source, &layout.work_dir)?;
    init_private(&layout.git_dir)?;
    let repo = open_repo(layout)?;
    let tree = snapshot(&repo)?;
    let tree = repo
        .find_tree(tree)
        .map_err(SandboxError::git("reading the copied tree"))?;
    let sig = signature()?;
    let oid = repo
        .commit(
            Some(PLAN_REF),
            &sig,
            &sig,
            &format!("Base: copy of {}", source.display()),
            &tree,
            &[],
        )
        .map_err(SandboxError::git("committing the copied directory"))?;
    Ok(oid)
}

/// Copies a directory tree, honouring ignore files, skipping `.git`, keeping symlinks as links
/// and file modes.
fn copy_tree(source: &Path, dest: &Path) -> Result<(), SandboxError> {
    let walker = ignore::WalkBuilder::new(source)
        .hidden(false)
        .parents(false)
        .ignore(true)
        .git_ignore(true)
        .git_global(false)
        .git_exclude(false)
        .require_git(false)
        .follow_links(false)
        .filter_entry(|e| {
            !super::confined::is_git_alias(std::os::unix::ffi::OsStrExt::as_bytes(e.file_name()))
        })
        .build();
    let mut count = 0usize;
    for entry in walker {
        let entry = entry.map_err(|e| SandboxError::Io {
            action: "read",
            path: source.to_path_buf(),
            source: std::io::Error::other(e.to_string()),
        })?;
        let rel = match entry.path().strip_prefix(source) {
            Ok(r) if !r.as_os_str().is_empty() => r,
            _ => continue,
        };
        count += 1;
        if count > MAX_FILES {
            return Err(SandboxError::InvalidTarget(format!(
                "{} holds more than {MAX_FILES} files; register a smaller directory",
                source.display()
            )));
        }
        let target = dest.join(rel);
        let Some(kind) = entry.file_type() else {
            continue;
        };
        if kind.is_dir() {
            fs::create_dir_all(&target).map_err(SandboxError::io("create", &target))?;
        } else if kind.is_symlink() {
            let link =
                fs::read_link(entry.path()).map_err(SandboxError::io("read link", entry.path()))?;
            std::os::unix::fs::symlink(&link, &target)
                .map_err(SandboxError::io("create link", &target))?;
        } else if kind.is_file() {
            reflink_copy::reflink_or_copy(entry.path(), &target)
                .map_err(SandboxError::io("copy", entry.path()))?;
            let mode = entry
                .metadata()
                .map(|m| m.permissions().mode())
                .unwrap_or(0o644);
            fs::set_permissions(&target, fs::Permissions::from_mode(mode & 0o7777))
                .map_err(SandboxError::io("set permissions of", &target))?;
        }
        // Sockets, FIFOs and devices are not copied: they are not content.
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_copy_honours_ignore_files_skips_git_and_keeps_links_and_modes() {
        let dir = tempfile::tempdir().unwrap();
        let src = dir.path().join("src");
        fs::create_dir_all(src.join("sub")).unwrap();
        fs::create_dir_all(src.join(".git")).unwrap();
        fs::create_dir_all(src.join("build")).unwrap();
        fs::write(src.join(".git/config"), "x").unwrap();
        fs::write(src.join(".gitignore"), "build/\n*.log\n").unwrap();
        fs::write(src.join("build/out.o"), "o").unwrap();
        fs::write(src.join("debug.log"), "l").unwrap();
        fs::write(src.join("sub/a.txt"), "a").unwrap();
        fs::write(src.join("run.sh"), "#!/bin/sh\n").unwrap();
        fs::set_permissions(src.join("run.sh"), fs::Permissions::from_mode(0o755)).unwrap();
        std::os::unix::fs::symlink("/etc/hostname", src.join("link")).unwrap();

        let layout = Layout::at(&dir.path().join("sb"));
        fs::create_dir_all(&layout.work_dir).unwrap();
        let base = create(&layout, &src).unwrap();
        let w = &layout.work_dir;
        assert_eq!(fs::read_to_string(w.join("sub/a.txt")).unwrap(), "a");
        assert!(!w.join(".git").exists());
        assert!(!w.join("build").exists());
        assert!(!w.join("debug.log").exists());
        assert_eq!(
            fs::metadata(w.join("run.sh")).unwrap().permissions().mode() & 0o777,
            0o755
        );
        assert_eq!(
            fs::read_link(w.join("link")).unwrap(),
            Path::new("/etc/hostname")
        );
        let repo = open_repo(&layout).unwrap();
        let tree = repo.find_commit(base).unwrap().tree().unwrap();
        let mut names: Vec<String> = Vec::new();
        tree.walk(git2::TreeWalkMode::PreOrder, |root, e| {
            if e.kind() == Some(git2::ObjectType::Blob) {
                names.push(format!("{root}{}", e.name().unwrap()));
            }
            git2::TreeWalkResult::Ok
        })
        .unwrap();
        names.sort();
        assert_eq!(names, [".gitignore", "link", "run.sh", "sub/a.txt"]);
        assert!(!src.join(".git/index").exists(), "the source is untouched");
    }
}
