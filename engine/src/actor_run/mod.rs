//! Running one model actor in isolation (`agents actor run [--skill S]... [--resource R]
//! PROVIDER/MODEL PROMPT`, spec section 06).
//!
//! The actor gets tools (every built-in tool, or the tools of the named skills) and works in a
//! sandbox: a fresh empty one, or a sandbox of a registered resource (a git checkout at its
//! HEAD, or a copy of a directory). The resource itself is never written. Every tool call goes
//! through the tool runner ([`RunnerHost`]) exactly as in a plan's Execute phase: validated,
//! policy-checked, logged with its changes.
//!
//! So that the runner, sandboxes and the execution log work unchanged, the run is recorded as
//! a `plans` row of kind `actor_run` (migration 009): listings leave it out, the lifecycle
//! refuses to drive it, and `agents plan diff RUN` / `plan sandbox` commands work on it. The
//! run ends at execute/complete (execute/errored when the model failed, cancelled when the
//! user pressed Ctrl-C); its sandbox stays until `agents plan cleanup`.
//!
//! [`contexts`]: named, persisted conversations a run continues. This module sits above
//! `lifecycle`: the tools it offers are built by [`crate::lifecycle::offer`].

pub mod contexts;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use serde::Serialize;
use serde_json::json;
use tokio_util::sync::CancellationToken;

use crate::actors::accounting::{self, CallContext};
use crate::actors::graph::{CompileEnv, Compiled, GraphDef, run_graph};
use crate::actors::messages::{Sampling, Usage};
use crate::actors::runtime::{self, ActorRun, Limits, RunRequest, RuntimeError, Stop};
use crate::config::Config;
use crate::domain::id::Id;
use crate::domain::lifecycle::{Phase, ProcessingState};
use crate::domain::plan::Plan;
use crate::domain::resource::Resource;
use crate::lifecycle::host::RunnerHost;
use crate::paths::Paths;
use crate::providers::{ClientOptions, ModelRef, ProviderClient, ProviderError};
use crate::sandbox::diff::{DiffRequest, FileStatus, sandbox_diff};
use crate::sandbox::{SandboxError, SandboxTarget, Sandboxes, TargetKind};
use crate::skills::{self, SkillError, ToolName};
use crate::store::{Store, StoreError};
use crate::tools::runner::Policy;

/// The resource name of a fresh, empty sandbox.
pub const SCRATCH: &str = "scratch";

/// The system prompt of an isolated run that has tools.
const SYSTEM: &str = "You are running in isolation with tools. Your file, search, git and shell \
tools work inside a sandbox: paths are relative to its root, and nothing outside it can be \
changed. Use the tools when the task needs them, then answer.";

/// Where the run works.
#[derive(Debug, Clone)]
pub enum Workspace {
    /// A fresh, empty directory.
    Fresh,
    /// A sandbox of a registered resource.
    Resource {
        /// The resource's name.
        name: String,
        /// What to sandbox.
        kind: TargetKind,
    },
}

impl Workspace {
    /// The sandbox source for a registered resource: a git checkout at its HEAD commit, or a
    /// directory.
    ///
    /// # Errors
    /// A message when the resource has no path, is of a type that cannot be sandboxed, or
    /// its checkout has no commit.
    pub fn of_resource(resource: &Resource) -> Result<Self, String> {
        let Some(path) = resource.prop("path") else {
            return Err(format!(
                "resource {} ({}) has no path, so it cannot be sandboxed",
                resource.name, resource.type_name
            ));
        };
        let kind = match resource.handler_type() {
            "git-checkout" => {
                let (commit, _) = crate::sandbox::bases::head_of(Path::new(path))
                    .map_err(|m| format!("resource {}: {m}", resource.name))?;
                TargetKind::GitCheckout {
                    repo: PathBuf::from(path),
                    base_commit: commit,
                }
            }
            "fs-directory" | "fs-mount" => TargetKind::Directory {
                root: PathBuf::from(path),
            },
            other => {
                return Err(format!(
                    "resource {} is a `{other}`, which cannot be sandboxed; use a git-checkout or fs-directory resource",
                    resource.name
                ));
            }
        };
        Ok(Workspace::Resource {
            name: resource.name.clone(),
            kind,
        })
    }
}

/// What to run.
#[derive(Debug, Clone)]
pub struct OneShot {
    /// `PROVIDER/MODEL`, or a registered LLM actor.
    pub actor: String,
    /// The user prompt.
    pub prompt: String,
    /// Sampling temperature.
    pub temperature: Option<f32>,
    /// Skills whose tools are offered; none: the actor's skills, else every built-in tool.
    pub skills: Vec<String>,
    /// Where the tools work.
    pub workspace: Workspace,
    /// Client options (timeouts, retry delays).
    pub options: ClientOptions,
    /// `--unsafe`: allow tools marked unsafe for this run.
    pub unsafe_tools: bool,
    /// `--context NAME`: the named context whose conversation the run continues and to
    /// which it is saved.
    pub context: Option<String>,
    /// `--load-context NAME|FILE`: a context (or an exported context file) whose
    /// conversation the run sees; it is not changed.
    pub load_context: Option<String>,
    /// `--context-dir DIR`: text files stored in the `--context` context.
    pub context_dir: Option<PathBuf>,
}

/// The sandbox a run worked in.
#[derive(Debug, Clone, Serialize)]
pub struct RunSandbox {
    /// The resource it sandboxes (`scratch` for a fresh one).
    pub resource: String,
    /// `git_worktree` or `copy_on_write`.
    pub strategy: String,
    /// The directory the tools saw.
    pub path: String,
    /// What it was made from (`None` for a fresh sandbox).
    pub source: Option<String>,
}

/// One file the run changed in its sandbox.
#[derive(Debug, Clone, Serialize)]
pub struct ChangedFile {
    /// Path relative to the sandbox root.
    pub path: String,
    /// How it changed.
    pub status: FileStatus,
}

/// The outcome of a run whose calls were recorded.
#[derive(Debug, Clone, Serialize)]
pub struct OneShotResult {
    /// The run's id: its `plans` row (kind `actor_run`) and the `run_id` of its `model_calls`.
    pub run_id: Id,
    /// `PROVIDER/MODEL`.
    pub actor: String,
    /// Provider name.
    pub provider: String,
    /// Model name.
    pub model: String,
    /// The tools offered, by name.
    pub tools: Vec<String>,
    /// The run (answer, stop reason, tool calls, model calls, usage).
    pub run: ActorRun,
    /// Tokens over all calls.
    pub usage: Usage,
    /// Cost in US dollars; `None` ("unknown") without configured prices.
    pub cost_usd: Option<f64>,
    /// Where the tools worked.
    pub sandbox: RunSandbox,
    /// What changed in the sandbox, against what it was made from.
    pub files_changed: Vec<ChangedFile>,
}

/// Why a one-shot run could not start or be recorded.
#[derive(Debug, thiserror::Error)]
pub enum OneShotError {
    /// The actor name, provider or key is not usable.
    #[error(transparent)]
    Provider(#[from] ProviderError),
    /// A skill does not resolve.
    #[error(transparent)]
    Skill(#[from] SkillError),
    /// A custom skill does not resolve.
    #[error(transparent)]
    CustomSkill(#[from] crate::skill_registry::SkillRegError),
    /// The skills' external tools could not be prepared (a sandbox or the MCP runtime).
    #[error("{0}")]
    Tools(String),
    /// The prompt does not render.
    #[error(transparent)]
    Runtime(#[from] RuntimeError),
    /// The calls could not be recorded.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The sandbox could not be made.
    #[error(transparent)]
    Sandbox(#[from] SandboxError),
    /// The actor name does not resolve to a registered actor or a provider's model.
    #[error(transparent)]
    Actor(#[from] crate::registry::actors::ActorError),
    /// The actor exists but cannot run in isolation (an offline built-in, a graph that does
    /// not compile).
    #[error("{0}")]
    NotSupported(String),
    /// A context named by `--context` or `--load-context` is not usable.
    #[error(transparent)]
    Context(#[from] contexts::ContextError),
    /// The async runtime or the sandbox directory could not be made.
    #[error("{0}")]
    Io(#[from] std::io::Error),
}

/// How the actor thinks: one model, or a graph of nodes.
enum Brain {
    Model(Box<ProviderClient>),
    Graph(Box<Compiled>),
}

/// A resolved actor: a provider's model, or a registered LLM actor with its model, prompt,
/// skills, options and limits, or a registered graph actor.
struct Resolved {
    name: String,
    model: Option<String>,
    graph: Option<GraphDef>,
    system_prompt: Option<String>,
    skills: Vec<String>,
    sampling: Sampling,
    max_tokens: Option<u32>,
    limits: Limits,
    unsafe_tools: bool,
    memory: crate::domain::actor::ActorMemory,
}

/// Resolves the actor name: `PROVIDER/MODEL`, or a registered actor (its skills are the
/// default tools; `--skill`s replace them; `--temperature` overrides its option).
fn resolve_actor(
    store: &Store,
    providers: &[crate::config::Provider],
    request: &OneShot,
) -> Result<Resolved, OneShotError> {
    use crate::registry::actors::{self as registry, ActorRef, ActorType};
    // A name that is not `NAMESPACE/NAME` is a malformed model reference.
    if !request.actor.contains('/') {
        ModelRef::parse(&request.actor)?;
    }
    match registry::resolve(store, providers, &request.actor)? {
        ActorRef::Provider { name, .. } => Ok(Resolved {
            name: name.clone(),
            model: Some(name),
            graph: None,
            system_prompt: None,
            skills: request.skills.clone(),
            sampling: Sampling::default(),
            max_tokens: None,
            limits: Limits::default(),
            unsafe_tools: false,
            memory: Default::default(),
        }),
        ActorRef::Custom { actor } => {
            let def = actor.definition;
            let graph = match (&def.graph, def.actor_type) {
                (Some(g), ActorType::Graph) => {
                    Some(GraphDef::from_value(g).map_err(OneShotError::NotSupported)?)
                }
                _ => None,
            };
            if graph.is_none() && def.model.is_none() {
                return Err(OneShotError::NotSupported(format!(
                    "actor {} names no model",
                    actor.name
                )));
            }
            let mut limits = Limits::default();
            if let Some(t) = def.limits.max_turns {
                limits.max_turns = t;
            }
            limits.token_budget = def.limits.max_tokens;
            Ok(Resolved {
                name: actor.name,
                model: def.model,
                graph,
                system_prompt: def.system_prompt,
                skills: if request.skills.is_empty() {
                    def.skills
                } else {
                    request.skills.clone()
                },
                sampling: def.options.sampling(),
                max_tokens: def.options.max_tokens,
                limits,
                unsafe_tools: def.unsafe_,
                memory: def.memory,
            })
        }
        ActorRef::Builtin { name, .. } => Err(OneShotError::NotSupported(format!(
            // A command inside a sentence stays (D-commands-2): it explains the error rather than suggesting the next step.
            "{name} is an offline built-in actor that works inside plans (`agents plan use`); `actor run` runs model actors"
        ))),
    }
}

/// Connects the actor: a client for its model, or its graph compiled against the providers,
/// the registered actors and the skills. Returns the client whose provider names the run
/// (a graph's first llm node).
fn connect(
    store: &Store,
    providers: &[crate::config::Provider],
    actor: &Resolved,
    env: &dyn Fn(&str) -> Option<String>,
    options: &ClientOptions,
) -> Result<(Brain, ProviderClient), OneShotError> {
    if let Some(model) = &actor.model
        && actor.graph.is_none()
    {
        let client =
            ProviderClient::connect(providers, &ModelRef::parse(model)?, env, options.clone())?;
        return Ok((Brain::Model(Box::new(client.clone())), client));
    }
    let graph = actor
        .graph
        .as_ref()
        .expect("a resolved actor has a model or a graph");
    let client = |m: &str| -> Result<ProviderClient, String> {
        let r = ModelRef::parse(m).map_err(|e| e.to_string())?;
        ProviderClient::connect(providers, &r, env, options.clone()).map_err(|e| e.to_string())
    };
    let resolve =
        |a: &str| crate::registry::actors::resolve(store, providers, a).map_err(|e| e.to_string());
    let skill_tools = |s: &[String]| -> Result<Vec<String>, String> {
        if s.iter().any(|n| n.contains('/')) {
            Ok(crate::skill_registry::union(store, s)
                .map_err(|e| e.to_string())?
                .tools
                .into_iter()
                .map(|t| t.name)
                .collect())
        } else {
            Ok(skills::offered_tools(s, Phase::Execute)
                .map_err(|e| e.to_string())?
                .into_iter()
                .map(|t| t.to_string())
                .collect())
        }
    };
    let template = |own: Option<&str>| own.map(str::to_string);
    let compiled = Compiled::compile(
        &actor.name,
        graph,
        &CompileEnv {
            client: &client,
            actor: &resolve,
            skill_tools: &skill_tools,
            template: &template,
        },
    )
    .map_err(OneShotError::NotSupported)?;
    let first = compiled
        .clients()
        .first()
        .map(|c| (*c).clone())
        .ok_or_else(|| {
            OneShotError::NotSupported(format!(
                "graph actor {} has no llm node, so no model to run; add an llm node",
                actor.name
            ))
        })?;
    Ok((Brain::Graph(Box::new(compiled)), first))
}

/// The built-in tools offered: those of the actor's skills (built-in names of custom skills),
/// else every built-in tool.
fn offered_builtins(store: &Store, actor: &Resolved) -> Result<Vec<ToolName>, OneShotError> {
    if actor.skills.iter().any(|s| s.contains('/')) {
        Ok(crate::skill_registry::union(store, &actor.skills)?
            .tools
            .into_iter()
            .filter(|t| crate::tools::builtin(&t.name).is_some())
            .map(|t| t.name)
            .collect())
    } else {
        Ok(skills::offered_tools(&actor.skills, Phase::Execute)?)
    }
}

/// The run's `plans` row, inserted before the first model call.
fn insert_run_row(
    store: &mut Store,
    actor: &Resolved,
    request: &OneShot,
) -> Result<Plan, OneShotError> {
    let now = jiff::Timestamp::now();
    let mut plan = Plan::new("actor-run", format!("actor run: {}", actor.name), now);
    plan.description = Some(request.prompt.clone());
    plan.execution_actor = Some(actor.name.clone());
    plan.status.phase = Phase::Execute;
    plan.status.state = ProcessingState::Processing;
    plan.started_at = Some(now);
    store.insert_actor_run_plan(&plan)?;
    Ok(plan)
}

/// The run's sandbox: registered and created. Returns the sandboxes, the sandbox, the
/// resource name and what it was made from.
fn prepare_sandbox(
    store: &mut Store,
    paths: &Paths,
    run_id: &Id,
    workspace: &Workspace,
) -> Result<(Sandboxes, crate::sandbox::Sandbox, String, Option<String>), OneShotError> {
    let sandboxes = Sandboxes::new(paths);
    let (resource, kind, source) = match workspace {
        Workspace::Fresh => {
            let empty = sandboxes.plan_dir(run_id).join("empty");
            std::fs::create_dir_all(&empty)?;
            (
                SCRATCH.to_string(),
                TargetKind::Directory { root: empty },
                None,
            )
        }
        Workspace::Resource { name, kind } => (
            name.clone(),
            kind.clone(),
            Some(kind.source_path().display().to_string()),
        ),
    };
    sandboxes.register_target(
        store,
        &SandboxTarget {
            plan_id: *run_id,
            resource_name: resource.clone(),
            alias: None,
            kind,
            read_only: false,
        },
    )?;
    let sandbox = sandboxes.ensure(store, run_id, &resource)?;
    Ok((sandboxes, sandbox, resource, source))
}

/// The tool host of the run: the runner, limited to `tools`, with the external tools of
/// custom skills.
fn build_host(
    store: &mut Store,
    sandboxes: &Sandboxes,
    plan: &Plan,
    actor: &Resolved,
    unsafe_flag: bool,
    tools: Vec<ToolName>,
    cancel: &Arc<AtomicBool>,
) -> Result<RunnerHost, OneShotError> {
    let mut policy = Policy::for_plan(plan);
    policy.allow_unsafe_tools = actor.unsafe_tools || unsafe_flag;
    let host = RunnerHost::new(
        store.reopen()?,
        sandboxes.clone(),
        plan.plan_id,
        policy.clone(),
        Arc::clone(cancel),
    )
    .only(tools);
    if !actor.skills.iter().any(|s| s.contains('/')) {
        return Ok(host);
    }
    let offer = crate::lifecycle::offer::Offer::build(
        store,
        sandboxes,
        &plan.plan_id,
        &policy,
        &actor.skills,
        true,
    )
    .map_err(OneShotError::Tools)?;
    Ok(host.with_offer(offer))
}

/// Drives the run on `rt`, polling `interrupted` every 100 ms.
fn drive(
    rt: &tokio::runtime::Runtime,
    brain: &Brain,
    request: &RunRequest,
    host: &RunnerHost,
    cancel: &Arc<AtomicBool>,
    interrupted: &(dyn Fn() -> bool + Send + Sync),
) -> Result<ActorRun, RuntimeError> {
    let token = CancellationToken::new();
    let done = CancellationToken::new();
    let (result, ()) = rt.block_on(async {
        tokio::join!(
            async {
                let r = match brain {
                    Brain::Model(client) => {
                        runtime::run_actor(client, request, host, &token, &|_| {}).await
                    }
                    Brain::Graph(graph) => run_graph(graph, request, host, &token, &|_| {}).await,
                };
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
                        cancel.store(true, Ordering::SeqCst);
                        token.cancel();
                        break;
                    }
                }
            }
        )
    });
    result
}

/// Runs `request` and records it: the run's row, its sandbox, its tool calls (by the tool
/// runner, as they happen) and its model calls (failed ones included). A provider failure
/// during the run is not an `Err`: it is the run's [`Stop::Failed`]. `interrupted` is polled
/// every 100 ms; once true the run stops as [`Stop::Cancelled`] (a tool call in flight
/// finishes; a shell command is killed). A graph actor runs its graph
/// ([`crate::actors::graph`]) through the same host.
///
/// # Errors
/// [`OneShotError`] when the run cannot start (bad name, unknown provider, missing key,
/// unknown skill, sandbox failure) or cannot be recorded.
pub fn run_model_actor(
    config: &Config,
    store: &mut Store,
    paths: &Paths,
    request: &OneShot,
    env: impl Fn(&str) -> Option<String>,
    interrupted: &(dyn Fn() -> bool + Send + Sync),
) -> Result<OneShotResult, OneShotError> {
    let providers = config.providers();
    let actor = resolve_actor(store, &providers, request)?;
    let (brain, client) = connect(store, &providers, &actor, &env, &request.options)?;
    let history = contexts::history_for(store, request, &actor.memory)?;
    let tools = offered_builtins(store, &actor)?;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let mut plan = insert_run_row(store, &actor, request)?;
    let run_id = plan.plan_id;
    let (sandboxes, sandbox, resource, source) =
        prepare_sandbox(store, paths, &run_id, &request.workspace)?;
    let cancel = Arc::new(AtomicBool::new(false));
    let host = build_host(
        store,
        &sandboxes,
        &plan,
        &actor,
        request.unsafe_tools,
        tools,
        &cancel,
    )?;
    let offered = host.names();
    let run_request = RunRequest {
        system_template: actor.system_prompt.clone().or_else(|| {
            (!offered.is_empty() && matches!(brain, Brain::Model(_))).then(|| SYSTEM.to_string())
        }),
        context: json!({"actor": actor.name, "prompt": request.prompt, "tools": offered}),
        prompt: request.prompt.clone(),
        sampling: Sampling {
            temperature: request.temperature.or(actor.sampling.temperature),
            ..actor.sampling.clone()
        },
        max_tokens: actor.max_tokens,
        limits: actor.limits,
        stream: true,
        history,
        journal: None,
        resume_at: None,
        graph: None,
    };
    let run = drive(&rt, &brain, &run_request, &host, &cancel, interrupted)?;
    let ctx = CallContext {
        run_id,
        plan_id: Some(run_id),
        decision_id: None,
        actor: actor.name.clone(),
    };
    store.record_model_calls(&accounting::call_rows_for(
        &ctx,
        &providers,
        client.provider(),
        &run,
    ))?;
    contexts::save_run(store, request, &actor.name, &run_id, &run)?;
    let files_changed = sandbox_diff(&sandbox, &DiffRequest::default())?
        .into_iter()
        .map(|f| ChangedFile {
            path: f.path,
            status: f.status,
        })
        .collect();
    plan.status.state = match &run.stop {
        Stop::Failed { error } => {
            tracing::warn!(actor = %actor.name, kind = error.kind(), "actor run failed");
            ProcessingState::Errored
        }
        Stop::Cancelled => ProcessingState::Cancelled,
        _ => ProcessingState::Complete,
    };
    store.update_plan_status(&run_id, plan.status, jiff::Timestamp::now())?;
    Ok(OneShotResult {
        run_id,
        actor: actor.name,
        provider: client.provider().name.clone(),
        model: client.model().to_string(),
        tools: offered,
        usage: run.usage,
        cost_usd: accounting::run_cost_usd_for(&providers, client.provider(), &run),
        run,
        sandbox: RunSandbox {
            resource,
            strategy: sandbox.record.strategy.as_str().to_string(),
            path: sandbox.work_dir().display().to_string(),
            source,
        },
        files_changed,
    })
}
