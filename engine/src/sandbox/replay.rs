//! Replaying an unaffected step after a correction: its recorded delta (end
//! checkpoint minus start checkpoint, per sandbox) is three-way merged into the sandbox's
//! current state with git2's tree merge: ancestor = the old start tree, ours = the sandbox
//! now, theirs = the old end tree. No model and no tool is called. A conflict in any sandbox
//! changes nothing and is reported, so the caller re-runs the step instead.

use git2::{MergeOptions, Oid};
use serde::Serialize;
use serde_json::Value;

use super::checkpoint;
use super::{CheckpointId, SandboxError, Sandboxes};
use crate::domain::id::Id;
use crate::store::Store;

/// What a replay did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "replay", rename_all = "snake_case")]
pub enum Replayed {
    /// The delta merged cleanly into every sandbox it touched.
    Merged {
        /// Resources whose sandbox changed.
        resources: Vec<String>,
    },
    /// The delta conflicts with the corrected work; nothing was changed.
    Conflict {
        /// `resource:path` of each conflicting file.
        paths: Vec<String>,
    },
    /// The recorded checkpoints are gone (a rollback or cleanup removed them); the step must
    /// re-run.
    Unavailable {
        /// Why.
        reason: String,
    },
}

fn cp(
    store: &Store,
    replay: &Value,
    key: &str,
) -> Result<Option<checkpoint::CheckpointRecord>, SandboxError> {
    match replay
        .get(key)
        .and_then(Value::as_str)
        .and_then(|s| s.parse::<CheckpointId>().ok())
    {
        Some(id) => Ok(store.checkpoint(&id)?),
        None => Ok(None),
    }
}

/// Replays the delta recorded in `replay` (`{"start": cp, "end": cp}`) into the plan's
/// sandboxes. All merges are computed first; only when every sandbox merges cleanly are the
/// results written (each sandbox's work tree set to its merged tree, verified by tree hash).
///
/// # Errors
/// Git, I/O and store errors as [`SandboxError`].
pub fn replay(
    store: &Store,
    sandboxes: &Sandboxes,
    plan_id: &Id,
    replay: &Value,
) -> Result<Replayed, SandboxError> {
    let Some(end) = cp(store, replay, "end")? else {
        return Ok(Replayed::Unavailable {
            reason: "the step's end checkpoint is not recorded".into(),
        });
    };
    let start = cp(store, replay, "start")?;
    let active = sandboxes.active(store, plan_id)?;
    let mut merged = Vec::new();
    let mut conflicts = Vec::new();
    let mut locks = Vec::new();
    for state in &end.states {
        let Some(sb) = active
            .iter()
            .find(|s| s.record.sandbox_id == state.sandbox_id)
        else {
            return Ok(Replayed::Unavailable {
                reason: format!("sandbox {} is no longer active", state.sandbox_id),
            });
        };
        locks.push(sb.lock()?);
        let repo = sb.repo()?;
        let theirs_id =
            Oid::from_str(&state.tree_oid).map_err(SandboxError::git("reading a tree id"))?;
        let ancestor_id = match start
            .as_ref()
            .and_then(|s| s.states.iter().find(|x| x.sandbox_id == state.sandbox_id))
        {
            Some(s) => {
                Oid::from_str(&s.tree_oid).map_err(SandboxError::git("reading a tree id"))?
            }
            None => repo
                .find_commit(sb.base_commit()?)
                .and_then(|c| c.tree())
                .map_err(SandboxError::git("reading the base tree"))?
                .id(),
        };
        if ancestor_id == theirs_id {
            continue;
        }
        let ours_id = checkpoint::snapshot(&repo)?;
        let find = |oid: Oid| {
            repo.find_tree(oid)
                .map_err(SandboxError::git("reading a recorded tree"))
        };
        let (ancestor, ours, theirs) = (find(ancestor_id)?, find(ours_id)?, find(theirs_id)?);
        let mut opts = MergeOptions::new();
        opts.find_renames(true);
        let mut index = repo
            .merge_trees(&ancestor, &ours, &theirs, Some(&opts))
            .map_err(SandboxError::git("merging the recorded delta"))?;
        if index.has_conflicts() {
            for c in index
                .conflicts()
                .map_err(SandboxError::git("reading merge conflicts"))?
                .flatten()
            {
                let path = c
                    .our
                    .as_ref()
                    .or(c.their.as_ref())
                    .or(c.ancestor.as_ref())
                    .map(|e| String::from_utf8_lossy(&e.path).into_owned())
                    .unwrap_or_default();
                conflicts.push(format!("{}:{path}", sb.record.resource_name));
            }
            continue;
        }
        let tree = index
            .write_tree_to(&repo)
            .map_err(SandboxError::git("writing the merged tree"))?;
        if tree != ours_id {
            merged.push((sb.clone(), tree));
        }
    }
    if !conflicts.is_empty() {
        conflicts.sort();
        return Ok(Replayed::Conflict { paths: conflicts });
    }
    let mut resources = Vec::new();
    for (sb, tree) in merged {
        let repo = sb.repo()?;
        let tree_obj = repo
            .find_tree(tree)
            .map_err(SandboxError::git("reading the merged tree"))?;
        let head = repo
            .find_reference(crate::sandbox::PLAN_REF)
            .and_then(|r| r.peel_to_commit())
            .map_err(SandboxError::git("reading the plan branch"))?;
        let sig = crate::sandbox::signature()?;
        let commit = repo
            .commit(
                None,
                &sig,
                &sig,
                "Replay of a step's recorded delta after a correction",
                &tree_obj,
                &[&head],
            )
            .map_err(SandboxError::git("committing the replayed tree"))?;
        checkpoint::restore(&sb, commit)?;
        resources.push(sb.record.resource_name.clone());
    }
    drop(locks);
    Ok(Replayed::Merged { resources })
}
