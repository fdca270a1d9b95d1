//! Actors: the model actors that do the thinking (spec sections 16 to 19).
//!
//! - [`secret`]: [`ApiKey`](secret::ApiKey), a key that never prints (in [`crate::providers`]).
//! - [`messages`]: provider-neutral conversations, tool specs, usage.
//! - [`providers`]: the provider HTTP clients ([`crate::providers`], below the index, which
//!   embeds through them).
//! - [`runtime`]: the tool-calling loop of one actor run and the [`ToolHost`](runtime::ToolHost)
//!   boundary to the tool runner.
//! - [`prompts`]: system prompt rendering, role prompts, role tool schemas.
//! - [`accounting`]: token and cost accounting per call.
//! - [`pricing`]: the cost of a call from the configured prices.
//! - [`budget`]: plan budgets checked before each call, provider rate limits that queue (in
//!   [`crate::providers`]).
//! - [`estimate`]: the built-in estimation actor `builtin/usage-estimator`.
//! - [`graph`]: graph actors: nodes, edges, conditions, a state; run through the same tools.

pub mod accounting;
pub use crate::providers::budget;
pub mod estimate;
pub mod graph;
pub use crate::domain::messages;
pub mod pricing;
pub mod prompts;
#[cfg(feature = "internals")]
pub use crate::providers;
#[cfg(not(feature = "internals"))]
pub(crate) use crate::providers;
pub mod runtime;
pub use crate::providers::secret;
