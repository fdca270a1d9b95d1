//! Correction rows: `correction_attempts`, and the look-ups corrections and
//! `plan tree` need over `decisions` and `decision_dependencies` (the transitive dependents of
//! a decision across child plans, the child plans linked to spawn decisions, short-id
//! resolution of decisions).

use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;

use jiff::Timestamp;
use rusqlite::{OptionalExtension, params};
use serde::Serialize;
use serde_json::{Value, json};

use super::codec::{from_json, opt_ts, to_json, ts};
use super::{Store, StoreError};
use crate::domain::decision::DecisionType;
use crate::domain::id::{Id, IdPrefixError, resolve_prefix};

const T: &str = "correction_attempts";

/// Where a correction attempt stands.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Serialize, serde::Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum AttemptStatus {
    /// Recorded; nothing re-run yet.
    Pending,
    /// Affected steps are being re-run and later ones replayed.
    Executing,
    /// Execute finished for the corrected attempt.
    Completed,
    /// The correction could not finish (the plan errored).
    Failed,
}

crate::domain::lifecycle::str_enum!(AttemptStatus {
    Pending => "pending",
    Executing => "executing",
    Completed => "completed",
    Failed => "failed",
});

/// One correction attempt (spec 27 "CorrectionAttempt"; its schema is ours, see
/// `docs/decisions.md` "## Corrections").
#[derive(Debug, Clone, PartialEq, Serialize, serde::Deserialize, schemars::JsonSchema)]
pub struct CorrectionAttempt {
    /// `attempt_id` (a ULID).
    pub attempt_id: Id,
    /// The plan corrected.
    pub plan_id: Id,
    /// The decision the user corrected.
    pub original_decision_id: Id,
    /// The correcting decision (revert), or the child plan's root decision (append).
    pub new_decision_id: Option<Id>,
    /// `revert` or `append`.
    pub mode: String,
    /// The plan attempt this correction began.
    pub plan_attempt: Option<u32>,
    /// What the old attempt looked like: affected decisions, old steps with checkpoints, the
    /// final checkpoint before the correction.
    pub original: Value,
    /// The user's guidance.
    pub correction_reason: Option<String>,
    /// Status.
    pub status: AttemptStatus,
    /// What the correction did (steps re-run and replayed, conflicts, final checkpoint).
    pub result: Value,
    /// When it was recorded.
    pub created_at: Timestamp,
    /// When it completed or failed.
    pub completed_at: Option<Timestamp>,
}

/// A decision reached from a corrected one: what the affected set lists.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, serde::Deserialize, schemars::JsonSchema)]
pub struct Reached {
    /// Decision id.
    pub decision_id: Id,
    /// Its plan (the corrected plan or one of its descendants).
    pub plan_id: Id,
    /// Kind.
    pub decision_type: DecisionType,
    /// What it chose.
    pub chosen_option: String,
    /// Order within its plan.
    pub sequence_number: u32,
}

const ATTEMPT_COLUMNS: &str = "attempt_id, plan_id, original_decision_id, new_decision_id, mode, plan_attempt, \
    original_subtree_snapshot, correction_reason, status, result, created_at, completed_at";

type AttemptRow = (
    String,
    String,
    String,
    Option<String>,
    String,
    Option<i64>,
    Option<String>,
    Option<String>,
    String,
    Option<String>,
    String,
    Option<String>,
);

fn corrupt(column: &'static str, m: impl ToString) -> StoreError {
    StoreError::Corrupt {
        table: T,
        column,
        message: m.to_string(),
    }
}

fn id_of(column: &'static str, s: &str) -> Result<Id, StoreError> {
    s.parse().map_err(|e| corrupt(column, e))
}

fn reached_from(
    (id, plan, kind, chosen, seq): (String, String, String, String, i64),
) -> Result<Reached, StoreError> {
    Ok(Reached {
        decision_id: id_of("decision_id", &id)?,
        plan_id: id_of("plan_id", &plan)?,
        decision_type: kind
            .parse()
            .map_err(|e: String| corrupt("decision_type", e))?,
        chosen_option: chosen,
        sequence_number: u32::try_from(seq).unwrap_or(u32::MAX),
    })
}

fn attempt_from(r: AttemptRow) -> Result<CorrectionAttempt, StoreError> {
    let (id, plan, original, new, mode, attempt, snapshot, reason, status, result, created, done) =
        r;
    Ok(CorrectionAttempt {
        attempt_id: id_of("attempt_id", &id)?,
        plan_id: id_of("plan_id", &plan)?,
        original_decision_id: id_of("original_decision_id", &original)?,
        new_decision_id: new.map(|n| id_of("new_decision_id", &n)).transpose()?,
        mode,
        plan_attempt: attempt.map(|a| u32::try_from(a).unwrap_or(u32::MAX)),
        original: match snapshot {
            Some(s) => from_json(T, "original_subtree_snapshot", &s)?,
            None => Value::Null,
        },
        correction_reason: reason,
        status: status.parse().map_err(|e: String| corrupt("status", e))?,
        result: match result {
            Some(s) => from_json(T, "result", &s)?,
            None => Value::Null,
        },
        created_at: ts(T, "created_at", &created)?,
        completed_at: opt_ts(T, "completed_at", done)?,
    })
}

/// Inserts a correction attempt on an open transaction.
///
/// # Errors
/// [`StoreError::Sqlite`].
pub(crate) fn insert_attempt_in(
    conn: &crate::store::Connection,
    a: &CorrectionAttempt,
) -> Result<(), StoreError> {
    conn.execute(
        &format!("INSERT INTO correction_attempts ({ATTEMPT_COLUMNS}) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12)"),
        params![
            a.attempt_id.to_string(),
            a.plan_id.to_string(),
            a.original_decision_id.to_string(),
            a.new_decision_id.map(|i| i.to_string()),
            a.mode,
            a.plan_attempt,
            to_json(&a.original),
            a.correction_reason,
            a.status.as_str(),
            to_json(&a.result),
            a.created_at.to_string(),
            a.completed_at.map(|t| t.to_string()),
        ],
    )?;
    Ok(())
}

/// Sets a decision's `superseded_by`, on an open transaction.
///
/// # Errors
/// [`StoreError::Sqlite`].
pub(crate) fn supersede_in(
    conn: &crate::store::Connection,
    decision: &Id,
    by: &Id,
) -> Result<(), StoreError> {
    conn.execute(
        "UPDATE decisions SET superseded_by = ?2 WHERE decision_id = ?1",
        params![decision.to_string(), by.to_string()],
    )?;
    Ok(())
}

impl Store {
    /// A plan's correction attempts, oldest first.
    ///
    /// # Errors
    /// [`StoreError`].
    pub fn correction_attempts(&self, plan_id: &Id) -> Result<Vec<CorrectionAttempt>, StoreError> {
        let mut stmt = self.conn().prepare(&format!(
            "SELECT {ATTEMPT_COLUMNS} FROM correction_attempts WHERE plan_id = ?1 ORDER BY created_at, attempt_id"
        ))?;
        let rows: Vec<AttemptRow> = stmt
            .query_map([plan_id.to_string()], |r| r.try_into())?
            .collect::<Result<_, _>>()?;
        rows.into_iter().map(attempt_from).collect()
    }

    /// One correction attempt by full id or unique prefix (at least 4 characters).
    ///
    /// # Errors
    /// `Ok(Err(..))` when nothing or several attempts match; [`StoreError`].
    pub fn correction_attempt(
        &self,
        input: &str,
    ) -> Result<Result<CorrectionAttempt, IdPrefixError>, StoreError> {
        let prefix = input.to_ascii_uppercase();
        let mut stmt = self.conn().prepare(
            "SELECT attempt_id FROM correction_attempts WHERE substr(attempt_id, 1, length(?1)) = ?1 ORDER BY attempt_id LIMIT 20",
        )?;
        let ids: Vec<String> = stmt
            .query_map([&prefix], |r| r.get(0))?
            .collect::<Result<_, _>>()?;
        let id = match resolve_prefix("correction attempt", input, ids) {
            Ok(id) => id,
            Err(e) => return Ok(Err(e)),
        };
        let row: AttemptRow = self.conn().query_row(
            &format!("SELECT {ATTEMPT_COLUMNS} FROM correction_attempts WHERE attempt_id = ?1"),
            [id],
            |r| r.try_into(),
        )?;
        attempt_from(row).map(Ok)
    }

    /// Updates an attempt's status and result (and `completed_at` for a final status).
    ///
    /// # Errors
    /// [`StoreError`].
    pub fn finish_correction_attempt(
        &mut self,
        attempt_id: &Id,
        status: AttemptStatus,
        result: &Value,
    ) -> Result<(), StoreError> {
        let done = matches!(status, AttemptStatus::Completed | AttemptStatus::Failed)
            .then(|| Timestamp::now().to_string());
        self.conn().execute(
            "UPDATE correction_attempts SET status = ?2, result = ?3, completed_at = ?4 WHERE attempt_id = ?1",
            params![attempt_id.to_string(), status.as_str(), to_json(result), done],
        )?;
        Ok(())
    }

    /// Up to `limit` decision ids (of any plan) that start with `prefix`, in order: what a
    /// printed prefix must be unique among for [`Store::resolve_decision_id`] to take it back.
    ///
    /// # Errors
    /// [`StoreError`].
    pub fn decision_ids_starting_with(
        &self,
        prefix: &str,
        limit: u32,
    ) -> Result<Vec<String>, StoreError> {
        // A range scan on the primary key: every id with this prefix sorts between the prefix
        // and the prefix followed by the highest Crockford character.
        let mut stmt = self.conn().prepare(
            "SELECT decision_id FROM decisions WHERE decision_id >= ?1 AND decision_id < ?1 || 'ZZZZZZZZZZZZZZZZZZZZZZZZZZ' ORDER BY decision_id LIMIT ?2",
        )?;
        let ids = stmt
            .query_map(rusqlite::params![prefix.to_ascii_uppercase(), limit], |r| {
                r.get(0)
            })?
            .collect::<Result<_, _>>()?;
        Ok(ids)
    }

    /// Every decision id from `first` to `last` (inclusive), with the nearest id before
    /// `first` and after `last` when there are such, in order, each handed to `each` as read
    /// (none is kept): the ids that decide how long a printed prefix of any id in that range
    /// must be to be unique. One range scan on the primary key.
    ///
    /// # Errors
    /// [`StoreError::Sqlite`].
    pub fn each_decision_id_around(
        &self,
        first: &str,
        last: &str,
        mut each: impl FnMut(&str),
    ) -> Result<(), StoreError> {
        let mut stmt = self.conn().prepare(
            "SELECT * FROM (SELECT decision_id FROM decisions WHERE decision_id < ?1 ORDER BY decision_id DESC LIMIT 1) AS before_range
             UNION ALL SELECT * FROM (SELECT decision_id FROM decisions WHERE decision_id BETWEEN ?1 AND ?2 ORDER BY decision_id) AS in_range
             UNION ALL SELECT * FROM (SELECT decision_id FROM decisions WHERE decision_id > ?2 ORDER BY decision_id LIMIT 1) AS after_range",
        )?;
        stmt.for_each(rusqlite::params![first, last], |r| {
            let id = r.get_ref(0)?;
            each(id.as_str().map_err(|e| {
                rusqlite::Error::FromSqlConversionFailure(0, id.data_type(), Box::new(e))
            })?);
            Ok::<_, StoreError>(())
        })
    }

    /// Resolves a full decision id or a unique prefix (at least 4 characters).
    ///
    /// # Errors
    /// `Ok(Err(..))` when nothing or several decisions match; [`StoreError`].
    pub fn resolve_decision_id(
        &self,
        input: &str,
    ) -> Result<Result<Id, IdPrefixError>, StoreError> {
        let ids = self.decision_ids_starting_with(input, 20)?;
        Ok(resolve_prefix("decision", input, ids)
            .map(|s| s.parse().expect("stored decision ids are ULIDs")))
    }

    /// Every current (not superseded) decision that depends on `decision`, transitively, over
    /// every kind of dependency row that names a downstream decision (`decision`, `plan`: a
    /// spawn decision to the child plan's root, and the child plan's own tree), in no
    /// particular order; `decision` itself is not included.
    ///
    /// # Errors
    /// [`StoreError`].
    pub fn transitive_dependents(&self, decision: &Id) -> Result<Vec<Reached>, StoreError> {
        let mut stmt = self.conn().prepare(
            "WITH RECURSIVE reached(id) AS ( \
                SELECT ?1 \
                UNION \
                SELECT dd.downstream_decision_id FROM decision_dependencies dd \
                JOIN reached r ON dd.upstream_decision_id = r.id \
             ) \
             SELECT d.decision_id, d.plan_id, d.decision_type, d.chosen_option, d.sequence_number \
             FROM reached r CROSS JOIN decisions d ON d.decision_id = r.id \
             WHERE d.superseded_by IS NULL AND d.decision_id != ?1",
        )?;
        type Row = (String, String, String, String, i64);
        let rows: Vec<Row> = stmt
            .query_map([decision.to_string()], |r| r.try_into())?
            .collect::<Result<_, _>>()?;
        rows.into_iter().map(reached_from).collect()
    }

    /// Every current decision of `plan_id` and its descendant plans (by `parent_plan_id`)
    /// except `except`: what correcting the plan's root prompt invalidates.
    ///
    /// # Errors
    /// [`StoreError`].
    pub fn family_current_decisions(
        &self,
        plan_id: &Id,
        except: &Id,
    ) -> Result<Vec<Reached>, StoreError> {
        let mut stmt = self.conn().prepare(
            "WITH RECURSIVE fam(id) AS (SELECT CAST(?1 AS TEXT) UNION SELECT p.plan_id FROM plans p JOIN fam f ON p.parent_plan_id = f.id) \
             SELECT d.decision_id, d.plan_id, d.decision_type, d.chosen_option, d.sequence_number \
             FROM fam f CROSS JOIN decisions d ON d.plan_id = f.id \
             WHERE d.superseded_by IS NULL AND d.decision_id != ?2",
        )?;
        type Row = (String, String, String, String, i64);
        let rows: Vec<Row> = stmt
            .query_map(params![plan_id.to_string(), except.to_string()], |r| {
                r.try_into()
            })?
            .collect::<Result<_, _>>()?;
        rows.into_iter().map(reached_from).collect()
    }

    /// The child plans linked to decisions of `plan_id` (agreed linking: a `plan` dependency
    /// row from the spawn decision whose `downstream_ref` is the child plan id), as
    /// (spawn decision, child plan) pairs.
    ///
    /// # Errors
    /// [`StoreError`].
    pub fn spawned_children(&self, plan_id: &Id) -> Result<Vec<(Id, Id)>, StoreError> {
        let mut stmt = self.conn().prepare(
            "SELECT dd.upstream_decision_id, dd.downstream_ref FROM decision_dependencies dd \
             JOIN decisions d ON d.decision_id = dd.upstream_decision_id \
             WHERE d.plan_id = ?1 AND dd.dependency_type = 'plan' ORDER BY dd.downstream_ref",
        )?;
        let rows: Vec<(String, String)> = stmt
            .query_map([plan_id.to_string()], |r| r.try_into())?
            .collect::<Result<_, _>>()?;
        rows.into_iter()
            .map(|(d, p)| {
                Ok((
                    id_of("upstream_decision_id", &d)?,
                    id_of("downstream_ref", &p)?,
                ))
            })
            .collect()
    }

    /// The plans under `root_plan_id` (its descendants, by `root_plan_id`), in id order.
    ///
    /// # Errors
    /// [`StoreError`].
    pub fn descendant_plan_ids(&self, root_plan_id: &Id) -> Result<Vec<Id>, StoreError> {
        let mut stmt = self.conn().prepare(
            "SELECT plan_id FROM plans WHERE root_plan_id = ?1 AND plan_id != ?1 ORDER BY plan_id",
        )?;
        let ids: Vec<String> = stmt
            .query_map([root_plan_id.to_string()], |r| r.get(0))?
            .collect::<Result<_, _>>()?;
        ids.iter().map(|s| id_of("plan_id", s)).collect()
    }

    /// The plan a decision belongs to, if the decision exists.
    ///
    /// # Errors
    /// [`StoreError`].
    pub fn decision_plan(&self, decision: &Id) -> Result<Option<Id>, StoreError> {
        let plan: Option<String> = self
            .conn()
            .query_row(
                "SELECT plan_id FROM decisions WHERE decision_id = ?1",
                [decision.to_string()],
                |r| r.get(0),
            )
            .optional()?;
        plan.map(|p| id_of("plan_id", &p)).transpose()
    }
}

impl Store {
    /// Marks every checkpoint, tool call and change of a plan discarded (a correction rolled
    /// the sandboxes back to their bases, before the first checkpoint). Returns the number of
    /// checkpoints discarded.
    ///
    /// # Errors
    /// [`StoreError`].
    pub fn discard_all_checkpoints(
        &mut self,
        plan_id: &Id,
        now: Timestamp,
    ) -> Result<u64, StoreError> {
        let plan = plan_id.to_string();
        let now = now.to_string();
        let tx = self.conn_mut().transaction()?;
        let n = tx.execute(
            "UPDATE checkpoints SET discarded_at = ?2 WHERE plan_id = ?1 AND discarded_at IS NULL",
            params![plan, now],
        )?;
        tx.execute(
            "UPDATE changes SET discarded_at = ?2 WHERE plan_id = ?1 AND discarded_at IS NULL",
            params![plan, now],
        )?;
        tx.execute(
            "UPDATE tool_calls SET discarded_at = ?2 WHERE plan_id = ?1 AND discarded_at IS NULL",
            params![plan, now],
        )?;
        tx.commit()?;
        Ok(n as u64)
    }
}

/// Marks the plan's `executing` correction attempts completed (Execute finished for the
/// corrected attempt), recording which steps re-ran, which were replayed, the replays that
/// conflicted and the final checkpoint.
///
/// # Errors
/// [`StoreError`].
pub fn finish_attempts(store: &mut Store, plan_id: &Id) -> Result<(), StoreError> {
    let open: Vec<CorrectionAttempt> = store
        .correction_attempts(plan_id)?
        .into_iter()
        .filter(|a| a.status == AttemptStatus::Executing)
        .collect();
    if open.is_empty() {
        return Ok(());
    }
    let steps = store.plan_steps(plan_id)?;
    let mut rerun = Vec::new();
    let mut replayed = Vec::new();
    let mut conflicts = BTreeMap::new();
    let mut kept = Vec::new();
    for s in &steps {
        let out: Value = s
            .output
            .as_deref()
            .and_then(|o| serde_json::from_str(o).ok())
            .unwrap_or(Value::Null);
        let id = s.decision_id.to_string();
        if out.get("replayed").is_some() {
            replayed.push(id);
        } else if let Some(c) = out.get("replay_conflict") {
            conflicts.insert(id.clone(), c.clone());
            rerun.push(id);
        } else if open
            .iter()
            .any(|a| s.started_at.is_some_and(|t| t >= a.created_at))
        {
            rerun.push(id);
        } else {
            kept.push(id);
        }
    }
    let latest = store.latest_checkpoint(plan_id)?;
    for a in open {
        let mut result = a.result.clone();
        if !result.is_object() {
            result = json!({});
        }
        result["steps_rerun"] = json!(rerun);
        result["steps_replayed"] = json!(replayed);
        result["replay_conflicts"] = json!(conflicts);
        result["steps_kept"] = json!(kept);
        result["final_checkpoint"] = json!(latest.as_ref().map(|c| c.checkpoint_id.to_string()));
        result["final_states"] = json!(latest.as_ref().map(|c| &c.states));
        store.finish_correction_attempt(&a.attempt_id, AttemptStatus::Completed, &result)?;
    }
    Ok(())
}
