//! A sandbox's index file read for a snapshot that only compares: the entries' stat data and
//! the cached tree of the whole index, as git's own reader takes them (format:
//! `gitformat-index(5)`), without what libgit2's reader adds on every open: the collision-
//! detecting SHA-1 of the whole file (git verifies that checksum only in `fsck`) and a hash
//! map of every path. Only the plain format is answered (version 2, no stage but 0, no split
//! or sparse index); anything else is `None`, and the caller reads the index through libgit2.

use super::Tracked;

/// What a snapshot needs of the index.
pub(super) struct IndexFile {
    /// The tracked files and links, in index order.
    pub tracked: Vec<Tracked>,
    /// The paths of submodule gitlinks.
    pub gitlinks: std::collections::HashSet<Vec<u8>>,
    /// The tree of the whole index when its cached tree (the `TREE` extension) is valid and
    /// covers every entry: what writing the index as a tree gives.
    pub tree: Option<git2::Oid>,
}

/// Size of an entry before its path (version 2, SHA-1).
const ENTRY_HEAD: usize = 62;
/// Size of an object id (SHA-1).
const OID: usize = 20;

/// Parses an index file's bytes; `None` when it is not an index this reader answers.
pub(super) fn parse(bytes: &[u8]) -> Option<IndexFile> {
    let be32 = |at: usize| -> Option<u32> {
        Some(u32::from_be_bytes(bytes.get(at..at + 4)?.try_into().ok()?))
    };
    if bytes.get(..4)? != b"DIRC" || be32(4)? != 2 || bytes.len() < 12 + OID {
        return None;
    }
    let count = be32(8)? as usize;
    let end = bytes.len() - OID;
    let mut tracked = Vec::with_capacity(count);
    let mut gitlinks = std::collections::HashSet::new();
    let mut at = 12;
    for _ in 0..count {
        let head = bytes.get(at..at + ENTRY_HEAD)?;
        let field = |i: usize| u32::from_be_bytes([head[i], head[i + 1], head[i + 2], head[i + 3]]);
        let flags = u16::from_be_bytes([head[60], head[61]]);
        // Extended flags exist only from version 3; a stage other than 0 is a conflict,
        // which libgit2 refuses to write as a tree.
        if flags & 0x4000 != 0 || flags & 0x3000 != 0 {
            return None;
        }
        let name_at = at + ENTRY_HEAD;
        let len = match usize::from(flags & 0x0fff) {
            0x0fff => bytes.get(name_at..end)?.iter().position(|b| *b == 0)?,
            n => n,
        };
        let path = bytes.get(name_at..name_at + len)?;
        if bytes.get(name_at + len) != Some(&0) {
            return None;
        }
        let mode = field(24);
        if mode == 0o160000 {
            gitlinks.insert(path.to_vec());
        } else {
            tracked.push(Tracked {
                path: std::path::PathBuf::from(<std::ffi::OsStr as std::os::unix::ffi::OsStrExt>::from_bytes(path)),
                mode,
                size: field(36),
                mtime: (field(8) as i32, field(12)),
                ctime: (field(0) as i32, field(4)),
                ino: field(20),
            });
        }
        // Each entry is padded with 1 to 8 NUL bytes to a multiple of 8.
        at += (ENTRY_HEAD + len + 8) & !7;
        if at > end {
            return None;
        }
    }
    let entries = tracked.len() + gitlinks.len();
    let mut tree = None;
    while at < end {
        let signature = bytes.get(at..at + 4)?;
        let size = be32(at + 4)? as usize;
        let data = bytes.get(at + 8..(at + 8).checked_add(size)?)?;
        match signature {
            b"TREE" => tree = root_tree(data, entries),
            // A split or sparse index lists only part of the entries here.
            b"link" | b"sdir" => return None,
            // Any other extension a reader must understand.
            [b'a'..=b'z', ..] => return None,
            _ => {}
        }
        at += 8 + size;
    }
    (at == end).then_some(IndexFile {
        tracked,
        gitlinks,
        tree,
    })
}

/// The root of a `TREE` extension: `"" NUL entry_count SP subtrees LF oid`, valid when its
/// entry count is not `-1` and counts every entry of the index.
fn root_tree(data: &[u8], entries: usize) -> Option<git2::Oid> {
    let rest = data.strip_prefix(b"\0")?;
    let line_end = rest.iter().position(|b| *b == b'\n')?;
    let line = std::str::from_utf8(&rest[..line_end]).ok()?;
    let (count, _subtrees) = line.split_once(' ')?;
    let count: i64 = count.parse().ok()?;
    if count < 0 || usize::try_from(count).ok()? != entries {
        return None;
    }
    git2::Oid::from_bytes(rest.get(line_end + 1..line_end + 1 + OID)?).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A repository whose index holds `files` (path, contents), written by libgit2 with its
    /// tree cached, as a snapshot leaves it.
    fn repo_with(files: &[(&str, &str)]) -> (tempfile::TempDir, git2::Repository) {
        let dir = tempfile::tempdir().unwrap();
        let repo = git2::Repository::init(dir.path()).unwrap();
        for (path, text) in files {
            let abs = dir.path().join(path);
            std::fs::create_dir_all(abs.parent().unwrap()).unwrap();
            std::fs::write(abs, text).unwrap();
        }
        {
            let mut index = repo.index().unwrap();
            for (path, _) in files {
                index.add_path(std::path::Path::new(path)).unwrap();
            }
            index.write_tree().unwrap();
            index.write().unwrap();
        }
        (dir, repo)
    }

    #[test]
    fn an_index_written_by_libgit2_reads_as_libgit2_reads_it_with_its_tree() {
        let (_dir, repo) = repo_with(&[
            ("a.txt", "a\n"),
            ("d/b.rs", "b\n"),
            ("d/e/c", "c\n"),
            ("ab", "x"),
        ]);
        {
            // A path longer than the 12 bits of an entry's name length (no file system
            // holds one: the entry is made from a buffer).
            let mut index = repo.index().unwrap();
            let long = format!("d/{}/x.txt", vec!["n".repeat(200); 25].join("/"));
            let entry = git2::IndexEntry {
                ctime: git2::IndexTime::new(0, 0),
                mtime: git2::IndexTime::new(0, 0),
                dev: 0,
                ino: 0,
                mode: 0o100644,
                uid: 0,
                gid: 0,
                file_size: 5,
                id: git2::Oid::ZERO_SHA1,
                flags: 0,
                flags_extended: 0,
                path: long.into_bytes(),
            };
            index.add_frombuffer(&entry, b"long\n").unwrap();
            index.write_tree().unwrap();
            index.write().unwrap();
        }
        let bytes = std::fs::read(repo.path().join("index")).unwrap();
        let parsed = parse(&bytes).expect("a plain index is answered");
        let mut index = repo.index().unwrap();
        let theirs: Vec<_> = index.iter().collect();
        assert_eq!(parsed.tracked.len(), 5);
        assert!(theirs.iter().any(|e| e.path.len() > 0xfff));
        assert_eq!(parsed.tracked.len(), theirs.len());
        for (ours, e) in parsed.tracked.iter().zip(&theirs) {
            use std::os::unix::ffi::OsStrExt;
            assert_eq!(ours.path.as_os_str().as_bytes(), e.path.as_slice());
            assert_eq!(ours.mode, e.mode);
            assert_eq!(ours.size, e.file_size);
            assert_eq!(ours.mtime, (e.mtime.seconds(), e.mtime.nanoseconds()));
            assert_eq!(ours.ctime, (e.ctime.seconds(), e.ctime.nanoseconds()));
            assert_eq!(ours.ino, e.ino);
        }
        assert_eq!(parsed.tree, Some(index.write_tree().unwrap()));
    }

    #[test]
    fn an_index_without_a_valid_cached_tree_gives_no_tree() {
        let (dir, repo) = repo_with(&[("a.txt", "a\n"), ("d/b.rs", "b\n")]);
        std::fs::write(dir.path().join("d/new"), "new\n").unwrap();
        let mut index = repo.index().unwrap();
        // Adding a path invalidates the cached trees above it.
        index.add_path(std::path::Path::new("d/new")).unwrap();
        index.write().unwrap();
        let parsed = parse(&std::fs::read(repo.path().join("index")).unwrap()).unwrap();
        assert_eq!(parsed.tracked.len(), 3);
        assert_eq!(parsed.tree, None);
    }

    #[test]
    fn a_conflicted_a_newer_or_a_damaged_index_is_left_to_libgit2() {
        let (_dir, repo) = repo_with(&[("a.txt", "a\n")]);
        let bytes = std::fs::read(repo.path().join("index")).unwrap();
        assert!(parse(&bytes).is_some());
        // Stage 2 in the first entry's flags.
        let mut conflicted = bytes.clone();
        conflicted[12 + 60] |= 0x20;
        assert!(parse(&conflicted).is_none());
        let mut v3 = bytes.clone();
        v3[7] = 3;
        assert!(parse(&v3).is_none());
        assert!(parse(&bytes[..bytes.len() - 30]).is_none());
        assert!(parse(b"DIRC").is_none());
        assert!(parse(b"").is_none());
    }
}
