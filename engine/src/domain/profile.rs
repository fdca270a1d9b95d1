//! Automation profiles (spec section 27): the flags that decide what proceeds without a
//! human, and where a plan's profile came from, as the store keeps them. Resolving and
//! registering them lives in `crate::registry::profiles`.

use serde::{Deserialize, Serialize};

/// The 13 flags of a profile (spec section 27), in the spec's table order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Flags {
    /// Strategize starts right after `plan use`.
    #[serde(alias = "auto-strategize")]
    pub auto_strategize: bool,
    /// Execute starts when Strategize completes.
    #[serde(alias = "auto-execute")]
    pub auto_execute: bool,
    /// Apply starts when Execute completes.
    #[serde(alias = "auto-apply")]
    pub auto_apply: bool,
    /// The strategy actor makes all decisions without pausing.
    #[serde(alias = "auto-decisions-strategize")]
    pub auto_decisions_strategize: bool,
    /// The execution actor makes all decisions without pausing.
    #[serde(alias = "auto-decisions-execute")]
    pub auto_decisions_execute: bool,
    /// Failing required validations are fixed within strategy bounds.
    #[serde(alias = "auto-validation-fix")]
    pub auto_validation_fix: bool,
    /// Strategize re-runs for the affected subtree when Execute is stuck.
    #[serde(alias = "auto-strategy-revision")]
    pub auto_strategy_revision: bool,
    /// Child plans spawn and run without pausing before each.
    #[serde(alias = "auto-child-plans")]
    pub auto_child_plans: bool,
    /// Network, timeout and rate-limit failures are retried with backoff.
    #[serde(alias = "auto-retry-transient")]
    pub auto_retry_transient: bool,
    /// A failure rolls back to the last checkpoint and retries.
    #[serde(alias = "auto-checkpoint-restore")]
    pub auto_checkpoint_restore: bool,
    /// Execute must run in a sandbox.
    #[serde(alias = "require-sandbox")]
    pub require_sandbox: bool,
    /// Tools must checkpoint before writing.
    #[serde(alias = "require-checkpoints")]
    pub require_checkpoints: bool,
    /// Tools marked unsafe may run.
    #[serde(alias = "allow-unsafe-tools")]
    pub allow_unsafe_tools: bool,
}

/// Whether a profile is built in or registered by a user.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Serialize, serde::Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "kebab-case")]
pub enum ProfileSource {
    /// One of the six built-ins.
    BuiltIn,
    /// Registered from YAML.
    Custom,
}

/// An automation profile.
#[derive(Debug, Clone, PartialEq, Serialize, serde::Deserialize, schemars::JsonSchema)]
pub struct Profile {
    /// Bare for built-ins (`trusted`), namespaced for custom profiles (`local/careful`).
    pub name: String,
    /// One line saying what it is for.
    pub description: Option<String>,
    /// Built-in or custom.
    pub source: ProfileSource,
    /// The 13 flags.
    pub flags: Flags,
    /// The YAML file a custom profile was registered from.
    pub config_path: Option<String>,
    /// When a custom profile was registered (RFC 3339).
    pub created_at: Option<jiff::Timestamp>,
    /// When a custom profile was last replaced.
    pub updated_at: Option<jiff::Timestamp>,
}

/// Where a plan's profile came from, highest precedence first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ResolvedFrom {
    /// `plan use --automation-profile`.
    Plan,
    /// The action's `automation-profile`.
    Action,
    /// The project's profile (`config set automation-profile --project`).
    Project,
    /// The global config key or `AGENTS_AUTOMATION_PROFILE`.
    Global,
    /// Nothing set anywhere: `manual`.
    Default,
}
