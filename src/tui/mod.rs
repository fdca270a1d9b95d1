//! The full-screen TUI's engine side (spec section 20): the terminal, the bridge between the
//! engine's API and the UI crate (`cleveragents-ui`, which never sees SQLite, git or HTTP), and
//! its parts, one job each:
//!
//! - [`bridge`]: the UI's commands in, the engine's views out, through one [`Client`] (in
//!   process, or the server the TUI is attached to with `--server`);
//! - [`state`]: the plans list and the approval queue, kept current;
//! - [`panes`]: the selected plan's tree and diff, read off the frame loop;
//! - [`feed`]: the live area, fed by [`Client::follow_live`];
//! - [`commands`] and [`jobs`]: the operations a key starts, on worker threads;
//! - [`views`]: the engine's views in the UI's terms;
//! - [`terminal`]: the terminal and the frame loop.
//!
//! [`Client`]: cleveragents_engine::api::Client
//! [`Client::follow_live`]: cleveragents_engine::api::Client::follow_live

pub mod bridge;
mod commands;
mod feed;
pub mod jobs;
mod panes;
mod state;
pub mod terminal;
pub mod views;

pub use bridge::{Bridge, Connection};
pub use state::POLL_INTERVAL;
pub use terminal::{QUIT_PATIENCE, run};

use cleveragents_ui::Pane;

/// What `agents tui` was asked to show first.
#[derive(Debug, Clone, Default)]
pub struct LaunchOptions {
    /// Plan to select (full id).
    pub plan_id: Option<String>,
    /// Pane to focus.
    pub focus: Option<Pane>,
}

/// Why the TUI stopped abnormally.
#[derive(Debug, thiserror::Error)]
pub enum TuiError {
    /// The terminal could not be set up, drawn or read.
    #[error("terminal error: {0}")]
    Terminal(#[from] std::io::Error),
    /// The engine could not be asked (its database, or the server, failed).
    #[error(transparent)]
    Api(#[from] cleveragents_engine::api::ApiError),
}
