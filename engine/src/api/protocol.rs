//! The engine's API as a protocol (spec section 21, "Server"): the requests a face sends, the
//! typed views that answer them and the error every failure becomes, all serde types of one
//! version ([`VERSION`]). The same values cross a function call (an [`super::Engine`]) or HTTP
//! ([`super::Remote`], served by `agents server start`), so a face cannot tell which carried
//! them.

use serde::{Deserialize, Serialize};

use super::{ApiError, ErrorCode, Op, Outcome, PlanFilter, PlanListView, PlanStatusView};
use crate::domain::Id;
use crate::domain::Plan;
use crate::domain::approval::Approval;
use crate::domain::event::EngineEvent;

/// The protocol's version: the path prefix of every call (`/v1/...`). A breaking change gets
/// a new version.
pub const VERSION: &str = "v1";

/// Most events one [`Request::Events`] returns.
pub const EVENTS_PAGE_MAX: u32 = 1_000;

/// One call of the protocol.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(tag = "call", rename_all = "snake_case")]
pub enum Request {
    /// Who answers: product version, protocol version, database schema.
    Hello,
    /// The full id of the plan with id or unique prefix `plan`.
    ResolvePlan {
        /// Plan id or unique prefix.
        plan: String,
    },
    /// The plans `plan list` shows.
    PlanList(PlanFilter),
    /// One plan's row.
    Plan {
        /// Plan id or unique prefix.
        plan: String,
    },
    /// Pending approvals, oldest first, of one plan (id or unique prefix) or of all.
    Approvals {
        /// Only this plan's.
        plan: Option<String>,
    },
    /// The review of a plan's changes: every hunk and file with its id and mark.
    Review {
        /// Plan id or unique prefix.
        plan: String,
    },
    /// Every decision of a plan (current and superseded), in sequence.
    Decisions {
        /// Plan id or unique prefix.
        plan: String,
    },
    /// One approval by id, whatever its status.
    Approval {
        /// The approval (`apr_...`).
        approval: String,
    },
    /// The sequence number of the newest event (0 when there is none).
    LastSeq,
    /// One registry change (resources, projects, actions, actors, invariants, profiles, tools,
    /// skills, resource types).
    Change(Box<super::RegistryOp>),
    /// Runs one operation to its end (a gate, a pending decision or a terminal state for the
    /// ones that drive a plan). Registry changes are not carried yet.
    Run(Box<Op>),
    /// Everything `plan status` shows about one plan.
    PlanStatus {
        /// Plan id or unique prefix.
        plan: String,
    },
    /// A page of the event log after sequence number `after`, oldest first.
    Events {
        /// Only this plan's events (id or unique prefix); every event when `None`.
        plan: Option<String>,
        /// Events with a larger sequence number than this (0: from the start).
        after: i64,
        /// At most this many (capped at [`EVENTS_PAGE_MAX`]).
        limit: u32,
    },
    /// Plan inspection: diff, apply preview, checkpoints, artifacts, logs, errors.
    PlanView(super::plan_views::PlanViewRequest),
    /// Registry reads: every registry's list and show, configuration, diagnostics.
    Registry(super::registry_views::RegistryQuery),
    /// Definition reads: actions, actors, automation profiles, tools, skills.
    Definition(super::definition_views::DefinitionQuery),
    /// Sessions, child plans, actor runs.
    Session(super::session_views::SessionRequest),
    /// Decisions and corrections: tree, explanation, correction previews, attempts.
    CorrectionView(super::correction_views::CorrectionViewRequest),
    /// Direct runs: `actor run`, actor contexts, `tool run`.
    RunCall(super::run_views::RunRequest),
    /// An organization's policy: set or show (`agents server policy`).
    Policy(super::policies::PolicyRequest),
    /// The server's users, organizations, members and tokens.
    Team(super::team_views::TeamRequest),
    /// The audit log: its rows, and the check of its hash chain.
    Audit(super::audit::AuditRequest),
}

impl Request {
    /// The call's name as the protocol spells it (`plan_status`, `events`, ...).
    pub fn name(&self) -> &'static str {
        match self {
            Request::Hello => "hello",
            Request::ResolvePlan { .. } => "resolve_plan",
            Request::PlanList(_) => "plan_list",
            Request::Plan { .. } => "plan",
            Request::Approvals { .. } => "approvals",
            Request::Approval { .. } => "approval",
            Request::Review { .. } => "review",
            Request::Decisions { .. } => "decisions",
            Request::LastSeq => "last_seq",
            Request::Change(_) => "change",
            Request::Run(_) => "run",
            Request::PlanStatus { .. } => "plan_status",
            Request::Events { .. } => "events",
            Request::PlanView(_) => "plan_view",
            Request::Registry(_) => "registry",
            Request::Definition(_) => "definition",
            Request::Session(_) => "session",
            Request::CorrectionView(_) => "correction_view",
            Request::RunCall(_) => "run_call",
            Request::Policy(_) => "policy",
            Request::Team(_) => "team",
            Request::Audit(_) => "audit",
        }
    }
}

/// The answer to a [`Request`], one variant per call.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(tag = "view", content = "data", rename_all = "snake_case")]
pub enum Response {
    /// [`Request::Hello`].
    Hello(Hello),
    /// [`Request::ResolvePlan`].
    PlanId(Id),
    /// [`Request::PlanList`].
    PlanList(Box<PlanListView>),
    /// [`Request::Plan`].
    Plan(Box<Plan>),
    /// [`Request::Approvals`].
    Approvals(Vec<Approval>),
    /// [`Request::Approval`]: `None` when there is no such approval.
    Approval(Option<Box<Approval>>),
    /// [`Request::Review`] (without each file's full diff text, which is not carried yet).
    Review(Box<crate::review::Review>),
    /// [`Request::Decisions`].
    Decisions(Vec<crate::domain::decision::Decision>),
    /// [`Request::LastSeq`].
    Seq(i64),
    /// [`Request::Change`].
    Changed(Box<super::RegistryOutcome>),
    /// [`Request::Run`].
    Outcome(Box<Outcome>),
    /// [`Request::PlanStatus`].
    PlanStatus(Box<PlanStatusView>),
    /// [`Request::Events`].
    Events(Vec<EngineEvent>),
    /// [`Request::PlanView`].
    PlanView(Box<super::plan_views::PlanView>),
    /// [`Request::Registry`].
    Registry(Box<super::registry_views::RegistryView>),
    /// [`Request::Definition`].
    Definition(Box<super::definition_views::DefinitionView>),
    /// [`Request::Session`].
    Session(Box<super::session_views::SessionView>),
    /// [`Request::CorrectionView`].
    CorrectionView(Box<super::correction_views::CorrectionView>),
    /// [`Request::RunCall`].
    RunCall(Box<super::run_views::RunView>),
    /// [`Request::Policy`].
    Policy(Box<super::policies::PolicyView>),
    /// [`Request::Team`].
    Team(Box<super::team_views::TeamView>),
    /// [`Request::Audit`].
    Audit(Box<super::audit::AuditView>),
}

impl Response {
    /// The view's name, for an error that names what came back instead of what was asked.
    pub fn name(&self) -> &'static str {
        match self {
            Response::Hello(_) => "hello",
            Response::PlanId(_) => "plan_id",
            Response::PlanList(_) => "plan_list",
            Response::Plan(_) => "plan",
            Response::Approvals(_) => "approvals",
            Response::Approval(_) => "approval",
            Response::Outcome(_) => "outcome",
            Response::Seq(_) => "seq",
            Response::Changed(_) => "changed",
            Response::Review(_) => "review",
            Response::Decisions(_) => "decisions",
            Response::PlanStatus(_) => "plan_status",
            Response::Events(_) => "events",
            Response::PlanView(_) => "plan_view",
            Response::Registry(_) => "registry",
            Response::Definition(_) => "definition",
            Response::Session(_) => "session",
            Response::CorrectionView(_) => "correction_view",
            Response::RunCall(_) => "run_call",
            Response::Policy(_) => "policy",
            Response::Team(_) => "team",
            Response::Audit(_) => "audit",
        }
    }
}

/// What [`Request::Hello`] answers.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Hello {
    /// The product's version (`CARGO_PKG_VERSION` of the engine).
    pub version: String,
    /// The protocol version ([`VERSION`]).
    pub protocol: String,
    /// The database schema version.
    pub schema: u32,
    /// `in-process` or `server`.
    pub mode: String,
}

/// A failure as it crosses the protocol: the stable code, the message, details and hints as
/// the command line would print them.
#[derive(
    Debug, Clone, PartialEq, Serialize, Deserialize, thiserror::Error, schemars::JsonSchema,
)]
#[error("{message}")]
pub struct RemoteError {
    /// The stable code (`NOT_FOUND`, `UNAUTHENTICATED`, ...).
    pub code: ErrorCode,
    /// What went wrong.
    pub message: String,
    /// More about it, if anything.
    pub detail: Option<String>,
    /// What to do next.
    pub hints: Vec<String>,
    /// What the command line shows beside the error (`data` of its envelope: e.g. the state of
    /// a plan an operation refused), if anything.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data: Option<Box<serde_json::Value>>,
}

/// The body of every non-2xx answer of the server: `{"error": {...}}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ErrorEnvelope {
    /// The failure.
    pub error: RemoteError,
}

/// Takes the view the call named `asked` must answer with out of `response`.
///
/// # Errors
/// [`ApiError::Protocol`] naming both when the other side answered with another view.
pub fn expect<T>(
    asked: &str,
    response: Response,
    take: impl FnOnce(Response) -> Result<T, Response>,
) -> Result<T, ApiError> {
    take(response).map_err(|other| ApiError::Protocol {
        message: format!(
            "the call `{asked}` was answered with the view `{}`",
            other.name()
        ),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_are_tagged_by_their_call_name() {
        let r = Request::Events {
            plan: Some("01J".into()),
            after: 7,
            limit: 10,
        };
        let json = serde_json::to_value(&r).unwrap();
        assert_eq!(json["call"], "events");
        assert_eq!(json["after"], 7);
        let back: Request = serde_json::from_value(json.clone()).unwrap();
        assert_eq!(serde_json::to_value(back).unwrap(), json);
        assert_eq!(
            serde_json::to_value(Request::Hello).unwrap(),
            serde_json::json!({"call": "hello"})
        );
    }

    #[test]
    fn an_unknown_call_is_refused_by_name() {
        let err = serde_json::from_str::<Request>(r#"{"call":"drop_tables"}"#).unwrap_err();
        assert!(err.to_string().contains("drop_tables"), "{err}");
    }

    #[test]
    fn a_view_of_another_call_is_a_protocol_error() {
        let err = expect(
            Request::Hello.name(),
            Response::Events(Vec::new()),
            |r| match r {
                Response::Hello(h) => Ok(h),
                other => Err(other),
            },
        )
        .unwrap_err();
        assert!(matches!(err, ApiError::Protocol { .. }), "{err:?}");
        assert!(err.to_string().contains("`hello`"), "{err}");
    }
}
