//! The store's schema on PostgreSQL: refinery's migrations under `migrations/postgres/`, numbered
//! in step with the SQLite ones (the history starts with version 24, the schema SQLite's first
//! 24 migrations build). Instances that start together take turns under an advisory lock, so
//! exactly one migrates; a database migrated by a newer CleverAgents is refused untouched.

use std::path::PathBuf;

use super::{Location, StoreError, latest_schema_version};
use crate::store::db::{Connection, PgClient};

refinery::embed_migrations!("src/store/migrations/postgres");

/// The advisory lock the instances of one database migrate under (any fixed number).
const MIGRATION_LOCK: i64 = 0x0043_4c45_5645_5241;

/// Brings the database at `location` to the latest schema, unless it is newer than this binary.
///
/// # Errors
/// [`StoreError::TooNew`] (nothing is changed) or [`StoreError::Migrate`].
pub(crate) fn migrate(client: &mut PgClient, location: &Location) -> Result<(), StoreError> {
    let failed = |message: String| StoreError::Migrate {
        path: PathBuf::from(location.to_string()),
        message,
    };
    super::db::postgres::outside_async(|| {
        let found = applied_version(client).map_err(|e| failed(e.to_string()))?;
        if found > latest_schema_version() {
            return Err(StoreError::TooNew {
                path: PathBuf::from(location.to_string()),
                found,
                supported: latest_schema_version(),
            });
        }
        if found == latest_schema_version() {
            return Ok(());
        }
        client
            .execute("SELECT pg_advisory_lock($1)", &[&MIGRATION_LOCK])
            .map_err(|e| failed(e.to_string()))?;
        let result = migrations::runner()
            .run(&mut **client)
            .map(|_| ())
            .map_err(|e| failed(e.to_string()));
        let _ = client.execute("SELECT pg_advisory_unlock($1)", &[&MIGRATION_LOCK]);
        result
    })
}

/// The schema version of the open PostgreSQL database.
///
/// # Errors
/// [`StoreError::Sqlite`] carrying PostgreSQL's error.
pub(crate) fn version(conn: &Connection) -> Result<u32, StoreError> {
    let version: i64 = conn.query_row(
        "SELECT COALESCE(MAX(version), 0) FROM refinery_schema_history",
        [],
        |r| r.get(0),
    )?;
    Ok(u32::try_from(version).unwrap_or(u32::MAX))
}

/// The newest version refinery recorded, 0 for a database it never migrated.
fn applied_version(client: &mut PgClient) -> Result<u32, postgres::Error> {
    let exists: bool = client
        .query_one(
            "SELECT to_regclass('refinery_schema_history') IS NOT NULL",
            &[],
        )?
        .get(0);
    if !exists {
        return Ok(0);
    }
    let version: i32 = client
        .query_one(
            "SELECT COALESCE(MAX(version), 0)::int4 FROM refinery_schema_history",
            &[],
        )?
        .get(0);
    Ok(u32::try_from(version).unwrap_or(0))
}
