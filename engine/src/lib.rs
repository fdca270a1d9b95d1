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
//! - [`audit`]: the server's audit log as a hash chain, and its verification.

// Without `internals`, what only the integration tests and benchmarks reach through the
// internal modules looks unused; the lints that matter run with the feature on (every
// `--all-targets` build turns it on through the workspace's dev-dependency).
#![cfg_attr(not(feature = "internals"), allow(dead_code, unused_imports))]

pub mod api;
pub mod config;
pub mod domain;
pub mod paths;

/// Declares the engine's internal modules: visible to this crate only, and public with the
/// `internals` feature, which the workspace's integration tests and benchmarks turn on to
/// reach what no face may (the faces use [`api`] alone).
macro_rules! internal_modules {
    ($($name:ident),* $(,)?) => {
        $(
            #[cfg(feature = "internals")]
            pub mod $name;
            #[cfg(not(feature = "internals"))]
            pub(crate) mod $name;
        )*
    };
}

internal_modules!(
    actor_run,
    audit,
    actors,
    context,
    correction,
    events,
    index,
    lease,
    lifecycle,
    providers,
    redact,
    registry,
    review,
    safe_read,
    safe_write,
    sandbox,
    session,
    skill_registry,
    skills,
    store,
    system,
    team,
    tools,
);

pub use config::{Config, ConfigError};
pub use paths::Paths;
#[cfg(feature = "internals")]
pub use store::{Store, StoreError};
