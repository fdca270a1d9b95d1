//! Child plans (`child_plans`): which spawn decision of which parent started a
//! child, where its sandboxes branched from the parent's, and how it ended.

use std::fmt;
use std::str::FromStr;

use jiff::Timestamp;
use rusqlite::{OptionalExtension, params};
use serde::Serialize;
use serde_json::{Map, Value};

use super::codec::{from_json, opt_ts, ts};
use super::{Store, StoreError};
use crate::domain::Id;

/// Where a child plan stands, as its parent sees it.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Serialize, serde::Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum ChildStatus {
    /// Created, not started yet (waiting for a free slot).
    Pending,
    /// Running.
    Running,
    /// Its Execute completed; its results are not merged yet.
    Succeeded,
    /// It errored or waits for a human; nothing was merged.
    Failed,
    /// It was cancelled (with its parent, or because its parent's step ran again).
    Cancelled,
    /// Its results are merged into the parent's sandbox.
    Merged,
    /// Merging its results conflicted with the parent's sandbox.
    Conflict,
}

crate::domain::lifecycle::str_enum!(ChildStatus {
    Pending => "pending",
    Running => "running",
    Succeeded => "succeeded",
    Failed => "failed",
    Cancelled => "cancelled",
    Merged => "merged",
    Conflict => "conflict",
});

/// One `child_plans` row.
#[derive(Debug, Clone, PartialEq, Serialize, serde::Deserialize, schemars::JsonSchema)]
pub struct ChildLink {
    /// The child plan.
    pub child_plan_id: Id,
    /// Its parent.
    pub parent_plan_id: Id,
    /// The parent's `subplan_spawn` decision that started it.
    pub spawn_decision_id: Id,
    /// The `subplan_parallel_spawn` group it ran in, if any.
    pub parallel_group: Option<String>,
    /// Its position among the parent's children (1, 2, ...).
    pub position: u32,
    /// Resource name -> `{"commit", "tree"}` of the parent's sandbox it branched from.
    pub bases: Map<String, Value>,
    /// How it stands.
    pub status: ChildStatus,
    /// Why it failed, what conflicted, what was merged (free JSON).
    pub detail: Option<Value>,
    /// When it was created.
    pub created_at: Timestamp,
    /// When it finished (merged, failed, cancelled).
    pub finished_at: Option<Timestamp>,
}

const COLUMNS: &str = "child_plan_id, parent_plan_id, spawn_decision_id, parallel_group, position, bases, status, detail, created_at, finished_at";

type Row = (
    String,
    String,
    String,
    Option<String>,
    i64,
    String,
    String,
    Option<String>,
    String,
    Option<String>,
);

fn convert(r: Row) -> Result<ChildLink, StoreError> {
    const T: &str = "child_plans";
    let id = |c: &'static str, s: &str| {
        s.parse::<Id>().map_err(|e| StoreError::Corrupt {
            table: T,
            column: c,
            message: e.to_string(),
        })
    };
    let (child, parent, spawn, group, position, bases, status, detail, created, finished) = r;
    Ok(ChildLink {
        child_plan_id: id("child_plan_id", &child)?,
        parent_plan_id: id("parent_plan_id", &parent)?,
        spawn_decision_id: id("spawn_decision_id", &spawn)?,
        parallel_group: group,
        position: u32::try_from(position).unwrap_or(0),
        bases: from_json(T, "bases", &bases)?,
        status: status.parse().map_err(|e: String| StoreError::Corrupt {
            table: T,
            column: "status",
            message: e,
        })?,
        detail: detail.map(|d| from_json(T, "detail", &d)).transpose()?,
        created_at: ts(T, "created_at", &created)?,
        finished_at: opt_ts(T, "finished_at", finished)?,
    })
}

/// Inserts a child link on an open transaction (inside the child's creation).
///
/// # Errors
/// [`StoreError::Sqlite`].
pub(crate) fn insert_in(conn: &crate::store::Connection, link: &ChildLink) -> Result<(), StoreError> {
    conn.execute(
        &format!(
            "INSERT INTO child_plans ({COLUMNS}) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)"
        ),
        params![
            link.child_plan_id.to_string(),
            link.parent_plan_id.to_string(),
            link.spawn_decision_id.to_string(),
            link.parallel_group,
            i64::from(link.position),
            Value::Object(link.bases.clone()).to_string(),
            link.status.as_str(),
            link.detail.as_ref().map(Value::to_string),
            link.created_at.to_string(),
            link.finished_at.map(|t| t.to_string()),
        ],
    )?;
    Ok(())
}

impl Store {
    /// The child link of a plan, if it is a child.
    ///
    /// # Errors
    /// [`StoreError`].
    pub fn child_link(&self, child_plan_id: &Id) -> Result<Option<ChildLink>, StoreError> {
        let row: Option<Row> = self
            .conn()
            .query_row(
                &format!("SELECT {COLUMNS} FROM child_plans WHERE child_plan_id = ?1"),
                [child_plan_id.to_string()],
                |r| r.try_into(),
            )
            .optional()?;
        row.map(convert).transpose()
    }

    /// The children of a plan, in creation order.
    ///
    /// # Errors
    /// [`StoreError`].
    pub fn children_of(&self, parent_plan_id: &Id) -> Result<Vec<ChildLink>, StoreError> {
        let mut stmt = self.conn().prepare(&format!(
            "SELECT {COLUMNS} FROM child_plans WHERE parent_plan_id = ?1 ORDER BY position"
        ))?;
        let rows: Vec<Row> = stmt
            .query_map([parent_plan_id.to_string()], |r| r.try_into())?
            .collect::<Result<_, _>>()?;
        rows.into_iter().map(convert).collect()
    }

    /// The next free child position of a parent (1 for the first child).
    ///
    /// # Errors
    /// [`StoreError`].
    pub fn next_child_position(&self, parent_plan_id: &Id) -> Result<u32, StoreError> {
        let n: i64 = self.conn().query_row(
            "SELECT coalesce(max(position), 0) + 1 FROM child_plans WHERE parent_plan_id = ?1",
            [parent_plan_id.to_string()],
            |r| r.get(0),
        )?;
        Ok(u32::try_from(n).unwrap_or(u32::MAX))
    }

    /// Records how a child stands (`finished` stamps `finished_at`).
    ///
    /// # Errors
    /// [`StoreError`].
    pub fn set_child_status(
        &mut self,
        child_plan_id: &Id,
        status: ChildStatus,
        detail: Option<&Value>,
        finished: bool,
    ) -> Result<(), StoreError> {
        self.conn().execute(
            "UPDATE child_plans SET status = ?2, detail = coalesce(?3, detail), finished_at = CASE WHEN ?4 <> 0 THEN ?5 ELSE finished_at END WHERE child_plan_id = ?1",
            params![
                child_plan_id.to_string(),
                status.as_str(),
                detail.map(Value::to_string),
                finished,
                Timestamp::now().to_string(),
            ],
        )?;
        Ok(())
    }
}
