//! Actors: the model actors that do the thinking (spec sections 16 to 19).
//!
//! - [`secret`]: [`ApiKey`](secret::ApiKey), a key that never prints.
//! - [`messages`]: provider-neutral conversations, tool specs, usage.
//! - [`providers`]: HTTP clients for OpenAI-compatible Chat Completions and Anthropic
//!   Messages, with streaming, timeouts, retries and errors that say what to fix.
//! - [`runtime`]: the tool-calling loop of one actor run and the [`ToolHost`](runtime::ToolHost)
//!   boundary to the tool runner.
//! - [`prompts`]: system prompt rendering, role prompts, role tool schemas.
//! - [`accounting`]: token and cost accounting per call.
//! - [`budget`]: plan budgets checked before each call, provider rate limits that queue.
//! - [`estimate`]: the built-in estimation actor `builtin/usage-estimator`.
//! - [`oneshot`]: one model actor run in isolation (`agents actor run`).

pub mod accounting;
pub mod budget;
pub mod estimate;
pub mod messages;
pub mod oneshot;
pub mod prompts;
pub mod providers;
pub mod runtime;
pub mod secret;
