//! The engine: everything CleverAgents knows and does, with no knowledge of terminals.
//!
//! - [`api`]: the one door both faces use: typed operations in, typed outcomes out.
//! - [`paths`]: where the data directory, database, logs and config file live.
//! - [`config`]: `config.toml`, its keys, their resolution chain and safe edits.
//! - [`safe_write`]: replacing user files atomically, keeping links and permissions.
//! - [`store`]: the SQLite database, its migrations and repositories.
//! - [`domain`]: ids, namespaced names, the plan lifecycle model.
//! - [`events`]: the event log every state change writes, and followers of it.
//! - [`lease`]: which process drives a plan; stale owners and cancellation.
//! - [`lifecycle`]: the engine service that strategizes, executes, approves and applies plans.
//! - [`registry`]: resources, projects, actions, actors, invariants, automation profiles,
//!   plan creation.
//! - [`system`]: environment-level operations (info, init, diagnostics).
//! - [`actors`]: model providers, the actor runtime (tool-calling loop), role prompts, usage.
//! - [`sandbox`]: per-plan sandboxes, checkpoints, diffs, confinement.
//! - [`tools`]: built-in tools and the tool runner.
//! - [`skills`]: the built-in skills (collections of tools actors name) and their resolution.
//! - [`review`]: review marks per hunk and file, and the partial tree Apply writes from them.
//! - [`session`]: sessions, their history and the orchestrator that drives the product.

pub mod actor_run;
pub mod actors;
pub mod api;
pub mod config;
pub mod context;
pub mod correction;
pub mod domain;
pub mod events;
pub mod index;
pub mod lease;
pub mod lifecycle;
pub mod paths;
pub mod providers;
pub mod redact;
pub mod registry;
pub mod review;
pub mod safe_write;
pub mod sandbox;
pub mod session;
pub mod skill_registry;
pub mod skills;
pub mod store;
pub mod system;
pub mod tools;

pub use config::{Config, ConfigError};
pub use paths::Paths;
pub use store::{Store, StoreError};
