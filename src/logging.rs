//! Logging: tracing to `<data-dir>/logs/agents.log`, never to the terminal.
//!
//! The filter comes from `AGENTS_LOG` when set (any `tracing_subscriber::EnvFilter` directive),
//! else from the config key `log-level`, raised by `-v` (debug) or `-vv` (trace).

use std::path::Path;

use tracing_appender::non_blocking::WorkerGuard;
use tracing_subscriber::EnvFilter;

/// Starts logging to `logs_dir/agents.log`. Keep the returned guard alive until exit: dropping
/// it flushes the log. Returns `None` (logging off) when the directory cannot be created or a
/// subscriber is already installed; logging never stops a command.
pub fn init(
    logs_dir: &Path,
    env_filter: Option<&str>,
    level: &str,
    verbose: u8,
) -> Option<WorkerGuard> {
    std::fs::create_dir_all(logs_dir).ok()?;
    let level = match verbose {
        0 => level.to_ascii_lowercase(),
        1 => "debug".to_string(),
        _ => "trace".to_string(),
    };
    let filter = env_filter
        .filter(|f| !f.is_empty())
        .and_then(|f| EnvFilter::try_new(f).ok())
        .unwrap_or_else(|| EnvFilter::new(format!("warn,cleveragents={level}")));
    let appender = tracing_appender::rolling::never(logs_dir, crate::engine::paths::LOG_FILE);
    let (writer, guard) = tracing_appender::non_blocking(appender);
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(move || crate::engine::redact::RedactingWriter(writer.clone()))
        .with_ansi(false)
        .try_init()
        .ok()?;
    Some(guard)
}
