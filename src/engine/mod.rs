//! The engine: everything CleverAgents knows and does, with no knowledge of terminals.
//!
//! - [`paths`]: where the data directory, database, logs and config file live.
//! - [`config`]: `config.toml`, its keys, their resolution chain and safe edits.
//! - [`store`]: the SQLite database, its migrations and repositories.
//! - [`domain`]: ids, namespaced names, the plan lifecycle model.
//! - [`system`]: environment-level operations (info, init, diagnostics).
//! - [`sandbox`]: per-plan sandboxes, checkpoints, diffs, confinement.
//! - [`tools`]: built-in tools and the tool runner.

pub mod config;
pub mod domain;
pub mod paths;
pub mod sandbox;
pub mod store;
pub mod system;
pub mod tools;

pub use config::{Config, ConfigError};
pub use paths::Paths;
pub use store::{Store, StoreError};
