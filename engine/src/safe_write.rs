//! Replacing a user's file safely: through a temporary file and a rename (readers never see a
//! half-written file), following a symlink to the real file, keeping its permissions, refusing
//! a read-only file, and serialising writers with a lock on the directory (no lock file is left
//! behind).

use std::fs::{self, File};
use std::io::{self, Write};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

/// Permissions of a file this module creates: owner read/write only, since config files may
/// hold header values such as tokens.
pub const NEW_FILE_MODE: u32 = 0o600;

/// An exclusive advisory lock on a directory, released on drop.
#[derive(Debug)]
pub struct DirLock {
    _dir: File,
}

/// Takes an exclusive lock on `dir` (creating it if needed), blocking until it is free.
///
/// # Errors
/// I/O errors from creating, opening or locking the directory.
pub fn lock_dir(dir: &Path) -> io::Result<DirLock> {
    fs::create_dir_all(dir)?;
    let handle = File::open(dir)?;
    handle.lock()?;
    Ok(DirLock { _dir: handle })
}

/// Like [`lock_dir`], but returns `Ok(None)` at once when another holder has the lock.
///
/// # Errors
/// I/O errors from creating, opening or locking the directory.
pub fn try_lock_dir(dir: &Path) -> io::Result<Option<DirLock>> {
    fs::create_dir_all(dir)?;
    let handle = File::open(dir)?;
    match handle.try_lock() {
        Ok(()) => Ok(Some(DirLock { _dir: handle })),
        Err(fs::TryLockError::WouldBlock) => Ok(None),
        Err(fs::TryLockError::Error(e)) => Err(e),
    }
}

/// The file a write to `path` must really change: the target of a symlink (followed
/// repeatedly), else `path` itself.
pub fn resolve_target(path: &Path) -> io::Result<PathBuf> {
    match fs::symlink_metadata(path) {
        Ok(meta) if meta.file_type().is_symlink() => match fs::canonicalize(path) {
            Ok(real) => Ok(real),
            // A dangling link: write where it points.
            Err(_) => {
                let link = fs::read_link(path)?;
                Ok(if link.is_absolute() {
                    link
                } else {
                    path.parent().unwrap_or(Path::new(".")).join(link)
                })
            }
        },
        _ => Ok(path.to_path_buf()),
    }
}

/// Replaces the contents of `path` (or, for a symlink, of its target) with `bytes`.
///
/// # Errors
/// `PermissionDenied` when the existing file is read-only; other I/O errors. On error the old
/// file is unchanged and no temporary file is left.
pub fn replace_file(path: &Path, bytes: &[u8]) -> io::Result<()> {
    let target = resolve_target(path)?;
    let dir = target.parent().unwrap_or(Path::new("."));
    fs::create_dir_all(dir)?;
    let mode = match fs::metadata(&target) {
        Ok(meta) if meta.permissions().readonly() => {
            return Err(io::Error::new(
                io::ErrorKind::PermissionDenied,
                format!(
                    "{} is read-only; make it writable (chmod u+w) to change it",
                    target.display()
                ),
            ));
        }
        Ok(meta) => meta.permissions().mode() & 0o7777,
        Err(e) if e.kind() == io::ErrorKind::NotFound => NEW_FILE_MODE,
        Err(e) => return Err(e),
    };
    let name = target
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or("file");
    let tmp = dir.join(format!(".{name}.tmp-{}", std::process::id()));
    let result = (|| {
        let mut f = fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&tmp)?;
        f.set_permissions(fs::Permissions::from_mode(mode))?;
        f.write_all(bytes)?;
        f.sync_all()?;
        fs::rename(&tmp, &target)
    })();
    if result.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn permissions_are_kept_and_new_files_are_private() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("c.toml");
        replace_file(&path, b"a").unwrap();
        assert_eq!(
            fs::metadata(&path).unwrap().permissions().mode() & 0o777,
            0o600
        );
        fs::set_permissions(&path, fs::Permissions::from_mode(0o640)).unwrap();
        replace_file(&path, b"b").unwrap();
        assert_eq!(
            fs::metadata(&path).unwrap().permissions().mode() & 0o777,
            0o640
        );
        assert_eq!(fs::read(&path).unwrap(), b"b");
    }

    #[test]
    fn a_symlink_is_followed_and_stays_a_symlink() {
        let dir = tempfile::tempdir().unwrap();
        let real = dir.path().join("dotfiles/real.toml");
        fs::create_dir_all(real.parent().unwrap()).unwrap();
        fs::write(&real, "old").unwrap();
        let link = dir.path().join("link.toml");
        std::os::unix::fs::symlink(&real, &link).unwrap();
        replace_file(&link, b"new").unwrap();
        assert!(
            fs::symlink_metadata(&link)
                .unwrap()
                .file_type()
                .is_symlink()
        );
        assert_eq!(fs::read_to_string(&real).unwrap(), "new");
    }

    #[test]
    fn a_read_only_file_is_refused_and_unchanged() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("c.toml");
        fs::write(&path, "keep").unwrap();
        fs::set_permissions(&path, fs::Permissions::from_mode(0o444)).unwrap();
        let err = replace_file(&path, b"x").unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::PermissionDenied);
        assert_eq!(fs::read_to_string(&path).unwrap(), "keep");
        assert_eq!(
            fs::read_dir(dir.path()).unwrap().count(),
            1,
            "no temporary file left"
        );
    }
}
