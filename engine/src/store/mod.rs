//! The SQLite store: one database file in the data directory.
//!
//! Opening ([`Store::open`]) first reads the schema version through a read-only connection;
//! a database written by a newer CleverAgents is refused and left byte-identical. Otherwise the
//! connection is set to WAL, a busy timeout and foreign keys, and pending migrations are applied.
//! Each schema change is its own migration file; versions are `PRAGMA user_version`.
//!
//! A server may keep the same records in PostgreSQL instead ([`Location::Postgres`], spec
//! section 21): [`db::Connection`] runs the same statements there, and [`pg_schema`] keeps its
//! schema at the same version numbers.

pub mod actions;
pub mod actors;
pub mod approvals;
pub mod attribution;
pub mod audit_log;
pub mod budgets;
pub mod children;
pub(crate) mod codec;
pub(crate) mod db;
pub(crate) mod pg_schema;
pub mod corrections;
pub mod decisions;
pub mod events;
pub mod invariants;
pub mod leases;
pub mod org_policies;
pub mod lifecycle_run;
pub mod model_calls;
pub mod pauses;
pub mod plan_links;
pub mod plans;
pub mod profiles;
pub mod projects;
pub mod resource_types;
pub mod resources;
pub mod sandboxes;
pub mod server_tokens;
pub mod step_journal;
pub mod team;
pub mod tools;

use std::path::{Path, PathBuf};
use std::sync::LazyLock;
use std::time::Duration;

use rusqlite::{Connection as SqliteConnection, OpenFlags};
use rusqlite_migration::{M, Migrations};

pub(crate) use db::{Connection, Transaction};

/// How long a connection waits for another writer before failing with "database is locked".
pub const BUSY_TIMEOUT: Duration = Duration::from_secs(10);

const MIGRATION_SQL: &[&str] = &[
    include_str!("migrations/001_plans.sql"),
    include_str!("migrations/002_registries.sql"),
    include_str!("migrations/003_sandboxes.sql"),
    include_str!("migrations/004_actors.sql"),
    include_str!("migrations/005_lifecycle.sql"),
    include_str!("migrations/006_lifecycle_run.sql"),
    include_str!("migrations/007_corrections.sql"),
    include_str!("migrations/008_child_plans.sql"),
    include_str!("migrations/009_actor_runs_and_pauses.sql"),
    include_str!("migrations/010_validation_network.sql"),
    include_str!("migrations/011_action_versions.sql"),
    include_str!("migrations/012_providers.sql"),
    include_str!("migrations/013_tools.sql"),
    include_str!("migrations/014_context_policies.sql"),
    include_str!("migrations/015_tool_approvals.sql"),
    include_str!("migrations/016_review.sql"),
    include_str!("migrations/017_sessions.sql"),
    include_str!("migrations/018_resource_types.sql"),
    include_str!("migrations/019_actor_contexts.sql"),
    include_str!("migrations/020_invariant_violations.sql"),
    include_str!("migrations/021_plan_link_index.sql"),
    include_str!("migrations/022_step_journal.sql"),
    include_str!("migrations/023_lease_owner_start.sql"),
    include_str!("migrations/024_server_tokens.sql"),
    include_str!("migrations/025_graph_journal.sql"),
    include_str!("migrations/026_lease_expiry.sql"),
    include_str!("migrations/027_team.sql"),
    include_str!("migrations/028_review_per_reviewer.sql"),
];

static MIGRATIONS: LazyLock<Migrations<'static>> =
    LazyLock::new(|| Migrations::new(MIGRATION_SQL.iter().map(|sql| M::up(sql)).collect()));

/// The schema version this binary creates and understands.
pub fn latest_schema_version() -> u32 {
    MIGRATION_SQL.len() as u32
}

/// Errors from opening or using the database.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The database was written by a newer CleverAgents.
    #[error(
        "database {path} has schema version {found}, newer than this CleverAgents understands (up to {supported})"
    )]
    TooNew {
        /// The database file.
        path: PathBuf,
        /// Its schema version.
        found: u32,
        /// The newest version this binary knows.
        supported: u32,
    },
    /// The file is not a SQLite database or cannot be opened.
    #[error("cannot open database {path}: {source}")]
    Open {
        /// The database file.
        path: PathBuf,
        /// The SQLite error.
        source: rusqlite::Error,
    },
    /// The data directory cannot be created.
    #[error("cannot create data directory {path}: {}", if path.is_file() { "it is a file, not a directory".to_string() } else { source.to_string() })]
    CreateDir {
        /// The directory.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// A migration failed; the database is left at its previous version.
    #[error("cannot migrate database {path}: {message}")]
    Migrate {
        /// The database file.
        path: PathBuf,
        /// What failed.
        message: String,
    },
    /// The PostgreSQL database cannot be reached or refused the connection.
    #[error("cannot connect to {database}: {message}")]
    Connect {
        /// The database, as [`Location`] shows it (never with its password).
        database: String,
        /// Why.
        message: String,
    },
    /// A query failed.
    #[error("database error: {0}")]
    Sqlite(#[from] rusqlite::Error),
    /// A stored JSON column could not be read back.
    #[error("stored data in {table}.{column} is not valid: {message}")]
    Corrupt {
        /// Table.
        table: &'static str,
        /// Column.
        column: &'static str,
        /// What is wrong.
        message: String,
    },
}

/// Where the store's records live.
#[derive(Clone, PartialEq, Eq, Hash)]
pub enum Location {
    /// A SQLite file (the default: one per data directory).
    Sqlite(PathBuf),
    /// A PostgreSQL database, by URL (a server's team state).
    Postgres(String),
}

impl Location {
    /// Opens the store here, migrating it to the latest schema.
    ///
    /// # Errors
    /// As [`Store::open`] and [`Store::connect`].
    pub fn open(&self) -> Result<Store, StoreError> {
        match self {
            Self::Sqlite(path) => Store::open(path),
            Self::Postgres(url) => Store::connect(url),
        }
    }
}

impl std::fmt::Display for Location {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Sqlite(path) => write!(f, "{}", path.display()),
            Self::Postgres(url) => f.write_str(&db::postgres::describe(url)),
        }
    }
}

impl std::fmt::Debug for Location {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Location({self})")
    }
}

/// An open database connection with the schema migrated to the latest version.
#[derive(Debug)]
pub struct Store {
    conn: Connection,
    location: Location,
    /// The human a server call came from: written on the plans it creates, the approvals it
    /// answers and the marks it sets (attribution, spec section 22). `None` on one machine.
    human: Option<String>,
}

impl Store {
    /// Opens (creating if needed) the database at `path`, refusing newer schemas untouched.
    ///
    /// # Errors
    /// [`StoreError::TooNew`] (the file is left byte-identical), [`StoreError::Open`],
    /// [`StoreError::CreateDir`] or [`StoreError::Migrate`].
    pub fn open(path: &Path) -> Result<Self, StoreError> {
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).map_err(|source| StoreError::CreateDir {
                path: dir.to_path_buf(),
                source,
            })?;
        }
        let existed = path.exists();
        let open_err = |source| StoreError::Open {
            path: path.to_path_buf(),
            source,
        };
        let mut conn = SqliteConnection::open(path).map_err(open_err)?;
        // Read before anything is set or migrated, on the one connection the store keeps:
        // reading the version writes nothing, so a database from a newer release is left as
        // it was.
        if existed {
            refuse_newer(&conn, path)?;
        }
        conn.busy_timeout(BUSY_TIMEOUT).map_err(open_err)?;
        // Transactions take the write lock when they begin (BEGIN IMMEDIATE), so they wait for
        // another writer under the busy timeout. A deferred transaction that reads first fails
        // at once with "database is locked" when it later writes after another process's commit
        // (SQLITE_BUSY_SNAPSHOT); 8 processes on one data directory hit that within seconds, and
        // so do child plans' threads, each with its own connection.
        conn.set_transaction_behavior(rusqlite::TransactionBehavior::Immediate);
        conn.pragma_update(None, "journal_mode", "WAL")
            .map_err(open_err)?;
        conn.pragma_update(None, "synchronous", "NORMAL")
            .map_err(open_err)?;
        conn.pragma_update(None, "foreign_keys", "ON")
            .map_err(open_err)?;
        migrate(&mut conn, path)?;
        Ok(Self {
            conn: Connection::sqlite(conn),
            location: Location::Sqlite(path.to_path_buf()),
            human: None,
        })
    }

    /// Connects to the PostgreSQL database at `url` (pooled per process) and migrates it to the
    /// latest schema, refusing one written by a newer CleverAgents.
    ///
    /// # Errors
    /// [`StoreError::Connect`], [`StoreError::TooNew`] or [`StoreError::Migrate`].
    pub fn connect(url: &str) -> Result<Self, StoreError> {
        let location = Location::Postgres(url.to_string());
        let connect_err = |message: String| StoreError::Connect {
            database: location.to_string(),
            message,
        };
        let pool = db::postgres::pool(url).map_err(connect_err)?;
        let mut client = db::postgres::connect(&pool).map_err(connect_err)?;
        pg_schema::migrate(&mut client, &location)?;
        Ok(Self {
            conn: Connection::postgres(pool, client),
            location,
            human: None,
        })
    }

    /// Opens an existing database for reading only (`query_only`); no migration is applied and
    /// the file is never written.
    ///
    /// # Errors
    /// [`StoreError::TooNew`] or [`StoreError::Open`].
    pub fn open_read_only(path: &Path) -> Result<Self, StoreError> {
        let open_err = |source| StoreError::Open {
            path: path.to_path_buf(),
            source,
        };
        // Without `NO_MUTEX` SQLite locks the connection's mutex on every call (each column
        // read of each row); a connection is only ever used by one thread at a time (it is
        // `Send`, not `Sync`), as with the read-write one `Connection::open` makes.
        let conn = SqliteConnection::open_with_flags(
            path,
            OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
        )
        .map_err(open_err)?;
        refuse_newer(&conn, path)?;
        conn.busy_timeout(BUSY_TIMEOUT).map_err(open_err)?;
        conn.pragma_update(None, "query_only", "ON")
            .map_err(open_err)?;
        Ok(Self {
            conn: Connection::sqlite(conn),
            location: Location::Sqlite(path.to_path_buf()),
            human: None,
        })
    }

    /// This store acting for the human `human` (attribution).
    pub fn acting_for(mut self, human: Option<String>) -> Self {
        self.human = human;
        self
    }

    /// The human this store acts for, when a server call opened it.
    pub fn human(&self) -> Option<&str> {
        self.human.as_deref()
    }

    /// Where this store's records live.
    pub fn location(&self) -> &Location {
        &self.location
    }

    /// Another connection to the same database.
    ///
    /// # Errors
    /// As [`Location::open`].
    pub fn reopen(&self) -> Result<Self, StoreError> {
        self.location.open()
    }

    /// The connection, for repositories in this module tree.
    pub(crate) fn conn(&self) -> &Connection {
        &self.conn
    }

    /// The connection, mutable, for transactions.
    pub(crate) fn conn_mut(&mut self) -> &mut Connection {
        &mut self.conn
    }

    /// Every registered name in namespace `ns` (`ns/...`, optionally behind a `server:`), as
    /// (kind, name) pairs: kind is `resource`, `project`, `action`, `actor` or
    /// `automation profile`. Used to keep a new provider from shadowing them.
    ///
    /// # Errors
    /// [`StoreError::Sqlite`].
    pub fn names_in_namespace(&self, ns: &str) -> Result<Vec<(String, String)>, StoreError> {
        let mut out = Vec::new();
        for (kind, table) in [
            ("resource", "resources"),
            ("project", "projects"),
            ("action", "actions"),
            ("actor", "actors"),
            ("automation profile", "automation_profiles"),
        ] {
            let mut stmt = self
                .conn
                .prepare(&format!("SELECT name FROM {table} ORDER BY name"))?;
            let names = stmt
                .query_map([], |r| r.get::<_, String>(0))?
                .collect::<Result<Vec<_>, _>>()?
                .into_iter()
                .filter(|n| {
                    n.split_once('/').is_some_and(|(head, _)| {
                        head.rsplit_once(':').map_or(head, |(_, ns)| ns) == ns
                    })
                });
            out.extend(names.into_iter().map(|n| (kind.to_string(), n)));
        }
        Ok(out)
    }

    /// The schema version of the open database.
    ///
    /// # Errors
    /// [`StoreError::Sqlite`].
    pub fn schema_version(&self) -> Result<u32, StoreError> {
        match self.conn.as_sqlite() {
            Some(conn) => Ok(schema_version_of(conn)?),
            None => pg_schema::version(&self.conn),
        }
    }

    /// A number that changes whenever something a follower reads was committed, cheap to poll:
    /// SQLite's `data_version` (any other connection's commit), on PostgreSQL the newest
    /// event's `seq` (events are appended in commit order, see [`events::append`]).
    ///
    /// # Errors
    /// [`StoreError::Sqlite`].
    pub fn data_version(&self) -> Result<i64, StoreError> {
        match self.conn.as_sqlite() {
            Some(conn) => Ok(conn.pragma_query_value(None, "data_version", |r| r.get(0))?),
            None => Ok(self.conn.query_row(
                "SELECT COALESCE(MAX(seq), 0) FROM events",
                [],
                |r| r.get(0),
            )?),
        }
    }

    /// Runs SQLite's `quick_check` and returns its findings (`["ok"]` when healthy). A
    /// PostgreSQL server checks its own pages; there a database that answers is `["ok"]`.
    ///
    /// # Errors
    /// [`StoreError::Sqlite`].
    pub fn quick_check(&self) -> Result<Vec<String>, StoreError> {
        let Some(conn) = self.conn.as_sqlite() else {
            self.conn.query_row("SELECT 1", [], |r| r.get::<_, i64>(0))?;
            return Ok(vec!["ok".into()]);
        };
        let mut stmt = conn.prepare("PRAGMA quick_check")?;
        let rows = stmt.query_map([], |r| r.get::<_, String>(0))?;
        Ok(rows.collect::<Result<_, _>>()?)
    }
}

/// Applies pending migrations. Processes that open a new database at the same moment are
/// serialized by an exclusive lock on the data directory, so exactly one of them migrates.
fn migrate(conn: &mut SqliteConnection, path: &Path) -> Result<(), StoreError> {
    let failed = |message: String| StoreError::Migrate {
        path: path.to_path_buf(),
        message,
    };
    let current = MIGRATIONS
        .current_version(conn)
        .map_err(|e| failed(e.to_string()))?;
    if usize::from(&current) == MIGRATION_SQL.len() {
        return Ok(());
    }
    let dir = path.parent().unwrap_or_else(|| Path::new("."));
    let _lock = crate::safe_write::lock_dir(dir)
        .map_err(|e| failed(format!("cannot lock {}: {e}", dir.display())))?;
    MIGRATIONS
        .to_latest(conn)
        .map_err(|e| failed(e.to_string()))
}

/// [`StoreError::TooNew`] when `conn`'s database (at `path`) was made by a newer release;
/// reading the version writes nothing.
fn refuse_newer(conn: &SqliteConnection, path: &Path) -> Result<(), StoreError> {
    let found = schema_version_of(conn).map_err(|source| StoreError::Open {
        path: path.to_path_buf(),
        source,
    })?;
    if found > latest_schema_version() {
        return Err(StoreError::TooNew {
            path: path.to_path_buf(),
            found,
            supported: latest_schema_version(),
        });
    }
    Ok(())
}

/// `PRAGMA user_version` of `conn`'s database (a read; nothing is written).
fn schema_version_of(conn: &SqliteConnection) -> rusqlite::Result<u32> {
    let version: i64 = conn.pragma_query_value(None, "user_version", |r| r.get(0))?;
    Ok(u32::try_from(version).unwrap_or(u32::MAX))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_new_database_is_migrated_to_the_latest_version_in_wal_mode() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("nested/cleveragents.db")).unwrap();
        assert_eq!(store.schema_version().unwrap(), latest_schema_version());
        let mode: String = store
            .conn()
            .as_sqlite()
            .unwrap()
            .pragma_query_value(None, "journal_mode", |r| r.get(0))
            .unwrap();
        assert_eq!(mode, "wal");
        let fk: i64 = store
            .conn()
            .as_sqlite()
            .unwrap()
            .pragma_query_value(None, "foreign_keys", |r| r.get(0))
            .unwrap();
        assert_eq!(fk, 1);
        assert_eq!(store.quick_check().unwrap(), ["ok"]);
    }

    #[test]
    fn the_approvals_rebuild_for_budget_approvals_keeps_approvals_and_paused_transcripts() {
        use crate::domain::approval::{Approval, ApprovalKind};
        use crate::domain::plan::Plan;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("db");
        let mut conn = SqliteConnection::open(&path).unwrap();
        conn.pragma_update(None, "foreign_keys", "ON").unwrap();
        MIGRATIONS.to_version(&mut conn, 9).unwrap();
        let mut store = Store {
            conn: Connection::sqlite(conn),
            location: Location::Sqlite(path.clone()),
            human: None,
        };
        let plan = Plan::new("local/a", "a", jiff::Timestamp::now());
        store.insert_plan(&plan).unwrap();
        let approval = Approval::new(
            plan.plan_id,
            ApprovalKind::Decision,
            "Which?",
            jiff::Timestamp::now(),
        );
        // The row as schema 9 holds it (today's insert also writes columns of later
        // migrations, such as the event's `caused_by`).
        store
            .conn()
            .execute(
                "INSERT INTO approvals (approval_id, plan_id, kind, status, summary, context, \
                 options, answer_command, created_at) VALUES (?1, ?2, 'decision', 'pending', \
                 ?3, '{}', '[]', 'agents plan decide', ?4)",
                rusqlite::params![
                    approval.approval_id,
                    approval.plan_id.to_string(),
                    approval.summary,
                    approval.created_at.to_string()
                ],
            )
            .unwrap();
        let decision = crate::domain::Id::generate();
        {
            let tx = store.conn_mut().transaction().unwrap();
            pauses::insert_in(
                &tx,
                &pauses::ActorPause {
                    approval_id: approval.approval_id.clone(),
                    plan_id: plan.plan_id,
                    decision_id: decision,
                    call_id: "c1".into(),
                    transcript: vec![crate::domain::messages::Message::User { text: "go".into() }],
                    resumed_at: None,
                },
            )
            .unwrap();
            tx.commit().unwrap();
        }
        drop(store);
        let mut store = Store::open(&path).unwrap();
        assert_eq!(store.schema_version().unwrap(), latest_schema_version());
        assert_eq!(
            store.approval(&approval.approval_id).unwrap().unwrap().kind,
            ApprovalKind::Decision
        );
        let pause = store.open_pause(&plan.plan_id, &decision).unwrap().unwrap();
        assert_eq!(pause.call_id, "c1");
        let budget = Approval::new(
            plan.plan_id,
            ApprovalKind::Budget,
            "raise",
            jiff::Timestamp::now(),
        );
        store.insert_approval(&budget).unwrap();
        // The pause still cascades with its approval.
        store
            .conn()
            .execute(
                "DELETE FROM approvals WHERE approval_id = ?1",
                [&approval.approval_id],
            )
            .unwrap();
        assert!(
            store
                .open_pause(&plan.plan_id, &decision)
                .unwrap()
                .is_none()
        );
        assert_eq!(store.quick_check().unwrap(), ["ok"]);
        let fk: Vec<String> = store
            .conn()
            .as_sqlite()
            .unwrap()
            .prepare("PRAGMA foreign_key_check")
            .unwrap()
            .query_map([], |r| r.get(0))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap();
        assert!(fk.is_empty(), "{fk:?}");
    }

    #[test]
    fn review_marks_written_before_marks_per_reviewer_keep_their_reviewer_or_become_the_local_users()
    {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("db");
        let mut conn = SqliteConnection::open(&path).unwrap();
        conn.pragma_update(None, "foreign_keys", "ON").unwrap();
        MIGRATIONS.to_version(&mut conn, 27).unwrap();
        let mut store = Store {
            conn: Connection::sqlite(conn),
            location: Location::Sqlite(path.clone()),
            human: None,
        };
        let plan = crate::domain::plan::Plan::new("local/a", "a", jiff::Timestamp::now());
        store.insert_plan(&plan).unwrap();
        for (item, reviewer, mark) in [("aaaa", None, "accepted"), ("bbbb", Some("alice"), "rejected")] {
            store
                .conn()
                .execute(
                    "INSERT INTO review_marks (plan_id, attempt, item_id, resource, path, mark, \
                     reason, updated_at, reviewer) VALUES (?1, 1, ?2, 'r', 'f', ?3, NULL, \
                     '2026-01-01T00:00:00Z', ?4)",
                    rusqlite::params![plan.plan_id.to_string(), item, mark, reviewer],
                )
                .unwrap();
        }
        drop(store);
        let store = Store::open(&path).unwrap();
        assert_eq!(store.schema_version().unwrap(), latest_schema_version());
        let marks = store.review_marks(&plan.plan_id).unwrap();
        let of = |item: &str| {
            let m = &marks[item];
            assert_eq!(m.len(), 1, "{m:?}");
            (m[0].reviewer.clone(), m[0].mark.as_str())
        };
        assert_eq!(of("aaaa"), (String::new(), "accepted"));
        assert_eq!(of("bbbb"), ("alice".to_string(), "rejected"));
        assert_eq!(store.quick_check().unwrap(), ["ok"]);
    }

    #[test]
    fn reopening_keeps_the_version() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("db");
        drop(Store::open(&path).unwrap());
        assert_eq!(
            Store::open(&path).unwrap().schema_version().unwrap(),
            latest_schema_version()
        );
    }

    #[test]
    fn a_newer_database_is_refused_and_left_byte_identical() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("db");
        {
            let conn = SqliteConnection::open(&path).unwrap();
            conn.execute_batch("CREATE TABLE future(x); PRAGMA user_version = 999;")
                .unwrap();
        }
        let before = std::fs::read(&path).unwrap();
        let err = Store::open(&path).unwrap_err();
        assert!(
            matches!(err, StoreError::TooNew { found: 999, .. }),
            "{err}"
        );
        assert_eq!(std::fs::read(&path).unwrap(), before);
        assert!(!dir.path().join("db-wal").exists());
    }

    #[test]
    fn a_file_that_is_not_a_database_is_reported() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("db");
        std::fs::write(
            &path,
            b"this is not sqlite, just some text long enough to fill a header...............",
        )
        .unwrap();
        let before = std::fs::read(&path).unwrap();
        assert!(matches!(
            Store::open(&path).unwrap_err(),
            StoreError::Open { .. }
        ));
        assert_eq!(std::fs::read(&path).unwrap(), before);
    }
}
