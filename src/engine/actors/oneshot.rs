//! Running one model actor in isolation (`agents actor run PROVIDER/MODEL PROMPT`, spec
//! section 06): a plain conversation with no tools, its model calls recorded for accounting.
//!
//! Tools (skills, sandboxes) are not offered yet: they arrive with the tool runner. Custom
//! actors arrive with the actor registry.

use serde::Serialize;
use tokio_util::sync::CancellationToken;

use super::accounting::{self, CallContext};
use super::messages::Usage;
use super::providers::{ClientOptions, ModelRef, ProviderClient, ProviderError};
use super::runtime::{self, ActorRun, NoTools, RunRequest, RuntimeError, Stop};
use crate::engine::config::Config;
use crate::engine::domain::id::Id;
use crate::engine::store::{Store, StoreError};

/// What to run.
#[derive(Debug, Clone)]
pub struct OneShot {
    /// `PROVIDER/MODEL`.
    pub actor: String,
    /// The user prompt.
    pub prompt: String,
    /// Sampling temperature.
    pub temperature: Option<f32>,
    /// Client options (timeouts, retry delays).
    pub options: ClientOptions,
}

/// The outcome of a run whose calls were recorded.
#[derive(Debug, Clone, Serialize)]
pub struct OneShotResult {
    /// The run's id (the `run_id` of its `model_calls` rows).
    pub run_id: Id,
    /// `PROVIDER/MODEL`.
    pub actor: String,
    /// Provider name.
    pub provider: String,
    /// Model name.
    pub model: String,
    /// The run (answer, stop reason, tool calls, model calls, usage).
    pub run: ActorRun,
    /// Tokens over all calls.
    pub usage: Usage,
    /// Cost in US dollars; `None` ("unknown") without configured prices.
    pub cost_usd: Option<f64>,
}

/// Why a one-shot run could not start or be recorded.
#[derive(Debug, thiserror::Error)]
pub enum OneShotError {
    /// The actor name, provider or key is not usable.
    #[error(transparent)]
    Provider(#[from] ProviderError),
    /// The prompt does not render.
    #[error(transparent)]
    Runtime(#[from] RuntimeError),
    /// The calls could not be recorded.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The async runtime could not start.
    #[error("cannot start the async runtime: {0}")]
    Io(#[from] std::io::Error),
}

/// Runs `request` and records its model calls (failed ones included) in one transaction.
/// A provider failure during the run is not an `Err`: it is the run's [`Stop::Failed`].
///
/// # Errors
/// [`OneShotError`] when the run cannot start (bad name, unknown provider, missing key) or
/// cannot be recorded.
pub fn run_model_actor(
    config: &Config,
    store: &mut Store,
    request: &OneShot,
    env: impl Fn(&str) -> Option<String>,
) -> Result<OneShotResult, OneShotError> {
    let model_ref = ModelRef::parse(&request.actor)?;
    let providers = config.providers();
    let client = ProviderClient::connect(&providers, &model_ref, env, request.options.clone())?;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let run_request = RunRequest {
        prompt: request.prompt.clone(),
        temperature: request.temperature,
        stream: true,
        ..RunRequest::default()
    };
    let run = rt.block_on(runtime::run_actor(
        &client,
        &run_request,
        &NoTools,
        &CancellationToken::new(),
        &|_| {},
    ))?;
    let ctx = CallContext {
        run_id: Id::generate(),
        plan_id: None,
        decision_id: None,
        actor: model_ref.to_string(),
    };
    store.record_model_calls(&accounting::call_rows(&ctx, client.provider(), &run))?;
    if let Stop::Failed { error } = &run.stop {
        tracing::warn!(actor = %model_ref, kind = error.kind(), "actor run failed");
    }
    Ok(OneShotResult {
        run_id: ctx.run_id,
        actor: model_ref.to_string(),
        provider: model_ref.provider,
        model: model_ref.model,
        usage: run.usage,
        cost_usd: accounting::run_cost_usd(client.provider(), &run),
        run,
    })
}
