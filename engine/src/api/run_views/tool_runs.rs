//! `tool run`: one built-in tool call against a plan's sandbox, run where the data is (the
//! server's host through a server), logged like a call of the plan.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::api::{ApiError, Engine, ErrorCode};
use crate::domain::plan::Plan;
use crate::sandbox::git_sandbox::preflight;
use crate::sandbox::{SandboxTarget, Sandboxes, TargetKind};
use crate::store::Store;
use crate::tools::runner::{CallRequest, Policy, RunnerError, ToolRunner};

/// What `tool run` asks.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ToolRunRequest {
    /// Tool name.
    pub tool: String,
    /// Plan id or unique prefix.
    pub plan: String,
    /// The arguments (a JSON object).
    pub arguments: Value,
    /// Resource to bind.
    pub resource: Option<String>,
    /// Skill the call is attributed to.
    pub skill: Option<String>,
    /// Developer flag: sandbox this directory or git checkout (on the host that runs the
    /// tool) for the plan if it has no resource yet.
    pub target_path: Option<PathBuf>,
}

/// One file a tool call changed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ToolChange {
    /// `create`, `modify`, `delete`, `rename`, ...
    pub operation: String,
    /// The path.
    pub path: String,
    /// The old path of a rename.
    pub old_path: Option<String>,
    /// The new size in bytes.
    pub new_size: Option<u64>,
}

/// A tool call that ran.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ToolRan {
    /// The call as the command's JSON shows it (plan, call record, result, changes,
    /// checkpoints).
    pub data: Value,
    /// The plan's id.
    pub plan_id: String,
    /// The resource the call was bound to.
    pub resource_name: Option<String>,
    /// The call's number in the plan's log.
    pub seq: u64,
    /// How long it took.
    pub duration_ms: u64,
    /// The files it changed.
    pub changes: Vec<ToolChange>,
    /// The tool's result.
    pub result: Value,
    /// Warnings for the user (a `--target-path` checkout's state).
    pub warnings: Vec<String>,
}

/// Loads a plan by id or prefix after sweeping orphaned and expired sandboxes.
fn open(
    engine: &Engine,
    store: &mut Store,
    sandboxes: &Sandboxes,
    plan: &str,
) -> Result<Plan, ApiError> {
    if let Err(e) = crate::sandbox::lifetime::sweep(
        store,
        sandboxes,
        jiff::Timestamp::now(),
        engine.settings().sandbox_retention_days,
    ) {
        tracing::warn!(error = %e, "sandbox sweep failed");
    }
    let id = store.resolve_plan_id(plan)??;
    store
        .plan(&id)?
        .ok_or(ApiError::ToolRunner(RunnerError::PlanNotFound(id)))
}

/// Registers `path` as a sandbox target of `plan` (the hidden `--target-path` developer flag):
/// a git work tree root is sandboxed at its HEAD commit, anything else as a directory. Returns
/// warnings for the user.
fn register_dev_target(
    store: &mut Store,
    sandboxes: &Sandboxes,
    plan: &Plan,
    path: &Path,
) -> Result<Vec<String>, ApiError> {
    let path = std::fs::canonicalize(path).map_err(|e| ApiError::InvalidInput {
        message: format!("--target-path {}: {e}", path.display()),
    })?;
    let name = format!(
        "local/{}",
        path.file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| "root".into())
    );
    if let Some(existing) = store.sandbox_target(&plan.plan_id, &name)?
        && existing.kind.source_path() == path
    {
        return Ok(Vec::new());
    }
    let is_git_root = git2::Repository::open(&path)
        .ok()
        .and_then(|r| r.workdir().and_then(|w| std::fs::canonicalize(w).ok()))
        .is_some_and(|w| w == path);
    let (kind, warnings) = if is_git_root {
        let pre = preflight(&path)?;
        (
            TargetKind::GitCheckout {
                repo: path.clone(),
                base_commit: pre.head_commit.clone(),
            },
            pre.warnings(),
        )
    } else {
        (TargetKind::Directory { root: path.clone() }, Vec::new())
    };
    sandboxes.register_target(
        store,
        &SandboxTarget {
            plan_id: plan.plan_id,
            resource_name: name,
            alias: None,
            kind,
            read_only: false,
        },
    )?;
    Ok(warnings)
}

/// Runs the tool call.
///
/// # Errors
/// `NOT_FOUND` / `AMBIGUOUS` for the plan, sandbox and store failures; a call that failed is
/// logged and is [`ApiError::Failed`] with the call's data.
pub(super) fn run(engine: &Engine, r: ToolRunRequest) -> Result<ToolRan, ApiError> {
    let mut store = engine.store()?;
    let sandboxes = engine.sandboxes();
    let plan = open(engine, &mut store, &sandboxes, &r.plan)?;
    let mut warnings = Vec::new();
    if let Some(path) = &r.target_path {
        warnings = register_dev_target(&mut store, &sandboxes, &plan, path)?;
    }
    // Execute creates a plan's sandbox: before it, there is nothing for a tool to work on.
    if r.target_path.is_none()
        && plan.phase() == crate::domain::Phase::Strategize
        && store.sandbox_targets(&plan.plan_id)?.is_empty()
    {
        return Err(crate::lifecycle::RunError::WrongState {
            phase: plan.phase(),
            state: plan.state(),
            message: format!(
                "plan {} has no sandbox until Execute: tools run in the sandbox Execute creates",
                plan.plan_id
            ),
            hints: vec![crate::domain::Next::ExecutePlan { plan: plan.plan_id }],
        }
        .into());
    }
    let policy = Policy::for_plan(&plan);
    let step = ToolRunner::new(&mut store, &sandboxes).step(
        &plan.plan_id,
        &policy,
        CallRequest {
            tool: r.tool.clone(),
            arguments: r.arguments,
            parent_skill: r.skill,
            resource: r.resource,
        },
    )?;
    let call = &step.call;
    let data = json!({
        "plan_id": plan.plan_id.to_string(),
        "call": call.record,
        "result": call.result.as_ref().ok(),
        "changes": call.changes,
        "checkpoints": {
            "start": step.start.as_ref().map(|c| c.checkpoint_id.to_string()),
            "end": step.end.as_ref().map(|c| c.checkpoint_id.to_string()),
        },
    });
    let result = match &call.result {
        Ok(result) => result.clone(),
        Err(e) => {
            let code = match e.code() {
                "INVALID_ARGUMENTS" => "INVALID_INPUT",
                other => other,
            };
            let hints = if code == "INVALID_INPUT" {
                vec!["the tool's input schema lists its arguments; fix the named field".into()]
            } else {
                Vec::new()
            };
            return Err(ApiError::Failed {
                code: code.parse().unwrap_or(ErrorCode::ToolFailed),
                message: format!("{}: {e}", r.tool),
                detail: Some(format!(
                    "the call was logged as #{} ({}); the plan is unchanged and can continue",
                    call.record.seq, call.record.outcome
                )),
                hints,
                data: Box::new(data),
            });
        }
    };
    Ok(ToolRan {
        plan_id: plan.plan_id.to_string(),
        resource_name: call.record.resource_name.clone(),
        seq: call.record.seq,
        duration_ms: call.record.duration_ms,
        changes: call
            .changes
            .iter()
            .map(|c| ToolChange {
                operation: c.operation.as_str().to_string(),
                path: c.path.clone(),
                old_path: c.old_path.clone(),
                new_size: c.new_size,
            })
            .collect(),
        result,
        warnings,
        data,
    })
}
