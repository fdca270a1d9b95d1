//! The `review_marks` table (migrations `016_review.sql`, `028_review_per_reviewer.sql`): one
//! row per plan attempt, item and reviewer. A reviewer writes only their own rows, each with
//! one upsert, so reviewers marking the same items at the same time lose nothing.

use std::collections::HashMap;

use rusqlite::params;

use super::Mark;
use crate::domain::Id;
use crate::store::{Store, StoreError};

/// A stored mark: one reviewer's row of the newest attempt in which they marked an item.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredMark {
    /// Who set it: the server user, or `""` for the local user (who has no name).
    pub reviewer: String,
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
    /// When it was set (RFC 3339).
    pub updated_at: String,
}

impl Store {
    /// Every item's marks for `plan_id`, by item id: per reviewer, the row of the newest
    /// attempt in which they marked it (so unchanged items keep their marks across
    /// corrections), in reviewer order.
    ///
    /// # Errors
    /// Store errors.
    pub fn review_marks(
        &self,
        plan_id: &Id,
    ) -> Result<HashMap<String, Vec<StoredMark>>, StoreError> {
        let mut stmt = self.conn().prepare(
            "SELECT item_id, reviewer, mark, reason, attempt, resource, path, updated_at \
             FROM review_marks WHERE plan_id = ?1 ORDER BY item_id, reviewer, attempt",
        )?;
        let rows = stmt.query_map(params![plan_id.to_string()], |r| {
            Ok((
                r.get::<_, String>(0)?,
                r.get::<_, String>(1)?,
                r.get::<_, String>(2)?,
                r.get::<_, Option<String>>(3)?,
                r.get::<_, i64>(4)?,
                r.get::<_, String>(5)?,
                r.get::<_, String>(6)?,
                r.get::<_, String>(7)?,
            ))
        })?;
        let mut out: HashMap<String, Vec<StoredMark>> = HashMap::new();
        for row in rows {
            let (id, reviewer, mark, reason, attempt, resource, path, updated_at) = row?;
            let mark = Mark::parse(&mark).ok_or_else(|| StoreError::Corrupt {
                table: "review_marks",
                column: "mark",
                message: format!("unknown mark `{mark}`"),
            })?;
            let stored = StoredMark {
                reviewer,
                mark,
                reason,
                attempt: u32::try_from(attempt).unwrap_or(0),
                resource,
                path,
                updated_at,
            };
            let marks = out.entry(id).or_default();
            // Rows come by reviewer, then attempt: a newer attempt's row replaces the older.
            match marks.last_mut() {
                Some(last) if last.reviewer == stored.reviewer => *last = stored,
                _ => marks.push(stored),
            }
        }
        Ok(out)
    }

    /// Writes the acting human's `mark` (and `reason`) for every `(item id, resource, path)`
    /// of `items` in `attempt`, with its `review_marked` event, in one transaction. Only the
    /// acting human's rows are written (the local user's are the reviewer `""`), each with
    /// one upsert: another reviewer's marks of the same items are never read nor touched.
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
        let reviewer = self.human().unwrap_or_default().to_string();
        let tx = self.conn_mut().transaction()?;
        for (id, resource, path) in items {
            tx.execute(
                "INSERT INTO review_marks (plan_id, attempt, item_id, reviewer, resource, path, mark, reason, updated_at) \
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9) \
                 ON CONFLICT (plan_id, attempt, item_id, reviewer) DO UPDATE SET \
                 mark = excluded.mark, reason = excluded.reason, updated_at = excluded.updated_at",
                params![
                    plan_id.to_string(),
                    i64::from(attempt),
                    id,
                    reviewer,
                    resource,
                    path,
                    mark.as_str(),
                    reason,
                    now
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::plan::Plan;

    fn items(n: usize) -> Vec<(String, String, String)> {
        (0..n)
            .map(|i| (format!("{i:012x}"), "r".to_string(), format!("f{i}.txt")))
            .collect()
    }

    #[test]
    fn two_reviewers_marking_the_same_items_at_once_keep_every_mark_each_attributed() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("db");
        let plan = Plan::new("local/a", "a", jiff::Timestamp::now());
        Store::open(&path).unwrap().insert_plan(&plan).unwrap();
        let all = items(50);
        let writers: Vec<_> = [("alice", Mark::Accepted), ("bob", Mark::Reviewed)]
            .into_iter()
            .map(|(who, mark)| {
                let (path, all, plan_id) = (path.clone(), all.clone(), plan.plan_id);
                std::thread::spawn(move || {
                    let mut store = Store::open(&path)
                        .unwrap()
                        .acting_for(Some(who.to_string()));
                    // One transaction per item, so the two writers interleave.
                    for item in &all {
                        store
                            .set_review_marks(&plan_id, 1, std::slice::from_ref(item), mark, None)
                            .unwrap();
                    }
                })
            })
            .collect();
        for w in writers {
            w.join().unwrap();
        }
        let marks = Store::open(&path).unwrap().review_marks(&plan.plan_id).unwrap();
        assert_eq!(marks.len(), 50);
        for (id, _, _) in &all {
            let by: Vec<(&str, Mark)> = marks[id]
                .iter()
                .map(|m| (m.reviewer.as_str(), m.mark))
                .collect();
            assert_eq!(by, [("alice", Mark::Accepted), ("bob", Mark::Reviewed)], "{id}");
        }
    }

    #[test]
    fn a_reviewers_newest_attempt_is_their_mark_and_the_local_user_is_the_reviewer_without_a_name()
    {
        let dir = tempfile::tempdir().unwrap();
        let mut store = Store::open(&dir.path().join("db")).unwrap();
        let plan = Plan::new("local/a", "a", jiff::Timestamp::now());
        store.insert_plan(&plan).unwrap();
        let one = items(1);
        store
            .set_review_marks(&plan.plan_id, 1, &one, Mark::Rejected, Some("no"))
            .unwrap();
        store
            .set_review_marks(&plan.plan_id, 2, &one, Mark::Accepted, None)
            .unwrap();
        let marks = store.review_marks(&plan.plan_id).unwrap();
        let mine = &marks[&one[0].0];
        assert_eq!(mine.len(), 1, "{mine:?}");
        assert_eq!(
            (mine[0].reviewer.as_str(), mine[0].mark, mine[0].attempt),
            ("", Mark::Accepted, 2)
        );
    }
}
