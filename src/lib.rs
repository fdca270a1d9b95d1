//! CleverAgents: supervise AI agents on large, reviewable, correctable work.
//!
//! The library holds everything testable; the binaries `agents` and `cleveragents` only call
//! [`cli::main`]. Layout (see `docs/decisions.md` and the architecture notes):
//!
//! - the engine (`cleveragents_engine`, its own crate) knows nothing of terminals; the faces
//!   reach it through `cleveragents_engine::api` only.
//! - [`output`]: one structured result per command, rendered in six formats
//!   (spec section 26, "Output Rendering Framework").
//! - [`cli`]: clap definitions and one file per command group; parses, calls the engine and
//!   hands the result to [`output`].
//! - [`event_text`]: one line of plain English per stored event, for `plan events` and the TUI.
//! - [`logging`]: tracing to a file in the data directory, never to the terminal.
//! - [`server`]: `agents server start`: the engine's protocol over HTTP and Server-Sent Events.
//! - [`tui`]: the engine's views to TUI messages, TUI commands to calls of the engine's API
//!   (in process or on a server); owns the terminal while the TUI (`cleveragents-ui`) runs.

pub mod cli;
pub mod event_text;
pub mod logging;
pub mod output;
pub mod server;
pub mod tui;
