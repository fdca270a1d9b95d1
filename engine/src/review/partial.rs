//! The tree Apply writes from a review (`docs/review.md`): the base tree plus the accepted
//! items of the reviewed tree. A file whose items are all accepted gets its reviewed blob and
//! mode as they are; a file with some accepted hunks gets its old text with exactly those
//! hunks applied; a file with none keeps its base state. With no item marked and no
//! `--only`/`--exclude`, the reviewed tree is written unchanged.

use git2::build::TreeUpdateBuilder;
use git2::{FileMode, Oid, Repository};
use globset::{Glob, GlobSet, GlobSetBuilder};
use serde::Serialize;

use super::{Mark, Review, ReviewError, ReviewFile};
use crate::sandbox::SandboxError;
use crate::sandbox::diff::{FileStatus, Hunk, LineKind};

/// What `plan apply` asks beyond the marks: path globs and whether the left-out remainder is
/// discarded rather than kept in the sandbox.
#[derive(
    Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize, schemars::JsonSchema,
)]
pub struct ApplyRequest {
    /// Only files matching one of these globs (`--only`); empty: every file.
    pub only: Vec<String>,
    /// Files matching one of these are left out (`--exclude`).
    pub exclude: Vec<String>,
    /// Release the sandbox after a partial Apply instead of keeping the remainder.
    pub discard_rest: bool,
    /// Write a change that holds the value of a secret (`--allow-secrets`); refused otherwise.
    pub allow_secrets: bool,
}

/// Compiled globs of an [`ApplyRequest`].
#[derive(Debug, Clone)]
pub struct Selection {
    only: Option<GlobSet>,
    exclude: Option<GlobSet>,
}

fn globset(globs: &[String]) -> Result<Option<GlobSet>, ReviewError> {
    if globs.is_empty() {
        return Ok(None);
    }
    let mut b = GlobSetBuilder::new();
    for g in globs {
        b.add(
            globset::GlobBuilder::new(g)
                .literal_separator(false)
                .build()
                .or_else(|_| Glob::new(g))
                .map_err(|e| ReviewError::Glob {
                    glob: g.clone(),
                    message: e.kind().to_string(),
                })?,
        );
    }
    b.build().map(Some).map_err(|e| ReviewError::Glob {
        glob: globs.join(" "),
        message: e.to_string(),
    })
}

impl Selection {
    /// Compiles the globs of `request` (`*` also crosses `/`, as in `git add`).
    ///
    /// # Errors
    /// [`ReviewError::Glob`] naming the invalid glob.
    pub fn new(request: &ApplyRequest) -> Result<Self, ReviewError> {
        Ok(Self {
            only: globset(&request.only)?,
            exclude: globset(&request.exclude)?,
        })
    }

    /// Whether no glob was given.
    pub fn is_empty(&self) -> bool {
        self.only.is_none() && self.exclude.is_none()
    }

    /// Whether `path` is selected.
    pub fn includes(&self, path: &str) -> bool {
        self.only.as_ref().is_none_or(|s| s.is_match(path))
            && !self.exclude.as_ref().is_some_and(|s| s.is_match(path))
    }
}

/// One item Apply leaves out.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, serde::Deserialize, schemars::JsonSchema)]
pub struct LeftOut {
    /// Resource name.
    pub resource: String,
    /// Path.
    pub path: String,
    /// Item id.
    pub item_id: String,
    /// `@@ -a,b +c,d @@` of a hunk, `whole file` otherwise.
    pub what: String,
    /// `rejected`, `not accepted` or `excluded by --only/--exclude`.
    pub why: String,
    /// The rejection's reason.
    pub reason: Option<String>,
}

/// The tree to write for one resource and what it leaves out.
#[derive(Debug, Clone)]
pub struct Partial {
    /// The tree to write.
    pub tree: Oid,
    /// Items left out, in review order.
    pub left_out: Vec<LeftOut>,
}

fn git(what: &'static str) -> impl Fn(git2::Error) -> ReviewError {
    move |e| ReviewError::Sandbox(SandboxError::Checkpoint(format!("{what}: {}", e.message())))
}

/// The entry at `path` of `tree`: blob id and mode.
fn entry(repo: &Repository, tree: Oid, path: &str) -> Result<Option<(Oid, i32)>, ReviewError> {
    let tree = repo.find_tree(tree).map_err(git("reading a tree"))?;
    Ok(tree
        .get_path(std::path::Path::new(path))
        .ok()
        .map(|e| (e.id(), e.filemode())))
}

fn file_mode(raw: i32) -> FileMode {
    match raw {
        0o100755 => FileMode::BlobExecutable,
        0o120000 => FileMode::Link,
        0o160000 => FileMode::Commit,
        _ => FileMode::Blob,
    }
}

/// `old` with exactly the hunks marked `true` applied (hunks in order, as
/// [`crate::sandbox::diff::text_hunks`] returns them for `old` and the new text).
pub fn apply_hunks(old: &str, hunks: &[(&Hunk, bool)]) -> String {
    let lines: Vec<&str> = old.split_inclusive('\n').collect();
    let mut out = String::with_capacity(old.len());
    let mut pos = 0usize;
    for (h, accept) in hunks {
        let start = if h.old_lines == 0 {
            h.old_start as usize
        } else {
            h.old_start as usize - 1
        }
        .min(lines.len());
        let end = (start + h.old_lines as usize).min(lines.len());
        out.extend(lines[pos.min(start)..start].iter().copied());
        if *accept {
            for l in h.lines.iter().filter(|l| l.kind != LineKind::Removed) {
                out.push_str(&l.text);
                if !l.no_newline {
                    out.push('\n');
                }
            }
        } else {
            out.extend(lines[start..end].iter().copied());
        }
        pos = end;
    }
    out.extend(lines[pos.min(lines.len())..].iter().copied());
    out
}

/// Whether the item at `index` of `file` is written, and if not, why.
fn verdict(
    review: &Review,
    selection: &Selection,
    file: &ReviewFile,
    index: usize,
) -> Result<(), (&'static str, Option<String>)> {
    if !selection.includes(&file.path) {
        return Err(("excluded by --only/--exclude", None));
    }
    let item = &file.items[index];
    if !review.any_marked() {
        return Ok(());
    }
    match item.mark {
        Mark::Accepted => Ok(()),
        Mark::Rejected => Err(("rejected", item.reason.clone())),
        Mark::Pending | Mark::Reviewed => Err(("not accepted", None)),
    }
}

fn left_out_item(
    file: &ReviewFile,
    item: &super::Item,
    why: &str,
    reason: Option<String>,
) -> LeftOut {
    LeftOut {
        resource: file.resource.clone(),
        path: file.path.clone(),
        item_id: item.id.clone(),
        what: if item.whole_file {
            "whole file".to_string()
        } else {
            format!(
                "@@ -{},{} +{},{} @@",
                item.old_start, item.old_lines, item.new_start, item.new_lines
            )
        },
        why: why.to_string(),
        reason,
    }
}

/// One file of what Apply would write from a review (see [`outline`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, serde::Deserialize, schemars::JsonSchema)]
pub struct Written {
    /// Resource name.
    pub resource: String,
    /// Path.
    pub path: String,
    /// How the file changes.
    pub status: FileStatus,
    /// How many of its items are written.
    pub items: usize,
    /// How many items it has.
    pub of: usize,
    /// Lines added by the written items.
    pub additions: u64,
    /// Lines removed by the written items.
    pub deletions: u64,
}

/// What Apply would write from `review` and `selection`, without building any tree (for the
/// confirmation `plan apply` and the TUI show): the files with at least one written item, and
/// every item left out, in review order.
pub fn outline(review: &Review, selection: &Selection) -> (Vec<Written>, Vec<LeftOut>) {
    let mut written = Vec::new();
    let mut left_out = Vec::new();
    for file in &review.files {
        let mut w = Written {
            resource: file.resource.clone(),
            path: file.path.clone(),
            status: file.status,
            items: 0,
            of: file.items.len(),
            additions: 0,
            deletions: 0,
        };
        for (i, item) in file.items.iter().enumerate() {
            match verdict(review, selection, file, i) {
                Ok(()) => {
                    w.items += 1;
                    w.additions += item.additions;
                    w.deletions += item.deletions;
                }
                Err((why, reason)) => left_out.push(left_out_item(file, item, why, reason)),
            }
        }
        if w.items > 0 {
            written.push(w);
        }
    }
    (written, left_out)
}

/// The tree to write for `resource` (base tree `base`, reviewed tree `reviewed`) from
/// `review` and `selection`. Returns `reviewed` itself when nothing is left out.
///
/// # Errors
/// Git failures.
pub fn build(
    repo: &Repository,
    resource: &str,
    base: Oid,
    reviewed: Oid,
    review: &Review,
    selection: &Selection,
) -> Result<Partial, ReviewError> {
    let mut left_out = Vec::new();
    let mut updates = TreeUpdateBuilder::new();
    let mut changed = false;
    for file in review.files.iter().filter(|f| f.resource == resource) {
        let verdicts: Vec<_> = (0..file.items.len())
            .map(|i| verdict(review, selection, file, i))
            .collect();
        for (item, v) in file.items.iter().zip(&verdicts) {
            if let Err((why, reason)) = v {
                left_out.push(left_out_item(file, item, why, reason.clone()));
            }
        }
        let accepted = verdicts.iter().filter(|v| v.is_ok()).count();
        if accepted == file.items.len() {
            continue;
        }
        // Not all accepted: this file differs from the reviewed tree.
        changed = true;
        let old_path = file.old_path.clone().unwrap_or_else(|| file.path.clone());
        let old = entry(repo, base, &old_path)?;
        let new = entry(repo, reviewed, &file.path)?;
        if accepted == 0 {
            // Nothing of it: the base state of both paths.
            match old {
                Some((id, mode)) => {
                    updates.upsert(&old_path, id, file_mode(mode));
                }
                None => {
                    updates.remove(&old_path);
                }
            }
            if old_path != file.path {
                updates.remove(&file.path);
            }
            continue;
        }
        // Some hunks of a text file: the old text with exactly those applied.
        let old_text = match old {
            Some((id, _)) => {
                let blob = repo.find_blob(id).map_err(git("reading a blob"))?;
                String::from_utf8_lossy(blob.content()).into_owned()
            }
            None => String::new(),
        };
        let hunks: Vec<(&Hunk, bool)> = file
            .diff
            .hunks
            .iter()
            .zip(&verdicts)
            .map(|(h, v)| (h, v.is_ok()))
            .collect();
        let text = apply_hunks(&old_text, &hunks);
        let blob = repo.blob(text.as_bytes()).map_err(git("writing a blob"))?;
        let mode = match (file.status, new, old) {
            (FileStatus::Deleted, _, Some((_, m))) => m,
            (_, Some((_, m)), _) => m,
            (_, None, Some((_, m))) => m,
            _ => 0o100644,
        };
        if old_path != file.path {
            updates.remove(&old_path);
        }
        updates.upsert(&file.path, blob, file_mode(mode));
    }
    if !changed {
        return Ok(Partial {
            tree: reviewed,
            left_out,
        });
    }
    let reviewed_tree = repo.find_tree(reviewed).map_err(git("reading a tree"))?;
    let tree = updates
        .create_updated(repo, &reviewed_tree)
        .map_err(git("building the tree to apply"))?;
    Ok(Partial { tree, left_out })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sandbox::diff::text_hunks;

    #[test]
    fn every_hunk_applied_gives_the_new_text_and_none_the_old() {
        let old = "a\nb\nc\nd\ne\nf\ng\nh\ni\nj\nk\nl\nm\n";
        let new = "A\nb\nc\nd\ne\nf\ng\nh\ni\nj\nk\nl\nM";
        let hunks = text_hunks(old, new);
        assert_eq!(hunks.len(), 2);
        let all: Vec<_> = hunks.iter().map(|h| (h, true)).collect();
        assert_eq!(apply_hunks(old, &all), new);
        let none: Vec<_> = hunks.iter().map(|h| (h, false)).collect();
        assert_eq!(apply_hunks(old, &none), old);
        let first: Vec<_> = hunks.iter().enumerate().map(|(i, h)| (h, i == 0)).collect();
        assert_eq!(
            apply_hunks(old, &first),
            "A\nb\nc\nd\ne\nf\ng\nh\ni\nj\nk\nl\nm\n"
        );
        let second: Vec<_> = hunks.iter().enumerate().map(|(i, h)| (h, i == 1)).collect();
        assert_eq!(
            apply_hunks(old, &second),
            "a\nb\nc\nd\ne\nf\ng\nh\ni\nj\nk\nl\nM"
        );
    }

    #[test]
    fn insertions_at_the_start_and_the_end_and_crlf_are_kept_exactly() {
        let old = "x\r\ny\r\n";
        let new = "top\r\nx\r\ny\r\nbottom\r\n";
        let hunks = text_hunks(old, new);
        let all: Vec<_> = hunks.iter().map(|h| (h, true)).collect();
        assert_eq!(apply_hunks(old, &all), new);
        let added = text_hunks("", "one\ntwo\n");
        assert_eq!(apply_hunks("", &[(&added[0], true)]), "one\ntwo\n");
    }

    /// A review of `(path, old text, new text, marks)` in resource `r`.
    fn review_of(files: &[(&str, &str, &str, &[Mark])]) -> Review {
        let mut out = Vec::new();
        let mut counts = super::super::Counts::default();
        for (path, old, new, marks) in files {
            let hunks = text_hunks(old, new);
            let diff = crate::sandbox::diff::FileDiff {
                path: (*path).to_string(),
                old_path: None,
                status: if old.is_empty() {
                    FileStatus::Added
                } else {
                    FileStatus::Modified
                },
                binary: false,
                old_size: None,
                new_size: None,
                old_mode: None,
                new_mode: None,
                additions: 0,
                deletions: 0,
                hunks,
                item_id: None,
                secrets: Vec::new(),
            };
            let mut items = super::super::items_of("r", &diff);
            for (item, mark) in items.iter_mut().zip(marks.iter()) {
                item.mark = *mark;
                if *mark == Mark::Rejected {
                    item.reason = Some("not now".into());
                }
                match mark {
                    Mark::Pending => counts.pending += 1,
                    Mark::Reviewed => counts.reviewed += 1,
                    Mark::Accepted => counts.accepted += 1,
                    Mark::Rejected => counts.rejected += 1,
                }
            }
            out.push(ReviewFile {
                resource: "r".into(),
                path: (*path).to_string(),
                old_path: None,
                status: diff.status,
                binary: false,
                additions: 0,
                deletions: 0,
                mark: Mark::Pending,
                items,
                diff,
            });
        }
        Review {
            plan_id: "p".into(),
            attempt: 1,
            counts,
            files: out,
        }
    }

    #[test]
    fn the_outline_names_what_apply_writes_and_leaves_out() {
        let old = "a\nb\nc\nd\ne\nf\ng\nh\ni\nj\nk\nl\nm\n";
        let new = "A\nb\nc\nd\ne\nf\ng\nh\ni\nj\nk\nl\nM\n";
        let all = Selection::new(&ApplyRequest::default()).unwrap();
        // Nothing marked: everything.
        let none = review_of(&[
            ("a.txt", old, new, &[Mark::Pending, Mark::Pending]),
            ("c.txt", "", "new\n", &[Mark::Pending]),
        ]);
        let (written, left_out) = outline(&none, &all);
        assert_eq!(
            written
                .iter()
                .map(|w| (w.path.as_str(), w.items, w.of, w.additions, w.deletions))
                .collect::<Vec<_>>(),
            [("a.txt", 2, 2, 2, 2), ("c.txt", 1, 1, 1, 0)]
        );
        assert!(left_out.is_empty());
        // Marked: only the accepted hunk; the rejected one with its reason, the pending file
        // as not accepted.
        let marked = review_of(&[
            ("a.txt", old, new, &[Mark::Accepted, Mark::Rejected]),
            ("c.txt", "", "new\n", &[Mark::Pending]),
        ]);
        let (written, left_out) = outline(&marked, &all);
        assert_eq!(
            written
                .iter()
                .map(|w| (w.path.as_str(), w.items, w.of, w.additions))
                .collect::<Vec<_>>(),
            [("a.txt", 1, 2, 1)]
        );
        assert_eq!(
            left_out
                .iter()
                .map(|l| (
                    l.path.as_str(),
                    l.what.as_str(),
                    l.why.as_str(),
                    l.reason.as_deref()
                ))
                .collect::<Vec<_>>(),
            [
                ("a.txt", "@@ -10,4 +10,4 @@", "rejected", Some("not now")),
                ("c.txt", "@@ -0,0 +1,1 @@", "not accepted", None),
            ]
        );
        // --exclude leaves whole files out even unmarked.
        let excluded = Selection::new(&ApplyRequest {
            exclude: vec!["a.*".into()],
            ..Default::default()
        })
        .unwrap();
        let (written, left_out) = outline(&none, &excluded);
        assert_eq!(written.len(), 1);
        assert_eq!(written[0].path, "c.txt");
        assert_eq!(left_out.len(), 2);
        assert!(
            left_out
                .iter()
                .all(|l| l.why == "excluded by --only/--exclude")
        );
    }

    #[test]
    fn globs_select_paths_and_bad_globs_are_named() {
        let s = Selection::new(&ApplyRequest {
            only: vec!["src/**".into()],
            exclude: vec!["*.lock".into()],
            ..Default::default()
        })
        .unwrap();
        assert!(s.includes("src/a/b.rs"));
        assert!(!s.includes("README.md"));
        assert!(!s.includes("src/Cargo.lock"));
        let bad = Selection::new(&ApplyRequest {
            only: vec!["src/[".into()],
            ..Default::default()
        });
        assert!(matches!(bad, Err(ReviewError::Glob { glob, .. }) if glob == "src/["));
    }
}
