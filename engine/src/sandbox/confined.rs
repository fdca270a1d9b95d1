//! File operations confined to a sandbox's work tree (spec section 18 "respect sandbox
//! boundaries and deny-lists").
//!
//! Two layers:
//! 1. [`SandboxFs::check`] refuses, before anything is touched, paths that are empty, hold NUL
//!    bytes, are absolute, contain `..`, are longer than [`MAX_PATH_BYTES`] (or a component
//!    longer than [`MAX_NAME_BYTES`]), or match the deny-list (`.git` as any component, always,
//!    plus configured globs).
//! 2. Every operation then resolves the path with `openat2(2)` relative to a descriptor of the
//!    work tree with `RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS`, so the kernel itself refuses
//!    any resolution that would leave the tree, including through symbolic links and races
//!    with a concurrent process. Reads follow symbolic links that stay inside; writes, deletes
//!    and moves also set `RESOLVE_NO_SYMLINKS` and `O_NOFOLLOW`, so they never go through a
//!    symbolic link at all (the change recorded is always the change made).
//!
//! Files are replaced atomically (temporary file in the same directory, then `renameat`), and
//! keep their permission bits.

use std::fs::File;
use std::io::{Read, Write};
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use globset::{Glob, GlobSet, GlobSetBuilder};
use rustix::fs::{AtFlags, FileType, Mode, OFlags, RenameFlags, ResolveFlags};
use rustix::io::Errno;
use serde::Serialize;
use sha2::{Digest, Sha256};

/// Whether a file name is `.git` or a name git refuses because a Windows or macOS file system
/// would read it as `.git` (core.protectNTFS / core.protectHFS, on by default in git and
/// libgit2): any case, trailing dots or spaces (`.git.`, `.git `), an NTFS stream suffix
/// (`.git::$INDEX_ALLOCATION`), the 8.3 short name `git~1`, code points HFS+ ignores, or one
/// of those after a backslash. Snapshots skip such entries as they skip `.git`; tools refuse
/// them.
pub fn is_git_alias(name: &[u8]) -> bool {
    // Every alias spells the letter g in ASCII (the ignored code points and the case folding
    // never make one), so most names are answered without decoding.
    if !name.iter().any(|b| b.eq_ignore_ascii_case(&b'g')) {
        return false;
    }
    let Ok(name) = std::str::from_utf8(name) else {
        return name.eq_ignore_ascii_case(b".git");
    };
    name.split('\\').any(|part| {
        let visible: String = part
            .chars()
            .filter(|c| {
                !matches!(*c, '\u{200c}'..='\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{206a}'..='\u{206f}' | '\u{feff}')
            })
            .collect::<String>()
            .to_ascii_lowercase();
        let base = visible.split(':').next().unwrap_or_default();
        let base = base.trim_end_matches(['.', ' ']);
        base == ".git" || base == "git~1"
    })
}

/// Longest accepted relative path, in bytes (Linux `PATH_MAX`).
pub const MAX_PATH_BYTES: usize = 4096;
/// Longest accepted path component, in bytes (Linux `NAME_MAX`).
pub const MAX_NAME_BYTES: usize = 255;

const READ_RESOLVE: ResolveFlags = ResolveFlags::BENEATH.union(ResolveFlags::NO_MAGICLINKS);
const WRITE_RESOLVE: ResolveFlags = READ_RESOLVE.union(ResolveFlags::NO_SYMLINKS);

/// Why a confined operation was refused or failed.
#[derive(Debug, thiserror::Error)]
pub enum FsError {
    /// The path is refused by the confinement rules; nothing was touched.
    #[error("permission denied: {0}")]
    Denied(String),
    /// The path does not exist.
    #[error("{0} does not exist")]
    NotFound(String),
    /// The path exists and the operation would overwrite it.
    #[error("{0} already exists")]
    AlreadyExists(String),
    /// A file was expected.
    #[error("{0} is a directory, not a file")]
    IsADirectory(String),
    /// A directory was expected.
    #[error("{0} is not a directory")]
    NotADirectory(String),
    /// A directory to delete has entries and `recursive` was not set.
    #[error("{0} is not empty; pass recursive: true to delete it with its contents")]
    NotEmpty(String),
    /// The file is larger than the operation accepts.
    #[error("{path} is {size} bytes, more than the {limit}-byte limit")]
    TooLarge {
        /// The path.
        path: String,
        /// Its size.
        size: u64,
        /// The limit.
        limit: u64,
    },
    /// Another I/O failure.
    #[error("{path}: {message}")]
    Io {
        /// The path.
        path: String,
        /// What failed.
        message: String,
    },
}

impl FsError {
    /// Whether this is a confinement refusal (reported to the actor as `PermissionDenied`).
    pub fn is_denied(&self) -> bool {
        matches!(self, FsError::Denied(_))
    }
}

/// A checked path relative to the work tree: `/`-separated, no `.`/`..` components; empty for
/// the work tree itself.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(transparent)]
pub struct RelPath(String);

impl RelPath {
    /// The path text (`""` for the root).
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// Whether this is the work tree itself.
    pub fn is_root(&self) -> bool {
        self.0.is_empty()
    }

    /// The parent directory (root for top-level names) and the last component.
    fn split(&self) -> (&str, &str) {
        match self.0.rsplit_once('/') {
            Some((parent, name)) => (parent, name),
            None => ("", &self.0),
        }
    }

    /// `self/name`.
    pub fn join(&self, name: &str) -> RelPath {
        if self.0.is_empty() {
            RelPath(name.to_string())
        } else {
            RelPath(format!("{}/{name}", self.0))
        }
    }

    /// Shown in messages: `.` for the root.
    pub fn display(&self) -> &str {
        if self.0.is_empty() { "." } else { &self.0 }
    }
}

/// The kind of a directory entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum EntryKind {
    /// Regular file.
    File,
    /// Directory.
    Directory,
    /// Symbolic link (never followed when listing).
    Symlink,
    /// FIFO, socket or device.
    Other,
}

impl EntryKind {
    fn of(mode: u32) -> Self {
        match FileType::from_raw_mode(mode) {
            FileType::RegularFile => EntryKind::File,
            FileType::Directory => EntryKind::Directory,
            FileType::Symlink => EntryKind::Symlink,
            _ => EntryKind::Other,
        }
    }
}

/// Metadata of a path (not following a final symbolic link).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Meta {
    /// Kind.
    pub kind: EntryKind,
    /// Size in bytes (for links: the length of the target text).
    pub size: u64,
    /// Permission bits (`0o644`).
    pub mode: u32,
    /// Modification time, seconds since the Unix epoch.
    pub modified: i64,
}

/// One entry of a directory listing.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Entry {
    /// The entry's name.
    pub name: String,
    /// Its kind.
    pub kind: EntryKind,
    /// Its size in bytes.
    pub size: u64,
}

/// A file's content identity: SHA-256 (lowercase hex) and size in bytes. For a symbolic link,
/// the hash and size of its target text.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Content {
    /// SHA-256, hex.
    pub hash: String,
    /// Size in bytes.
    pub size: u64,
}

/// SHA-256 of `bytes` as lowercase hex.
pub fn sha256_hex(bytes: &[u8]) -> String {
    let digest = Sha256::digest(bytes);
    let mut s = String::with_capacity(64);
    for b in digest.iter() {
        s.push_str(&format!("{b:02x}"));
    }
    s
}

/// Confined access to one work tree.
#[derive(Debug)]
pub struct SandboxFs {
    root: OwnedFd,
    root_path: PathBuf,
    deny: GlobSet,
    deny_patterns: Vec<String>,
}

static TMP_COUNTER: AtomicU64 = AtomicU64::new(0);

fn io_err(path: &str) -> impl FnOnce(std::io::Error) -> FsError + '_ {
    move |e| FsError::Io {
        path: path.to_string(),
        message: e.to_string(),
    }
}

/// Refuses a change under an installed-dependency directory (`node_modules`): the spec's
/// deny-list keeps the file tools from changing it; reading it stays allowed.
///
/// # Errors
/// [`FsError::Denied`] naming the directory.
fn may_change(path: &RelPath) -> Result<(), FsError> {
    if path.as_str().split('/').any(|p| p == "node_modules") {
        return Err(FsError::Denied(format!(
            "`{}` is inside `node_modules`, which file tools may read but not change; change dependencies with the package manager in a command step",
            path.display()
        )));
    }
    Ok(())
}

impl SandboxFs {
    /// Opens the work tree at `root` with extra deny globs (matched against relative paths,
    /// such as `secrets/**`).
    ///
    /// # Errors
    /// [`FsError::Io`] when the directory cannot be opened; [`FsError::Denied`] for a glob that
    /// does not parse.
    pub fn open(root: &Path, deny_extra: &[String]) -> Result<Self, FsError> {
        let shown = root.display().to_string();
        let fd = rustix::fs::open(
            root,
            OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .map_err(|e| FsError::Io {
            path: shown.clone(),
            message: e.to_string(),
        })?;
        let mut builder = GlobSetBuilder::new();
        for pattern in deny_extra {
            let glob = Glob::new(pattern).map_err(|e| {
                FsError::Denied(format!("deny pattern `{pattern}` is not a valid glob: {e}"))
            })?;
            builder.add(glob);
        }
        let deny = builder
            .build()
            .map_err(|e| FsError::Denied(e.to_string()))?;
        Ok(Self {
            root: fd,
            root_path: root.to_path_buf(),
            deny,
            deny_patterns: deny_extra.to_vec(),
        })
    }

    /// The work tree's path.
    pub fn root_path(&self) -> &Path {
        &self.root_path
    }

    /// Checks a user-supplied path and returns it normalized. `"."` and `""` name the work
    /// tree itself only when `allow_root` is set.
    ///
    /// # Errors
    /// [`FsError::Denied`] saying which rule refused it.
    pub fn check(&self, input: &str, allow_root: bool) -> Result<RelPath, FsError> {
        let denied = |why: String| Err(FsError::Denied(why));
        if input.contains('\0') {
            return denied("the path contains a NUL byte".into());
        }
        if input.len() > MAX_PATH_BYTES {
            return denied(format!(
                "the path is {} bytes long; the limit is {MAX_PATH_BYTES}",
                input.len()
            ));
        }
        if input.starts_with('/') {
            return denied(format!(
                "`{input}` is absolute; paths are relative to the sandbox root"
            ));
        }
        let mut parts: Vec<&str> = Vec::new();
        for part in input.split('/') {
            match part {
                "" | "." => {}
                ".." => {
                    return denied(format!(
                        "`{input}` contains `..`; paths may not leave the sandbox"
                    ));
                }
                p if p.len() > MAX_NAME_BYTES => {
                    return denied(format!(
                        "a component of the path is {} bytes long; the limit is {MAX_NAME_BYTES}",
                        p.len()
                    ));
                }
                p if p.eq_ignore_ascii_case(".git") => {
                    return denied(format!(
                        "`{input}` is inside `.git`, which tools may not touch"
                    ));
                }
                p if is_git_alias(p.as_bytes()) => {
                    return denied(format!(
                        "`{input}`: git refuses the name `{p}` because Windows or macOS would read it as `.git`; choose another name"
                    ));
                }
                p => parts.push(p),
            }
        }
        let rel = RelPath(parts.join("/"));
        if rel.is_root() && !allow_root {
            return denied("the path is empty; name a file inside the sandbox".into());
        }
        if !rel.is_root() && self.deny.is_match(rel.as_str()) {
            let rule = self
                .deny
                .matches(rel.as_str())
                .first()
                .map(|i| self.deny_patterns[*i].clone())
                .unwrap_or_default();
            return denied(format!(
                "`{}` matches the deny-list pattern `{rule}`",
                rel.0
            ));
        }
        Ok(rel)
    }

    fn map_errno(&self, path: &RelPath, e: Errno, writing: bool) -> FsError {
        let p = path.display().to_string();
        match e {
            Errno::XDEV => FsError::Denied(format!("`{p}` resolves outside the sandbox")),
            Errno::LOOP if writing => FsError::Denied(format!(
                "`{p}` goes through a symbolic link; writes, deletes and moves may not follow links"
            )),
            Errno::LOOP => FsError::Denied(format!("`{p}` has too many symbolic links")),
            Errno::NOENT => FsError::NotFound(p),
            Errno::EXIST => FsError::AlreadyExists(p),
            Errno::ISDIR => FsError::IsADirectory(p),
            Errno::NOTDIR => FsError::NotADirectory(p),
            Errno::NOTEMPTY => FsError::NotEmpty(p),
            Errno::NAMETOOLONG => FsError::Denied(format!("`{p}` is too long")),
            other => FsError::Io {
                path: p,
                message: other.to_string(),
            },
        }
    }

    fn open_beneath(
        &self,
        path: &str,
        flags: OFlags,
        mode: Mode,
        resolve: ResolveFlags,
    ) -> Result<OwnedFd, Errno> {
        let path = if path.is_empty() { "." } else { path };
        loop {
            match rustix::fs::openat2(&self.root, path, flags | OFlags::CLOEXEC, mode, resolve) {
                // openat2 may ask to retry when a rename races with the resolution.
                Err(Errno::AGAIN) | Err(Errno::INTR) => continue,
                other => return other,
            }
        }
    }

    /// Opens the parent directory of `path` for a mutation (no symbolic links on the way).
    fn parent_for_write(&self, path: &RelPath) -> Result<(OwnedFd, String), FsError> {
        let (parent, name) = path.split();
        let fd = self
            .open_beneath(
                parent,
                OFlags::PATH | OFlags::DIRECTORY,
                Mode::empty(),
                WRITE_RESOLVE,
            )
            .map_err(|e| self.map_errno(&RelPath(parent.to_string()), e, true))?;
        Ok((fd, name.to_string()))
    }

    /// Metadata of `path` without following a final symbolic link; `None` if it is missing.
    ///
    /// # Errors
    /// Confinement refusals and I/O errors.
    pub fn meta(&self, path: &RelPath) -> Result<Option<Meta>, FsError> {
        let (parent, name) = path.split();
        let dir = match self.open_beneath(
            parent,
            OFlags::PATH | OFlags::DIRECTORY,
            Mode::empty(),
            READ_RESOLVE,
        ) {
            Ok(fd) => fd,
            Err(Errno::NOENT) => return Ok(None),
            Err(e) => return Err(self.map_errno(path, e, false)),
        };
        let name = if name.is_empty() { "." } else { name };
        match rustix::fs::statat(&dir, name, AtFlags::SYMLINK_NOFOLLOW) {
            Ok(st) => Ok(Some(Meta {
                kind: EntryKind::of(st.st_mode),
                size: st.st_size as u64,
                mode: st.st_mode & 0o7777,
                modified: st.st_mtime,
            })),
            Err(Errno::NOENT) => Ok(None),
            Err(e) => Err(self.map_errno(path, e, false)),
        }
    }

    /// Opens a regular file for reading (symbolic links inside the tree are followed).
    ///
    /// # Errors
    /// [`FsError::NotFound`], [`FsError::IsADirectory`], confinement refusals.
    pub fn open_file(&self, path: &RelPath) -> Result<File, FsError> {
        let fd = self
            .open_beneath(
                path.as_str(),
                OFlags::RDONLY | OFlags::NOCTTY | OFlags::NONBLOCK,
                Mode::empty(),
                READ_RESOLVE,
            )
            .map_err(|e| self.map_errno(path, e, false))?;
        let st = rustix::fs::fstat(&fd).map_err(|e| self.map_errno(path, e, false))?;
        match EntryKind::of(st.st_mode) {
            EntryKind::File => Ok(File::from(fd)),
            EntryKind::Directory => Err(FsError::IsADirectory(path.display().to_string())),
            _ => Err(FsError::Io {
                path: path.display().to_string(),
                message: "not a regular file".into(),
            }),
        }
    }

    /// Reads a whole regular file of at most `limit` bytes.
    ///
    /// # Errors
    /// As [`Self::open_file`], plus [`FsError::TooLarge`].
    pub fn read(&self, path: &RelPath, limit: u64) -> Result<Vec<u8>, FsError> {
        let file = self.open_file(path)?;
        let size = file.metadata().map_err(io_err(path.display()))?.len();
        if size > limit {
            return Err(FsError::TooLarge {
                path: path.display().to_string(),
                size,
                limit,
            });
        }
        let mut bytes = Vec::with_capacity(size as usize);
        file.take(limit.saturating_add(1))
            .read_to_end(&mut bytes)
            .map_err(io_err(path.display()))?;
        if bytes.len() as u64 > limit {
            return Err(FsError::TooLarge {
                path: path.display().to_string(),
                size: bytes.len() as u64,
                limit,
            });
        }
        Ok(bytes)
    }

    /// The content identity of a file or symbolic link (not followed); `None` when missing.
    ///
    /// # Errors
    /// [`FsError::IsADirectory`], confinement refusals, I/O errors.
    pub fn content(&self, path: &RelPath) -> Result<Option<Content>, FsError> {
        let Some(meta) = self.meta(path)? else {
            return Ok(None);
        };
        match meta.kind {
            EntryKind::Directory => Err(FsError::IsADirectory(path.display().to_string())),
            EntryKind::Symlink => {
                let (dir, name) = self.parent_for_write(path)?;
                let target = rustix::fs::readlinkat(&dir, name.as_str(), Vec::new())
                    .map_err(|e| self.map_errno(path, e, false))?;
                let bytes = target.as_bytes();
                Ok(Some(Content {
                    hash: sha256_hex(bytes),
                    size: bytes.len() as u64,
                }))
            }
            _ => {
                let (dir, name) = self.parent_for_write(path)?;
                let fd = rustix::fs::openat(
                    &dir,
                    name.as_str(),
                    OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC,
                    Mode::empty(),
                )
                .map_err(|e| self.map_errno(path, e, false))?;
                Ok(Some(hash_fd(fd, path)?))
            }
        }
    }

    /// Creates `path` and its missing parents; returns the directories created, outermost
    /// first.
    ///
    /// # Errors
    /// [`FsError::NotADirectory`] when a component is a file, confinement refusals.
    pub fn create_dir_all(&self, path: &RelPath) -> Result<Vec<RelPath>, FsError> {
        may_change(path)?;
        let mut created = Vec::new();
        let mut cur = self
            .open_beneath(
                "",
                OFlags::PATH | OFlags::DIRECTORY,
                Mode::empty(),
                WRITE_RESOLVE,
            )
            .map_err(|e| self.map_errno(path, e, true))?;
        let mut so_far = RelPath(String::new());
        for part in path.as_str().split('/').filter(|p| !p.is_empty()) {
            so_far = so_far.join(part);
            match rustix::fs::mkdirat(&cur, part, Mode::from_raw_mode(0o755)) {
                Ok(()) => created.push(so_far.clone()),
                Err(Errno::EXIST) => {}
                Err(e) => return Err(self.map_errno(&so_far, e, true)),
            }
            cur = rustix::fs::openat2(
                &cur,
                part,
                OFlags::PATH | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
                Mode::empty(),
                WRITE_RESOLVE,
            )
            .map_err(|e| match e {
                Errno::NOTDIR | Errno::LOOP => {
                    let link = rustix::fs::statat(&cur, part, AtFlags::SYMLINK_NOFOLLOW)
                        .is_ok_and(|st| EntryKind::of(st.st_mode) == EntryKind::Symlink);
                    if link {
                        self.map_errno(&so_far, Errno::LOOP, true)
                    } else {
                        FsError::NotADirectory(so_far.display().to_string())
                    }
                }
                e => self.map_errno(&so_far, e, true),
            })?;
        }
        Ok(created)
    }

    /// Writes a file atomically (temporary file, then rename), keeping the mode of a file it
    /// replaces. With `create_parents`, missing parent directories are created first and
    /// returned.
    ///
    /// # Errors
    /// [`FsError::IsADirectory`], [`FsError::NotFound`] (missing parent), confinement refusals
    /// (including a final symbolic link), I/O errors.
    pub fn write(
        &self,
        path: &RelPath,
        bytes: &[u8],
        create_parents: bool,
    ) -> Result<Vec<RelPath>, FsError> {
        may_change(path)?;
        if path.is_root() {
            return Err(FsError::IsADirectory(".".into()));
        }
        let (parent, _) = path.split();
        let created = if create_parents && !parent.is_empty() {
            self.create_dir_all(&RelPath(parent.to_string()))?
        } else {
            Vec::new()
        };
        let (dir, name) = self.parent_for_write(path)?;
        let existing = match rustix::fs::statat(&dir, name.as_str(), AtFlags::SYMLINK_NOFOLLOW) {
            Ok(st) => Some(st),
            Err(Errno::NOENT) => None,
            Err(e) => return Err(self.map_errno(path, e, true)),
        };
        let mode = match existing {
            Some(st) => match EntryKind::of(st.st_mode) {
                EntryKind::File => st.st_mode & 0o7777,
                EntryKind::Directory => {
                    return Err(FsError::IsADirectory(path.display().to_string()));
                }
                EntryKind::Symlink => {
                    return Err(FsError::Denied(format!(
                        "`{}` is a symbolic link; write to the file it points to instead",
                        path.display()
                    )));
                }
                EntryKind::Other => {
                    return Err(FsError::Io {
                        path: path.display().to_string(),
                        message: "not a regular file".into(),
                    });
                }
            },
            None => 0o644,
        };
        let tmp = format!(
            ".cleveragents-tmp-{}-{}",
            std::process::id(),
            TMP_COUNTER.fetch_add(1, Ordering::Relaxed)
        );
        let fd = rustix::fs::openat(
            &dir,
            tmp.as_str(),
            OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::from_raw_mode(0o600),
        )
        .map_err(|e| self.map_errno(path, e, true))?;
        let result = (|| {
            rustix::fs::fchmod(&fd, Mode::from_raw_mode(mode))
                .map_err(|e| self.map_errno(path, e, true))?;
            let mut file = File::from(fd);
            file.write_all(bytes).map_err(io_err(path.display()))?;
            file.flush().map_err(io_err(path.display()))?;
            rustix::fs::renameat(&dir, tmp.as_str(), &dir, name.as_str())
                .map_err(|e| self.map_errno(path, e, true))
        })();
        if result.is_err() {
            let _ = rustix::fs::unlinkat(&dir, tmp.as_str(), AtFlags::empty());
        }
        result.map(|()| created)
    }

    /// Deletes a file or symbolic link (the link itself).
    ///
    /// # Errors
    /// [`FsError::NotFound`], [`FsError::IsADirectory`], confinement refusals.
    pub fn remove_file(&self, path: &RelPath) -> Result<(), FsError> {
        may_change(path)?;
        let (dir, name) = self.parent_for_write(path)?;
        let st = rustix::fs::statat(&dir, name.as_str(), AtFlags::SYMLINK_NOFOLLOW)
            .map_err(|e| self.map_errno(path, e, true))?;
        if EntryKind::of(st.st_mode) == EntryKind::Directory {
            return Err(FsError::IsADirectory(path.display().to_string()));
        }
        rustix::fs::unlinkat(&dir, name.as_str(), AtFlags::empty())
            .map_err(|e| self.map_errno(path, e, true))
    }

    /// Every file and symbolic link under a directory (not following links), with content
    /// identities, sorted by path.
    ///
    /// # Errors
    /// [`FsError::NotADirectory`], confinement refusals, I/O errors.
    pub fn files_under(&self, path: &RelPath) -> Result<Vec<(RelPath, Content)>, FsError> {
        let fd = self.open_dir_for_write(path)?;
        let mut out = Vec::new();
        self.collect(&fd, path, &mut out)?;
        out.sort_by(|a, b| a.0.cmp(&b.0));
        Ok(out)
    }

    fn open_dir_for_write(&self, path: &RelPath) -> Result<OwnedFd, FsError> {
        self.open_beneath(
            path.as_str(),
            OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW,
            Mode::empty(),
            WRITE_RESOLVE,
        )
        .map_err(|e| match e {
            Errno::NOTDIR | Errno::LOOP => {
                if matches!(self.meta(path), Ok(Some(m)) if m.kind == EntryKind::Symlink) {
                    FsError::Denied(format!(
                        "`{}` is a symbolic link; delete the link with delete_file",
                        path.display()
                    ))
                } else if e == Errno::LOOP {
                    self.map_errno(path, e, true)
                } else {
                    FsError::NotADirectory(path.display().to_string())
                }
            }
            e => self.map_errno(path, e, true),
        })
    }

    fn names(&self, dir: &OwnedFd, path: &RelPath) -> Result<Vec<String>, FsError> {
        let mut reader =
            rustix::fs::Dir::read_from(dir).map_err(|e| self.map_errno(path, e, false))?;
        let mut names = Vec::new();
        while let Some(entry) = reader.read() {
            let entry = entry.map_err(|e| self.map_errno(path, e, false))?;
            let name = entry.file_name().to_bytes();
            if name == b"." || name == b".." {
                continue;
            }
            match std::str::from_utf8(name) {
                Ok(n) => names.push(n.to_string()),
                Err(_) => {
                    return Err(FsError::Io {
                        path: path.display().to_string(),
                        message: "holds a file name that is not UTF-8".into(),
                    });
                }
            }
        }
        names.sort();
        Ok(names)
    }

    fn collect(
        &self,
        dir: &OwnedFd,
        path: &RelPath,
        out: &mut Vec<(RelPath, Content)>,
    ) -> Result<(), FsError> {
        for name in self.names(dir, path)? {
            let child = path.join(&name);
            let st = rustix::fs::statat(dir, name.as_str(), AtFlags::SYMLINK_NOFOLLOW)
                .map_err(|e| self.map_errno(&child, e, false))?;
            match EntryKind::of(st.st_mode) {
                EntryKind::Directory => {
                    let sub = rustix::fs::openat(
                        dir,
                        name.as_str(),
                        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
                        Mode::empty(),
                    )
                    .map_err(|e| self.map_errno(&child, e, true))?;
                    self.collect(&sub, &child, out)?;
                }
                EntryKind::Symlink => {
                    let target = rustix::fs::readlinkat(dir, name.as_str(), Vec::new())
                        .map_err(|e| self.map_errno(&child, e, false))?;
                    let bytes = target.as_bytes();
                    out.push((
                        child,
                        Content {
                            hash: sha256_hex(bytes),
                            size: bytes.len() as u64,
                        },
                    ));
                }
                EntryKind::File => {
                    let fd = rustix::fs::openat(
                        dir,
                        name.as_str(),
                        OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC,
                        Mode::empty(),
                    )
                    .map_err(|e| self.map_errno(&child, e, false))?;
                    out.push((child.clone(), hash_fd(fd, &child)?));
                }
                EntryKind::Other => {}
            }
        }
        Ok(())
    }

    /// Deletes a directory; with `recursive`, its contents first (never following links).
    ///
    /// # Errors
    /// [`FsError::NotEmpty`] without `recursive`, [`FsError::NotADirectory`], confinement
    /// refusals (the work tree itself cannot be deleted).
    pub fn remove_dir(&self, path: &RelPath, recursive: bool) -> Result<(), FsError> {
        may_change(path)?;
        if path.is_root() {
            return Err(FsError::Denied(
                "the sandbox root itself cannot be deleted".into(),
            ));
        }
        let fd = self.open_dir_for_write(path)?;
        if recursive {
            self.clear(&fd, path)?;
        }
        drop(fd);
        let (dir, name) = self.parent_for_write(path)?;
        rustix::fs::unlinkat(&dir, name.as_str(), AtFlags::REMOVEDIR)
            .map_err(|e| self.map_errno(path, e, true))
    }

    fn clear(&self, dir: &OwnedFd, path: &RelPath) -> Result<(), FsError> {
        for name in self.names(dir, path)? {
            let child = path.join(&name);
            let st = rustix::fs::statat(dir, name.as_str(), AtFlags::SYMLINK_NOFOLLOW)
                .map_err(|e| self.map_errno(&child, e, true))?;
            if EntryKind::of(st.st_mode) == EntryKind::Directory {
                let sub = rustix::fs::openat(
                    dir,
                    name.as_str(),
                    OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
                    Mode::empty(),
                )
                .map_err(|e| self.map_errno(&child, e, true))?;
                self.clear(&sub, &child)?;
                rustix::fs::unlinkat(dir, name.as_str(), AtFlags::REMOVEDIR)
                    .map_err(|e| self.map_errno(&child, e, true))?;
            } else {
                rustix::fs::unlinkat(dir, name.as_str(), AtFlags::empty())
                    .map_err(|e| self.map_errno(&child, e, true))?;
            }
        }
        Ok(())
    }

    /// Moves a file, link or directory. Without `overwrite`, an existing destination is
    /// refused atomically (`RENAME_NOREPLACE`).
    ///
    /// # Errors
    /// [`FsError::NotFound`], [`FsError::AlreadyExists`], confinement refusals.
    pub fn rename(&self, from: &RelPath, to: &RelPath, overwrite: bool) -> Result<(), FsError> {
        may_change(from)?;
        may_change(to)?;
        if from.is_root() || to.is_root() {
            return Err(FsError::Denied("the sandbox root cannot be moved".into()));
        }
        let (from_dir, from_name) = self.parent_for_write(from)?;
        let (to_dir, to_name) = self.parent_for_write(to)?;
        let flags = if overwrite {
            RenameFlags::empty()
        } else {
            RenameFlags::NOREPLACE
        };
        rustix::fs::renameat_with(
            &from_dir,
            from_name.as_str(),
            &to_dir,
            to_name.as_str(),
            flags,
        )
        .map_err(|e| match e {
            Errno::NOENT => FsError::NotFound(from.display().to_string()),
            Errno::EXIST => FsError::AlreadyExists(to.display().to_string()),
            Errno::INVAL => {
                FsError::Denied(format!("cannot move `{}` into itself", from.display()))
            }
            // Both ends are beneath the root already: a directory of a shared checkout, which
            // an unprivileged overlay cannot record as moved (docs/sandbox.md).
            Errno::XDEV => FsError::Denied(format!(
                "`{}` is a directory of the checkout this sandbox shares, which cannot be moved \
                 here; copy its files to `{}` and delete it instead",
                from.display(),
                to.display()
            )),
            e => self.map_errno(to, e, true),
        })
    }

    /// Lists a directory (symbolic links inside the tree are followed to reach it; entries
    /// are not followed), sorted by name.
    ///
    /// # Errors
    /// [`FsError::NotFound`], [`FsError::NotADirectory`], confinement refusals.
    pub fn list(&self, path: &RelPath) -> Result<Vec<Entry>, FsError> {
        let dir = self
            .open_beneath(
                path.as_str(),
                OFlags::RDONLY | OFlags::DIRECTORY,
                Mode::empty(),
                READ_RESOLVE,
            )
            .map_err(|e| self.map_errno(path, e, false))?;
        let mut out = Vec::new();
        for name in self.names(&dir, path)? {
            let st = match rustix::fs::statat(&dir, name.as_str(), AtFlags::SYMLINK_NOFOLLOW) {
                Ok(st) => st,
                Err(Errno::NOENT) => continue,
                Err(e) => return Err(self.map_errno(&path.join(&name), e, false)),
            };
            out.push(Entry {
                name,
                kind: EntryKind::of(st.st_mode),
                size: st.st_size as u64,
            });
        }
        Ok(out)
    }

    /// The target text of a symbolic link.
    ///
    /// # Errors
    /// Confinement refusals, [`FsError::NotFound`], I/O errors.
    pub fn read_link(&self, path: &RelPath) -> Result<String, FsError> {
        let (dir, name) = self.parent_for_write(path)?;
        let target = rustix::fs::readlinkat(&dir, name.as_str(), Vec::new())
            .map_err(|e| self.map_errno(path, e, false))?;
        Ok(target.to_string_lossy().into_owned())
    }
}

fn hash_fd(fd: OwnedFd, path: &RelPath) -> Result<Content, FsError> {
    let mut file = File::from(fd);
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 64 * 1024];
    let mut size = 0u64;
    loop {
        let n = file.read(&mut buf).map_err(io_err(path.display()))?;
        if n == 0 {
            break;
        }
        size += n as u64;
        hasher.update(&buf[..n]);
    }
    let digest = hasher.finalize();
    let mut hash = String::with_capacity(64);
    for b in digest.iter() {
        hash.push_str(&format!("{b:02x}"));
    }
    Ok(Content { hash, size })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;
    use std::os::unix::fs::symlink;

    fn setup() -> (tempfile::TempDir, PathBuf, SandboxFs) {
        let dir = tempfile::tempdir().unwrap();
        let work = dir.path().join("work");
        fs::create_dir_all(work.join("src")).unwrap();
        fs::write(work.join("src/a.txt"), "a\n").unwrap();
        fs::write(dir.path().join("outside.txt"), "secret\n").unwrap();
        let sfs = SandboxFs::open(&work, &["secrets/**".to_string()]).unwrap();
        (dir, work, sfs)
    }

    #[test]
    fn lexical_rules_refuse_escapes_before_touching_anything() {
        let (_d, _w, sfs) = setup();
        for bad in [
            "../outside.txt",
            "src/../../outside.txt",
            "/etc/passwd",
            ".git/config",
            "src/.GIT/x",
            ".git.",
            "src/.git /x",
            "GIT~1/config",
            "git~1",
            ".git::$INDEX_ALLOCATION",
            ".g\u{200c}it",
            "a\\.git",
            "a\0b",
            "secrets/key.pem",
            "",
        ] {
            let err = sfs.check(bad, false).unwrap_err();
            assert!(err.is_denied(), "{bad:?}: {err}");
        }
        let long = "a/".repeat(2100);
        assert!(sfs.check(&long, false).unwrap_err().is_denied());
        let long_name = "x".repeat(300);
        assert!(sfs.check(&long_name, false).unwrap_err().is_denied());
        assert_eq!(
            sfs.check("./src//a.txt", false).unwrap().as_str(),
            "src/a.txt"
        );
        assert!(sfs.check(".", true).unwrap().is_root());
        for fine in [
            ".github/x",
            ".gitignore",
            "git~2",
            "a.git",
            "git",
            ".git-blame",
        ] {
            assert!(sfs.check(fine, false).is_ok(), "{fine}");
        }
    }

    #[test]
    fn symlinks_out_of_the_tree_are_refused_by_the_kernel() {
        let (dir, work, sfs) = setup();
        symlink(dir.path().join("outside.txt"), work.join("out")).unwrap();
        symlink("../outside.txt", work.join("rel-out")).unwrap();
        symlink(dir.path(), work.join("outdir")).unwrap();
        symlink("src/a.txt", work.join("in")).unwrap();
        let p = |s: &str| sfs.check(s, false).unwrap();
        assert!(sfs.read(&p("out"), 1024).unwrap_err().is_denied());
        assert!(sfs.read(&p("rel-out"), 1024).unwrap_err().is_denied());
        assert!(
            sfs.read(&p("outdir/outside.txt"), 1024)
                .unwrap_err()
                .is_denied()
        );
        assert!(sfs.write(&p("out"), b"x", false).unwrap_err().is_denied());
        assert!(
            sfs.write(&p("outdir/new.txt"), b"x", false)
                .unwrap_err()
                .is_denied()
        );
        assert!(
            sfs.write(&p("outdir/sub/new.txt"), b"x", true)
                .unwrap_err()
                .is_denied()
        );
        assert!(sfs.list(&p("outdir")).unwrap_err().is_denied());
        assert_eq!(
            sfs.read(&p("in"), 1024).unwrap(),
            b"a\n",
            "links inside are read"
        );
        assert!(sfs.write(&p("in"), b"x", false).unwrap_err().is_denied());
        assert_eq!(
            fs::read_to_string(dir.path().join("outside.txt")).unwrap(),
            "secret\n"
        );
        assert!(!dir.path().join("new.txt").exists());
        assert!(!dir.path().join("sub").exists());
        // Deleting the link removes the link, never its target.
        sfs.remove_file(&p("out")).unwrap();
        assert!(dir.path().join("outside.txt").exists());
    }

    #[test]
    fn writes_are_atomic_and_keep_modes() {
        use std::os::unix::fs::PermissionsExt;
        let (_d, work, sfs) = setup();
        let path = sfs.check("src/a.txt", false).unwrap();
        fs::set_permissions(work.join("src/a.txt"), fs::Permissions::from_mode(0o755)).unwrap();
        sfs.write(&path, b"new\n", false).unwrap();
        assert_eq!(fs::read(work.join("src/a.txt")).unwrap(), b"new\n");
        assert_eq!(
            fs::metadata(work.join("src/a.txt"))
                .unwrap()
                .permissions()
                .mode()
                & 0o777,
            0o755
        );
        let created = sfs
            .write(&sfs.check("x/y/z.txt", false).unwrap(), b"z", true)
            .unwrap();
        assert_eq!(
            created.iter().map(|p| p.as_str()).collect::<Vec<_>>(),
            ["x", "x/y"]
        );
        let leftovers: Vec<_> = fs::read_dir(work.join("src"))
            .unwrap()
            .filter_map(|e| e.ok())
            .filter(|e| e.file_name().to_string_lossy().contains("tmp"))
            .collect();
        assert!(leftovers.is_empty());
    }

    #[test]
    fn recursive_delete_never_follows_links() {
        let (dir, work, sfs) = setup();
        fs::create_dir_all(work.join("d/e")).unwrap();
        fs::write(work.join("d/e/f"), "f").unwrap();
        symlink(dir.path(), work.join("d/link")).unwrap();
        let d = sfs.check("d", false).unwrap();
        let files = sfs.files_under(&d).unwrap();
        assert_eq!(
            files.iter().map(|f| f.0.as_str()).collect::<Vec<_>>(),
            ["d/e/f", "d/link"]
        );
        assert!(matches!(
            sfs.remove_dir(&d, false),
            Err(FsError::NotEmpty(_))
        ));
        sfs.remove_dir(&d, true).unwrap();
        assert!(!work.join("d").exists());
        assert!(dir.path().join("outside.txt").exists());
    }
}
