//! Corrections (spec sections 08 and 27): what depends on a decision, reverting a
//! decision so that only its downstream subtree is recomputed (affected steps re-run, the
//! others replayed from their recorded deltas), appending a fix as a child plan, and the
//! decision tree across child plans.
//!
//! - [`impact`]: the affected set of a decision (decisions, steps, child plans, files).
//! - [`revert`]: `plan correct --mode revert`; `briefing`: what its model strategist is
//!   shown of the original attempt, and its read-only tools.
//! - [`crate::sandbox::replay`]: three-way merging a kept step's recorded delta into the
//!   corrected sandbox.
//! - [`append`]: `plan correct --mode append` (a child plan carrying the guidance).
//! - [`tree`]: `plan tree` / `plan explain` data.
//! - [`compare`]: `plan diff --correction` data.

pub mod append;
mod briefing;
pub mod compare;
pub mod impact;
pub mod revert;
pub mod tree;
