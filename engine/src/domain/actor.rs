//! Actors (spec section 16): registered actor definitions, as the store keeps them.
//! Loading, checking and resolving them lives in `crate::registry::actors`.

use serde::{Deserialize, Serialize};

/// The kind of a custom actor.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default, schemars::JsonSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum ActorType {
    /// One model with a system prompt, skills and options (`agent` in spec 05 is accepted
    /// for it).
    #[default]
    #[serde(alias = "agent")]
    Llm,
    /// A graph of llm, tool and actor nodes (`crate::actors::graph`).
    Graph,
}

/// Model options (`options:` in the actor file).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(
    deny_unknown_fields,
    rename_all(serialize = "snake_case", deserialize = "kebab-case")
)]
pub struct ActorOptions {
    /// Sampling temperature, 0 to 2.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub temperature: Option<f64>,
    /// Maximum tokens per response.
    #[serde(default, alias = "max_tokens", skip_serializing_if = "Option::is_none")]
    pub max_tokens: Option<u32>,
    /// Nucleus sampling, 0 to 1.
    #[serde(default, alias = "top_p", skip_serializing_if = "Option::is_none")]
    pub top_p: Option<f64>,
    /// Stop sequences.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stop: Option<Vec<String>>,
    /// Sampling seed, where the provider supports it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seed: Option<u64>,
}

impl ActorOptions {
    /// The sampling options these set (temperature, top-p, seed, stop), as sent to a
    /// provider.
    pub fn sampling(&self) -> crate::domain::messages::Sampling {
        crate::domain::messages::Sampling {
            temperature: self.temperature.map(|t| t as f32),
            top_p: self.top_p.map(|p| p as f32),
            seed: self.seed,
            stop: self.stop.clone().unwrap_or_default(),
        }
    }
}

/// Run limits (`limits:` in the actor file).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(
    deny_unknown_fields,
    rename_all(serialize = "snake_case", deserialize = "kebab-case")
)]
pub struct ActorLimits {
    /// Maximum model turns per run.
    #[serde(default, alias = "max_turns", skip_serializing_if = "Option::is_none")]
    pub max_turns: Option<u32>,
    /// Maximum tokens (input + output) per run.
    #[serde(default, alias = "max_tokens", skip_serializing_if = "Option::is_none")]
    pub max_tokens: Option<u64>,
}

/// A validated custom actor, as stored (`definition` column, JSON).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ActorDefinition {
    /// `llm` or `graph`.
    #[serde(rename = "type")]
    pub actor_type: ActorType,
    /// `<provider>/<model>`.
    pub model: Option<String>,
    /// What the actor is for.
    pub description: Option<String>,
    /// System prompt template.
    pub system_prompt: Option<String>,
    /// Skill names.
    pub skills: Vec<String>,
    /// Model options.
    pub options: ActorOptions,
    /// Run limits.
    pub limits: ActorLimits,
    /// May use unsafe tools.
    #[serde(rename = "unsafe")]
    pub unsafe_: bool,
    /// Graph description for `graph` actors (`crate::actors::graph::GraphDef` as JSON).
    pub graph: Option<serde_json::Value>,
    /// Conversation memory (`config.memory_enabled` / `config.max_history` of the spec's
    /// file shape).
    #[serde(default)]
    pub memory: ActorMemory,
}

/// How much of a loaded actor context the actor sees (spec section 16 `memory_enabled`,
/// `max_history`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ActorMemory {
    /// `false` when the file says `memory_enabled: false`: a loaded context is not shown to
    /// the model (the run is still saved to it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub enabled: Option<bool>,
    /// At most this many earlier messages of a loaded context are shown to the model.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_history: Option<u32>,
}

/// A registered custom actor.
#[derive(Debug, Clone, PartialEq, Serialize, serde::Deserialize, schemars::JsonSchema)]
pub struct Actor {
    /// Actor id (ULID).
    pub actor_id: String,
    /// Namespaced name.
    pub name: String,
    /// The definition.
    pub definition: ActorDefinition,
    /// The file it was registered from.
    pub config_path: Option<String>,
    /// FNV-1a 64-bit hash of the file's bytes, hex.
    pub config_hash: Option<String>,
    /// Registration time.
    pub created_at: jiff::Timestamp,
    /// Last replacement.
    pub updated_at: jiff::Timestamp,
}

/// What an actor reference resolved to.
#[derive(Debug, Clone, PartialEq, Serialize, serde::Deserialize, schemars::JsonSchema)]
#[serde(tag = "resolved_as", rename_all = "snake_case")]
pub enum ActorRef {
    /// A registered custom actor.
    Custom {
        /// The actor.
        actor: Box<Actor>,
    },
    /// An offline built-in actor.
    Builtin {
        /// `builtin/...`.
        name: String,
        /// What it does.
        description: String,
    },
    /// A provider's model.
    Provider {
        /// Full reference `<provider>/<model>`.
        name: String,
        /// Provider name.
        provider: String,
        /// Model name as the provider knows it.
        model: String,
        /// Wire protocol (`openai` or `anthropic`).
        kind: String,
        /// Base URL.
        base_url: String,
        /// Environment variable holding the key (the name, never the key).
        api_key_env: Option<String>,
    },
}

impl ActorRef {
    /// The canonical reference to store.
    pub fn name(&self) -> &str {
        match self {
            ActorRef::Custom { actor } => &actor.name,
            ActorRef::Builtin { name, .. } | ActorRef::Provider { name, .. } => name,
        }
    }

    /// `custom`, `built-in` or `provider`.
    pub fn kind_label(&self) -> &'static str {
        match self {
            ActorRef::Custom { .. } => "custom",
            ActorRef::Builtin { .. } => "built-in",
            ActorRef::Provider { .. } => "provider",
        }
    }
}
