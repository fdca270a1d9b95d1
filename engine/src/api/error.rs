//! Errors of the engine's API and the stable codes both faces show (spec section 04, "Output":
//! `error.code` of the JSON envelope).

use serde::Serialize;

use crate::domain::IdPrefixError;
use crate::lifecycle::RunError;
use crate::registry::plan_use::PlanUseError;
use crate::sandbox::SandboxError;
use crate::store::StoreError;

macro_rules! error_codes {
    ($($(#[$doc:meta])* $variant:ident => $text:literal,)+) => {
        /// A stable error code, serialised as the upper-case string the JSON envelope carries
        /// in `error.code` (`NOT_FOUND`, `IO_ERROR`, ...).
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, serde::Deserialize, schemars::JsonSchema)]
        pub enum ErrorCode {
            $($(#[$doc])* #[serde(rename = $text)] $variant,)+
        }

        impl ErrorCode {
            /// Every code, in declaration order.
            pub const ALL: &'static [ErrorCode] = &[$(ErrorCode::$variant,)+];

            /// The code as the envelope spells it.
            pub fn as_str(self) -> &'static str {
                match self {
                    $(ErrorCode::$variant => $text,)+
                }
            }
        }
    };
}

error_codes! {
    /// No such plan, approval, resource, actor, key, ...
    NotFound => "NOT_FOUND",
    /// A prefix matches several ids.
    Ambiguous => "AMBIGUOUS",
    /// An argument or value is not acceptable.
    InvalidInput => "INVALID_INPUT",
    /// The command line could not be parsed.
    Usage => "USAGE",
    /// The operation does not fit the current state, or another process holds the plan.
    Conflict => "CONFLICT",
    /// A human must answer an approval or confirm.
    NeedsApproval => "NEEDS_APPROVAL",
    /// A confirmation was declined.
    Aborted => "ABORTED",
    /// The user pressed Ctrl-C.
    Interrupted => "INTERRUPTED",
    /// The plan was cancelled.
    Cancelled => "CANCELLED",
    /// The plan errored; it can be resumed.
    PlanErrored => "PLAN_ERRORED",
    /// A correction could not be carried out.
    CorrectionFailed => "CORRECTION_FAILED",
    /// `config.toml` cannot be used.
    ConfigInvalid => "CONFIG_INVALID",
    /// The database was written by a newer version.
    SchemaTooNew => "SCHEMA_TOO_NEW",
    /// The database failed.
    DatabaseError => "DATABASE_ERROR",
    /// A file could not be read or written.
    IoError => "IO_ERROR",
    /// A git operation failed.
    GitError => "GIT_ERROR",
    /// A sandbox operation failed.
    SandboxError => "SANDBOX_ERROR",
    /// Something of the environment is missing (a program, a variable).
    Environment => "ENVIRONMENT",
    /// A terminal is needed.
    Terminal => "TERMINAL",
    /// The feature is not built yet.
    NotSupported => "NOT_SUPPORTED",
    /// A model provider could not be reached.
    ProviderUnavailable => "PROVIDER_UNAVAILABLE",
    /// A model provider refused the credentials.
    ProviderAuth => "PROVIDER_AUTH",
    /// A model provider answered with an error.
    ProviderError => "PROVIDER_ERROR",
    /// A tool failed.
    ToolFailed => "TOOL_FAILED",
    /// A tool would act outside what the plan may touch.
    UnsafeTool => "UNSAFE_TOOL",
    /// A tool call was refused by the plan's policy or the sandbox's confinement, or the
    /// caller's role does not allow the call (spec section 22).
    PermissionDenied => "PERMISSION_DENIED",
    /// An organization's policy refuses the call (spec section 22).
    PolicyDenied => "POLICY_DENIED",
    /// A tool would create a file that exists (without `overwrite`).
    AlreadyExists => "ALREADY_EXISTS",
    /// `diagnostics` found errors.
    ChecksFailed => "CHECKS_FAILED",
    /// A bug: something the engine should never do.
    Internal => "INTERNAL",
    /// A server was called without a valid token (no token, a wrong, expired or revoked one).
    Unauthenticated => "UNAUTHENTICATED",
}

impl std::fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for ErrorCode {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        ErrorCode::ALL
            .iter()
            .copied()
            .find(|c| c.as_str() == s)
            .ok_or_else(|| format!("unknown error code `{s}`"))
    }
}

/// Why an operation of the API failed.
#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    /// The lifecycle engine refused or failed (wrong state, busy plan, unknown approval, ...).
    #[error(transparent)]
    Run(#[from] RunError),
    /// A sandbox operation failed (rollback, cleanup).
    #[error(transparent)]
    Sandbox(#[from] SandboxError),
    /// Creating a plan failed (unknown action, bad argument, ...).
    #[error(transparent)]
    PlanUse(PlanUseError),
    /// An id or prefix matched nothing or several things.
    #[error(transparent)]
    Id(#[from] IdPrefixError),
    /// The database failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// A review item could not be named or marked (`docs/review.md`).
    #[error(transparent)]
    Review(#[from] crate::review::ReviewError),
    /// A registry change failed (boxed: the registries' errors are large).
    #[error(transparent)]
    Registry(Box<super::registry::RegistryError>),
    /// The sandbox to export could not be chosen.
    #[error(transparent)]
    Export(#[from] super::export::ExportError),
    /// The server answered with a failure (already in the protocol's terms).
    #[error(transparent)]
    Remote(#[from] super::protocol::RemoteError),
    /// The server could not be reached, or its answer was cut off.
    #[error("cannot reach the server at {url}: {reason}")]
    Unreachable {
        /// The server's base URL.
        url: String,
        /// What failed (connection refused, timeout, ...).
        reason: String,
    },
    /// The other side answered with something this version cannot read.
    #[error("the server's answer does not follow the protocol: {message}")]
    Protocol {
        /// What was wrong with it.
        message: String,
    },
    /// An argument of a call is not acceptable.
    #[error("{message}")]
    InvalidInput {
        /// What is wrong, naming the argument.
        message: String,
    },
    /// A server token could not be created, listed or revoked.
    #[error(transparent)]
    Token(#[from] super::tokens::TokenError),
    /// A user, organization or membership could not be changed.
    #[error(transparent)]
    Team(#[from] super::team::TeamError),
    /// The caller's role does not allow the call (spec section 22); nothing was changed.
    #[error("permission denied: {0}")]
    PermissionDenied(Box<crate::team::Denial>),
    /// An Apply waits for more humans' approvals (`apply.min_approvals`); the caller's is
    /// recorded.
    #[error("{0}")]
    ApprovalsNeeded(Box<super::apply_approvals::ApprovalsNeeded>),
    /// An organization's policy refuses the call; nothing was changed.
    #[error("{0}")]
    PolicyDenied(Box<crate::team::policy::PolicyDenial>),
    /// The call exists in the protocol but is not answered yet.
    #[error("{what} is not answered yet")]
    NotSupported {
        /// What was asked.
        what: String,
    },
    /// `config.toml` cannot be used for a call that needs it (model runs).
    #[error("{message}")]
    Config {
        /// Why.
        message: String,
    },
    /// A session could not be created, found, imported or changed.
    #[error(transparent)]
    Session(#[from] crate::session::SessionError),
    /// An orchestrator turn could not start (actor, model, key, profile) or be recorded.
    #[error(transparent)]
    Tell(Box<crate::session::orchestrator::TellError>),
    /// A one-shot actor run could not start or be recorded.
    #[error("{error}")]
    OneShot {
        /// The actor as named.
        actor: String,
        /// Why.
        error: Box<crate::actor_run::OneShotError>,
    },
    /// An actor context could not be read, written or removed.
    #[error(transparent)]
    Context(#[from] crate::actor_run::contexts::ContextError),
    /// A tool call could not be run (its plan, the database, a sandbox).
    #[error(transparent)]
    ToolRunner(#[from] crate::tools::runner::RunnerError),
    /// A model run stopped without its answer (a failed or cancelled model call, a
    /// deadline): the run was recorded, and `data` is what the command shows beside the
    /// failure.
    #[error("{}", stop.describe())]
    Stopped {
        /// Why the run stopped.
        stop: Box<crate::actors::runtime::Stop>,
        /// What to do next (`agents ...` commands), after the stop's own.
        hints: Vec<String>,
        /// The run as the command shows it.
        data: Box<serde_json::Value>,
    },
    /// A command's work failed after it was recorded (a logged tool call): the stable code,
    /// and the data the command shows beside the failure.
    #[error("{message}")]
    Failed {
        /// The stable code.
        code: ErrorCode,
        /// What failed.
        message: String,
        /// More about it.
        detail: Option<String>,
        /// What to do next.
        hints: Vec<String>,
        /// What the command shows beside the failure.
        data: Box<serde_json::Value>,
    },
}

impl From<crate::session::orchestrator::TellError> for ApiError {
    fn from(e: crate::session::orchestrator::TellError) -> Self {
        ApiError::Tell(Box::new(e))
    }
}

impl From<PlanUseError> for ApiError {
    /// A policy's refusal of a new plan is the policy's denial, whatever refused it.
    fn from(e: PlanUseError) -> Self {
        match e {
            PlanUseError::Policy(d) => ApiError::PolicyDenied(d),
            e => ApiError::PlanUse(e),
        }
    }
}

impl From<crate::lease::LeaseError> for ApiError {
    fn from(e: crate::lease::LeaseError) -> Self {
        ApiError::Run(e.into())
    }
}

impl ApiError {
    /// The registry's error of a failed registry change, or this error as it is.
    ///
    /// # Errors
    /// `self` when it is not [`ApiError::Registry`].
    pub fn into_registry(self) -> Result<super::registry::RegistryError, ApiError> {
        match self {
            ApiError::Registry(r) => Ok(*r),
            other => Err(other),
        }
    }
}

impl From<super::registry::RegistryError> for ApiError {
    fn from(e: super::registry::RegistryError) -> Self {
        ApiError::Registry(Box::new(e))
    }
}

impl From<rusqlite::Error> for ApiError {
    fn from(e: rusqlite::Error) -> Self {
        ApiError::Store(StoreError::Sqlite(e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_round_trip_through_their_strings() {
        for code in ErrorCode::ALL {
            assert_eq!(code.as_str().parse::<ErrorCode>(), Ok(*code));
            assert_eq!(
                serde_json::to_value(code).unwrap(),
                serde_json::json!(code.as_str())
            );
        }
        assert!("IO".parse::<ErrorCode>().is_err());
    }
}
