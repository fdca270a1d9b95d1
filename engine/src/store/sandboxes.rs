//! Rows of migration 003: sandbox targets, sandboxes, checkpoints, tool calls and changes.

use std::path::PathBuf;

use jiff::Timestamp;
use rusqlite::{OptionalExtension, params};
use crate::store::db::Row;

use super::{Store, StoreError};
use crate::domain::event::{EventKind, SandboxCleaned};
use crate::domain::id::{Id, IdPrefixError, resolve_prefix};
use crate::domain::lifecycle::PlanStatus;
use crate::domain::sandbox::{
    CheckpointId, SandboxRecord, SandboxState, SandboxTarget, Strategy, TargetKind,
};
use crate::domain::sandbox::{CheckpointRecord, CheckpointState};
use crate::domain::tool_call::{CallOutcome, ToolCallRecord};
use crate::domain::tool_call::{Change, ChangeOp, ChangeRecord};

fn corrupt(table: &'static str, column: &'static str, message: impl ToString) -> StoreError {
    StoreError::Corrupt {
        table,
        column,
        message: message.to_string(),
    }
}

fn parse<T: std::str::FromStr>(
    table: &'static str,
    column: &'static str,
    text: &str,
) -> Result<T, StoreError>
where
    T::Err: std::fmt::Display,
{
    text.parse().map_err(|e: T::Err| corrupt(table, column, e))
}

fn opt_time(
    table: &'static str,
    column: &'static str,
    text: Option<String>,
) -> Result<Option<Timestamp>, StoreError> {
    text.map(|t| parse(table, column, &t)).transpose()
}

const TARGET_COLUMNS: &str =
    "plan_id, resource_name, alias, kind, source_path, base_commit, read_only";

fn target_row(row: &Row<'_>) -> rusqlite::Result<[Option<String>; 7]> {
    Ok([
        row.get(0)?,
        row.get(1)?,
        row.get(2)?,
        row.get(3)?,
        row.get(4)?,
        row.get(5)?,
        row.get::<_, i64>(6).map(|v| Some(v.to_string()))?,
    ])
}

fn into_target(c: [Option<String>; 7]) -> Result<SandboxTarget, StoreError> {
    let [plan_id, resource, alias, kind, path, base, read_only] = c;
    let t = "sandbox_targets";
    let path = PathBuf::from(path.unwrap_or_default());
    let kind = match kind.as_deref() {
        Some("git_checkout") => TargetKind::GitCheckout {
            repo: path,
            base_commit: base.ok_or_else(|| corrupt(t, "base_commit", "missing"))?,
        },
        Some("directory") => TargetKind::Directory { root: path },
        other => return Err(corrupt(t, "kind", format!("unknown kind {other:?}"))),
    };
    Ok(SandboxTarget {
        plan_id: parse(t, "plan_id", &plan_id.unwrap_or_default())?,
        resource_name: resource.unwrap_or_default(),
        alias,
        kind,
        read_only: read_only.as_deref() == Some("1"),
    })
}

const SANDBOX_COLUMNS: &str = "sandbox_id, plan_id, resource_name, strategy, state, root_dir, \
    base_commit, created_at, released_at, removed_at";

fn sandbox_row(row: &Row<'_>) -> rusqlite::Result<Vec<Option<String>>> {
    (0..10).map(|i| row.get(i)).collect()
}

fn into_sandbox(c: Vec<Option<String>>) -> Result<SandboxRecord, StoreError> {
    let t = "sandboxes";
    let mut c = c.into_iter();
    let mut next = || c.next().flatten();
    Ok(SandboxRecord {
        sandbox_id: parse(t, "sandbox_id", &next().unwrap_or_default())?,
        plan_id: parse(t, "plan_id", &next().unwrap_or_default())?,
        resource_name: next().unwrap_or_default(),
        strategy: parse::<Strategy>(t, "strategy", &next().unwrap_or_default())?,
        state: parse::<SandboxState>(t, "state", &next().unwrap_or_default())?,
        root_dir: PathBuf::from(next().unwrap_or_default()),
        base_commit: next(),
        created_at: parse(t, "created_at", &next().unwrap_or_default())?,
        released_at: opt_time(t, "released_at", next())?,
        removed_at: opt_time(t, "removed_at", next())?,
    })
}

const CHECKPOINT_COLUMNS: &str = "checkpoint_id, plan_id, seq, step, decision_id, label, \
    files_changed, tool_call_seq, created_at, discarded_at";

struct RawCheckpoint(Vec<Option<String>>, [i64; 3]);

fn checkpoint_row(row: &Row<'_>) -> rusqlite::Result<RawCheckpoint> {
    Ok(RawCheckpoint(
        vec![
            row.get(0)?,
            row.get(1)?,
            row.get(3)?,
            row.get(4)?,
            row.get(5)?,
            row.get(8)?,
            row.get(9)?,
        ],
        [row.get(2)?, row.get(6)?, row.get(7)?],
    ))
}

const CALL_COLUMNS: &str = "call_id, plan_id, seq, tool, parent_skill, resource_name, arguments, \
    outcome, error_code, error_message, result_summary, resources_touched, duration_ms, \
    started_at, discarded_at";

struct RawCall(Vec<Option<String>>, [i64; 2]);

fn call_row(row: &Row<'_>) -> rusqlite::Result<RawCall> {
    let mut cols = Vec::new();
    for i in [0, 1, 3, 4, 5, 6, 7, 8, 9, 10, 11, 13, 14] {
        cols.push(row.get(i)?);
    }
    Ok(RawCall(cols, [row.get(2)?, row.get(12)?]))
}

fn into_call(raw: RawCall) -> Result<ToolCallRecord, StoreError> {
    let t = "tool_calls";
    let RawCall(c, [seq, duration]) = raw;
    let mut c = c.into_iter();
    let mut next = || c.next().flatten();
    Ok(ToolCallRecord {
        call_id: parse(t, "call_id", &next().unwrap_or_default())?,
        plan_id: parse(t, "plan_id", &next().unwrap_or_default())?,
        seq: u64::try_from(seq).unwrap_or(0),
        tool: next().unwrap_or_default(),
        parent_skill: next(),
        resource_name: next(),
        arguments: serde_json::from_str(&next().unwrap_or_default())
            .map_err(|e| corrupt(t, "arguments", e))?,
        outcome: parse::<CallOutcome>(t, "outcome", &next().unwrap_or_default())?,
        error_code: next(),
        error_message: next(),
        result_summary: next(),
        resources_touched: serde_json::from_str(&next().unwrap_or_else(|| "[]".into()))
            .map_err(|e| corrupt(t, "resources_touched", e))?,
        duration_ms: u64::try_from(duration).unwrap_or(0),
        started_at: parse(t, "started_at", &next().unwrap_or_default())?,
        discarded_at: opt_time(t, "discarded_at", next())?,
    })
}

const CHANGE_COLUMNS: &str = "change_id, plan_id, call_id, resource_name, operation, path, \
    old_path, old_hash, new_hash, old_size, new_size, created_at, discarded_at";

struct RawChange(Vec<Option<String>>, [Option<i64>; 2]);

fn change_row(row: &Row<'_>) -> rusqlite::Result<RawChange> {
    let mut cols = Vec::new();
    for i in [0, 1, 2, 3, 4, 5, 6, 7, 8, 11, 12] {
        cols.push(row.get(i)?);
    }
    Ok(RawChange(cols, [row.get(9)?, row.get(10)?]))
}

fn into_change(raw: RawChange) -> Result<ChangeRecord, StoreError> {
    let t = "changes";
    let RawChange(c, [old_size, new_size]) = raw;
    let mut c = c.into_iter();
    let mut next = || c.next().flatten();
    Ok(ChangeRecord {
        change_id: parse(t, "change_id", &next().unwrap_or_default())?,
        plan_id: parse(t, "plan_id", &next().unwrap_or_default())?,
        call_id: parse(t, "call_id", &next().unwrap_or_default())?,
        resource_name: next().unwrap_or_default(),
        change: Change {
            operation: parse::<ChangeOp>(t, "operation", &next().unwrap_or_default())?,
            path: next().unwrap_or_default(),
            old_path: next(),
            old_hash: next(),
            new_hash: next(),
            old_size: old_size.and_then(|v| u64::try_from(v).ok()),
            new_size: new_size.and_then(|v| u64::try_from(v).ok()),
        },
        created_at: parse(t, "created_at", &next().unwrap_or_default())?,
        discarded_at: opt_time(t, "discarded_at", next())?,
    })
}

impl Store {
    /// Inserts a sandbox target.
    ///
    /// # Errors
    /// [`StoreError::Sqlite`] (for example a duplicate or a missing plan).
    pub fn insert_sandbox_target(
        &mut self,
        target: &SandboxTarget,
        now: Timestamp,
    ) -> Result<(), StoreError> {
        let base = match &target.kind {
            TargetKind::GitCheckout { base_commit, .. } => Some(base_commit.as_str()),
            TargetKind::Directory { .. } => None,
        };
        let tx = self.conn_mut().transaction()?;
        tx.execute(
            "INSERT INTO sandbox_targets (plan_id, resource_name, alias, kind, source_path, \
             base_commit, read_only, created_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
            params![
                target.plan_id.to_string(),
                target.resource_name,
                target.alias,
                target.kind.as_str(),
                target.kind.source_path().to_string_lossy(),
                base,
                i64::from(target.read_only),
                now.to_string(),
            ],
        )?;
        tx.commit()?;
        Ok(())
    }

    /// The target of (plan, resource).
    ///
    /// # Errors
    /// [`StoreError::Sqlite`] or [`StoreError::Corrupt`].
    pub fn sandbox_target(
        &self,
        plan_id: &Id,
        resource: &str,
    ) -> Result<Option<SandboxTarget>, StoreError> {
        self.conn()
            .query_row(
                &format!(
                    "SELECT {TARGET_COLUMNS} FROM sandbox_targets WHERE plan_id = ?1 AND resource_name = ?2"
                ),
                params![plan_id.to_string(), resource],
                target_row,
            )
            .optional()?
            .map(into_target)
            .transpose()
    }

    /// Every target of a plan, in registration order.
    ///
    /// # Errors
    /// [`StoreError::Sqlite`] or [`StoreError::Corrupt`].
    pub fn sandbox_targets(&self, plan_id: &Id) -> Result<Vec<SandboxTarget>, StoreError> {
        let mut stmt = self.conn().prepare(&format!(
            "SELECT {TARGET_COLUMNS} FROM sandbox_targets WHERE plan_id = ?1 ORDER BY created_at, rowid"
        ))?;
        let rows = stmt
            .query_map([plan_id.to_string()], target_row)?
            .collect::<Result<Vec<_>, _>>()?;
        rows.into_iter().map(into_target).collect()
    }

    /// Inserts a sandbox row (normally in state `creating`) and adds its id to the plan's
    /// `sandbox_refs`, in one transaction.
    ///
    /// # Errors
    /// [`StoreError::Sqlite`].
    pub fn insert_sandbox(&mut self, r: &SandboxRecord) -> Result<(), StoreError> {
        let tx = self.conn_mut().transaction()?;
        tx.execute(
            &format!("INSERT INTO sandboxes ({SANDBOX_COLUMNS}) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)"),
            params![
                r.sandbox_id.to_string(),
                r.plan_id.to_string(),
                r.resource_name,
                r.strategy.as_str(),
                r.state.as_str(),
                r.root_dir.to_string_lossy(),
                r.base_commit,
                r.created_at.to_string(),
                r.released_at.map(|t| t.to_string()),
                r.removed_at.map(|t| t.to_string()),
            ],
        )?;
        tx.execute(
            if tx.is_postgres() {
                "UPDATE plans SET sandbox_refs = (sandbox_refs::jsonb || to_jsonb(CAST(?2 AS TEXT)))::text WHERE plan_id = ?1"
            } else {
                "UPDATE plans SET sandbox_refs = json_insert(sandbox_refs, '$[#]', ?2) WHERE plan_id = ?1"
            },
            params![r.plan_id.to_string(), r.sandbox_id.to_string()],
        )?;
        tx.commit()?;
        Ok(())
    }

    /// Marks a sandbox active with its base commit.
    ///
    /// # Errors
    /// [`StoreError::Sqlite`].
    pub fn activate_sandbox(&mut self, id: &Id, base_commit: &str) -> Result<(), StoreError> {
        self.conn().execute(
            "UPDATE sandboxes SET state = 'active', base_commit = ?2 WHERE sandbox_id = ?1",
            params![id.to_string(), base_commit],
        )?;
        Ok(())
    }

    /// Records that a sandbox's files now live in `root_dir` (an instance on another machine
    /// rebuilt them from the checkpoint store to drive the plan).
    ///
    /// # Errors
    /// [`StoreError::Sqlite`].
    pub fn move_sandbox(&self, id: &Id, root_dir: &std::path::Path) -> Result<(), StoreError> {
        self.conn().execute(
            "UPDATE sandboxes SET root_dir = ?2 WHERE sandbox_id = ?1",
            params![id.to_string(), root_dir.to_string_lossy()],
        )?;
        Ok(())
    }

    /// Releases or removes a sandbox (`state` is [`SandboxState::Released`] or
    /// [`SandboxState::Removed`]) and records it on its plan as a `sandbox_cleaned` event with
    /// `reason`, in one transaction.
    ///
    /// # Errors
    /// [`StoreError::Sqlite`]; nothing is written then.
    pub fn clean_sandbox(
        &mut self,
        record: &SandboxRecord,
        state: SandboxState,
        now: Timestamp,
        reason: &str,
    ) -> Result<(), StoreError> {
        let column = match state {
            SandboxState::Released => "released_at",
            _ => "removed_at",
        };
        let tx = self.conn_mut().transaction()?;
        tx.execute(
            &format!("UPDATE sandboxes SET state = ?2, {column} = ?3 WHERE sandbox_id = ?1"),
            params![
                record.sandbox_id.to_string(),
                state.as_str(),
                now.to_string()
            ],
        )?;
        let event = EventKind::SandboxCleaned(SandboxCleaned {
            sandbox_id: record.sandbox_id.to_string(),
            resource: record.resource_name.clone(),
            action: state.as_str().to_string(),
            reason: reason.to_string(),
        });
        super::events::append(&tx, Some(&record.plan_id), &event)?;
        tx.commit()?;
        Ok(())
    }

    /// Deletes a sandbox row (a failed creation) and its id from the plan's `sandbox_refs`.
    ///
    /// # Errors
    /// [`StoreError::Sqlite`].
    pub fn delete_sandbox(&mut self, id: &Id) -> Result<(), StoreError> {
        let tx = self.conn_mut().transaction()?;
        tx.execute(
            if tx.is_postgres() {
                "UPDATE plans SET sandbox_refs = (SELECT COALESCE(jsonb_agg(v), '[]'::jsonb)::text \
                 FROM jsonb_array_elements_text(plans.sandbox_refs::jsonb) AS e(v) WHERE v != ?1) \
                 WHERE plan_id = (SELECT plan_id FROM sandboxes WHERE sandbox_id = ?1)"
            } else {
                "UPDATE plans SET sandbox_refs = (SELECT json_group_array(value) FROM json_each(plans.sandbox_refs) WHERE value != ?1) \
                 WHERE plan_id = (SELECT plan_id FROM sandboxes WHERE sandbox_id = ?1)"
            },
            [id.to_string()],
        )?;
        tx.execute(
            "DELETE FROM sandboxes WHERE sandbox_id = ?1",
            [id.to_string()],
        )?;
        tx.commit()?;
        Ok(())
    }

    /// The sandbox of (plan, resource).
    ///
    /// # Errors
    /// [`StoreError::Sqlite`] or [`StoreError::Corrupt`].
    pub fn sandbox(
        &self,
        plan_id: &Id,
        resource: &str,
    ) -> Result<Option<SandboxRecord>, StoreError> {
        self.conn()
            .query_row(
                &format!("SELECT {SANDBOX_COLUMNS} FROM sandboxes WHERE plan_id = ?1 AND resource_name = ?2"),
                params![plan_id.to_string(), resource],
                sandbox_row,
            )
            .optional()?
            .map(into_sandbox)
            .transpose()
    }

    /// Every sandbox of a plan, in creation order.
    ///
    /// # Errors
    /// [`StoreError::Sqlite`] or [`StoreError::Corrupt`].
    pub fn sandboxes_of_plan(&self, plan_id: &Id) -> Result<Vec<SandboxRecord>, StoreError> {
        let mut stmt = self.conn().prepare(&format!(
            "SELECT {SANDBOX_COLUMNS} FROM sandboxes WHERE plan_id = ?1 ORDER BY sandbox_id"
        ))?;
        let rows = stmt
            .query_map([plan_id.to_string()], sandbox_row)?
            .collect::<Result<Vec<_>, _>>()?;
        rows.into_iter().map(into_sandbox).collect()
    }

    /// Every sandbox, oldest first.
    ///
    /// # Errors
    /// [`StoreError::Sqlite`] or [`StoreError::Corrupt`].
    pub fn all_sandboxes(&self) -> Result<Vec<SandboxRecord>, StoreError> {
        let mut stmt = self.conn().prepare(&format!(
            "SELECT {SANDBOX_COLUMNS} FROM sandboxes ORDER BY sandbox_id"
        ))?;
        let rows = stmt
            .query_map([], sandbox_row)?
            .collect::<Result<Vec<_>, _>>()?;
        rows.into_iter().map(into_sandbox).collect()
    }

    fn checkpoint_states(&self, id: &str) -> Result<Vec<CheckpointState>, StoreError> {
        let mut stmt = self.conn().prepare(
            "SELECT sandbox_id, commit_oid, tree_oid FROM checkpoint_states WHERE checkpoint_id = ?1 ORDER BY sandbox_id",
        )?;
        let rows = stmt
            .query_map([id], |r| {
                Ok((
                    r.get::<_, String>(0)?,
                    r.get::<_, String>(1)?,
                    r.get::<_, String>(2)?,
                ))
            })?
            .collect::<Result<Vec<_>, _>>()?;
        rows.into_iter()
            .map(|(s, commit_oid, tree_oid)| {
                Ok(CheckpointState {
                    sandbox_id: parse("checkpoint_states", "sandbox_id", &s)?,
                    commit_oid,
                    tree_oid,
                })
            })
            .collect()
    }

    fn load_checkpoint(&self, raw: RawCheckpoint) -> Result<CheckpointRecord, StoreError> {
        let t = "checkpoints";
        let RawCheckpoint(c, [seq, files, calls]) = raw;
        let mut c = c.into_iter();
        let mut next = || c.next().flatten();
        let id_text = next().unwrap_or_default();
        let checkpoint_id: CheckpointId = parse(t, "checkpoint_id", &id_text)?;
        let plan_id = parse(t, "plan_id", &next().unwrap_or_default())?;
        let step = next();
        let decision_id = next();
        let label = next().unwrap_or_default();
        let created_at = parse(t, "created_at", &next().unwrap_or_default())?;
        let discarded_at = opt_time(t, "discarded_at", next())?;
        Ok(CheckpointRecord {
            states: self.checkpoint_states(&id_text)?,
            checkpoint_id,
            plan_id,
            seq: u32::try_from(seq).unwrap_or(0),
            step,
            decision_id,
            label,
            files_changed: u64::try_from(files).unwrap_or(0),
            tool_call_seq: u64::try_from(calls).unwrap_or(0),
            created_at,
            discarded_at,
        })
    }

    /// Inserts a checkpoint with its states, assigning the next `seq` of the plan; returns the
    /// stored record.
    ///
    /// # Errors
    /// [`StoreError::Sqlite`].
    pub fn insert_checkpoint(
        &mut self,
        cp: &CheckpointRecord,
    ) -> Result<CheckpointRecord, StoreError> {
        let tx = self.conn_mut().transaction()?;
        let seq: i64 = tx.query_row(
            "SELECT coalesce(max(seq), 0) + 1 FROM checkpoints WHERE plan_id = ?1",
            [cp.plan_id.to_string()],
            |r| r.get(0),
        )?;
        tx.execute(
            &format!("INSERT INTO checkpoints ({CHECKPOINT_COLUMNS}) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, NULL)"),
            params![
                cp.checkpoint_id.as_str(),
                cp.plan_id.to_string(),
                seq,
                cp.step,
                cp.decision_id,
                cp.label,
                i64::try_from(cp.files_changed).unwrap_or(i64::MAX),
                i64::try_from(cp.tool_call_seq).unwrap_or(i64::MAX),
                cp.created_at.to_string(),
            ],
        )?;
        for s in &cp.states {
            tx.execute(
                "INSERT INTO checkpoint_states (checkpoint_id, sandbox_id, commit_oid, tree_oid) VALUES (?1, ?2, ?3, ?4)",
                params![cp.checkpoint_id.as_str(), s.sandbox_id.to_string(), s.commit_oid, s.tree_oid],
            )?;
        }
        tx.commit()?;
        let mut stored = cp.clone();
        stored.seq = u32::try_from(seq).unwrap_or(0);
        Ok(stored)
    }

    /// Every checkpoint of a plan, oldest first (discarded ones included).
    ///
    /// # Errors
    /// [`StoreError::Sqlite`] or [`StoreError::Corrupt`].
    pub fn checkpoints(&self, plan_id: &Id) -> Result<Vec<CheckpointRecord>, StoreError> {
        let mut stmt = self.conn().prepare(&format!(
            "SELECT {CHECKPOINT_COLUMNS} FROM checkpoints WHERE plan_id = ?1 ORDER BY seq"
        ))?;
        let rows = stmt
            .query_map([plan_id.to_string()], checkpoint_row)?
            .collect::<Result<Vec<_>, _>>()?;
        rows.into_iter().map(|r| self.load_checkpoint(r)).collect()
    }

    /// The newest checkpoint of a plan that was not discarded.
    ///
    /// # Errors
    /// [`StoreError::Sqlite`] or [`StoreError::Corrupt`].
    pub fn latest_checkpoint(&self, plan_id: &Id) -> Result<Option<CheckpointRecord>, StoreError> {
        self.conn()
            .query_row(
                &format!("SELECT {CHECKPOINT_COLUMNS} FROM checkpoints WHERE plan_id = ?1 AND discarded_at IS NULL ORDER BY seq DESC LIMIT 1"),
                [plan_id.to_string()],
                checkpoint_row,
            )
            .optional()?
            .map(|r| self.load_checkpoint(r))
            .transpose()
    }

    /// One checkpoint by full id.
    ///
    /// # Errors
    /// [`StoreError::Sqlite`] or [`StoreError::Corrupt`].
    pub fn checkpoint(&self, id: &CheckpointId) -> Result<Option<CheckpointRecord>, StoreError> {
        self.conn()
            .query_row(
                &format!("SELECT {CHECKPOINT_COLUMNS} FROM checkpoints WHERE checkpoint_id = ?1"),
                [id.as_str()],
                checkpoint_row,
            )
            .optional()?
            .map(|r| self.load_checkpoint(r))
            .transpose()
    }

    /// Resolves a checkpoint of a plan from a full id, a unique prefix (with or without
    /// `cp_`, at least 4 characters after it) or its sequence number (`3`).
    ///
    /// # Errors
    /// `Ok(Err(..))` when nothing or several match.
    pub fn resolve_checkpoint(
        &self,
        plan_id: &Id,
        input: &str,
    ) -> Result<Result<CheckpointId, IdPrefixError>, StoreError> {
        if let Ok(seq) = input.parse::<u32>() {
            let found: Option<String> = self
                .conn()
                .query_row(
                    "SELECT checkpoint_id FROM checkpoints WHERE plan_id = ?1 AND seq = ?2",
                    params![plan_id.to_string(), seq],
                    |r| r.get(0),
                )
                .optional()?;
            return Ok(match found {
                Some(id) => Ok(parse("checkpoints", "checkpoint_id", &id)?),
                None => Err(IdPrefixError::NotFound {
                    kind: "checkpoint",
                    prefix: input.to_string(),
                }),
            });
        }
        let bare = input
            .strip_prefix("cp_")
            .or_else(|| input.strip_prefix("CP_"))
            .unwrap_or(input)
            .to_ascii_uppercase();
        let mut stmt = self.conn().prepare(
            "SELECT substr(checkpoint_id, 4) FROM checkpoints WHERE plan_id = ?1 AND substr(checkpoint_id, 4, length(?2)) = ?2 ORDER BY seq LIMIT 20",
        )?;
        let ids: Vec<String> = stmt
            .query_map(params![plan_id.to_string(), bare], |r| r.get(0))?
            .collect::<Result<_, _>>()?;
        Ok(resolve_prefix("checkpoint", &bare, ids).map(|s| {
            format!("cp_{s}")
                .parse()
                .expect("stored checkpoint ids are valid")
        }))
    }

    /// The highest tool-call sequence number of a plan (0 when none).
    ///
    /// # Errors
    /// [`StoreError::Sqlite`].
    pub fn max_tool_call_seq(&self, plan_id: &Id) -> Result<u64, StoreError> {
        let n: i64 = self.conn().query_row(
            "SELECT coalesce(max(seq), 0) FROM tool_calls WHERE plan_id = ?1",
            [plan_id.to_string()],
            |r| r.get(0),
        )?;
        Ok(u64::try_from(n).unwrap_or(0))
    }

    /// Logs a tool call with its changes in one transaction, assigning the next `seq`; returns
    /// the stored record.
    ///
    /// # Errors
    /// [`StoreError::Sqlite`].
    pub fn insert_tool_call(
        &mut self,
        call: &ToolCallRecord,
        changes: &[Change],
    ) -> Result<ToolCallRecord, StoreError> {
        let tx = self.conn_mut().transaction()?;
        let seq: i64 = tx.query_row(
            "SELECT coalesce(max(seq), 0) + 1 FROM tool_calls WHERE plan_id = ?1",
            [call.plan_id.to_string()],
            |r| r.get(0),
        )?;
        tx.execute(
            &format!("INSERT INTO tool_calls ({CALL_COLUMNS}) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, NULL)"),
            params![
                call.call_id.to_string(),
                call.plan_id.to_string(),
                seq,
                call.tool,
                call.parent_skill,
                call.resource_name,
                crate::redact::redact(&call.arguments.to_string()).into_owned(),
                call.outcome.as_str(),
                call.error_code,
                call.error_message.as_deref().map(|m| crate::redact::redact(m).into_owned()),
                call.result_summary.as_deref().map(|m| crate::redact::redact(m).into_owned()),
                serde_json::to_string(&call.resources_touched).expect("strings serialize"),
                i64::try_from(call.duration_ms).unwrap_or(i64::MAX),
                call.started_at.to_string(),
            ],
        )?;
        for change in changes {
            tx.execute(
                &format!("INSERT INTO changes ({CHANGE_COLUMNS}) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, NULL)"),
                params![
                    Id::generate().to_string(),
                    call.plan_id.to_string(),
                    call.call_id.to_string(),
                    call.resource_name.clone().unwrap_or_default(),
                    change.operation.as_str(),
                    change.path,
                    change.old_path,
                    change.old_hash,
                    change.new_hash,
                    change.old_size.map(|v| i64::try_from(v).unwrap_or(i64::MAX)),
                    change.new_size.map(|v| i64::try_from(v).unwrap_or(i64::MAX)),
                    call.started_at.to_string(),
                ],
            )?;
        }
        tx.commit()?;
        let mut stored = call.clone();
        stored.seq = u64::try_from(seq).unwrap_or(0);
        Ok(stored)
    }

    /// The execution log of a plan, oldest first (discarded calls included).
    ///
    /// # Errors
    /// [`StoreError::Sqlite`] or [`StoreError::Corrupt`].
    pub fn tool_calls(&self, plan_id: &Id) -> Result<Vec<ToolCallRecord>, StoreError> {
        let mut stmt = self.conn().prepare(&format!(
            "SELECT {CALL_COLUMNS} FROM tool_calls WHERE plan_id = ?1 ORDER BY seq"
        ))?;
        let rows = stmt
            .query_map([plan_id.to_string()], call_row)?
            .collect::<Result<Vec<_>, _>>()?;
        rows.into_iter().map(into_call).collect()
    }

    /// The changes of a plan in the order they were made; discarded ones only when asked.
    ///
    /// # Errors
    /// [`StoreError::Sqlite`] or [`StoreError::Corrupt`].
    pub fn changes(
        &self,
        plan_id: &Id,
        include_discarded: bool,
    ) -> Result<Vec<ChangeRecord>, StoreError> {
        let filter = if include_discarded {
            ""
        } else {
            " AND c.discarded_at IS NULL"
        };
        let cols = CHANGE_COLUMNS
            .split(", ")
            .map(|c| format!("c.{}", c.trim()))
            .collect::<Vec<_>>()
            .join(", ");
        let mut stmt = self.conn().prepare(&format!(
            "SELECT {cols} FROM changes c JOIN tool_calls t ON t.call_id = c.call_id \
             WHERE c.plan_id = ?1{filter} ORDER BY t.seq, c.rowid"
        ))?;
        let rows = stmt
            .query_map([plan_id.to_string()], change_row)?
            .collect::<Result<Vec<_>, _>>()?;
        rows.into_iter().map(into_change).collect()
    }

    /// Records a rollback to `cp` in one transaction: later checkpoints, tool calls and their
    /// changes are marked discarded and the plan gets `status`. Returns (checkpoints, tool
    /// calls) discarded.
    ///
    /// # Errors
    /// [`StoreError::Sqlite`].
    pub fn record_rollback(
        &mut self,
        cp: &CheckpointRecord,
        status: PlanStatus,
        now: Timestamp,
    ) -> Result<(u64, u64), StoreError> {
        let plan = cp.plan_id.to_string();
        let now_s = now.to_string();
        let tx = self.conn_mut().transaction()?;
        let checkpoints = tx.execute(
            "UPDATE checkpoints SET discarded_at = ?3 WHERE plan_id = ?1 AND seq > ?2 AND discarded_at IS NULL",
            params![plan, cp.seq, now_s],
        )?;
        tx.execute(
            "UPDATE changes SET discarded_at = ?3 WHERE discarded_at IS NULL AND call_id IN \
             (SELECT call_id FROM tool_calls WHERE plan_id = ?1 AND seq > ?2)",
            params![
                plan,
                i64::try_from(cp.tool_call_seq).unwrap_or(i64::MAX),
                now_s
            ],
        )?;
        let calls = tx.execute(
            "UPDATE tool_calls SET discarded_at = ?3 WHERE plan_id = ?1 AND seq > ?2 AND discarded_at IS NULL",
            params![plan, i64::try_from(cp.tool_call_seq).unwrap_or(i64::MAX), now_s],
        )?;
        tx.execute(
            "UPDATE plans SET phase = ?2, state = ?3, attempt = ?4, updated_at = ?5 WHERE plan_id = ?1",
            params![plan, status.phase.as_str(), status.state.as_str(), status.attempt, now_s],
        )?;
        tx.commit()?;
        Ok((checkpoints as u64, calls as u64))
    }
}
