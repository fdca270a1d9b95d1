//! Which decisions produced the lines of a diff hunk (lifecycle issue item 4: "diff hunks can
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
use crate::engine::store::Store;

/// What one step changed in one file: the texts of its added and removed lines.
#[derive(Debug, Default)]
struct StepLines {
    added: HashSet<String>,
    removed: HashSet<String>,
}

/// One step's own changes, per path.
struct StepChanges {
    decision_id: String,
    files: BTreeMap<String, StepLines>,
}

/// Fills `decision_ids` on every hunk of `files` (a diff of `sb` against its base).
///
/// # Errors
/// Store and git failures.
pub fn attribute(store: &Store, sb: &Sandbox, files: &mut [FileDiff]) -> Result<(), SandboxError> {
    if files.iter().all(|f| f.hunks.is_empty()) {
        return Ok(());
    }
    let steps = step_changes(store, sb)?;
    for file in files.iter_mut() {
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
            for step in &steps {
                let touched = [Some(&file.path), file.old_path.as_ref()]
                    .into_iter()
                    .flatten()
                    .filter_map(|p| step.files.get(p));
                let produced = touched.into_iter().any(|lines| {
                    added.iter().any(|t| lines.added.contains(*t))
                        || removed.iter().any(|t| lines.removed.contains(*t))
                });
                if produced && !hunk.decision_ids.contains(&step.decision_id) {
                    hunk.decision_ids.push(step.decision_id.clone());
                }
            }
        }
    }
    Ok(())
}

/// The own changes of every executed step in `sb`, in execution order.
fn step_changes(store: &Store, sb: &Sandbox) -> Result<Vec<StepChanges>, SandboxError> {
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
            files,
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
    let mut files = diff::sandbox_diff(sb, request)?;
    attribute(store, sb, &mut files)?;
    Ok(files)
}
