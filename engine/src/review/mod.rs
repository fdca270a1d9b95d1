//! Review hunk by hunk (`docs/review.md`): before Apply, each hunk (and each file without text
//! hunks) of the diff the apply gate shows can be accepted or rejected, with a reason. Apply
//! then writes exactly the accepted part ([`partial`]); with nothing marked it writes
//! everything, as the reviewed-tree rule of spec section 13 says.
//!
//! - Items and their ids: [`hunk_id`] and [`file_item_id`] hash the resource, the path, the
//!   ranges and the lines, so the same content has the same id in every process and every
//!   `plan diff`, and a hunk a correction changes gets a new id (pending again).
//! - Marks are rows of `review_marks` ([`store`]), written per plan attempt and reviewer; a
//!   reviewer's mark of an item is the one of the newest attempt in which they marked it, and
//!   the item's verdict combines every reviewer's ([`effective`]).
//! - [`load`] computes the review of a plan: every item of the reviewed trees with its mark
//!   and the decisions that produced it.

pub mod partial;
pub mod store;

use std::collections::BTreeMap;
use std::fmt::Write as _;

use git2::Oid;
use serde::Serialize;

use crate::domain::{Id, Plan};
use crate::sandbox::attribution::{self, DiffTrees};
use crate::sandbox::diff::{self, DiffRequest, FileDiff, FileStatus, Hunk};
use crate::sandbox::{SandboxError, Sandboxes};
use crate::store::{Store, StoreError};

/// A review mark.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Serialize, Default, serde::Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum Mark {
    /// Not reviewed yet.
    #[default]
    Pending,
    /// Seen, no verdict yet: Apply treats it as not accepted once any item has a verdict.
    Reviewed,
    /// Apply writes it.
    Accepted,
    /// Apply leaves it in the sandbox.
    Rejected,
}

impl Mark {
    /// The stored word (`pending`, `reviewed`, `accepted`, `rejected`).
    pub fn as_str(self) -> &'static str {
        match self {
            Mark::Pending => "pending",
            Mark::Reviewed => "reviewed",
            Mark::Accepted => "accepted",
            Mark::Rejected => "rejected",
        }
    }

    /// Parses the stored word.
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "pending" => Some(Mark::Pending),
            "reviewed" => Some(Mark::Reviewed),
            "accepted" => Some(Mark::Accepted),
            "rejected" => Some(Mark::Rejected),
            _ => None,
        }
    }
}

/// One reviewer's mark of an item.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, serde::Deserialize, schemars::JsonSchema)]
pub struct ReviewerMark {
    /// The server user who set it; `None` for the local user (who has no name).
    pub reviewer: Option<String>,
    /// The mark (never `pending`: a reset mark is not listed).
    pub mark: Mark,
    /// The reason given with it.
    pub reason: Option<String>,
    /// The attempt that wrote it.
    pub attempt: u32,
    /// When it was set (RFC 3339).
    pub at: String,
}

/// The verdict of an item from its reviewers' marks (`docs/review.md`, D-review-8): any
/// `rejected` wins (a hunk someone objects to is not applied until they change their mark),
/// then any `accepted`; `reviewed` is no verdict (the item is `reviewed`, which Apply treats
/// as not accepted once any item has a verdict); with no mark it is `pending`.
pub fn effective(marks: &[ReviewerMark]) -> Mark {
    [Mark::Rejected, Mark::Accepted, Mark::Reviewed]
        .into_iter()
        .find(|m| marks.iter().any(|r| r.mark == *m))
        .unwrap_or(Mark::Pending)
}

/// Errors of review operations.
#[derive(Debug, thiserror::Error)]
pub enum ReviewError {
    /// A named hunk or path is not in the plan's diff.
    #[error(
        "`{target}` is neither a hunk id nor a changed path, directory or glob of the plan's diff"
    )]
    NotFound {
        /// What was named.
        target: String,
    },
    /// A hunk id prefix matches several hunks.
    #[error("`{target}` matches several hunks ({})", matches.join(", "))]
    Ambiguous {
        /// What was named.
        target: String,
        /// The ids it matches.
        matches: Vec<String>,
    },
    /// A glob of `--only` / `--exclude` is not valid.
    #[error("`{glob}` is not a valid glob: {message}")]
    Glob {
        /// The glob.
        glob: String,
        /// What is wrong.
        message: String,
    },
    /// Store failure.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// Sandbox or git failure.
    #[error(transparent)]
    Sandbox(#[from] SandboxError),
}

/// One reviewable item: a hunk, or a whole file without text hunks.
#[derive(Debug, Clone, PartialEq, Serialize, serde::Deserialize, schemars::JsonSchema)]
pub struct Item {
    /// Content id (`[0-9a-f]{12}`), stable across processes.
    pub id: String,
    /// Whether it is a whole file (binary, mode change, pure rename) rather than a hunk.
    pub whole_file: bool,
    /// Git's ranges (`0,0,0,0` for a whole file).
    pub old_start: u32,
    /// Old line count.
    pub old_lines: u32,
    /// First new line.
    pub new_start: u32,
    /// New line count.
    pub new_lines: u32,
    /// Added lines.
    pub additions: u64,
    /// Removed lines.
    pub deletions: u64,
    /// The decisions whose Execute steps produced it (see [`attribution`]).
    pub decision_ids: Vec<String>,
    /// Its verdict from every reviewer's mark ([`effective`]).
    pub mark: Mark,
    /// The reasons given with the marks that make the verdict (joined with `; `).
    pub reason: Option<String>,
    /// The newest attempt among the marks that make the verdict (`None` while pending).
    pub marked_in_attempt: Option<u32>,
    /// Every reviewer's mark, in reviewer order (the local user first).
    #[serde(default)]
    pub marks: Vec<ReviewerMark>,
}

/// One changed file of the review.
#[derive(Debug, Clone, PartialEq, Serialize, serde::Deserialize, schemars::JsonSchema)]
pub struct ReviewFile {
    /// Resource name.
    pub resource: String,
    /// Path in the new tree (the old path for a deletion).
    pub path: String,
    /// Path before a rename.
    pub old_path: Option<String>,
    /// How it changed.
    pub status: FileStatus,
    /// Whether it is binary.
    pub binary: bool,
    /// Added lines.
    pub additions: u64,
    /// Removed lines.
    pub deletions: u64,
    /// The file's mark: `accepted` or `rejected` when every item has that mark, else
    /// `pending` (some items unmarked or mixed, see `items`).
    pub mark: Mark,
    /// Its items in order.
    pub items: Vec<Item>,
    /// The full diff of the file (for the TUI and the text formats).
    #[serde(skip)]
    pub diff: FileDiff,
}

/// Counts of items by mark.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, serde::Deserialize, schemars::JsonSchema,
)]
pub struct Counts {
    /// Items nobody marked.
    pub pending: u64,
    /// Items seen by someone, with no verdict.
    #[serde(default)]
    pub reviewed: u64,
    /// Accepted items.
    pub accepted: u64,
    /// Rejected items.
    pub rejected: u64,
}

/// The review of a plan: every item of its reviewed trees with its mark.
#[derive(Debug, Clone, PartialEq, Serialize, serde::Deserialize, schemars::JsonSchema)]
pub struct Review {
    /// The plan.
    pub plan_id: String,
    /// The plan's current attempt (new marks are written for it).
    pub attempt: u32,
    /// Items by mark.
    pub counts: Counts,
    /// Changed files, per resource in path order.
    pub files: Vec<ReviewFile>,
}

impl Review {
    /// Whether any item carries a mark (otherwise Apply writes everything).
    pub fn any_marked(&self) -> bool {
        self.counts.accepted + self.counts.rejected > 0
    }

    /// Every item with its file.
    pub fn items(&self) -> impl Iterator<Item = (&ReviewFile, &Item)> {
        self.files
            .iter()
            .flat_map(|f| f.items.iter().map(move |i| (f, i)))
    }
}

fn short_hash(parts: &[&str]) -> String {
    let mut joined = String::new();
    for p in parts {
        joined.push_str(p);
        joined.push('\0');
    }
    crate::sandbox::confined::sha256_hex(joined.as_bytes())[..12].to_string()
}

/// The id of a hunk of `path` in `resource`: a hash of both, its old/new ranges and its lines
/// (kind and text), 12 hex digits.
pub fn hunk_id(resource: &str, path: &str, hunk: &Hunk) -> String {
    let ranges = format!(
        "-{},{} +{},{}",
        hunk.old_start, hunk.old_lines, hunk.new_start, hunk.new_lines
    );
    let mut lines = String::new();
    for l in &hunk.lines {
        let sign = match l.kind {
            diff::LineKind::Context => ' ',
            diff::LineKind::Added => '+',
            diff::LineKind::Removed => '-',
        };
        let _ = writeln!(
            lines,
            "{sign}{}{}",
            l.text,
            if l.no_newline { "\\" } else { "" }
        );
    }
    short_hash(&[resource, path, &ranges, &lines])
}

/// The id of a file without text hunks: a hash of the resource, both paths, sizes and modes.
pub fn file_item_id(resource: &str, f: &FileDiff) -> String {
    let sides = format!(
        "{:?} {:?} {:?} {:?} {:?} {:?}",
        f.old_path, f.status, f.old_size, f.new_size, f.old_mode, f.new_mode
    );
    short_hash(&[resource, &f.path, &sides])
}

/// Sets the review ids of `files` of `resource`: [`Hunk::id`] of every hunk, and
/// [`FileDiff::item_id`] of a file without hunks (the ids [`load`] gives its items), so that
/// `plan diff` names the same items `plan review` marks.
pub fn assign_ids(resource: &str, files: &mut [FileDiff]) {
    for f in files {
        assign_file_ids(resource, f);
    }
}

/// [`assign_ids`] of one file.
pub fn assign_file_ids(resource: &str, f: &mut FileDiff) {
    if f.hunks.is_empty() {
        f.item_id = Some(file_item_id(resource, f));
    } else {
        for h in &mut f.hunks {
            h.id = Some(hunk_id(resource, &f.path, h));
        }
    }
}

/// The items of one file diff (hunks, or the whole file when it has none).
fn items_of(resource: &str, f: &FileDiff) -> Vec<Item> {
    if f.hunks.is_empty() {
        return vec![Item {
            id: file_item_id(resource, f),
            whole_file: true,
            old_start: 0,
            old_lines: 0,
            new_start: 0,
            new_lines: 0,
            additions: f.additions,
            deletions: f.deletions,
            decision_ids: Vec::new(),
            mark: Mark::Pending,
            reason: None,
            marked_in_attempt: None,
            marks: Vec::new(),
        }];
    }
    f.hunks
        .iter()
        .map(|h| {
            let count = |k| h.lines.iter().filter(|l| l.kind == k).count() as u64;
            Item {
                id: hunk_id(resource, &f.path, h),
                whole_file: false,
                old_start: h.old_start,
                old_lines: h.old_lines,
                new_start: h.new_start,
                new_lines: h.new_lines,
                additions: count(diff::LineKind::Added),
                deletions: count(diff::LineKind::Removed),
                decision_ids: h.decision_ids.clone(),
                mark: Mark::Pending,
                reason: None,
                marked_in_attempt: None,
                marks: Vec::new(),
            }
        })
        .collect()
}

/// The two trees a resource's review compares: the base commit's tree and the tree recorded
/// with the apply gate (the sandbox's current tree when none was recorded).
#[derive(Debug, Clone)]
pub struct ResourceTrees {
    /// Resource name.
    pub resource: String,
    /// The base tree.
    pub base: Oid,
    /// The reviewed tree.
    pub reviewed: Oid,
}

/// The review of `plan`: the diff of every active sandbox from its base to `reviewed` (by
/// resource; a resource missing there is compared at its current state), attributed to
/// decisions, with the stored marks.
///
/// # Errors
/// Store and sandbox errors.
pub fn load(
    store: &Store,
    sandboxes: &Sandboxes,
    plan: &Plan,
    reviewed: &BTreeMap<String, Oid>,
) -> Result<Review, ReviewError> {
    let marks = store.review_marks(&plan.plan_id)?;
    let mut files = Vec::new();
    for sb in sandboxes.active(store, &plan.plan_id)? {
        let resource = sb.record.resource_name.clone();
        let repo = sb.repo()?;
        let base = repo
            .find_commit(sb.base_commit()?)
            .map_err(SandboxError::git("reading the base commit"))?
            .tree_id();
        let target = match reviewed.get(&resource) {
            Some(t) => *t,
            None => {
                let _lock = sb.lock()?;
                crate::sandbox::checkpoint::snapshot(&repo)?
            }
        };
        let request = DiffRequest {
            path: None,
            hunks: true,
        };
        let mut diffs = diff::trees(&repo, Some(base), Some(target), &request)?;
        attribution::attribute_between(
            store,
            &sb,
            &mut diffs,
            Some(DiffTrees { base, now: target }),
        )?;
        assign_ids(&resource, &mut diffs);
        for d in diffs {
            let mut items = items_of(&resource, &d);
            for item in &mut items {
                if let Some(stored) = marks.get(&item.id) {
                    set_marks(item, stored);
                }
            }
            let mark = file_mark(&items);
            files.push(ReviewFile {
                resource: resource.clone(),
                path: d.path.clone(),
                old_path: d.old_path.clone(),
                status: d.status,
                binary: d.binary,
                additions: d.additions,
                deletions: d.deletions,
                mark,
                items,
                diff: d,
            });
        }
    }
    let mut counts = Counts::default();
    for f in &files {
        for i in &f.items {
            match i.mark {
                Mark::Pending => counts.pending += 1,
                Mark::Reviewed => counts.reviewed += 1,
                Mark::Accepted => counts.accepted += 1,
                Mark::Rejected => counts.rejected += 1,
            }
        }
    }
    Ok(Review {
        plan_id: plan.plan_id.to_string(),
        attempt: plan.status.attempt,
        counts,
        files,
    })
}

/// The review Apply needs to choose what it writes: as [`load`] when the plan has marks or
/// `selection` names globs; otherwise a review without files, since every item is then
/// applied and [`partial::build`] keeps the reviewed tree as it is (the diff and its
/// attribution are not computed for nothing on a large change).
///
/// # Errors
/// As [`load`].
pub fn load_for_apply(
    store: &Store,
    sandboxes: &Sandboxes,
    plan: &Plan,
    reviewed: &BTreeMap<String, Oid>,
    selection: &partial::Selection,
) -> Result<Review, ReviewError> {
    if selection.is_empty() && store.review_marks(&plan.plan_id)?.is_empty() {
        return Ok(Review {
            plan_id: plan.plan_id.to_string(),
            attempt: plan.status.attempt,
            counts: Counts::default(),
            files: Vec::new(),
        });
    }
    load(store, sandboxes, plan, reviewed)
}

/// Sets `item`'s reviewer marks from the stored rows (a reset mark is left out) and its
/// verdict, reason and attempt from them.
fn set_marks(item: &mut Item, stored: &[store::StoredMark]) {
    item.marks = stored
        .iter()
        .filter(|m| m.mark != Mark::Pending)
        .map(|m| ReviewerMark {
            reviewer: (!m.reviewer.is_empty()).then(|| m.reviewer.clone()),
            mark: m.mark,
            reason: m.reason.clone(),
            attempt: m.attempt,
            at: m.updated_at.clone(),
        })
        .collect();
    item.mark = effective(&item.marks);
    let deciding: Vec<&ReviewerMark> = item.marks.iter().filter(|m| m.mark == item.mark).collect();
    let mut reasons: Vec<&str> = Vec::new();
    for r in deciding.iter().filter_map(|m| m.reason.as_deref()) {
        if !reasons.contains(&r) {
            reasons.push(r);
        }
    }
    item.reason = (!reasons.is_empty()).then(|| reasons.join("; "));
    item.marked_in_attempt = deciding.iter().map(|m| m.attempt).max();
}

fn file_mark(items: &[Item]) -> Mark {
    let first = items.first().map_or(Mark::Pending, |i| i.mark);
    if items.iter().all(|i| i.mark == first) {
        first
    } else {
        Mark::Pending
    }
}

/// How a `plan review` target names files: a changed path, a directory (every changed file
/// under it) or a glob (`tests/**`, `*.snap`: `*` stays within one directory).
enum PathTarget {
    Exact(String),
    Directory(String),
    Glob(globset::GlobMatcher),
}

impl PathTarget {
    fn of(target: &str) -> Result<Self, ReviewError> {
        if target.contains(['*', '?', '[', '{']) {
            let glob = globset::GlobBuilder::new(target)
                .literal_separator(true)
                .build()
                .map_err(|e| ReviewError::Glob {
                    glob: target.to_string(),
                    message: e.kind().to_string(),
                })?;
            return Ok(PathTarget::Glob(glob.compile_matcher()));
        }
        Ok(match target.strip_suffix('/') {
            Some(dir) => PathTarget::Directory(dir.to_string()),
            None => PathTarget::Exact(target.to_string()),
        })
    }

    fn names(&self, path: &str) -> bool {
        match self {
            PathTarget::Exact(p) => path == p,
            PathTarget::Directory(d) => path
                .strip_prefix(d.as_str())
                .is_some_and(|r| r.starts_with('/')),
            PathTarget::Glob(g) => g.is_match(path),
        }
    }

    /// The same target read as a directory (`tests` names `tests/...` when no file is
    /// `tests`).
    fn as_directory(&self) -> Option<Self> {
        match self {
            PathTarget::Exact(p) => Some(PathTarget::Directory(p.clone())),
            _ => None,
        }
    }
}

/// The items of the files `target` names (by new or old path).
fn items_named<'a>(review: &'a Review, target: &PathTarget) -> Vec<(&'a ReviewFile, &'a Item)> {
    review
        .items()
        .filter(|(f, _)| {
            target.names(&f.path) || f.old_path.as_deref().is_some_and(|o| target.names(o))
        })
        .collect()
}

/// Resolves what `plan review --accept/--reject` names: a changed path, a directory or a glob
/// (every item of the files it names), or a hunk id (or a unique prefix of at least 4
/// digits). Returns `(item id, resource, path)` per item.
///
/// # Errors
/// [`ReviewError::NotFound`], [`ReviewError::Ambiguous`], [`ReviewError::Glob`].
pub fn resolve(
    review: &Review,
    targets: &[String],
) -> Result<Vec<(String, String, String)>, ReviewError> {
    let mut out: Vec<(String, String, String)> = Vec::new();
    for t in targets {
        let t = t.trim();
        let named = PathTarget::of(t)?;
        let mut by_path = items_named(review, &named);
        if by_path.is_empty()
            && let Some(dir) = named.as_directory()
        {
            by_path = items_named(review, &dir);
        }
        let chosen = if !by_path.is_empty() {
            by_path
        } else {
            let by_id: Vec<_> = if t.len() >= 4 {
                review
                    .items()
                    .filter(|(_, i)| i.id.starts_with(t))
                    .collect()
            } else {
                Vec::new()
            };
            if by_id.len() > 1 {
                return Err(ReviewError::Ambiguous {
                    target: t.to_string(),
                    matches: by_id.iter().map(|(_, i)| i.id.clone()).collect(),
                });
            }
            by_id
        };
        if chosen.is_empty() {
            return Err(ReviewError::NotFound {
                target: t.to_string(),
            });
        }
        for (f, i) in chosen {
            if !out.iter().any(|(id, _, _)| *id == i.id) {
                out.push((i.id.clone(), f.resource.clone(), f.path.clone()));
            }
        }
    }
    Ok(out)
}

/// Marks the items `targets` names (see [`resolve`]) for the plan's current attempt, in one
/// transaction. Returns the item ids marked.
///
/// # Errors
/// As [`resolve`], and store errors (nothing is written then).
pub fn mark(
    store: &mut Store,
    plan_id: &Id,
    review: &Review,
    targets: &[String],
    mark: Mark,
    reason: Option<&str>,
) -> Result<Vec<String>, ReviewError> {
    let items = resolve(review, targets)?;
    store.set_review_marks(plan_id, review.attempt, &items, mark, reason)?;
    Ok(items.into_iter().map(|(id, _, _)| id).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_hunk_id_depends_on_its_content_and_place_only() {
        let a = diff::text_hunks("a\nb\nc\n", "a\nB\nc\n");
        let b = diff::text_hunks("a\nb\nc\n", "a\nB\nc\n");
        assert_eq!(hunk_id("r", "f", &a[0]), hunk_id("r", "f", &b[0]));
        assert_eq!(hunk_id("r", "f", &a[0]).len(), 12);
        assert_ne!(hunk_id("r", "f", &a[0]), hunk_id("r", "g", &a[0]));
        let c = diff::text_hunks("a\nb\nc\n", "a\nX\nc\n");
        assert_ne!(hunk_id("r", "f", &a[0]), hunk_id("r", "f", &c[0]));
    }

    fn by(who: Option<&str>, mark: Mark, reason: Option<&str>) -> ReviewerMark {
        ReviewerMark {
            reviewer: who.map(str::to_string),
            mark,
            reason: reason.map(str::to_string),
            attempt: 1,
            at: String::new(),
        }
    }

    #[test]
    fn any_rejection_wins_then_any_acceptance_and_reviewed_is_no_verdict() {
        use Mark::{Accepted, Pending, Rejected, Reviewed};
        let verdict = |marks: &[Mark]| {
            let marks: Vec<ReviewerMark> = marks.iter().map(|m| by(Some("x"), *m, None)).collect();
            effective(&marks)
        };
        assert_eq!(verdict(&[]), Pending);
        assert_eq!(verdict(&[Reviewed]), Reviewed);
        assert_eq!(verdict(&[Reviewed, Accepted]), Accepted);
        assert_eq!(verdict(&[Accepted, Rejected]), Rejected);
        assert_eq!(verdict(&[Rejected, Accepted, Reviewed]), Rejected);
    }

    #[test]
    fn an_items_reason_is_the_one_of_the_marks_that_make_its_verdict() {
        let stored = |who: &str, mark, reason: Option<&str>, attempt| store::StoredMark {
            reviewer: who.to_string(),
            mark,
            reason: reason.map(str::to_string),
            attempt,
            resource: "r".into(),
            path: "f".into(),
            updated_at: String::new(),
        };
        let mut item = review_of(&["f"]).files[0].items[0].clone();
        set_marks(
            &mut item,
            &[
                stored("", Mark::Pending, None, 1),
                stored("alice", Mark::Accepted, Some("fine"), 2),
                stored("bob", Mark::Rejected, Some("too broad"), 1),
            ],
        );
        assert_eq!(item.mark, Mark::Rejected);
        assert_eq!(item.reason.as_deref(), Some("too broad"));
        assert_eq!(item.marked_in_attempt, Some(1));
        let who: Vec<Option<&str>> = item.marks.iter().map(|m| m.reviewer.as_deref()).collect();
        assert_eq!(who, [Some("alice"), Some("bob")], "a reset mark is not listed");
    }

    /// A review of one resource `r` with one hunk per path.
    fn review_of(paths: &[&str]) -> Review {
        let files = paths
            .iter()
            .enumerate()
            .map(|(n, p)| ReviewFile {
                resource: "r".into(),
                path: (*p).into(),
                old_path: None,
                status: FileStatus::Modified,
                binary: false,
                additions: 1,
                deletions: 1,
                mark: Mark::Pending,
                items: vec![Item {
                    id: format!("{n:012x}"),
                    whole_file: false,
                    old_start: 1,
                    old_lines: 1,
                    new_start: 1,
                    new_lines: 1,
                    additions: 1,
                    deletions: 1,
                    decision_ids: Vec::new(),
                    mark: Mark::Pending,
                    reason: None,
                    marked_in_attempt: None,
                    marks: Vec::new(),
                }],
                diff: FileDiff::default(),
            })
            .collect();
        Review {
            plan_id: "p".into(),
            attempt: 1,
            counts: Counts::default(),
            files,
        }
    }

    fn resolved_paths(review: &Review, targets: &[&str]) -> Result<Vec<String>, ReviewError> {
        let targets: Vec<String> = targets.iter().map(|t| (*t).to_string()).collect();
        Ok(resolve(review, &targets)?
            .into_iter()
            .map(|(_, _, path)| path)
            .collect())
    }

    #[test]
    fn a_directory_or_a_glob_names_every_changed_file_under_it() {
        let review = review_of(&[
            "src/lib.rs",
            "src/util/mod.rs",
            "tests/a_test.rs",
            "tests/b_test.rs",
            "testsuite.txt",
        ]);
        assert_eq!(
            resolved_paths(&review, &["tests"]).unwrap(),
            ["tests/a_test.rs", "tests/b_test.rs"],
            "a directory names the files under it, not a sibling sharing its prefix"
        );
        assert_eq!(
            resolved_paths(&review, &["src/"]).unwrap(),
            ["src/lib.rs", "src/util/mod.rs"]
        );
        assert_eq!(
            resolved_paths(&review, &["**/*_test.rs"]).unwrap(),
            ["tests/a_test.rs", "tests/b_test.rs"]
        );
        assert_eq!(
            resolved_paths(&review, &["src/*.rs"]).unwrap(),
            ["src/lib.rs"],
            "`*` stays within one directory"
        );
        assert!(matches!(
            resolved_paths(&review, &["docs/**"]),
            Err(ReviewError::NotFound { .. })
        ));
        assert!(matches!(
            resolved_paths(&review, &["src/[a"]),
            Err(ReviewError::Glob { .. })
        ));
    }

    #[test]
    fn assigned_ids_are_the_review_items_ids() {
        let file = |path: &str, hunks| FileDiff {
            path: path.into(),
            old_path: None,
            status: FileStatus::Modified,
            binary: hunks == Vec::new(),
            old_size: Some(3),
            new_size: Some(4),
            old_mode: None,
            new_mode: None,
            additions: 0,
            deletions: 0,
            hunks,
            item_id: None,
            secrets: Vec::new(),
        };
        let mut files = vec![
            file("t.txt", diff::text_hunks("a\nb\n", "a\nB\n")),
            file("b.bin", Vec::new()),
        ];
        assign_ids("r", &mut files);
        let items: Vec<String> = files
            .iter()
            .flat_map(|f| items_of("r", f))
            .map(|i| i.id)
            .collect();
        assert_eq!(
            items,
            [
                files[0].hunks[0].id.clone().unwrap(),
                files[1].item_id.clone().unwrap()
            ]
        );
        assert_eq!(files[0].item_id, None, "a file with hunks has no item id");
    }
}
