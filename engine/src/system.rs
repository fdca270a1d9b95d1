//! Environment-level operations: what `info`, `diagnostics` and `init` report and do.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde::Serialize;

use super::config::{self, Config, Provider};
pub use super::domain::check::{Check, CheckStatus};
use super::paths::Paths;
use super::store::plans::PlanCounts;
use super::store::{Location, Store, StoreError, latest_schema_version};

/// The version of this build (`CARGO_PKG_VERSION`).
pub const VERSION: &str = env!("CARGO_PKG_VERSION");

/// `os-arch` of this build, e.g. `linux-x86_64`.
pub fn platform() -> String {
    format!("{}-{}", std::env::consts::OS, std::env::consts::ARCH)
}

/// Facts about the environment, for `agents info`.
#[derive(Debug, Clone, Serialize, serde::Deserialize, schemars::JsonSchema)]
pub struct Info {
    /// CleverAgents version.
    pub version: String,
    /// `os-arch`.
    pub platform: String,
    /// Data directory.
    pub data_dir: PathBuf,
    /// Config file.
    pub config_path: PathBuf,
    /// Whether the config file exists.
    pub config_exists: bool,
    /// Database file.
    pub database_path: PathBuf,
    /// Database size in bytes (main file only).
    pub database_size_bytes: u64,
    /// Schema version of the database.
    pub schema_version: u32,
    /// Newest schema version this binary knows.
    pub latest_schema_version: u32,
    /// Log file.
    pub log_file: PathBuf,
    /// Plans by state.
    pub plans: PlanCounts,
    /// Configured providers (built-in and from the config file).
    pub providers: usize,
    /// Providers that need no key or whose key variable is set.
    pub providers_ready: usize,
}

/// Gathers [`Info`] from an open store.
///
/// # Errors
/// [`StoreError`] when the database cannot be queried.
pub fn info(paths: &Paths, config: &Config, store: &Store) -> Result<Info, StoreError> {
    Ok(Info {
        version: VERSION.to_string(),
        platform: platform(),
        data_dir: paths.data_dir.clone(),
        config_path: paths.config_path.clone(),
        config_exists: config.exists,
        database_path: PathBuf::from(store.location().to_string()),
        database_size_bytes: match store.location() {
            Location::Sqlite(path) => fs::metadata(path).map(|m| m.len()).unwrap_or(0),
            Location::Postgres(_) => 0,
        },
        schema_version: store.schema_version()?,
        latest_schema_version: latest_schema_version(),
        log_file: paths.log_file(),
        plans: store.plan_counts()?,
        providers: config.providers().len(),
        providers_ready: config
            .providers()
            .iter()
            .filter(|p| {
                p.api_key_env
                    .as_ref()
                    .is_none_or(|var| std::env::var(var).is_ok_and(|v| !v.is_empty()))
            })
            .count(),
    })
}

/// One check per MCP server the registered skills configure (spec 18): it starts, lists its
/// tools and stops.
fn mcp_checks(db: &std::path::Path) -> Vec<Check> {
    if !db.exists() {
        return Vec::new();
    }
    let Ok(store) = crate::store::Store::open(db) else {
        return Vec::new();
    };
    crate::tools::mcp::check_configured(crate::skill_registry::mcp_servers(&store))
        .into_iter()
        .map(|(name, r)| match r {
            Ok(summary) => Check::new(format!("MCP server {name}"), CheckStatus::Ok, summary, None),
            Err(e) => Check::new(
                format!("MCP server {name}"),
                CheckStatus::Error,
                e,
                Some("check the server's command or url in the skill (agents skill show)".into()),
            ),
        })
        .collect()
}

/// Runs every health check: config file, database, data directory, git, MCP servers,
/// providers. `env` looks up environment variables.
pub fn diagnostics(paths: &Paths, env: &dyn Fn(&str) -> Option<String>) -> Vec<Check> {
    let mut checks = Vec::new();
    let config = match Config::load(&paths.config_path) {
        Ok(c) if c.exists => {
            checks.push(Check::new("Config file", CheckStatus::Ok, "valid", None));
            Some(c)
        }
        Ok(c) => {
            checks.push(Check::new(
                "Config file",
                CheckStatus::Ok,
                "not created yet (defaults apply)",
                None,
            ));
            Some(c)
        }
        Err(e) => {
            checks.push(Check::new(
                "Config file",
                CheckStatus::Error,
                e.to_string(),
                Some(format!("fix or remove {}", paths.config_path.display())),
            ));
            None
        }
    };
    checks.push(database_check(&paths.database()));
    checks.push(writable_check(&paths.data_dir));
    checks.push(disk_check(&paths.data_dir));
    checks.push(log_file_check(&paths.logs_dir()));
    checks.push(git_check());
    checks.push(shell_sandbox_check());
    checks.push(sandbox_checkouts_check());
    checks.push(Check::new(
        "Shell limits",
        CheckStatus::Ok,
        crate::sandbox::launcher::probe().describe_limits(),
        None,
    ));
    checks.extend(mcp_checks(&paths.database()));
    if let Some(check) = profile_check(paths, config.as_ref(), env) {
        checks.push(check);
    }
    if let Some(config) = config {
        for provider in config.providers() {
            checks.push(provider_check(&provider, env));
        }
        for (name, problem) in config.incomplete_providers() {
            let (what, fix) = problem.split_once(": ").unwrap_or((problem.as_str(), ""));
            checks.push(Check::new(
                format!("Provider {name}"),
                CheckStatus::Error,
                format!("incomplete: {what}"),
                Some(fix.to_string()),
            ));
        }
    }
    checks
}

fn database_check(path: &Path) -> Check {
    if path.exists() && fs::OpenOptions::new().write(true).open(path).is_err() {
        return Check::new(
            "Database",
            CheckStatus::Error,
            format!("{} is not writable", path.display()),
            Some("fix its permissions (chmod u+w) or its owner".to_string()),
        );
    }
    let opened = if path.exists() {
        Store::open_read_only(path)
    } else {
        Store::open(path)
    };
    match opened.and_then(|s| Ok((s.schema_version()?, s.quick_check()?))) {
        Ok((version, findings)) if findings == ["ok"] => {
            let behind = version < latest_schema_version();
            let details = if behind {
                format!(
                    "schema v{version} (migrates to v{} on next write)",
                    latest_schema_version()
                )
            } else {
                format!("schema v{version}, integrity ok")
            };
            Check::new("Database", CheckStatus::Ok, details, None)
        }
        Ok((_, findings)) => Check::new(
            "Database",
            CheckStatus::Error,
            format!("integrity check failed: {}", findings.join("; ")),
            Some(format!(
                // A command inside a sentence stays (D-commands-2): it explains the error rather than suggesting the next step.
                "restore {} from a backup, or run `agents init --yes` to start over",
                path.display()
            )),
        ),
        Err(e) => Check::new(
            "Database",
            CheckStatus::Error,
            e.to_string(),
            Some(match e {
                StoreError::TooNew { .. } => {
                    "upgrade CleverAgents to a version that knows this schema".to_string()
                }
                _ => format!(
                    "check {} (permissions, disk space, another process)",
                    path.display()
                ),
            }),
        ),
    }
}

/// The global automation profile (`AGENTS_AUTOMATION_PROFILE`, else `config.toml`) must name
/// a built-in or a registered custom profile, or every `plan use` without a closer profile
/// fails. `None` when no global profile is set or the database cannot be read.
fn profile_check(
    paths: &Paths,
    config: Option<&Config>,
    env: &dyn Fn(&str) -> Option<String>,
) -> Option<Check> {
    let (value, origin) = match env("AGENTS_AUTOMATION_PROFILE").filter(|v| !v.is_empty()) {
        Some(v) => (v, "AGENTS_AUTOMATION_PROFILE"),
        None => (
            config?.file.automation_profile.clone()?,
            "config.toml automation-profile",
        ),
    };
    let store = Store::open_read_only(&paths.database()).ok();
    let found = match store {
        Some(store) => crate::registry::profiles::find(&store, &value).is_ok(),
        None => crate::domain::name::is_builtin_profile(&value),
    };
    Some(if found {
        Check::new(
            "Automation profile",
            CheckStatus::Ok,
            format!("{value} ({origin})"),
            None,
        )
    } else {
        let check = |fix: Option<String>| {
            Check::new(
                "Automation profile",
                CheckStatus::Error,
                format!("{origin} names `{value}`, which is not a registered profile"),
                fix,
            )
        };
        if origin.starts_with("AGENTS_") {
            check(Some(
                "unset AGENTS_AUTOMATION_PROFILE or register the profile".to_string(),
            ))
        } else {
            check(None).fixed_by(crate::domain::Next::ConfigUnset {
                key: "automation-profile".into(),
            })
        }
    })
}

/// Free space under the data directory, where sandboxes (copies and work trees), checkpoints
/// and indexes are written: WARN below [`DISK_WARN_BYTES`], ERROR below a tenth of that.
fn disk_check(dir: &Path) -> Check {
    let probe = dir
        .ancestors()
        .find(|a| a.exists())
        .unwrap_or(Path::new("/"));
    let stat = match rustix::fs::statvfs(probe) {
        Ok(s) => s,
        Err(e) => {
            return Check::new(
                "Disk space",
                CheckStatus::Warn,
                format!("cannot read free space of {}: {e}", probe.display()),
                None,
            );
        }
    };
    let free = stat.f_bavail.saturating_mul(stat.f_frsize);
    let total = stat.f_blocks.saturating_mul(stat.f_frsize).max(1);
    let gib = |b: u64| b as f64 / (1u64 << 30) as f64;
    let details = format!(
        "{:.1} GiB free of {:.1} GiB ({:.0} %) at {}",
        gib(free),
        gib(total),
        free as f64 * 100.0 / total as f64,
        probe.display()
    );
    let low = DISK_WARN_BYTES;
    let (status, fix) = if free < low / 10 {
        (CheckStatus::Error, true)
    } else if free < low {
        (CheckStatus::Warn, true)
    } else {
        (CheckStatus::Ok, false)
    };
    Check::new(
        "Disk space",
        status,
        details,
        fix.then(|| {
            "free space, remove finished plans' sandboxes (agents plan cleanup) or use another --data-dir"
                .to_string()
        }),
    )
}

/// Free bytes under which `diagnostics` warns about disk space (2 GiB).
pub const DISK_WARN_BYTES: u64 = 2 << 30;

fn writable_check(dir: &Path) -> Check {
    let probe = dir.join(format!(".write-probe-{}", std::process::id()));
    let result = fs::create_dir_all(dir)
        .and_then(|()| fs::write(&probe, b"probe"))
        .and_then(|()| fs::remove_file(&probe));
    match result {
        Ok(()) => Check::new("Data directory", CheckStatus::Ok, "writable", None),
        Err(e) => Check::new(
            "Data directory",
            CheckStatus::Error,
            format!("{} is not writable: {e}", dir.display()),
            Some("fix its permissions or choose another with --data-dir".to_string()),
        ),
    }
}

/// Whether the log file opens for appending: when it does not, every command runs without a
/// log file (and says so on stderr).
fn log_file_check(logs_dir: &Path) -> Check {
    let file = logs_dir.join(crate::paths::LOG_FILE);
    let opened = fs::create_dir_all(logs_dir)
        .and_then(|()| fs::OpenOptions::new().create(true).append(true).open(&file));
    match opened {
        Ok(_) => Check::new(
            "Log file",
            CheckStatus::Ok,
            file.display().to_string(),
            None,
        ),
        Err(e) => Check::new(
            "Log file",
            CheckStatus::Warn,
            format!(
                "cannot write {}: {e}; commands run without a log file",
                file.display()
            ),
            Some(format!(
                "make {} writable, or choose another data directory with --data-dir",
                logs_dir.display()
            )),
        ),
    }
}

fn git_check() -> Check {
    match Command::new("git").arg("--version").output() {
        Ok(out) if out.status.success() => {
            let v = String::from_utf8_lossy(&out.stdout).trim().to_string();
            Check::new("Git", CheckStatus::Ok, v, None)
        }
        _ => Check::new(
            "Git",
            CheckStatus::Warn,
            "git not found on PATH",
            Some(
                "install git to use git-checkout resources and validations that call it"
                    .to_string(),
            ),
        ),
    }
}

/// How sandboxes of git checkouts are made in this process: sharing their base's checkout
/// through an overlay, or a full checkout each (and why).
fn sandbox_checkouts_check() -> Check {
    let mode = crate::sandbox::overlay::mode();
    Check::new("Sandbox checkouts", CheckStatus::Ok, mode.describe(), None)
}

/// How shell commands are confined here: Landlock, namespaces, cgroup and the default
/// limits (`docs/sandbox.md`), or a warning that `shell_execute` is classified unsafe.
fn shell_sandbox_check() -> Check {
    let probe = crate::sandbox::launcher::probe();
    let details = probe.describe().join("; ");
    if probe.confines() {
        Check::new("Shell sandbox", CheckStatus::Ok, details, None)
    } else {
        Check::new(
            "Shell sandbox",
            CheckStatus::Warn,
            details,
            Some(
                "run on Linux 6.7 or newer with Landlock enabled (lsm=landlock), as a user that may create \
                 namespaces, to confine shell commands; until then plans that block unsafe tools cannot \
                 run shell steps"
                    .to_string(),
            ),
        )
    }
}

fn provider_check(provider: &Provider, env: &dyn Fn(&str) -> Option<String>) -> Check {
    let name = format!("Provider {}", provider.name);
    match &provider.api_key_env {
        None => match reachable(&provider.base_url) {
            Ok(()) => Check::new(
                name,
                CheckStatus::Ok,
                format!(
                    "{} at {} (no key needed; it accepts connections)",
                    provider.kind.as_str(),
                    provider.base_url
                ),
                None,
            ),
            Err(why) => Check::new(
                name,
                CheckStatus::Warn,
                format!(
                    "{} at {}: {why}",
                    provider.kind.as_str(),
                    provider.base_url
                ),
                Some(format!(
                    "start the server (for Ollama: `ollama serve`) or correct providers.{}.base_url",
                    provider.name
                )),
            ),
        },
        Some(var) if env(var).is_some_and(|v| !v.is_empty()) => {
            Check::new(name, CheckStatus::Ok, format!("{var} is set"), None)
        }
        Some(var) => Check::new(
            name,
            CheckStatus::Warn,
            format!("{var} is not set"),
            Some(format!(
                "export {var}=... to use {}/<model> actors",
                provider.name
            )),
        ),
    }
}

/// How long `diagnostics` waits for a local provider to accept a connection.
const PROVIDER_CONNECT_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(1);

/// Whether something accepts TCP connections at `base_url`'s host and port (connect only,
/// within [`PROVIDER_CONNECT_TIMEOUT`]; no request is sent): a keyless provider is a local
/// server, and one that is not running is the usual reason its actors fail.
fn reachable(base_url: &str) -> Result<(), String> {
    use std::net::{TcpStream, ToSocketAddrs};
    let url = reqwest::Url::parse(base_url).map_err(|e| format!("not a URL ({e})"))?;
    let host = url.host_str().ok_or("the URL has no host")?;
    let port = url
        .port_or_known_default()
        .ok_or("the URL has no port")?;
    let shown = format!("{host}:{port}");
    let addrs: Vec<_> = (host, port)
        .to_socket_addrs()
        .map_err(|e| format!("cannot resolve {shown} ({e})"))?
        .collect();
    let mut last = format!("nothing accepts connections at {shown}");
    for addr in addrs {
        match TcpStream::connect_timeout(&addr, PROVIDER_CONNECT_TIMEOUT) {
            Ok(_) => return Ok(()),
            Err(e) => last = format!("nothing accepts connections at {shown} ({e})"),
        }
    }
    Err(last)
}

/// Why `init` refused or failed.
#[derive(Debug, thiserror::Error)]
pub enum InitError {
    /// A plan is being processed; resetting now would pull the data from under it.
    #[error("{0} plan(s) are being processed; wait for them or cancel them before resetting")]
    PlansProcessing(u64),
    /// The database could not be inspected.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The data directory given does not look like one of ours.
    #[error("{path} does not look like a CleverAgents data directory ({why}); nothing was moved")]
    NotADataDir {
        /// The path given.
        path: PathBuf,
        /// Why it was refused.
        why: String,
    },
    /// A file operation failed. What was backed up stays backed up.
    #[error("cannot {action} {path}: {source}")]
    Io {
        /// What was being done.
        action: &'static str,
        /// The path involved.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
}

/// Refuses to move anything that is not a CleverAgents data directory: a file, or a
/// non-empty directory without `cleveragents.db`. A typo in `--data-dir` must never move a
/// user's project away.
///
/// # Errors
/// [`InitError::NotADataDir`].
pub fn check_resettable(data_dir: &Path) -> Result<(), InitError> {
    let refuse = |why: &str| InitError::NotADataDir {
        path: data_dir.to_path_buf(),
        why: why.to_string(),
    };
    match fs::symlink_metadata(data_dir) {
        Err(_) => Ok(()),
        Ok(meta) if !meta.is_dir() => Err(refuse("it is not a directory")),
        Ok(_) => {
            let has_db = data_dir.join(super::paths::DATABASE_FILE).exists();
            let empty = fs::read_dir(data_dir)
                .map(|mut d| d.next().is_none())
                .unwrap_or(false);
            if has_db || empty {
                Ok(())
            } else {
                Err(refuse("it is not empty and holds no cleveragents.db"))
            }
        }
    }
}

/// What `init` backed up and created.
#[derive(Debug, Clone, Serialize)]
pub struct ResetOutcome {
    /// Where the old data directory was moved, if there was one.
    pub data_backup: Option<PathBuf>,
    /// Where the old config file was copied, if there was one outside the data directory.
    pub config_backup: Option<PathBuf>,
    /// The new data directory.
    pub data_dir: PathBuf,
    /// The new config file.
    pub config_path: PathBuf,
    /// The new database.
    pub database_path: PathBuf,
    /// Its schema version.
    pub schema_version: u32,
}

/// Counts plans in processing without writing anything (read-only connection); 0 when there is
/// no database yet.
///
/// # Errors
/// [`StoreError`] when the database exists but cannot be read.
pub fn processing_plans(paths: &Paths) -> Result<u64, StoreError> {
    let db = paths.database();
    if !db.exists() {
        return Ok(0);
    }
    let store = Store::open_read_only(&db)?;
    if store.schema_version()? == 0 {
        return Ok(0);
    }
    Ok(store.plan_counts()?.processing)
}

/// Backs up the data directory (moved to `<data-dir>.backup-<UTC timestamp>`) and the config
/// file (copied to `<config>.backup-<UTC timestamp>`), then creates a fresh data directory,
/// database and commented default config file. Refuses while a plan is being processed.
///
/// # Errors
/// [`InitError`]; nothing is removed: the old data is either untouched or in the backup.
pub fn reset(paths: &Paths) -> Result<ResetOutcome, InitError> {
    check_resettable(&paths.data_dir)?;
    let processing = processing_plans(paths)?;
    if processing > 0 {
        return Err(InitError::PlansProcessing(processing));
    }
    let stamp = jiff::Timestamp::now()
        .strftime("%Y%m%dT%H%M%SZ")
        .to_string();
    let io = |action, path: &Path| {
        let path = path.to_path_buf();
        move |source| InitError::Io {
            action,
            path,
            source,
        }
    };

    let config_inside_data = paths.config_path.starts_with(&paths.data_dir);
    let config_backup = if paths.config_path.exists() && !config_inside_data {
        let target = free_path(&paths.config_path, &stamp);
        fs::copy(&paths.config_path, &target).map_err(io("back up config file to", &target))?;
        Some(target)
    } else {
        None
    };
    let data_backup = if paths.data_dir.exists() {
        let target = free_path(&paths.data_dir, &stamp);
        fs::rename(&paths.data_dir, &target).map_err(io("move data directory to", &target))?;
        Some(target)
    } else {
        None
    };

    fs::create_dir_all(paths.logs_dir()).map_err(io("create", &paths.logs_dir()))?;
    let store = Store::open(&paths.database())?;
    let schema_version = store.schema_version()?;
    write_atomically(&paths.config_path, &config::default_file_text())
        .map_err(io("write", &paths.config_path))?;
    Ok(ResetOutcome {
        data_backup,
        config_backup,
        data_dir: paths.data_dir.clone(),
        config_path: paths.config_path.clone(),
        database_path: paths.database(),
        schema_version,
    })
}

/// `<path>.backup-<stamp>`, with `-N` appended if that exists already.
fn free_path(path: &Path, stamp: &str) -> PathBuf {
    let base = format!("{}.backup-{stamp}", path.display());
    let mut candidate = PathBuf::from(&base);
    let mut n = 1;
    while candidate.exists() {
        candidate = PathBuf::from(format!("{base}-{n}"));
        n += 1;
    }
    candidate
}

/// Writes `text` to `path` through a temporary file and a rename, under the config lock.
fn write_atomically(path: &Path, text: &str) -> std::io::Result<()> {
    let _lock = crate::safe_write::lock_dir(path.parent().unwrap_or_else(|| Path::new(".")))?;
    crate::safe_write::replace_file(path, text.as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::lifecycle::ProcessingState;
    use crate::domain::plan::Plan;

    fn paths(dir: &Path) -> Paths {
        Paths::at(dir.join("data"), dir.join("conf/config.toml"))
    }

    #[test]
    fn reset_backs_up_data_and_config_then_recreates_them() {
        let dir = tempfile::tempdir().unwrap();
        let p = paths(dir.path());
        let mut store = Store::open(&p.database()).unwrap();
        store
            .insert_plan(&Plan::new("local/a", "a", jiff::Timestamp::now()))
            .unwrap();
        drop(store);
        fs::create_dir_all(p.config_dir()).unwrap();
        fs::write(&p.config_path, "format = \"json\"\n").unwrap();

        let out = reset(&p).unwrap();
        let data_backup = out.data_backup.unwrap();
        assert!(data_backup.join("cleveragents.db").exists());
        assert_eq!(
            fs::read_to_string(out.config_backup.unwrap()).unwrap(),
            "format = \"json\"\n"
        );
        let fresh = Store::open(&p.database()).unwrap();
        assert_eq!(fresh.plan_counts().unwrap().total, 0);
        assert_eq!(Config::load(&p.config_path).unwrap().file.format, None);
        let old = Store::open(&data_backup.join("cleveragents.db")).unwrap();
        assert_eq!(
            old.plan_counts().unwrap().total,
            1,
            "the backup keeps the old data"
        );
    }

    #[test]
    fn reset_refuses_while_a_plan_is_processing_and_changes_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let p = paths(dir.path());
        let mut store = Store::open(&p.database()).unwrap();
        let mut plan = Plan::new("local/a", "a", jiff::Timestamp::now());
        plan.status.set_state(ProcessingState::Processing).unwrap();
        store.insert_plan(&plan).unwrap();
        drop(store);
        assert!(matches!(reset(&p), Err(InitError::PlansProcessing(1))));
        assert!(p.database().exists());
        assert_eq!(
            fs::read_dir(dir.path()).unwrap().count(),
            1,
            "no backup was made"
        );
    }

    #[test]
    fn diagnostics_report_missing_keys_and_a_broken_config() {
        let dir = tempfile::tempdir().unwrap();
        let p = paths(dir.path());
        let env = |v: &str| (v == "ANTHROPIC_API_KEY").then(|| "x".to_string());
        let checks = diagnostics(&p, &env);
        let by_name = |n: &str| checks.iter().find(|c| c.name == n).unwrap().status;
        assert_eq!(by_name("Config file"), CheckStatus::Ok);
        assert_eq!(by_name("Database"), CheckStatus::Ok);
        assert_eq!(by_name("Provider openai"), CheckStatus::Warn);
        assert_eq!(by_name("Provider anthropic"), CheckStatus::Ok);

        fs::create_dir_all(p.config_dir()).unwrap();
        fs::write(&p.config_path, "format = 3\n").unwrap();
        let checks = diagnostics(&p, &env);
        assert_eq!(checks[0].status, CheckStatus::Error);
        assert!(checks[0].fix.is_some());
    }
}
