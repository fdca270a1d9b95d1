//! Tool-call records (spec section 18, "Change tracking" and the execution log): what each
//! tool call was asked, how it ended, and what each mutating call changed, as the store keeps
//! them. The tool runner in `crate::tools` writes them.

use std::fmt;
use std::str::FromStr;

use jiff::Timestamp;
use serde::Serialize;
use serde_json::Value;

use super::id::Id;
use super::lifecycle::str_enum;

/// The kind of a change.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Serialize, serde::Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum ChangeOp {
    /// A new file or link.
    Create,
    /// New content or mode.
    Modify,
    /// Removed.
    Delete,
    /// Moved from `old_path`.
    Rename,
    /// A new directory.
    CreateDir,
    /// A removed directory.
    DeleteDir,
}

str_enum!(ChangeOp {
    Create => "create",
    Modify => "modify",
    Delete => "delete",
    Rename => "rename",
    CreateDir => "create_dir",
    DeleteDir => "delete_dir",
});

/// One change to one path. Hashes are SHA-256 (hex) of the content (for links: of the target
/// text); sizes are bytes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, serde::Deserialize, schemars::JsonSchema)]
pub struct Change {
    /// What happened.
    pub operation: ChangeOp,
    /// The path, relative to the resource root.
    pub path: String,
    /// The previous path, for renames.
    pub old_path: Option<String>,
    /// Content hash before.
    pub old_hash: Option<String>,
    /// Content hash after.
    pub new_hash: Option<String>,
    /// Size before.
    pub old_size: Option<u64>,
    /// Size after.
    pub new_size: Option<u64>,
}

/// A stored change.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, serde::Deserialize, schemars::JsonSchema)]
pub struct ChangeRecord {
    /// Change id.
    pub change_id: Id,
    /// The plan.
    pub plan_id: Id,
    /// The tool call that made it.
    pub call_id: Id,
    /// The resource.
    pub resource_name: String,
    /// The change.
    #[serde(flatten)]
    pub change: Change,
    /// When.
    pub created_at: Timestamp,
    /// When a rollback discarded it.
    pub discarded_at: Option<Timestamp>,
}

/// How a call ended.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Serialize, serde::Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum CallOutcome {
    /// Ran and succeeded.
    Ok,
    /// Ran and failed.
    Failed,
    /// Refused by policy or confinement; nothing ran.
    Denied,
    /// Unknown tool, invalid arguments or binding; nothing ran.
    Invalid,
}

str_enum!(CallOutcome { Ok => "ok", Failed => "failed", Denied => "denied", Invalid => "invalid" });

/// One entry of a plan's execution log.
#[derive(Debug, Clone, PartialEq, Serialize, serde::Deserialize, schemars::JsonSchema)]
pub struct ToolCallRecord {
    /// Call id.
    pub call_id: Id,
    /// The plan.
    pub plan_id: Id,
    /// 1, 2, ... within the plan.
    pub seq: u64,
    /// Tool name as asked for.
    pub tool: String,
    /// The skill the tool was offered through, if any.
    pub parent_skill: Option<String>,
    /// The bound resource, once bound.
    pub resource_name: Option<String>,
    /// The arguments (long strings shortened).
    pub arguments: Value,
    /// How it ended.
    pub outcome: CallOutcome,
    /// `PERMISSION_DENIED`, `INVALID_ARGUMENTS`, ... when not ok.
    pub error_code: Option<String>,
    /// The error message when not ok.
    pub error_message: Option<String>,
    /// A one-line summary of the result.
    pub result_summary: Option<String>,
    /// Resources touched.
    pub resources_touched: Vec<String>,
    /// Wall time in milliseconds.
    pub duration_ms: u64,
    /// Start time.
    pub started_at: Timestamp,
    /// When a rollback discarded it.
    pub discarded_at: Option<Timestamp>,
}
