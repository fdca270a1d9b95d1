//! The lifecycle engine (spec sections 08 to 13 and 27): takes a plan from
//! its action to applied changes, pausing for a human exactly where the frozen automation
//! profile says, and surviving errors, interruptions and crashes.
//!
//! One module per job:
//! - [`gates`]: what the plan's frozen profile lets happen without a human.
//! - [`state`]: every state change with its event, in one transaction.
//! - [`apply`]: the Apply phase (checks, merged-tree validations, journal, commit).
//! - [`approvals`]: raising and answering the places a human must act.
//! - [`bases`]: what each target resource looked like at `plan use`.
//! - [`checklist`]: the offline strategist `builtin/checklist-strategist`.
//! - [`execute::children`]: child plans (spawn steps, parallel groups, merge-back).
//! - [`strategize`]: the Strategize phase (root decision, invariants, strategy actor).
//! - [`execute`]: the Execute phase (sandboxes, steps, checkpoints, resume).
//! - [`execute::script_executor`]: the offline executor `builtin/script-executor`.
//! - [`validations`]: the projects' validation commands.
//! - [`cancel`]: `plan cancel`, of a driven plan or one nobody drives, and its children.
//! - [`driver`]: runs a plan until a gate, a pause or a terminal state; owns the lease.
//! - [`driven`]: what driving returns ([`driven::Driven`], [`driven::Stopped`]).
//! - [`ended`]: how a phase run ended ([`ended::Ended`]).
//! - [`trees`]: the trees a plan's changes are reviewed and applied as.
//! - [`stop`]: the stop check (a requested cancel, Ctrl-C) and recording why a run stopped.
//! - [`report`]: what `plan status` and `plan errors` show.
//!
//! The engine knows no terminal: progress leaves it as [`EngineEvent`]s through an
//! [`Observer`], which also tells it when the user pressed Ctrl-C.

pub mod apply;
pub mod approvals;
pub mod cancel;
pub mod checklist;
pub mod driven;
pub mod driver;
pub mod ended;
pub mod estimator;
pub mod execute;
pub mod gates;
pub(crate) mod graph_journal;
pub mod host;
mod invariant_actor;
pub mod invariant_checks;
pub(crate) mod journal;
pub(crate) mod model;
pub mod offer;
pub mod report;
pub mod revision;
pub mod rollback;
pub mod state;
pub mod stop;
pub mod strategize;
pub mod takeover;
pub mod transitions;
pub mod trees;
pub mod validations;

use crate::config::Provider;
use crate::domain::{Id, Phase, Plan, ProcessingState};
use crate::events::{self, EngineEvent};
use crate::lease::{self, LeaseError};
use crate::paths::Paths;
use crate::store::{Store, StoreError};

pub use crate::config::DEFAULT_MAX_PARALLEL_CHILDREN;

/// Receives what the engine does while it drives a plan.
pub trait Observer: Send + Sync {
    /// An event was committed (in sequence order).
    fn event(&self, _event: &EngineEvent) {}
    /// A short progress line for a spinner (`Strategize: recording decisions`).
    fn progress(&self, _message: &str) {}
    /// Whether the user asked to stop (Ctrl-C); the engine then stops at the next safe point
    /// and leaves the plan resumable.
    fn interrupted(&self) -> bool {
        false
    }
    /// Who asked to stop, as the `plan_interrupted` event records it.
    fn interrupted_by(&self) -> String {
        "user (Ctrl-C)".to_string()
    }
    /// Whether a stop hands the plan over: the server driving it is stopping, so another
    /// instance of it may resume the plan (spec section 21); a user's Ctrl-C does not.
    fn hands_over(&self) -> bool {
        false
    }
}

/// An observer that ignores everything.
#[derive(Debug, Clone, Copy, Default)]
pub struct Quiet;

impl Observer for Quiet {}

/// Errors of the lifecycle engine. Failures of the work itself (an actor that fails, a step
/// that errors) are not errors of the engine: they move the plan to `errored` and come back
/// as a [`driven::Stopped`].
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// No plan with that id.
    #[error("plan {0} not found")]
    NotFound(Id),
    /// Another live process drives the plan.
    #[error("plan is being run by pid {pid} on {host} ({kind})")]
    Busy {
        /// The plan.
        plan_id: Id,
        /// The owner's pid.
        pid: u32,
        /// The owner's host.
        host: String,
        /// What it is doing.
        kind: String,
    },
    /// The operation does not fit the plan's phase and state.
    #[error("{message}")]
    WrongState {
        /// The plan's phase.
        phase: Phase,
        /// The plan's state.
        state: ProcessingState,
        /// What is wrong and what would fit.
        message: String,
        /// Next steps that would help.
        hints: Vec<crate::domain::Next>,
    },
    /// An argument (an approval id, an option number) is not acceptable.
    #[error("{0}")]
    Invalid(String),
    /// A phase gate answered with an option or guidance: a gate is approved by taking the
    /// step `approve` (running the gated phase) or declined with a reason.
    #[error(
        "approval {approval_id} is a phase gate: it is approved by running its phase, or declined with a reason"
    )]
    GateAnswer {
        /// The gate (`apr_...`).
        approval_id: String,
        /// The step that approves it.
        approve: crate::domain::Next,
    },
    /// A budget approval's `raise` answered without the new limit (`max-cost-usd` or
    /// `max-tokens`).
    #[error("approval {approval_id} needs the new limit: a cost in USD or a number of tokens")]
    BudgetLimitMissing {
        /// The budget approval (`apr_...`).
        approval_id: String,
    },
    /// An approval with that id does not exist.
    #[error("approval {0} not found")]
    ApprovalNotFound(String),
    /// A sandbox operation failed.
    #[error("sandbox: {0}")]
    Sandbox(String),
    /// Another process is applying a plan to the same resource.
    #[error("another plan is being applied to {resource} right now")]
    ResourceBusy {
        /// The resource's name.
        resource: String,
    },
    /// A feature not built yet.
    #[error("{0}: not yet supported")]
    NotYetSupported(String),
    /// The database failed.
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl From<LeaseError> for RunError {
    fn from(e: LeaseError) -> Self {
        match e {
            LeaseError::Held {
                plan_id,
                pid,
                host,
                kind,
            } => RunError::Busy {
                plan_id,
                pid,
                host,
                kind,
            },
            LeaseError::Store(s) => RunError::Store(s),
        }
    }
}

impl From<rusqlite::Error> for RunError {
    fn from(e: rusqlite::Error) -> Self {
        RunError::Store(StoreError::Sqlite(e))
    }
}

/// A [`RunError::WrongState`] for `plan` at its phase and state.
pub(crate) fn wrong_state(
    plan: &Plan,
    message: String,
    hints: Vec<crate::domain::Next>,
) -> RunError {
    RunError::WrongState {
        phase: plan.phase(),
        state: plan.state(),
        message,
        hints,
    }
}

/// Reads an environment variable (API keys); `None` when unset.
pub type EnvLookup = std::sync::Arc<dyn Fn(&str) -> Option<String> + Send + Sync>;

/// Re-decides a decision and its downstream subtree with guidance and drives the plan on
/// (the revert correction, spec section 15), for `auto_strategy_revision` (spec section 27).
/// The correction layer sits above the lifecycle, so the face that opens the engine hands
/// it in ([`Lifecycle::with_reviser`]); `Ok(None)` when the plan was not driven afterwards.
pub type Reviser = fn(&mut Lifecycle, &Id, &str) -> Result<Option<driven::Driven>, RunError>;

/// The lifecycle engine at work on one database connection: a store, where files live, the
/// configured providers and an observer. The API's [`crate::api::Engine`] (the engine a face
/// holds) opens one per operation ([`crate::api::Engine::lifecycle`]).
pub struct Lifecycle {
    store: Store,
    paths: Paths,
    providers: Vec<Provider>,
    env: EnvLookup,
    client_options: crate::providers::ClientOptions,
    observer: std::sync::Arc<dyn Observer>,
    max_parallel_children: usize,
    streamed: i64,
    log: Vec<EngineEvent>,
    apply_request: crate::review::partial::ApplyRequest,
    reviser: Option<Reviser>,
}

/// Everything needed to open another [`Lifecycle`] on the same data directory in another thread
/// (child plans run on their own threads, each with its own database connection).
#[derive(Clone)]
pub(crate) struct LifecycleSeed {
    db: crate::store::Location,
    paths: Paths,
    providers: Vec<Provider>,
    env: EnvLookup,
    client_options: crate::providers::ClientOptions,
    observer: std::sync::Arc<dyn Observer>,
    max_parallel_children: usize,
    reviser: Option<Reviser>,
}

impl LifecycleSeed {
    /// Opens the engine (a new connection to the same database).
    ///
    /// # Errors
    /// [`StoreError`] opening the database.
    pub(crate) fn open(&self) -> Result<Lifecycle, StoreError> {
        let store = self.db.open()?;
        let streamed = events::last_seq(&store)?;
        Ok(Lifecycle {
            store,
            paths: self.paths.clone(),
            providers: self.providers.clone(),
            env: std::sync::Arc::clone(&self.env),
            client_options: self.client_options.clone(),
            observer: std::sync::Arc::clone(&self.observer),
            max_parallel_children: self.max_parallel_children,
            streamed,
            log: Vec::new(),
            apply_request: Default::default(),
            reviser: self.reviser,
        })
    }

    /// The same seed with another observer.
    pub(crate) fn with_observer(mut self, observer: std::sync::Arc<dyn Observer>) -> Self {
        self.observer = observer;
        self
    }
}

impl std::fmt::Debug for Lifecycle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Lifecycle")
            .field("store", self.store.location())
            .field("streamed", &self.streamed)
            .finish_non_exhaustive()
    }
}

impl Lifecycle {
    /// An engine over an open store. Events committed before this call are history: only
    /// later ones reach the observer.
    ///
    /// # Errors
    /// [`StoreError`] reading the last event sequence.
    pub fn new(
        store: Store,
        paths: Paths,
        providers: Vec<Provider>,
        observer: Box<dyn Observer>,
    ) -> Result<Self, StoreError> {
        let streamed = events::last_seq(&store)?;
        Ok(Self {
            store,
            paths,
            providers,
            env: std::sync::Arc::new(|name| std::env::var(name).ok().filter(|v| !v.is_empty())),
            client_options: Default::default(),
            observer: std::sync::Arc::from(observer),
            max_parallel_children: DEFAULT_MAX_PARALLEL_CHILDREN,
            streamed,
            log: Vec::new(),
            apply_request: Default::default(),
            reviser: None,
        })
    }

    /// Replaces the observer with one shared with other engines (the API's handle clones).
    pub(crate) fn with_shared_observer(mut self, observer: std::sync::Arc<dyn Observer>) -> Self {
        self.observer = observer;
        self
    }

    /// Replaces how environment variables (API keys) are read.
    pub fn with_env(
        mut self,
        env: impl Fn(&str) -> Option<String> + Send + Sync + 'static,
    ) -> Self {
        self.env = std::sync::Arc::new(env);
        self
    }

    /// The engine with `reviser` for `auto_strategy_revision` (see [`Reviser`]).
    pub fn with_reviser(mut self, reviser: Reviser) -> Self {
        self.reviser = Some(reviser);
        self
    }

    /// The reviser handed in, if any (without one, `auto_strategy_revision` is not acted on).
    pub fn reviser(&self) -> Option<Reviser> {
        self.reviser
    }

    /// Sets how many children of one `subplan_parallel_spawn` group run at once (config key
    /// `max-parallel-children`, default [`DEFAULT_MAX_PARALLEL_CHILDREN`]; at least 1).
    pub fn with_max_parallel_children(mut self, n: usize) -> Self {
        self.max_parallel_children = n.max(1);
        self
    }

    /// How many children of one parallel group run at once.
    pub fn max_parallel_children(&self) -> usize {
        self.max_parallel_children
    }

    /// Sets what the next Apply in this process leaves out beyond the review marks
    /// (`plan apply --only/--exclude/--discard-rest`, `docs/review.md`).
    pub fn set_apply_request(&mut self, request: crate::review::partial::ApplyRequest) {
        self.apply_request = request;
    }

    /// What [`Lifecycle::set_apply_request`] set (empty by default).
    pub fn apply_request(&self) -> &crate::review::partial::ApplyRequest {
        &self.apply_request
    }

    pub(crate) fn seed(&self) -> LifecycleSeed {
        LifecycleSeed {
            db: self.store.location().clone(),
            paths: self.paths.clone(),
            providers: self.providers.clone(),
            env: std::sync::Arc::clone(&self.env),
            client_options: self.client_options.clone(),
            observer: std::sync::Arc::clone(&self.observer),
            max_parallel_children: self.max_parallel_children,
            reviser: self.reviser,
        }
    }

    /// Replaces the provider client options (timeouts, retry delays).
    pub fn with_client_options(mut self, options: crate::providers::ClientOptions) -> Self {
        self.client_options = options;
        self
    }

    /// The store.
    pub fn store(&self) -> &Store {
        &self.store
    }

    /// The store, mutable.
    pub fn store_mut(&mut self) -> &mut Store {
        &mut self.store
    }

    /// Where files live.
    pub fn paths(&self) -> &Paths {
        &self.paths
    }

    /// The sandboxes of the data directory.
    pub fn sandboxes(&self) -> crate::sandbox::Sandboxes {
        crate::sandbox::Sandboxes::new(&self.paths)
    }

    /// The configured providers.
    pub fn providers(&self) -> &[Provider] {
        &self.providers
    }

    pub(crate) fn env(&self) -> &(dyn Fn(&str) -> Option<String> + Send + Sync) {
        self.env.as_ref()
    }

    pub(crate) fn client_options(&self) -> &crate::providers::ClientOptions {
        &self.client_options
    }

    pub(crate) fn observer(&self) -> &dyn Observer {
        self.observer.as_ref()
    }

    pub(crate) fn observer_arc(&self) -> std::sync::Arc<dyn Observer> {
        std::sync::Arc::clone(&self.observer)
    }

    /// Loads a plan.
    ///
    /// # Errors
    /// [`RunError::NotFound`], store errors.
    pub fn plan(&self, id: &Id) -> Result<Plan, RunError> {
        self.store.plan(id)?.ok_or(RunError::NotFound(*id))
    }

    /// Hands the events of `plan_id` committed since the last call to the observer, in
    /// sequence order, and returns them.
    ///
    /// # Errors
    /// [`StoreError`].
    pub fn flush(&mut self, plan_id: &Id) -> Result<Vec<EngineEvent>, StoreError> {
        let mut out = Vec::new();
        loop {
            let batch = events::after(&self.store, self.streamed, Some(plan_id), 500)?;
            let Some(last) = batch.last() else { break };
            self.streamed = last.seq;
            let full = batch.len() == 500;
            for e in &batch {
                self.observer.event(e);
            }
            self.log.extend(batch.iter().cloned());
            out.extend(batch);
            if !full {
                break;
            }
        }
        Ok(out)
    }

    /// Every event handed to the observer since the last call, in order.
    pub fn take_log(&mut self) -> Vec<EngineEvent> {
        std::mem::take(&mut self.log)
    }

    /// Moves a plan whose driver vanished back to (same phase, queued) with reason
    /// `interrupted` (see [`lease::recover_if_stale`]), then rolls back an Apply it left
    /// unfinished ([`apply::recover`]); returns whether it did either.
    ///
    /// # Errors
    /// [`RunError`] (store, git and I/O errors of the rollback; repeating it continues).
    pub fn recover(&mut self, plan_id: &Id) -> Result<bool, RunError> {
        let changed = lease::recover_if_stale(&mut self.store, plan_id)?;
        let rolled_back = apply::recover(self, plan_id)?;
        self.flush(plan_id)?;
        Ok(changed || rolled_back)
    }
}
