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

use crate::actors::graph::{self, GraphDef, NodeKind};
use crate::config::Provider;
pub use crate::domain::actor::{
    Actor, ActorDefinition, ActorLimits, ActorMemory, ActorOptions, ActorRef, ActorType,
};
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

impl ActorType {
    /// `llm` or `graph`.
    pub fn as_str(self) -> &'static str {
        match self {
            ActorType::Llm => "llm",
            ActorType::Graph => "graph",
        }
    }
}

/// An actor file as written (kebab-case keys; snake_case accepted).
#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
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
    /// For `graph` actors: the graph ([`GraphDef`]).
    pub graph: Option<GraphDef>,
    /// The spec's `config:` block (spec section 16): `actor` (a provider model),
    /// `temperature`, `system_prompt`, `max_tokens`, `top_p`, `memory_enabled`,
    /// `max_history`.
    pub config: Option<SpecConfig>,
}

/// The `config:` block of an actor in the spec's file shape.
#[derive(Debug, Clone, Default, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "snake_case")]
pub struct SpecConfig {
    /// The provider model the actor runs on (`openai/gpt-4`).
    #[serde(alias = "model")]
    pub actor: Option<String>,
    /// Sampling temperature.
    pub temperature: Option<f64>,
    /// The system prompt template.
    #[serde(alias = "system-prompt")]
    pub system_prompt: Option<String>,
    /// Completion token cap.
    #[serde(alias = "max-tokens")]
    pub max_tokens: Option<u32>,
    /// Nucleus sampling.
    #[serde(alias = "top-p")]
    pub top_p: Option<f64>,
    /// Whether a loaded actor context is shown to the model.
    #[serde(alias = "memory-enabled")]
    pub memory_enabled: Option<bool>,
    /// At most this many messages of a loaded context are shown.
    #[serde(alias = "max-history")]
    pub max_history: Option<u32>,
}

/// The header of the spec's file shape.
#[derive(Debug, Clone, Default, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "snake_case")]
pub struct SpecHeader {
    /// Format version (`"3.0"`).
    #[schemars(with = "Option<serde_json::Value>")]
    pub version: Option<serde_yaml::Value>,
    /// The actor `actor add` registers when no NAME is given.
    #[serde(alias = "default-actor")]
    pub default_actor: Option<String>,
}

/// The spec's actor file shape (spec section 16): `cleveragents: {version, default_actor}`,
/// `actors: {KEY: actor}`, `routes: {KEY: graph}`, `context: {global: {...}}`.
#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SpecFile {
    /// The header.
    #[serde(default)]
    pub cleveragents: SpecHeader,
    /// Actors by key (the key is the actor's name; a bare key means `local/KEY`).
    #[serde(default)]
    pub actors: std::collections::BTreeMap<String, ActorFile>,
    /// Graphs by key, each registered as a graph actor of that name.
    #[serde(default)]
    pub routes: std::collections::BTreeMap<String, GraphDef>,
    /// Global template values (read; see `docs/decisions.md`).
    #[serde(default)]
    #[schemars(with = "Option<serde_json::Value>")]
    pub context: Option<serde_yaml::Value>,
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
#[derive(Debug, Clone, Default, serde::Serialize, serde::Deserialize, schemars::JsonSchema)]
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
#[derive(Debug, Clone, Serialize, serde::Deserialize, schemars::JsonSchema)]
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
    add_given(store, providers, (path, None), name_arg, overrides, update)
}

/// [`add`] of the file `path` whose text was read elsewhere (`Some`: on a client, sent to a
/// server), or read here (`None`).
///
/// # Errors
/// As [`add`].
pub fn add_given(
    store: &mut Store,
    providers: &[Provider],
    (path, given): (&Path, Option<&str>),
    name_arg: Option<&str>,
    overrides: &Overrides,
    update: bool,
) -> Result<Added, ActorError> {
    let (loaded, text) = load_file(path, given, name_arg)?;
    let Loaded {
        file,
        prefix,
        graph_prefix,
    } = loaded;
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
    let src = Source {
        path,
        text: &text,
        prefix: &prefix,
        graph_prefix: &graph_prefix,
    };
    let file_skills = file.skills.len();
    let mut def = definition(file, overrides, &src)?;
    for s in &overrides.skills {
        if !def.skills.contains(s) {
            def.skills.push(s.clone());
        }
    }
    for (k, v) in &overrides.options {
        apply_option(&mut def.options, k, v)?;
    }
    validate(&def, &src, providers, store, file_skills)?;
    validate_graph(&def, &name, &src, providers, store)?;
    // A bare skill name that is no built-in means `local/NAME`: stored qualified, so every
    // later reader sees a custom skill where there is one.
    for s in &mut def.skills {
        if !s.contains('/') && crate::skills::lookup(s).is_err() {
            *s = format!("{}/{s}", crate::domain::name::LOCAL_NAMESPACE);
        }
    }
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

/// Where a definition came from, for errors at their line: the file, its text, and the
/// field prefix of the actor inside it (`actors.reviewer.` in the spec's file shape).
struct Source<'a> {
    path: &'a Path,
    text: &'a str,
    prefix: &'a str,
    graph_prefix: &'a str,
}

impl Source<'_> {
    fn rule(&self, field: &str, key: &str, msg: impl Into<String>) -> ActorError {
        ActorError::Yaml(yaml::rule(
            self.path,
            self.text,
            &format!("{}{field}", self.prefix),
            key,
            msg,
        ))
    }

    fn graph_rule(&self, field: &str, key: &str, msg: impl Into<String>) -> ActorError {
        ActorError::Yaml(yaml::rule(
            self.path,
            self.text,
            &format!("{}{field}", self.graph_prefix),
            key,
            msg,
        ))
    }
}

/// One actor read from a file, and its field prefix in the file.
struct Loaded {
    file: ActorFile,
    prefix: String,
    graph_prefix: String,
}

/// Reads an actor file of either shape: today's flat one (`name:`, `model:`, ...) or the
/// spec's (`cleveragents:`, `actors:`, `routes:`), choosing the entry named `name_arg`, else
/// `default_actor`, else the only entry.
fn load_file(
    path: &Path,
    given: Option<&str>,
    name_arg: Option<&str>,
) -> Result<(Loaded, String), ActorError> {
    let (probe, text): (serde_yaml::Value, String) = yaml::load_given(path, given)?;
    let spec_shape = probe.as_mapping().is_some_and(|m| {
        ["cleveragents", "actors", "routes"]
            .iter()
            .any(|k| m.contains_key(*k))
    });
    if !spec_shape {
        let file: ActorFile = yaml::parse(path, &text)?;
        return Ok((
            Loaded {
                file,
                prefix: String::new(),
                graph_prefix: "graph.".into(),
            },
            text,
        ));
    }
    let spec: SpecFile = yaml::parse(path, &text)?;
    let keys: Vec<&String> = spec.actors.keys().chain(spec.routes.keys()).collect();
    let wanted = name_arg
        .map(str::to_string)
        .or(spec.cleveragents.default_actor.clone());
    let matches = |key: &str, w: &str| key == w || canonical(key) == canonical(w);
    let key = match &wanted {
        Some(w) => keys.iter().find(|k| matches(k, w)).map(|k| k.to_string()),
        None if keys.len() == 1 => Some(keys[0].clone()),
        None => None,
    };
    let Some(key) = key else {
        let listed = keys
            .iter()
            .map(|k| k.as_str())
            .collect::<Vec<_>>()
            .join(", ");
        let message = match &wanted {
            Some(w) => format!("the file defines no actor or route `{w}`; it defines: {listed}"),
            None => format!(
                "the file defines several actors and routes ({listed}) and no `cleveragents.default_actor`; pass the NAME of the one to register"
            ),
        };
        return Err(ActorError::Yaml(yaml::rule(
            path, &text, "actors", "actors", message,
        )));
    };
    let (mut file, prefix) = match spec.actors.get(&key) {
        Some(a) => (a.clone(), format!("actors.{key}.")),
        None => (
            ActorFile {
                name: None,
                actor_type: Some(ActorType::Graph),
                model: None,
                description: None,
                system_prompt: None,
                skills: Vec::new(),
                options: ActorOptions::default(),
                limits: ActorLimits::default(),
                unsafe_: false,
                graph: spec.routes.get(&key).cloned(),
                config: None,
            },
            format!("routes.{key}."),
        ),
    };
    let graph_prefix = if spec.actors.contains_key(&key) {
        format!("{prefix}graph.")
    } else {
        prefix.clone()
    };
    file.name = file.name.or(Some(key));
    Ok((
        Loaded {
            file,
            prefix,
            graph_prefix,
        },
        text,
    ))
}

/// The definition of a file entry with its `config:` block and the command-line type and
/// description applied.
fn definition(
    file: ActorFile,
    overrides: &Overrides,
    src: &Source<'_>,
) -> Result<ActorDefinition, ActorError> {
    let mut def = ActorDefinition {
        actor_type: overrides
            .actor_type
            .or(file.actor_type)
            .unwrap_or(if file.graph.is_some() {
                ActorType::Graph
            } else {
                ActorType::Llm
            }),
        model: file.model,
        description: overrides.description.clone().or(file.description),
        system_prompt: file.system_prompt,
        skills: file.skills,
        options: file.options,
        limits: file.limits,
        unsafe_: file.unsafe_ || overrides.unsafe_,
        graph: file
            .graph
            .map(|g| serde_json::to_value(g).expect("a graph serializes")),
        memory: ActorMemory::default(),
    };
    if let Some(c) = file.config {
        if let Some(a) = c.actor {
            if def.model.is_some() {
                return Err(src.rule(
                    "config.actor",
                    "actor",
                    "give the model once: `model:` or `config.actor:`",
                ));
            }
            def.model = Some(a);
        }
        def.options.temperature = c.temperature.or(def.options.temperature);
        def.options.max_tokens = c.max_tokens.or(def.options.max_tokens);
        def.options.top_p = c.top_p.or(def.options.top_p);
        def.system_prompt = c.system_prompt.or(def.system_prompt);
        def.memory = ActorMemory {
            enabled: c.memory_enabled,
            max_history: c.max_history,
        };
    }
    Ok(def)
}

/// Why `m` is not a usable provider model for an llm actor, or `None` when it is.
fn model_problem(store: &Store, providers: &[Provider], m: &str) -> Option<String> {
    match resolve(store, providers, m) {
        Ok(ActorRef::Provider { .. }) => None,
        Ok(_) => Some(format!(
            "`{m}` is not a provider model; use <provider>/<model> with a provider from: {}",
            provider_names(providers).join(", ")
        )),
        Err(e) => Some(match m.split_once('/') {
            None => format!(
                "`{m}` is missing the provider/ part; use <provider>/<model>, e.g. anthropic/claude-sonnet-4-5 or openai/gpt-4o (providers: {})",
                provider_names(providers).join(", ")
            ),
            Some((ns, _)) if providers.iter().any(|p| p.name == ns) => match e {
                ActorError::Unresolved { reason, .. } => format!("`{m}`: {reason}"),
                other => other.to_string(),
            },
            Some((ns, _)) => format!(
                // A command inside a sentence stays (D-commands-2): it explains the error rather than suggesting the next step.
                "`{m}`: unknown provider `{ns}`; use one of: {} (configure more with `agents config set providers.{ns}.kind openai`)",
                provider_names(providers).join(", ")
            ),
        }),
    }
}

/// Why skill `s` does not resolve (built-in or registered), or `None`.
fn skill_problem(store: &Store, s: &str) -> Option<crate::skills::SkillError> {
    // A registered custom skill is as good as a built-in one (spec 19).
    let custom = crate::skill_registry::resolve(store, s).is_ok();
    match crate::skills::lookup(s) {
        Err(e) if !custom => Some(e),
        _ => None,
    }
}

fn validate(
    def: &ActorDefinition,
    src: &Source<'_>,
    providers: &[Provider],
    store: &Store,
    file_skills: usize,
) -> Result<(), ActorError> {
    let rule = |field: &str, key: &str, msg: String| src.rule(field, key, msg);
    match (&def.model, def.actor_type) {
        (None, ActorType::Llm) => {
            return Err(rule(
                "model",
                "type",
                "an llm actor needs `model: <provider>/<model>`, e.g. `model: openai/gpt-4o`"
                    .into(),
            ));
        }
        (Some(m), _) => {
            if let Some(message) = model_problem(store, providers, m) {
                return Err(rule("model", "model", message));
            }
        }
        (None, ActorType::Graph) => {}
    }
    check_options(&def.options, "options.", &rule)?;
    // Skills from the file are reported at their line; those added with `--skill` by flag.
    for (i, s) in def.skills.iter().enumerate() {
        if let Some(e) = skill_problem(store, s) {
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
    if def.actor_type == ActorType::Llm && def.graph.is_some() {
        return Err(rule(
            "graph",
            "graph",
            "an llm actor has no graph; use `type: graph`".into(),
        ));
    }
    if def.actor_type == ActorType::Graph && def.graph.is_none() {
        return Err(rule(
            "graph",
            "type",
            "a graph actor needs `graph:` with nodes and edges (see `docs/actors.md`)".into(),
        ));
    }
    Ok(())
}

fn check_options(
    options: &ActorOptions,
    at: &str,
    rule: &dyn Fn(&str, &str, String) -> ActorError,
) -> Result<(), ActorError> {
    if let Some(t) = options.temperature
        && !(0.0..=2.0).contains(&t)
    {
        return Err(rule(
            &format!("{at}temperature"),
            "temperature",
            format!("{t} is out of range; use 0 to 2"),
        ));
    }
    if let Some(t) = options.top_p
        && !(0.0..=1.0).contains(&t)
    {
        return Err(rule(
            &format!("{at}top-p"),
            "top-p",
            format!("{t} is out of range; use 0 to 1"),
        ));
    }
    if options.max_tokens == Some(0) {
        return Err(rule(
            &format!("{at}max-tokens"),
            "max-tokens",
            "must be at least 1".into(),
        ));
    }
    Ok(())
}

/// Checks a graph actor's graph: its structure ([`graph::check`]), then what its nodes name:
/// llm nodes a provider model, options in range, skills that resolve and prompts that parse;
/// tool nodes a built-in or registered tool; actor nodes a registered actor (loaded before
/// this one, spec 16 "Load order matters") or a provider model, never this actor itself.
fn validate_graph(
    def: &ActorDefinition,
    name: &str,
    src: &Source<'_>,
    providers: &[Provider],
    store: &Store,
) -> Result<(), ActorError> {
    let Some(value) = &def.graph else {
        return Ok(());
    };
    let g = GraphDef::from_value(value).map_err(|m| src.graph_rule("", "graph", m))?;
    graph::check(&g).map_err(|p| src.graph_rule(&p.field, &p.key, p.message))?;
    let rule = |field: &str, key: &str, msg: String| src.graph_rule(field, key, msg);
    for (i, n) in g.nodes.iter().enumerate() {
        let at = |f: &str| format!("nodes[{i}].{f}");
        match n.kind {
            NodeKind::Llm => {
                let m = n.model.as_deref().unwrap_or_default();
                if let Some(message) = model_problem(store, providers, m) {
                    return Err(rule(&at("model"), "model", message));
                }
                check_options(&n.options, &at("options."), &rule)?;
                for (j, s) in n.skills.iter().enumerate() {
                    if let Some(e) = skill_problem(store, s) {
                        return Err(rule(&at(&format!("skills[{j}]")), "skills", e.to_string()));
                    }
                }
            }
            NodeKind::Tool if n.anonymous => {}
            NodeKind::Tool => {
                let t = n.tool.as_deref().unwrap_or_default();
                let known = crate::tools::builtin(t).is_some()
                    || store.registered_tool::<serde_json::Value>(t)?.is_some();
                if !known {
                    return Err(rule(
                        &at("tool"),
                        "tool",
                        format!(
                            // A command inside a sentence stays (D-commands-2): it explains the error rather than suggesting the next step.
                            "no tool `{t}`: name a built-in tool (`agents tool list`) or register it first with `agents tool add`"
                        ),
                    ));
                }
            }
            NodeKind::Actor => {
                let a = n.actor.as_deref().unwrap_or_default();
                if canonical(a) == name {
                    return Err(rule(
                        &at("actor"),
                        "actor",
                        format!(
                            "node `{}` names this actor itself; a graph cannot run inside itself",
                            n.name
                        ),
                    ));
                }
                match resolve(store, providers, a) {
                    Ok(ActorRef::Builtin { name, .. }) => {
                        return Err(rule(
                            &at("actor"),
                            "actor",
                            format!(
                                "{name} is an offline built-in actor; a node runs a model actor, a graph actor or a tool"
                            ),
                        ));
                    }
                    Ok(_) => {}
                    Err(e) => {
                        return Err(rule(
                            &at("actor"),
                            "actor",
                            format!(
                                "{e}; register the actors a graph names before the graph (spec: load order matters)"
                            ),
                        ));
                    }
                }
            }
        }
        for (field, template) in [("system-prompt", &n.system_prompt), ("prompt", &n.prompt)] {
            if let Some(p) = template
                && let Err(template::TemplateError::Syntax(e)) = template::check(p, &[])
            {
                return Err(rule(&at(field), field, e));
            }
        }
    }
    Ok(())
}

/// Who still refers to an actor.
#[derive(Debug, Clone, Default, Serialize, serde::Deserialize, schemars::JsonSchema)]
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
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
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
        assert!(
            e.contains("graph.nodes") && e.contains("at least one node"),
            "{e}"
        );
        std::fs::write(
            &file,
            "name: x\ntype: graph\ngraph: {nodes: [{name: a, type: llm, model: openai/gpt-4o}]}\n",
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

    fn add_file(
        store: &mut Store,
        providers: &[Provider],
        file: &Path,
        name: Option<&str>,
    ) -> Result<Added, ActorError> {
        add(store, providers, file, name, &Overrides::default(), false)
    }

    #[test]
    fn graph_actors_are_checked_at_add_naming_the_cycle_the_node_and_the_line() {
        let (dir, mut store, providers) = setup();
        let file = dir.path().join("g.yaml");
        let graph = "name: local/loop\ntype: graph\ngraph:\n  nodes:\n    - {name: draft, type: llm, model: openai/gpt-4o}\n    - {name: notes, type: tool, tool: read_file, args: {path: NOTES.md}}\n    - {name: review, type: llm, model: anthropic/claude-sonnet-4-5}\n  edges:\n    - {source: start, target: draft}\n    - {source: draft, target: notes}\n    - {source: notes, target: review}\n    - {source: review, target: draft, when: {contains: REVISE}}\n    - {source: review, target: end}\n";
        std::fs::write(&file, graph).unwrap();
        let e = add_file(&mut store, &providers, &file, None)
            .unwrap_err()
            .to_string();
        assert!(e.contains("draft -> notes -> review -> draft"), "{e}");
        assert!(e.contains("max-steps"), "{e}");
        assert!(e.contains("g.yaml:8"), "{e}");
        std::fs::write(&file, format!("{graph}  limits: {{max-steps: 9}}\n")).unwrap();
        let added = add_file(&mut store, &providers, &file, None).unwrap();
        assert_eq!(added.actor.definition.actor_type, ActorType::Graph);

        let bad_tool = graph.replace("tool: read_file", "tool: local/nope");
        std::fs::write(&file, format!("{bad_tool}  limits: {{max-steps: 9}}\n")).unwrap();
        let e = add_file(&mut store, &providers, &file, Some("local/other"))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("graph.nodes[1].tool") && e.contains("no tool `local/nope`"),
            "{e}"
        );

        let actor_node = "name: local/outer\ntype: graph\ngraph:\n  nodes:\n    - {name: inner, type: actor, actor: local/missing}\n";
        std::fs::write(&file, actor_node).unwrap();
        let e = add_file(&mut store, &providers, &file, None)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("graph.nodes[0].actor") && e.contains("load order"),
            "{e}"
        );
        std::fs::write(&file, actor_node.replace("local/missing", "local/loop")).unwrap();
        add_file(&mut store, &providers, &file, None).unwrap();
        std::fs::write(&file, actor_node.replace("local/missing", "local/outer")).unwrap();
        let e = add_file(&mut store, &providers, &file, None)
            .unwrap_err()
            .to_string();
        assert!(e.contains("inside itself"), "{e}");
    }

    #[test]
    fn the_spec_file_shape_registers_an_actor_or_a_route_by_key() {
        let (dir, mut store, providers) = setup();
        let file = dir.path().join("spec.yaml");
        std::fs::write(
            &file,
            "cleveragents:\n  version: \"3.0\"\n  default_actor: my_assistant\nactors:\n  my_assistant:\n    type: llm\n    config:\n      actor: openai/gpt-4o\n      temperature: 0.7\n      system_prompt: \"Task: {{ context.task_description }}\"\n      max_history: 4\n    skills: [file_operations]\nroutes:\n  main_workflow:\n    type: graph\n    entry_point: start\n    nodes:\n      - {name: analyze, type: agent, agent: my_assistant}\n    edges:\n      - {source: start, target: analyze}\n      - {source: analyze, target: end}\ncontext:\n  global: {task_description: Default task}\n",
        )
        .unwrap();
        let e = add_file(&mut store, &providers, &file, Some("main_workflow"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("routes.main_workflow.nodes[0].actor"), "{e}");
        let a = add_file(&mut store, &providers, &file, None).unwrap().actor;
        assert_eq!(a.name, "local/my_assistant");
        assert_eq!(a.definition.model.as_deref(), Some("openai/gpt-4o"));
        assert_eq!(a.definition.options.temperature, Some(0.7));
        assert_eq!(a.definition.memory.max_history, Some(4));
        let g = add_file(&mut store, &providers, &file, Some("main_workflow"))
            .unwrap()
            .actor;
        assert_eq!(g.name, "local/main_workflow");
        assert_eq!(g.definition.actor_type, ActorType::Graph);
        let e = add_file(&mut store, &providers, &file, Some("nope"))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("defines no actor or route `nope`") && e.contains("main_workflow"),
            "{e}"
        );
    }
}
