//! The real binary, driven as a user or a script would.

mod bad_inputs;
mod children;
mod code_index;
mod config;
mod correction;
mod envelope;
mod examples;
mod init;
mod lifecycle;
mod lifecycle_e2e;
mod lifecycle_session2;
mod profiles;
mod quickstart;
mod reference;
mod registries;
mod registry_commands;
mod registry_regressions;
mod registry_snapshots;
mod regressions;
mod sandbox;
mod skills;
pub(crate) mod snapshots;
mod store;
mod tui;
