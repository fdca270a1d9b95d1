//! Sessions, child plans and actor runs (spec sections 19-20, 11): what the orchestrator
//! conversation, `plan children` and `actor run` read and do, and the reads the TUI makes.
//!
//! One family of calls of the protocol ([`Request::Session`]): its requests,
//! its views, how an [`Engine`] answers them and the typed calls on a [`Client`].

mod calls;

mod pane_reads;
mod session_changes;

use serde::{Deserialize, Serialize};

use super::{ApiError, Engine};

pub use crate::correction::impact::Impact;
pub use crate::domain::action::ArgumentSpec;
pub use crate::domain::decision::Decision;
pub use crate::domain::sandbox::CheckpointRecord;
/// Keeps the code indexes of this data directory current while a face on this machine runs
/// (the TUI in process); dropping the watchers ends it.
pub use crate::index::watch::watch_all as watch_code_indexes;
pub use crate::lifecycle::approvals::Answer;
pub use crate::lifecycle::driven::{Driven, Stopped};
pub use crate::registry::plan_use::Request as NewPlan;
pub use crate::review::{Item as ReviewItem, Mark as ReviewMark, Review, ReviewFile};
pub use crate::sandbox::diff::{FileDiff, FileStatus, Hunk, HunkLine, LineKind};
pub use crate::session::orchestrator::TellError;
/// The orchestrator's commands and how one is answered (handed to [`super::Engine::with_commands`]).
pub use crate::session::tools::{CommandResult, Commands};
/// Limits and the version of a session's export.
pub use crate::session::{
    DEFAULT_ACTOR, DEFAULT_MAX_HISTORY, export::SCHEMA_VERSION as EXPORT_SCHEMA_VERSION,
};
pub use crate::session::{
    ExecutedCommand, LinkedPlan, Role, Session, SessionDetail, SessionError, SessionMessage,
    SessionSummary, Totals,
};
pub use crate::store::corrections::Reached;
/// What the orchestrator's commands and streamed text pass through before they are shown or
/// handed to the model (secrets masked), and how an export file is written (atomically).
pub use crate::{redact::redact_bytes, safe_write::replace_file};
pub use session_changes::{
    ActorShown, SessionCreated, SessionDeleted, SessionExported, SessionImported, TellRequest,
    Told, tell,
};

/// One call of this family.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(tag = "query", rename_all = "snake_case")]
pub enum SessionRequest {
    /// Every session, most recently updated first, with its message count and size
    /// (`session list`).
    Sessions,
    /// One session with its messages, linked plans and their phase and state (`session
    /// show`).
    Session {
        /// Session id, unique prefix or name.
        session: String,
    },
    /// A plan's decision tree with superseded decisions and child plans, as `plan tree
    /// --show-superseded` shows it (the TUI's tree pane).
    PlanTree {
        /// Plan id or unique prefix.
        plan: String,
    },
    /// Why a decision was taken and everything downstream of it, as `plan explain` computes
    /// it (the TUI's explanation overlay).
    Explanation {
        /// The decision's full id.
        decision: String,
    },
    /// What a correction of a decision would touch, and why it would be refused, as `plan
    /// correct --dry-run` computes it (spec section 13; the TUI's correction preview).
    CorrectionPreview {
        /// The decision's full id.
        decision: String,
        /// Append (a child plan; nothing that exists changes) rather than revert.
        append: bool,
    },
    /// A plan's changes as the TUI's diff pane shows them: the review while it can be
    /// reviewed, else the sandboxes' diff, else what Apply wrote.
    PlanChanges {
        /// Plan id or unique prefix.
        plan: String,
    },
    /// A plan's checkpoints that a rollback can go to (not discarded), oldest first.
    Checkpoints {
        /// Plan id or unique prefix.
        plan: String,
    },
    /// What a new plan can be made of: the available actions with their arguments, and every
    /// project (the TUI's use form).
    UseChoices,
    /// Creates a session (`session create`).
    Create {
        /// Orchestrator actor (default: builtin/orchestrator).
        actor: Option<String>,
        /// A unique name.
        name: Option<String>,
        /// Automation profile of the plans it creates (default: the configured one).
        automation_profile: Option<String>,
        /// Turns the orchestrator sees in full.
        max_history: u32,
    },
    /// Deletes a session and its conversation; its plans stay (`session delete`).
    Delete {
        /// Session id, unique prefix or name.
        session: String,
    },
    /// A session's export document (`session export`; the face writes the file).
    Export {
        /// Session id, unique prefix or name.
        session: String,
    },
    /// Stores an exported session under a new id (`session import`; the face reads the
    /// file).
    Import {
        /// The file's name, for errors.
        source: String,
        /// The file's text.
        text: String,
        /// Keep the automation profile the file names instead of the default one.
        keep_profile: bool,
    },
    /// Runs one orchestrator turn where the data is (`session tell`): the model call is made
    /// with that side's configuration and keys.
    Tell(TellRequest),
}

impl SessionRequest {
    /// The call's name as the protocol spells it.
    pub fn name(&self) -> &'static str {
        match self {
            SessionRequest::Sessions => "sessions",
            SessionRequest::Session { .. } => "session",
            SessionRequest::PlanTree { .. } => "plan_tree",
            SessionRequest::Explanation { .. } => "explanation",
            SessionRequest::CorrectionPreview { .. } => "correction_preview",
            SessionRequest::PlanChanges { .. } => "plan_changes",
            SessionRequest::Checkpoints { .. } => "checkpoints",
            SessionRequest::UseChoices => "use_choices",
            SessionRequest::Create { .. } => "create",
            SessionRequest::Delete { .. } => "delete",
            SessionRequest::Export { .. } => "export",
            SessionRequest::Import { .. } => "import",
            SessionRequest::Tell(_) => "tell",
        }
    }
}

/// The answer to a [`SessionRequest`], one variant per call.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(tag = "kind", content = "view", rename_all = "snake_case")]
pub enum SessionView {
    /// [`SessionRequest::Sessions`].
    Sessions(Vec<SessionSummary>),
    /// [`SessionRequest::Session`].
    Session(Box<SessionShown>),
    /// [`SessionRequest::PlanTree`]: the top-level nodes.
    PlanTree(Vec<TreeNode>),
    /// [`SessionRequest::Explanation`].
    Explanation(Box<Explained>),
    /// [`SessionRequest::CorrectionPreview`].
    CorrectionPreview(Box<CorrectionPreview>),
    /// [`SessionRequest::PlanChanges`].
    PlanChanges(Box<PlanChanges>),
    /// [`SessionRequest::Checkpoints`].
    Checkpoints(Vec<CheckpointRecord>),
    /// [`SessionRequest::UseChoices`].
    UseChoices(UseChoices),
    /// [`SessionRequest::Create`].
    Created(Box<SessionCreated>),
    /// [`SessionRequest::Delete`].
    Deleted(SessionDeleted),
    /// [`SessionRequest::Export`].
    Exported(Box<SessionExported>),
    /// [`SessionRequest::Import`].
    Imported(Box<SessionImported>),
    /// [`SessionRequest::Tell`].
    Told(Box<Told>),
}

/// A node of a plan's decision tree: a decision, or a child plan under the decision that
/// spawned it (or under its parent's root decision when no decision links it).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct TreeNode {
    /// `decision` or `plan`.
    pub kind: String,
    /// Decision id (decisions) or plan id (plans).
    pub id: String,
    /// The decision's type (decisions only).
    pub decision_type: Option<String>,
    /// What was decided (decisions) or the plan's name (plans).
    pub label: String,
    /// The question (decisions only).
    pub question: Option<String>,
    /// Confidence from 0 to 1 (decisions that have one).
    pub confidence_score: Option<f64>,
    /// Whether a later decision superseded it.
    pub superseded: bool,
    /// `phase/state` (plans only).
    pub status: Option<String>,
    /// Children in order.
    pub children: Vec<TreeNode>,
}

/// A decision and its impact (`plan explain`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Explained {
    /// The decision.
    pub decision: Decision,
    /// Everything downstream of it; [`Impact::level`] says how far it reaches.
    pub impact: Impact,
}

/// What a correction would touch (`plan correct --dry-run`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct CorrectionPreview {
    /// A revert's impact; `None` for an append, which changes nothing that exists.
    pub impact: Option<Impact>,
    /// Why the correction would be refused, if it would.
    pub refused: Option<String>,
}

/// A plan's changes as the diff pane shows them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(tag = "state", rename_all = "snake_case")]
pub enum PlanChanges {
    /// Nothing changed yet (or nothing can be read).
    Nothing,
    /// The changes can be reviewed: the review, and each of its files' diff in the same order
    /// (a review's own file diffs do not cross the protocol).
    Review {
        /// The review with its marks.
        review: Review,
        /// `review.files[i]`'s diff at `diffs[i]`.
        diffs: Vec<FileDiff>,
    },
    /// The sandboxes' changes (Execute under way, or not reviewable yet).
    Working {
        /// Every changed file across the plan's sandboxes, with hunks.
        files: Vec<FileDiff>,
    },
    /// What Apply wrote, from the stored records.
    Applied {
        /// The files.
        files: Vec<FileDiff>,
        /// The commits Apply made, abbreviated to 12 digits.
        commits: Vec<String>,
        /// The paths of what the plan's last Apply left out (kept in the sandbox until
        /// `plan cleanup`), `[]` when nothing.
        #[serde(default)]
        left_out: Vec<String>,
    },
}

/// What the use form offers.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct UseChoices {
    /// The available actions by name, with their declared arguments.
    pub actions: Vec<(String, Vec<ArgumentSpec>)>,
    /// Every project by name.
    pub projects: Vec<String>,
}

/// A session as `session show` shows it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct SessionShown {
    /// The session, its messages and linked plans.
    pub detail: SessionDetail,
    /// Each linked plan's `(phase, state)`, in the order of `detail.plans`; `None` for a plan
    /// not in this database.
    pub plan_states: Vec<Option<(String, String)>>,
}

/// Session `input` with its linked plans' phase and state.
fn session_shown(engine: &Engine, input: &str) -> Result<SessionShown, ApiError> {
    let store = engine.store()?;
    let detail = crate::session::detail(&store, input).map_err(session_failed)?;
    let plan_states = detail
        .plans
        .iter()
        .map(|p| {
            Ok(store
                .plan(&p.plan_id)?
                .map(|pl| (pl.status.phase.to_string(), pl.status.state.to_string())))
        })
        .collect::<Result<_, ApiError>>()?;
    Ok(SessionShown {
        detail,
        plan_states,
    })
}

/// A session read's failure as the protocol carries it.
fn session_failed(e: crate::session::SessionError) -> ApiError {
    use crate::session::SessionError as E;
    match e {
        E::Prefix(p) => ApiError::Id(p),
        E::Store(s) => ApiError::Store(s),
        missing @ E::NotFound(_) => ApiError::Session(missing),
        other => ApiError::InvalidInput {
            message: other.to_string(),
        },
    }
}

/// Answers `request` on `engine`.
///
/// # Errors
/// [`ApiError`] as each call documents.
pub(crate) fn answer(engine: &Engine, request: SessionRequest) -> Result<SessionView, ApiError> {
    Ok(match request {
        SessionRequest::Sessions => {
            SessionView::Sessions(crate::session::list(&engine.store()?).map_err(session_failed)?)
        }
        SessionRequest::Session { session } => {
            SessionView::Session(Box::new(session_shown(engine, &session)?))
        }
        SessionRequest::PlanTree { plan } => {
            SessionView::PlanTree(pane_reads::plan_tree(engine, &plan)?)
        }
        SessionRequest::Explanation { decision } => {
            SessionView::Explanation(Box::new(pane_reads::explanation(engine, &decision)?))
        }
        SessionRequest::CorrectionPreview { decision, append } => SessionView::CorrectionPreview(
            Box::new(pane_reads::correction_preview(engine, &decision, append)?),
        ),
        SessionRequest::PlanChanges { plan } => {
            SessionView::PlanChanges(Box::new(pane_reads::plan_changes(engine, &plan)?))
        }
        SessionRequest::Checkpoints { plan } => {
            SessionView::Checkpoints(pane_reads::checkpoints(engine, &plan)?)
        }
        SessionRequest::UseChoices => SessionView::UseChoices(pane_reads::use_choices(engine)?),
        SessionRequest::Create {
            actor,
            name,
            automation_profile,
            max_history,
        } => SessionView::Created(Box::new(session_changes::create(
            engine,
            actor,
            name,
            automation_profile,
            max_history,
        )?)),
        SessionRequest::Delete { session } => {
            SessionView::Deleted(session_changes::delete(engine, &session)?)
        }
        SessionRequest::Export { session } => {
            SessionView::Exported(Box::new(session_changes::export(engine, &session)?))
        }
        SessionRequest::Import {
            source,
            text,
            keep_profile,
        } => SessionView::Imported(Box::new(session_changes::import(
            engine,
            &source,
            &text,
            keep_profile,
        )?)),
        SessionRequest::Tell(request) => {
            SessionView::Told(Box::new(session_changes::tell_collected(engine, &request)?))
        }
    })
}

/// The protocol error for a call of this family answered with another call's view.
fn unexpected(asked: &str, got: &SessionView) -> ApiError {
    let got = serde_json::to_value(got)
        .ok()
        .and_then(|v| v["kind"].as_str().map(str::to_string))
        .unwrap_or_default();
    ApiError::Protocol {
        message: format!("the call `{asked}` was answered with the session view `{got}`"),
    }
}
