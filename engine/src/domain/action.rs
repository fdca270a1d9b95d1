//! Actions (spec section 09): reusable definitions, separate from plans, as the store keeps
//! them: their states, arguments, script steps and sandbox settings. Loading, checking and
//! editing them lives in `crate::registry::actions`.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use schemars::JsonSchema;
use serde_json::{Map, Value};

use super::id::Id;
use super::lifecycle::str_enum;
use super::limits::Limits;

/// The state of an action definition.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ActionState {
    /// Being written; not offered for `plan use` by default.
    Draft,
    /// Validated and usable.
    Available,
    /// Hidden from lists; existing plans are unchanged.
    Archived,
}

str_enum!(ActionState { Draft => "draft", Available => "available", Archived => "archived" });

impl ActionState {
    /// Whether an action may move from `self` to `to`: draft -> available, available ->
    /// archived, draft -> archived, and archived -> available (restoring an archived action).
    pub fn can_become(self, to: ActionState) -> bool {
        use ActionState::*;
        matches!(
            (self, to),
            (Draft, Available) | (Available, Archived) | (Draft, Archived) | (Archived, Available)
        )
    }
}

/// The interpreter of a command (`shell:` of an action or a `run:` step, `shell` of
/// `shell_execute`): `sh` is `/bin/sh` (the default), `bash` is the first `bash` on `PATH`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Interpreter {
    /// `/bin/sh -c COMMAND` (POSIX shell; dash on Debian and Ubuntu).
    #[default]
    Sh,
    /// `bash -c COMMAND` (arrays, `[[ ]]`, `set -o pipefail`, ...).
    Bash,
}

/// The type of an action argument.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum ArgType {
    /// Any text.
    #[serde(alias = "str")]
    String,
    /// A whole number (`i64`).
    #[serde(alias = "int")]
    Integer,
    /// A number (`f64`).
    #[serde(alias = "float")]
    Number,
    /// `true` or `false`.
    #[serde(alias = "bool")]
    Boolean,
    /// A filesystem path (text; resolved by the tools that use it).
    Path,
}

/// One declared argument (`arguments:` entry, or `--arg name:type:required|optional:desc`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ArgumentSpec {
    /// Name used in `--arg name=value` and `{{ name }}`: letters, digits and `_`.
    pub name: String,
    /// Value type.
    #[serde(rename = "type")]
    pub arg_type: ArgType,
    /// Whether `plan use` must give it (default false).
    #[serde(default)]
    pub required: bool,
    /// What it means.
    #[serde(default)]
    pub description: Option<String>,
    /// Value used when not given (optional arguments only).
    #[serde(default)]
    pub default: Option<Value>,
}

/// A child plan started by a `spawn` step.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SpawnSpec {
    /// The action the child plan uses.
    pub action: String,
    /// Arguments for the child plan (`{{ }}` placeholders allowed in strings).
    #[serde(default)]
    pub args: Map<String, Value>,
}

/// One step of an action's `script` (run by the built-in offline actors).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(
    deny_unknown_fields,
    rename_all(serialize = "snake_case", deserialize = "kebab-case")
)]
pub struct ScriptStep {
    /// Unique step name.
    pub name: String,
    /// A shell command run in the sandbox. `{{ name }}` renders each argument as one
    /// shell-quoted word; `{{ name | raw }}` pastes it unquoted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run: Option<String>,
    /// The interpreter of `run` (`sh`, the default, or `bash`); the action's `shell:` when
    /// the step sets none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shell: Option<Interpreter>,
    /// A tool to call, with `args`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool: Option<String>,
    /// Tool arguments (only with `tool`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub args: Option<Map<String, Value>>,
    /// A child plan to start.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spawn: Option<SpawnSpec>,
    /// The resource a `run` or `tool` step works on (a resource name, its short name or its
    /// alias in the project); needed when the plan has several resources (spec section 14,
    /// multi-project operations: bindings resolve per step).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resource: Option<String>,
    /// Steps that must finish first (default: the previous step).
    #[serde(default, alias = "depends_on", skip_serializing_if = "Option::is_none")]
    pub depends_on: Option<Vec<String>>,
    /// Spawn steps with the same label run concurrently.
    #[serde(
        default,
        alias = "parallel_group",
        skip_serializing_if = "Option::is_none"
    )]
    pub parallel_group: Option<String>,
}

/// What shell steps may do beyond the default confinement.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(
    deny_unknown_fields,
    rename_all(serialize = "snake_case", deserialize = "kebab-case")
)]
pub struct SandboxSpec {
    /// Allow network access (default false).
    #[serde(default)]
    pub network: bool,
    /// Extra writable paths outside the sandbox (default none).
    #[serde(default, alias = "writable_paths")]
    pub writable_paths: Vec<String>,
    /// Environment variables passed through to shell steps by name (default none; the shell
    /// otherwise sees only `PATH`, `LANG`, `TERM` and a per-plan `HOME`). Names are
    /// `[A-Za-z_][A-Za-z0-9_]*`. Example: `[RUSTUP_HOME, RUSTUP_TOOLCHAIN]` for `cargo fmt`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub env: Vec<String>,
    /// Resource limits of shell steps (`processes`, `memory`, `address-space`, `file-size`,
    /// `open-files`); absent ones keep the defaults shown by `agents diagnostics`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limits: Option<Limits>,
    /// Extra paths shell steps may never read (`~/.kube`, `/srv/*/secrets`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub deny_read: Vec<String>,
}

/// A registered action.
#[derive(Debug, Clone, PartialEq, Serialize, serde::Deserialize, schemars::JsonSchema)]
pub struct Action {
    /// Action id (ULID).
    pub action_id: Id,
    /// Namespaced name.
    pub name: String,
    /// draft, available or archived.
    pub state: ActionState,
    /// Short description (may hold `{{ }}` placeholders).
    pub description: Option<String>,
    /// Long description.
    pub long_description: Option<String>,
    /// Definition of done (may hold placeholders).
    pub definition_of_done: String,
    /// Strategize actor reference.
    pub strategy_actor: String,
    /// Execute actor reference.
    pub execution_actor: String,
    /// Estimation actor reference.
    pub estimation_actor: Option<String>,
    /// Invariant reconciliation actor reference.
    pub invariant_actor: Option<String>,
    /// Default automation profile.
    pub automation_profile: Option<String>,
    /// Keep after use.
    pub reusable: bool,
    /// Read-only tools only.
    pub read_only: bool,
    /// Declared arguments, in order.
    pub arguments: Vec<ArgumentSpec>,
    /// Script steps.
    pub script: Option<Vec<ScriptStep>>,
    /// Sandbox widening.
    pub sandbox: Option<SandboxSpec>,
    /// The file it was created from.
    pub config_path: Option<String>,
    /// Creation time.
    pub created_at: jiff::Timestamp,
    /// Last change.
    pub updated_at: jiff::Timestamp,
    /// When it was archived.
    pub archived_at: Option<jiff::Timestamp>,
    /// 1 when created, raised by each `action create --update`. Plans keep the definition
    /// they were made from (rendered text and script) and record this number.
    pub version: u32,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn actions_never_return_to_draft() {
        for s in ActionState::ALL {
            assert!(!s.can_become(ActionState::Draft));
            assert!(!s.can_become(*s));
        }
        assert!(ActionState::Draft.can_become(ActionState::Available));
        assert!(ActionState::Available.can_become(ActionState::Archived));
    }
}
