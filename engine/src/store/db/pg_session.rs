//! A store's PostgreSQL connection, taken from the pool only while a statement or a transaction
//! runs. A server drives many plans and follows many event streams at once, each through a
//! store of its own; were each store to keep a connection for its lifetime, a few dozen idle
//! ones would exhaust the pool (and PostgreSQL's connection limit). SQLite keeps its one
//! connection: its `data_version` is per connection.

use std::cell::RefCell;

use super::postgres::{self, PgClient, PgPool};

/// The pool a store draws from, and the connection it holds while a transaction is open.
pub(crate) struct PgSession {
    pool: PgPool,
    held: RefCell<Option<PgClient>>,
}

impl PgSession {
    /// A session on `pool`, holding `client` (already taken, e.g. to migrate) until its first
    /// statement outside a transaction finishes.
    pub(crate) fn new(pool: PgPool, client: PgClient) -> Self {
        Self {
            pool,
            held: RefCell::new(Some(client)),
        }
    }

    /// Runs `f` on a connection: the one held for an open transaction, else one taken from
    /// the pool. When `keep` (a transaction is open or begins) the connection stays held;
    /// otherwise it goes back to the pool when `f` returns.
    ///
    /// # Errors
    /// `f`'s error, or SQLite's "busy" when no connection came free within the pool's timeout.
    pub(crate) fn with<T>(
        &self,
        keep: bool,
        f: impl FnOnce(&mut PgClient) -> rusqlite::Result<T>,
    ) -> rusqlite::Result<T> {
        let held = self.held.borrow_mut().take();
        let mut client = match held {
            Some(client) => client,
            None => postgres::connect(&self.pool).map_err(|message| {
                rusqlite::Error::SqliteFailure(
                    rusqlite::ffi::Error::new(rusqlite::ffi::SQLITE_BUSY),
                    Some(format!("PostgreSQL: no connection came free ({message})")),
                )
            })?,
        };
        let result = f(&mut client);
        if keep {
            *self.held.borrow_mut() = Some(client);
        }
        result
    }

    /// Runs a query on a connection as [`PgSession::with`] takes one.
    ///
    /// # Errors
    /// As [`PgSession::with`] and [`postgres::query`].
    pub(crate) fn query<P: rusqlite::Params>(
        &self,
        in_transaction: bool,
        sql: &str,
        params: P,
    ) -> rusqlite::Result<Vec<postgres::PgRow>> {
        self.with(in_transaction, |c| postgres::query(c, in_transaction, sql, params))
    }
}
