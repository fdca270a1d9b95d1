//! The event log: every state change of a plan is one `events` row, written in the same
//! transaction as the change (spec section 08, the plan lifecycle).
//!
//! Events have a global sequence number. The process that makes a change and any other process
//! see the same sequence: followers poll SQLite's `data_version` and read rows with a higher
//! `seq` ([`Follower`]). Token deltas are never stored; they travel only in memory.

pub mod live;

pub use crate::domain::event::{EngineEvent, EventKind, EventType};
pub use crate::store::events::{Follower, after, append, last_seq};
