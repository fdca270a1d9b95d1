//! The step journal (migration `022_step_journal.sql`): a model executor's step recorded call
//! by call, so that a step whose driver vanished continues at the exact call
//! (docs/sandbox.md, "Resuming a step"). Each entry is one transaction, together with the
//! model-call row it accounts for, committed before the next call is made.

use rusqlite::{OptionalExtension, params};
use serde_json::Value;

use super::model_calls::NewModelCall;
use super::{Store, StoreError};
use crate::domain::id::Id;

/// One entry of a step's journal.
#[derive(Debug, Clone, PartialEq)]
pub struct JournalEntry {
    /// 1, 2, ... within the step's journal.
    pub seq: u32,
    /// `start`, `model_started`, `model`, `note`, `tool_started`, `tool` or `resumed`.
    pub kind: String,
    /// What the entry records (JSON).
    pub entry: Value,
}

fn corrupt(message: String) -> StoreError {
    StoreError::Corrupt {
        table: "step_journal",
        column: "entry",
        message,
    }
}

/// A `LIKE` pattern for the keys nested under `key` (`key/...`).
fn nested(key: &str) -> String {
    let mut pattern = String::with_capacity(key.len() + 2);
    for c in key.chars() {
        if matches!(c, '%' | '_' | '\\') {
            pattern.push('\\');
        }
        pattern.push(c);
    }
    pattern.push_str("/%");
    pattern
}

impl Store {
    /// Appends an entry to the journal of `decision`'s step, with `call` (a model call's
    /// accounting row) in the same transaction. Returns the entry's sequence number.
    ///
    /// # Errors
    /// [`StoreError::Sqlite`]; nothing is written then.
    pub fn journal_append(
        &mut self,
        plan_id: &Id,
        decision_id: &str,
        kind: &str,
        entry: &Value,
        call: Option<&NewModelCall>,
    ) -> Result<u32, StoreError> {
        let plan = plan_id.to_string();
        let tx = self.conn_mut().transaction()?;
        let seq: u32 = tx.query_row(
            "SELECT COALESCE(MAX(seq), 0) + 1 FROM step_journal WHERE plan_id = ?1 AND decision_id = ?2",
            params![plan, decision_id],
            |r| r.get(0),
        )?;
        tx.execute(
            "INSERT INTO step_journal (plan_id, decision_id, seq, kind, entry, created_at) \
             VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
            params![
                plan,
                decision_id,
                seq,
                kind,
                entry.to_string(),
                jiff::Timestamp::now().to_string()
            ],
        )?;
        if let Some(call) = call {
            super::model_calls::insert_in(&tx, call)?;
        }
        tx.commit()?;
        Ok(seq)
    }

    /// The journal of `decision`'s step, in order.
    ///
    /// # Errors
    /// [`StoreError::Sqlite`], or [`StoreError::Corrupt`] for an entry that is not JSON.
    pub fn journal(
        &self,
        plan_id: &Id,
        decision_id: &str,
    ) -> Result<Vec<JournalEntry>, StoreError> {
        let mut stmt = self.conn().prepare(
            "SELECT seq, kind, entry FROM step_journal WHERE plan_id = ?1 AND decision_id = ?2 ORDER BY seq",
        )?;
        let rows = stmt.query_map(params![plan_id.to_string(), decision_id], |r| {
            Ok((
                r.get::<_, u32>(0)?,
                r.get::<_, String>(1)?,
                r.get::<_, String>(2)?,
            ))
        })?;
        let mut out = Vec::new();
        for row in rows {
            let (seq, kind, entry) = row?;
            let entry =
                serde_json::from_str(&entry).map_err(|e| corrupt(format!("entry {seq}: {e}")))?;
            out.push(JournalEntry { seq, kind, entry });
        }
        Ok(out)
    }

    /// Clears the journal of `decision`'s step, with the journals nested under it (a graph
    /// actor's nodes, keyed `<decision>/<step>:<node>`): the step starts afresh.
    ///
    /// # Errors
    /// [`StoreError::Sqlite`].
    pub fn journal_clear(&mut self, plan_id: &Id, decision_id: &str) -> Result<(), StoreError> {
        self.conn().execute(
            "DELETE FROM step_journal WHERE plan_id = ?1 AND (decision_id = ?2 OR decision_id LIKE ?3 ESCAPE '\\')",
            params![plan_id.to_string(), decision_id, nested(decision_id)],
        )?;
        Ok(())
    }

    /// Closes a run's journal that must not be continued (its run ended): its entries go, but
    /// the `resumed` ones stay, so that `plan status` still says where the run continued.
    /// A journal of only `resumed` entries rebuilds to nothing and the next run starts
    /// afresh.
    ///
    /// # Errors
    /// [`StoreError::Sqlite`].
    pub fn journal_close(&mut self, plan_id: &Id, key: &str) -> Result<(), StoreError> {
        self.conn().execute(
            "DELETE FROM step_journal WHERE plan_id = ?1 AND (decision_id = ?2 OR decision_id LIKE ?3 ESCAPE '\\') AND kind <> 'resumed'",
            params![plan_id.to_string(), key, nested(key)],
        )?;
        Ok(())
    }

    /// Clears the journals of every step of the plan (a rollback discarded the work they
    /// recorded: the steps run again from their start).
    ///
    /// # Errors
    /// [`StoreError::Sqlite`].
    pub fn journal_clear_plan(&mut self, plan_id: &Id) -> Result<u64, StoreError> {
        Ok(self.conn().execute(
            "DELETE FROM step_journal WHERE plan_id = ?1",
            [plan_id.to_string()],
        )? as u64)
    }

    /// The plan's latest `resumed` entry: its step's decision and what it records.
    ///
    /// # Errors
    /// [`StoreError::Sqlite`], [`StoreError::Corrupt`].
    pub fn last_resume(&self, plan_id: &Id) -> Result<Option<(String, Value)>, StoreError> {
        let row: Option<(String, String)> = self
            .conn()
            .query_row(
                "SELECT decision_id, entry FROM step_journal WHERE plan_id = ?1 AND kind = 'resumed' \
                 ORDER BY created_at DESC, seq DESC LIMIT 1",
                [plan_id.to_string()],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .optional()?;
        row.map(|(d, e)| {
            serde_json::from_str(&e)
                .map(|v| (d, v))
                .map_err(|e| corrupt(e.to_string()))
        })
        .transpose()
    }

    /// Marks the plan's tool calls logged after `seq` (and their changes) discarded: their
    /// effects were rolled back. Returns how many calls.
    ///
    /// # Errors
    /// [`StoreError::Sqlite`].
    pub fn discard_tool_calls_after(&mut self, plan_id: &Id, seq: u64) -> Result<u64, StoreError> {
        let plan = plan_id.to_string();
        let seq = i64::try_from(seq).unwrap_or(i64::MAX);
        let now = jiff::Timestamp::now().to_string();
        let tx = self.conn_mut().transaction()?;
        tx.execute(
            "UPDATE changes SET discarded_at = ?3 WHERE discarded_at IS NULL AND call_id IN \
             (SELECT call_id FROM tool_calls WHERE plan_id = ?1 AND seq > ?2)",
            params![plan, seq, now],
        )?;
        let calls = tx.execute(
            "UPDATE tool_calls SET discarded_at = ?3 WHERE plan_id = ?1 AND seq > ?2 AND discarded_at IS NULL",
            params![plan, seq, now],
        )?;
        tx.commit()?;
        Ok(calls as u64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::plan::Plan;

    #[test]
    fn entries_come_back_in_order_and_clearing_starts_the_step_afresh() {
        let dir = tempfile::tempdir().unwrap();
        let mut store = Store::open(&dir.path().join("db")).unwrap();
        let plan = Plan::new("local/x", "x", jiff::Timestamp::now());
        store.insert_plan(&plan).unwrap();
        let id = plan.plan_id;
        for kind in ["start", "model_started", "model", "resumed"] {
            store
                .journal_append(&id, "d1", kind, &serde_json::json!({"k": kind}), None)
                .unwrap();
        }
        store
            .journal_append(&id, "d2", "start", &serde_json::json!({}), None)
            .unwrap();
        let kinds: Vec<(u32, String)> = store
            .journal(&id, "d1")
            .unwrap()
            .into_iter()
            .map(|e| (e.seq, e.kind))
            .collect();
        assert_eq!(
            kinds,
            vec![
                (1, "start".into()),
                (2, "model_started".into()),
                (3, "model".into()),
                (4, "resumed".into())
            ]
        );
        let (decision, entry) = store.last_resume(&id).unwrap().unwrap();
        assert_eq!(
            (decision.as_str(), &entry["k"]),
            ("d1", &serde_json::json!("resumed"))
        );
        store.journal_clear(&id, "d1").unwrap();
        assert!(store.journal(&id, "d1").unwrap().is_empty());
        assert_eq!(store.journal(&id, "d2").unwrap().len(), 1);
        assert!(store.last_resume(&id).unwrap().is_none());
    }

    #[test]
    fn clearing_or_closing_a_journal_takes_the_journals_nested_under_its_key_and_no_other() {
        let dir = tempfile::tempdir().unwrap();
        let mut store = Store::open(&dir.path().join("db")).unwrap();
        let plan = Plan::new("local/x", "x", jiff::Timestamp::now());
        store.insert_plan(&plan).unwrap();
        let id = plan.plan_id;
        let keys = ["d_1", "d_1/1:draft", "d_1/2:sub/1:inner", "dx1/1:draft", "d_10/1:a"];
        for key in keys {
            for kind in ["node_started", "resumed"] {
                store
                    .journal_append(&id, key, kind, &serde_json::json!({}), None)
                    .unwrap();
            }
        }
        let left = |store: &Store| -> Vec<usize> {
            keys.iter()
                .map(|k| store.journal(&id, k).unwrap().len())
                .collect()
        };
        store.journal_close(&id, "d_1").unwrap();
        assert_eq!(left(&store), [1, 1, 1, 2, 2], "closing keeps the `resumed` entries");
        // `_` is no wildcard here: `dx1/...` and `d_10/...` are other steps' journals.
        store.journal_clear(&id, "d_1").unwrap();
        assert_eq!(left(&store), [0, 0, 0, 2, 2]);
    }
}
