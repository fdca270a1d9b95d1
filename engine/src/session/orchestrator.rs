//! One `session tell` turn (spec sections 06 and 20): the orchestrator model actor over the
//! session's history, with the tools of [`super::tools`], recorded as a turn.
//!
//! The actor is `builtin/orchestrator` (the orchestrator prompt over the default model: the
//! environment variable [`MODEL_ENV`], else the first model with a `[providers.NAME.models]`
//! table in the configuration), a provider model (`openai/gpt-4.1`, same prompt) or a
//! registered LLM actor (its model, and its own system prompt when it has one). The model
//! sees the recorded summary of older turns in its system prompt and the newest
//! `max_history` turns as conversation.

use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::Serialize;
use serde_json::json;
use tokio_util::sync::CancellationToken;

use super::tools::{Commands, OrchestratorTools};
use super::{ExecutedCommand, Role, Session, SessionError, TurnRecord};
use crate::actors::accounting::{self, CallContext};
use crate::actors::messages::{Message, Sampling, Usage};
use crate::actors::runtime::{self, ActorEvent, Limits, RunRequest, RuntimeError, Stop};
use crate::config::Config;
use crate::domain::id::Id;
use crate::paths::Paths;
use crate::providers::{ClientOptions, ModelRef, ProviderClient, ProviderError};
use crate::store::Store;

/// The orchestrator prompt (minijinja; `profile`, `auto_apply`, `summary`).
pub const PROMPT: &str = include_str!("../actors/prompts/orchestrator.j2");

/// Environment variable naming the default model of `builtin/orchestrator`.
pub const MODEL_ENV: &str = "AGENTS_ORCHESTRATOR_MODEL";

/// Why a turn could not run.
#[derive(Debug, thiserror::Error)]
pub enum TellError {
    /// The session store failed.
    #[error(transparent)]
    Session(#[from] SessionError),
    /// The provider, model or key is not usable.
    #[error(transparent)]
    Provider(#[from] ProviderError),
    /// The actor does not resolve.
    #[error(transparent)]
    Actor(#[from] crate::registry::actors::ActorError),
    /// The session's automation profile does not resolve.
    #[error(transparent)]
    Profile(#[from] crate::registry::profiles::ProfileError),
    /// The prompt does not render.
    #[error(transparent)]
    Runtime(#[from] RuntimeError),
    /// The actor cannot orchestrate, or no default model is configured.
    #[error("{0}")]
    NotSupported(String),
    /// The async runtime could not start.
    #[error(transparent)]
    Io(#[from] std::io::Error),
    /// Model calls could not be recorded.
    #[error(transparent)]
    Store(#[from] crate::store::StoreError),
}

/// The model and prompt a session actor resolves to.
#[derive(Debug, Clone)]
pub struct ResolvedActor {
    /// The actor as named.
    pub name: String,
    /// `PROVIDER/MODEL`.
    pub model: String,
    /// The system prompt template.
    pub system: String,
    sampling: Sampling,
    max_tokens: Option<u32>,
    limits: Limits,
}

/// The default model of `builtin/orchestrator`: [`MODEL_ENV`], else the first configured
/// model (providers by name, models by name).
pub fn default_model(config: &Config, env: &dyn Fn(&str) -> Option<String>) -> Option<String> {
    if let Some(m) = env(MODEL_ENV) {
        return Some(m);
    }
    let mut providers = config.providers();
    providers.sort_by(|a, b| a.name.cmp(&b.name));
    providers
        .iter()
        .find_map(|p| p.models.keys().next().map(|m| format!("{}/{m}", p.name)))
}

/// Resolves a session actor to its model and prompt.
///
/// # Errors
/// [`TellError::NotSupported`] for an offline built-in or graph actor, or when
/// `builtin/orchestrator` has no default model; [`TellError::Actor`] when the name does not
/// resolve.
pub fn resolve(
    store: &Store,
    config: &Config,
    name: &str,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<ResolvedActor, TellError> {
    use crate::registry::actors::{self as registry, ActorRef, ActorType};
    let plain = |model: String| ResolvedActor {
        name: name.to_string(),
        model,
        system: PROMPT.to_string(),
        sampling: Sampling::default(),
        max_tokens: None,
        limits: Limits::default(),
    };
    if name == super::DEFAULT_ACTOR {
        return default_model(config, env).map(plain).ok_or_else(|| {
            TellError::NotSupported(format!(
                // A command inside a sentence stays (D-commands-2): it explains the error rather than suggesting the next step.
                "{name} has no model: set {MODEL_ENV}=PROVIDER/MODEL, configure a model with `agents config set providers.NAME.models.\"MODEL\".input_usd_per_mtok PRICE`, or create the session with --actor PROVIDER/MODEL"
            ))
        });
    }
    match registry::resolve(store, &config.providers(), name)? {
        ActorRef::Provider { name, .. } => Ok(plain(name)),
        ActorRef::Custom { actor } => {
            let def = actor.definition;
            if def.actor_type == ActorType::Graph {
                return Err(TellError::NotSupported(format!(
                    "actor {} is a graph actor; graph actors as orchestrators are not yet supported",
                    actor.name
                )));
            }
            let model = def.model.clone().ok_or_else(|| {
                TellError::NotSupported(format!("actor {} names no model", actor.name))
            })?;
            let mut limits = Limits::default();
            if let Some(t) = def.limits.max_turns {
                limits.max_turns = t;
            }
            limits.token_budget = def.limits.max_tokens;
            Ok(ResolvedActor {
                name: actor.name.clone(),
                model,
                system: def
                    .system_prompt
                    .clone()
                    .unwrap_or_else(|| PROMPT.to_string()),
                sampling: def.options.sampling(),
                max_tokens: def.options.max_tokens,
                limits,
            })
        }
        ActorRef::Builtin { name, .. } => Err(TellError::NotSupported(format!(
            "{name} is an offline built-in actor that works inside plans; a session needs a model actor (builtin/orchestrator, PROVIDER/MODEL or a registered LLM actor)"
        ))),
    }
}

/// What a turn did.
#[derive(Debug, Clone, Serialize)]
pub struct TellOutcome {
    /// The turn number in the session.
    pub turn: u32,
    /// The actor that answered.
    pub actor: String,
    /// `PROVIDER/MODEL`.
    pub model: String,
    /// The answer.
    pub answer: String,
    /// Why the run stopped.
    pub stop: Stop,
    /// Mutations executed (or refused), with their command lines.
    pub commands: Vec<ExecutedCommand>,
    /// Plans created.
    pub plans: Vec<Id>,
    /// Tokens.
    pub usage: Usage,
    /// Cost in US dollars, if known.
    pub cost_usd: Option<f64>,
    /// Tool calls made.
    pub tool_calls: u32,
    /// Messages of earlier turns the model saw in full.
    pub history_messages: u32,
    /// Whether older turns reached the model as the recorded summary.
    pub summarized: bool,
    /// Wall time in milliseconds.
    pub duration_ms: u64,
}

/// One turn's inputs.
pub struct Tell<'a, C: Commands> {
    /// The session (its actor already replaced by `--actor` if given).
    pub session: &'a Session,
    /// The user's prompt.
    pub prompt: &'a str,
    /// Runs the tools' commands.
    pub commands: C,
    /// Stream the model's replies.
    pub stream: bool,
    /// Client options (timeouts, retry delays).
    pub options: ClientOptions,
}

/// Runs one turn and records it. A provider failure is recorded as the turn's answer (the
/// stop reason) and returned in [`TellOutcome::stop`], not as an `Err`.
///
/// # Errors
/// [`TellError`] when the turn cannot start (actor, model, key, profile) or be recorded.
pub fn tell<C: Commands>(
    config: &Config,
    store: &mut Store,
    paths: &Paths,
    t: Tell<'_, C>,
    env: &dyn Fn(&str) -> Option<String>,
    on_event: &(dyn Fn(ActorEvent) + Send + Sync),
    interrupted: &(dyn Fn() -> bool + Send + Sync),
) -> Result<TellOutcome, TellError> {
    let started = Instant::now();
    let actor = resolve(store, config, &t.session.actor, env)?;
    let providers = config.providers();
    let model_ref = ModelRef::parse(&actor.model)?;
    let client = ProviderClient::connect(&providers, &model_ref, env, t.options.clone())?;
    let profile = crate::registry::profiles::find(store, &t.session.automation_profile)?;
    let detail = super::detail(store, &t.session.session_id.to_string())?;
    let mut history: Vec<Message> = super::recent(&detail)
        .map(|m| match m.role {
            Role::User => Message::User {
                text: m.content.clone(),
            },
            Role::Assistant => Message::Assistant {
                text: m.content.clone(),
                tool_calls: Vec::new(),
            },
        })
        .collect();
    let history_messages = history.len() as u32;
    history.push(Message::User {
        text: t.prompt.to_string(),
    });
    let tools = OrchestratorTools::new(
        t.commands,
        &profile.name,
        profile.flags.auto_apply,
        paths
            .data_dir
            .join("sessions")
            .join(t.session.session_id.to_string())
            .join("actions"),
    );
    let request = RunRequest {
        system_template: Some(actor.system.clone()),
        context: json!({
            "profile": profile.name,
            "auto_apply": profile.flags.auto_apply,
            "summary": detail.session.summary,
            "session_id": t.session.session_id.to_string(),
        }),
        prompt: t.prompt.to_string(),
        sampling: actor.sampling.clone(),
        max_tokens: actor.max_tokens,
        limits: actor.limits,
        stream: t.stream,
        history,
        journal: None,
        resume_at: None,
        graph: None,
    };
    let run = drive(&client, &request, &tools, on_event, interrupted)?;
    let run_id = Id::generate();
    let ctx = CallContext {
        run_id,
        plan_id: None,
        decision_id: None,
        actor: actor.name.clone(),
    };
    store.record_model_calls(&accounting::call_rows(&ctx, client.provider(), &run))?;
    let cost_usd = accounting::run_cost_usd(client.provider(), &run);
    let answer = if run.answer.trim().is_empty() || !matches!(run.stop, Stop::Answered) {
        let why = run.stop.describe();
        if run.answer.trim().is_empty() {
            format!("(no answer: {why})")
        } else {
            format!("{}\n\n(stopped: {why})", run.answer)
        }
    } else {
        run.answer.clone()
    };
    let record = TurnRecord {
        prompt: t.prompt.to_string(),
        answer: answer.clone(),
        actor: actor.name.clone(),
        commands: tools.executed(),
        plans: tools.plans(),
        input_tokens: run.usage.input_tokens,
        output_tokens: run.usage.output_tokens,
        cost_usd,
        tool_calls: run.tool_calls.len() as u32,
    };
    let turn = super::record_turn(store, t.session, &record)?;
    Ok(TellOutcome {
        turn,
        actor: actor.name,
        model: actor.model,
        answer,
        stop: run.stop,
        commands: record.commands,
        plans: record.plans,
        usage: run.usage,
        cost_usd,
        tool_calls: record.tool_calls,
        history_messages,
        summarized: detail.session.summary.is_some(),
        duration_ms: u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX),
    })
}

/// Runs the actor on a current-thread runtime, polling `interrupted` every 100 ms.
fn drive<C: Commands>(
    client: &ProviderClient,
    request: &RunRequest,
    tools: &OrchestratorTools<C>,
    on_event: &(dyn Fn(ActorEvent) + Send + Sync),
    interrupted: &(dyn Fn() -> bool + Send + Sync),
) -> Result<runtime::ActorRun, TellError> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let token = CancellationToken::new();
    let done = Arc::new(CancellationToken::new());
    let (result, ()) = rt.block_on(async {
        tokio::join!(
            async {
                let r = runtime::run_actor(client, request, tools, &token, on_event).await;
                done.cancel();
                r
            },
            async {
                loop {
                    tokio::select! {
                        () = done.cancelled() => break,
                        () = tokio::time::sleep(Duration::from_millis(100)) => {}
                    }
                    if interrupted() {
                        token.cancel();
                        break;
                    }
                }
            }
        )
    });
    Ok(result?)
}
