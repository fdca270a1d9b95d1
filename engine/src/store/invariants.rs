//! Invariants (table `invariants`). Plan-scoped rows are mirrored into the plan record's
//! `invariants` JSON in the same transaction, so the plan always carries its own constraints.

use rusqlite::{OptionalExtension, params};
use crate::store::Connection;

use super::codec::{to_json, ts};
use super::events::registry_changed;
use super::{Store, StoreError};
use crate::domain::event::{Change, Registry};
use crate::domain::invariant::{Invariant, NewInvariant};
use crate::domain::{Id, InvariantScope, PlanInvariant};

const SELECT: &str = "SELECT i.invariant_id, i.text, i.key, i.scope, p.name, a.name, i.plan_id, i.created_at, i.rowid
    FROM invariants i
    LEFT JOIN projects p ON p.project_id = i.project_id
    LEFT JOIN actions a ON a.action_id = i.action_id";

type Raw = (
    String,
    String,
    Option<String>,
    String,
    Option<String>,
    Option<String>,
    Option<String>,
    String,
    i64,
);

fn raw(r: &crate::store::db::Row<'_>) -> rusqlite::Result<Raw> {
    r.try_into()
}

fn convert(
    (invariant_id, text, key, scope, project, action, plan_id, created, seq): Raw,
) -> Result<Invariant, StoreError> {
    let corrupt = |column, message: String| StoreError::Corrupt {
        table: "invariants",
        column,
        message,
    };
    Ok(Invariant {
        invariant_id,
        text,
        key,
        scope: scope
            .parse::<InvariantScope>()
            .map_err(|e| corrupt("scope", e))?,
        project,
        action,
        plan_id: plan_id
            .map(|p| {
                p.parse::<Id>()
                    .map_err(|e| corrupt("plan_id", e.to_string()))
            })
            .transpose()?,
        created_at: ts("invariants", "created_at", &created)?,
        seq,
    })
}

/// Inserts rows on an open connection or transaction (the caller commits).
pub(crate) fn insert_rows(
    conn: &Connection,
    rows: &[NewInvariant],
    now: &str,
) -> Result<(), StoreError> {
    let mut plans = Vec::new();
    for r in rows {
        conn.execute(
            "INSERT INTO invariants (invariant_id, text, normalized, key, scope, project_id, action_id, plan_id, created_at)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
            params![
                r.invariant_id,
                r.text,
                crate::domain::invariant::normalize(&r.text),
                r.key,
                r.scope.as_str(),
                r.project_id,
                r.action_id,
                r.plan_id,
                now,
            ],
        )?;
        if let Some(p) = &r.plan_id
            && !plans.contains(p)
        {
            plans.push(p.clone());
        }
    }
    for p in plans {
        sync_plan(conn, &p, now)?;
    }
    Ok(())
}

/// Rewrites a plan's `invariants` JSON from its plan-scoped rows, in insertion order.
pub(crate) fn sync_plan(conn: &Connection, plan_id: &str, now: &str) -> Result<(), StoreError> {
    let mut stmt = conn.prepare(&format!("{SELECT} WHERE i.plan_id = ?1 ORDER BY i.rowid"))?;
    let rows = stmt
        .query_map([plan_id], raw)?
        .collect::<Result<Vec<_>, _>>()?;
    let list: Vec<PlanInvariant> = rows
        .into_iter()
        .map(convert)
        .collect::<Result<Vec<_>, _>>()?
        .iter()
        .map(Invariant::to_plan_invariant)
        .collect();
    conn.execute(
        "UPDATE plans SET invariants = ?2, updated_at = ?3 WHERE plan_id = ?1",
        params![plan_id, to_json(&list), now],
    )?;
    Ok(())
}

impl Store {
    /// Inserts invariants in one transaction (plan records are updated to match).
    ///
    /// # Errors
    /// Store errors (for example a target that no longer exists).
    pub fn insert_invariants(&mut self, rows: &[NewInvariant]) -> Result<(), StoreError> {
        let now = jiff::Timestamp::now().to_string();
        let tx = self.conn_mut().transaction()?;
        insert_rows(&tx, rows, &now)?;
        for r in rows {
            registry_changed(&tx, Registry::Invariant, &r.invariant_id, Change::Added)?;
        }
        tx.commit()?;
        Ok(())
    }

    /// One invariant by full id.
    ///
    /// # Errors
    /// Store errors.
    pub fn invariant(&self, id: &str) -> Result<Option<Invariant>, StoreError> {
        self.conn()
            .query_row(&format!("{SELECT} WHERE i.invariant_id = ?1"), [id], raw)
            .optional()?
            .map(convert)
            .transpose()
    }

    /// Every invariant id.
    ///
    /// # Errors
    /// Store errors.
    pub fn invariant_ids(&self) -> Result<Vec<String>, StoreError> {
        let mut stmt = self.conn().prepare("SELECT invariant_id FROM invariants")?;
        Ok(stmt
            .query_map([], |r| r.get(0))?
            .collect::<Result<_, _>>()?)
    }

    /// Every invariant, in insertion order.
    ///
    /// # Errors
    /// Store errors.
    pub fn invariants(&self) -> Result<Vec<Invariant>, StoreError> {
        let mut stmt = self.conn().prepare(&format!("{SELECT} ORDER BY i.rowid"))?;
        let rows = stmt.query_map([], raw)?.collect::<Result<Vec<_>, _>>()?;
        rows.into_iter().map(convert).collect()
    }

    /// Deletes an invariant (and updates its plan's record); returns whether it existed.
    ///
    /// # Errors
    /// Store errors.
    pub fn delete_invariant(&mut self, id: &str) -> Result<bool, StoreError> {
        let now = jiff::Timestamp::now().to_string();
        let tx = self.conn_mut().transaction()?;
        let plan: Option<Option<String>> = tx
            .query_row(
                "SELECT plan_id FROM invariants WHERE invariant_id = ?1",
                [id],
                |r| r.get(0),
            )
            .optional()?;
        let n = tx.execute("DELETE FROM invariants WHERE invariant_id = ?1", [id])?;
        if let Some(Some(p)) = plan {
            sync_plan(&tx, &p, &now)?;
        }
        if n > 0 {
            registry_changed(&tx, Registry::Invariant, id, Change::Removed)?;
        }
        tx.commit()?;
        Ok(n == 1)
    }
}
