//! Writing and reading the `events` table: [`append`] inside the caller's transaction, [`after`]
//! and [`Follower`] for readers in any process. The record types are [`crate::domain::event`].

use jiff::Timestamp;
use rusqlite::params;
use crate::store::Transaction;
use serde_json::Value;

use super::{Store, StoreError};
use crate::domain::event::{Change, EngineEvent, EventKind, Registry, RegistryChanged};
use crate::domain::id::Id;

/// Appends an event inside the caller's transaction and returns its sequence number, so the
/// change and its event commit or roll back together.
///
/// # Errors
/// [`StoreError::Sqlite`].
pub fn append(
    tx: &Transaction<'_>,
    plan_id: Option<&Id>,
    kind: &EventKind,
) -> Result<i64, StoreError> {
    Ok(tx.query_row(
        "INSERT INTO events (ts, plan_id, type, data, caused_by) \
         VALUES (?1, ?2, ?3, ?4, (SELECT driven_by FROM plans WHERE plan_id = ?2)) RETURNING seq",
        params![
            Timestamp::now().to_string(),
            plan_id.map(Id::to_string),
            kind.event_type().as_str(),
            crate::redact::redact(&kind.data().to_string()).into_owned()
        ],
        |r| r.get(0),
    )?)
}

fn corrupt(column: &'static str, message: String) -> StoreError {
    StoreError::Corrupt {
        table: "events",
        column,
        message,
    }
}

/// Events with `seq` greater than `after`, oldest first, optionally for one plan, at most
/// `limit`.
///
/// # Errors
/// [`StoreError`] for query failures or unreadable rows.
pub fn after(
    store: &Store,
    after: i64,
    plan_id: Option<&Id>,
    limit: u32,
) -> Result<Vec<EngineEvent>, StoreError> {
    let mut stmt = store.conn().prepare(
        "SELECT seq, ts, plan_id, type, data, caused_by FROM events \
         WHERE seq > ?1 AND (plan_id = ?2 OR ?2 IS NULL) ORDER BY seq LIMIT ?3",
    )?;
    let rows = stmt
        .query_map(params![after, plan_id.map(Id::to_string), limit], |r| {
            Ok((
                r.get::<_, i64>(0)?,
                r.get::<_, String>(1)?,
                r.get::<_, Option<String>>(2)?,
                r.get::<_, String>(3)?,
                r.get::<_, String>(4)?,
                r.get::<_, Option<String>>(5)?,
            ))
        })?
        .collect::<Result<Vec<_>, _>>()?;
    rows.into_iter()
        .map(|(seq, ts, plan, kind, data, caused_by)| {
            Ok(EngineEvent {
                seq,
                ts: ts
                    .parse()
                    .map_err(|e: jiff::Error| corrupt("ts", e.to_string()))?,
                plan_id: plan
                    .map(|p| {
                        p.parse()
                            .map_err(|e: ulid::DecodeError| corrupt("plan_id", e.to_string()))
                    })
                    .transpose()?,
                kind: EventKind::from_stored(
                    kind.parse().map_err(|e| corrupt("type", e))?,
                    serde_json::from_str::<Value>(&data)
                        .map_err(|e| corrupt("data", e.to_string()))?,
                ),
                caused_by,
            })
        })
        .collect()
}

/// The highest sequence number so far (0 when there are no events).
///
/// # Errors
/// [`StoreError::Sqlite`].
pub fn last_seq(store: &Store) -> Result<i64, StoreError> {
    Ok(store
        .conn()
        .query_row("SELECT coalesce(max(seq), 0) FROM events", [], |r| r.get(0))?)
}

/// Follows the event log from another connection: [`Follower::poll`] returns new events when
/// `data_version` says something was committed, and nothing (without a query) otherwise.
#[derive(Debug)]
pub struct Follower {
    last_seq: i64,
    data_version: Option<i64>,
    plan_id: Option<Id>,
}

impl Follower {
    /// Follows events after `last_seq` (use [`last_seq`] to skip history), optionally of one
    /// plan only.
    pub fn new(last_seq: i64, plan_id: Option<Id>) -> Self {
        Self {
            last_seq,
            data_version: None,
            plan_id,
        }
    }

    /// New events since the last call, oldest first.
    ///
    /// # Errors
    /// [`StoreError`].
    pub fn poll(&mut self, store: &Store) -> Result<Vec<EngineEvent>, StoreError> {
        let version = store.data_version()?;
        if self.data_version == Some(version) {
            return Ok(Vec::new());
        }
        self.data_version = Some(version);
        let mut out = Vec::new();
        loop {
            let batch = after(store, self.last_seq, self.plan_id.as_ref(), 500)?;
            let Some(last) = batch.last() else { break };
            self.last_seq = last.seq;
            let full = batch.len() == 500;
            out.extend(batch);
            if !full {
                break;
            }
        }
        Ok(out)
    }

    /// The sequence number of the last event returned.
    pub fn last_seq(&self) -> i64 {
        self.last_seq
    }
}

/// Records in the caller's transaction that `change` happened to item `name` of `registry`
/// (a `registry_changed` event with no plan), so the change and its event commit together.
///
/// # Errors
/// [`StoreError::Sqlite`].
pub fn registry_changed(
    tx: &Transaction<'_>,
    registry: Registry,
    name: &str,
    change: Change,
) -> Result<(), StoreError> {
    let kind = EventKind::RegistryChanged(RegistryChanged::new(registry, name, change));
    append(tx, None, &kind).map(|_| ())
}

/// The `name` column of the row of `table` whose `id_column` is `id`, read in the caller's
/// transaction (an empty string when there is none), to name an item in its event.
///
/// # Errors
/// [`StoreError::Sqlite`].
pub fn name_in(
    tx: &Transaction<'_>,
    table: &str,
    id_column: &str,
    id: &str,
) -> Result<String, StoreError> {
    use rusqlite::OptionalExtension;
    let sql = format!("SELECT name FROM {table} WHERE {id_column} = ?1");
    Ok(tx
        .query_row(&sql, [id], |r| r.get::<_, String>(0))
        .optional()?
        .unwrap_or_default())
}

/// [`Change::Updated`] when `table` has a row named `name` (read before an upsert),
/// [`Change::Added`] otherwise.
///
/// # Errors
/// [`StoreError::Sqlite`].
pub fn upsert_change(tx: &Transaction<'_>, table: &str, name: &str) -> Result<Change, StoreError> {
    let n: i64 = tx.query_row(
        &format!("SELECT count(*) FROM {table} WHERE name = ?1"),
        [name],
        |r| r.get(0),
    )?;
    Ok(if n > 0 {
        Change::Updated
    } else {
        Change::Added
    })
}

impl Store {
    /// Records one event of `plan` in a transaction of its own, for changes made outside the
    /// database (a branch written to the user's repository).
    ///
    /// # Errors
    /// [`StoreError::Sqlite`].
    pub fn record_event(&mut self, plan: &Id, kind: &EventKind) -> Result<i64, StoreError> {
        let tx = self.conn_mut().transaction()?;
        let seq = append(&tx, Some(plan), kind)?;
        tx.commit()?;
        Ok(seq)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::event::{
        EventType, ExecuteStep, RawEvent, StrategizeComplete, StrategizeDecisions,
        StrategizeStarted,
    };
    use crate::domain::plan::Plan;
    use jiff::Timestamp;
    use serde_json::json;

    fn started() -> EventKind {
        EventKind::StrategizeStarted(StrategizeStarted {
            attempt: 1,
            actor: "builtin/checklist".into(),
        })
    }

    #[test]
    fn a_row_whose_data_does_not_fit_its_kind_reads_as_raw() {
        let (_dir, store, plan) = store_with_plan();
        store
            .conn()
            .execute(
                "INSERT INTO events (ts, plan_id, type, data) VALUES (?1, ?2, 'plan_errored', ?3)",
                params![
                    Timestamp::UNIX_EPOCH.to_string(),
                    plan.to_string(),
                    r#"{"code":7}"#
                ],
            )
            .unwrap();
        let events = after(&store, 0, None, 10).unwrap();
        assert_eq!(
            events[0].kind,
            EventKind::Raw(RawEvent {
                event_type: EventType::PlanErrored,
                data: json!({"code": 7}),
            })
        );
    }

    fn store_with_plan() -> (tempfile::TempDir, Store, Id) {
        let dir = tempfile::tempdir().unwrap();
        let mut store = Store::open(&dir.path().join("db")).unwrap();
        let plan = Plan::new("local/a", "a", Timestamp::now());
        store.insert_plan(&plan).unwrap();
        (dir, store, plan.plan_id)
    }

    #[test]
    fn events_commit_or_roll_back_with_their_change() {
        let (_dir, mut store, plan) = store_with_plan();
        {
            let tx = store.conn_mut().transaction().unwrap();
            append(&tx, Some(&plan), &started()).unwrap();
            // dropped without commit
        }
        assert_eq!(last_seq(&store).unwrap(), 0);
        let tx = store.conn_mut().transaction().unwrap();
        let seq = append(&tx, Some(&plan), &started()).unwrap();
        tx.commit().unwrap();
        let events = after(&store, 0, None, 10).unwrap();
        assert_eq!(events.len(), 1);
        assert_eq!(
            (events[0].seq, &events[0].kind, events[0].plan_id),
            (seq, &started(), Some(plan))
        );
    }

    #[test]
    fn a_follower_in_another_connection_sees_the_same_sequence() {
        let (dir, mut writer, plan) = store_with_plan();
        let reader = Store::open(&dir.path().join("db")).unwrap();
        let mut follower = Follower::new(0, Some(plan));
        assert!(follower.poll(&reader).unwrap().is_empty());
        let kinds = [
            started(),
            EventKind::StrategizeDecisions(StrategizeDecisions::default()),
            EventKind::StrategizeComplete(StrategizeComplete::default()),
        ];
        for kind in &kinds {
            let tx = writer.conn_mut().transaction().unwrap();
            append(&tx, Some(&plan), kind).unwrap();
            tx.commit().unwrap();
        }
        let seen: Vec<EventKind> = follower
            .poll(&reader)
            .unwrap()
            .into_iter()
            .map(|e| e.kind)
            .collect();
        assert_eq!(seen, kinds);
        assert!(
            follower.poll(&reader).unwrap().is_empty(),
            "nothing new, no duplicates"
        );
    }

    #[test]
    fn streamed_events_have_the_documented_json_shape() {
        let event = EngineEvent {
            seq: 7,
            ts: Timestamp::UNIX_EPOCH,
            plan_id: None,
            kind: EventKind::ExecuteStep(ExecuteStep::new("step 1", "started")),
            caused_by: None,
        };
        let v = serde_json::to_value(&event).unwrap();
        let keys: Vec<&String> = v.as_object().unwrap().keys().collect();
        assert_eq!(keys, ["seq", "ts", "plan_id", "type", "data"]);
        assert_eq!(v["type"], "execute_step");
    }
}
