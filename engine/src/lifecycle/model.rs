//! Running a model actor for a plan: resolve the actor reference to a provider client and its
//! prompt and limits, run the tool-calling loop with cancellation (Ctrl-C, `plan cancel`, a
//! lost lease) checked every 200 ms, and record every model call for accounting.

use std::time::Duration;

use tokio_util::sync::CancellationToken;

use super::Lifecycle;
use crate::actors::accounting::{self, CallContext};
use crate::actors::prompts::{self, Role};
use crate::actors::runtime::{self, ActorRun, Limits, RunRequest, ToolHost};
use crate::domain::Id;
use crate::events::live::LiveKind;
use crate::lease;
use crate::providers::{ModelRef, ProviderClient};
use crate::registry::actors::{self as actor_registry, ActorRef, ActorType};

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
    /// For a graph actor: its compiled graph (`client` is then its first llm node's, and
    /// `template` starts empty: what callers append to it reaches every llm node).
    pub graph: Option<Box<crate::actors::graph::Compiled>>,
}

/// Resolves `name` to a model actor for `role`. Built-in offline actors are not model actors.
///
/// # Errors
/// A message saying why the actor cannot run (unknown, graph actor, missing key, ...).
pub(crate) fn resolve(
    engine: &Lifecycle,
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
        ActorRef::Custom { actor } if actor.definition.actor_type == ActorType::Graph => {
            return resolve_graph(engine, plan, &actor, role);
        }
        ActorRef::Custom { actor } => {
            let def = actor.definition;
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
                def.options.sampling(),
                def.options.max_tokens,
            )
        }
        ActorRef::Builtin { name, .. } => {
            return Err(format!(
                "{name} is an offline built-in actor, not a model actor"
            ));
        }
    };
    let client = connect(engine, plan, &model)?;
    Ok(ModelActor {
        name: name.to_string(),
        client,
        template: prompts::role_template(role, own_prompt.as_deref()).to_string(),
        limits,
        sampling,
        max_tokens,
        graph: None,
    })
}

/// A client for `<provider>/<model>` under the plan's retry rule: without
/// `auto_retry_transient` the first transient failure stops the phase and raises a
/// `transient_failure` approval (retry or abort) instead of retrying.
fn connect(
    engine: &Lifecycle,
    plan: &crate::domain::plan::Plan,
    model: &str,
) -> Result<ProviderClient, String> {
    let model_ref = ModelRef::parse(model).map_err(|e| e.to_string())?;
    let mut options = engine.client_options().clone();
    if !super::gates::Gates::of(plan).flags.auto_retry_transient {
        options.retry = crate::providers::RetryMode::Never;
    }
    ProviderClient::connect(engine.providers(), &model_ref, engine.env(), options)
        .map_err(|e| e.to_string())
}

/// A graph actor for `role`: an llm node without its own system prompt gets the role's (so
/// a strategist node knows to record decisions), its clients follow the plan's retry rule,
/// and its skills' tools are the phase's.
fn resolve_graph(
    engine: &Lifecycle,
    plan: &crate::domain::plan::Plan,
    actor: &crate::registry::actors::Actor,
    role: Role,
) -> Result<ModelActor, String> {
    use crate::actors::graph::{CompileEnv, Compiled, GraphDef};
    let graph = actor
        .definition
        .graph
        .as_ref()
        .ok_or_else(|| format!("graph actor {} has no graph", actor.name))
        .and_then(GraphDef::from_value)?;
    let phase = plan.phase();
    let client = |m: &str| connect(engine, plan, m);
    let resolve = |a: &str| {
        actor_registry::resolve(engine.store(), engine.providers(), a).map_err(|e| e.to_string())
    };
    let skill_tools = |s: &[String]| -> Result<Vec<String>, String> {
        if s.iter().any(|n| n.contains('/')) {
            Ok(crate::skill_registry::union(engine.store(), s)
                .map_err(|e| e.to_string())?
                .tools
                .into_iter()
                .map(|t| t.name)
                .collect())
        } else {
            crate::skills::offered_tools(s, phase).map_err(|e| e.to_string())
        }
    };
    let template = |own: Option<&str>| Some(prompts::role_template(role, own).to_string());
    let compiled = Compiled::compile(
        &actor.name,
        &graph,
        &CompileEnv {
            client: &client,
            actor: &resolve,
            skill_tools: &skill_tools,
            template: &template,
        },
    )?;
    let first = compiled.clients().first().map(|c| (*c).clone()).ok_or_else(|| {
        format!(
            "graph actor {} has no llm node, so no model plays its part in the plan; add an llm node",
            actor.name
        )
    })?;
    let mut limits = Limits::default();
    if let Some(t) = actor.definition.limits.max_turns {
        limits.max_turns = t;
    }
    limits.token_budget = actor.definition.limits.max_tokens;
    Ok(ModelActor {
        name: actor.name.clone(),
        client: first,
        template: String::new(),
        limits,
        sampling: Default::default(),
        max_tokens: None,
        graph: Some(Box::new(compiled)),
    })
}

/// What a run starts from.
#[derive(Default)]
pub(crate) struct Input {
    /// Values for the system prompt template.
    pub context: serde_json::Value,
    /// The user prompt (ignored when `history` is not empty).
    pub prompt: String,
    /// A conversation to continue (a paused run); empty for a new run.
    pub history: Vec<crate::actors::messages::Message>,
    /// The step's journal: each call is recorded (with its accounting row) as it happens,
    /// and the run's calls are not recorded again when it ends.
    pub journal: Option<std::sync::Arc<dyn runtime::RunJournal>>,
    /// Where a journaled run continues ([`RunRequest::resume_at`]).
    pub resume_at: Option<runtime::ResumePoint>,
    /// A graph actor's journal ([`RunRequest::graph`]): its nodes and each node's calls are
    /// recorded (with their accounting rows) as they happen.
    pub graph: Option<runtime::GraphJournalAt>,
}

/// Runs `actor` with `tools` for a plan, cancelling the run when the user interrupts, the
/// plan's cancellation is requested or its lease is lost; records the model calls under
/// `decision` (if any). A non-empty `input.history` continues that conversation instead of
/// starting from `input.prompt`. Returns the run, or the error message when it could not start.
///
/// # Errors
/// A message when the prompt does not render or the async runtime cannot start.
pub(crate) fn run<H: ToolHost>(
    engine: &mut Lifecycle,
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
        mut journal,
        resume_at,
        graph,
    } = input;
    let ctx = CallContext {
        run_id: Id::generate(),
        plan_id: Some(*plan_id),
        decision_id: decision.map(Id::to_string),
        actor: actor.name.clone(),
    };
    if journal.is_none() && graph.is_none() && actor.graph.is_some() {
        // A graph run without a journal of its own records its calls as they are made.
        match crate::lifecycle::journal::CallRecorder::open(
            engine.store().location(),
            ctx.clone(),
            engine.providers().to_vec(),
            actor.client.provider().clone(),
        ) {
            Ok(r) => journal = Some(std::sync::Arc::new(r)),
            Err(e) => tracing::warn!(error = %e, "the graph's calls are recorded when it ends"),
        }
    }
    let journaled = journal.is_some() || graph.is_some();
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
        journal,
        resume_at,
        graph,
    };
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("cannot start the async runtime: {e}"))?;
    let cancel = CancellationToken::new();
    let done = CancellationToken::new();
    let db = engine.store().location().clone();
    let observer = engine.observer();
    let watcher = async {
        let watch_store = db.open().ok();
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
                let live = |e| {
                    if let Some(kind) = live_kind(&actor.name, e) {
                        crate::events::live::publish(*plan_id, kind);
                    }
                };
                let r = match &actor.graph {
                    Some(graph) => {
                        crate::actors::graph::run_graph(graph, &request, tools, &cancel, &live)
                            .await
                    }
                    None => {
                        runtime::run_actor(&actor.client, &request, tools, &cancel, &live).await
                    }
                };
                done.cancel();
                r
            },
            watcher
        )
    });
    let run = result.map_err(|e| e.to_string())?;
    if journaled {
        return Ok(run);
    }
    let rows = accounting::call_rows_for(&ctx, engine.providers(), actor.client.provider(), &run);
    if let Err(e) = engine.store_mut().record_model_calls(&rows) {
        tracing::warn!(error = %e, "model calls could not be recorded");
    }
    Ok(run)
}

/// The live form of an actor's progress event for `plan` run by `actor`; `None` for what a
/// face does not show live (token counts, truncation notes: those are stored with the call).
fn live_kind(actor: &str, event: runtime::ActorEvent) -> Option<LiveKind> {
    use runtime::ActorEvent as A;
    let actor = actor.to_owned();
    Some(match event {
        A::TurnStarted { turn } => LiveKind::TurnStarted { actor, turn },
        A::TextDelta { turn, text } => LiveKind::TextDelta { actor, turn, text },
        A::Retrying {
            attempt, reason, ..
        } => LiveKind::Retrying {
            actor,
            attempt,
            reason,
        },
        A::ToolCallStarted {
            call_id,
            name,
            arguments,
            ..
        } => LiveKind::ToolCallStarted {
            actor,
            call_id,
            name,
            arguments,
        },
        A::ToolCallFinished {
            call_id,
            name,
            is_error,
            duration_ms,
            ..
        } => LiveKind::ToolCallFinished {
            actor,
            call_id,
            name,
            is_error,
            duration_ms,
        },
        A::Usage { .. } | A::Truncated { .. } => return None,
    })
}

#[cfg(test)]
mod live_tests {
    use super::*;

    #[test]
    fn actor_text_deltas_and_tool_calls_become_live_events() {
        use crate::actors::runtime::ActorEvent;
        let text = live_kind(
            "openai/m",
            ActorEvent::TextDelta {
                turn: 2,
                text: "Hel".into(),
            },
        );
        assert_eq!(
            text,
            Some(LiveKind::TextDelta {
                actor: "openai/m".into(),
                turn: 2,
                text: "Hel".into()
            })
        );
        let started = live_kind(
            "openai/m",
            ActorEvent::ToolCallStarted {
                turn: 1,
                call_id: "c1".into(),
                name: "file_read".into(),
                arguments: "{\"path\":\"a\"}".into(),
            },
        );
        assert!(
            matches!(started, Some(LiveKind::ToolCallStarted { ref arguments, .. }) if arguments == "{\"path\":\"a\"}")
        );
    }
}
