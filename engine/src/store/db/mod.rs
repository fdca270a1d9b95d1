//! One connection type over the two databases the store runs on: the embedded SQLite file (the
//! default, one per data directory) and PostgreSQL (a server's team state, spec section 21).
//!
//! The repositories in `store/` write SQLite's SQL with rusqlite's parameters and row readers;
//! [`Connection`] runs it on either database. On PostgreSQL the statement is rewritten
//! ([`dialect`]), the parameters are bound by SQLite itself and carried over as values
//! ([`postgres::bind`]), every column is read back as the SQLite value it stands for, and
//! PostgreSQL's errors become the rusqlite errors the repositories already handle (a unique
//! violation is a constraint violation). So a record, a transaction and an error mean the same
//! on both.

pub(crate) mod dialect;
mod pg_session;
pub(crate) mod postgres;

use rusqlite::types::{FromSql, Value};

use self::pg_session::PgSession;
pub(crate) use self::postgres::{PgClient, PgPool};

/// The advisory lock every writing transaction on PostgreSQL holds (any fixed number).
const WRITE_LOCK: i64 = 0x0043_4c45_5645_5257;

/// A connection to the store's database.
pub struct Connection {
    inner: Inner,
    /// Whether a [`Transaction`] is open: on PostgreSQL each statement in it then runs under a
    /// savepoint, so a failing statement undoes only itself, as on SQLite (PostgreSQL would
    /// otherwise refuse every later statement of the transaction).
    in_transaction: std::cell::Cell<bool>,
}

enum Inner {
    Sqlite(rusqlite::Connection),
    Postgres(Box<PgSession>),
}

impl std::fmt::Debug for Connection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self.inner {
            Inner::Sqlite(_) => "Connection(SQLite)",
            Inner::Postgres(_) => "Connection(PostgreSQL)",
        })
    }
}

impl Connection {
    /// Wraps an open SQLite connection.
    pub(crate) fn sqlite(conn: rusqlite::Connection) -> Self {
        Self {
            inner: Inner::Sqlite(conn),
            in_transaction: std::cell::Cell::new(false),
        }
    }

    /// A connection drawing from `pool`, starting with `client` (taken from it); see
    /// [`PgSession`] for when a connection is held.
    pub(crate) fn postgres(pool: PgPool, client: PgClient) -> Self {
        Self {
            inner: Inner::Postgres(Box::new(PgSession::new(pool, client))),
            in_transaction: std::cell::Cell::new(false),
        }
    }

    /// The SQLite connection, when this is one (for SQLite's own pragmas).
    pub(crate) fn as_sqlite(&self) -> Option<&rusqlite::Connection> {
        match &self.inner {
            Inner::Sqlite(conn) => Some(conn),
            Inner::Postgres(_) => None,
        }
    }

    /// Whether this connection is to PostgreSQL.
    pub fn is_postgres(&self) -> bool {
        matches!(self.inner, Inner::Postgres(_))
    }

    /// Runs one statement and returns the number of rows it changed.
    ///
    /// # Errors
    /// The database's error, as a rusqlite error.
    pub fn execute<P: rusqlite::Params>(&self, sql: &str, params: P) -> rusqlite::Result<usize> {
        match &self.inner {
            Inner::Sqlite(conn) => conn.execute(sql, params),
            Inner::Postgres(session) => {
                let in_transaction = self.in_transaction.get();
                session.with(in_transaction, |client| {
                    postgres::execute(client, in_transaction, sql, params)
                })
            }
        }
    }

    /// Runs several statements without parameters.
    ///
    /// # Errors
    /// The database's error, as a rusqlite error.
    pub fn execute_batch(&self, sql: &str) -> rusqlite::Result<()> {
        match &self.inner {
            Inner::Sqlite(conn) => conn.execute_batch(sql),
            Inner::Postgres(session) => session.with(self.in_transaction.get(), |client| {
                postgres::execute_batch(client, sql)
            }),
        }
    }

    /// The first row of a query, read by `f`; [`rusqlite::Error::QueryReturnedNoRows`] when
    /// there is none.
    ///
    /// # Errors
    /// The database's error, as a rusqlite error, or `f`'s.
    pub fn query_row<T, P, F>(&self, sql: &str, params: P, f: F) -> rusqlite::Result<T>
    where
        P: rusqlite::Params,
        F: FnOnce(&Row<'_>) -> rusqlite::Result<T>,
    {
        self.prepare(sql)?.query_row(params, f)
    }

    /// A statement to run once or several times.
    ///
    /// # Errors
    /// The database's error (SQLite checks the statement here; PostgreSQL when it runs).
    pub fn prepare(&self, sql: &str) -> rusqlite::Result<Statement<'_>> {
        Ok(Statement {
            inner: match &self.inner {
                Inner::Sqlite(conn) => StatementInner::Sqlite(conn.prepare_cached(sql)?),
                Inner::Postgres(session) => StatementInner::Postgres {
                    session,
                    sql: sql.to_string(),
                    in_transaction: self.in_transaction.get(),
                },
            },
        })
    }

    /// The same as [`Connection::prepare`]: SQLite statements are always cached.
    ///
    /// # Errors
    /// As [`Connection::prepare`].
    pub fn prepare_cached(&self, sql: &str) -> rusqlite::Result<Statement<'_>> {
        self.prepare(sql)
    }

    /// Begins a transaction that takes the store's write lock at once: `BEGIN IMMEDIATE` on
    /// SQLite (see [`super::Store::open`]), a transaction-scoped advisory lock on PostgreSQL, so
    /// writers follow one another on both exactly as SQLite orders them (and events are
    /// appended in commit order). Waiting for the lock fails after [`super::BUSY_TIMEOUT`] as
    /// SQLite's busy timeout does. It rolls back when dropped without [`Transaction::commit`].
    ///
    /// # Errors
    /// The database's error, as a rusqlite error.
    pub fn transaction(&mut self) -> rusqlite::Result<Transaction<'_>> {
        match &self.inner {
            Inner::Sqlite(_) => self.execute_batch("BEGIN IMMEDIATE")?,
            Inner::Postgres(session) => {
                let begin = format!(
                    "BEGIN; SET LOCAL lock_timeout = '{}ms'; SELECT pg_advisory_xact_lock({WRITE_LOCK})",
                    super::BUSY_TIMEOUT.as_millis()
                );
                // The connection stays held from BEGIN on; one whose BEGIN failed is rolled
                // back before it goes back to the pool.
                if let Err(e) = session.with(true, |client| postgres::execute_batch(client, &begin))
                {
                    let _ = session.with(false, |client| postgres::execute_batch(client, "ROLLBACK"));
                    return Err(e);
                }
            }
        }
        self.in_transaction.set(true);
        Ok(Transaction {
            conn: self,
            finished: false,
        })
    }
}

/// A transaction on a [`Connection`]; every query method of the connection works on it.
pub struct Transaction<'c> {
    conn: &'c Connection,
    finished: bool,
}

impl Transaction<'_> {
    /// Commits the transaction.
    ///
    /// # Errors
    /// The database's error; the transaction is then rolled back.
    pub fn commit(mut self) -> rusqlite::Result<()> {
        self.finished = true;
        self.conn.in_transaction.set(false);
        self.conn.execute_batch("COMMIT").inspect_err(|_| {
            let _ = self.conn.execute_batch("ROLLBACK");
        })
    }

    /// Rolls the transaction back.
    ///
    /// # Errors
    /// The database's error.
    pub fn rollback(mut self) -> rusqlite::Result<()> {
        self.finished = true;
        self.conn.in_transaction.set(false);
        self.conn.execute_batch("ROLLBACK")
    }
}

impl std::ops::Deref for Transaction<'_> {
    type Target = Connection;

    fn deref(&self) -> &Connection {
        self.conn
    }
}

impl Drop for Transaction<'_> {
    fn drop(&mut self) {
        if !self.finished {
            self.conn.in_transaction.set(false);
            let _ = self.conn.execute_batch("ROLLBACK");
        }
    }
}

/// A statement prepared on a [`Connection`].
pub struct Statement<'c> {
    inner: StatementInner<'c>,
}

enum StatementInner<'c> {
    Sqlite(rusqlite::CachedStatement<'c>),
    Postgres {
        session: &'c PgSession,
        sql: String,
        in_transaction: bool,
    },
}

impl Statement<'_> {
    /// Every row of the query, each read by `f`.
    ///
    /// # Errors
    /// The database's error, as a rusqlite error (a failing `f` is reported per row).
    pub fn query_map<T, P, F>(
        &mut self,
        params: P,
        mut f: F,
    ) -> rusqlite::Result<std::vec::IntoIter<rusqlite::Result<T>>>
    where
        P: rusqlite::Params,
        F: FnMut(&Row<'_>) -> rusqlite::Result<T>,
    {
        let rows: Vec<_> = match &mut self.inner {
            StatementInner::Sqlite(stmt) => stmt
                .query_map(params, |r| f(&Row::Sqlite(r)))?
                .collect(),
            StatementInner::Postgres {
                session,
                sql,
                in_transaction,
            } => {
                session.query(*in_transaction, sql, params)?
                    .iter()
                    .map(|r| f(&Row::Postgres(r)))
                    .collect()
            }
        };
        Ok(rows.into_iter())
    }

    /// The first row, read by `f`; [`rusqlite::Error::QueryReturnedNoRows`] when there is none.
    ///
    /// # Errors
    /// The database's error, as a rusqlite error, or `f`'s.
    pub fn query_row<T, P, F>(&mut self, params: P, f: F) -> rusqlite::Result<T>
    where
        P: rusqlite::Params,
        F: FnOnce(&Row<'_>) -> rusqlite::Result<T>,
    {
        match &mut self.inner {
            StatementInner::Sqlite(stmt) => stmt.query_row(params, |r| f(&Row::Sqlite(r))),
            StatementInner::Postgres {
                session,
                sql,
                in_transaction,
            } => {
                let rows = session.query(*in_transaction, sql, params)?;
                let first = rows.first().ok_or(rusqlite::Error::QueryReturnedNoRows)?;
                f(&Row::Postgres(first))
            }
        }
    }

    /// Runs the query and hands each row to `f` as it is read, without collecting them.
    ///
    /// # Errors
    /// The database's error, as a rusqlite error, or the first error of `f`.
    pub fn for_each<P, E, F>(&mut self, params: P, mut f: F) -> Result<(), E>
    where
        P: rusqlite::Params,
        E: From<rusqlite::Error>,
        F: FnMut(&Row<'_>) -> Result<(), E>,
    {
        match &mut self.inner {
            StatementInner::Sqlite(stmt) => {
                let mut rows = stmt.query(params)?;
                while let Some(r) = rows.next()? {
                    f(&Row::Sqlite(r))?;
                }
            }
            StatementInner::Postgres {
                session,
                sql,
                in_transaction,
            } => {
                let rows = session.query(*in_transaction, sql, params)?;
                for r in &rows {
                    f(&Row::Postgres(r))?;
                }
            }
        }
        Ok(())
    }

    /// Whether the query returns at least one row.
    ///
    /// # Errors
    /// The database's error, as a rusqlite error.
    pub fn exists<P: rusqlite::Params>(&mut self, params: P) -> rusqlite::Result<bool> {
        match &mut self.inner {
            StatementInner::Sqlite(stmt) => stmt.exists(params),
            StatementInner::Postgres {
                session,
                sql,
                in_transaction,
            } => Ok(!session.query(*in_transaction, sql, params)?
                .is_empty()),
        }
    }

    /// Runs the statement and returns the number of rows it changed.
    ///
    /// # Errors
    /// The database's error, as a rusqlite error.
    pub fn execute<P: rusqlite::Params>(&mut self, params: P) -> rusqlite::Result<usize> {
        match &mut self.inner {
            StatementInner::Sqlite(stmt) => stmt.execute(params),
            StatementInner::Postgres {
                session,
                sql,
                in_transaction,
            } => session.with(*in_transaction, |c| {
                postgres::execute(c, *in_transaction, sql, params)
            }),
        }
    }
}

/// One row of a query's result.
pub enum Row<'r> {
    /// A SQLite row.
    Sqlite(&'r rusqlite::Row<'r>),
    /// A PostgreSQL row, read as SQLite values.
    Postgres(&'r postgres::PgRow),
}

impl Row<'_> {
    /// The column at `index` (a position or a name) as `T`.
    ///
    /// # Errors
    /// [`rusqlite::Error::InvalidColumnIndex`], [`rusqlite::Error::InvalidColumnName`] or a
    /// conversion error, as rusqlite reports them.
    pub fn get<I: ColumnIndex, T: FromSql>(&self, index: I) -> rusqlite::Result<T> {
        match self {
            Row::Sqlite(row) => index.get_sqlite(row),
            Row::Postgres(row) => {
                let i = index.position(row.names())?;
                let value: &Value = row
                    .value(i)
                    .ok_or(rusqlite::Error::InvalidColumnIndex(i))?;
                T::column_result(value.into()).map_err(|e| conversion_error(i, value, e))
            }
        }
    }

    /// The column at `index` as the value it holds, borrowed from the row.
    ///
    /// # Errors
    /// [`rusqlite::Error::InvalidColumnIndex`].
    pub fn get_ref(&self, index: usize) -> rusqlite::Result<rusqlite::types::ValueRef<'_>> {
        match self {
            Row::Sqlite(row) => row.get_ref(index),
            Row::Postgres(row) => row
                .value(index)
                .map(Into::into)
                .ok_or(rusqlite::Error::InvalidColumnIndex(index)),
        }
    }
}

/// Reads a whole row into a tuple, as rusqlite's rows do (`query_row(sql, p, <(A, B)>::try_from)`).
macro_rules! tuple_from_row {
    ($($name:ident $index:tt),+) => {
        impl<'r, $($name: FromSql),+> TryFrom<&Row<'r>> for ($($name,)+) {
            type Error = rusqlite::Error;

            fn try_from(row: &Row<'r>) -> rusqlite::Result<Self> {
                Ok(($(row.get::<usize, $name>($index)?,)+))
            }
        }
    };
}

tuple_from_row!(A 0);
tuple_from_row!(A 0, B 1);
tuple_from_row!(A 0, B 1, C 2);
tuple_from_row!(A 0, B 1, C 2, D 3);
tuple_from_row!(A 0, B 1, C 2, D 3, E 4);
tuple_from_row!(A 0, B 1, C 2, D 3, E 4, F 5);
tuple_from_row!(A 0, B 1, C 2, D 3, E 4, F 5, G 6);
tuple_from_row!(A 0, B 1, C 2, D 3, E 4, F 5, G 6, H 7);
tuple_from_row!(A 0, B 1, C 2, D 3, E 4, F 5, G 6, H 7, I 8);
tuple_from_row!(A 0, B 1, C 2, D 3, E 4, F 5, G 6, H 7, I 8, J 9);
tuple_from_row!(A 0, B 1, C 2, D 3, E 4, F 5, G 6, H 7, I 8, J 9, K 10);
tuple_from_row!(A 0, B 1, C 2, D 3, E 4, F 5, G 6, H 7, I 8, J 9, K 10, L 11);
tuple_from_row!(A 0, B 1, C 2, D 3, E 4, F 5, G 6, H 7, I 8, J 9, K 10, L 11, M 12);
tuple_from_row!(A 0, B 1, C 2, D 3, E 4, F 5, G 6, H 7, I 8, J 9, K 10, L 11, M 12, N 13);
tuple_from_row!(A 0, B 1, C 2, D 3, E 4, F 5, G 6, H 7, I 8, J 9, K 10, L 11, M 12, N 13, O 14);
tuple_from_row!(A 0, B 1, C 2, D 3, E 4, F 5, G 6, H 7, I 8, J 9, K 10, L 11, M 12, N 13, O 14, P 15);

fn conversion_error(i: usize, value: &Value, e: rusqlite::types::FromSqlError) -> rusqlite::Error {
    match e {
        rusqlite::types::FromSqlError::InvalidType => {
            rusqlite::Error::InvalidColumnType(i, format!("column {i}"), value.data_type())
        }
        rusqlite::types::FromSqlError::OutOfRange(n) => rusqlite::Error::IntegralValueOutOfRange(i, n),
        other => rusqlite::Error::FromSqlConversionFailure(i, value.data_type(), Box::new(other)),
    }
}

/// A column named by position or by name.
pub trait ColumnIndex: Copy {
    /// Reads the column from a SQLite row.
    ///
    /// # Errors
    /// rusqlite's.
    fn get_sqlite<T: FromSql>(self, row: &rusqlite::Row<'_>) -> rusqlite::Result<T>;

    /// The column's position among `names`.
    ///
    /// # Errors
    /// [`rusqlite::Error::InvalidColumnIndex`] or [`rusqlite::Error::InvalidColumnName`].
    fn position(self, names: &[String]) -> rusqlite::Result<usize>;
}

impl ColumnIndex for usize {
    fn get_sqlite<T: FromSql>(self, row: &rusqlite::Row<'_>) -> rusqlite::Result<T> {
        row.get(self)
    }

    fn position(self, names: &[String]) -> rusqlite::Result<usize> {
        if self < names.len() {
            Ok(self)
        } else {
            Err(rusqlite::Error::InvalidColumnIndex(self))
        }
    }
}

impl ColumnIndex for &str {
    fn get_sqlite<T: FromSql>(self, row: &rusqlite::Row<'_>) -> rusqlite::Result<T> {
        row.get(self)
    }

    fn position(self, names: &[String]) -> rusqlite::Result<usize> {
        names
            .iter()
            .position(|n| n.eq_ignore_ascii_case(self))
            .ok_or_else(|| rusqlite::Error::InvalidColumnName(self.to_string()))
    }
}
