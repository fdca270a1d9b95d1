//! Provider-neutral conversation types: what the actor runtime sends to a model and what
//! comes back, before translation to a wire format (`providers::openai`,
//! `providers::anthropic`).
//!
//! Spec section 16 ("the prompt is the rendered system prompt plus the user prompt; the tools
//! of the actor's skills are offered for tool calling; results feed back for continued
//! reasoning").

use serde::{Deserialize, Serialize};

/// A tool as offered to a model: its callable name, a description, and the JSON Schema of its
/// arguments (an object schema).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ToolSpec {
    /// Callable name (`read_file`); unique among the tools offered in one request.
    pub name: String,
    /// What the tool does, for the model.
    pub description: String,
    /// JSON Schema of the arguments object.
    pub input_schema: serde_json::Value,
}

/// One tool call made by the model.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ToolCall {
    /// The provider's call id (`call_...` / `toolu_...`), echoed back with the result.
    pub id: String,
    /// The tool name as the model wrote it (it may name no offered tool).
    pub name: String,
    /// The arguments exactly as the model sent them: JSON text, possibly invalid.
    pub arguments: String,
}

/// The result of one tool call, as sent back to the model.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ToolResult {
    /// The id of the [`ToolCall`] this answers.
    pub call_id: String,
    /// Text for the model (a tool's output, or an error it should react to).
    pub content: String,
    /// Whether the call failed (unknown tool, invalid arguments, tool error).
    pub is_error: bool,
    /// Images the tool returned (an MCP tool's `image` blocks), for providers that take
    /// images; `content` names them too, so a text-only provider loses nothing but pixels.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub images: Vec<ToolImage>,
}

/// One image returned by a tool: base64 data and its MIME type (`image/png`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ToolImage {
    /// The MIME type, e.g. `image/png`.
    pub mime_type: String,
    /// The image, base64-encoded (standard alphabet, padded).
    pub data: String,
}

/// One message of a conversation. The system prompt is not a message: it travels in
/// [`ChatRequest::system`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(tag = "role", rename_all = "snake_case")]
pub enum Message {
    /// The user (or the engine speaking for the user).
    User {
        /// The text.
        text: String,
    },
    /// The model: text and/or tool calls.
    Assistant {
        /// Text (may be empty when the model only called tools).
        text: String,
        /// Tool calls, in the order the model made them.
        tool_calls: Vec<ToolCall>,
    },
    /// Results of the previous assistant message's tool calls, one per call.
    ToolResults {
        /// The results.
        results: Vec<ToolResult>,
    },
}

/// Token counts of one model call (or a sum of calls).
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema,
)]
pub struct Usage {
    /// Prompt tokens, including cached ones (cache reads and writes).
    pub input_tokens: u64,
    /// Completion tokens.
    pub output_tokens: u64,
    /// Of `input_tokens`, those read from the provider's prompt cache (Anthropic
    /// `cache_read_input_tokens`, OpenAI `prompt_tokens_details.cached_tokens`).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub cache_read_tokens: u64,
    /// Of `input_tokens`, those written to the prompt cache (Anthropic
    /// `cache_creation_input_tokens`; OpenAI reports none).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub cache_write_tokens: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

impl Usage {
    /// Input plus output tokens.
    pub fn total(&self) -> u64 {
        self.input_tokens + self.output_tokens
    }

    /// Input tokens neither read from nor written to the cache.
    pub fn uncached_input(&self) -> u64 {
        self.input_tokens
            .saturating_sub(self.cache_read_tokens + self.cache_write_tokens)
    }
}

impl std::ops::AddAssign for Usage {
    fn add_assign(&mut self, rhs: Self) {
        self.input_tokens += rhs.input_tokens;
        self.output_tokens += rhs.output_tokens;
        self.cache_read_tokens += rhs.cache_read_tokens;
        self.cache_write_tokens += rhs.cache_write_tokens;
    }
}

/// Sampling options of an actor (`options:` in its file, spec section 16), as sent to the
/// provider. Each is sent only when set.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Sampling {
    /// Temperature: 0 to 2 for OpenAI-compatible servers, 0 to 1 for Anthropic.
    pub temperature: Option<f32>,
    /// Nucleus sampling, 0 to 1 (`top_p` on both wire formats).
    pub top_p: Option<f32>,
    /// Sampling seed (`seed`, OpenAI-compatible servers only; Anthropic has none).
    pub seed: Option<u64>,
    /// Stop sequences (`stop` / `stop_sequences`); empty sends none.
    pub stop: Vec<String>,
}

/// One request to a model.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ChatRequest {
    /// The model name as the provider knows it (`gpt-4.1`, `claude-sonnet-4-5`, `llama3`).
    pub model: String,
    /// The rendered system prompt.
    pub system: Option<String>,
    /// The conversation so far; starts with a [`Message::User`].
    pub messages: Vec<Message>,
    /// Tools offered; empty for a plain chat.
    pub tools: Vec<ToolSpec>,
    /// Completion token cap. Required by Anthropic (defaults to [`DEFAULT_MAX_TOKENS`]);
    /// sent to OpenAI-compatible servers only when set.
    pub max_tokens: Option<u32>,
    /// Sampling options the actor sets.
    pub sampling: Sampling,
    /// Whether to stream the answer (SSE).
    pub stream: bool,
}

/// The completion cap sent to Anthropic when the actor sets none, in tokens (lowered to the
/// model's own limit, see `providers::anthropic::default_max_tokens`).
pub const DEFAULT_MAX_TOKENS: u32 = 8192;

/// The model's reply to one request, assembled (also from a stream).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ChatResponse {
    /// The text of the reply (may be empty).
    pub text: String,
    /// Tool calls, in order.
    pub tool_calls: Vec<ToolCall>,
    /// Token counts reported by the provider (zero when it reported none).
    pub usage: Usage,
    /// Whether the provider reported usage at all.
    pub usage_reported: bool,
    /// The provider's stop/finish reason (`stop`, `tool_calls`, `end_turn`, `tool_use`,
    /// `length`, `max_tokens`), if given.
    pub stop_reason: Option<String>,
}

impl ChatResponse {
    /// Whether the reply was cut by the completion token limit (`finish_reason: length`,
    /// `stop_reason: max_tokens`).
    pub fn truncated(&self) -> bool {
        matches!(self.stop_reason.as_deref(), Some("length" | "max_tokens"))
    }
}

/// Something a streaming (or retrying) call reports while it runs.
#[derive(Debug, Clone, PartialEq)]
pub enum StreamEvent {
    /// A piece of the reply's text.
    TextDelta(String),
    /// The call failed transiently and will be sent again after `delay`; text deltas
    /// already reported for this call are void.
    Retrying {
        /// The attempt that failed, 1-based.
        attempt: u32,
        /// How long until the next attempt.
        delay: std::time::Duration,
        /// What failed, without secrets.
        reason: String,
    },
}
