//! Actors (spec section 16): who does the work. Custom actors are registered from YAML;
//! built-in actors need no registration.
//!
//! An actor reference (in an action, a project, a plan or the config) resolves when it is:
//! - a registered custom actor (`local/reviewer`; a bare name means `local/NAME`);
//! - one of the offline built-ins [`CHECKLIST_STRATEGIST`] and [`SCRIPT_EXECUTOR`];
//! - `<provider>/<model>` where the provider is built in (`openai`, `anthropic`) or configured
//!   under `[providers.NAME]`. Whether its API key is present is checked by `diagnostics` and
//!   when the actor runs, not here.

use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::config::Provider;
use crate::domain::name::{NameError, QualifiedName};
use crate::registry::template;
use crate::registry::yaml::{self, YamlError};
use crate::store::{Store, StoreError};

/// The offline strategist: turns the definition of done and script into a checklist.
pub const CHECKLIST_STRATEGIST: &str = "builtin/checklist-strategist";
/// The offline executor: runs an action's `script` steps.
pub const SCRIPT_EXECUTOR: &str = "builtin/script-executor";

/// The built-in deterministic actors: (name, role, description).
pub const BUILTIN_ACTORS: [(&str, &str, &str); 2] = [
    (
        CHECKLIST_STRATEGIST,
        "strategy",
        "Offline strategist: records the definition of done and the action's script as a checklist of decisions; no model calls",
    ),
    (
        SCRIPT_EXECUTOR,
        "execution",
        "Offline executor: runs the action's script steps (shell commands, tools, child plans) in the sandbox; no model calls",
    ),
];

/// The kind of a custom actor.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum ActorType {
    /// One model with a system prompt, skills and options.
    #[default]
    Llm,
    /// A graph of actors and tools (accepted and stored; running it is not yet supported).
    Graph,
}

impl ActorType {
    /// `llm` or `graph`.
    pub fn as_str(self) -> &'static str {
        match self {
            ActorType::Llm => "llm",
            ActorType::Graph => "graph",
        }
    }
}

/// Model options (`options:` in the actor file).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
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

/// Run limits (`limits:` in the actor file).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
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

/// An actor file as written (kebab-case keys; snake_case accepted).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct ActorFile {
    /// Namespaced name (optional when given on the command line).
    pub name: Option<String>,
    /// `llm` (default) or `graph`.
    #[serde(default, rename = "type")]
    pub actor_type: Option<ActorType>,
    /// `<provider>/<model>`; required for `llm` actors.
    pub model: Option<String>,
    /// What the actor is for.
    pub description: Option<String>,
    /// The system prompt (a minijinja template).
    #[serde(alias = "system_prompt")]
    pub system_prompt: Option<String>,
    /// Skills (namespaced names) whose tools the actor may call.
    #[serde(default)]
    pub skills: Vec<String>,
    /// Model options.
    #[serde(default)]
    pub options: ActorOptions,
    /// Run limits.
    #[serde(default)]
    pub limits: ActorLimits,
    /// Whether the actor may use tools marked unsafe.
    #[serde(default, rename = "unsafe")]
    pub unsafe_: bool,
    /// For `graph` actors: the graph description (stored as given).
    pub graph: Option<serde_json::Value>,
}

/// A validated custom actor, as stored (`definition` column, JSON).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
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
    /// Graph description for `graph` actors.
    pub graph: Option<serde_json::Value>,
}

/// A registered custom actor.
#[derive(Debug, Clone, PartialEq, Serialize)]
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
#[derive(Debug, Clone, PartialEq, Serialize)]
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

/// Errors from the actor registry.
#[derive(Debug, thiserror::Error)]
pub enum ActorError {
    /// The YAML file is unreadable or invalid.
    #[error(transparent)]
    Yaml(#[from] YamlError),
    /// Neither the file nor the command line names the actor.
    #[error("{0}: the actor has no name; add `name: local/NAME` to the file or pass NAME")]
    NoName(String),
    /// The name is invalid or in a reserved namespace.
    #[error("actor name `{name}`: {source}")]
    Name {
        /// The name as given.
        name: String,
        /// Why.
        source: NameError,
    },
    /// An actor of that name exists and `--update` was not given.
    #[error("actor {0} already exists")]
    Exists(String),
    /// A reference does not resolve.
    #[error("actor `{name}` does not resolve: {reason}")]
    Unresolved {
        /// The reference as given.
        name: String,
        /// Why (`no custom actor local/x is registered`, `unknown provider foo`).
        reason: String,
    },
    /// A built-in actor cannot be removed.
    #[error("`{0}` is a built-in actor and cannot be removed")]
    BuiltIn(String),
    /// A provider model is not a registered actor, so there is nothing to remove.
    #[error(
        "`{0}` names a model of a configured provider, not a registered actor; there is nothing to remove"
    )]
    ProviderModel(String),
    /// A skill given with `--skill` does not resolve (skills from the file are reported as
    /// YAML rule errors at their line).
    #[error("--skill {0}")]
    Skill(crate::skills::SkillError),
    /// A `--option key=value` override is not acceptable.
    #[error("--option `{0}`: {1}")]
    Option(String, String),
    /// The database failed.
    #[error(transparent)]
    Store(#[from] StoreError),
}

fn provider_names(providers: &[Provider]) -> Vec<String> {
    providers.iter().map(|p| p.name.clone()).collect()
}

/// Resolves an actor reference.
///
/// # Errors
/// [`ActorError::Unresolved`] naming the reason; store errors.
pub fn resolve(store: &Store, providers: &[Provider], input: &str) -> Result<ActorRef, ActorError> {
    let unresolved = |reason: String| ActorError::Unresolved {
        name: input.to_string(),
        reason,
    };
    if let Some((_, _, desc)) = BUILTIN_ACTORS.iter().find(|(n, ..)| *n == input) {
        return Ok(ActorRef::Builtin {
            name: input.to_string(),
            description: (*desc).to_string(),
        });
    }
    if let Some((ns, model)) = input.split_once('/') {
        if ns == "builtin" {
            return Err(unresolved(format!(
                "the built-in actors are {} and {}",
                CHECKLIST_STRATEGIST, SCRIPT_EXECUTOR
            )));
        }
        if let Some(p) = providers.iter().find(|p| p.name == ns) {
            // A custom actor registered before the provider was configured keeps its name.
            if let Some(actor) = store.actor(input)? {
                return Ok(ActorRef::Custom {
                    actor: Box::new(actor),
                });
            }
            if model.is_empty() || model.chars().any(char::is_whitespace) || model == "*" {
                return Err(unresolved(format!(
                    "`{model}` is not a model name; use {ns}/MODEL, e.g. {ns}/{}",
                    example_model(ns)
                )));
            }
            return Ok(ActorRef::Provider {
                name: input.to_string(),
                provider: p.name.clone(),
                model: model.to_string(),
                kind: p.kind.as_str().to_string(),
                base_url: p.base_url.clone(),
                api_key_env: p.api_key_env.clone(),
            });
        }
    }
    let qualified =
        QualifiedName::resolve_user_input(input, &[]).map_err(|e| unresolved(e.to_string()))?;
    let name = qualified.to_string();
    match store.actor(&name)? {
        Some(actor) => Ok(ActorRef::Custom {
            actor: Box::new(actor),
        }),
        None => {
            let mut names: Vec<String> = store.actors()?.into_iter().map(|a| a.name).collect();
            names.extend(BUILTIN_ACTORS.iter().map(|(n, ..)| (*n).to_string()));
            let near =
                crate::registry::lookup::Missing::near(input, names.iter().map(String::as_str));
            Err(unresolved(format!(
                "no custom actor {name} is registered, and `{}` is not a provider (providers: {}){}",
                qualified.namespace.as_deref().unwrap_or(""),
                provider_names(providers).join(", "),
                near.suggestion
                    .map(|s| format!("; did you mean `{s}`?"))
                    .unwrap_or_default()
            )))
        }
    }
}

fn example_model(provider: &str) -> &'static str {
    match provider {
        "anthropic" => "claude-sonnet-4-5",
        "openai" => "gpt-4o",
        _ => "llama3",
    }
}

/// The canonical form of an actor reference as stored: a bare name means `local/NAME`; other
/// references are kept as written.
pub fn canonical(input: &str) -> String {
    if input.contains('/') {
        input.to_string()
    } else {
        QualifiedName::resolve_user_input(input, &[])
            .map(|q| q.to_string())
            .unwrap_or_else(|_| input.to_string())
    }
}

/// FNV-1a 64-bit hash of bytes, as 16 hex digits (a stable fingerprint of a config file).
pub fn fingerprint(bytes: &[u8]) -> String {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in bytes {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    format!("{h:016x}")
}

/// Command-line overrides for `actor add`.
#[derive(Debug, Clone, Default)]
pub struct Overrides {
    /// `--type`.
    pub actor_type: Option<ActorType>,
    /// `--skill` (added to the file's skills).
    pub skills: Vec<String>,
    /// `--description`.
    pub description: Option<String>,
    /// `--unsafe`.
    pub unsafe_: bool,
    /// `--option key=value`, in order.
    pub options: Vec<(String, String)>,
}

/// What `add` did.
#[derive(Debug, Clone, Serialize)]
pub struct Added {
    /// The registered actor.
    pub actor: Actor,
    /// The previous definition when `--update` replaced one.
    pub previous: Option<ActorDefinition>,
}

fn apply_option(opts: &mut ActorOptions, key: &str, value: &str) -> Result<(), ActorError> {
    let bad = |m: &str| ActorError::Option(format!("{key}={value}"), m.to_string());
    match key.replace('_', "-").as_str() {
        "temperature" => {
            opts.temperature = Some(
                value
                    .parse()
                    .map_err(|_| bad("expected a number from 0 to 2"))?,
            )
        }
        "max-tokens" => {
            opts.max_tokens = Some(value.parse().map_err(|_| bad("expected a whole number"))?)
        }
        "top-p" => {
            opts.top_p = Some(
                value
                    .parse()
                    .map_err(|_| bad("expected a number from 0 to 1"))?,
            )
        }
        "seed" => opts.seed = Some(value.parse().map_err(|_| bad("expected a whole number"))?),
        "stop" => opts.stop = Some(value.split(',').map(str::to_string).collect()),
        _ => {
            return Err(bad(
                "known options: temperature, max-tokens, top-p, seed, stop",
            ));
        }
    }
    Ok(())
}

/// Registers a custom actor from `path`, with command-line overrides. Nothing is written when
/// anything is wrong.
///
/// # Errors
/// YAML errors (line, column, field), a missing or reserved name, an unresolvable model,
/// out-of-range options, [`ActorError::Exists`] without `update`.
pub fn add(
    store: &mut Store,
    providers: &[Provider],
    path: &Path,
    name_arg: Option<&str>,
    overrides: &Overrides,
    update: bool,
) -> Result<Added, ActorError> {
    let (file, text): (ActorFile, String) = yaml::load(path)?;
    let raw = name_arg
        .map(str::to_string)
        .or(file.name.clone())
        .ok_or_else(|| ActorError::NoName(path.display().to_string()))?;
    let name_err = |source| ActorError::Name {
        name: raw.clone(),
        source,
    };
    let qualified = QualifiedName::resolve_user_input(&raw, &[]).map_err(name_err)?;
    qualified
        .check_user_creatable(&provider_names(providers))
        .map_err(name_err)?;
    let name = qualified.to_string();
    let file_skills = file.skills.len();
    let mut def = ActorDefinition {
        actor_type: overrides.actor_type.or(file.actor_type).unwrap_or_default(),
        model: file.model,
        description: overrides.description.clone().or(file.description),
        system_prompt: file.system_prompt,
        skills: file.skills,
        options: file.options,
        limits: file.limits,
        unsafe_: file.unsafe_ || overrides.unsafe_,
        graph: file.graph,
    };
    for s in &overrides.skills {
        if !def.skills.contains(s) {
            def.skills.push(s.clone());
        }
    }
    for (k, v) in &overrides.options {
        apply_option(&mut def.options, k, v)?;
    }
    validate(&def, path, &text, providers, store, file_skills)?;
    let existing = store.actor(&name)?;
    if existing.is_some() && !update {
        return Err(ActorError::Exists(name));
    }
    let now = super::now();
    let actor = Actor {
        actor_id: existing
            .as_ref()
            .map(|a| a.actor_id.clone())
            .unwrap_or_else(|| crate::domain::Id::generate().to_string()),
        name,
        definition: def,
        config_path: Some(yaml::stored_path(path)),
        config_hash: Some(fingerprint(text.as_bytes())),
        created_at: existing.as_ref().map(|a| a.created_at).unwrap_or(now),
        updated_at: now,
    };
    store.upsert_actor(&actor)?;
    Ok(Added {
        actor,
        previous: existing.map(|a| a.definition),
    })
}

fn validate(
    def: &ActorDefinition,
    path: &Path,
    text: &str,
    providers: &[Provider],
    store: &Store,
    file_skills: usize,
) -> Result<(), ActorError> {
    let rule = |field: &str, key: &str, msg: String| {
        ActorError::Yaml(yaml::rule(path, text, field, key, msg))
    };
    match (&def.model, def.actor_type) {
        (None, ActorType::Llm) => {
            return Err(rule(
                "model",
                "type",
                "an llm actor needs `model: <provider>/<model>`, e.g. `model: openai/gpt-4o`"
                    .into(),
            ));
        }
        (Some(m), _) => match resolve(store, providers, m) {
            Ok(ActorRef::Provider { .. }) => {}
            Ok(_) => {
                return Err(rule(
                    "model",
                    "model",
                    format!(
                        "`{m}` is not a provider model; use <provider>/<model> with a provider from: {}",
                        provider_names(providers).join(", ")
                    ),
                ));
            }
            Err(e) => {
                let message = match m.split_once('/') {
                    None => format!(
                        "`{m}` is missing the provider/ part; use <provider>/<model>, e.g. anthropic/claude-sonnet-4-5 or openai/gpt-4o (providers: {})",
                        provider_names(providers).join(", ")
                    ),
                    Some((ns, _)) if providers.iter().any(|p| p.name == ns) => match e {
                        ActorError::Unresolved { reason, .. } => format!("`{m}`: {reason}"),
                        other => other.to_string(),
                    },
                    Some((ns, _)) => format!(
                        "`{m}`: unknown provider `{ns}`; use one of: {} (configure more with `agents config set providers.{ns}.kind openai`)",
                        provider_names(providers).join(", ")
                    ),
                };
                return Err(rule("model", "model", message));
            }
        },
        (None, ActorType::Graph) => {}
    }
    if let Some(t) = def.options.temperature
        && !(0.0..=2.0).contains(&t)
    {
        return Err(rule(
            "options.temperature",
            "temperature",
            format!("{t} is out of range; use 0 to 2"),
        ));
    }
    if let Some(t) = def.options.top_p
        && !(0.0..=1.0).contains(&t)
    {
        return Err(rule(
            "options.top-p",
            "top-p",
            format!("{t} is out of range; use 0 to 1"),
        ));
    }
    if def.options.max_tokens == Some(0) {
        return Err(rule(
            "options.max-tokens",
            "max-tokens",
            "must be at least 1".into(),
        ));
    }
    // Skills from the file are reported at their line; those added with `--skill` by flag.
    for (i, s) in def.skills.iter().enumerate() {
        // A registered custom skill is as good as a built-in one (spec 19).
        let custom = s.contains('/') && crate::skill_registry::resolve(store, s).is_ok();
        if let Err(e) = crate::skills::lookup(s)
            && !custom
        {
            return Err(if i < file_skills {
                rule(&format!("skills[{i}]"), "skills", e.to_string())
            } else {
                ActorError::Skill(e)
            });
        }
    }
    if let Some(p) = &def.system_prompt
        && let Err(template::TemplateError::Syntax(e)) = template::check(p, &[])
    {
        return Err(rule("system-prompt", "system-prompt", e));
    }
    Ok(())
}

/// Who still refers to an actor.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Impact {
    /// Actions naming it as one of their actors.
    pub actions: Vec<String>,
    /// Projects using it as invariant actor.
    pub projects: Vec<String>,
    /// Plans that are not finished and use it.
    pub active_plans: Vec<String>,
}

/// Removes a custom actor and reports who referred to it (they fail to resolve until fixed).
///
/// # Errors
/// [`ActorError::BuiltIn`], [`ActorError::Unresolved`] when no such actor, store errors.
pub fn remove(
    store: &mut Store,
    providers: &[Provider],
    input: &str,
) -> Result<(Actor, Impact), ActorError> {
    match resolve(store, providers, input)? {
        ActorRef::Custom { actor } => {
            let impact = Impact {
                actions: store.actions_referencing_actor(&actor.name)?,
                projects: store.projects_with_invariant_actor(&actor.name)?,
                active_plans: store
                    .plans()?
                    .into_iter()
                    .filter(|p| {
                        p.phase() != crate::domain::Phase::Applied
                            && p.state() != crate::domain::ProcessingState::Cancelled
                            && [
                                &p.strategy_actor,
                                &p.execution_actor,
                                &p.estimation_actor,
                                &p.invariant_actor,
                            ]
                            .iter()
                            .any(|a| a.as_deref() == Some(actor.name.as_str()))
                    })
                    .map(|p| p.plan_id.to_string())
                    .collect(),
            };
            store.delete_actor(&actor.name)?;
            Ok((*actor, impact))
        }
        ActorRef::Provider { name, .. } => Err(ActorError::ProviderModel(name)),
        other => Err(ActorError::BuiltIn(other.name().to_string())),
    }
}

/// One row of `actor list`.
#[derive(Debug, Clone, Serialize)]
pub struct ActorRow {
    /// Name (`local/x`, `builtin/...`, `openai/*`).
    pub name: String,
    /// `custom`, `built-in` or `provider`.
    pub kind: String,
    /// `llm`, `graph`, `offline` (built-ins) or `provider`.
    pub actor_type: String,
    /// Provider name, if any.
    pub provider: Option<String>,
    /// Model, or `*` for every model of a provider.
    pub model: Option<String>,
    /// Whether it is built in.
    pub builtin: bool,
    /// Whether it may use unsafe tools.
    #[serde(rename = "unsafe")]
    pub unsafe_: bool,
    /// Description.
    pub description: Option<String>,
}

/// Custom actors, the two built-ins, and one `<provider>/*` row per provider.
///
/// # Errors
/// Store errors.
pub fn list(store: &Store, providers: &[Provider]) -> Result<Vec<ActorRow>, ActorError> {
    let mut rows: Vec<ActorRow> = store
        .actors()?
        .into_iter()
        .map(|a| {
            let (provider, model) = a
                .definition
                .model
                .as_deref()
                .and_then(|m| m.split_once('/'))
                .map(|(p, m)| (Some(p.to_string()), Some(m.to_string())))
                .unwrap_or((None, None));
            ActorRow {
                name: a.name,
                kind: "custom".into(),
                actor_type: a.definition.actor_type.as_str().into(),
                provider,
                model,
                builtin: false,
                unsafe_: a.definition.unsafe_,
                description: a.definition.description,
            }
        })
        .collect();
    for (name, _, desc) in BUILTIN_ACTORS {
        rows.push(ActorRow {
            name: name.into(),
            kind: "built-in".into(),
            actor_type: "offline".into(),
            provider: None,
            model: None,
            builtin: true,
            unsafe_: false,
            description: Some(desc.into()),
        });
    }
    for p in providers {
        rows.push(ActorRow {
            name: format!("{}/*", p.name),
            kind: "provider".into(),
            actor_type: "provider".into(),
            provider: Some(p.name.clone()),
            model: Some("*".into()),
            builtin: p.builtin,
            unsafe_: false,
            description: Some(format!(
                "any model served by {} ({} API at {})",
                p.name,
                p.kind.as_str(),
                p.base_url
            )),
        });
    }
    Ok(rows)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;

    fn setup() -> (tempfile::TempDir, Store, Vec<Provider>) {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("db")).unwrap();
        (dir, store, Config::default().providers())
    }

    #[test]
    fn references_resolve_to_builtins_providers_and_custom_actors() {
        let (dir, mut store, providers) = setup();
        assert!(matches!(
            resolve(&store, &providers, SCRIPT_EXECUTOR).unwrap(),
            ActorRef::Builtin { .. }
        ));
        assert!(matches!(
            resolve(&store, &providers, "openai/gpt-4o").unwrap(),
            ActorRef::Provider { .. }
        ));
        assert!(
            resolve(&store, &providers, "ollama/llama3").is_err(),
            "unconfigured provider"
        );
        assert!(resolve(&store, &providers, "builtin/nope").is_err());
        assert!(resolve(&store, &providers, "reviewer").is_err());
        let file = dir.path().join("a.yaml");
        std::fs::write(
            &file,
            "name: reviewer\nmodel: anthropic/claude-sonnet-4-5\noptions: {temperature: 0.2}\n",
        )
        .unwrap();
        add(
            &mut store,
            &providers,
            &file,
            None,
            &Overrides::default(),
            false,
        )
        .unwrap();
        let r = resolve(&store, &providers, "reviewer").unwrap();
        assert_eq!(r.name(), "local/reviewer");
    }

    #[test]
    fn duplicates_need_update_and_reserved_namespaces_are_refused() {
        let (dir, mut store, providers) = setup();
        let file = dir.path().join("a.yaml");
        std::fs::write(&file, "name: local/x\nmodel: openai/gpt-4o\n").unwrap();
        add(
            &mut store,
            &providers,
            &file,
            None,
            &Overrides::default(),
            false,
        )
        .unwrap();
        assert!(matches!(
            add(
                &mut store,
                &providers,
                &file,
                None,
                &Overrides::default(),
                false
            ),
            Err(ActorError::Exists(_))
        ));
        let again = add(
            &mut store,
            &providers,
            &file,
            None,
            &Overrides {
                skills: vec!["git_operations".into()],
                ..Default::default()
            },
            true,
        )
        .unwrap();
        assert!(again.previous.is_some());
        assert_eq!(again.actor.definition.skills, ["git_operations"]);
        for reserved in ["openai/mine", "builtin/mine", "anthropic/x"] {
            assert!(matches!(
                add(
                    &mut store,
                    &providers,
                    &file,
                    Some(reserved),
                    &Overrides::default(),
                    false
                ),
                Err(ActorError::Name { .. })
            ));
        }
    }

    #[test]
    fn an_llm_actor_needs_a_known_provider_model() {
        let (dir, mut store, providers) = setup();
        let file = dir.path().join("a.yaml");
        std::fs::write(&file, "name: x\ntype: llm\nmodel: nope/m\n").unwrap();
        let e = add(
            &mut store,
            &providers,
            &file,
            None,
            &Overrides::default(),
            false,
        )
        .unwrap_err();
        assert!(e.to_string().contains("unknown provider `nope`"), "{e}");
        // A known provider without a model, and a model without a provider, say so.
        for (model, wanted) in [
            ("anthropic/", "is not a model name"),
            ("claude", "missing the provider/ part"),
        ] {
            std::fs::write(&file, format!("name: x\ntype: llm\nmodel: \"{model}\"\n")).unwrap();
            let e = add(
                &mut store,
                &providers,
                &file,
                None,
                &Overrides::default(),
                false,
            )
            .unwrap_err()
            .to_string();
            assert!(e.contains(wanted), "{model}: {e}");
            assert!(!e.contains("unknown provider"), "{model}: {e}");
        }
        assert!(e.to_string().contains("a.yaml:3"), "{e}");
        std::fs::write(&file, "name: x\ntype: graph\ngraph: {nodes: []}\n").unwrap();
        add(
            &mut store,
            &providers,
            &file,
            None,
            &Overrides::default(),
            false,
        )
        .unwrap();
    }
    #[test]
    fn unknown_skills_are_refused_naming_the_field_or_flag_and_nothing_is_saved() {
        let (dir, mut store, providers) = setup();
        let file = dir.path().join("a.yaml");
        std::fs::write(
            &file,
            "name: local/x\nmodel: openai/gpt-4o\nskills:\n  - file_operations\n  - git-ops\n",
        )
        .unwrap();
        let err = add(
            &mut store,
            &providers,
            &file,
            None,
            &Overrides::default(),
            false,
        )
        .unwrap_err();
        let text = err.to_string();
        assert!(text.contains("skills[1]"), "{text}");
        assert!(text.contains(":5"), "{text}");
        assert!(text.contains("did you mean `git_operations`?"), "{text}");
        assert!(store.actor("local/x").unwrap().is_none());

        std::fs::write(
            &file,
            "name: local/x\nmodel: openai/gpt-4o\nskills: [shell]\n",
        )
        .unwrap();
        let err = add(
            &mut store,
            &providers,
            &file,
            None,
            &Overrides {
                skills: vec!["local/searching".into()],
                ..Default::default()
            },
            false,
        )
        .unwrap_err();
        assert!(matches!(err, ActorError::Skill(_)), "{err:?}");
        let text = err.to_string();
        assert!(
            text.starts_with("--skill unknown skill `local/searching`"),
            "{text}"
        );
        assert!(store.actor("local/x").unwrap().is_none());
    }
}
