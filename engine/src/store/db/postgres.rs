//! Running the store's statements on PostgreSQL: a connection pool per database URL, parameters
//! bound by SQLite and sent as the values they became, rows read back as SQLite values, and
//! PostgreSQL's errors as the rusqlite errors they correspond to.

use std::collections::HashMap;
use std::error::Error;
use std::sync::{LazyLock, Mutex};
use std::time::Duration;

use postgres::types::{IsNull, ToSql, Type, to_sql_checked};
use postgres::{Config, NoTls};
use r2d2_postgres::PostgresConnectionManager;
use rusqlite::types::Value;
use rust_decimal::Decimal;
use rust_decimal::prelude::ToPrimitive;

use super::dialect;

/// A pool of connections to one PostgreSQL database.
pub(crate) type PgPool = r2d2::Pool<PostgresConnectionManager<NoTls>>;
/// A connection taken from a [`PgPool`]; it goes back to the pool when dropped.
pub(crate) type PgClient = r2d2::PooledConnection<PostgresConnectionManager<NoTls>>;

/// How many connections one process keeps to one database at most.
const POOL_SIZE: u32 = 16;
/// How long taking a connection waits before failing.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

static POOLS: LazyLock<Mutex<HashMap<String, PgPool>>> = LazyLock::new(Mutex::default);

/// The pool for `url`, made (and its first connection opened) on first use in this process.
///
/// # Errors
/// What is wrong with the URL or why no connection could be made, without the password.
pub(crate) fn pool(url: &str) -> Result<PgPool, String> {
    let mut pools = POOLS.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    if let Some(pool) = pools.get(url) {
        return Ok(pool.clone());
    }
    let config: Config = url
        .parse()
        .map_err(|e| format!("not a PostgreSQL URL ({e})"))?;
    let manager = PostgresConnectionManager::new(config, NoTls);
    let pool = outside_async(|| {
        r2d2::Pool::builder()
            .max_size(POOL_SIZE)
            .min_idle(Some(1))
            .connection_timeout(CONNECT_TIMEOUT)
            .error_handler(Box::new(r2d2::NopErrorHandler))
            .build(manager)
    })
    .map_err(|e| e.to_string())?;
    pools.insert(url.to_string(), pool.clone());
    Ok(pool)
}

/// Takes a connection from `pool`.
///
/// # Errors
/// Why none could be had within the timeout.
pub(crate) fn connect(pool: &PgPool) -> Result<PgClient, String> {
    outside_async(|| pool.get()).map_err(|e| e.to_string())
}

/// `url` as it may be shown: user, host, port and database, never the password.
pub fn describe(url: &str) -> String {
    let Ok(config) = url.parse::<Config>() else {
        return "an unreadable PostgreSQL URL".into();
    };
    let host = config
        .get_hosts()
        .first()
        .map(|h| match h {
            postgres::config::Host::Tcp(name) => name.clone(),
            postgres::config::Host::Unix(path) => path.display().to_string(),
        })
        .unwrap_or_else(|| "localhost".into());
    let port = config.get_ports().first().copied().unwrap_or(5432);
    let user = config.get_user().unwrap_or("(default user)");
    let db = config.get_dbname().unwrap_or(user);
    format!("postgres://{user}@{host}:{port}/{db}")
}

/// Runs `f` where the synchronous client may block: a thread that drives no async runtime.
/// The client runs a runtime of its own and refuses to start it inside another's context.
pub(crate) fn outside_async<T: Send>(f: impl FnOnce() -> T + Send) -> T {
    if tokio::runtime::Handle::try_current().is_err() {
        return f();
    }
    std::thread::scope(|s| {
        s.spawn(f)
            .join()
            .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
    })
}

/// A row read back as SQLite values.
#[derive(Debug)]
pub struct PgRow {
    names: Vec<String>,
    values: Vec<Value>,
}

impl PgRow {
    pub(crate) fn names(&self) -> &[String] {
        &self.names
    }

    pub(crate) fn value(&self, i: usize) -> Option<&Value> {
        self.values.get(i)
    }

    fn read(row: &postgres::Row) -> rusqlite::Result<Self> {
        let names = row.columns().iter().map(|c| c.name().to_string()).collect();
        let values = (0..row.len())
            .map(|i| column(row, i))
            .collect::<Result<_, _>>()?;
        Ok(Self { names, values })
    }
}

/// Runs a query and reads every row.
pub(crate) fn query<P: rusqlite::Params>(
    client: &mut PgClient,
    in_transaction: bool,
    sql: &str,
    params: P,
) -> rusqlite::Result<Vec<PgRow>> {
    let t = dialect::translate(sql);
    let args = bind(params, t.params)?;
    let rows = outside_async(|| {
        statement_level(client, in_transaction, |client| {
            let statement = prepare(client, &t.sql, &args)?;
            client.query(&statement, &refs(&args))
        })
    })
    .map_err(|e| error_in(e, &t.sql))?;
    rows.iter().map(PgRow::read).collect()
}

/// Runs a statement and returns the number of rows it changed.
pub(crate) fn execute<P: rusqlite::Params>(
    client: &mut PgClient,
    in_transaction: bool,
    sql: &str,
    params: P,
) -> rusqlite::Result<usize> {
    let t = dialect::translate(sql);
    let args = bind(params, t.params)?;
    let n = outside_async(|| {
        statement_level(client, in_transaction, |client| {
            let statement = prepare(client, &t.sql, &args)?;
            client.execute(&statement, &refs(&args))
        })
    })
    .map_err(|e| error_in(e, &t.sql))?;
    Ok(usize::try_from(n).unwrap_or(usize::MAX))
}

/// Runs `run` so that, inside a transaction, its failure undoes only its own statement (a
/// savepoint), as a failing statement does on SQLite.
fn statement_level<T>(
    client: &mut PgClient,
    in_transaction: bool,
    run: impl FnOnce(&mut PgClient) -> Result<T, postgres::Error>,
) -> Result<T, postgres::Error> {
    if !in_transaction {
        return run(client);
    }
    client.batch_execute("SAVEPOINT statement")?;
    match run(client) {
        Ok(value) => {
            client.batch_execute("RELEASE SAVEPOINT statement")?;
            Ok(value)
        }
        Err(e) => {
            client.batch_execute("ROLLBACK TO SAVEPOINT statement; RELEASE SAVEPOINT statement")?;
            Err(e)
        }
    }
}

/// Runs statements without parameters.
pub(crate) fn execute_batch(client: &mut PgClient, sql: &str) -> rusqlite::Result<()> {
    outside_async(|| client.batch_execute(sql)).map_err(error)
}

thread_local! {
    /// Binds parameters exactly as the SQLite store would, to send the values they become.
    static BINDER: Option<rusqlite::Connection> = rusqlite::Connection::open_in_memory().ok();
}

/// The values `params` bind to parameters 1 to `count`, as SQLite binds them: every form of
/// parameters rusqlite takes means the same on PostgreSQL, and a wrong count fails the same way.
fn bind<P: rusqlite::Params>(params: P, count: usize) -> rusqlite::Result<Vec<PgParam>> {
    let sql = if count == 0 {
        "SELECT 0".to_string()
    } else {
        let list: Vec<String> = (1..=count).map(|i| format!("?{i}")).collect();
        format!("SELECT {}", list.join(", "))
    };
    BINDER.with(|binder| {
        let binder = binder
            .as_ref()
            .ok_or_else(|| rusqlite::Error::InvalidQuery)?;
        let mut stmt = binder.prepare_cached(&sql)?;
        stmt.query_row(params, |r| {
            (0..count)
                .map(|i| r.get::<_, Value>(i).map(PgParam))
                .collect()
        })
    })
}

/// Prepares `sql` with each parameter typed as the value bound to it (an integer as `BIGINT`,
/// text as `TEXT`, ...), as SQLite reads a value by what it holds; a NULL is left for
/// PostgreSQL to infer from the parameter's first use (so the store writes `name = ?2 OR ?2 IS
/// NULL`, not the other way round).
fn prepare(
    client: &mut PgClient,
    sql: &str,
    args: &[PgParam],
) -> Result<postgres::Statement, postgres::Error> {
    let types: Vec<Type> = args.iter().map(PgParam::declared_type).collect();
    client.prepare_typed(sql, &types)
}

fn refs(args: &[PgParam]) -> Vec<&(dyn ToSql + Sync)> {
    args.iter().map(|a| a as &(dyn ToSql + Sync)).collect()
}

/// One SQLite value sent as the type PostgreSQL expects at its place.
#[derive(Debug)]
struct PgParam(Value);

impl PgParam {
    /// The type the parameter is declared with: the type of the value bound to it.
    fn declared_type(&self) -> Type {
        match self.0 {
            Value::Null => Type::UNKNOWN,
            Value::Integer(_) => Type::INT8,
            Value::Real(_) => Type::FLOAT8,
            Value::Text(_) => Type::TEXT,
            Value::Blob(_) => Type::BYTEA,
        }
    }
}

type BoxError = Box<dyn Error + Sync + Send>;

impl ToSql for PgParam {
    fn to_sql(&self, ty: &Type, out: &mut bytes::BytesMut) -> Result<IsNull, BoxError> {
        match &self.0 {
            Value::Null => Ok(IsNull::Yes),
            Value::Integer(i) => integer_to_sql(*i, ty, out),
            Value::Real(f) => real_to_sql(*f, ty, out),
            Value::Text(s) => text_to_sql(s, ty, out),
            Value::Blob(b) => match *ty {
                Type::BYTEA => b.to_sql(ty, out),
                _ => String::from_utf8(b.clone())?.as_str().to_sql(ty, out),
            },
        }
    }

    fn accepts(_: &Type) -> bool {
        true
    }

    to_sql_checked!();
}

fn integer_to_sql(i: i64, ty: &Type, out: &mut bytes::BytesMut) -> Result<IsNull, BoxError> {
    match *ty {
        Type::INT8 => i.to_sql(ty, out),
        Type::INT4 => i32::try_from(i)?.to_sql(ty, out),
        Type::INT2 => i16::try_from(i)?.to_sql(ty, out),
        Type::BOOL => (i != 0).to_sql(ty, out),
        Type::FLOAT8 => (i as f64).to_sql(ty, out),
        Type::FLOAT4 => (i as f32).to_sql(ty, out),
        Type::NUMERIC => Decimal::from(i).to_sql(ty, out),
        _ => i.to_string().as_str().to_sql(ty, out),
    }
}

fn real_to_sql(f: f64, ty: &Type, out: &mut bytes::BytesMut) -> Result<IsNull, BoxError> {
    match *ty {
        Type::FLOAT8 => f.to_sql(ty, out),
        Type::FLOAT4 => (f as f32).to_sql(ty, out),
        Type::NUMERIC => Decimal::try_from(f)?.to_sql(ty, out),
        Type::INT8 if f.fract() == 0.0 => (f as i64).to_sql(ty, out),
        _ => f.to_string().as_str().to_sql(ty, out),
    }
}

fn text_to_sql(s: &str, ty: &Type, out: &mut bytes::BytesMut) -> Result<IsNull, BoxError> {
    match *ty {
        Type::INT8 => s.trim().parse::<i64>()?.to_sql(ty, out),
        Type::INT4 => s.trim().parse::<i32>()?.to_sql(ty, out),
        Type::FLOAT8 => s.trim().parse::<f64>()?.to_sql(ty, out),
        Type::BYTEA => s.as_bytes().to_sql(ty, out),
        _ => s.to_sql(ty, out),
    }
}

/// Column `i` of `row` as the SQLite value it stands for.
fn column(row: &postgres::Row, i: usize) -> rusqlite::Result<Value> {
    let failed = |e: postgres::Error| {
        rusqlite::Error::FromSqlConversionFailure(i, rusqlite::types::Type::Null, Box::new(e))
    };
    let ty = row.columns()[i].type_().clone();
    let value = match ty {
        Type::BOOL => row
            .try_get::<_, Option<bool>>(i)
            .map(|v| v.map(|b| Value::Integer(i64::from(b)))),
        Type::INT2 => row
            .try_get::<_, Option<i16>>(i)
            .map(|v| v.map(|n| Value::Integer(n.into()))),
        Type::INT4 => row
            .try_get::<_, Option<i32>>(i)
            .map(|v| v.map(|n| Value::Integer(n.into()))),
        Type::INT8 => row.try_get::<_, Option<i64>>(i).map(|v| v.map(Value::Integer)),
        Type::OID => row
            .try_get::<_, Option<u32>>(i)
            .map(|v| v.map(|n| Value::Integer(n.into()))),
        Type::FLOAT4 => row
            .try_get::<_, Option<f32>>(i)
            .map(|v| v.map(|f| Value::Real(f.into()))),
        Type::FLOAT8 => row.try_get::<_, Option<f64>>(i).map(|v| v.map(Value::Real)),
        Type::NUMERIC => row
            .try_get::<_, Option<Decimal>>(i)
            .map(|v| v.map(numeric)),
        Type::BYTEA => row.try_get::<_, Option<Vec<u8>>>(i).map(|v| v.map(Value::Blob)),
        _ => row.try_get::<_, Option<String>>(i).map(|v| v.map(Value::Text)),
    }
    .map_err(failed)?;
    Ok(value.unwrap_or(Value::Null))
}

/// A NUMERIC (what PostgreSQL's `SUM` of integers returns) as SQLite would hold it: an integer
/// when it is whole, a real otherwise.
fn numeric(d: Decimal) -> Value {
    if d.fract().is_zero()
        && let Some(i) = d.to_i64()
    {
        return Value::Integer(i);
    }
    Value::Real(d.to_f64().unwrap_or(f64::NAN))
}

/// [`error`], naming the statement when PostgreSQL could not run it at all (a statement the
/// store wrote that PostgreSQL reads differently is a defect to find quickly).
fn error_in(e: postgres::Error, sql: &str) -> rusqlite::Error {
    match error(e) {
        rusqlite::Error::SqliteFailure(code, Some(message))
            if code.code == rusqlite::ErrorCode::Unknown =>
        {
            let statement: String = sql.split_whitespace().collect::<Vec<_>>().join(" ");
            rusqlite::Error::SqliteFailure(code, Some(format!("{message} (in: {statement})")))
        }
        other => other,
    }
}

/// PostgreSQL's error as the rusqlite error the store already handles: constraint violations
/// keep their kind, conflicts between transactions read as SQLite's "busy", anything else is a
/// plain SQL error carrying PostgreSQL's message.
pub(crate) fn error(e: postgres::Error) -> rusqlite::Error {
    use postgres::error::SqlState;
    use rusqlite::ffi;
    let Some(db) = e.as_db_error() else {
        return rusqlite::Error::SqliteFailure(
            ffi::Error::new(ffi::SQLITE_IOERR),
            Some(format!("PostgreSQL: {e}")),
        );
    };
    let code = match db.code() {
        c if *c == SqlState::UNIQUE_VIOLATION => ffi::SQLITE_CONSTRAINT_UNIQUE,
        c if *c == SqlState::FOREIGN_KEY_VIOLATION => ffi::SQLITE_CONSTRAINT_FOREIGNKEY,
        c if *c == SqlState::NOT_NULL_VIOLATION => ffi::SQLITE_CONSTRAINT_NOTNULL,
        c if *c == SqlState::CHECK_VIOLATION => ffi::SQLITE_CONSTRAINT_CHECK,
        c if *c == SqlState::T_R_SERIALIZATION_FAILURE
            || *c == SqlState::T_R_DEADLOCK_DETECTED
            || *c == SqlState::LOCK_NOT_AVAILABLE =>
        {
            ffi::SQLITE_BUSY
        }
        _ => ffi::SQLITE_ERROR,
    };
    let message = match db.detail() {
        Some(detail) => format!("{} ({detail})", db.message()),
        None => db.message().to_string(),
    };
    rusqlite::Error::SqliteFailure(ffi::Error::new(code), Some(message))
}
