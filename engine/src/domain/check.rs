//! Health check results, as `agents diagnostics` reports them (spec section 06, `diagnostics`).

use serde::Serialize;

use super::next::Next;

/// Outcome of one health check.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Serialize, serde::Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum CheckStatus {
    /// Healthy.
    Ok,
    /// Works, but something needs attention.
    Warn,
    /// Broken: CleverAgents cannot operate until it is fixed.
    Error,
}

impl CheckStatus {
    /// `OK`, `WARN` or `ERROR`.
    pub fn label(self) -> &'static str {
        match self {
            CheckStatus::Ok => "OK",
            CheckStatus::Warn => "WARN",
            CheckStatus::Error => "ERROR",
        }
    }
}

/// One health check's result.
#[derive(Debug, Clone, Serialize, serde::Deserialize, schemars::JsonSchema)]
pub struct Check {
    /// What was checked.
    pub name: String,
    /// The outcome.
    pub status: CheckStatus,
    /// What was found.
    pub details: String,
    /// What to do about it, when not OK, in words.
    pub fix: Option<String>,
    /// What to do about it as a step to run (`config unset KEY`), when that is the fix; the
    /// face renders it in place of `fix` (and serializes it there).
    #[serde(skip)]
    pub fix_step: Option<Next>,
}

impl Check {
    /// A check result; `fix` says what to do when it is not OK.
    pub fn new(
        name: impl Into<String>,
        status: CheckStatus,
        details: impl Into<String>,
        fix: Option<String>,
    ) -> Self {
        Self {
            name: name.into(),
            status,
            details: details.into(),
            fix,
            fix_step: None,
        }
    }

    /// The same result, fixed by running `step`.
    pub fn fixed_by(mut self, step: Next) -> Self {
        self.fix_step = Some(step);
        self
    }
}
