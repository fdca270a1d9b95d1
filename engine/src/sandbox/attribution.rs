//! Which decisions produced the lines of a diff hunk ("diff hunks can
//! name the decisions that produced them"; `decision_ids` on each json hunk).
//!
//! Execute checkpoints every step at its start and end, and each checkpoint names the decision
//! being executed. A step's own changes are the diff between its start and end checkpoints
//! (its start is the sandbox's base when the sandbox did not exist yet). A hunk of the plan's
//! diff is attributed to every step whose own changes, in the same file, added one of the
//! hunk's added lines or removed one of its removed lines (compared by text, so that line
//! numbers shifted by later steps do not matter). Discarded checkpoints (rolled back) count
//! for nothing; a step that ran several times counts with its last run. A hunk no step
//! produced (changes made outside steps, such as `agents tool run`) has no decision ids.

use std::collections::{BTreeMap, HashSet};

use git2::Oid;

use super::diff::{self, DiffRequest, FileDiff, LineKind};
use super::{Sandbox, SandboxError};
use crate::store::Store;

/// What one step changed in one file: the texts of its added and removed lines.
#[derive(Debug, Default)]
struct StepLines {
    added: HashSet<String>,
    removed: HashSet<String>,
}

/// One step's own changes, per path; `None` when they are the very diff being attributed
/// (the step went from the base to the current state), which then produced every hunk.
struct StepChanges {
    decision_id: String,
    files: Option<BTreeMap<String, StepLines>>,
}

/// The two trees of the diff being attributed, when it is the whole sandbox against its base.
#[derive(Debug, Clone, Copy)]
pub struct DiffTrees {
    /// The base commit's tree.
    pub base: Oid,
    /// The current state's tree.
    pub now: Oid,
}

/// Fills `decision_ids` on every hunk of `files` (a diff of `sb` against its base).
///
/// # Errors
/// Store and git failures.
pub fn attribute(store: &Store, sb: &Sandbox, files: &mut [FileDiff]) -> Result<(), SandboxError> {
    attribute_between(store, sb, files, None)
}

/// As [`attribute`], where `whole` names the trees `files` compares when it is the unfiltered
/// diff of the sandbox against its base: a step whose own changes are exactly that diff is then
/// not diffed again (it produced every hunk).
///
/// # Errors
/// Store and git failures.
pub fn attribute_between(
    store: &Store,
    sb: &Sandbox,
    files: &mut [FileDiff],
    whole: Option<DiffTrees>,
) -> Result<(), SandboxError> {
    if files.iter().all(|f| f.hunks.is_empty()) {
        return Ok(());
    }
    let steps = step_changes(store, sb, whole)?;
    for file in files.iter_mut() {
        attribute_file(&steps, file);
    }
    Ok(())
}

/// Fills `decision_ids` on every hunk of `file` from the own changes of `steps`.
fn attribute_file(steps: &[StepChanges], file: &mut FileDiff) {
    for hunk in &mut file.hunks {
        let added: Vec<&str> = hunk
            .lines
            .iter()
            .filter(|l| l.kind == LineKind::Added)
            .map(|l| l.text.as_str())
            .collect();
        let removed: Vec<&str> = hunk
            .lines
            .iter()
            .filter(|l| l.kind == LineKind::Removed)
            .map(|l| l.text.as_str())
            .collect();
        for step in steps {
            let produced = match &step.files {
                None => true,
                Some(step_files) => [Some(&file.path), file.old_path.as_ref()]
                    .into_iter()
                    .flatten()
                    .filter_map(|p| step_files.get(p))
                    .any(|lines| {
                        added.iter().any(|t| lines.added.contains(*t))
                            || removed.iter().any(|t| lines.removed.contains(*t))
                    }),
            };
            if produced && !hunk.decision_ids.contains(&step.decision_id) {
                hunk.decision_ids.push(step.decision_id.clone());
            }
        }
    }
}

/// The own changes of every executed step in `sb`, in execution order.
fn step_changes(
    store: &Store,
    sb: &Sandbox,
    whole: Option<DiffTrees>,
) -> Result<Vec<StepChanges>, SandboxError> {
    let plan_id = sb.record.plan_id;
    let checkpoints: Vec<_> = store
        .checkpoints(&plan_id)?
        .into_iter()
        .filter(|c| c.discarded_at.is_none() && c.decision_id.is_some())
        .collect();
    // decision -> (last start: its tree in this sandbox if it had one; the end tree after
    // it), in order of first appearance.
    let mut order: Vec<String> = Vec::new();
    let mut spans: BTreeMap<String, (Option<Option<String>>, Option<String>)> = BTreeMap::new();
    for cp in &checkpoints {
        let decision = cp.decision_id.clone().unwrap_or_default();
        if !order.contains(&decision) {
            order.push(decision.clone());
        }
        let tree = cp
            .states
            .iter()
            .find(|s| s.sandbox_id == sb.record.sandbox_id)
            .map(|s| s.tree_oid.clone());
        let span = spans.entry(decision).or_default();
        match cp.label.as_str() {
            "start" => *span = (Some(tree), None),
            "end" => span.1 = tree,
            _ => {}
        }
    }
    let repo = sb.repo()?;
    let base_tree = repo
        .find_commit(sb.base_commit()?)
        .and_then(|c| c.tree())
        .map_err(SandboxError::git("reading the base tree"))?
        .id();
    let parse = |hex: &str| Oid::from_str(hex).map_err(SandboxError::git("reading a checkpoint"));
    let request = DiffRequest {
        path: None,
        hunks: true,
    };
    let mut out = Vec::new();
    for decision in order {
        // No start checkpoint state: the sandbox did not exist before the step (it was
        // created lazily by the step's first tool call), so the step started from the base.
        let Some((start, Some(end))) = spans.remove(&decision) else {
            continue;
        };
        let start = match start.flatten() {
            Some(hex) => parse(&hex)?,
            None => base_tree,
        };
        let end = parse(&end)?;
        if start == end {
            continue;
        }
        if whole.is_some_and(|w| w.base == start && w.now == end) {
            out.push(StepChanges {
                decision_id: decision,
                files: None,
            });
            continue;
        }
        let mut files = BTreeMap::new();
        for f in diff::trees(&repo, Some(start), Some(end), &request)? {
            let mut lines = StepLines::default();
            for h in &f.hunks {
                for l in &h.lines {
                    match l.kind {
                        LineKind::Added => lines.added.insert(l.text.clone()),
                        LineKind::Removed => lines.removed.insert(l.text.clone()),
                        LineKind::Context => false,
                    };
                }
            }
            files.insert(f.path, lines);
        }
        out.push(StepChanges {
            decision_id: decision,
            files: Some(files),
        });
    }
    Ok(out)
}

/// The diff of `sb` against its base, with every hunk attributed to the decisions whose
/// steps produced it ([`attribute`]).
///
/// # Errors
/// Store, git and I/O failures.
pub fn attributed_diff(
    store: &Store,
    sb: &Sandbox,
    request: &DiffRequest,
) -> Result<Vec<FileDiff>, SandboxError> {
    let mut diff = diff::sandbox_diff_between(sb, request)?;
    let whole = request.path.is_none().then_some(DiffTrees {
        base: diff.base_tree,
        now: diff.now_tree,
    });
    attribute_between(store, sb, &mut diff.files, whole)?;
    Ok(diff.files)
}

/// As [`attributed_diff`], handing each attributed file to `each` on the thread that diffed
/// it ([`diff::trees_each`]), so that a caller turning every file into its output at once
/// (the json of `plan diff`) does that work on every core and never holds every file's lines.
/// The steps' own changes are read before the files are diffed (none when the sandbox has not
/// changed or no hunks are asked for).
///
/// # Errors
/// Store, git and I/O failures.
pub fn attributed_diff_each<T: Send>(
    store: &Store,
    sb: &Sandbox,
    request: &DiffRequest,
    each: &(dyn Fn(FileDiff) -> T + Sync),
) -> Result<Vec<T>, SandboxError> {
    let _lock = sb.lock()?;
    let repo = sb.repo()?;
    let base = diff::base_tree(&repo, sb)?;
    let now = super::checkpoint::snapshot(&repo)?;
    let whole = request
        .path
        .is_none()
        .then_some(DiffTrees { base, now });
    let steps = if request.hunks && base != now {
        step_changes(store, sb, whole)?
    } else {
        Vec::new()
    };
    diff::trees_each(&repo, Some(base), Some(now), request, &|mut file| {
        attribute_file(&steps, &mut file);
        each(file)
    })
}
