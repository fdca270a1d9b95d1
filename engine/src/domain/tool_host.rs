//! The boundary between the actor runtime and tools (spec section 18): what a tool call
//! produced, and the host that offers and runs tools. The runtime ([`crate::actors::runtime`])
//! calls a host; the tool runner implements one.

use std::future::Future;

use serde::Serialize;
use serde_json::Value;

use super::messages::{ToolImage, ToolSpec};

/// What a tool call produced, as the model will see it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ToolOutcome {
    /// Output text, or the error the model should react to.
    pub content: String,
    /// Whether the call failed.
    pub is_error: bool,
    /// Whether the run ends after this turn's tool calls (e.g. `finish_strategy`).
    pub ends_run: bool,
    /// Images returned with the output (named in `content` as well).
    pub images: Vec<ToolImage>,
}

impl ToolOutcome {
    /// A successful call.
    pub fn ok(content: impl Into<String>) -> Self {
        Self {
            content: content.into(),
            is_error: false,
            ends_run: false,
            images: Vec::new(),
        }
    }

    /// A failed call; the message goes back to the model.
    pub fn error(content: impl Into<String>) -> Self {
        Self {
            content: content.into(),
            is_error: true,
            ends_run: false,
            images: Vec::new(),
        }
    }

    /// A successful call that ends the run after this turn.
    pub fn finish(content: impl Into<String>) -> Self {
        Self {
            content: content.into(),
            is_error: false,
            ends_run: true,
            images: Vec::new(),
        }
    }

    /// This outcome with `images` attached.
    #[must_use]
    pub fn with_images(mut self, images: Vec<ToolImage>) -> Self {
        self.images = images;
        self
    }
}

/// The boundary between the runtime and tools: the tool runner implements it (resolving
/// tools, validating arguments against their schema, checking permissions, executing in the
/// sandbox). Calls are made one at a time, in the order the model made them.
pub trait ToolHost: Send + Sync {
    /// The tools offered to the model, with unique names.
    fn specs(&self) -> Vec<ToolSpec>;

    /// Runs tool `name` with `args` (always a JSON object). Failures are returned as
    /// [`ToolOutcome::error`], never as panics.
    fn call(&self, name: &str, args: Value) -> impl Future<Output = ToolOutcome> + Send;
}

/// A [`ToolHost`] offering no tools (a plain chat).
#[derive(Debug, Clone, Copy, Default)]
pub struct NoTools;

impl ToolHost for NoTools {
    fn specs(&self) -> Vec<ToolSpec> {
        Vec::new()
    }

    async fn call(&self, name: &str, _args: Value) -> ToolOutcome {
        ToolOutcome::error(format!("no tools are available; `{name}` cannot be called"))
    }
}
