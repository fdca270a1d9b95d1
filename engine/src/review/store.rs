//! The `review_marks` table (migration `016_review.sql`): one row per plan attempt and item.

use std::collections::HashMap;

use rusqlite::params;

use super::Mark;
use crate::domain::Id;
use crate::store::{Store, StoreError};

/// A stored mark: the newest attempt's row for an item.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredMark {
    /// The mark.
    pub mark: Mark,
    /// Its reason.
    pub reason: Option<String>,
    /// The attempt that wrote it.
    pub attempt: u32,
    /// The resource.
    pub resource: String,
    /// The path.
    pub path: String,
}

impl Store {
    /// Every item's mark for `plan_id`, by item id: the row of the newest attempt that marked
    /// it (so unchanged items keep their marks across corrections).
    ///
    /// # Errors
    /// Store errors.
    pub fn review_marks(&self, plan_id: &Id) -> Result<HashMap<String, StoredMark>, StoreError> {
        let mut stmt = self.conn().prepare(
            "SELECT item_id, mark, reason, attempt, resource, path FROM review_marks \
             WHERE plan_id = ?1 ORDER BY attempt ASC, updated_at ASC",
        )?;
        let rows = stmt.query_map(params![plan_id.to_string()], |r| {
            Ok((
                r.get::<_, String>(0)?,
                r.get::<_, String>(1)?,
                r.get::<_, Option<String>>(2)?,
                r.get::<_, i64>(3)?,
                r.get::<_, String>(4)?,
                r.get::<_, String>(5)?,
            ))
        })?;
        let mut out = HashMap::new();
        for row in rows {
            let (id, mark, reason, attempt, resource, path) = row?;
            let mark = Mark::parse(&mark).ok_or_else(|| StoreError::Corrupt {
                table: "review_marks",
                column: "mark",
                message: format!("unknown mark `{mark}`"),
            })?;
            out.insert(
                id,
                StoredMark {
                    mark,
                    reason,
                    attempt: attempt as u32,
                    resource,
                    path,
                },
            );
        }
        Ok(out)
    }

    /// Writes `mark` (and `reason`) for every `(item id, resource, path)` of `items` in
    /// `attempt`, with its `review_marked` event, in one transaction.
    ///
    /// # Errors
    /// Store errors (nothing is written then).
    pub fn set_review_marks(
        &mut self,
        plan_id: &Id,
        attempt: u32,
        items: &[(String, String, String)],
        mark: Mark,
        reason: Option<&str>,
    ) -> Result<(), StoreError> {
        let now = jiff::Timestamp::now().to_string();
        let reviewer = self.human().map(str::to_string);
        let tx = self.conn_mut().transaction()?;
        for (id, resource, path) in items {
            tx.execute(
                "INSERT INTO review_marks (plan_id, attempt, item_id, resource, path, mark, reason, updated_at, reviewer) \
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9) \
                 ON CONFLICT (plan_id, attempt, item_id) DO UPDATE SET \
                 mark = excluded.mark, reason = excluded.reason, updated_at = excluded.updated_at, \
                 reviewer = excluded.reviewer",
                params![
                    plan_id.to_string(),
                    i64::from(attempt),
                    id,
                    resource,
                    path,
                    mark.as_str(),
                    reason,
                    now,
                    reviewer
                ],
            )?;
        }
        let event =
            crate::domain::event::EventKind::ReviewMarked(crate::domain::event::ReviewMarked {
                mark: mark.as_str().to_string(),
                items: items.iter().map(|(id, _, _)| id.clone()).collect(),
                reason: reason.map(str::to_string),
            });
        crate::store::events::append(&tx, Some(plan_id), &event)?;
        tx.commit()?;
        Ok(())
    }
}
