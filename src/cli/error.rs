//! The one error type at the CLI edge: a stable code, a message, details and hints, an exit
//! code. Engine errors convert into it here, and nowhere else.

use crate::engine::config::ConfigError;
use crate::engine::domain::IdPrefixError;
use crate::engine::paths::PathsError;
use crate::engine::store::StoreError;
use crate::engine::system::InitError;
use crate::output::{ErrorBody, Exit};

/// A command failure as shown to the user.
#[derive(Debug, Clone)]
pub struct CliError {
    /// What is rendered (boxed: errors travel up many frames and stay small).
    pub body: Box<ErrorBody>,
    /// Data for structured output (for exit 3: the pending approval).
    pub data: serde_json::Value,
}

impl CliError {
    /// A failure with a code and message, exit 1.
    pub fn new(code: &'static str, message: impl Into<String>) -> Self {
        Self {
            body: Box::new(ErrorBody {
                code,
                message: message.into(),
                detail: None,
                suggestions: Vec::new(),
                exit: Exit::Failure,
            }),
            data: serde_json::Value::Null,
        }
    }

    /// Adds detail.
    pub fn detail(mut self, detail: impl Into<String>) -> Self {
        self.body.detail = Some(detail.into());
        self
    }

    /// Adds a suggestion (a command or an action).
    pub fn hint(mut self, hint: impl Into<String>) -> Self {
        self.body.suggestions.push(hint.into());
        self
    }

    /// Sets the exit code.
    pub fn exit(mut self, exit: Exit) -> Self {
        self.body.exit = exit;
        self
    }

    /// Attaches structured data.
    pub fn data(mut self, data: serde_json::Value) -> Self {
        self.data = data;
        self
    }

    /// `INVALID_INPUT`: an argument or value is not acceptable.
    pub fn invalid_input(message: impl Into<String>) -> Self {
        Self::new("INVALID_INPUT", message)
    }
}

impl From<ConfigError> for CliError {
    fn from(e: ConfigError) -> Self {
        let message = e.to_string();
        match e {
            ConfigError::UnknownKey { suggestion, .. } => {
                let err = CliError::new("NOT_FOUND", message);
                let err = match suggestion {
                    Some(s) => err.hint(format!("did you mean `{s}`?")),
                    None => err,
                };
                err.hint("agents config list")
            }
            ConfigError::InvalidValue { .. } => CliError::invalid_input(message),
            ConfigError::Parse { path, .. } | ConfigError::InvalidEntry { path, .. } => {
                CliError::new("CONFIG_INVALID", message)
                    .hint(format!(
                        "fix {} by hand, or reset it with `agents config set KEY VALUE`",
                        path.display()
                    ))
                    .hint("agents diagnostics")
            }
            ConfigError::Read { .. } | ConfigError::Write { .. } => {
                CliError::new("IO_ERROR", message)
                    .hint("check the file's permissions and free disk space")
            }
        }
    }
}

impl From<StoreError> for CliError {
    fn from(e: StoreError) -> Self {
        let message = e.to_string();
        match e {
            StoreError::TooNew { path, .. } => CliError::new("SCHEMA_TOO_NEW", message)
                .detail(format!("{} was left unchanged", path.display()))
                .hint("upgrade CleverAgents to the version that wrote this database")
                .hint("or use another data directory with --data-dir"),
            StoreError::CreateDir { .. } => {
                CliError::new("IO_ERROR", message).hint("choose a writable --data-dir")
            }
            _ => CliError::new("DATABASE_ERROR", message).hint("agents diagnostics"),
        }
    }
}

impl From<InitError> for CliError {
    fn from(e: InitError) -> Self {
        let message = e.to_string();
        match e {
            InitError::PlansProcessing(_) => CliError::new("CONFLICT", message)
                .hint("agents plan cancel <PLAN>")
                .hint("agents plan list"),
            InitError::Store(s) => s.into(),
            InitError::Io { .. } => CliError::new("IO_ERROR", message)
                .detail("nothing was deleted: the old data is either in place or in the backup"),
        }
    }
}

impl From<PathsError> for CliError {
    fn from(e: PathsError) -> Self {
        CliError::new("ENVIRONMENT", e.to_string())
            .hint("pass --data-dir and --config-path, or set AGENTS_DATA_DIR and AGENTS_CONFIG")
    }
}

impl From<IdPrefixError> for CliError {
    fn from(e: IdPrefixError) -> Self {
        let code = match e {
            IdPrefixError::NotFound { .. } => "NOT_FOUND",
            IdPrefixError::Ambiguous { .. } => "AMBIGUOUS",
            IdPrefixError::TooShort(_) => "INVALID_INPUT",
        };
        CliError::new(code, e.to_string())
    }
}

impl From<crate::engine::sandbox::SandboxError> for CliError {
    fn from(e: crate::engine::sandbox::SandboxError) -> Self {
        use crate::engine::sandbox::SandboxError as E;
        let message = e.to_string();
        match e {
            E::Store(s) => s.into(),
            E::PlanNotFound(_) | E::NoTarget { .. } => {
                CliError::new("NOT_FOUND", message).hint("agents plan list")
            }
            E::InvalidTarget(_) => CliError::invalid_input(message),
            E::TargetConflict { .. } => CliError::new("CONFLICT", message),
            E::Gone { .. } => CliError::new("CONFLICT", message)
                .hint("a released or removed sandbox cannot be used; start a new plan"),
            E::Checkpoint(_) => CliError::new("CONFLICT", message),
            E::Git { .. } => CliError::new("GIT_ERROR", message).hint("agents diagnostics"),
            E::Io { .. } => CliError::new("IO_ERROR", message)
                .hint("check permissions and free disk space in the data directory"),
        }
    }
}

impl From<crate::engine::tools::runner::RunnerError> for CliError {
    fn from(e: crate::engine::tools::runner::RunnerError) -> Self {
        use crate::engine::tools::runner::RunnerError as E;
        match e {
            E::Store(s) => s.into(),
            E::Sandbox(s) => s.into(),
            E::PlanNotFound(_) => {
                CliError::new("NOT_FOUND", e.to_string()).hint("agents plan list")
            }
        }
    }
}
