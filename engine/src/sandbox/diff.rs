//! Diffs of a sandbox against its base (spec section 11 "reviewable diff").
//!
//! libgit2 finds which files differ between two trees (with rename detection) and computes
//! the text hunks with git's own diff code, so the line counts are `git diff --stat`'s. A file
//! is binary when either side has a NUL byte in its first 8000 bytes (git's rule), is not
//! UTF-8, or is larger than [`MAX_TEXT_BYTES`]; binary files get sizes but no hunks. The structured form serializes as json/yaml for scripts and the TUI;
//! [`unified`] renders git-style text for the human formats.

use std::fmt::Write as _;

use git2::{Delta, DiffFindOptions, DiffOptions, Oid, Repository};
use serde::Serialize;

use super::{Sandbox, SandboxError};

mod tree_walk;

/// Largest side (in bytes) that is diffed as text.
pub const MAX_TEXT_BYTES: usize = 8 * 1024 * 1024;
/// Context lines around each hunk.
pub const CONTEXT_LINES: usize = 3;

/// How a file changed.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, serde::Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum FileStatus {
    /// New file.
    Added,
    /// Content or mode changed.
    #[default]
    Modified,
    /// Removed.
    Deleted,
    /// Moved (possibly with edits).
    Renamed,
    /// Kind changed (file, symlink, submodule).
    TypeChanged,
}

impl FileStatus {
    /// One letter as in `git status --short`: A, M, D, R, T.
    pub fn letter(self) -> &'static str {
        match self {
            FileStatus::Added => "A",
            FileStatus::Modified => "M",
            FileStatus::Deleted => "D",
            FileStatus::Renamed => "R",
            FileStatus::TypeChanged => "T",
        }
    }
}

/// Kind of a hunk line.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Serialize, serde::Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum LineKind {
    /// Unchanged.
    Context,
    /// Added in the new version.
    Added,
    /// Removed from the old version.
    Removed,
}

/// One line of a hunk.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, serde::Deserialize, schemars::JsonSchema)]
pub struct HunkLine {
    /// Context, added or removed.
    pub kind: LineKind,
    /// 1-based line number in the old file (none for added lines).
    pub old_line: Option<u32>,
    /// 1-based line number in the new file (none for removed lines).
    pub new_line: Option<u32>,
    /// The text without its line ending.
    pub text: String,
    /// Whether the line has no newline at the end of the file.
    pub no_newline: bool,
}

/// A hunk with git's ranges: `start` is 1-based, or the line before an empty range.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, serde::Deserialize, schemars::JsonSchema)]
pub struct Hunk {
    /// First old line.
    pub old_start: u32,
    /// Old line count.
    pub old_lines: u32,
    /// First new line.
    pub new_start: u32,
    /// New line count.
    pub new_lines: u32,
    /// The lines.
    pub lines: Vec<HunkLine>,
    /// The decisions whose Execute steps produced lines of this hunk, in execution order
    /// (filled by [`super::attribution::attribute`]; empty from [`text_hunks`] alone).
    pub decision_ids: Vec<String>,
    /// The review item id of this hunk (`docs/review.md`, [`crate::review::hunk_id`]), when
    /// assigned with [`crate::review::assign_ids`]; not serialized while unassigned.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
}

/// One changed file.
#[derive(
    Debug, Clone, Default, PartialEq, Eq, Serialize, serde::Deserialize, schemars::JsonSchema,
)]
pub struct FileDiff {
    /// Path in the new tree (the old path for deletions), `/`-separated.
    pub path: String,
    /// Path before a rename.
    pub old_path: Option<String>,
    /// How it changed.
    pub status: FileStatus,
    /// Whether it is diffed as binary (no hunks).
    pub binary: bool,
    /// Old size in bytes.
    pub old_size: Option<u64>,
    /// New size in bytes.
    pub new_size: Option<u64>,
    /// Old mode, octal (`100644`).
    pub old_mode: Option<String>,
    /// New mode, octal.
    pub new_mode: Option<String>,
    /// Added lines.
    pub additions: u64,
    /// Removed lines.
    pub deletions: u64,
    /// The hunks (empty for binary files, pure renames and mode changes).
    pub hunks: Vec<Hunk>,
    /// The review item id of the whole file when it has no hunks ([`crate::review::file_item_id`]),
    /// when assigned with [`crate::review::assign_ids`]; not serialized while unassigned.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub item_id: Option<String>,
    /// The lines this change adds that hold the value of a secret of this process's
    /// environment ([`crate::redact`]): shown `[redacted]`, written as they are, so Apply and
    /// export refuse them unless allowed (`docs/sandbox.md`). Not serialized when empty.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub secrets: Vec<SecretLine>,
}

/// A line of a change that holds a secret's value.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, serde::Deserialize, schemars::JsonSchema)]
pub struct SecretLine {
    /// The 1-based line of the new file (`None` in a binary file).
    pub line: Option<u32>,
    /// The environment variable whose value it holds.
    pub variable: String,
}

/// The added lines of `hunks` (or, for a binary file, its `new` bytes) that hold one of
/// `secrets` (`(variable, value)`, [`crate::redact::secrets`]).
fn secret_lines(
    hunks: &[Hunk],
    new: Option<&[u8]>,
    secrets: &[(String, String)],
) -> Vec<SecretLine> {
    if secrets.is_empty() {
        return Vec::new();
    }
    let held = |text: &[u8]| {
        secrets
            .iter()
            .find(|(_, v)| text.windows(v.len()).any(|w| w == v.as_bytes()))
            .map(|(k, _)| k.clone())
    };
    if hunks.is_empty() {
        return new
            .and_then(held)
            .map(|variable| {
                vec![SecretLine {
                    line: None,
                    variable,
                }]
            })
            .unwrap_or_default();
    }
    hunks
        .iter()
        .flat_map(|h| &h.lines)
        .filter(|l| l.kind == LineKind::Added)
        .filter_map(|l| {
            held(l.text.as_bytes()).map(|variable| SecretLine {
                line: l.new_line,
                variable,
            })
        })
        .collect()
}

/// Totals over a diff.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, serde::Deserialize, schemars::JsonSchema,
)]
pub struct DiffStats {
    /// Files changed.
    pub files_changed: u64,
    /// Lines added.
    pub additions: u64,
    /// Lines removed.
    pub deletions: u64,
}

impl std::ops::AddAssign for DiffStats {
    fn add_assign(&mut self, other: DiffStats) {
        self.files_changed += other.files_changed;
        self.additions += other.additions;
        self.deletions += other.deletions;
    }
}

impl DiffStats {
    /// The stats of one file.
    pub fn of(file: &FileDiff) -> DiffStats {
        DiffStats {
            files_changed: 1,
            additions: file.additions,
            deletions: file.deletions,
        }
    }
}

/// Sums the stats of files.
pub fn stats(files: &[FileDiff]) -> DiffStats {
    let mut total = DiffStats::default();
    for f in files {
        total += DiffStats::of(f);
    }
    total
}

/// Options for [`trees`].
#[derive(Debug, Clone, Default)]
pub struct DiffRequest {
    /// Only files at or under this path.
    pub path: Option<String>,
    /// Compute hunks (otherwise only the file list and sizes).
    pub hunks: bool,
}

fn mode(m: git2::FileMode) -> Option<String> {
    let raw = u32::from(m);
    (raw != 0).then(|| format!("{raw:o}"))
}

fn is_binary(bytes: &[u8]) -> bool {
    bytes.len() > MAX_TEXT_BYTES
        || bytes[..bytes.len().min(8000)].contains(&0)
        || std::str::from_utf8(bytes).is_err()
}

/// Diffs two trees of `repo` (either may be absent: an empty tree).
///
/// # Errors
/// [`SandboxError::Git`].
pub fn trees(
    repo: &Repository,
    old: Option<Oid>,
    new: Option<Oid>,
    request: &DiffRequest,
) -> Result<Vec<FileDiff>, SandboxError> {
    trees_each(repo, old, new, request, &|file| file)
}

/// As [`trees`], handing each file's diff to `each` as soon as it is computed (on whichever
/// thread computed it) and returning what `each` made of every file, in git's path order. A
/// caller that turns each file into its output at once never holds every file's lines.
///
/// # Errors
/// [`SandboxError::Git`].
pub fn trees_each<T: Send>(
    repo: &Repository,
    old: Option<Oid>,
    new: Option<Oid>,
    request: &DiffRequest,
    each: &(dyn Fn(FileDiff) -> T + Sync),
) -> Result<Vec<T>, SandboxError> {
    // Without a path filter, the plain cases are listed by descending only into subtrees
    // that differ; renames, changes of kind and submodules go through libgit2.
    let fast = match request.path {
        None => tree_walk::changed_files(repo, old, new)
            .map_err(SandboxError::git("comparing trees"))?,
        Some(_) => None,
    };
    let deltas = match fast {
        Some(deltas) => deltas,
        None => libgit2_changes(repo, old, new, request)?,
    };
    // Reading the blobs and diffing their lines is most of the work for a large change, and
    // each file is independent: the files are split in order between threads, each with a
    // handle of its own on the repository (a handle is not shared between threads).
    let threads = super::parallel::threads();
    if threads == 1 || deltas.len() < PARALLEL_FILES {
        return file_diffs(repo, &deltas, request, each);
    }
    let chunk = deltas.len().div_ceil(threads);
    let git_dir = repo.path().to_path_buf();
    std::thread::scope(|scope| {
        let mut parts = deltas.chunks(chunk);
        let first = parts.next().unwrap_or_default();
        let others: Vec<_> = parts
            .map(|part| {
                let git_dir = &git_dir;
                scope.spawn(move || {
                    let own = Repository::open(git_dir)
                        .map_err(SandboxError::git("opening the repository"))?;
                    file_diffs(&own, part, request, each)
                })
            })
            .collect();
        let mut out = file_diffs(repo, first, request, each)?;
        for handle in others {
            out.extend(
                handle
                    .join()
                    .unwrap_or_else(|panic| std::panic::resume_unwind(panic))?,
            );
        }
        Ok(out)
    })
}

/// The changed files as libgit2's tree diff lists them, renames paired.
fn libgit2_changes(
    repo: &Repository,
    old: Option<Oid>,
    new: Option<Oid>,
    request: &DiffRequest,
) -> Result<Vec<Changed>, SandboxError> {
    let find = |oid: Option<Oid>| {
        oid.map(|o| repo.find_tree(o))
            .transpose()
            .map_err(SandboxError::git("reading a tree"))
    };
    let (old_tree, new_tree) = (find(old)?, find(new)?);
    let mut opts = DiffOptions::new();
    opts.ignore_submodules(false).include_typechange(true);
    if let Some(p) = &request.path {
        opts.pathspec(p.trim_end_matches('/'));
    }
    let mut diff = repo
        .diff_tree_to_tree(old_tree.as_ref(), new_tree.as_ref(), Some(&mut opts))
        .map_err(SandboxError::git("comparing trees"))?;
    let mut find_opts = DiffFindOptions::new();
    find_opts.renames(true);
    diff.find_similar(Some(&mut find_opts))
        .map_err(SandboxError::git("detecting renames"))?;
    let deltas = diff
        .deltas()
        .filter_map(|delta| {
            let status = match delta.status() {
                Delta::Added => FileStatus::Added,
                Delta::Deleted => FileStatus::Deleted,
                Delta::Modified => FileStatus::Modified,
                Delta::Renamed => FileStatus::Renamed,
                Delta::Typechange => FileStatus::TypeChanged,
                _ => return None,
            };
            let path_of = |f: git2::DiffFile<'_>| {
                f.path()
                    .map(|p| p.to_string_lossy().into_owned())
                    .unwrap_or_default()
            };
            Some(Changed {
                status,
                old_path: path_of(delta.old_file()),
                new_path: path_of(delta.new_file()),
                old_id: delta.old_file().id(),
                new_id: delta.new_file().id(),
                old_mode: delta.old_file().mode(),
                new_mode: delta.new_file().mode(),
            })
        })
        .collect();
    Ok(deltas)
}

/// Below this many changed files a diff runs on one thread.
const PARALLEL_FILES: usize = 64;

/// One changed file as the tree comparison reports it.
#[derive(Debug, PartialEq, Eq)]
struct Changed {
    status: FileStatus,
    old_path: String,
    new_path: String,
    old_id: Oid,
    new_id: Oid,
    old_mode: git2::FileMode,
    new_mode: git2::FileMode,
}

/// What `each` makes of the [`FileDiff`] of each changed file, in order.
fn file_diffs<T>(
    repo: &Repository,
    deltas: &[Changed],
    request: &DiffRequest,
    each: &(dyn Fn(FileDiff) -> T + Sync),
) -> Result<Vec<T>, SandboxError> {
    let blob = |oid: Oid| -> Result<Option<Vec<u8>>, SandboxError> {
        if oid.is_zero() {
            return Ok(None);
        }
        match repo.find_blob(oid) {
            Ok(b) => Ok(Some(b.content().to_vec())),
            // Submodule commits are not blobs.
            Err(_) => Ok(None),
        }
    };
    let secrets = crate::redact::secrets();
    let mut out = Vec::with_capacity(deltas.len());
    for delta in deltas {
        let status = delta.status;
        let old_bytes = blob(delta.old_id)?;
        let new_bytes = blob(delta.new_id)?;
        let binary = old_bytes.as_deref().is_some_and(is_binary)
            || new_bytes.as_deref().is_some_and(is_binary);
        let mut file = FileDiff {
            path: if status == FileStatus::Deleted {
                delta.old_path.clone()
            } else {
                delta.new_path.clone()
            },
            old_path: (status == FileStatus::Renamed).then(|| delta.old_path.clone()),
            status,
            binary,
            old_size: old_bytes.as_ref().map(|b| b.len() as u64),
            new_size: new_bytes.as_ref().map(|b| b.len() as u64),
            old_mode: mode(delta.old_mode),
            new_mode: mode(delta.new_mode),
            additions: 0,
            deletions: 0,
            hunks: Vec::new(),
            item_id: None,
            secrets: Vec::new(),
        };
        if !binary {
            let old_text = old_bytes
                .as_deref()
                .map(|b| std::str::from_utf8(b).unwrap_or_default())
                .unwrap_or_default();
            let new_text = new_bytes
                .as_deref()
                .map(|b| std::str::from_utf8(b).unwrap_or_default())
                .unwrap_or_default();
            let hunks = text_hunks(old_text, new_text);
            for h in &hunks {
                for l in &h.lines {
                    match l.kind {
                        LineKind::Added => file.additions += 1,
                        LineKind::Removed => file.deletions += 1,
                        LineKind::Context => {}
                    }
                }
            }
            file.secrets = secret_lines(&hunks, None, &secrets);
            if request.hunks {
                file.hunks = hunks;
            }
        } else {
            file.secrets = secret_lines(&[], new_bytes.as_deref(), &secrets);
        }
        out.push(each(file));
    }
    Ok(out)
}

/// Line hunks between two texts with [`CONTEXT_LINES`] of context, as `git diff` makes them:
/// libgit2's copy of git's xdiff, its Myers algorithm with git's heuristics and the indent
/// heuristic git turns on by default, so the hunks and the `+N -M` counts are git's own for
/// the same change (`docs/review.md`).
pub fn text_hunks(old: &str, new: &str) -> Vec<Hunk> {
    if old == new {
        return Vec::new();
    }
    let mut opts = DiffOptions::new();
    opts.context_lines(CONTEXT_LINES as u32)
        .interhunk_lines(0)
        .indent_heuristic(true)
        .force_text(true);
    let Ok(patch) =
        git2::Patch::from_buffers(old.as_bytes(), None, new.as_bytes(), None, Some(&mut opts))
    else {
        // libgit2 fails on these buffers only when out of memory: the file shows unchanged
        // rather than with made-up lines.
        return Vec::new();
    };
    let mut hunks = Vec::with_capacity(patch.num_hunks());
    for h in 0..patch.num_hunks() {
        let Ok((header, count)) = patch.hunk(h) else {
            continue;
        };
        let mut lines = Vec::with_capacity(count);
        for l in 0..count {
            let Ok(line) = patch.line_in_hunk(h, l) else {
                continue;
            };
            let kind = match line.origin() {
                ' ' => LineKind::Context,
                '+' => LineKind::Added,
                '-' => LineKind::Removed,
                // `\ No newline at end of file` markers: carried by `no_newline` instead.
                _ => continue,
            };
            let content = line.content();
            let text = content.strip_suffix(b"\n").unwrap_or(content);
            lines.push(HunkLine {
                kind,
                old_line: line.old_lineno(),
                new_line: line.new_lineno(),
                text: String::from_utf8_lossy(text).into_owned(),
                no_newline: !content.ends_with(b"\n"),
            });
        }
        hunks.push(Hunk {
            old_start: header.old_start(),
            old_lines: header.old_lines(),
            new_start: header.new_start(),
            new_lines: header.new_lines(),
            lines,
            decision_ids: Vec::new(),
            id: None,
        });
    }
    hunks
}

/// Renders files as a git-style unified diff (headers, hunks, binary notes).
pub fn unified(files: &[FileDiff]) -> String {
    let mut s = String::new();
    for f in files {
        let old = f.old_path.as_deref().unwrap_or(&f.path);
        let _ = writeln!(s, "diff --git a/{old} b/{}", f.path);
        match f.status {
            FileStatus::Added => {
                let _ = writeln!(
                    s,
                    "new file mode {}",
                    f.new_mode.as_deref().unwrap_or("100644")
                );
            }
            FileStatus::Deleted => {
                let _ = writeln!(
                    s,
                    "deleted file mode {}",
                    f.old_mode.as_deref().unwrap_or("100644")
                );
            }
            FileStatus::Renamed => {
                let _ = writeln!(s, "rename from {old}\nrename to {}", f.path);
            }
            _ => {}
        }
        if f.status != FileStatus::Added
            && f.status != FileStatus::Deleted
            && f.old_mode != f.new_mode
            && let (Some(o), Some(n)) = (&f.old_mode, &f.new_mode)
        {
            let _ = writeln!(s, "old mode {o}\nnew mode {n}");
        }
        if f.binary {
            let _ = writeln!(
                s,
                "Binary files differ ({} -> {} bytes)",
                f.old_size.unwrap_or(0),
                f.new_size.unwrap_or(0)
            );
            continue;
        }
        if f.hunks.is_empty() {
            continue;
        }
        let a = if f.status == FileStatus::Added {
            "/dev/null".to_string()
        } else {
            format!("a/{old}")
        };
        let b = if f.status == FileStatus::Deleted {
            "/dev/null".to_string()
        } else {
            format!("b/{}", f.path)
        };
        let _ = writeln!(s, "--- {a}\n+++ {b}");
        for h in &f.hunks {
            let _ = writeln!(
                s,
                "@@ -{},{} +{},{} @@",
                h.old_start, h.old_lines, h.new_start, h.new_lines
            );
            for l in &h.lines {
                let sign = match l.kind {
                    LineKind::Context => ' ',
                    LineKind::Added => '+',
                    LineKind::Removed => '-',
                };
                let _ = writeln!(s, "{sign}{}", l.text);
                if l.no_newline {
                    let _ = writeln!(s, "\\ No newline at end of file");
                }
            }
        }
    }
    s
}

/// The changes in a sandbox against its base: its current state (captured without committing
/// a checkpoint) compared with the base commit's tree, under the sandbox's lock.
///
/// # Errors
/// [`SandboxError`] for git or I/O failures.
pub fn sandbox_diff(sb: &Sandbox, request: &DiffRequest) -> Result<Vec<FileDiff>, SandboxError> {
    Ok(sandbox_diff_between(sb, request)?.files)
}

/// As [`sandbox_diff`], handing each file to `each` as [`trees_each`] does (for output that
/// needs neither attribution nor review ids, such as the unified text).
///
/// # Errors
/// [`SandboxError`] for git or I/O failures.
pub fn sandbox_diff_each<T: Send>(
    sb: &Sandbox,
    request: &DiffRequest,
    each: &(dyn Fn(FileDiff) -> T + Sync),
) -> Result<Vec<T>, SandboxError> {
    let _lock = sb.lock()?;
    let repo = sb.repo()?;
    let base_tree = base_tree(&repo, sb)?;
    let now_tree = super::checkpoint::snapshot(&repo)?;
    trees_each(&repo, Some(base_tree), Some(now_tree), request, each)
}

/// The tree of `sb`'s base commit.
pub(crate) fn base_tree(repo: &Repository, sb: &Sandbox) -> Result<Oid, SandboxError> {
    let base = sb.base_commit()?;
    Ok(repo
        .find_commit(base)
        .and_then(|c| c.tree())
        .map_err(SandboxError::git("reading the base tree"))?
        .id())
}

/// A sandbox diff with the two trees it compares.
#[derive(Debug)]
pub struct SandboxDiff {
    /// The base commit's tree.
    pub base_tree: Oid,
    /// The tree of the sandbox's current state.
    pub now_tree: Oid,
    /// The changed files, as [`trees`] returns them.
    pub files: Vec<FileDiff>,
}

/// As [`sandbox_diff`], also naming the trees compared (so that attribution can recognise a
/// step whose own changes are this very diff).
///
/// # Errors
/// [`SandboxError`] for git or I/O failures.
pub fn sandbox_diff_between(
    sb: &Sandbox,
    request: &DiffRequest,
) -> Result<SandboxDiff, SandboxError> {
    let _lock = sb.lock()?;
    let repo = sb.repo()?;
    let base_tree = base_tree(&repo, sb)?;
    let now_tree = super::checkpoint::snapshot(&repo)?;
    let files = trees(&repo, Some(base_tree), Some(now_tree), request)?;
    Ok(SandboxDiff {
        base_tree,
        now_tree,
        files,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hunks_carry_git_ranges_and_line_numbers() {
        let old = "a\nb\nc\nd\ne\nf\ng\nh\n";
        let new = "a\nb\nc\nD\ne\nf\ng\nh\ni";
        let hunks = text_hunks(old, new);
        assert_eq!(hunks.len(), 1);
        let h = &hunks[0];
        assert_eq!(
            (h.old_start, h.old_lines, h.new_start, h.new_lines),
            (1, 8, 1, 9)
        );
        let removed: Vec<_> = h
            .lines
            .iter()
            .filter(|l| l.kind == LineKind::Removed)
            .map(|l| (l.old_line, l.text.as_str()))
            .collect();
        assert_eq!(removed, [(Some(4), "d")]);
        let last = h.lines.last().unwrap();
        assert_eq!(
            (last.kind, last.new_line, last.no_newline),
            (LineKind::Added, Some(9), true)
        );
    }

    #[test]
    fn an_added_file_starts_at_zero_in_the_old_range() {
        let hunks = text_hunks("", "x\ny\n");
        assert_eq!(
            (
                hunks[0].old_start,
                hunks[0].old_lines,
                hunks[0].new_start,
                hunks[0].new_lines
            ),
            (0, 0, 1, 2)
        );
    }

    #[test]
    fn a_diff_of_many_files_split_between_threads_keeps_every_file_in_order() {
        let dir = tempfile::tempdir().unwrap();
        let repo = Repository::init(dir.path()).unwrap();
        let tree = |files: &[(String, String)]| {
            let mut b = repo.treebuilder(None).unwrap();
            for (name, text) in files {
                let blob = repo.blob(text.as_bytes()).unwrap();
                b.insert(name, blob, 0o100644).unwrap();
            }
            b.write().unwrap()
        };
        let old: Vec<(String, String)> = (0..300)
            .map(|i| (format!("f{i:03}.txt"), format!("a\nb {i}\nc\n")))
            .collect();
        // Every third file edited, every seventh removed, and new ones added.
        let mut new: Vec<(String, String)> = old
            .iter()
            .enumerate()
            .filter(|(i, _)| i % 7 != 0)
            .map(|(i, (n, t))| {
                let t = if i % 3 == 0 {
                    t.replace("b", "B")
                } else {
                    t.clone()
                };
                (n.clone(), t)
            })
            .collect();
        new.extend((0..40).map(|i| (format!("g{i:03}.txt"), format!("new {i}\n"))));
        let (old, new) = (tree(&old), tree(&new));
        let request = DiffRequest {
            path: None,
            hunks: true,
        };
        let files = trees(&repo, Some(old), Some(new), &request).unwrap();
        assert!(files.len() >= PARALLEL_FILES, "{} files", files.len());
        let paths: Vec<&str> = files.iter().map(|f| f.path.as_str()).collect();
        let mut sorted = paths.clone();
        sorted.sort_unstable();
        assert_eq!(paths, sorted, "files come in git's order");
        // The same files, diffed on one thread.
        let one_thread: Vec<FileDiff> = files
            .iter()
            .map(|f| {
                let text = |t: Oid, p: &str| {
                    repo.find_tree(t)
                        .unwrap()
                        .get_path(std::path::Path::new(p))
                        .ok()
                        .map(|e| {
                            String::from_utf8(repo.find_blob(e.id()).unwrap().content().to_vec())
                                .unwrap()
                        })
                        .unwrap_or_default()
                };
                let hunks = text_hunks(&text(old, &f.path), &text(new, &f.path));
                FileDiff { hunks, ..f.clone() }
            })
            .collect();
        assert_eq!(files, one_thread);
        assert_eq!(
            files
                .iter()
                .filter(|f| f.status == FileStatus::Added)
                .count(),
            40
        );
    }

    #[test]
    fn binary_means_nul_bytes_or_not_utf8() {
        assert!(is_binary(b"a\0b"));
        assert!(is_binary(&[0xff, 0xfe, b'a']));
        assert!(!is_binary("héllo\n".as_bytes()));
    }
}
