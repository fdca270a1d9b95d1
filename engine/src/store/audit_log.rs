//! The `audit_log` table: rows appended one at a time, each chained to the one before by hash
//! ([`crate::audit`]), and read back for listing and verification. Nothing here updates or
//! deletes a row.

use rusqlite::{OptionalExtension, params};

use super::codec::ts;
use super::{Store, StoreError};
use crate::audit::{self, AuditRecord, StoredRow};

/// A row to append: everything but its place in the chain.
#[derive(Debug, Clone, PartialEq)]
pub struct NewRow {
    /// When.
    pub at: jiff::Timestamp,
    /// Who (`None`: the server host itself, or no credential).
    pub user: Option<String>,
    /// What.
    pub operation: String,
    /// The target's namespace.
    pub namespace: Option<String>,
    /// The target.
    pub target: Option<String>,
    /// The client's address.
    pub address: Option<String>,
    /// Whether it was allowed.
    pub allowed: bool,
    /// Why not.
    pub reason: Option<String>,
}

/// Which rows [`Store::audit_rows`] returns.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RowFilter {
    /// Only this user's.
    pub user: Option<String>,
    /// Only rows whose target is in this namespace.
    pub namespace: Option<String>,
    /// Only rows appended at or after this time.
    pub since: Option<jiff::Timestamp>,
    /// At most this many, the newest.
    pub limit: u32,
}

const COLUMNS: &str =
    "seq, at, user_name, operation, namespace, target, address, allowed, reason, prev_hash, hash";

fn stored(r: &super::db::Row<'_>) -> rusqlite::Result<StoredRow> {
    Ok(StoredRow {
        seq: r.get(0)?,
        at: r.get(1)?,
        user: r.get(2)?,
        operation: r.get(3)?,
        namespace: r.get(4)?,
        target: r.get(5)?,
        address: r.get(6)?,
        allowed: r.get::<_, i64>(7)? != 0,
        reason: r.get(8)?,
        prev_hash: r.get(9)?,
        hash: r.get(10)?,
    })
}

fn record(row: StoredRow) -> Result<AuditRecord, StoreError> {
    Ok(AuditRecord {
        seq: row.seq,
        at: ts("audit_log", "at", &row.at)?,
        user: row.user,
        operation: row.operation,
        namespace: row.namespace,
        target: row.target,
        address: row.address,
        allowed: row.allowed,
        reason: row.reason,
        prev_hash: row.prev_hash,
        hash: row.hash,
    })
}

impl Store {
    /// Appends `new` after the newest row and returns it. The newest row is read and the new
    /// one written in one write transaction (the store's write lock: `BEGIN IMMEDIATE` on
    /// SQLite, the advisory lock on PostgreSQL), so appends from several processes or server
    /// instances follow one another and never fork the chain.
    ///
    /// # Errors
    /// [`StoreError`]; nothing is written then.
    pub fn append_audit(&mut self, new: &NewRow) -> Result<AuditRecord, StoreError> {
        let tx = self.conn_mut().transaction()?;
        let last: Option<(i64, String)> = tx
            .query_row(
                "SELECT seq, hash FROM audit_log ORDER BY seq DESC LIMIT 1",
                [],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .optional()?;
        let (seq, prev_hash) = last.map_or((1, audit::GENESIS.to_string()), |(s, h)| (s + 1, h));
        let mut row = StoredRow {
            seq,
            at: audit::stored_time(new.at),
            user: new.user.clone(),
            operation: new.operation.clone(),
            namespace: new.namespace.clone(),
            target: new.target.clone(),
            address: new.address.clone(),
            allowed: new.allowed,
            reason: new.reason.clone(),
            prev_hash,
            hash: String::new(),
        };
        row.hash = audit::hash(&row);
        // The seq is given, not drawn from the table's sequence: a rolled-back append on
        // PostgreSQL would otherwise leave a gap that reads as a deleted row.
        tx.execute(
            &format!("INSERT INTO audit_log ({COLUMNS}) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)"),
            params![
                row.seq,
                row.at,
                row.user,
                row.operation,
                row.namespace,
                row.target,
                row.address,
                i64::from(row.allowed),
                row.reason,
                row.prev_hash,
                row.hash
            ],
        )?;
        tx.commit()?;
        record(row)
    }

    /// The newest rows that pass `filter` (at most `filter.limit`), oldest first.
    ///
    /// # Errors
    /// [`StoreError`]; [`StoreError::Corrupt`] for a row whose time cannot be read.
    pub fn audit_rows(&self, filter: &RowFilter) -> Result<Vec<AuditRecord>, StoreError> {
        // Each parameter is compared with its column before `IS NULL`: PostgreSQL takes its
        // type from the first use.
        let mut stmt = self.conn().prepare(&format!(
            "SELECT {COLUMNS} FROM audit_log \
             WHERE (user_name = ?1 OR ?1 IS NULL) AND (namespace = ?2 OR ?2 IS NULL) \
             AND (at >= ?3 OR ?3 IS NULL) ORDER BY seq DESC LIMIT ?4"
        ))?;
        let mut rows = stmt
            .query_map(
                params![
                    filter.user,
                    filter.namespace,
                    filter.since.map(audit::stored_time),
                    i64::from(filter.limit)
                ],
                stored,
            )?
            .collect::<Result<Vec<_>, _>>()?;
        rows.reverse();
        rows.into_iter().map(record).collect()
    }

    /// Up to `limit` rows after `seq`, in `seq` order, exactly as stored (for verification).
    ///
    /// # Errors
    /// [`StoreError`].
    pub fn audit_page(&self, after: i64, limit: u32) -> Result<Vec<StoredRow>, StoreError> {
        let mut stmt = self.conn().prepare(&format!(
            "SELECT {COLUMNS} FROM audit_log WHERE seq > ?1 ORDER BY seq LIMIT ?2"
        ))?;
        let rows = stmt
            .query_map(params![after, i64::from(limit)], stored)?
            .collect::<Result<Vec<_>, _>>()?;
        Ok(rows)
    }
}
