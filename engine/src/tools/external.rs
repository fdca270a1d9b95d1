//! Registered, inline, MCP and Agent Skill tools in the tool runner (spec section 18
//! "Execution flow"): the same steps as built-ins — schema validation, the capability rule,
//! binding, lazy sandbox, execution, change capture, the execution log — for tools whose
//! capability is data rather than code.
//!
//! The capability rule: a writing tool runs only in Execute (never in Strategize, Apply, for a
//! read-only action or on a read-only link); a tool needing approval (`human_approval_required`,
//! or an open-world writing MCP tool) runs without asking only under `full-auto`; under any
//! other profile the execution actor's run pauses for a `tool_approval`
//! ([`ToolRunner::approval_needed`]) and the call runs once a human approved it. What a call
//! changed in the sandbox is found by snapshotting the work tree before and after it.

use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::Instant;

use jiff::Timestamp;
use serde_json::Value;

use super::change::Change;
use super::custom::{ResourceSlot, ToolCapability, ToolDef, ToolSource};
use super::runner::{
    CallOutcome, CallRequest, CallResult, Policy, RunnerError, ToolCallRecord, ToolRunner, shorten,
    summarize,
};
use super::{ShellSettings, ToolError, validate_schema};
use crate::domain::id::Id;
use crate::sandbox::checkpoint;
use crate::sandbox::diff::{self, DiffRequest};
use crate::sandbox::{Sandbox, SandboxTarget};

/// How an external tool runs.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize, schemars::JsonSchema)]
pub enum Runnable {
    /// A command tool (registered, anonymous or an Agent Skill script).
    Command(Box<ToolDef>),
    /// A tool of a connected MCP server.
    Mcp {
        /// The server's name.
        server: String,
        /// The tool's name on it.
        tool: String,
    },
}

/// The tools the engine offers beside the built-ins: the role tools of strategists and
/// executors, and `load_skill`.
pub const ROLE_TOOLS: [&str; 5] = [
    "record_decision",
    "finish_strategy",
    "create_subplan",
    "request_decision",
    "load_skill",
];

/// A tool name as providers accept it (`[A-Za-z0-9_-]`): other characters become `_`.
pub fn wire_name(name: &str) -> String {
    name.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

/// Why the external tool `name` cannot be offered: its wire name ([`wire_name`]) is the name
/// of a built-in or role tool, whose calls it would receive. `None` when it can.
pub fn shadows_builtin(name: &str) -> Option<String> {
    let wire = wire_name(name);
    (super::builtin(&wire).is_some() || ROLE_TOOLS.contains(&wire.as_str()))
        .then(|| format!("`{name}` would be offered as `{wire}`, the name of a built-in tool"))
}

/// A non-built-in tool as offered to an actor.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize, schemars::JsonSchema)]
pub struct ExternalTool {
    /// The name the model calls (`local/lint`, `everything.echo`).
    pub name: String,
    /// Description for the model.
    pub description: String,
    /// JSON Schema of the arguments.
    pub input_schema: Value,
    /// Capability after overrides.
    pub capability: ToolCapability,
    /// Where it comes from.
    pub source: ToolSource,
    /// The skill it came through.
    pub skill: Option<String>,
    /// Resource slots (command tools).
    pub resources: Vec<(String, ResourceSlot)>,
    /// How it runs.
    pub runnable: Runnable,
}

impl ExternalTool {
    /// Whether it needs a human's approval per call: `human_approval_required`, or an
    /// open-world tool that writes.
    pub fn needs_approval(&self) -> bool {
        self.capability.human_approval_required
            || (self.capability.open_world && self.capability.writes)
    }
}

/// What an executor gets while an external tool runs.
pub struct ExternalCtx<'a> {
    /// The bound sandbox.
    pub sandbox: &'a Sandbox,
    /// Per-plan HOME, cache, tmp and the action's widening.
    pub shell: &'a ShellSettings,
    /// Unsafe tools may run (kernel confinement unavailable).
    pub allow_unconfined: bool,
    /// Set when the plan is cancelled.
    pub cancel: Option<Arc<AtomicBool>>,
}

/// Runs one external tool with validated arguments.
pub type Executor<'e> =
    dyn Fn(&ExternalCtx<'_>, &ExternalTool, Value) -> Result<Value, ToolError> + 'e;

/// Changes between two snapshot trees of a sandbox repository.
///
/// # Errors
/// Git errors, as [`ToolError::Failed`].
pub fn changes_between(
    repo: &git2::Repository,
    before: git2::Oid,
    after: git2::Oid,
) -> Result<Vec<Change>, ToolError> {
    let fail = |e: &dyn std::fmt::Display| ToolError::Failed(e.to_string());
    let files = diff::trees(repo, Some(before), Some(after), &DiffRequest::default())
        .map_err(|e| fail(&e))?;
    let old_tree = repo.find_tree(before).map_err(|e| fail(&e))?;
    let new_tree = repo.find_tree(after).map_err(|e| fail(&e))?;
    let blob = |tree: &git2::Tree<'_>, path: &str| {
        tree.get_path(std::path::Path::new(path))
            .ok()
            .and_then(|e| repo.find_blob(e.id()).ok())
            .map(|b| b.content().to_vec())
    };
    Ok(files
        .iter()
        .map(|f| {
            let old = blob(&old_tree, f.old_path.as_deref().unwrap_or(&f.path));
            let new = blob(&new_tree, &f.path);
            Change::from_diff(f, old.as_deref(), new.as_deref())
        })
        .collect())
}

impl ToolRunner<'_> {
    /// Makes one call to an external tool: validate against its schema, check the policy
    /// and the approval rule (`approved`: a human approved this call), bind (static `bind`, parameter `from_param`, else contextual),
    /// ensure the sandbox, execute under the sandbox lock, capture its changes, log.
    ///
    /// # Errors
    /// [`RunnerError`] when the plan is missing or the log cannot be written.
    pub fn call_external(
        &mut self,
        plan_id: &Id,
        policy: &Policy,
        tool: &ExternalTool,
        request: CallRequest,
        approved: bool,
        exec: &Executor<'_>,
    ) -> Result<CallResult, RunnerError> {
        let started_at = Timestamp::now();
        let clock = Instant::now();
        if self.store.plan(plan_id)?.is_none() {
            return Err(RunnerError::PlanNotFound(*plan_id));
        }
        let mut resource = None;
        let mut changes = Vec::new();
        let (outcome, result) = match self.run_external(
            plan_id,
            policy,
            tool,
            &request,
            approved,
            &mut resource,
            &mut changes,
            exec,
        ) {
            Ok(v) => (CallOutcome::Ok, Ok(v)),
            Err((o, e)) => (o, Err(e)),
        };
        let record = ToolCallRecord {
            call_id: Id::generate(),
            plan_id: *plan_id,
            seq: 0,
            tool: request.tool.clone(),
            parent_skill: request.parent_skill.clone().or_else(|| tool.skill.clone()),
            resource_name: resource.clone(),
            arguments: shorten(&request.arguments),
            outcome,
            error_code: result.as_ref().err().map(|e| e.code().to_string()),
            error_message: result.as_ref().err().map(|e| e.to_string()),
            result_summary: result.as_ref().ok().map(|v| summarize(v, &changes)),
            resources_touched: resource.into_iter().collect(),
            duration_ms: clock.elapsed().as_millis() as u64,
            started_at,
            discarded_at: None,
        };
        let record = self.store.insert_tool_call(&record, &changes)?;
        tracing::info!(plan = %plan_id, tool = %record.tool, outcome = %record.outcome,
            source = tool.source.as_str(), changes = changes.len(), "tool call");
        Ok(CallResult {
            record,
            result,
            changes,
        })
    }

    /// Why `policy` refuses `tool`, or `None`.
    pub fn external_refusal(policy: &Policy, tool: &ExternalTool) -> Option<String> {
        let cap = &tool.capability;
        policy.refusal_for(&tool.name, cap.writes, cap.is_unsafe, cap.checkpointable)
    }

    /// Why a call to `tool` needs a human's approval under `policy` first (a
    /// `tool_approval`), or `None`: `human_approval_required`, or an open-world writing
    /// tool, under every profile but `full-auto`.
    pub fn approval_needed(policy: &Policy, tool: &ExternalTool) -> Option<String> {
        // An organization's `skills.require_approval` holds under every profile.
        if let Some(skill) = tool.skill.as_deref()
            && policy
                .approval_skills
                .iter()
                .any(|entry| crate::team::policy::names_item(entry, skill))
        {
            return Some(format!(
                "{} belongs to skill {skill}, whose every call needs an approval under the organization's policy (skills.require_approval)",
                tool.name
            ));
        }
        if !tool.needs_approval() || policy.profile.as_deref() == Some("full-auto") {
            return None;
        }
        Some(if tool.capability.human_approval_required {
            format!("{} is marked human_approval_required", tool.name)
        } else {
            format!(
                "{} changes things outside the sandbox (openWorldHint), which a rollback cannot undo",
                tool.name
            )
        })
    }

    /// Binds `tool` for `request` and makes sure that sandbox exists, so that a checkpoint
    /// taken now captures the state before the call. Binding problems are left for the call
    /// itself to report.
    pub fn prepare_external(&mut self, plan_id: &Id, tool: &ExternalTool, request: &CallRequest) {
        if let Ok(target) = self.bind_external(plan_id, tool, request, &request.arguments)
            && !target.read_only
        {
            let _ = self
                .sandboxes
                .ensure(self.store, plan_id, &target.resource_name);
        }
    }

    fn bind_external(
        &self,
        plan_id: &Id,
        tool: &ExternalTool,
        request: &CallRequest,
        args: &Value,
    ) -> Result<SandboxTarget, ToolError> {
        let targets = self
            .store
            .sandbox_targets(plan_id)
            .map_err(|e| ToolError::Failed(e.to_string()))?;
        let names = || {
            targets
                .iter()
                .map(|t| t.resource_name.clone())
                .collect::<Vec<_>>()
                .join(", ")
        };
        let find = |name: &str, field: &str| {
            targets
                .iter()
                .find(|t| t.answers_to(name))
                .cloned()
                .ok_or_else(|| {
                    ToolError::invalid(
                        field,
                        format!("the plan has no resource `{name}` (resources: {})", names()),
                    )
                })
        };
        if let Some(r) = &request.resource {
            return find(r, "resource");
        }
        for (slot, s) in &tool.resources {
            if let Some(name) = &s.bind {
                return find(name, &format!("resources.{slot}.bind"));
            }
            if let Some(param) = &s.from_param
                && let Some(Value::String(name)) = args.get(param)
            {
                return find(name, param);
            }
        }
        match targets.as_slice() {
            [] => Err(ToolError::Failed(
                "the plan has no resources to work on".into(),
            )),
            [only] => Ok(only.clone()),
            several => {
                let hints: Vec<&str> = tool
                    .resources
                    .iter()
                    .map(|(n, _)| n.as_str())
                    .chain(["directory", "repo"])
                    .collect();
                hints
                    .iter()
                    .find_map(|h| several.iter().find(|t| t.alias.as_deref() == Some(*h)))
                    .cloned()
                    .ok_or_else(|| {
                        ToolError::invalid(
                            "resource",
                            format!(
                                "the plan has several resources ({}); {} does not say which it works on",
                                names(),
                                tool.name
                            ),
                        )
                    })
            }
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn run_external(
        &mut self,
        plan_id: &Id,
        policy: &Policy,
        tool: &ExternalTool,
        request: &CallRequest,
        approved: bool,
        resource: &mut Option<String>,
        changes: &mut Vec<Change>,
        exec: &Executor<'_>,
    ) -> Result<Value, (CallOutcome, ToolError)> {
        let invalid = |e| (CallOutcome::Invalid, e);
        if !request.arguments.is_object() {
            return Err(invalid(ToolError::invalid(
                "(arguments)",
                "must be a JSON object",
            )));
        }
        validate_schema(&tool.name, &tool.input_schema, &request.arguments).map_err(invalid)?;
        if let Some(why) = Self::external_refusal(policy, tool) {
            return Err((CallOutcome::Denied, ToolError::PermissionDenied(why)));
        }
        if !approved && let Some(why) = Self::approval_needed(policy, tool) {
            return Err((
                CallOutcome::Denied,
                ToolError::PermissionDenied(format!(
                    "{why}, so each call needs a human's approval; approvals are asked for only while a plan's execution actor works in Execute"
                )),
            ));
        }
        let target = self
            .bind_external(plan_id, tool, request, &request.arguments)
            .map_err(|e| match e {
                ToolError::Failed(_) => (CallOutcome::Failed, e),
                e => (CallOutcome::Invalid, e),
            })?;
        *resource = Some(target.resource_name.clone());
        if target.read_only && tool.capability.writes {
            return Err((
                CallOutcome::Denied,
                ToolError::PermissionDenied(format!(
                    "{} writes, and {} is linked read-only to this plan",
                    tool.name, target.resource_name
                )),
            ));
        }
        let failed = |e: crate::sandbox::SandboxError| {
            (CallOutcome::Failed, ToolError::Failed(e.to_string()))
        };
        let sandbox = self
            .sandboxes
            .ensure(self.store, plan_id, &target.resource_name)
            .map_err(failed)?;
        let (home, cache, tmp) = self.sandboxes.plan_home(plan_id).map_err(failed)?;
        let shell = ShellSettings {
            home,
            cache,
            tmp,
            policy: policy.shell.clone(),
            cancel: self.cancel.clone(),
            on_line: None,
        };
        let _lock = sandbox.lock().map_err(failed)?;
        let repo = sandbox.repo().map_err(failed)?;
        // Unknown until the closing snapshot has looked at it.
        let before = checkpoint::before_command(&repo).map_err(failed)?;
        let ctx = ExternalCtx {
            sandbox: &sandbox,
            shell: &shell,
            allow_unconfined: policy.allow_unsafe_tools,
            cancel: self.cancel.clone(),
        };
        let result = exec(&ctx, tool, request.arguments.clone());
        // An MCP server outlives the call and may write later.
        let after =
            checkpoint::after_command(&repo, tool.source == ToolSource::Mcp).map_err(failed)?;
        *changes = changes_between(&repo, before, after).map_err(|e| (CallOutcome::Failed, e))?;
        result.map_err(|e| {
            let outcome = match e {
                ToolError::PermissionDenied(_) => CallOutcome::Denied,
                ToolError::InvalidArguments { .. } => CallOutcome::Invalid,
                _ => CallOutcome::Failed,
            };
            (outcome, e)
        })
    }
}

/// Runs a command tool in `ctx`'s sandbox ([`super::command`]).
///
/// # Errors
/// As [`super::command::run`].
pub fn run_command(ctx: &ExternalCtx<'_>, def: &ToolDef, args: Value) -> Result<Value, ToolError> {
    let line = match (&def.command, &def.code) {
        (Some(c), _) => super::command::render(c, &args),
        (None, Some(code)) => code.clone(),
        (None, None) => return Err(ToolError::Failed("the tool has no command".into())),
    };
    let extra = def
        .env
        .iter()
        .filter_map(|n| std::env::var(n).ok().map(|v| (n.clone(), v)));
    let mut extra: Vec<(String, String)> = extra.collect();
    if let Some(dir) = &def.base_dir {
        extra.push(("TOOL_DIR".into(), dir.clone()));
    }
    for n in &ctx.shell.policy.env {
        if let Ok(v) = std::env::var(n) {
            extra.push((n.clone(), v));
        }
    }
    let writable = writable_dirs(ctx);
    super::command::run(super::command::RunSpec {
        line,
        args: &args,
        launch: super::command::Launch {
            program: String::new(),
            args: Vec::new(),
            cwd: ctx.sandbox.work_dir().to_path_buf(),
            env: super::command::base_env(ctx.shell, extra),
            writable,
            // An Agent Skill's scripts read their own folder.
            readable: def.base_dir.iter().map(std::path::PathBuf::from).collect(),
            deny: ctx.shell.policy.deny_read.clone(),
            limits: ctx.shell.policy.limits,
            network: ctx.shell.policy.network,
            allow_unconfined: ctx.allow_unconfined,
        },
        timeout: std::time::Duration::from_secs(
            def.timeout_secs
                .unwrap_or(super::command::DEFAULT_TIMEOUT_SECS)
                .min(super::shell::MAX_TIMEOUT_SECS),
        ),
        cancel: ctx.cancel.clone(),
    })
}

/// Where a tool process may write: the work tree, the per-plan HOME, cache and TMPDIR, and
/// the action's `writable-paths`.
pub fn writable_dirs(ctx: &ExternalCtx<'_>) -> Vec<std::path::PathBuf> {
    let mut writable = vec![
        ctx.sandbox.work_dir().to_path_buf(),
        ctx.shell.home.clone(),
        ctx.shell.cache.clone(),
        ctx.shell.tmp.clone(),
    ];
    writable.extend(ctx.shell.policy.writable_paths.iter().cloned());
    writable
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::lifecycle::{Phase, ProcessingState};
    use serde_json::json;

    fn tool(cap: Value) -> ExternalTool {
        ExternalTool {
            name: "local/t".into(),
            description: "d".into(),
            input_schema: json!({"type": "object"}),
            capability: ToolCapability::settle(&cap).unwrap(),
            source: ToolSource::Command,
            skill: None,
            resources: Vec::new(),
            runnable: Runnable::Mcp {
                server: "s".into(),
                tool: "t".into(),
            },
        }
    }

    fn policy(phase: Phase, profile: &str) -> Policy {
        Policy {
            phase,
            state: ProcessingState::Processing,
            read_only_action: false,
            allow_unsafe_tools: false,
            require_checkpoints: false,
            deny_patterns: Vec::new(),
            shell: Default::default(),
            profile: Some(profile.into()),
            approval_skills: Vec::new(),
        }
    }

    #[test]
    fn a_skill_an_organization_requires_approval_for_asks_even_under_full_auto() {
        let mut deploy = tool(json!({"read_only": true}));
        deploy.skill = Some("acme/deploy".into());
        let mut full_auto = policy(Phase::Execute, "full-auto");
        assert!(ToolRunner::approval_needed(&full_auto, &deploy).is_none());
        full_auto.approval_skills = vec!["deploy".into()];
        let why = ToolRunner::approval_needed(&full_auto, &deploy).unwrap();
        assert!(why.contains("skills.require_approval"), "{why}");
        deploy.skill = Some("acme/lint".into());
        assert!(ToolRunner::approval_needed(&full_auto, &deploy).is_none());
    }

    #[test]
    fn the_runner_enforces_capability_not_the_prompt() {
        let writes = tool(json!({}));
        let reads = tool(json!({"read_only": true}));
        let strategize = policy(Phase::Strategize, "trusted");
        assert!(ToolRunner::external_refusal(&strategize, &writes).is_some());
        assert!(ToolRunner::external_refusal(&strategize, &reads).is_none());
        let execute = policy(Phase::Execute, "trusted");
        assert!(ToolRunner::external_refusal(&execute, &writes).is_none());
        let approval = tool(json!({"human_approval_required": true}));
        assert!(ToolRunner::external_refusal(&execute, &approval).is_none());
        let why = ToolRunner::approval_needed(&execute, &approval).unwrap();
        assert!(why.contains("human_approval_required"), "{why}");
        let full_auto = policy(Phase::Execute, "full-auto");
        assert!(ToolRunner::approval_needed(&full_auto, &approval).is_none());
        let open_world = tool(json!({"writes": true, "open_world": true}));
        assert!(ToolRunner::approval_needed(&execute, &open_world).is_some());
        assert!(ToolRunner::approval_needed(&full_auto, &open_world).is_none());
        assert!(ToolRunner::approval_needed(&execute, &writes).is_none());
        let mut strict = execute.clone();
        strict.require_checkpoints = true;
        assert!(
            ToolRunner::external_refusal(&strict, &tool(json!({"checkpointable": false})))
                .is_some()
        );
    }
}
