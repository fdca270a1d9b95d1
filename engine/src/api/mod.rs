//! The one door both faces use (spec sections 06, 08-13 and 27): typed operations ([`Op`]) in,
//! typed results ([`Outcome`]) out, progress through the [`Observer`] as committed events.
//!
//! An [`Engine`] is a cheap, cloneable handle on a data directory and the settings drawn from
//! `config.toml`; it holds no database connection. Every [`Engine::run`] opens its own
//! connection, so a handle can be cloned into worker threads and operations run there
//! (`Engine: Send + Sync`).
//!
//! Every operation that changes a plan takes the plan's lease first (another live process
//! driving it is [`ApiError`] with code `CONFLICT`) and records what it changed as events in
//! the same transaction as the change.

pub mod access;
mod apply_approvals;
mod apply_preview;
pub mod audit;
mod client;
pub mod correction_views;
pub mod definition_views;
mod error;
mod export;
pub mod failures;
mod live_feed;
mod op;
pub mod openapi;
mod plan_artifacts;
mod plan_checkpoints;
mod plan_diff;
mod plan_record;
pub mod plan_views;
pub mod policies;
pub mod protocol;
mod query;
mod registry;
pub mod registry_views;
mod remote;
mod run;
pub mod run_views;
mod sandbox_open;
pub mod session_views;
mod status;
mod takeover;
pub mod team;
pub mod team_views;
pub mod tokens;

use std::sync::Arc;

pub use crate::domain::next::{CorrectionMode as NextCorrectionMode, Next};
pub use crate::lifecycle::{Observer, Quiet};
pub use crate::store::Location as DatabaseLocation;
pub use crate::store::attribution::{ApplyApproval, Attribution};
pub use crate::team::policy::PolicyDenial;
pub use crate::team::{Credential, Decision, Denial, Operation, Principal, Role};
pub use apply_approvals::ApprovalsNeeded;
pub use client::{Client, FOLLOW_POLL, Followed, follow_store, serve};
pub use error::{ApiError, ErrorCode};
pub use export::{ExportError, ExportRequest, ExportTarget, Exported};
pub use op::{
    Answered, Cancelled, CorrectMode, Correction, Op, Outcome, Prompted, ReviewRequest, Reviewed,
    UseRequest, Used,
};
pub use query::{PlanFilter, PlanListView};
pub use registry::*;
pub use remote::Remote;
pub use sandbox_open::OpenSandbox;
pub use status::{ChildView, PlanStatusView, ResumedAt, StatusHeadline, StepView, step_name};
// The code index as registry changes (registry views).
pub use registry::index_ops::{
    BuildIndex, IndexOutcome, IndexProgress, IndexRemoved, NotIndexed, RemoveIndex,
};

// Plan inspection views (`plan_views`): the types `plan diff` and `plan apply`'s preview
// carry, and what they are made of.
pub use crate::lifecycle::apply::Preview as ApplyPreview;
pub use crate::lifecycle::report::ErrorEntry;
pub use crate::review::partial::{ApplyRequest, LeftOut, Selection as ApplySelection, Written};
pub use crate::sandbox::applied::{AppliedResource, Source as AppliedSource};
pub use crate::sandbox::diff::{
    DiffStats, FileDiff, FileStatus, Hunk, HunkLine, LineKind, SecretLine, stats as diff_stats,
    unified as unified_diff,
};
/// The process's own mount namespace for shared sandbox checkouts, entered by `main` before
/// any thread starts (`docs/sandbox.md`, "Shared checkouts").
pub use crate::sandbox::overlay::{
    Mode as SandboxCheckoutMode, SWITCH as SANDBOX_OVERLAY_SWITCH, enter_own_namespace,
    wanted as sandbox_overlay_wanted,
};
pub use crate::store::lifecycle_run::PlanStep;
pub use apply_preview::{ApplyPreviewQuery, ApplyPreviewView, ApplyShown};
pub use audit::{
    AuditBreak, AuditEntry, AuditFilter, AuditHead, AuditOutcome, AuditRecord, AuditRequest,
    AuditVerdict, AuditView, BreakKind as AuditBreakKind,
};
pub use plan_artifacts::{AppliedCommit, Artifact, ArtifactsView};
pub use plan_checkpoints::{CheckpointRef, CheckpointsView};
pub use plan_diff::{AppliedDiff, DiffQuery, DiffView, FileSecrets, ResourceDiff, SandboxesDiff};
pub use plan_record::{ErrorsView, StepsView};

// What the faces show beside the views: a driven plan's stop, answers to approvals and their
// budgets, recovery hints, invariant coverage, model usage, review marks, a plan's creation,
// an automation profile's flags, redaction of what they print, and a reset of the data
// directory.
pub use crate::actors::budget::PlanBudget;
pub use crate::actors::estimate::USAGE_ESTIMATOR;
pub use crate::lifecycle::approvals::{Answer, Answered as ApprovalAnswered, describe_budget};
pub use crate::lifecycle::driven::{Driven, Stopped};
pub use crate::lifecycle::invariant_checks::{Coverage as InvariantCoverage, correct_step};
pub use crate::lifecycle::report::{Hint, guidance_heard, recovery_hints};
pub use crate::redact::{RedactingWriter, any_secret, redacted_bytes};
pub use crate::registry::actors::{CHECKLIST_STRATEGIST, SCRIPT_EXECUTOR};
pub use crate::registry::plan_use::{Created as PlanCreated, Request as PlanUseArgs};
pub use crate::registry::profiles::Flags as ProfileFlags;
pub use crate::registry::yaml::MAX_BYTES as DEFINITION_MAX_BYTES;
pub use crate::review::{Mark, ReviewError, ReviewerMark};
pub use crate::safe_read::{IMPORT_MAX_BYTES, ReadError, read_regular_text};
pub use crate::store::model_calls::UsageRollup;
pub use crate::system::{ResetOutcome, processing_plans, reset as reset_data_dir};

// Decisions and corrections (`correction_views`): what their views are made of.
pub use crate::actors::estimate::RerunCost;
pub use crate::correction::append::Appended;
pub use crate::correction::compare::ResourceComparison;
pub use crate::correction::impact::Impact;
pub use crate::correction::revert::Reverted;
pub use crate::correction::tree::{Node as TreeNode, Summary as TreeSummary};
pub use crate::store::corrections::{AttemptStatus, CorrectionAttempt, Reached};
pub use crate::store::lifecycle_run::PlanBase;
pub use correction_views::{
    AppendPreview, AttemptView, ChildPlan, CorrectionView, CorrectionViewRequest, ExplainView,
    Refusal, RevertPreview, ShortIds, StepLabel, TreeView,
};

// Sessions and the TUI: the live feed and the live-only events it carries.
pub use crate::events::live::{LiveEvent, LiveKind};
pub use live_feed::follow_store_live;

use crate::config::{Config, Provider};
use crate::domain::Id;
use crate::lifecycle;
use crate::paths::Paths;
use crate::sandbox::{CheckpointId, Sandboxes};
use crate::store::Store;

/// Settings an [`Engine`] takes from `config.toml` (spec section 05).
#[derive(Debug, Clone)]
pub struct Settings {
    /// Model providers, as configured.
    pub providers: Vec<Provider>,
    /// How many children of one parallel group run at once.
    pub max_parallel_children: usize,
    /// Days a cancelled or errored plan's sandbox is kept (`sandbox-retention-days`).
    pub sandbox_retention_days: u32,
    /// The default plan budget in US dollars (`max-cost-usd`), if any.
    pub max_cost_usd: Option<f64>,
    /// The default plan budget in tokens (`max-tokens`), if any.
    pub max_tokens: Option<u64>,
    /// How long a driver's heartbeat may be silent before another process takes its plan
    /// over (`lease-expiry-secs`).
    pub lease_expiry: std::time::Duration,
}

impl Default for Settings {
    fn default() -> Self {
        Self {
            providers: Vec::new(),
            max_parallel_children: lifecycle::DEFAULT_MAX_PARALLEL_CHILDREN,
            sandbox_retention_days: crate::sandbox::DEFAULT_RETENTION_DAYS,
            max_cost_usd: None,
            max_tokens: None,
            lease_expiry: crate::lease::DEFAULT_EXPIRY,
        }
    }
}

impl Settings {
    /// The settings of a loaded configuration.
    pub fn from_config(config: &Config) -> Self {
        Self {
            providers: config.providers(),
            max_parallel_children: config.max_parallel_children(),
            sandbox_retention_days: config.sandbox_retention_days(),
            max_cost_usd: config.file.max_cost_usd,
            max_tokens: config.file.max_tokens,
            lease_expiry: config.lease_expiry(),
        }
    }
}

/// A handle on the engine of one data directory (see the module documentation).
#[derive(Clone)]
pub struct Engine {
    paths: Paths,
    /// Where the records live: the data directory's SQLite file unless a server was given a
    /// PostgreSQL database.
    database: crate::store::Location,
    settings: Settings,
    observer: Arc<dyn Observer>,
    /// The whole configuration, for the calls that run a model actor (`session tell`, `actor
    /// run`); `None` when `config.toml` cannot be used.
    config: Option<Arc<Config>>,
    /// How the orchestrator of `session tell` runs `agents` commands (handed in by the face
    /// that owns the command line).
    commands: Option<Arc<dyn crate::session::tools::Commands>>,
    /// Who the calls made through this handle come from; `None`: the local user.
    caller: Option<Arc<crate::team::Principal>>,
}

impl std::fmt::Debug for Engine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Engine")
            .field("paths", &self.paths)
            .field("settings", &self.settings)
            .finish_non_exhaustive()
    }
}

impl Engine {
    /// A handle on the data directory `paths` with `settings`; nothing is opened yet, and
    /// progress goes nowhere until [`Engine::with_observer`].
    pub fn new(paths: Paths, settings: Settings) -> Self {
        // The expiry this process declares on the leases it takes (one per process).
        crate::lease::set_expiry(settings.lease_expiry);
        Self {
            database: crate::store::Location::Sqlite(paths.database()),
            paths,
            settings,
            observer: Arc::new(Quiet),
            config: None,
            commands: None,
            caller: None,
        }
    }

    /// This engine acting for `principal`: what its calls change is attributed to them.
    pub fn as_caller(&self, principal: crate::team::Principal) -> Self {
        let mut engine = self.clone();
        engine.caller = Some(Arc::new(principal));
        engine
    }

    /// Who calls through this handle: the principal a server set, else the local user.
    pub fn caller(&self) -> crate::team::Principal {
        self.caller
            .as_deref()
            .cloned()
            .unwrap_or_else(crate::team::Principal::local)
    }

    /// This engine with the whole configuration, for the calls that run model actors.
    pub fn with_config(mut self, config: Config) -> Self {
        self.config = Some(Arc::new(config));
        self
    }

    /// This engine with the runner of the orchestrator's `agents` commands (`session tell`).
    pub fn with_commands(mut self, commands: Arc<dyn crate::session::tools::Commands>) -> Self {
        self.commands = Some(commands);
        self
    }

    /// The whole configuration.
    ///
    /// # Errors
    /// `CONFIG_INVALID` when the engine was made without a usable `config.toml`.
    pub(crate) fn config(&self) -> Result<&Config, ApiError> {
        self.config.as_deref().ok_or_else(|| ApiError::Config {
            message: "config.toml cannot be used; run `agents config list` for details".into(),
        })
    }

    /// The runner of the orchestrator's commands.
    pub(crate) fn commands(&self) -> Result<Arc<dyn crate::session::tools::Commands>, ApiError> {
        self.commands.clone().ok_or_else(|| ApiError::NotSupported {
            what: "running the orchestrator's commands on this engine".into(),
        })
    }

    /// Sends this handle's progress (committed events, spinner lines) to `observer`, which
    /// also says when the user asked to stop.
    pub fn with_observer(mut self, observer: Arc<dyn Observer>) -> Self {
        self.observer = observer;
        self
    }

    /// Where the files live.
    pub fn paths(&self) -> &Paths {
        &self.paths
    }

    /// The settings in force.
    pub fn settings(&self) -> &Settings {
        &self.settings
    }

    /// A new connection to the database.
    ///
    /// # Errors
    /// [`ApiError::Store`] when the database cannot be opened or migrated.
    pub fn store(&self) -> Result<Store, ApiError> {
        Ok(self.database.open()?.acting_for(self.human()))
    }

    /// The human a server call came from, for attribution; `None` for the local user, whose
    /// records need no name.
    pub fn human(&self) -> Option<String> {
        self.caller
            .as_deref()
            .filter(|p| !p.is_local())
            .map(|p| p.user.clone())
    }

    /// This engine keeping its records in `database` (a server's PostgreSQL database, spec
    /// section 21) instead of the data directory's SQLite file.
    pub fn with_database(mut self, database: crate::store::Location) -> Self {
        self.database = database;
        self
    }

    /// Where the records live.
    pub fn database(&self) -> &crate::store::Location {
        &self.database
    }

    /// The database's schema version (opening the database migrates it first).
    ///
    /// # Errors
    /// [`ApiError::Store`] when the database cannot be opened or read.
    pub fn schema_version(&self) -> Result<u32, ApiError> {
        Ok(self.store()?.schema_version()?)
    }

    /// The sandboxes of this data directory.
    pub fn sandboxes(&self) -> Sandboxes {
        Sandboxes::new(&self.paths)
    }

    /// A lifecycle engine on a new connection, with this handle's providers, observer and
    /// settings.
    ///
    /// # Errors
    /// [`ApiError::Store`].
    pub fn lifecycle(&self) -> Result<lifecycle::Lifecycle, ApiError> {
        Ok(lifecycle::Lifecycle::new(
            self.store()?,
            self.paths.clone(),
            self.settings.providers.clone(),
            Box::new(Quiet),
        )?
        .with_shared_observer(Arc::clone(&self.observer))
        .with_max_parallel_children(self.settings.max_parallel_children)
        .with_reviser(revise))
    }

    /// The plan with id `input` or the unique plan whose id starts with it.
    ///
    /// # Errors
    /// [`ApiError::Id`] (`NOT_FOUND`, `AMBIGUOUS`, `INVALID_INPUT`), [`ApiError::Store`].
    pub fn resolve_plan(&self, input: &str) -> Result<Id, ApiError> {
        Ok(self.store()?.resolve_plan_id(input)??)
    }

    /// The checkpoint of `plan` with id `input` or the unique one starting with it.
    ///
    /// # Errors
    /// [`ApiError::Id`], [`ApiError::Store`].
    pub fn resolve_checkpoint(&self, plan: &Id, input: &str) -> Result<CheckpointId, ApiError> {
        Ok(self.store()?.resolve_checkpoint(plan, input)??)
    }

    /// Runs one operation to its end (a gate, a pending decision or a terminal state for the
    /// ones that drive a plan).
    ///
    /// # Errors
    /// [`ApiError`]; its [`ApiError::code`] names the kind of failure. Failures of the work
    /// itself (a step that errors) are not errors: they come back in the [`Outcome`].
    pub fn run(&self, op: Op) -> Result<Outcome, ApiError> {
        run::run(self, op)
    }
}

/// [`lifecycle::Reviser`]: the revert correction, driving the plan on.
fn revise(
    engine: &mut lifecycle::Lifecycle,
    decision: &crate::domain::Id,
    guidance: &str,
) -> Result<Option<lifecycle::driven::Driven>, lifecycle::RunError> {
    Ok(crate::correction::revert::revert(engine, decision, guidance)?.driven)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn assert_send_sync<T: Send + Sync>() {}

    #[test]
    fn handle_and_results_cross_threads() {
        assert_send_sync::<Engine>();
        assert_send_sync::<Op>();
        assert_send_sync::<Outcome>();
        fn send<T: Send>() {}
        send::<ApiError>();
    }
}
