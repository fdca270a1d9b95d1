//! The real binary, driven as a user or a script would.

mod config;
mod envelope;
mod init;
mod sandbox;
mod snapshots;
mod store;
