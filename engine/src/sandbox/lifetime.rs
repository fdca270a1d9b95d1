//! How long sandboxes live (spec section 11 "Cleanup Behavior").
//!
//! - After a plan is applied, [`release_after_apply`] removes the work trees (its child plans'
//!   too; each is renamed away at once and deleted by a background `rm -rf`) and keeps the private repositories (with every checkpoint ref) for the retention
//!   period.
//! - Sandboxes of cancelled or errored plans, and of finished `agents actor run`s, stay until
//!   `agents plan cleanup` or until the retention period has passed since the plan last
//!   changed.
//! - Directories under `<data dir>/sandboxes` that belong to no plan (a crash between creating
//!   a directory and recording it cannot happen, because the row is written first; a plan
//!   deleted by hand can) are removed by [`sweep`], which commands that use sandboxes run at
//!   start-up. Only directories named by a ULID are ever removed.
//! - Everything else survives crashes and restarts: the database row and the directory are the
//!   whole state.

use std::fs;

use jiff::{Timestamp, ToSpan};
use serde::Serialize;

use super::{
    SandboxError, SandboxRecord, SandboxState, Sandboxes, overlay, remove_dir_if_exists,
    remove_sandbox_dir, shared_base,
};
use crate::domain::id::Id;
use crate::domain::lifecycle::{Phase, ProcessingState};
use crate::store::Store;

/// One sandbox that cleanup acted on.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, serde::Deserialize, schemars::JsonSchema)]
pub struct Cleaned {
    /// The plan.
    pub plan_id: Id,
    /// The resource.
    pub resource_name: String,
    /// The sandbox.
    pub sandbox_id: Id,
    /// `released` (work tree removed, refs kept) or `removed` (everything).
    pub action: SandboxState,
    /// Why.
    pub reason: String,
}

/// What a cleanup or sweep did.
#[derive(
    Debug, Clone, Default, PartialEq, Eq, Serialize, serde::Deserialize, schemars::JsonSchema,
)]
pub struct CleanupReport {
    /// Sandboxes released or removed.
    pub sandboxes: Vec<Cleaned>,
    /// Directories removed because no plan or sandbox owns them.
    pub orphans: Vec<String>,
}

/// Removes the work trees of an applied plan's sandboxes; the private repositories and their
/// checkpoint refs stay until the retention period ends.
///
/// # Errors
/// Store and I/O errors.
pub fn release_after_apply(
    store: &mut Store,
    sandboxes: &Sandboxes,
    plan_id: &Id,
) -> Result<Vec<Cleaned>, SandboxError> {
    let mut out = Vec::new();
    for record in store.sandboxes_of_plan(plan_id)? {
        if record.state == SandboxState::Active {
            out.push(release(store, &record, "plan applied")?);
        }
    }
    // Child plans' results are in the applied commit too: their work trees go as well (their
    // repositories stay, like the parent's, until the retention period ends).
    for child in store.children_of(plan_id)? {
        out.extend(release_after_apply(store, sandboxes, &child.child_plan_id)?);
    }
    let _ = sandboxes;
    Ok(out)
}

/// Where a released work tree goes while it is removed in the background (inside the
/// sandbox's own directory, so removing the sandbox removes it too).
const RELEASED_WORK: &str = "work.released";

/// Takes the work tree away at once and removes it in the background: it is renamed out of
/// the way (one system call, so the work tree is gone when this returns) and a detached `rm
/// -rf` deletes it, so that Apply does not wait for the deletion of every file of a large
/// checkout. Where the rename or the process cannot be had, the tree is removed here.
fn remove_work_tree(record: &SandboxRecord) -> Result<(), SandboxError> {
    let layout = record.layout();
    let work = layout.work_dir.clone();
    let trash = record.root_dir.join(RELEASED_WORK);
    // A leftover of an earlier release whose removal was interrupted.
    remove_dir_if_exists(&trash)?;
    // The overlay of a sandbox that shares its base's checkout goes first (a mount point
    // cannot be renamed), then its upper and overlay directories go with the mount point.
    overlay::unmount_now(&work);
    if layout.upper_dir.exists() {
        shared_base::open_overlay_work(&layout);
        fs::create_dir_all(&trash).map_err(SandboxError::io("create", &trash))?;
        for (dir, name) in [
            (&work, "work"),
            (&layout.upper_dir, "upper"),
            (&layout.overlay_work_dir, "overlay"),
        ] {
            if let Err(e) = fs::rename(dir, trash.join(name))
                && e.kind() != std::io::ErrorKind::NotFound
            {
                remove_dir_if_exists(dir)?;
            }
        }
        // The shared checkout may be swept once no sandbox names it.
        let _ = fs::remove_file(&layout.base_file);
    } else {
        match fs::rename(&work, &trash) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
            Err(_) => return remove_dir_if_exists(&work),
        }
    }
    super::remove_in_background(&trash)
}

fn release(store: &mut Store, record: &SandboxRecord, why: &str) -> Result<Cleaned, SandboxError> {
    remove_work_tree(record)?;
    store.clean_sandbox(record, SandboxState::Released, Timestamp::now(), why)?;
    Ok(Cleaned {
        plan_id: record.plan_id,
        resource_name: record.resource_name.clone(),
        sandbox_id: record.sandbox_id,
        action: SandboxState::Released,
        reason: why.to_string(),
    })
}

fn remove(store: &mut Store, record: &SandboxRecord, why: String) -> Result<Cleaned, SandboxError> {
    remove_sandbox_dir(&record.root_dir)?;
    store.clean_sandbox(record, SandboxState::Removed, Timestamp::now(), &why)?;
    Ok(Cleaned {
        plan_id: record.plan_id,
        resource_name: record.resource_name.clone(),
        sandbox_id: record.sandbox_id,
        action: SandboxState::Removed,
        reason: why,
    })
}

/// The automatic part of cleanup: orphaned directories, and sandboxes of applied, cancelled
/// or errored plans whose retention period (days since the plan last changed) has passed.
///
/// # Errors
/// Store and I/O errors.
pub fn sweep(
    store: &mut Store,
    sandboxes: &Sandboxes,
    now: Timestamp,
    retention_days: u32,
) -> Result<CleanupReport, SandboxError> {
    run(store, sandboxes, now, retention_days, false)
}

/// `agents plan cleanup`: everything [`sweep`] does, plus removing the sandboxes of cancelled
/// and errored plans now, and releasing the work trees of applied plans.
///
/// # Errors
/// Store and I/O errors.
pub fn cleanup(
    store: &mut Store,
    sandboxes: &Sandboxes,
    now: Timestamp,
    retention_days: u32,
) -> Result<CleanupReport, SandboxError> {
    run(store, sandboxes, now, retention_days, true)
}

fn run(
    store: &mut Store,
    sandboxes: &Sandboxes,
    now: Timestamp,
    retention_days: u32,
    explicit: bool,
) -> Result<CleanupReport, SandboxError> {
    let mut report = CleanupReport::default();
    let cutoff = now
        .checked_sub((i64::from(retention_days) * 24).hours())
        .unwrap_or(Timestamp::MIN);
    for record in store.all_sandboxes()? {
        if matches!(record.state, SandboxState::Removed | SandboxState::Creating) {
            continue;
        }
        let Some(plan) = store.plan(&record.plan_id)? else {
            continue;
        };
        // An isolated actor run (`agents actor run`) is finished once it has stopped; one
        // still marked processing (its process may have crashed; runs hold no lease) only
        // once the retention period has passed.
        let actor_run = store.is_actor_run(&plan.plan_id)?;
        let expired = plan.updated_at < cutoff;
        let finished = plan.phase() == Phase::Applied
            || (actor_run && (plan.state() != ProcessingState::Processing || expired))
            || matches!(
                plan.state(),
                ProcessingState::Cancelled | ProcessingState::Errored
            );
        if !finished {
            continue;
        }
        let what = if plan.phase() == Phase::Applied {
            "applied"
        } else if actor_run {
            "(an actor run) finished"
        } else {
            plan.state().as_str()
        };
        if expired {
            report.sandboxes.push(remove(
                store,
                &record,
                format!("plan {what} more than {retention_days} days ago"),
            )?);
        } else if explicit {
            if plan.phase() == Phase::Applied {
                // A background removal that was interrupted (the machine stopped) is finished.
                remove_dir_if_exists(&record.root_dir.join(RELEASED_WORK))?;
                if record.state == SandboxState::Active {
                    report
                        .sandboxes
                        .push(release(store, &record, "plan applied")?);
                }
            } else {
                report
                    .sandboxes
                    .push(remove(store, &record, format!("plan {what}"))?);
            }
        }
    }
    report.orphans = orphans(store, sandboxes)?;
    report
        .orphans
        .extend(shared_base::sweep(store, sandboxes.root())?);
    Ok(report)
}

/// Removes directories under the sandboxes root that no plan or sandbox record owns.
fn orphans(store: &Store, sandboxes: &Sandboxes) -> Result<Vec<String>, SandboxError> {
    let mut removed = Vec::new();
    let entries = match fs::read_dir(sandboxes.root()) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(removed),
        Err(e) => return Err(SandboxError::io("read", sandboxes.root())(e)),
    };
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let Ok(plan_id) = name.parse::<Id>() else {
            continue;
        };
        if !entry.path().is_dir() {
            continue;
        }
        if store.plan(&plan_id)?.is_none() {
            for sub in fs::read_dir(entry.path()).into_iter().flatten().flatten() {
                overlay::unmount_now(&sub.path().join("work"));
                shared_base::open_overlay_work(&super::Layout::at(&sub.path()));
            }
            remove_dir_if_exists(&entry.path())?;
            removed.push(entry.path().display().to_string());
            continue;
        }
        let known: Vec<(Id, SandboxState)> = store
            .sandboxes_of_plan(&plan_id)?
            .into_iter()
            .map(|r| (r.sandbox_id, r.state))
            .collect();
        for sub in fs::read_dir(entry.path()).into_iter().flatten().flatten() {
            let Ok(sandbox_id) = sub.file_name().to_string_lossy().parse::<Id>() else {
                continue;
            };
            let owned = known
                .iter()
                .any(|(id, state)| *id == sandbox_id && *state != SandboxState::Removed);
            if !owned && sub.path().is_dir() {
                remove_sandbox_dir(&sub.path())?;
                removed.push(sub.path().display().to_string());
            }
        }
    }
    Ok(removed)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::lifecycle::PlanStatus;
    use crate::domain::plan::Plan;
    use crate::sandbox::testing::repo_with_files;
    use crate::sandbox::{SandboxTarget, TargetKind};

    fn sandboxed_plan(
        dir: &std::path::Path,
        store: &mut Store,
        sandboxes: &Sandboxes,
    ) -> (Id, SandboxRecord) {
        let repo = dir.join(format!("user-{}", Id::generate()));
        let head = repo_with_files(&repo, &[("a.txt", "a\n")]);
        let plan = Plan::new("local/x", "x", Timestamp::now());
        store.insert_plan(&plan).unwrap();
        sandboxes
            .register_target(
                store,
                &SandboxTarget {
                    plan_id: plan.plan_id,
                    resource_name: "local/user".into(),
                    alias: None,
                    kind: TargetKind::GitCheckout {
                        repo,
                        base_commit: head,
                    },
                    read_only: false,
                },
            )
            .unwrap();
        let sb = sandboxes
            .ensure(store, &plan.plan_id, "local/user")
            .unwrap();
        (plan.plan_id, sb.record)
    }

    #[test]
    fn finished_plans_keep_their_sandboxes_until_retention_ends() {
        let dir = tempfile::tempdir().unwrap();
        let mut store = Store::open(&dir.path().join("db")).unwrap();
        let sandboxes = Sandboxes::at(dir.path().join("sandboxes"));
        let (cancelled, cancelled_sb) = sandboxed_plan(dir.path(), &mut store, &sandboxes);
        let (active, active_sb) = sandboxed_plan(dir.path(), &mut store, &sandboxes);
        let mut status = PlanStatus::new();
        status.set_state(ProcessingState::Cancelled).unwrap();
        let now = Timestamp::now();
        let days_ago = |d: i64| now.checked_sub((d * 24).hours()).unwrap();
        store
            .update_plan_status(&cancelled, status, days_ago(3))
            .unwrap();

        let report = sweep(&mut store, &sandboxes, now, 7).unwrap();
        assert!(
            report.sandboxes.is_empty(),
            "within retention nothing is removed automatically"
        );
        store
            .update_plan_status(&cancelled, status, days_ago(8))
            .unwrap();
        let report = sweep(&mut store, &sandboxes, now, 7).unwrap();
        assert_eq!(report.sandboxes.len(), 1);
        assert_eq!(report.sandboxes[0].plan_id, cancelled);
        assert!(!cancelled_sb.root_dir.exists());
        assert!(
            active_sb.root_dir.exists(),
            "active plans are never touched"
        );
        let _ = active;
    }

    #[test]
    fn after_apply_the_work_tree_goes_and_the_checkpoint_refs_stay() {
        let dir = tempfile::tempdir().unwrap();
        let mut store = Store::open(&dir.path().join("db")).unwrap();
        let sandboxes = Sandboxes::at(dir.path().join("sandboxes"));
        let (plan, sb) = sandboxed_plan(dir.path(), &mut store, &sandboxes);
        let released = release_after_apply(&mut store, &sandboxes, &plan).unwrap();
        assert_eq!(released[0].action, SandboxState::Released);
        assert!(!sb.layout().work_dir.exists());
        assert!(sb.layout().git_dir.join("HEAD").exists());
        // The renamed work tree is deleted in the background, soon.
        let trash = sb.root_dir.join(RELEASED_WORK);
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
        while trash.exists() && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        assert!(!trash.exists(), "the released work tree is removed");
        let err = sandboxes
            .ensure(&mut store, &plan, "local/user")
            .unwrap_err();
        assert!(matches!(err, SandboxError::Gone { .. }), "{err}");
    }
}
