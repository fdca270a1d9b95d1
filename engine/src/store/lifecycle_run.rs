//! Rows of running plans: the bases recorded at `plan use` (`plan_bases`), Execute's step
//! progress (`plan_steps`) and apply journals (`apply_journals`). Whole-plan updates made by the
//! lifecycle go through [`save_plan`] inside the caller's transaction, next to their event.

use std::fmt;
use std::str::FromStr;

use jiff::Timestamp;
use rusqlite::{OptionalExtension, params};
use crate::store::Connection;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::codec::{from_json, to_json};
use super::{Store, StoreError};
use crate::domain::{Id, Plan};

/// What kind of resource a base describes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum BaseKind {
    /// A git checkout: sandboxed at `base_commit`, applied as one commit on `branch`.
    GitCheckout,
    /// A plain directory: copied, applied file by file.
    Directory,
}

impl BaseKind {
    /// `git_checkout` or `directory`, as stored.
    pub fn as_str(self) -> &'static str {
        match self {
            BaseKind::GitCheckout => "git_checkout",
            BaseKind::Directory => "directory",
        }
    }
}

/// One target resource of a plan as it was at `plan use`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, serde::Deserialize, schemars::JsonSchema)]
pub struct PlanBase {
    /// The resource's namespaced name.
    pub resource_name: String,
    /// The project that linked it.
    pub project_name: String,
    /// The project link's alias.
    pub alias: Option<String>,
    /// Git checkout or directory.
    pub kind: BaseKind,
    /// Absolute path of the work tree or directory.
    pub path: String,
    /// Full hex id of HEAD at `plan use` (git only).
    pub base_commit: Option<String>,
    /// Branch checked out at `plan use` (git only; `None` when HEAD was detached).
    pub branch: Option<String>,
    /// Whether the plan may only read it.
    pub read_only: bool,
}

/// Where a step of Execute stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum StepStatus {
    /// Not started.
    Pending,
    /// Started (its start checkpoints are taken); a crash here means "roll back and rerun".
    Running,
    /// Finished; its end checkpoints are taken.
    Done,
    /// Failed; the plan errored here.
    Failed,
}

crate::domain::lifecycle::str_enum!(StepStatus {
    Pending => "pending",
    Running => "running",
    Done => "done",
    Failed => "failed",
});

/// Execute's record of one executable decision.
#[derive(Debug, Clone, PartialEq, Serialize, serde::Deserialize, schemars::JsonSchema)]
pub struct PlanStep {
    /// The decision carried out.
    pub decision_id: Id,
    /// Order, from 1.
    pub position: u32,
    /// Status.
    pub status: StepStatus,
    /// How many times it was started.
    pub runs: u32,
    /// Checkpoint id per resource name at the start of the last run.
    pub start_checkpoints: serde_json::Map<String, Value>,
    /// Checkpoint id per resource name at the end.
    pub end_checkpoints: serde_json::Map<String, Value>,
    /// What the step produced (command output, tool results), shortened.
    pub output: Option<String>,
    /// Why it failed.
    pub error: Option<String>,
    /// When the last run started.
    pub started_at: Option<Timestamp>,
    /// When it finished.
    pub finished_at: Option<Timestamp>,
    /// For a step a correction keeps: the checkpoints of its earlier run
    /// (`{"start": "cp_...", "end": "cp_..."}`), whose delta Execute replays instead of running
    /// the actor.
    pub replay: Option<Value>,
}

/// Where an apply journal stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum JournalStatus {
    /// Written before the first write; the apply may be half done.
    Pending,
    /// Every resource of the apply is written and committed.
    Complete,
    /// Rolled back: the resource is as it was before the apply (what could not be put back,
    /// someone else's change since, is named in the plan's error).
    Stopped,
}

crate::domain::lifecycle::str_enum!(JournalStatus {
    Pending => "pending",
    Complete => "complete",
    Stopped => "stopped",
});

/// One entry of an apply journal, in the order Apply writes (see `docs/apply.md`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct JournalEntry {
    /// Path relative to the resource root, `/`-separated.
    pub path: String,
    /// Git blob id of the content before Apply (`None`: absent).
    #[serde(alias = "base_sha256")]
    pub base_id: Option<String>,
    /// Git blob id of the content Apply writes (`None`: Apply deletes it).
    #[serde(alias = "new_sha256")]
    pub new_id: Option<String>,
    /// A file (the default), or a directory Apply creates or removes.
    #[serde(default)]
    pub op: crate::domain::apply::EntryOp,
}

/// An apply journal.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Journal {
    /// Journal id.
    pub journal_id: Id,
    /// The plan applied.
    pub plan_id: Id,
    /// The resource written.
    pub resource_name: String,
    /// Git checkout or directory.
    pub kind: BaseKind,
    /// The real path.
    pub path: String,
    /// Status.
    pub status: JournalStatus,
    /// Files and hashes.
    pub entries: Vec<JournalEntry>,
    /// The commit Apply made or will make (git).
    pub commit_id: Option<String>,
    /// When it was written.
    pub created_at: Timestamp,
}

fn corrupt(table: &'static str, column: &'static str, m: impl ToString) -> StoreError {
    StoreError::Corrupt {
        table,
        column,
        message: m.to_string(),
    }
}

/// Saves the mutable fields of a plan (phase, state, attempt, execution and error fields,
/// timestamps) on an open transaction; the caller appends the event and commits.
///
/// # Errors
/// [`StoreError::Sqlite`].
pub(crate) fn save_plan(conn: &Connection, plan: &Plan) -> Result<(), StoreError> {
    conn.execute(
        "UPDATE plans SET phase = ?2, state = ?3, attempt = ?4, changeset_id = ?5, sandbox_refs = ?6, \
         validation_summary = ?7, decision_root_id = ?8, error_code = ?9, error_message = ?10, \
         updated_at = ?11, started_at = ?12, completed_at = ?13 WHERE plan_id = ?1",
        params![
            plan.plan_id.to_string(),
            plan.status.phase.as_str(),
            plan.status.state.as_str(),
            plan.status.attempt,
            plan.changeset_id,
            to_json(&plan.sandbox_refs),
            plan.validation_summary.as_ref().map(to_json),
            plan.decision_root_id.map(|i| i.to_string()),
            plan.error_code,
            plan.error_message,
            plan.updated_at.to_string(),
            plan.started_at.map(|t| t.to_string()),
            plan.completed_at.map(|t| t.to_string()),
        ],
    )?;
    Ok(())
}

/// Sets the plan's `state_reason` (`interrupted`, `awaiting_decision`, ...; `None` clears it).
///
/// # Errors
/// [`StoreError::Sqlite`].
pub(crate) fn set_state_reason(
    conn: &Connection,
    plan_id: &Id,
    reason: Option<&str>,
) -> Result<(), StoreError> {
    conn.execute(
        "UPDATE plans SET state_reason = ?2 WHERE plan_id = ?1",
        params![plan_id.to_string(), reason],
    )?;
    Ok(())
}

/// Inserts the bases of a new plan (inside its creation transaction).
///
/// # Errors
/// [`StoreError::Sqlite`].
pub(crate) fn insert_bases(
    conn: &Connection,
    plan_id: &Id,
    bases: &[PlanBase],
) -> Result<(), StoreError> {
    for (i, b) in bases.iter().enumerate() {
        conn.execute(
            "INSERT INTO plan_bases (plan_id, resource_name, project_name, alias, kind, path, base_commit, branch, read_only, position) \
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)",
            params![
                plan_id.to_string(),
                b.resource_name,
                b.project_name,
                b.alias,
                b.kind.as_str(),
                b.path,
                b.base_commit,
                b.branch,
                b.read_only,
                i as i64
            ],
        )?;
    }
    Ok(())
}

type StepRow = (
    String,
    i64,
    String,
    i64,
    String,
    String,
    Option<String>,
    Option<String>,
    Option<String>,
    Option<String>,
    Option<String>,
);

fn step_from(r: StepRow) -> Result<PlanStep, StoreError> {
    const T: &str = "plan_steps";
    let (id, pos, status, runs, start, end, output, error, started, finished, replay) = r;
    let t = |c: &'static str, v: Option<String>| {
        v.map(|s| s.parse().map_err(|e: jiff::Error| corrupt(T, c, e)))
            .transpose()
    };
    Ok(PlanStep {
        decision_id: id.parse().map_err(|e| corrupt(T, "decision_id", e))?,
        position: u32::try_from(pos).map_err(|e| corrupt(T, "position", e))?,
        status: status
            .parse()
            .map_err(|e: String| corrupt(T, "status", e))?,
        runs: u32::try_from(runs).map_err(|e| corrupt(T, "runs", e))?,
        start_checkpoints: from_json(T, "start_checkpoints", &start)?,
        end_checkpoints: from_json(T, "end_checkpoints", &end)?,
        output,
        error,
        started_at: t("started_at", started)?,
        finished_at: t("finished_at", finished)?,
        replay: replay.map(|r| from_json(T, "replay", &r)).transpose()?,
    })
}

/// Replaces a plan's steps (at the start of an attempt's Execute), in the given order.
#[allow(dead_code)] // Execute runs steps once the sandboxes are merged.
///
/// # Errors
/// [`StoreError::Sqlite`].
pub(crate) fn replace_steps(
    conn: &Connection,
    plan_id: &Id,
    decisions: &[Id],
) -> Result<(), StoreError> {
    conn.execute(
        "DELETE FROM plan_steps WHERE plan_id = ?1",
        [plan_id.to_string()],
    )?;
    for (i, d) in decisions.iter().enumerate() {
        conn.execute(
            "INSERT INTO plan_steps (plan_id, decision_id, position, status) VALUES (?1, ?2, ?3, 'pending')",
            params![plan_id.to_string(), d.to_string(), i as i64 + 1],
        )?;
    }
    Ok(())
}

/// Saves one step.
///
/// # Errors
/// [`StoreError::Sqlite`].
pub(crate) fn save_step(conn: &Connection, plan_id: &Id, s: &PlanStep) -> Result<(), StoreError> {
    conn.execute(
        "UPDATE plan_steps SET status = ?3, runs = ?4, start_checkpoints = ?5, end_checkpoints = ?6, \
         output = ?7, error = ?8, started_at = ?9, finished_at = ?10, replay = ?11 WHERE plan_id = ?1 AND decision_id = ?2",
        params![
            plan_id.to_string(),
            s.decision_id.to_string(),
            s.status.as_str(),
            s.runs,
            to_json(&s.start_checkpoints),
            to_json(&s.end_checkpoints),
            s.output.as_deref().map(|o| crate::redact::redact(o).into_owned()),
            s.error.as_deref().map(|e| crate::redact::redact(e).into_owned()),
            s.started_at.map(|t| t.to_string()),
            s.finished_at.map(|t| t.to_string()),
            s.replay.as_ref().map(to_json),
        ],
    )?;
    Ok(())
}

/// Replaces a plan's steps with full rows (a correction keeps the finished steps before the
/// first affected one as they are), positions renumbered from 1 in the given order.
///
/// # Errors
/// [`StoreError::Sqlite`].
pub(crate) fn replace_step_rows(
    conn: &Connection,
    plan_id: &Id,
    steps: &[PlanStep],
) -> Result<(), StoreError> {
    conn.execute(
        "DELETE FROM plan_steps WHERE plan_id = ?1",
        [plan_id.to_string()],
    )?;
    for (i, s) in steps.iter().enumerate() {
        conn.execute(
            "INSERT INTO plan_steps (plan_id, decision_id, position, status) VALUES (?1, ?2, ?3, 'pending')",
            params![plan_id.to_string(), s.decision_id.to_string(), i as i64 + 1],
        )?;
        save_step(conn, plan_id, s)?;
    }
    Ok(())
}

type JournalRow = (
    String,
    String,
    String,
    String,
    String,
    String,
    String,
    Option<String>,
    String,
);

fn journal_from(r: JournalRow) -> Result<Journal, StoreError> {
    const T: &str = "apply_journals";
    let (id, plan, resource, kind, path, status, entries, commit, created) = r;
    Ok(Journal {
        journal_id: id.parse().map_err(|e| corrupt(T, "journal_id", e))?,
        plan_id: plan.parse().map_err(|e| corrupt(T, "plan_id", e))?,
        resource_name: resource,
        kind: from_json(T, "kind", &format!("\"{kind}\""))?,
        path,
        status: status
            .parse()
            .map_err(|e: String| corrupt(T, "status", e))?,
        entries: from_json(T, "entries", &entries)?,
        commit_id: commit,
        created_at: created
            .parse()
            .map_err(|e: jiff::Error| corrupt(T, "created_at", e))?,
    })
}

impl Store {
    /// The bases of a plan's target resources, in order.
    ///
    /// # Errors
    /// Store errors.
    pub fn plan_bases(&self, plan_id: &Id) -> Result<Vec<PlanBase>, StoreError> {
        let mut stmt = self.conn().prepare(
            "SELECT resource_name, project_name, alias, kind, path, base_commit, branch, read_only \
             FROM plan_bases WHERE plan_id = ?1 ORDER BY position",
        )?;
        type Row = (
            String,
            String,
            Option<String>,
            String,
            String,
            Option<String>,
            Option<String>,
            bool,
        );
        let rows: Vec<Row> = stmt
            .query_map([plan_id.to_string()], |r| r.try_into())?
            .collect::<Result<_, _>>()?;
        rows.into_iter()
            .map(
                |(
                    resource_name,
                    project_name,
                    alias,
                    kind,
                    path,
                    base_commit,
                    branch,
                    read_only,
                )| {
                    Ok(PlanBase {
                        resource_name,
                        project_name,
                        alias,
                        kind: from_json("plan_bases", "kind", &format!("\"{kind}\""))?,
                        path,
                        base_commit,
                        branch,
                        read_only,
                    })
                },
            )
            .collect()
    }

    /// A plan's steps in order.
    ///
    /// # Errors
    /// Store errors.
    pub fn plan_steps(&self, plan_id: &Id) -> Result<Vec<PlanStep>, StoreError> {
        let mut stmt = self.conn().prepare(
            "SELECT decision_id, position, status, runs, start_checkpoints, end_checkpoints, output, error, started_at, finished_at, replay \
             FROM plan_steps WHERE plan_id = ?1 ORDER BY position",
        )?;
        let rows: Vec<StepRow> = stmt
            .query_map([plan_id.to_string()], |r| r.try_into())?
            .collect::<Result<_, _>>()?;
        rows.into_iter().map(step_from).collect()
    }

    /// After a checkpoint rollback: every step whose recorded start or end checkpoint was
    /// discarded goes back to `pending` with its checkpoints, output and error cleared, so the
    /// next Execute runs it again from the restored state. Returns how many steps were reset.
    /// Idempotent.
    ///
    /// # Errors
    /// [`StoreError`].
    pub fn reset_steps_after_rollback(&mut self, plan_id: &Id) -> Result<u32, StoreError> {
        let discarded: std::collections::HashSet<String> = {
            let mut stmt = self.conn().prepare(
                "SELECT checkpoint_id FROM checkpoints WHERE plan_id = ?1 AND discarded_at IS NOT NULL",
            )?;
            stmt.query_map([plan_id.to_string()], |r| r.get(0))?
                .collect::<Result<_, _>>()?
        };
        if discarded.is_empty() {
            return Ok(0);
        }
        let steps = self.plan_steps(plan_id)?;
        let tx = self.conn_mut().transaction()?;
        let mut reset = 0;
        for mut step in steps {
            let touches = |m: &serde_json::Map<String, Value>| {
                m.values()
                    .any(|v| v.as_str().is_some_and(|id| discarded.contains(id)))
            };
            if step.status != StepStatus::Pending
                && (touches(&step.start_checkpoints) || touches(&step.end_checkpoints))
            {
                step.status = StepStatus::Pending;
                step.start_checkpoints.clear();
                step.end_checkpoints.clear();
                step.output = None;
                step.error = None;
                step.finished_at = None;
                save_step(&tx, plan_id, &step)?;
                reset += 1;
            }
        }
        tx.commit()?;
        Ok(reset)
    }

    /// Stores a new apply journal.
    ///
    /// # Errors
    /// Store errors.
    pub fn insert_journal(&mut self, j: &Journal) -> Result<(), StoreError> {
        self.conn().execute(
            "INSERT INTO apply_journals (journal_id, plan_id, resource_name, kind, path, status, entries, commit_id, created_at) \
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
            params![
                j.journal_id.to_string(),
                j.plan_id.to_string(),
                j.resource_name,
                j.kind.as_str(),
                j.path,
                j.status.as_str(),
                to_json(&j.entries),
                j.commit_id,
                j.created_at.to_string()
            ],
        )?;
        Ok(())
    }

    /// Stores the journals of one apply (one per resource) in one transaction: either every
    /// resource's journal is stored before the first write, or none.
    ///
    /// # Errors
    /// Store errors.
    pub fn insert_journals(&mut self, journals: &[Journal]) -> Result<(), StoreError> {
        let tx = self.conn_mut().transaction()?;
        for j in journals {
            tx.execute(
                "INSERT INTO apply_journals (journal_id, plan_id, resource_name, kind, path, status, entries, commit_id, created_at) \
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
                params![
                    j.journal_id.to_string(),
                    j.plan_id.to_string(),
                    j.resource_name,
                    j.kind.as_str(),
                    j.path,
                    j.status.as_str(),
                    to_json(&j.entries),
                    j.commit_id,
                    j.created_at.to_string()
                ],
            )?;
        }
        tx.commit()?;
        Ok(())
    }

    /// Marks the journals of one apply complete (its commit point) or stopped, in one
    /// transaction.
    ///
    /// # Errors
    /// Store errors.
    pub fn finish_journals(
        &mut self,
        journal_ids: &[Id],
        status: JournalStatus,
    ) -> Result<(), StoreError> {
        let tx = self.conn_mut().transaction()?;
        for id in journal_ids {
            tx.execute(
                "UPDATE apply_journals SET status = ?2, completed_at = ?3 WHERE journal_id = ?1",
                params![
                    id.to_string(),
                    status.as_str(),
                    Timestamp::now().to_string()
                ],
            )?;
        }
        tx.commit()?;
        Ok(())
    }

    /// Records the commit a pending journal's apply made (before it moves the branch).
    ///
    /// # Errors
    /// Store errors.
    pub fn set_journal_commit(
        &mut self,
        journal_id: &Id,
        commit_id: &str,
    ) -> Result<(), StoreError> {
        self.conn().execute(
            "UPDATE apply_journals SET commit_id = ?2 WHERE journal_id = ?1",
            params![journal_id.to_string(), commit_id],
        )?;
        Ok(())
    }

    /// Marks a journal complete or stopped.
    ///
    /// # Errors
    /// Store errors.
    pub fn finish_journal(
        &mut self,
        journal_id: &Id,
        status: JournalStatus,
        commit_id: Option<&str>,
    ) -> Result<(), StoreError> {
        self.conn().execute(
            "UPDATE apply_journals SET status = ?2, commit_id = coalesce(?3, commit_id), completed_at = ?4 WHERE journal_id = ?1",
            params![
                journal_id.to_string(),
                status.as_str(),
                commit_id,
                Timestamp::now().to_string()
            ],
        )?;
        Ok(())
    }

    /// All of a plan's apply journals, oldest first (one per resource an apply wrote or began
    /// to write).
    ///
    /// # Errors
    /// Store errors.
    pub fn plan_journals(&self, plan_id: &Id) -> Result<Vec<Journal>, StoreError> {
        let mut stmt = self.conn().prepare(
            "SELECT journal_id, plan_id, resource_name, kind, path, status, entries, commit_id, created_at \
             FROM apply_journals WHERE plan_id = ?1 ORDER BY created_at, journal_id",
        )?;
        let rows: Vec<JournalRow> = stmt
            .query_map([plan_id.to_string()], |r| r.try_into())?
            .collect::<Result<_, _>>()?;
        rows.into_iter().map(journal_from).collect()
    }

    /// A plan's journals still pending (an apply that did not finish).
    ///
    /// # Errors
    /// Store errors.
    pub fn pending_journals(&self, plan_id: &Id) -> Result<Vec<Journal>, StoreError> {
        self.journals_with_status(plan_id, "pending")
    }

    /// The plan's journals whose Apply reached its commit point, oldest first.
    ///
    /// # Errors
    /// Store errors.
    pub fn complete_journals(&self, plan_id: &Id) -> Result<Vec<Journal>, StoreError> {
        self.journals_with_status(plan_id, "complete")
    }

    fn journals_with_status(&self, plan_id: &Id, status: &str) -> Result<Vec<Journal>, StoreError> {
        let mut stmt = self.conn().prepare(
            "SELECT journal_id, plan_id, resource_name, kind, path, status, entries, commit_id, created_at \
             FROM apply_journals WHERE plan_id = ?1 AND status = ?2 ORDER BY created_at, journal_id",
        )?;
        let rows: Vec<JournalRow> = stmt
            .query_map(rusqlite::params![plan_id.to_string(), status], |r| {
                r.try_into()
            })?
            .collect::<Result<_, _>>()?;
        rows.into_iter().map(journal_from).collect()
    }

    /// The plan's `state_reason` (`interrupted`, `awaiting_decision`, ...), if any.
    ///
    /// # Errors
    /// Store errors.
    pub fn plan_state_reason(&self, plan_id: &Id) -> Result<Option<String>, StoreError> {
        Ok(self
            .conn()
            .query_row(
                "SELECT state_reason FROM plans WHERE plan_id = ?1",
                [plan_id.to_string()],
                |r| r.get::<_, Option<String>>(0),
            )
            .optional()?
            .flatten())
    }

    /// Every plan's `state_reason` where one is recorded, by plan id (the plans list reads
    /// them in one query rather than one per plan).
    ///
    /// # Errors
    /// Store errors.
    pub fn plan_state_reasons(
        &self,
    ) -> Result<std::collections::BTreeMap<Id, String>, StoreError> {
        let mut stmt = self
            .conn()
            .prepare("SELECT plan_id, state_reason FROM plans WHERE state_reason IS NOT NULL")?;
        let rows = stmt
            .query_map([], |r| Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?)))?
            .collect::<Result<Vec<_>, _>>()?;
        Ok(rows
            .into_iter()
            .filter_map(|(id, reason)| Some((id.parse().ok()?, reason)))
            .collect())
    }

    /// The plan's cancellation reason, if one was requested.
    ///
    /// # Errors
    /// Store errors.
    pub fn plan_cancel_reason(&self, plan_id: &Id) -> Result<Option<String>, StoreError> {
        Ok(self
            .conn()
            .query_row(
                "SELECT cancel_reason FROM plans WHERE plan_id = ?1",
                [plan_id.to_string()],
                |r| r.get::<_, Option<String>>(0),
            )
            .optional()?
            .flatten())
    }
}
