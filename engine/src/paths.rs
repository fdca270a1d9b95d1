//! Where CleverAgents keeps its files.
//!
//! Locations follow the platform's conventions through the `directories` crate: the config file
//! is `config.toml` in the user's config directory and the database is `cleveragents.db` in the
//! user's data directory. `--data-dir` / `AGENTS_DATA_DIR` and `--config-path` / `AGENTS_CONFIG`
//! override them (the flag wins over the environment; clap applies that order). This replaces
//! the spec's single `~/.cleveragents` directory (see `docs/decisions.md`).

use std::path::{Path, PathBuf};

/// File name of the SQLite database inside the data directory.
pub const DATABASE_FILE: &str = "cleveragents.db";
/// File name of the configuration file inside the config directory.
pub const CONFIG_FILE: &str = "config.toml";
/// Directory (inside the data directory) that holds log files.
pub const LOGS_DIR: &str = "logs";
/// File name of the log file inside [`LOGS_DIR`].
pub const LOG_FILE: &str = "agents.log";

/// The resolved locations of every file CleverAgents owns.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Paths {
    /// The data directory: database, logs, sandboxes, caches.
    pub data_dir: PathBuf,
    /// The configuration file (`config.toml`).
    pub config_path: PathBuf,
}

/// Why the default locations could not be determined.
#[derive(Debug, thiserror::Error)]
pub enum PathsError {
    /// The platform reports no home directory, so no default location exists.
    #[error("cannot determine a home directory for the default {what} location")]
    NoHome {
        /// Which location was being resolved (`data directory` or `config file`).
        what: &'static str,
    },
}

impl Paths {
    /// Resolves the locations from explicit overrides (flag or environment, already merged by
    /// the caller) and the platform defaults.
    ///
    /// # Errors
    /// [`PathsError::NoHome`] when an override is missing and the platform has no home
    /// directory to derive a default from.
    pub fn resolve(
        data_dir: Option<PathBuf>,
        config_path: Option<PathBuf>,
    ) -> Result<Self, PathsError> {
        let project = || directories::ProjectDirs::from("", "", "cleveragents");
        let data_dir = match data_dir {
            Some(dir) => absolute(dir),
            None => project()
                .ok_or(PathsError::NoHome {
                    what: "data directory",
                })?
                .data_dir()
                .to_path_buf(),
        };
        let config_path = match config_path {
            Some(path) => absolute(path),
            None => project()
                .ok_or(PathsError::NoHome {
                    what: "config file",
                })?
                .config_dir()
                .join(CONFIG_FILE),
        };
        Ok(Self {
            data_dir,
            config_path,
        })
    }

    /// Paths rooted at explicit locations (used by tests and by `--data-dir`).
    pub fn at(data_dir: impl Into<PathBuf>, config_path: impl Into<PathBuf>) -> Self {
        Self {
            data_dir: data_dir.into(),
            config_path: config_path.into(),
        }
    }

    /// The SQLite database file.
    pub fn database(&self) -> PathBuf {
        self.data_dir.join(DATABASE_FILE)
    }

    /// The engine's clone of a repository by URL (a `git` resource), where plans work on it
    /// (spec section 21).
    pub fn remote_clone(&self, resource_id: &str) -> PathBuf {
        self.data_dir.join("remotes").join(resource_id)
    }

    /// The directory holding log files.
    pub fn logs_dir(&self) -> PathBuf {
        self.data_dir.join(LOGS_DIR)
    }

    /// The log file.
    pub fn log_file(&self) -> PathBuf {
        self.logs_dir().join(LOG_FILE)
    }

    /// The directory holding the config file.
    pub fn config_dir(&self) -> &Path {
        self.config_path.parent().unwrap_or_else(|| Path::new("."))
    }
}

/// Makes a relative path absolute against the current directory, so that every path shown to
/// the user or stored is unambiguous. A path that cannot be made absolute is kept as given.
fn absolute(path: PathBuf) -> PathBuf {
    std::path::absolute(&path).unwrap_or(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn explicit_locations_win_over_platform_defaults() {
        let paths =
            Paths::resolve(Some("/tmp/d".into()), Some("/tmp/c/config.toml".into())).unwrap();
        assert_eq!(paths.data_dir, PathBuf::from("/tmp/d"));
        assert_eq!(paths.database(), PathBuf::from("/tmp/d/cleveragents.db"));
        assert_eq!(paths.log_file(), PathBuf::from("/tmp/d/logs/agents.log"));
        assert_eq!(paths.config_dir(), Path::new("/tmp/c"));
    }

    #[test]
    fn relative_overrides_become_absolute() {
        let paths = Paths::resolve(Some("rel-data".into()), Some("rel.toml".into())).unwrap();
        assert!(paths.data_dir.is_absolute());
        assert!(paths.config_path.is_absolute());
    }
}
