//! Logging: tracing to `<data-dir>/logs/agents.log`, never to the terminal.
//!
//! The filter comes from `AGENTS_LOG` when set (any `tracing_subscriber::EnvFilter` directive),
//! else from the config key `log-level`, raised by `-v` (debug) or `-vv` (trace).
//!
//! A log file that cannot be opened (a read-only data directory, a directory in its place)
//! turns file logging off for the command; the caller warns once on stderr and the command
//! runs on (spec section 06: logging never stops a command).

use std::path::Path;

use tracing_appender::non_blocking::WorkerGuard;
use tracing_appender::rolling::{RollingFileAppender, Rotation};
use tracing_subscriber::EnvFilter;

/// Log lines queued for the writer thread before a logging call waits for it.
const LOG_QUEUE_LINES: usize = 1024;

/// Why file logging is off for this command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LogOff {
    /// The log file (or its directory) cannot be created or opened: the message says why.
    Unwritable(String),
    /// A subscriber was already installed (tests, embedding): nothing to warn about.
    AlreadyInstalled,
}

/// Starts logging to `logs_dir/agents.log`. Keep the returned guard alive until exit: dropping
/// it flushes the log.
///
/// # Errors
/// [`LogOff`] when the file cannot be opened or a subscriber is already installed; logging is
/// then off and the command goes on.
pub fn init(
    logs_dir: &Path,
    env_filter: Option<&str>,
    level: &str,
    verbose: u8,
) -> Result<WorkerGuard, LogOff> {
    let file = logs_dir.join(cleveragents_engine::paths::LOG_FILE);
    let unwritable = |e: &dyn std::fmt::Display| {
        LogOff::Unwritable(format!("cannot write {}: {e}", file.display()))
    };
    std::fs::create_dir_all(logs_dir).map_err(|e| unwritable(&e))?;
    let level = match verbose {
        0 => level.to_ascii_lowercase(),
        1 => "debug".to_string(),
        _ => "trace".to_string(),
    };
    let filter = env_filter
        .filter(|f| !f.is_empty())
        .and_then(|f| EnvFilter::try_new(f).ok())
        .unwrap_or_else(|| EnvFilter::new(format!("warn,cleveragents={level}")));
    let appender = RollingFileAppender::builder()
        .rotation(Rotation::NEVER)
        .filename_prefix(cleveragents_engine::paths::LOG_FILE)
        .build(logs_dir)
        .map_err(|e| unwritable(&e))?;
    // A short queue that makes the command wait rather than drop a line when it is full: the
    // default queue of 128,000 lines is allocated and written up front, which cost every
    // command about 2 ms and 4 MiB before it did anything.
    let (writer, guard) = tracing_appender::non_blocking::NonBlockingBuilder::default()
        .buffered_lines_limit(LOG_QUEUE_LINES)
        .lossy(false)
        .finish(appender);
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(move || cleveragents_engine::api::RedactingWriter(writer.clone()))
        .with_ansi(false)
        .try_init()
        .map_err(|_| LogOff::AlreadyInstalled)?;
    Ok(guard)
}
