//! Running a model actor for a plan: resolve the actor reference to a provider client and its
//! prompt and limits, run the tool-calling loop with cancellation (Ctrl-C, `plan cancel`, a
//! lost lease) checked every 200 ms, and record every model call for accounting.

use std::time::Duration;

use tokio_util::sync::CancellationToken;

use super::Engine;
use crate::actors::accounting::{self, CallContext};
use crate::actors::prompts::{self, Role};
use crate::actors::providers::{ModelRef, ProviderClient};
use crate::actors::runtime::{self, ActorRun, Limits, RunRequest, ToolHost};
use crate::domain::Id;
use crate::lease;
use crate::registry::actors::{self as actor_registry, ActorRef, ActorType};
use crate::store::Store;

/// A model actor ready to run.
pub(crate) struct ModelActor {
    /// The reference as stored on the plan.
    pub name: String,
    /// The client.
    pub client: ProviderClient,
    /// The system prompt template (the actor's own, else the role's).
    pub template: String,
    /// Limits.
    pub limits: Limits,
    /// Sampling options from the actor's file.
    pub sampling: crate::actors::messages::Sampling,
    /// Max tokens per response.
    pub max_tokens: Option<u32>,
}

/// Resolves `name` to a model actor for `role`. Built-in offline actors are not model actors.
///
/// # Errors
/// A message saying why the actor cannot run (unknown, graph actor, missing key, ...).
pub(crate) fn resolve(
    engine: &Engine,
    plan: &crate::domain::plan::Plan,
    name: &str,
    role: Role,
) -> Result<ModelActor, String> {
    let resolved = actor_registry::resolve(engine.store(), engine.providers(), name)
        .map_err(|e| e.to_string())?;
    let (model, own_prompt, limits, sampling, max_tokens) = match resolved {
        ActorRef::Provider { name, .. } => {
            (name, None, Limits::default(), Default::default(), None)
        }
        ActorRef::Custom { actor } => {
            let def = actor.definition;
            if def.actor_type == ActorType::Graph {
                return Err(format!(
                    "actor {} is a graph actor; running graph actors is not yet supported",
                    actor.name
                ));
            }
            let model = def
                .model
                .ok_or_else(|| format!("actor {} has no model", actor.name))?;
            let mut limits = Limits::default();
            if let Some(t) = def.limits.max_turns {
                limits.max_turns = t;
            }
            limits.token_budget = def.limits.max_tokens;
            (
                model,
                def.system_prompt,
                limits,
                crate::actors::oneshot::sampling_of(&def.options),
                def.options.max_tokens,
            )
        }
        ActorRef::Builtin { name, .. } => {
            return Err(format!(
                "{name} is an offline built-in actor, not a model actor"
            ));
        }
    };
    let model_ref = ModelRef::parse(&model).map_err(|e| e.to_string())?;
    let client = ProviderClient::connect(engine.providers(), &model_ref, engine.env(), {
        // Without auto_retry_transient the first transient failure stops the phase and
        // raises a transient_failure approval (retry or abort) instead of retrying.
        let mut options = engine.client_options().clone();
        if !super::gates::Gates::of(plan).flags.auto_retry_transient {
            options.retry = crate::actors::providers::RetryMode::Never;
        }
        options
    })
    .map_err(|e| e.to_string())?;
    Ok(ModelActor {
        name: name.to_string(),
        client,
        template: prompts::role_template(role, own_prompt.as_deref()).to_string(),
        limits,
        sampling,
        max_tokens,
    })
}

/// What a run starts from.
pub(crate) struct Input {
    /// Values for the system prompt template.
    pub context: serde_json::Value,
    /// The user prompt (ignored when `history` is not empty).
    pub prompt: String,
    /// A conversation to continue (a paused run); empty for a new run.
    pub history: Vec<crate::actors::messages::Message>,
}

/// Runs `actor` with `tools` for a plan, cancelling the run when the user interrupts, the
/// plan's cancellation is requested or its lease is lost; records the model calls under
/// `decision` (if any). A non-empty `input.history` continues that conversation instead of
/// starting from `input.prompt`. Returns the run, or the error message when it could not start.
///
/// # Errors
/// A message when the prompt does not render or the async runtime cannot start.
pub(crate) fn run<H: ToolHost>(
    engine: &mut Engine,
    plan_id: &Id,
    decision: Option<&Id>,
    actor: &ModelActor,
    input: Input,
    tools: &H,
) -> Result<ActorRun, String> {
    let Input {
        context,
        prompt,
        history,
    } = input;
    let mut limits = actor.limits;
    let budget = engine
        .store()
        .plan_budget(plan_id)
        .map_err(|e| e.to_string())?;
    if budget.is_set() {
        let spent = engine
            .store()
            .usage_for_plan(plan_id)
            .map_err(|e| e.to_string())?;
        limits.budget = Some(crate::actors::budget::BudgetCheck {
            limit: budget,
            spent_usd: spent.priced_cost_usd,
            spent_tokens: spent.input_tokens + spent.output_tokens,
        });
    }
    let request = RunRequest {
        system_template: Some(actor.template.clone()),
        context,
        prompt,
        max_tokens: actor.max_tokens,
        sampling: actor.sampling.clone(),
        stream: true,
        limits,
        history,
    };
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("cannot start the async runtime: {e}"))?;
    let cancel = CancellationToken::new();
    let done = CancellationToken::new();
    let db = engine.store().path().to_path_buf();
    let observer = engine.observer();
    let watcher = async {
        let watch_store = Store::open(&db).ok();
        loop {
            tokio::select! {
                () = done.cancelled() => break,
                () = tokio::time::sleep(Duration::from_millis(200)) => {}
            }
            let requested = watch_store
                .as_ref()
                .is_some_and(|s| lease::cancel_requested(s, plan_id).unwrap_or(false));
            if requested || observer.interrupted() {
                cancel.cancel();
                break;
            }
        }
    };
    let (result, ()) = rt.block_on(async {
        tokio::join!(
            async {
                let r = runtime::run_actor(&actor.client, &request, tools, &cancel, &|_| {}).await;
                done.cancel();
                r
            },
            watcher
        )
    });
    let run = result.map_err(|e| e.to_string())?;
    let ctx = CallContext {
        run_id: Id::generate(),
        plan_id: Some(*plan_id),
        decision_id: decision.map(Id::to_string),
        actor: actor.name.clone(),
    };
    let rows = accounting::call_rows(&ctx, actor.client.provider(), &run);
    if let Err(e) = engine.store_mut().record_model_calls(&rows) {
        tracing::warn!(error = %e, "model calls could not be recorded");
    }
    Ok(run)
}
