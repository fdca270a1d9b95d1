//! What `session create|delete|export|import|tell` change (spec sections 06, 19 and 21): the
//! engine does the work where the data is, and the face renders the views. Through a server
//! the server runs the orchestrator's model calls with its own configuration and keys, and its
//! `agents` commands on its own data; the face reads and writes the export file.

use std::sync::{Arc, Mutex};

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::Session;
use crate::actors::providers::ClientOptions;
use crate::actors::runtime::{ActorEvent, Stop};
use crate::api::{ApiError, Engine};
use crate::session::orchestrator::{self, Tell, TellError};
use crate::session::tools::{CommandResult, Commands};
use crate::session::{self as sessions, DEFAULT_ACTOR, export};

/// What `session create` made.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct SessionCreated {
    /// The new session.
    pub session: Session,
    /// Whether its automation profile applies without review.
    pub auto_apply: bool,
    /// Its orchestrator actor.
    pub actor: ActorShown,
}

/// A session's orchestrator actor as `session create` shows it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ActorShown {
    /// The actor as named.
    pub name: String,
    /// `PROVIDER/MODEL`; `None` when no model is configured yet (the default actor only).
    pub model: Option<String>,
    /// Why no model is there yet.
    pub unavailable: Option<String>,
    /// Whether it runs with the built-in orchestrator prompt.
    pub builtin_prompt: bool,
}

/// What `session delete` removed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct SessionDeleted {
    /// The session's id.
    pub session_id: String,
    /// Messages removed.
    pub messages_removed: usize,
    /// Plans no longer linked (they stay).
    pub plans_unlinked: usize,
    /// Whether the session's action files were removed.
    pub files_removed: bool,
    /// Bytes of message text freed.
    pub bytes: u64,
}

/// A session as `session export` writes it: the file's text is written by the face.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct SessionExported {
    /// The session's id.
    pub session_id: String,
    /// Messages exported.
    pub messages: usize,
    /// Plan references exported.
    pub plans: usize,
    /// The export document, as the file holds it.
    pub text: String,
    /// Its checksum (`sha256:...`).
    pub checksum: String,
    /// Its schema version.
    pub schema_version: u32,
}

/// What `session import` stored.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct SessionImported {
    /// The new session's id.
    pub session_id: String,
    /// The id it had in the file.
    pub original_id: String,
    /// Its actor.
    pub actor: String,
    /// Messages imported.
    pub messages: usize,
    /// Plan references imported.
    pub plans: usize,
    /// Plan references found in this database.
    pub plans_found: usize,
    /// The file's schema version.
    pub schema_version: u32,
    /// The verified checksum.
    pub checksum: String,
    /// `resolved`, or `unresolved: WHY` for the session's actor.
    pub actor_ref: String,
    /// `resolved`, or `unresolved: WHY` for its automation profile.
    pub automation_profile_ref: String,
    /// The warning when the file's automation profile was replaced by the default one.
    pub profile_replaced: Option<String>,
}

/// One orchestrator turn (`session tell`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Told {
    /// The turn as the command's JSON shows it (session, turn, actor, model, answer,
    /// commands, plans, usage, ...).
    pub data: Value,
    /// Wall time in milliseconds.
    pub duration_ms: u64,
    /// The streamed events, in order, when they were not delivered as they came (through a
    /// server): each as JSON with its `event` kind.
    pub events: Vec<Value>,
}

/// Reads an environment variable of the process doing the work (empty counts as unset).
pub(crate) fn env_var(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.is_empty())
}

/// The automation profile a session gets when none is named: the configured one, else the
/// built-in default.
pub(crate) fn default_profile(engine: &Engine) -> String {
    let configured = engine.config().ok().and_then(|config| {
        let path = crate::config::KeyPath::parse("automation-profile").ok()?;
        crate::config::resolve(
            config,
            None,
            &path,
            &crate::config::FlagValues::default(),
            &env_var,
        )
        .chain
        .into_iter()
        .filter(|c| c.source != crate::config::Source::Default)
        .find_map(|c| c.value)
    });
    configured.unwrap_or_else(|| crate::config::DEFAULT_AUTOMATION_PROFILE.to_string())
}

/// Checks that `actor` can orchestrate, returning what to show about it.
fn actor_shown(engine: &Engine, actor: &str) -> Result<ActorShown, ApiError> {
    let store = engine.store()?;
    let config = engine.config()?;
    match orchestrator::resolve(&store, config, actor, &env_var) {
        Ok(r) => Ok(ActorShown {
            name: r.name.clone(),
            model: Some(r.model.clone()),
            unavailable: None,
            builtin_prompt: r.system == orchestrator::PROMPT,
        }),
        Err(TellError::NotSupported(m)) if actor == DEFAULT_ACTOR => Ok(ActorShown {
            name: actor.to_string(),
            model: None,
            unavailable: Some(m),
            builtin_prompt: true,
        }),
        Err(e) => Err(e.into()),
    }
}

/// Creates a session.
///
/// # Errors
/// `INVALID_INPUT` for a bad name, `CONFLICT` for a taken one, an actor that cannot
/// orchestrate, an unknown automation profile.
pub(super) fn create(
    engine: &Engine,
    actor: Option<String>,
    name: Option<String>,
    profile: Option<String>,
    max_history: u32,
) -> Result<SessionCreated, ApiError> {
    if let Some(n) = &name {
        sessions::check_name(n)?;
    }
    let actor = actor.unwrap_or_else(|| DEFAULT_ACTOR.to_string());
    let shown = actor_shown(engine, &actor)?;
    let store = engine.store()?;
    let profile_name = profile.unwrap_or_else(|| default_profile(engine));
    let profile = crate::registry::profiles::find(&store, &profile_name)
        .map_err(|e| ApiError::Registry(Box::new(e.into())))?;
    let now = jiff::Timestamp::now();
    let session = Session {
        session_id: crate::domain::id::Id::generate(),
        name,
        actor,
        automation_profile: profile.name.clone(),
        max_history,
        summary: None,
        summarized_turns: 0,
        imported_from: None,
        created_at: now,
        updated_at: now,
    };
    sessions::insert(&store, &session)?;
    Ok(SessionCreated {
        session,
        auto_apply: profile.flags.auto_apply,
        actor: shown,
    })
}

/// Deletes a session, its conversation and its action files (its plans stay).
///
/// # Errors
/// `NOT_FOUND`, `AMBIGUOUS`, store errors.
pub(super) fn delete(engine: &Engine, input: &str) -> Result<SessionDeleted, ApiError> {
    let mut store = engine.store()?;
    let d = sessions::detail(&store, input)?;
    let id = d.session.session_id;
    let bytes: u64 = d.messages.iter().map(|m| m.content.len() as u64).sum();
    sessions::delete(&mut store, &id)?;
    let actions_dir = engine
        .paths()
        .data_dir
        .join("sessions")
        .join(id.to_string());
    let files_removed = actions_dir.exists() && std::fs::remove_dir_all(&actions_dir).is_ok();
    Ok(SessionDeleted {
        session_id: id.to_string(),
        messages_removed: d.messages.len(),
        plans_unlinked: d.plans.len(),
        files_removed,
        bytes,
    })
}

/// A session's export document.
///
/// # Errors
/// `NOT_FOUND`, `AMBIGUOUS`, store errors.
pub(super) fn export(engine: &Engine, input: &str) -> Result<SessionExported, ApiError> {
    let d = sessions::detail(&engine.store()?, input)?;
    let (doc, checksum) = export::document(&d);
    let text = serde_json::to_string_pretty(&doc).map_err(|e| ApiError::Protocol {
        message: format!("the export does not serialize: {e}"),
    })? + "\n";
    Ok(SessionExported {
        session_id: d.session.session_id.to_string(),
        messages: d.messages.len(),
        plans: d.plans.len(),
        text,
        checksum,
        schema_version: export::SCHEMA_VERSION,
    })
}

/// Stores an exported session (the file's `text`, named `source` in errors) under a new id;
/// it runs under the default automation profile unless `keep_profile` (a file can be edited
/// and resealed: its checksum is no signature).
///
/// # Errors
/// `INVALID_INPUT` naming the file and what is wrong with it; store errors.
pub(super) fn import(
    engine: &Engine,
    source: &str,
    text: &str,
    keep_profile: bool,
) -> Result<SessionImported, ApiError> {
    let mut imported = export::parse(source, text)?;
    let default = default_profile(engine);
    let session = &mut imported.detail.session;
    let profile_replaced = (!keep_profile && session.automation_profile != default).then(|| {
        let named = std::mem::replace(&mut session.automation_profile, default.clone());
        format!(
            "the file names the automation profile {named}; the session runs under your default, {default} (import with --keep-profile to keep {named})"
        )
    });
    let mut store = engine.store()?;
    let actor = imported.detail.session.actor.clone();
    let actor_ref =
        match engine.config().map_err(|e| e.to_string()).and_then(|c| {
            orchestrator::resolve(&store, c, &actor, &env_var).map_err(|e| e.to_string())
        }) {
            Ok(_) => "resolved".to_string(),
            Err(e) => format!("unresolved: {e}"),
        };
    let automation_profile_ref = match crate::registry::profiles::find(
        &store,
        &imported.detail.session.automation_profile,
    ) {
        Ok(_) => "resolved".to_string(),
        Err(e) => format!("unresolved: {e}"),
    };
    let mut plans_found = 0;
    for p in &imported.detail.plans {
        if store.plan(&p.plan_id)?.is_some() {
            plans_found += 1;
        }
    }
    sessions::insert_detail(&mut store, &imported.detail)?;
    Ok(SessionImported {
        session_id: imported.detail.session.session_id.to_string(),
        original_id: imported.original_id.to_string(),
        actor,
        messages: imported.detail.messages.len(),
        plans: imported.detail.plans.len(),
        plans_found,
        schema_version: imported.schema_version,
        checksum: imported.checksum,
        actor_ref,
        automation_profile_ref,
        profile_replaced,
    })
}

/// The engine's runner of the orchestrator's commands, shared by the turns.
struct SharedCommands(Arc<dyn Commands>);

impl Commands for SharedCommands {
    fn run(&self, argv: &[String]) -> CommandResult {
        self.0.run(argv)
    }
}

/// An event as the stream carries it: JSON with its `event` kind.
fn event_json(event: &ActorEvent) -> Value {
    serde_json::to_value(event).unwrap_or(Value::Null)
}

/// What `session tell` asks.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct TellRequest {
    /// Session id, unique prefix or name.
    pub session: String,
    /// Use this actor for this request and the next ones.
    pub actor: Option<String>,
    /// The request.
    pub prompt: String,
    /// Stream the model's replies.
    pub stream: bool,
}

/// Runs one orchestrator turn of a session on `engine`, handing each streamed event to
/// `on_event` as it arrives (JSON with its `event` kind) and stopping when `interrupted`
/// says so. Through a server the events are collected into [`Told::events`].
///
/// # Errors
/// Unknown sessions, actors that cannot orchestrate, missing keys ([`ApiError::Tell`],
/// [`ApiError::Session`]); a turn whose model call failed or was cancelled is recorded and
/// is [`ApiError::Stopped`] with the turn's data.
pub fn tell(
    engine: &Engine,
    request: &TellRequest,
    on_event: &(dyn Fn(Value) + Send + Sync),
    interrupted: &(dyn Fn() -> bool + Send + Sync),
) -> Result<Told, ApiError> {
    let config = engine.config()?;
    let mut store = engine.store()?;
    let mut session = sessions::find(&store, &request.session)?;
    if let Some(actor) = &request.actor {
        orchestrator::resolve(&store, config, actor, &env_var)?;
        sessions::set_actor(&store, &session.session_id, actor)?;
        session.actor = actor.clone();
    }
    let events = |e: ActorEvent| on_event(event_json(&e));
    let quiet = |_: ActorEvent| {};
    let o = orchestrator::tell(
        config,
        &mut store,
        engine.paths(),
        Tell {
            session: &session,
            prompt: &request.prompt,
            commands: SharedCommands(engine.commands()?),
            stream: request.stream,
            options: ClientOptions::default(),
        },
        &env_var,
        if request.stream { &events } else { &quiet },
        interrupted,
    )?;
    let data = json!({
        "session_id": session.session_id,
        "turn": o.turn,
        "actor": o.actor,
        "model": o.model,
        "automation_profile": session.automation_profile,
        "prompt": request.prompt,
        "answer": o.answer,
        "stop": o.stop,
        "commands": o.commands,
        "plans": o.plans,
        "usage": o.usage,
        "cost_usd": o.cost_usd,
        "tool_calls": o.tool_calls,
        "history_messages": o.history_messages,
        "summarized": o.summarized,
    });
    match &o.stop {
        Stop::Failed { .. } => Err(ApiError::Stopped {
            stop: Box::new(o.stop.clone()),
            hints: vec![format!("agents session show {}", session.session_id)],
            data: Box::new(data),
        }),
        Stop::Cancelled => Err(ApiError::Stopped {
            stop: Box::new(o.stop.clone()),
            hints: Vec::new(),
            data: Box::new(data),
        }),
        _ => Ok(Told {
            data,
            duration_ms: o.duration_ms,
            events: Vec::new(),
        }),
    }
}

/// [`tell`] as a call answers it: the events are collected into the view.
pub(super) fn tell_collected(engine: &Engine, request: &TellRequest) -> Result<Told, ApiError> {
    let collected = Mutex::new(Vec::new());
    let on_event = |v: Value| {
        if let Ok(mut c) = collected.lock() {
            c.push(v);
        }
    };
    let mut told = tell(engine, request, &on_event, &|| false)?;
    told.events = collected.into_inner().unwrap_or_default();
    Ok(told)
}
