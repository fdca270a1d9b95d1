//! Where `agents server` commands that run on the server host find its records: its data
//! directory, or the PostgreSQL database `--database` names.

use clap::Args;

use super::{CliError, Context};
use cleveragents_engine::api;

/// Where a server keeps its records.
#[derive(Debug, Args)]
pub struct DatabaseArg {
    /// PostgreSQL database for the server's records (`postgres://USER:PASSWORD@HOST:PORT/DB`;
    /// default: the SQLite file in --data-dir). Several instances may share one.
    #[arg(
        long,
        value_name = "URL",
        env = "AGENTS_DATABASE_URL",
        hide_env_values = true
    )]
    pub database: Option<String>,
}

/// The engine of this data directory, keeping its records where `--database` says.
///
/// # Errors
/// `INVALID_INPUT` naming `--database` when it is not a PostgreSQL URL.
pub fn engine(ctx: &Context, a: &DatabaseArg) -> Result<api::Engine, CliError> {
    let engine = ctx.registry_engine();
    let Some(url) = a.database.as_deref() else {
        return Ok(engine);
    };
    if !(url.starts_with("postgres://") || url.starts_with("postgresql://")) {
        return Err(CliError::invalid_input(
            "--database: not a PostgreSQL URL (it starts with postgres:// or postgresql://)",
        )
        .hint("e.g. --database postgres://agents@127.0.0.1:5432/agents (or AGENTS_DATABASE_URL)"));
    }
    Ok(engine.with_database(api::DatabaseLocation::Postgres(url.to_string())))
}
