//! Tools: the only way agents change the world (spec section 18).
//!
//! - [`Tool`]: name, description, JSON Schema input (derived with schemars, validated with
//!   jsonschema before anything runs), fixed capability metadata and an `execute` that works
//!   on a sandbox through [`ToolContext`].
//! - Built-ins: [`files`] (file and directory operations, `get_file_info`), [`search`]
//!   (`list_files`, `search_files`), [`git`] (`git_status`, `git_diff`, `git_log`) and
//!   [`shell`] (`shell_execute`).
//! - [`runner`]: binding, policy, execution, logging and change capture.
//! - [`change`]: `Change` records.

pub mod change;
pub mod code_intelligence;
pub mod command;
pub mod custom;
pub mod external;
pub mod files;
pub mod git;
pub mod mcp;
pub mod runner;
pub mod search;
pub mod shell;

use std::marker::PhantomData;

use schemars::JsonSchema;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::sandbox::Sandbox;
use crate::sandbox::confined::{FsError, SandboxFs};
use change::Change;

/// The built-in group a tool belongs to (spec section 18 "Built-in implicit slots").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ToolGroup {
    /// File reads and writes (slot `directory`, read_write).
    FileOperations,
    /// Directory operations (slot `directory`, read_write).
    DirectoryOperations,
    /// Listing and searching (slot `directory`, read_only).
    SearchOperations,
    /// Git inspection (slot `repo`, git-checkout only, read_only).
    GitOperations,
    /// Shell commands (slot `directory`, read_write).
    ShellOperations,
    /// The code index (slot `directory`, read_only).
    CodeIntelligence,
}

impl ToolGroup {
    /// The implicit resource slot name: `repo` for git tools, `directory` otherwise.
    pub fn slot(self) -> &'static str {
        match self {
            ToolGroup::GitOperations => "repo",
            _ => "directory",
        }
    }

    /// The group's name as in skill YAML (`file_operations`).
    pub fn as_str(self) -> &'static str {
        match self {
            ToolGroup::FileOperations => "file_operations",
            ToolGroup::DirectoryOperations => "directory_operations",
            ToolGroup::SearchOperations => "search_operations",
            ToolGroup::GitOperations => "git_operations",
            ToolGroup::ShellOperations => "shell_operations",
            ToolGroup::CodeIntelligence => "code_intelligence",
        }
    }
}

/// Capability metadata (spec section 18). Built-in metadata is fixed and not overridable.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Capability {
    /// Only reads.
    pub read_only: bool,
    /// Changes the sandbox.
    pub writes: bool,
    /// Its effects can be captured by a checkpoint and rolled back.
    pub checkpointable: bool,
    /// Granularity of its rollback: `file` or `snapshot`.
    pub checkpoint_scope: Option<&'static str>,
    /// Calling it twice with the same arguments has the effect of calling it once.
    pub idempotent: bool,
    /// Its effects are not confined by the kernel (shell commands without Landlock).
    #[serde(rename = "unsafe")]
    pub is_unsafe: bool,
    /// Effects beyond the sandbox's files.
    pub side_effects: Vec<&'static str>,
}

impl Capability {
    /// A read-only tool.
    pub fn read_only() -> Self {
        Self {
            read_only: true,
            writes: false,
            checkpointable: true,
            checkpoint_scope: None,
            idempotent: true,
            is_unsafe: false,
            side_effects: Vec::new(),
        }
    }

    /// A file-writing tool checkpointed per file.
    pub fn writes_files(idempotent: bool) -> Self {
        Self {
            read_only: false,
            writes: true,
            checkpointable: true,
            checkpoint_scope: Some("file"),
            idempotent,
            is_unsafe: false,
            side_effects: Vec::new(),
        }
    }
}

/// Why a tool call did not succeed. Every variant is a result the actor sees; none stops the
/// plan.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ToolError {
    /// Refused by policy or confinement; nothing ran.
    #[error("permission denied: {0}")]
    PermissionDenied(String),
    /// The arguments do not match the input schema; nothing ran.
    #[error("invalid argument `{field}`: {message}")]
    InvalidArguments {
        /// The field, as a path (`edits[1].old_text`), or `(arguments)` for the whole object.
        field: String,
        /// What is wrong.
        message: String,
    },
    /// A path or object does not exist.
    #[error("not found: {0}")]
    NotFound(String),
    /// The target exists and the call would overwrite it.
    #[error("already exists: {0}")]
    AlreadyExists(String),
    /// The tool ran and failed.
    #[error("{0}")]
    Failed(String),
}

impl ToolError {
    /// A stable code: `PERMISSION_DENIED`, `INVALID_ARGUMENTS`, `NOT_FOUND`,
    /// `ALREADY_EXISTS`, `TOOL_FAILED`.
    pub fn code(&self) -> &'static str {
        match self {
            ToolError::PermissionDenied(_) => "PERMISSION_DENIED",
            ToolError::InvalidArguments { .. } => "INVALID_ARGUMENTS",
            ToolError::NotFound(_) => "NOT_FOUND",
            ToolError::AlreadyExists(_) => "ALREADY_EXISTS",
            ToolError::Failed(_) => "TOOL_FAILED",
        }
    }

    /// An invalid-arguments error for one field.
    pub fn invalid(field: impl Into<String>, message: impl Into<String>) -> Self {
        ToolError::InvalidArguments {
            field: field.into(),
            message: message.into(),
        }
    }
}

impl From<FsError> for ToolError {
    fn from(e: FsError) -> Self {
        match e {
            FsError::Denied(m) => ToolError::PermissionDenied(m),
            FsError::NotFound(p) => ToolError::NotFound(format!("{p} does not exist")),
            FsError::AlreadyExists(p) => ToolError::AlreadyExists(format!(
                "{p} already exists; pass overwrite: true to replace it"
            )),
            other => ToolError::Failed(other.to_string()),
        }
    }
}

/// The shell environment of a plan: where HOME/TMPDIR point, what may be written, what the
/// action's `sandbox:` key widened.
#[derive(Debug, Clone, Default)]
pub struct ShellSettings {
    /// Per-plan HOME.
    pub home: std::path::PathBuf,
    /// Per-plan XDG_CACHE_HOME.
    pub cache: std::path::PathBuf,
    /// Per-plan TMPDIR.
    pub tmp: std::path::PathBuf,
    /// The action's `sandbox:` widening.
    pub policy: shell::ShellPolicy,
    /// Set by the plan's driver when the plan is cancelled or interrupted: a running command's
    /// process group is killed at once.
    pub cancel: Option<std::sync::Arc<std::sync::atomic::AtomicBool>>,
    /// Where a running command's output lines go as they are written (a plan's live view of
    /// a script step), if anywhere.
    pub on_line: Option<crate::sandbox::launcher::LineSink>,
}

/// What a tool sees while it runs.
pub struct ToolContext<'a> {
    /// The bound resource's sandbox.
    pub sandbox: &'a Sandbox,
    /// Confined access to its work tree.
    pub fs: &'a SandboxFs,
    /// Shell settings for `shell_execute`.
    pub shell: &'a ShellSettings,
    /// Changes recorded by this call.
    pub changes: Vec<Change>,
    /// The configuration file (its `[index]` policy and embeddings), when known.
    pub config_path: Option<&'a std::path::Path>,
}

impl ToolContext<'_> {
    /// Records a change made by this call.
    pub fn record(&mut self, change: Change) {
        self.changes.push(change);
    }
}

/// A tool (spec section 18 "Interface").
pub trait Tool: Send + Sync {
    /// The tool's name (`write_file`).
    fn name(&self) -> &'static str;
    /// What it does, for actors and `tool show`.
    fn description(&self) -> &'static str;
    /// Its built-in group.
    fn group(&self) -> ToolGroup;
    /// Its capability metadata.
    fn capability(&self) -> Capability;
    /// Its input schema (JSON Schema 2020-12).
    fn input_schema(&self) -> Value;
    /// Argument fields that hold sandbox paths (for `path://NAME/` binding).
    fn path_fields(&self) -> &'static [&'static str];
    /// Runs with arguments already validated against [`Tool::input_schema`].
    ///
    /// # Errors
    /// [`ToolError`], reported to the actor.
    fn execute(&self, ctx: &mut ToolContext<'_>, args: Value) -> Result<Value, ToolError>;
}

type RunFn<A> = fn(&mut ToolContext<'_>, A) -> Result<Value, ToolError>;

/// A built-in tool over an argument struct `A` (schema derived from `A`).
pub struct Builtin<A> {
    name: &'static str,
    description: &'static str,
    group: ToolGroup,
    capability: fn() -> Capability,
    paths: &'static [&'static str],
    run: RunFn<A>,
    _args: PhantomData<fn(A)>,
}

impl<A> Builtin<A> {
    /// A built-in tool.
    pub const fn new(
        name: &'static str,
        description: &'static str,
        group: ToolGroup,
        capability: fn() -> Capability,
        paths: &'static [&'static str],
        run: RunFn<A>,
    ) -> Self {
        Self {
            name,
            description,
            group,
            capability,
            paths,
            run,
            _args: PhantomData,
        }
    }
}

impl<A: JsonSchema + DeserializeOwned + 'static> Tool for Builtin<A> {
    fn name(&self) -> &'static str {
        self.name
    }
    fn description(&self) -> &'static str {
        self.description
    }
    fn group(&self) -> ToolGroup {
        self.group
    }
    fn capability(&self) -> Capability {
        (self.capability)()
    }
    fn input_schema(&self) -> Value {
        schemars::schema_for!(A).to_value()
    }
    fn path_fields(&self) -> &'static [&'static str] {
        self.paths
    }
    fn execute(&self, ctx: &mut ToolContext<'_>, args: Value) -> Result<Value, ToolError> {
        let args: A = serde_json::from_value(args)
            .map_err(|e| ToolError::invalid("(arguments)", e.to_string()))?;
        (self.run)(ctx, args)
    }
}

/// Every built-in tool, in the order `tool list` shows them.
pub fn builtins() -> Vec<Box<dyn Tool>> {
    let mut tools: Vec<Box<dyn Tool>> = Vec::new();
    tools.extend(files::tools());
    tools.extend(search::tools());
    tools.extend(git::tools());
    tools.push(shell::tool());
    tools.extend(code_intelligence::tools());
    tools
}

/// The built-in tool called `name`.
pub fn builtin(name: &str) -> Option<Box<dyn Tool>> {
    builtins().into_iter().find(|t| t.name() == name)
}

/// Validates `args` against a tool's schema; the first problem is returned with the field it
/// concerns.
///
/// # Errors
/// [`ToolError::InvalidArguments`].
pub fn validate(tool: &dyn Tool, args: &Value) -> Result<(), ToolError> {
    validate_schema(tool.name(), &tool.input_schema(), args)
}

/// Validates `args` against the input schema of the tool called `name` (any tool, built-in
/// or registered); the first problem is returned with the field it concerns.
///
/// # Errors
/// [`ToolError::InvalidArguments`]; [`ToolError::Failed`] when the schema does not compile.
pub fn validate_schema(name: &str, schema: &Value, args: &Value) -> Result<(), ToolError> {
    let validator = jsonschema::validator_for(schema)
        .map_err(|e| ToolError::Failed(format!("the schema of {name} is invalid: {e}")))?;
    let Some(error) = validator.iter_errors(args).next() else {
        return Ok(());
    };
    let mut field = pointer_to_field(error.instance_path().as_str());
    match error.kind() {
        jsonschema::error::ValidationErrorKind::Required { property } => {
            let name = property.as_str().unwrap_or_default();
            field = join_field(&field, name);
            return Err(ToolError::invalid(field, "is required"));
        }
        jsonschema::error::ValidationErrorKind::AdditionalProperties { unexpected } => {
            let name = unexpected.first().cloned().unwrap_or_default();
            let allowed = schema
                .get("properties")
                .and_then(Value::as_object)
                .map(|p| p.keys().cloned().collect::<Vec<_>>().join(", "))
                .unwrap_or_default();
            return Err(ToolError::invalid(
                join_field(&field, &name),
                format!("is not an argument of {name} (arguments: {allowed})"),
            ));
        }
        _ => {}
    }
    if field.is_empty() {
        field = "(arguments)".into();
    }
    Err(ToolError::invalid(field, error.to_string()))
}

fn join_field(parent: &str, name: &str) -> String {
    if parent.is_empty() {
        name.to_string()
    } else {
        format!("{parent}.{name}")
    }
}

/// `/edits/1/old_text` -> `edits[1].old_text`.
fn pointer_to_field(pointer: &str) -> String {
    let mut out = String::new();
    for part in pointer.split('/').filter(|p| !p.is_empty()) {
        let part = part.replace("~1", "/").replace("~0", "~");
        if part.chars().all(|c| c.is_ascii_digit()) {
            out.push_str(&format!("[{part}]"));
        } else {
            if !out.is_empty() {
                out.push('.');
            }
            out.push_str(&part);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn every_builtin_has_a_valid_schema_and_a_unique_name() {
        let tools = builtins();
        let mut names: Vec<_> = tools.iter().map(|t| t.name()).collect();
        names.sort();
        let before = names.len();
        names.dedup();
        assert_eq!(before, names.len());
        for t in &tools {
            jsonschema::validator_for(&t.input_schema())
                .unwrap_or_else(|e| panic!("{}: {e}", t.name()));
            let cap = t.capability();
            assert_ne!(cap.read_only, cap.writes, "{}", t.name());
        }
        assert_eq!(
            names,
            [
                "analyze_dependencies",
                "copy_file",
                "create_directory",
                "delete_directory",
                "delete_file",
                "edit_file",
                "find_definition",
                "find_references",
                "get_file_info",
                "git_diff",
                "git_log",
                "git_status",
                "list_directory",
                "list_files",
                "move_file",
                "read_file",
                "repo_overview",
                "search_code",
                "search_code_semantically",
                "search_files",
                "shell_execute",
                "suggest_refactoring_targets",
                "write_file",
            ]
        );
    }

    #[test]
    fn schema_errors_name_the_field() {
        let write = builtin("write_file").unwrap();
        let err = validate(write.as_ref(), &json!({"path": "a"})).unwrap_err();
        assert_eq!(err, ToolError::invalid("content", "is required"));
        let err = validate(write.as_ref(), &json!({"path": 3, "content": "x"})).unwrap_err();
        assert!(
            matches!(&err, ToolError::InvalidArguments { field, .. } if field == "path"),
            "{err}"
        );
        let err = validate(
            write.as_ref(),
            &json!({"path": "a", "content": "x", "mode": 1}),
        )
        .unwrap_err();
        assert!(
            matches!(&err, ToolError::InvalidArguments { field, .. } if field == "mode"),
            "{err}"
        );
        let edit = builtin("edit_file").unwrap();
        let err = validate(
            edit.as_ref(),
            &json!({"path": "a", "edits": [{"old_text": "x", "new_text": "y"}, {"new_text": "z"}]}),
        )
        .unwrap_err();
        assert_eq!(err, ToolError::invalid("edits[1].old_text", "is required"));
    }
}
