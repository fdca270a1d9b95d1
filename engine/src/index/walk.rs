//! Which files a resource's index holds (spec section 24 "file-path indexing", section 14
//! ignore patterns): a walk with `.gitignore` semantics (`ignore` crate), never following
//! links and never entering `.git`; generated and vendored paths and files over
//! `max-file-size` are skipped and counted (binary files are counted when read).

use std::path::Path;
use std::time::UNIX_EPOCH;

use globset::{Glob, GlobSet, GlobSetBuilder};
use serde::{Deserialize, Serialize};

pub use crate::domain::index::{DEFAULT_GENERATED, DEFAULT_MAX_FILE_SIZE};

/// What the index skips.
#[derive(Debug, Clone)]
pub struct Policy {
    /// Largest file indexed, in bytes.
    pub max_file_size: u64,
    /// Generated or vendored path globs.
    pub generated: Vec<String>,
    matcher: GlobSet,
}

impl Default for Policy {
    fn default() -> Self {
        Self::new(
            DEFAULT_MAX_FILE_SIZE,
            DEFAULT_GENERATED.iter().map(|s| (*s).to_string()).collect(),
        )
        .unwrap_or_else(|_| Self {
            max_file_size: DEFAULT_MAX_FILE_SIZE,
            generated: Vec::new(),
            matcher: GlobSet::empty(),
        })
    }
}

impl Policy {
    /// A policy with these limits.
    ///
    /// # Errors
    /// A message naming the glob that does not parse.
    pub fn new(max_file_size: u64, generated: Vec<String>) -> Result<Self, String> {
        let mut b = GlobSetBuilder::new();
        for g in &generated {
            b.add(Glob::new(g).map_err(|e| format!("generated path glob `{g}`: {e}"))?);
        }
        let matcher = b.build().map_err(|e| e.to_string())?;
        Ok(Self {
            max_file_size,
            generated,
            matcher,
        })
    }

    /// Whether `rel` is a generated or vendored path.
    pub fn is_generated(&self, rel: &str) -> bool {
        self.matcher.is_match(rel)
    }
}

/// Files skipped, by reason.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema,
)]
pub struct Skipped {
    /// Binary contents (a NUL byte, or not UTF-8).
    pub binary: u64,
    /// Over `max-file-size`.
    pub too_large: u64,
    /// Generated or vendored paths.
    pub generated: u64,
}

impl Skipped {
    /// All skipped files.
    pub fn total(&self) -> u64 {
        self.binary + self.too_large + self.generated
    }
}

/// A file the walk found: path relative to the root (with `/`), size and modification time.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Found {
    /// Relative path.
    pub path: String,
    /// Size in bytes.
    pub size: u64,
    /// Modification time in nanoseconds since the epoch.
    pub mtime_ns: u128,
}

/// Size and mtime of a file, or `None` when it is not a regular file.
pub fn stat(path: &Path) -> Option<(u64, u128)> {
    let m = std::fs::symlink_metadata(path).ok()?;
    if !m.is_file() {
        return None;
    }
    let mtime = m
        .modified()
        .ok()
        .and_then(|t| t.duration_since(UNIX_EPOCH).ok())
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    Some((m.len(), mtime))
}

/// Whether a path relative to the root is kept by the policy (size checked by the caller).
pub fn keeps(policy: &Policy, rel: &str, skipped: &mut Skipped) -> bool {
    if policy.is_generated(rel) {
        skipped.generated += 1;
        return false;
    }
    true
}

/// Every indexable file under `root`, sorted by path, and what was skipped by path or size.
pub fn walk(root: &Path, policy: &Policy) -> (Vec<Found>, Skipped) {
    let mut skipped = Skipped::default();
    let walker = ignore::WalkBuilder::new(root)
        .hidden(false)
        .parents(false)
        .git_global(false)
        .git_exclude(true)
        .require_git(false)
        .follow_links(false)
        .filter_entry(|e| e.file_name() != ".git")
        .build();
    let mut out = Vec::new();
    for entry in walker.flatten() {
        if !entry.file_type().is_some_and(|t| t.is_file()) {
            continue;
        }
        let Ok(rel) = entry.path().strip_prefix(root) else {
            continue;
        };
        let Some(rel) = rel.to_str().map(|r| r.replace('\\', "/")) else {
            continue;
        };
        if !keeps(policy, &rel, &mut skipped) {
            continue;
        }
        let Some((size, mtime_ns)) = entry.metadata().ok().map(|m| {
            let t = m
                .modified()
                .ok()
                .and_then(|t| t.duration_since(UNIX_EPOCH).ok())
                .map(|d| d.as_nanos())
                .unwrap_or(0);
            (m.len(), t)
        }) else {
            continue;
        };
        if size > policy.max_file_size {
            skipped.too_large += 1;
            continue;
        }
        out.push(Found {
            path: rel,
            size,
            mtime_ns,
        });
    }
    out.sort_by(|a, b| a.path.cmp(&b.path));
    (out, skipped)
}

/// Whether `bytes` look binary: a NUL byte in the first 8 KiB, or not UTF-8.
pub fn is_binary(bytes: &[u8]) -> bool {
    bytes[..bytes.len().min(8192)].contains(&0) || std::str::from_utf8(bytes).is_err()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gitignored_generated_and_large_files_are_left_out_and_counted() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        std::fs::write(root.join(".gitignore"), "secret.txt\n").unwrap();
        std::fs::write(root.join("secret.txt"), "x").unwrap();
        std::fs::create_dir_all(root.join("node_modules/a")).unwrap();
        std::fs::write(root.join("node_modules/a/i.js"), "x").unwrap();
        std::fs::write(root.join("big.txt"), "x".repeat(100)).unwrap();
        std::fs::write(root.join("main.rs"), "fn main() {}").unwrap();
        let policy = Policy::new(50, vec!["**/node_modules/**".into()]).unwrap();
        let (found, skipped) = walk(root, &policy);
        let paths: Vec<_> = found.iter().map(|f| f.path.as_str()).collect();
        assert_eq!(paths, [".gitignore", "main.rs"]);
        assert_eq!(skipped.generated, 1);
        assert_eq!(skipped.too_large, 1);
        assert!(is_binary(b"a\0b"));
        assert!(!is_binary("fn main() {}".as_bytes()));
    }
}
