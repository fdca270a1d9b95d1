//! How the CLI says why a direct run failed: a session's orchestrator turn, `actor run`, an
//! actor context, a provider, and a run that stopped without its answer.

use serde_json::Value;

use super::CliError;
use cleveragents_engine::api::run_views::{ContextError, OneShotError, ProviderError, Stop};
use cleveragents_engine::api::session_views::{SessionError, TellError};

impl From<SessionError> for CliError {
    fn from(e: SessionError) -> Self {
        match e {
            SessionError::Prefix(p) => p.into(),
            SessionError::Store(s) => s.into(),
            SessionError::NotFound(n) => CliError::new(
                "NOT_FOUND",
                format!("no session is named `{n}`, and no session id starts with it"),
            )
            .hint("agents session list"),
            SessionError::NameTaken(n) => {
                CliError::new("CONFLICT", format!("a session named `{n}` already exists"))
                    .hint(format!("agents session show {n}"))
            }
            SessionError::Invalid(m) => CliError::invalid_input(m),
            SessionError::Import(m) => CliError::invalid_input(m)
                .hint("export the session again with `agents session export`"),
        }
    }
}

/// Why an orchestrator turn could not start, as the command line says it.
pub(crate) fn tell_error(e: TellError) -> CliError {
    match e {
        TellError::Session(s) => s.into(),
        TellError::Provider(p) => provider_error(&p),
        TellError::Actor(a) => a.into(),
        TellError::Profile(p) => p.into(),
        TellError::Store(s) => s.into(),
        TellError::NotSupported(m) => CliError::new("NOT_SUPPORTED", m),
        TellError::Runtime(r) => CliError::new("INVALID_INPUT", r.to_string())
            .hint("check the actor's system prompt template"),
        TellError::Io(e) => CliError::new("IO_ERROR", e.to_string()),
    }
}

/// A model run that stopped without its answer: why, with the run's data and `hints` after
/// the stop's own.
pub(crate) fn stopped_error(stop: &Stop, hints: Vec<String>, data: Value) -> CliError {
    let err = match stop {
        Stop::Failed { error } => provider_error(error).data(data),
        Stop::Cancelled => CliError::interrupted().data(data),
        other => CliError::new("PROVIDER_UNAVAILABLE", other.describe())
            .data(data)
            .hint("raise `providers.NAME.step_deadline_secs`, or ask for less in one run"),
    };
    hints.into_iter().fold(err, CliError::hint)
}

/// Errors before the first model call.
pub(crate) fn start_error(e: OneShotError, name: &str) -> CliError {
    match e {
        OneShotError::Provider(ProviderError::UnknownProvider { .. }) if !name.contains('/') => {
            provider_error(&ProviderError::BadModelName { name: name.into() })
        }
        OneShotError::Provider(ProviderError::UnknownProvider { name: ns, known }) => {
            CliError::new(
                "NOT_FOUND",
                format!(
                    "actor `{name}` uses provider `{ns}`, which is not configured (configured providers: {known})"
                ),
            )
            .hint(format!(
                "configure it: agents config set providers.{ns}.kind openai"
            ))
            .hint(format!("agents actor show {name}"))
        }
        OneShotError::Provider(p) => provider_error(&p),
        OneShotError::Skill(s) => s.into(),
        OneShotError::CustomSkill(s) => s.into(),
        OneShotError::Tools(m) => CliError::new("TOOL_FAILED", m),
        OneShotError::Actor(a) => a.into(),
        OneShotError::NotSupported(m) => CliError::new("NOT_SUPPORTED", m),
        OneShotError::Sandbox(s) => s.into(),
        OneShotError::Runtime(r) => CliError::invalid_input(r.to_string()),
        OneShotError::Store(s) => s.into(),
        OneShotError::Io(io) => CliError::new("IO_ERROR", io.to_string()),
        OneShotError::Context(c) => context_error(c),
    }
}

/// A provider failure, with what to do about it.
pub(crate) fn provider_error(e: &ProviderError) -> CliError {
    let message = e.to_string();
    match e {
        ProviderError::BadModelName { .. } | ProviderError::Invalid { .. } => {
            CliError::invalid_input(message)
        }
        ProviderError::MissingKey { env, .. } => {
            CliError::new("PROVIDER_AUTH", message).hint(format!("export {env}=<your key>"))
        }
        ProviderError::Auth { .. } => CliError::new("PROVIDER_AUTH", message),
        ProviderError::Transient { .. } => CliError::new("PROVIDER_UNAVAILABLE", message)
            .hint("try again later; the provider may be overloaded or unreachable"),
        ProviderError::UnknownProvider { .. } => CliError::new("NOT_FOUND", message),
        ProviderError::Config { provider, .. } | ProviderError::NotFound { provider, .. } => {
            CliError::new("PROVIDER_ERROR", message)
                .hint(format!("agents config list providers.{provider}"))
        }
        _ => CliError::new("PROVIDER_ERROR", message),
    }
}

/// The CLI error for a context error.
pub(crate) fn context_error(e: ContextError) -> CliError {
    let message = e.to_string();
    match e {
        ContextError::NotFound { .. } => {
            CliError::new("NOT_FOUND", message).hint("agents actor context list")
        }
        ContextError::Exists(name) => CliError::new("CONFLICT", message).hint(format!(
            "replace it with --update: agents actor context import --update --input FILE {name}"
        )),
        ContextError::BadName(_) | ContextError::Import { .. } => CliError::invalid_input(message),
        ContextError::File { .. } => CliError::new("IO_ERROR", message),
        ContextError::Store(s) => s.into(),
    }
}
