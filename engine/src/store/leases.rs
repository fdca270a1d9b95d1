//! Writing a plan's lease row (the rules of ownership are `crate::lease`'s).

use rusqlite::params;

use super::{StoreError, Transaction};
use crate::domain::Id;

/// A lease row as its owner writes it: the process, what it does, and the expiry it declares.
#[derive(Debug, Clone)]
pub struct LeaseRow {
    /// The owning process.
    pub pid: u32,
    /// Its host.
    pub host: String,
    /// What it does (the plan's phase, `cancel`, `child`, ...).
    pub kind: String,
    /// Its start time, to tell a recycled pid.
    pub started: Option<u64>,
    /// The expiry it declares.
    pub expiry: std::time::Duration,
}

/// Writes `lease` as the plan's lease, acquired and beating now; an existing row (this
/// process's own) keeps its acquisition time.
///
/// # Errors
/// [`StoreError`].
pub(crate) fn write_in(tx: &Transaction<'_>, plan_id: &Id, lease: &LeaseRow) -> Result<(), StoreError> {
    let now = jiff::Timestamp::now().to_string();
    tx.execute(
        "INSERT INTO plan_leases (plan_id, pid, host, kind, acquired_at, heartbeat_at, started, expiry_secs) VALUES (?1, ?2, ?3, ?4, ?5, ?5, ?6, ?7) \
         ON CONFLICT (plan_id) DO UPDATE SET kind = excluded.kind, heartbeat_at = excluded.heartbeat_at, started = excluded.started, expiry_secs = excluded.expiry_secs",
        params![
            plan_id.to_string(),
            lease.pid,
            lease.host,
            lease.kind,
            now,
            lease.started.and_then(|t| i64::try_from(t).ok()),
            i64::try_from(lease.expiry.as_secs()).unwrap_or(i64::MAX)
        ],
    )?;
    Ok(())
}
