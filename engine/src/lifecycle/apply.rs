//! The Apply phase (spec section 13): the plan's sandboxes are merged into the real resources,
//! all or nothing, committing exactly the trees the user reviewed. `docs/apply.md` is the
//! user's account of it; the order is:
//!
//! 1. A journal an interrupted Apply left is rolled back ([`recover`], which also runs at the
//!    start of every command on the plan, `plan cancel` included).
//! 2. The target tree per resource is the one recorded with the apply gate when Execute
//!    finished (what the user reviews); the sandbox must still hold exactly that tree.
//! 3. Every resource is decided before anything is written ([`decide`]): git locks, branch,
//!    merge with the tip, symbolic links and files on path prefixes, uncommitted changes
//!    through git's filters, what stands where a directory or file goes, free space.
//! 4. Required validations run on the merged trees.
//! 5. The journals of every resource are stored in one transaction; every resource is staged
//!    (objects, commit, filtered files in a journal directory); then every resource is
//!    committed (work tree file by file, index, branch compare-and-swap) ([`journal`]).
//! 6. Any failure rolls back the failing resource and every one committed before it; the
//!    journals are marked complete in one transaction at the end (the commit point).
//!
//! Any refusal or failure leaves every real resource byte-identical and the plan at apply /
//! errored with its sandboxes kept.

mod clean;
pub mod decide;
pub mod journal;
mod staging;
mod unfiltered;
#[cfg(test)]
mod write_tests;

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::time::Instant;

use git2::{Oid, Repository};
use jiff::Timestamp;
use serde::Serialize;
use serde_json::{Value, json};

use super::ended::Ended;
use super::state::{self, commit};
use super::trees::{current_tree, materialize, reviewed_trees};
use super::validations::{self, ValidationRun};
use super::{Lifecycle, RunError};
use crate::domain::approval::ApprovalStatus;
use crate::domain::event::{ApplyComplete, ApplyStarted};
use crate::domain::{Id, Phase, Plan, ProcessingState};
use crate::events::EventKind;
use crate::sandbox::diff::{DiffRequest, FileDiff};
use crate::sandbox::{Sandbox, Sandboxes};
use crate::store::lifecycle_run::{BaseKind, Journal, JournalEntry, JournalStatus, PlanBase};
use decide::Decided;
use journal::{BranchUndo, EntryOp, UndoEntry};

/// What `plan apply` shows before asking: per resource, the files and line counts.
#[derive(Debug, Clone, Serialize, serde::Deserialize, schemars::JsonSchema)]
pub struct Preview {
    /// Resource name.
    pub resource: String,
    /// `(status letter, path, added, removed)`.
    pub files: Vec<(String, String, u64, u64)>,
}

fn sha256(bytes: &[u8]) -> String {
    crate::sandbox::confined::sha256_hex(bytes)
}

fn refused(message: String) -> RunError {
    RunError::Invalid(message)
}

/// The files that differ between two trees of `repo`, with their line counts, as `plan diff`
/// lists them (renames paired; no hunks kept).
fn changed_files(repo: &Repository, old: Oid, new: Oid) -> Result<Vec<FileDiff>, RunError> {
    let request = DiffRequest {
        path: None,
        hunks: false,
    };
    Ok(crate::sandbox::diff::trees(
        repo,
        Some(old),
        Some(new),
        &request,
    )?)
}

/// The changed files per resource, for the confirmation (`plan apply` before asking): the
/// target trees (the reviewed ones) against the plan's base.
///
/// # Errors
/// Sandbox and store errors.
pub fn preview(engine: &Lifecycle, plan: &Plan) -> Result<Vec<Preview>, RunError> {
    let sbs = engine.sandboxes();
    let reviewed = reviewed_trees(engine, &plan.plan_id)?;
    let mut out = Vec::new();
    for sb in sbs.active(engine.store(), &plan.plan_id)? {
        let repo = sb.repo()?;
        let base_tree = base_tree(&sb)?;
        let target = match reviewed.get(&sb.record.resource_name) {
            Some(t) => *t,
            None => current_tree(&sb)?,
        };
        // Listed as `plan diff` lists them: a moved file is one renamed file.
        let files = changed_files(&repo, base_tree, target)?
            .into_iter()
            .map(|f| {
                let path = match &f.old_path {
                    Some(old) => format!("{old} -> {}", f.path),
                    None => f.path.clone(),
                };
                (
                    f.status.letter().to_string(),
                    path,
                    f.additions,
                    f.deletions,
                )
            })
            .collect();
        out.push(Preview {
            resource: sb.record.resource_name.clone(),
            files,
        });
    }
    Ok(out)
}

fn git_err(e: git2::Error) -> RunError {
    RunError::Sandbox(e.message().to_string())
}

fn base_tree(sb: &Sandbox) -> Result<Oid, RunError> {
    let repo = sb.repo()?;
    Ok(repo
        .find_commit(sb.base_commit()?)
        .map_err(git_err)?
        .tree_id())
}

/// Refuses when `resource` had a sandbox that is released or removed (by `plan cleanup`,
/// or after the retention period): what its steps wrote is gone, so an Apply of the rest
/// would report the plan applied without its changes.
fn sandbox_gone(engine: &Lifecycle, plan_id: &Id, resource: &str) -> Result<(), RunError> {
    let Some(record) = engine.store().sandbox(plan_id, resource)? else {
        return Ok(());
    };
    let Some(when) = record.removed_at.or(record.released_at) else {
        return Ok(());
    };
    Err(refused(format!(
        // A command inside a sentence stays (D-commands-2): it explains the error rather than suggesting the next step.
        "{resource}: the plan's sandbox was removed at {when} (by `agents plan cleanup` or after the retention period), with the changes its steps made; nothing was applied. Run the action again with `agents plan use`"
    )))
}

/// Refuses when the sandbox no longer holds the reviewed tree, naming what changed.
fn check_reviewed(sb: &Sandbox, reviewed: Oid, plan_id: &Id) -> Result<(), RunError> {
    let now = current_tree(sb)?;
    if now == reviewed {
        return Ok(());
    }
    let repo = sb.repo()?;
    let changed: Vec<String> = decide::tree_changes(&repo, reviewed, now)?
        .into_iter()
        .map(|c| c.path)
        .collect();
    Err(refused(format!(
        // A command inside a sentence stays (D-commands-2): it explains the error rather than suggesting the next step.
        "{}: the sandbox changed after the changes were reviewed ({}: {}); Apply commits only what was reviewed, so nothing was applied. A process a step started may still be running in the sandbox, or it was edited by hand (`agents plan shell`): stop it, then restore the reviewed state with `agents plan checkpoints {plan_id}` and `agents plan rollback {plan_id} <checkpoint>`, or run the plan again",
        sb.record.resource_name,
        if changed.len() == 1 { "file" } else { "files" },
        changed.join(", ")
    )))
}

fn fail(
    engine: &mut Lifecycle,
    plan: &mut Plan,
    code: &str,
    message: String,
    details: Value,
) -> Result<Ended, RunError> {
    state::errored(engine.store_mut(), plan, code, &message, details)?;
    engine.flush(&plan.plan_id)?;
    Ok(Ended::Errored {
        code: code.to_string(),
        message,
    })
}

/// Takes an exclusive, non-blocking lock per target resource (a locked directory under
/// `<data dir>/locks/apply/`, keyed by the resource's path), so two plans never write the same
/// checkout or directory at once.
///
/// # Errors
/// [`RunError::ResourceBusy`] when another process holds one; I/O errors as
/// [`RunError::Sandbox`].
fn lock_resources(
    engine: &Lifecycle,
    plan_id: &Id,
) -> Result<Vec<crate::safe_write::DirLock>, RunError> {
    let targets: Vec<(String, String)> = engine
        .store()
        .plan_bases(plan_id)?
        .into_iter()
        .map(|b| (b.resource_name, b.path))
        .collect();
    lock_paths(
        &engine.paths().data_dir.join("locks").join("apply"),
        &targets,
    )
}

/// Locks one directory under `root` per `(resource name, path)`; see [`lock_resources`].
fn lock_paths(
    root: &Path,
    targets: &[(String, String)],
) -> Result<Vec<crate::safe_write::DirLock>, RunError> {
    let mut locks = Vec::new();
    for (name, path) in targets {
        let dir = root.join(&sha256(path.as_bytes())[..16]);
        match crate::safe_write::try_lock_dir(&dir) {
            Ok(Some(lock)) => locks.push(lock),
            Ok(None) => {
                return Err(RunError::ResourceBusy {
                    resource: name.clone(),
                });
            }
            Err(e) => return Err(RunError::Sandbox(format!("{}: {e}", dir.display()))),
        }
    }
    Ok(locks)
}

/// Runs Apply for a plan at (execute, complete) or (apply, queued|errored). `no_commit`
/// writes the changes to the working tree without committing.
///
/// # Errors
/// Store and sandbox errors; refusals are [`Ended::Errored`] with nothing written.
pub fn run(engine: &mut Lifecycle, plan: &mut Plan, no_commit: bool) -> Result<Ended, RunError> {
    let started = Instant::now();
    let plan_id = plan.plan_id;
    let sbs = engine.sandboxes();
    // One apply per resource at a time: held until this function returns.
    let _resource_locks = lock_resources(engine, &plan_id)?;
    // Spec 12, prevention: the whole changeset against the effective invariants, first.
    let violations = super::invariant_checks::before_apply(engine, plan, &sbs)?;
    if !violations.is_empty() {
        return Ok(Ended::Awaiting(violations));
    }
    if plan.phase() == Phase::Execute {
        plan.status
            .advance(Phase::Apply)
            .map_err(|e| RunError::WrongState {
                phase: plan.phase(),
                state: plan.state(),
                message: e.to_string(),
                hints: Vec::new(),
            })?;
    }
    state::set_state(plan, ProcessingState::Processing)?;
    plan.error_code = None;
    plan.error_message = None;
    let snapshot_plan = plan.clone();
    let reviewed: serde_json::Map<String, Value> = reviewed_trees(engine, &plan_id)?
        .into_iter()
        .map(|(k, v)| (k, json!(v.to_string())))
        .collect();
    commit(
        engine.store_mut(),
        plan,
        EventKind::ApplyStarted(ApplyStarted {
            attempt: snapshot_plan.status.attempt,
            no_commit,
        }),
        |tx| {
            state::resolve_pending(
                tx,
                &snapshot_plan,
                Some("phase_gate"),
                ApprovalStatus::Approved,
                &json!({"answered_by": "apply", "trees": reviewed}),
            )?;
            state::resolve_pending(
                tx,
                &snapshot_plan,
                Some("errored"),
                ApprovalStatus::Approved,
                &json!({"answer": "retry"}),
            )?;
            state::reason(tx, &snapshot_plan, None)
        },
    )?;
    engine.flush(&plan_id)?;

    let rolled_back = recover_pending(engine, &plan_id)?;
    if !rolled_back.is_empty() {
        engine.observer().progress(&format!(
            "Apply: an interrupted apply was rolled back ({})",
            rolled_back.join("; ")
        ));
    }
    let request = engine.apply_request().clone();
    let selection = match crate::review::partial::Selection::new(&request) {
        Ok(s) => s,
        Err(e) => return fail(engine, plan, "APPLY_REFUSED", e.to_string(), Value::Null),
    };
    let review = crate::review::load_for_apply(
        engine.store(),
        &sbs,
        plan,
        &reviewed_trees(engine, &plan_id)?,
        &selection,
    )
    .map_err(|e| RunError::Sandbox(e.to_string()))?;
    let (targets, left_out, effective) =
        match decide_all(engine, plan, &sbs, &review, &selection).map_err(|b| *b) {
            Ok(t) => t,
            Err((RunError::Invalid(message), resource)) => {
                return fail(
                    engine,
                    plan,
                    "APPLY_REFUSED",
                    message,
                    json!({"resource": resource}),
                );
            }
            Err((e, resource)) => {
                return fail(
                    engine,
                    plan,
                    "APPLY_FAILED",
                    format!(
                        "{resource}: checking before writing failed: {}; nothing was applied",
                        plain(&e)
                    ),
                    json!({"resource": resource}),
                );
            }
        };
    let validations = run_validations(engine, plan, &sbs, &targets, &effective)?;
    if let Some(f) = validations.iter().find(|v| v.required && !v.passed) {
        let message = format!(
            "required validation `{}` failed on the merged tree ({}); nothing was applied",
            f.command, f.result
        );
        let mut summary = plan.validation_summary.clone().unwrap_or(json!({}));
        summary["apply"] = json!(validations);
        plan.validation_summary = Some(summary);
        return fail(
            engine,
            plan,
            "VALIDATION_FAILED",
            message,
            json!({"validations": validations}),
        );
    }
    let message = commit_message(engine, plan, &left_out)?;
    let written = match write_all(engine, &plan_id, &targets, &message, no_commit)? {
        Ok(w) => w,
        Err(message) => return fail(engine, plan, "APPLY_FAILED", message, Value::Null),
    };
    let usage = engine.store().usage_for_plan(&plan_id)?;
    let summary = ApplyComplete {
        resources: json!(written),
        files: targets.iter().map(|t| t.files).sum(),
        additions: targets.iter().map(|t| t.additions).sum(),
        deletions: targets.iter().map(|t| t.deletions).sum(),
        validations: json!(validations),
        duration_ms: started.elapsed().as_millis() as u64,
        cost_usd: usage.cost_usd,
        tokens: usage.input_tokens + usage.output_tokens,
        committed: !no_commit,
        git_hooks: "not run".into(),
        trees: reviewed_tree_ids(&targets),
        left_out: json!(left_out),
        remainder: (!left_out.is_empty()).then(|| {
            if request.discard_rest {
                "discarded"
            } else {
                "kept in the sandbox"
            }
            .into()
        }),
    };
    let keep = !left_out.is_empty() && !request.discard_rest;
    finish(engine, plan, &sbs, summary, keep)
}

/// The note of the commit message: who applied it and, after a partial Apply, every item
/// left out (`docs/review.md`).
fn commit_note(left_out: &[crate::review::partial::LeftOut]) -> String {
    let mut note = "Applied by CleverAgents (git hooks were not run).".to_string();
    if left_out.is_empty() {
        return note;
    }
    note.push_str("\n\nLeft out (kept out of this commit):");
    for l in left_out {
        note.push_str(&format!("\n- {} {} ({})", l.path, l.what, l.why));
        if let Some(r) = &l.reason {
            note.push_str(&format!(": {r}"));
        }
    }
    note
}

/// What [`decide_all`] returns: the writes, the items left out and the tree each resource
/// ends at.
type DecidedAll = (
    Vec<Target>,
    Vec<crate::review::partial::LeftOut>,
    BTreeMap<String, Oid>,
);

/// The reviewed tree of each target, by resource, as `apply_complete` reports it.
fn reviewed_tree_ids(targets: &[Target]) -> serde_json::Map<String, Value> {
    targets
        .iter()
        .map(|t| {
            (
                t.decided.base.resource_name.clone(),
                json!(t.reviewed.to_string()),
            )
        })
        .collect()
}

/// One resource to write: its decided write and what the summary reports.
struct Target {
    decided: Decided,
    /// The reviewed tree (before the merge with the tip).
    reviewed: Oid,
    /// The URL of the repository the commit lands in (a repository by URL, worked on in the
    /// engine's clone of it).
    remote: Option<String>,
    /// Files, added and removed lines written, as `plan diff` counts them.
    files: u64,
    additions: u64,
    deletions: u64,
}

/// Decides every resource (step 3 of the module documentation). A resource whose merged tree
/// equals what it already has is left out (no empty commit).
fn decide_all(
    engine: &Lifecycle,
    plan: &Plan,
    sbs: &Sandboxes,
    review: &crate::review::Review,
    selection: &crate::review::partial::Selection,
) -> Result<DecidedAll, Box<(RunError, String)>> {
    let plan_id = plan.plan_id;
    let bases = engine
        .store()
        .plan_bases(&plan_id)
        .map_err(|e| (e.into(), String::new()))?;
    let reviewed = reviewed_trees(engine, &plan_id).map_err(|e| (e, String::new()))?;
    engine
        .observer()
        .progress("Apply: checking every resource before writing");
    let mut out = Vec::new();
    let mut left_out = Vec::new();
    let mut effective = BTreeMap::new();
    for base in &bases {
        let with = |e: RunError| Box::new((e, base.resource_name.clone()));
        let Some(sb) = sbs
            .existing(engine.store(), &plan_id, &base.resource_name)
            .map_err(|e| with(e.into()))?
        else {
            // No sandbox was ever made for a resource no step changed; one that was made
            // and is gone held changes that can no longer be committed.
            sandbox_gone(engine, &plan_id, &base.resource_name).map_err(with)?;
            continue;
        };
        let target = match reviewed.get(&base.resource_name) {
            Some(t) => {
                check_reviewed(&sb, *t, &plan_id).map_err(with)?;
                *t
            }
            None => current_tree(&sb).map_err(with)?,
        };
        let base_tree = base_tree(&sb).map_err(with)?;
        let sr = sb.repo().map_err(|e| with(e.into()))?;
        // Only the accepted part of the review (all of it when nothing is marked).
        let partial = crate::review::partial::build(
            &sr,
            &base.resource_name,
            base_tree,
            target,
            review,
            selection,
        )
        .map_err(|e| with(RunError::Sandbox(e.to_string())))?;
        left_out.extend(partial.left_out);
        let target = partial.tree;
        effective.insert(base.resource_name.clone(), target);
        if target == base_tree {
            continue;
        }
        // A known key in the result reaches the user's project only when allowed
        // (docs/sandbox.md "Secrets in a change").
        if !engine.apply_request().allow_secrets
            && let Some((path, var)) = crate::redact::find_in_diff(&sr, base_tree, target)
                .map_err(|e| with(RunError::Sandbox(e.message().to_string())))?
        {
            return Err(with(RunError::Invalid(format!(
                "{path} in {} contains the value of {var}; remove the key from the file (or correct the step that wrote it) and apply again, or write it as it is with `plan apply --allow-secrets`",
                base.resource_name
            ))));
        }
        let remote = check_remote(engine, base).map_err(with)?;
        let decided = match base.kind {
            BaseKind::GitCheckout => decide::git(base, &sr, target),
            BaseKind::Directory => decide::dir(base, &sr, base_tree, target),
        }
        .map_err(with)?;
        if decided.changes.is_empty() {
            engine.observer().progress(&format!(
                "Apply: {} already has these changes; nothing to write",
                base.resource_name
            ));
            continue;
        }
        // What the summary reports is what Apply writes (from the tip it found to the tree it
        // commits), counted as `plan diff` counts: a moved file is one file.
        let (old, new) = match &decided.git {
            Some(g) => (
                sr.find_commit(g.tip)
                    .map_err(|e| with(git_err(e)))?
                    .tree_id(),
                g.tree,
            ),
            None => (base_tree, target),
        };
        let stats = crate::sandbox::diff::stats(&changed_files(&sr, old, new).map_err(with)?);
        out.push(Target {
            decided,
            reviewed: target,
            remote,
            files: stats.files_changed,
            additions: stats.additions,
            deletions: stats.deletions,
        });
    }
    Ok((out, left_out, effective))
}

/// The URL of `base`'s repository when it is a repository by URL, after checking that its
/// branch still points at the plan's base: the commit lands there only on that base.
fn check_remote(engine: &Lifecycle, base: &PlanBase) -> Result<Option<String>, RunError> {
    let Some(url) = crate::sandbox::remote::url_of(engine.store(), &base.resource_name)? else {
        return Ok(None);
    };
    crate::sandbox::remote::check_unmoved(
        &base.resource_name,
        &url,
        base.branch.as_deref().unwrap_or_default(),
        base.base_commit.as_deref().unwrap_or_default(),
    )
    .map_err(RunError::Invalid)?;
    Ok(Some(url))
}

/// Lands each commit written to a clone of a repository by URL on the repository's branch,
/// while the branch still points at the commit's parent. On a failure the branches landed
/// before it are set back (each only while it still points at the new commit) and the
/// sentence to show is returned.
fn land_remotes(targets: &[Target], commits: &[Option<Oid>]) -> Result<(), String> {
    let mut landed: Vec<(&Target, String)> = Vec::new();
    for (t, c) in targets.iter().zip(commits) {
        let (Some(url), Some(git)) = (&t.remote, &t.decided.git) else {
            continue;
        };
        let name = &t.decided.base.resource_name;
        let Some(c) = c else {
            return Err(format!(
                "{name} is a repository by URL: `--no-commit` has no work tree there to write to; nothing was applied. Apply with a commit, or `plan export --branch NAME`"
            ));
        };
        let clone = Path::new(&t.decided.base.path);
        let tip = git.tip.to_string();
        let pushed = crate::sandbox::remote::push(clone, url, &git.branch, &c.to_string(), Some(&tip));
        if let Err(e) = pushed {
            for (done, commit) in &landed {
                let g = done.decided.git.as_ref().map(|g| (g.branch.as_str(), g.tip.to_string()));
                if let (Some(url), Some((branch, old))) = (&done.remote, g) {
                    let path = Path::new(&done.decided.base.path);
                    if let Err(e) = crate::sandbox::remote::push(path, url, branch, &old, Some(commit)) {
                        tracing::warn!(error = %e, url, "a landed commit could not be set back");
                    }
                }
            }
            return Err(format!(
                "{name}: the commit could not land on branch {} of {url} ({e}); nothing was applied. Run `agents plan status` and apply again",
                git.branch
            ));
        }
        landed.push((t, c.to_string()));
    }
    Ok(())
}

/// Required and informational validations on the merged trees (a copy in the data directory).
fn run_validations(
    engine: &mut Lifecycle,
    plan: &Plan,
    sbs: &Sandboxes,
    targets: &[Target],
    effective: &BTreeMap<String, Oid>,
) -> Result<Vec<ValidationRun>, RunError> {
    let plan_id = plan.plan_id;
    let check_root = sbs.plan_dir(&plan_id).join("apply-check");
    let tmp = check_root.join("tmp");
    let mut all = Vec::new();
    for base in engine.store().plan_bases(&plan_id)? {
        if !validations::any_for(engine, plan, &base.resource_name)? {
            continue;
        }
        let Some(sb) = sbs.existing(engine.store(), &plan_id, &base.resource_name)? else {
            continue;
        };
        engine
            .observer()
            .progress("Apply: running validations on the merged tree");
        let dir = check_root.join(base.resource_name.replace(['/', ':'], "_"));
        let target = targets
            .iter()
            .find(|t| t.decided.base.resource_name == base.resource_name);
        let tree = match target {
            Some(t) => t.decided.git.as_ref().map_or(t.reviewed, |g| g.tree),
            None => match effective.get(&base.resource_name) {
                Some(tree) => *tree,
                None => current_tree(&sb)?,
            },
        };
        materialize(&sb.repo()?, tree, &dir)?;
        fs::create_dir_all(&tmp).map_err(|e| RunError::Sandbox(e.to_string()))?;
        all.extend(validations::run_in_dir(
            engine,
            plan,
            &base.resource_name,
            &dir,
            &tmp,
        )?);
    }
    let _ = fs::remove_dir_all(&check_root);
    Ok(all)
}

/// The journal of one decided write: its entries in write order.
fn journal_of(plan_id: Id, d: &Decided, commit: Option<Oid>) -> Journal {
    let id = |side: Option<(Oid, i32)>| side.map(|(o, _)| o.to_string());
    let file = |c: &decide::Change| JournalEntry {
        path: c.path.clone(),
        base_id: id(c.old),
        new_id: id(c.new),
        op: EntryOp::File,
    };
    let dir = |p: &String, op| JournalEntry {
        path: p.clone(),
        base_id: None,
        new_id: None,
        op,
    };
    let mut entries: Vec<JournalEntry> = d
        .changes
        .iter()
        .filter(|c| c.new.is_none())
        .map(file)
        .collect();
    entries.extend(d.rmdirs.iter().map(|p| dir(p, EntryOp::RemoveDir)));
    entries.extend(d.mkdirs.iter().map(|p| dir(p, EntryOp::MakeDir)));
    entries.extend(d.changes.iter().filter(|c| c.new.is_some()).map(file));
    Journal {
        journal_id: Id::generate(),
        plan_id,
        resource_name: d.base.resource_name.clone(),
        kind: d.base.kind,
        path: d.base.path.clone(),
        status: JournalStatus::Pending,
        entries,
        commit_id: commit.map(|c| c.to_string()),
        created_at: Timestamp::now(),
    }
}

/// Where a journal's directory is, and how to undo its branch move.
fn undo_of(engine: &Lifecycle, j: &Journal, branch: Option<&str>) -> (PathBuf, Option<BranchUndo>) {
    let root = Path::new(&j.path);
    let git_dir = match j.kind {
        BaseKind::GitCheckout => Repository::open(root).ok().map(|r| r.path().to_path_buf()),
        BaseKind::Directory => None,
    };
    let jdir = journal::jdir(
        git_dir.as_deref(),
        &engine.paths().data_dir,
        &j.journal_id.to_string(),
    );
    let undo = git_dir.map(|git_dir| {
        let new_commit = j.commit_id.as_deref().and_then(|c| Oid::from_str(c).ok());
        let old_tip = new_commit
            .and_then(|c| {
                Repository::open(root)
                    .ok()?
                    .find_commit(c)
                    .ok()?
                    .parent_id(0)
                    .ok()
            })
            .unwrap_or(Oid::ZERO_SHA1);
        BranchUndo {
            git_dir,
            branch: branch.unwrap_or_default().to_string(),
            old_tip,
            new_commit,
        }
    });
    (jdir, undo)
}

fn undo_entries(j: &Journal) -> Vec<UndoEntry> {
    j.entries
        .iter()
        .map(|e| UndoEntry {
            path: e.path.clone(),
            op: e.op,
            writes: e.new_id.is_some(),
        })
        .collect()
}

/// Rolls one journal back; returns what had to be left (see [`journal::rollback`]).
fn rollback_one(
    engine: &Lifecycle,
    j: &Journal,
    branch: Option<&str>,
) -> Result<Vec<String>, RunError> {
    let (jdir, undo) = undo_of(engine, j, branch);
    journal::rollback(
        Path::new(&j.path),
        &jdir,
        &j.journal_id.to_string(),
        &undo_entries(j),
        undo.as_ref(),
    )
}

/// Steps 5 and 6 of the module documentation. `Ok(Err(message))` is a failure after which
/// every resource is as it was.
fn write_all(
    engine: &mut Lifecycle,
    plan_id: &Id,
    targets: &[Target],
    message: &str,
    no_commit: bool,
) -> Result<Result<Vec<Value>, String>, RunError> {
    // Ids first: the journal directory is named after the journal.
    let mut journals: Vec<Journal> = targets
        .iter()
        .map(|t| journal_of(*plan_id, &t.decided, None))
        .collect();
    let jdirs: Vec<PathBuf> = journals
        .iter()
        .zip(targets)
        .map(|(j, t)| {
            journal::jdir(
                t.decided.git.as_ref().map(|g| g.git_dir.as_path()),
                &engine.paths().data_dir,
                &j.journal_id.to_string(),
            )
        })
        .collect();
    // The journals first (one transaction), so a kill from here on is rolled back.
    engine.store_mut().insert_journals(&journals)?;
    let ids: Vec<Id> = journals.iter().map(|j| j.journal_id).collect();
    // Stage everything (objects, commits, filtered files): a failure here leaves nothing to
    // undo but the staging (its directories and the files staged beside their targets).
    let mut commits = Vec::new();
    for ((t, jdir), j) in targets.iter().zip(&jdirs).zip(&journals) {
        engine.observer().progress(&format!(
            "Apply: staging {} file(s) of {}",
            t.decided.changes.len(),
            t.decided.base.resource_name
        ));
        match journal::stage(&t.decided, jdir, &j.journal_id.to_string(), message, no_commit) {
            Ok(c) => commits.push(c),
            Err(e) => {
                for ((t, jdir), j) in targets.iter().zip(&jdirs).zip(&journals) {
                    journal::unstage(&t.decided, jdir, &j.journal_id.to_string());
                }
                engine
                    .store_mut()
                    .finish_journals(&ids, JournalStatus::Stopped)?;
                return Ok(Err(format!(
                    // A command inside a sentence stays (D-commands-2): it explains the error rather than suggesting the next step.
                    "{}: staging the new files failed: {}; nothing was applied, every resource is as it was. Fix the cause and run `agents plan apply {plan_id}` again",
                    t.decided.base.resource_name,
                    plain(&e)
                )));
            }
        }
    }
    for (j, c) in journals.iter_mut().zip(&commits) {
        j.commit_id = c.map(|c| c.to_string());
        if let Some(c) = c {
            engine
                .store_mut()
                .set_journal_commit(&j.journal_id, &c.to_string())?;
        }
    }
    for (i, ((t, jdir), j)) in targets.iter().zip(&jdirs).zip(&journals).enumerate() {
        engine.observer().progress(&format!(
            "Apply: writing {} file(s) to {}",
            t.decided.changes.len(),
            t.decided.base.resource_name
        ));
        if let Err(e) = journal::commit(&t.decided, jdir, &j.journal_id.to_string(), commits[i]) {
            let kept = roll_back_written(engine, targets, &journals, &jdirs, i)?;
            engine
                .store_mut()
                .finish_journals(&ids, JournalStatus::Stopped)?;
            let others = if i > 0 {
                format!(
                    " ({} resource(s) written before it were rolled back too)",
                    i
                )
            } else {
                String::new()
            };
            return Ok(Err(format!("{}{others}.{}", plain(&e), left_as_found(&kept))));
        }
    }
    if let Err(message) = land_remotes(targets, &commits) {
        let kept = roll_back_written(engine, targets, &journals, &jdirs, targets.len() - 1)?;
        engine
            .store_mut()
            .finish_journals(&ids, JournalStatus::Stopped)?;
        return Ok(Err(format!("{message}{}", left_as_found(&kept))));
    }
    // The commit point: every resource is written.
    engine
        .store_mut()
        .finish_journals(&ids, JournalStatus::Complete)?;
    jdirs.iter().for_each(|d| journal::discard_jdir(d));
    Ok(Ok(targets
        .iter()
        .zip(&commits)
        .map(|(t, c)| {
            json!({
                "resource": t.decided.base.resource_name,
                "kind": t.decided.base.kind,
                "files": t.decided.changes.iter().map(|c| c.path.clone()).collect::<Vec<_>>(),
                "additions": t.additions,
                "deletions": t.deletions,
                "commit": c.map(|c| c.to_string()),
                "branch": t.decided.git.as_ref().map(|g| g.branch.clone()),
                "tree": t.reviewed.to_string(),
            })
        })
        .collect()))
}

/// Rolls back the journals of `targets[..=last]`, newest first, and removes the staging of
/// those not written: what had to be left as found.
fn roll_back_written(
    engine: &Lifecycle,
    targets: &[Target],
    journals: &[Journal],
    jdirs: &[PathBuf],
    last: usize,
) -> Result<Vec<String>, RunError> {
    let mut kept = Vec::new();
    for k in (0..=last).rev() {
        let branch = targets[k].decided.git.as_ref().map(|g| g.branch.as_str());
        kept.extend(rollback_one(engine, &journals[k], branch)?);
    }
    for ((t, jdir), j) in targets.iter().zip(jdirs).zip(journals).skip(last + 1) {
        journal::unstage(&t.decided, jdir, &j.journal_id.to_string());
    }
    Ok(kept)
}

fn left_as_found(kept: &[String]) -> String {
    if kept.is_empty() {
        String::new()
    } else {
        format!(
            " Left as found (changed by someone else meanwhile): {}.",
            kept.join(", ")
        )
    }
}

fn plain(e: &RunError) -> String {
    match e {
        RunError::Invalid(m) | RunError::Sandbox(m) => m.clone(),
        other => other.to_string(),
    }
}

/// Rolls back every journal of the plan an interrupted Apply left pending (idempotent; the
/// journals are marked stopped). Returns one line per resource rolled back.
///
/// # Errors
/// Store, git and I/O errors (running it again continues the rollback).
fn recover_pending(engine: &mut Lifecycle, plan_id: &Id) -> Result<Vec<String>, RunError> {
    let pending = engine.store().pending_journals(plan_id)?;
    if pending.is_empty() {
        return Ok(Vec::new());
    }
    let bases = engine.store().plan_bases(plan_id)?;
    let mut lines = Vec::new();
    for j in pending.iter().rev() {
        let branch = bases
            .iter()
            .find(|b| b.resource_name == j.resource_name)
            .and_then(|b| b.branch.clone());
        let kept = rollback_one(engine, j, branch.as_deref())?;
        lines.push(if kept.is_empty() {
            format!("{}: back as before", j.resource_name)
        } else {
            format!(
                "{}: back as before except, changed by someone else since: {}",
                j.resource_name,
                kept.join(", ")
            )
        });
    }
    let ids: Vec<Id> = pending.iter().map(|j| j.journal_id).collect();
    engine
        .store_mut()
        .finish_journals(&ids, JournalStatus::Stopped)?;
    Ok(lines)
}

/// Rolls back an Apply that was interrupted (`kill -9`, power loss) before its commit point,
/// unless a live process is applying the plan right now. Runs at the start of every command on
/// the plan ([`Lifecycle::recover`]). Returns whether it rolled anything back.
///
/// # Errors
/// Store, git and I/O errors.
pub fn recover(engine: &mut Lifecycle, plan_id: &Id) -> Result<bool, RunError> {
    remove_finished_journal_dirs(engine, plan_id)?;
    if engine.store().pending_journals(plan_id)?.is_empty() {
        return Ok(false);
    }
    if let Some(lease) = crate::lease::holder(engine.store(), plan_id)?
        && !lease.is_stale(Timestamp::now(), &crate::lease::host_name())
    {
        return Ok(false);
    }
    let _locks = match lock_resources(engine, plan_id) {
        Ok(l) => l,
        Err(RunError::ResourceBusy { .. }) => return Ok(false),
        Err(e) => return Err(e),
    };
    let lines = recover_pending(engine, plan_id)?;
    for l in &lines {
        tracing::warn!(plan = %plan_id, "an interrupted apply was rolled back: {l}");
    }
    Ok(!lines.is_empty())
}

/// Removes what an Apply killed between its commit point and its clean-up left in the user's
/// repository (the journal directory under `.git`): the Apply is complete, so the backups it
/// kept have nothing left to undo.
fn remove_finished_journal_dirs(engine: &Lifecycle, plan_id: &Id) -> Result<(), RunError> {
    for j in engine.store().complete_journals(plan_id)? {
        let (jdir, _) = undo_of(engine, &j, None);
        if jdir.exists() {
            journal::remove_jdir(&jdir);
        }
    }
    Ok(())
}

fn finish(
    engine: &mut Lifecycle,
    plan: &mut Plan,
    sbs: &Sandboxes,
    complete: ApplyComplete,
    keep_sandboxes: bool,
) -> Result<Ended, RunError> {
    let plan_id = plan.plan_id;
    let summary = json!(&complete);
    let mut vs = plan.validation_summary.clone().unwrap_or(json!({}));
    vs["apply"] = summary["validations"].clone();
    vs["apply_summary"] = summary;
    plan.validation_summary = Some(vs);
    state::set_state(plan, ProcessingState::Complete)?;
    plan.status
        .advance(Phase::Applied)
        .map_err(|e| RunError::WrongState {
            phase: plan.phase(),
            state: plan.state(),
            message: e.to_string(),
            hints: Vec::new(),
        })?;
    plan.completed_at = Some(Timestamp::now());
    commit(
        engine.store_mut(),
        plan,
        EventKind::ApplyComplete(complete),
        |_| Ok(()),
    )?;
    engine.flush(&plan_id)?;
    if keep_sandboxes {
        // A partial Apply: the remainder stays for a follow-up plan (`docs/review.md`).
        return Ok(Ended::Complete);
    }
    if let Err(e) = crate::sandbox::lifetime::release_after_apply(engine.store_mut(), sbs, &plan_id)
    {
        tracing::warn!(error = %e, "sandboxes could not be released after apply");
    }
    Ok(Ended::Complete)
}

/// The Apply commit's message: the plan's, with what was left out and who approved and
/// reviewed it.
fn commit_message(
    engine: &Lifecycle,
    plan: &Plan,
    left_out: &[crate::review::partial::LeftOut],
) -> Result<String, RunError> {
    Ok(with_trailers(
        crate::sandbox::plan_commit_message(plan, &commit_note(left_out)),
        &engine.store().attribution(&plan.plan_id)?,
    ))
}

/// `message` with an `Approved-by:` trailer for each human who approved the Apply on a server
/// and a `Reviewed-by:` trailer for each who marked its hunks (spec section 22, attribution).
fn with_trailers(message: String, who: &crate::store::attribution::Attribution) -> String {
    let mut out = message;
    for approval in &who.apply_approvals {
        out.push_str(&format!("Approved-by: {}\n", approval.user));
    }
    for reviewer in &who.reviewers {
        out.push_str(&format!("Reviewed-by: {reviewer}\n"));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_apply_to_the_same_resource_is_refused_while_the_first_holds_it() {
        let dir = tempfile::tempdir().unwrap();
        let targets = vec![("local/repo".to_string(), "/srv/repo".to_string())];
        let held = lock_paths(dir.path(), &targets).unwrap();
        match lock_paths(dir.path(), &targets) {
            Err(RunError::ResourceBusy { resource }) => assert_eq!(resource, "local/repo"),
            other => panic!("expected ResourceBusy, got {other:?}"),
        }
        let other = vec![("local/other".to_string(), "/srv/other".to_string())];
        assert!(
            lock_paths(dir.path(), &other).is_ok(),
            "other resources are free"
        );
        drop(held);
        // A process another test forks at this moment holds a copy of the lock's descriptor
        // until it execs (flock belongs to the open file), so the release may show a moment
        // late.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        while lock_paths(dir.path(), &targets).is_err() {
            assert!(
                std::time::Instant::now() < deadline,
                "released with the first apply"
            );
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
    }
}
