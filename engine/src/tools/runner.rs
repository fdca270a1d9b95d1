//! The tool runner (spec section 18 "Execution flow"): resolve the tool, validate the
//! arguments against its schema, enforce the policy, bind a resource, make sure its sandbox
//! exists, execute, record the call and its changes.
//!
//! Policy, checked before anything runs:
//! - writing tools run only in execute (not strategize, apply or applied), never for a
//!   read-only action, never on a read-only project link;
//! - unsafe tools (shell commands without Landlock) need `allow_unsafe_tools`;
//! - with `require_checkpoints`, tools whose effects cannot be captured are refused;
//! - git tools bind only to git checkouts.
//!
//! Binding (contextual, by parameter): a path argument `path://NAME/rest` picks the target
//! whose alias, resource name or short name is NAME; otherwise an explicit resource; otherwise
//! the only target; otherwise the target aliased like the tool's slot (`directory`, `repo`).
//!
//! Every call, refused or not, is logged with its arguments (long strings shortened), outcome,
//! result summary, duration and the resource it touched; a call's changes are stored with it in
//! one transaction.

use std::fmt;
use std::time::Instant;

use jiff::Timestamp;
use serde_json::Value;

use super::change::Change;
use super::shell::ShellPolicy;
use super::{ShellSettings, Tool, ToolContext, ToolError, ToolGroup, builtin, builtins, validate};
use crate::domain::id::Id;
use crate::domain::lifecycle::{Phase, ProcessingState};
use crate::domain::plan::Plan;
pub use crate::domain::tool_call::{CallOutcome, ToolCallRecord};
use crate::sandbox::checkpoint::{self, CheckpointRecord, CheckpointRequest};
use crate::sandbox::confined::SandboxFs;
use crate::sandbox::{SandboxError, SandboxTarget, Sandboxes, TargetKind};
use crate::store::{Store, StoreError};

/// Longest string argument kept verbatim in the execution log, in bytes.
pub const LOGGED_STRING_LIMIT: usize = 4096;

/// The rules a call is checked against (spec sections 18, 22 and 27).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Policy {
    /// The plan's phase.
    pub phase: Phase,
    /// The plan's state.
    pub state: ProcessingState,
    /// The action is read-only.
    pub read_only_action: bool,
    /// Unsafe tools may run (`allow_unsafe_tools`).
    pub allow_unsafe_tools: bool,
    /// Only checkpointable tools may run (`require_checkpoints`).
    pub require_checkpoints: bool,
    /// Extra deny-list globs (`.git` is always denied).
    pub deny_patterns: Vec<String>,
    /// The action's `sandbox:` widening for shell commands.
    pub shell: ShellPolicy,
    /// The plan's automation profile (`full-auto` runs tools that need approval).
    pub profile: Option<String>,
    /// Skills each of whose tool calls needs a human's approval under every profile: the
    /// `skills.require_approval` of the organization policies that bound the plan when it
    /// was made (frozen in its snapshot under `org_policy`).
    pub approval_skills: Vec<String>,
}

impl Policy {
    /// The policy of a plan: its phase and state, and the flags frozen in its effective
    /// profile snapshot (`allow_unsafe_tools`, `require_checkpoints`, `read_only`; absent
    /// flags are false).
    pub fn for_plan(plan: &Plan) -> Self {
        // `plan use` freezes the flags under `flags`; older snapshots kept them at the top.
        let flag = |name: &str| {
            plan.effective_profile_snapshot
                .as_ref()
                .and_then(|s| {
                    s.get("flags")
                        .and_then(|f| f.get(name))
                        .or_else(|| s.get(name))
                })
                .and_then(Value::as_bool)
                .unwrap_or(false)
        };
        Self {
            phase: plan.phase(),
            state: plan.state(),
            read_only_action: flag("read_only"),
            allow_unsafe_tools: flag("allow_unsafe_tools"),
            require_checkpoints: flag("require_checkpoints"),
            deny_patterns: Vec::new(),
            shell: ShellPolicy::default(),
            profile: plan.automation_profile.clone(),
            approval_skills: plan
                .effective_profile_snapshot
                .as_ref()
                .and_then(|s| s.pointer("/org_policy/skills_require_approval"))
                .and_then(Value::as_array)
                .map(|a| {
                    a.iter()
                        .filter_map(Value::as_str)
                        .map(str::to_string)
                        .collect()
                })
                .unwrap_or_default(),
        }
    }

    /// The capability of a tool under this policy (the shell's depends on network).
    pub fn capability(&self, tool: &dyn Tool) -> super::Capability {
        if tool.group() == ToolGroup::ShellOperations {
            super::shell::capability(self.shell.network)
        } else {
            tool.capability()
        }
    }

    /// Why this policy refuses a tool, or `None` when it may run.
    pub fn refusal(&self, tool: &dyn Tool) -> Option<String> {
        let cap = self.capability(tool);
        self.refusal_for(tool.name(), cap.writes, cap.is_unsafe, cap.checkpointable)
    }

    /// Why this policy refuses a tool called `name` with this capability (any source), or
    /// `None` when it may run.
    pub fn refusal_for(
        &self,
        name: &str,
        writes: bool,
        is_unsafe: bool,
        checkpointable: bool,
    ) -> Option<String> {
        if writes {
            match self.phase {
                Phase::Strategize => {
                    return Some(format!(
                        "{name} writes, and the plan is in strategize, which is read-only"
                    ));
                }
                Phase::Apply | Phase::Applied => {
                    return Some(format!(
                        "{name} writes, and the plan is in {}; its sandbox no longer changes",
                        self.phase
                    ));
                }
                Phase::Execute => {}
            }
            if matches!(
                self.state,
                ProcessingState::Cancelled | ProcessingState::Complete
            ) {
                return Some(format!(
                    "{name} writes, and the plan's execute phase is {}",
                    self.state
                ));
            }
            if self.read_only_action {
                return Some(format!("{name} writes, and the plan's action is read-only"));
            }
        }
        if is_unsafe && !self.allow_unsafe_tools {
            return Some(format!(
                "{name} is unsafe here ({}) and the plan's automation profile sets allow_unsafe_tools = false",
                crate::sandbox::launcher::probe().describe().join("; ")
            ));
        }
        if self.require_checkpoints && !checkpointable {
            return Some(format!(
                "{name} cannot be checkpointed and the plan requires checkpoints"
            ));
        }
        None
    }

    /// The built-in tools this policy offers to an actor (strategize and read-only actions
    /// get read-only tools only).
    pub fn offered(&self) -> Vec<Box<dyn Tool>> {
        builtins()
            .into_iter()
            .filter(|t| self.refusal(t.as_ref()).is_none())
            .collect()
    }
}

/// One call to make.
#[derive(Debug, Clone, PartialEq)]
pub struct CallRequest {
    /// Tool name.
    pub tool: String,
    /// Arguments (a JSON object).
    pub arguments: Value,
    /// The skill it was offered through.
    pub parent_skill: Option<String>,
    /// An explicit resource (by parameter), if any.
    pub resource: Option<String>,
}

/// What a call produced.
#[derive(Debug, Clone)]
pub struct CallResult {
    /// The logged record.
    pub record: ToolCallRecord,
    /// The result the actor sees.
    pub result: Result<Value, ToolError>,
    /// Changes made.
    pub changes: Vec<Change>,
}

/// Failures that stop the runner itself (not results for the actor).
#[derive(Debug, thiserror::Error)]
pub enum RunnerError {
    /// The database failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// A sandbox operation outside a call failed.
    #[error(transparent)]
    Sandbox(#[from] SandboxError),
    /// The plan does not exist.
    #[error("plan {0} does not exist")]
    PlanNotFound(Id),
}

/// Runs tools for plans.
pub struct ToolRunner<'a> {
    pub(super) store: &'a mut Store,
    pub(super) sandboxes: &'a Sandboxes,
    pub(super) cancel: Option<std::sync::Arc<std::sync::atomic::AtomicBool>>,
    pub(super) on_line: Option<crate::sandbox::launcher::LineSink>,
}

pub(crate) fn shorten(value: &Value) -> Value {
    match value {
        Value::String(s) if s.len() > LOGGED_STRING_LIMIT => {
            let mut end = LOGGED_STRING_LIMIT;
            while !s.is_char_boundary(end) {
                end -= 1;
            }
            Value::String(format!("{}… ({} bytes)", &s[..end], s.len()))
        }
        Value::Array(a) => Value::Array(a.iter().map(shorten).collect()),
        Value::Object(o) => Value::Object(o.iter().map(|(k, v)| (k.clone(), shorten(v))).collect()),
        v => v.clone(),
    }
}

pub(super) fn summarize(result: &Value, changes: &[Change]) -> String {
    if !changes.is_empty() {
        let shown: Vec<String> = changes
            .iter()
            .take(3)
            .map(|c| format!("{} {}", c.operation, c.path))
            .collect();
        let more = if changes.len() > 3 {
            format!(", +{} more", changes.len() - 3)
        } else {
            String::new()
        };
        return format!("{} change(s): {}{more}", changes.len(), shown.join(", "));
    }
    let mut text = result.to_string();
    if text.len() > 200 {
        let mut end = 200;
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        text.truncate(end);
        text.push('…');
    }
    text
}

/// Splits `NAME/tail` of a `path://NAME/tail` argument. A namespaced name holds a `/` itself
/// (`local/api`), so the longest prefix that names one of `targets` (by name, short name or
/// alias) wins; with none, the first segment is the name (and fails to bind, naming it).
fn split_resource<'p>(rest: &'p str, targets: &[SandboxTarget]) -> (&'p str, &'p str) {
    let ends = rest
        .match_indices('/')
        .map(|(i, _)| i)
        .chain(std::iter::once(rest.len()));
    let longest = ends
        .rev()
        .find(|&i| targets.iter().any(|t| t.answers_to(&rest[..i])));
    match longest {
        Some(i) => (&rest[..i], rest[i..].strip_prefix('/').unwrap_or("")),
        None => rest.split_once('/').unwrap_or((rest, "")),
    }
}

impl<'a> ToolRunner<'a> {
    /// A runner over a store and the sandboxes directory.
    pub fn new(store: &'a mut Store, sandboxes: &'a Sandboxes) -> Self {
        Self {
            store,
            sandboxes,
            cancel: None,
            on_line: None,
        }
    }

    /// Where shell commands' output lines go while they run (a script step's live output);
    /// `None` stops sending them.
    pub fn set_output_lines(&mut self, sink: Option<crate::sandbox::launcher::LineSink>) {
        self.on_line = sink;
    }

    /// A flag that, once set, kills a running shell command's process group (the plan was
    /// cancelled or interrupted).
    pub fn with_cancel(mut self, flag: std::sync::Arc<std::sync::atomic::AtomicBool>) -> Self {
        self.cancel = Some(flag);
        self
    }

    /// Resolves which target a call binds to and rewrites `path://NAME/` prefixes in its path
    /// arguments. Returns the target.
    ///
    /// # Errors
    /// [`ToolError::InvalidArguments`] when no target or several fit; [`ToolError::PermissionDenied`]
    /// for git tools on a directory.
    pub fn bind(
        &self,
        plan_id: &Id,
        tool: &dyn Tool,
        request: &CallRequest,
        args: &mut Value,
    ) -> Result<SandboxTarget, ToolError> {
        let targets = self
            .store
            .sandbox_targets(plan_id)
            .map_err(|e| ToolError::Failed(e.to_string()))?;
        let mut named: Option<String> = request.resource.clone();
        let mut named_field = "resource";
        for field in tool.path_fields() {
            let Some(Value::String(path)) = args.get(*field) else {
                continue;
            };
            if let Some(rest) = path.strip_prefix("path://") {
                let (name, tail) = split_resource(rest, &targets);
                if let Some(prev) = &named
                    && prev != name
                    && targets.iter().any(|t| t.answers_to(prev))
                    && !targets
                        .iter()
                        .any(|t| t.answers_to(prev) && t.answers_to(name))
                {
                    return Err(ToolError::invalid(
                        *field,
                        format!(
                            "names resource `{name}` but the call is bound to `{prev}`; one call works on one resource"
                        ),
                    ));
                }
                named = Some(name.to_string());
                named_field = field;
                let tail = if tail.is_empty() { "." } else { tail };
                args[*field] = Value::String(tail.to_string());
            }
        }
        let names = || {
            targets
                .iter()
                .map(|t| t.resource_name.clone())
                .collect::<Vec<_>>()
                .join(", ")
        };
        let target = match named {
            Some(name) => targets
                .iter()
                .find(|t| t.answers_to(&name))
                .cloned()
                .ok_or_else(|| {
                    ToolError::invalid(
                        named_field,
                        format!("the plan has no resource `{name}` (resources: {})", names()),
                    )
                })?,
            None => {
                // Contextual binding: only resources of the slot's type qualify.
                let fits: Vec<&SandboxTarget> = targets
                    .iter()
                    .filter(|t| {
                        tool.group() != ToolGroup::GitOperations
                            || matches!(t.kind, TargetKind::GitCheckout { .. })
                    })
                    .collect();
                match fits.as_slice() {
                    [] if targets.is_empty() => {
                        return Err(ToolError::Failed(
                            "the plan has no resources to work on".into(),
                        ));
                    }
                    [] => {
                        return Err(ToolError::PermissionDenied(format!(
                            "{} needs a git-checkout resource; the plan has none ({})",
                            tool.name(),
                            names()
                        )));
                    }
                    [only] => (*only).clone(),
                    several => several
                        .iter()
                        .find(|t| t.alias.as_deref() == Some(tool.group().slot()))
                        .map(|t| (*t).clone())
                        .ok_or_else(|| {
                            ToolError::invalid(
                                "resource",
                                format!(
                                    "the plan has several resources ({}); name one: `resource: {}` on a script step, a `resource` argument, or path://{}/... in a path argument",
                                    names(),
                                    targets[0].short_name(),
                                    targets[0].resource_name,
                                ),
                            )
                        })?,
                }
            }
        };
        if tool.group() == ToolGroup::GitOperations
            && !matches!(target.kind, TargetKind::GitCheckout { .. })
        {
            return Err(ToolError::PermissionDenied(format!(
                "{} needs a git-checkout resource; {} is a directory",
                tool.name(),
                target.resource_name
            )));
        }
        Ok(target)
    }

    /// Makes one call: validate, check policy, bind, ensure the sandbox, execute, log.
    ///
    /// # Errors
    /// [`RunnerError`] when the plan is missing or the log cannot be written; everything
    /// about the call itself is in [`CallResult::result`].
    pub fn call(
        &mut self,
        plan_id: &Id,
        policy: &Policy,
        request: CallRequest,
    ) -> Result<CallResult, RunnerError> {
        let started_at = Timestamp::now();
        let clock = Instant::now();
        if self.store.plan(plan_id)?.is_none() {
            return Err(RunnerError::PlanNotFound(*plan_id));
        }
        let mut resource = None;
        let mut changes = Vec::new();
        let (outcome, result) =
            match self.run(plan_id, policy, &request, &mut resource, &mut changes) {
                Ok(v) => (CallOutcome::Ok, Ok(v)),
                Err((outcome, e)) => (outcome, Err(e)),
            };
        let record = ToolCallRecord {
            call_id: Id::generate(),
            plan_id: *plan_id,
            seq: 0,
            tool: request.tool.clone(),
            parent_skill: request.parent_skill.clone(),
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
            changes = changes.len(), "tool call");
        Ok(CallResult {
            record,
            result,
            changes,
        })
    }

    fn run(
        &mut self,
        plan_id: &Id,
        policy: &Policy,
        request: &CallRequest,
        resource: &mut Option<String>,
        changes: &mut Vec<Change>,
    ) -> Result<Value, (CallOutcome, ToolError)> {
        let invalid = |e| (CallOutcome::Invalid, e);
        let tool = builtin(&request.tool).ok_or_else(|| {
            let names: Vec<&str> = builtins().iter().map(|t| t.name()).collect();
            let near = names
                .iter()
                .map(|n| (strsim::jaro_winkler(n, &request.tool), *n))
                .filter(|(s, _)| *s > 0.8)
                .max_by(|a, b| a.0.total_cmp(&b.0))
                .map(|(_, n)| format!("; did you mean {n}?"))
                .unwrap_or_default();
            invalid(ToolError::NotFound(format!(
                "there is no tool `{}`{near} (tools: {})",
                request.tool,
                names.join(", ")
            )))
        })?;
        if !request.arguments.is_object() {
            return Err(invalid(ToolError::invalid(
                "(arguments)",
                "must be a JSON object such as {\"path\": \"src/main.rs\"}",
            )));
        }
        validate(tool.as_ref(), &request.arguments).map_err(invalid)?;
        if let Some(why) = policy.refusal(tool.as_ref()) {
            return Err((CallOutcome::Denied, ToolError::PermissionDenied(why)));
        }
        let mut args = request.arguments.clone();
        let target = self
            .bind(plan_id, tool.as_ref(), request, &mut args)
            .map_err(|e| match e {
                ToolError::PermissionDenied(_) => (CallOutcome::Denied, e),
                ToolError::Failed(_) => (CallOutcome::Failed, e),
                e => (CallOutcome::Invalid, e),
            })?;
        *resource = Some(target.resource_name.clone());
        if target.read_only && policy.capability(tool.as_ref()).writes {
            return Err((
                CallOutcome::Denied,
                ToolError::PermissionDenied(format!(
                    "{} writes, and {} is linked read-only to this plan",
                    tool.name(),
                    target.resource_name
                )),
            ));
        }
        let failed = |e: SandboxError| (CallOutcome::Failed, ToolError::Failed(e.to_string()));
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
            on_line: self.on_line.clone(),
        };
        let _lock = sandbox.lock().map_err(failed)?;
        let fs = SandboxFs::open(sandbox.work_dir(), &policy.deny_patterns)
            .map_err(|e| (CallOutcome::Failed, ToolError::Failed(e.to_string())))?;
        let mut ctx = ToolContext {
            sandbox: &sandbox,
            fs: &fs,
            shell: &shell,
            changes: Vec::new(),
            config_path: self.sandboxes.config_path(),
        };
        let writes = policy.capability(tool.as_ref()).writes;
        let noted = writes && policy.capability(tool.as_ref()).checkpoint_scope == Some("file");
        note_writes(&sandbox.layout.git_dir, tool.as_ref(), &args, writes, noted);
        let result = tool.execute(&mut ctx, args);
        *changes = std::mem::take(&mut ctx.changes);
        if noted {
            crate::sandbox::written::note(
                &sandbox.layout.git_dir,
                changes
                    .iter()
                    .flat_map(|c| std::iter::once(&c.path).chain(c.old_path.as_ref()))
                    .map(std::path::PathBuf::from),
            );
        }
        result.map_err(|e| {
            let outcome = match e {
                ToolError::PermissionDenied(_) => CallOutcome::Denied,
                ToolError::InvalidArguments { .. } => CallOutcome::Invalid,
                _ => CallOutcome::Failed,
            };
            (outcome, e)
        })
    }

    /// Runs one call as a step of its own (what `agents tool run` does): for a writing tool,
    /// a checkpoint at the start (reusing the latest when nothing changed since) and at the
    /// end (reused likewise when the call changed nothing).
    ///
    /// # Errors
    /// As [`Self::call`], plus checkpoint failures.
    pub fn step(
        &mut self,
        plan_id: &Id,
        policy: &Policy,
        request: CallRequest,
    ) -> Result<StepResult, RunnerError> {
        let step = format!("tool run: {}", request.tool);
        let writes = builtin(&request.tool).is_some_and(|t| {
            policy.capability(t.as_ref()).writes && policy.refusal(t.as_ref()).is_none()
        });
        let mut start = None;
        if writes && let Some(tool) = builtin(&request.tool) {
            let mut args = request.arguments.clone();
            if let Ok(target) = self.bind(plan_id, tool.as_ref(), &request, &mut args)
                && !target.read_only
                && validate(tool.as_ref(), &request.arguments).is_ok()
            {
                self.sandboxes
                    .ensure(self.store, plan_id, &target.resource_name)?;
                start = checkpoint::create(
                    self.store,
                    self.sandboxes,
                    plan_id,
                    &CheckpointRequest {
                        step: Some(step.clone()),
                        label: "start".into(),
                        reuse_if_unchanged: true,
                        ..Default::default()
                    },
                )?;
            }
        }
        let call = self.call(plan_id, policy, request)?;
        let end = if start.is_some() {
            checkpoint::create(
                self.store,
                self.sandboxes,
                plan_id,
                &CheckpointRequest {
                    step: Some(step),
                    label: "end".into(),
                    reuse_if_unchanged: true,
                    ..Default::default()
                },
            )?
        } else {
            None
        };
        Ok(StepResult { call, start, end })
    }
}

/// Before a call that may write: a file tool notes the paths its arguments name (it writes
/// nothing else; what it reports writing is noted after it), so checkpoints look at those
/// only; any other writer makes the sandbox's written set unknown (docs/sandbox.md,
/// "Checkpoints that cost what changed").
fn note_writes(
    git_dir: &std::path::Path,
    tool: &dyn Tool,
    args: &Value,
    writes: bool,
    noted: bool,
) {
    use crate::sandbox::written;
    if !writes {
        return;
    }
    if !noted {
        written::forget(git_dir);
        return;
    }
    let mut paths = Vec::new();
    for field in tool.path_fields() {
        match args.get(*field) {
            Some(Value::String(p)) => paths.push(std::path::PathBuf::from(p)),
            None | Some(Value::Null) => {}
            Some(_) => return written::forget(git_dir),
        }
    }
    written::note(git_dir, paths);
}

/// A call run as its own step, with the checkpoints around it.
#[derive(Debug, Clone)]
pub struct StepResult {
    /// The call.
    pub call: CallResult,
    /// The checkpoint before it (writing tools only).
    pub start: Option<CheckpointRecord>,
    /// The checkpoint after it.
    pub end: Option<CheckpointRecord>,
}

impl fmt::Display for ToolCallRecord {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "#{} {} ({})", self.seq, self.tool, self.outcome)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::plan::Plan;
    use crate::sandbox::testing::repo_with_files;
    use serde_json::json;
    use std::fs;
    use std::path::{Path, PathBuf};

    struct Fixture {
        dir: tempfile::TempDir,
        store: Store,
        sandboxes: Sandboxes,
        plan: Plan,
        repo: PathBuf,
    }

    fn fixture(phase: Phase) -> Fixture {
        let dir = tempfile::tempdir().unwrap();
        let repo = dir.path().join("user");
        let head = repo_with_files(
            &repo,
            &[("a.txt", "one\ntwo\n"), ("src/lib.rs", "fn x() {}\n")],
        );
        let mut store = Store::open(&dir.path().join("data/db")).unwrap();
        let mut plan = Plan::new("local/act", "p", Timestamp::now());
        plan.status.phase = phase;
        store.insert_plan(&plan).unwrap();
        let sandboxes = Sandboxes::at(dir.path().join("data/sandboxes"));
        sandboxes
            .register_target(
                &mut store,
                &SandboxTarget {
                    plan_id: plan.plan_id,
                    resource_name: "local/user".into(),
                    alias: Some("app".into()),
                    kind: TargetKind::GitCheckout {
                        repo: repo.clone(),
                        base_commit: head,
                    },
                    read_only: false,
                },
            )
            .unwrap();
        Fixture {
            dir,
            store,
            sandboxes,
            plan,
            repo,
        }
    }

    fn call(f: &mut Fixture, policy: &Policy, tool: &str, args: Value) -> CallResult {
        let plan_id = f.plan.plan_id;
        ToolRunner::new(&mut f.store, &f.sandboxes)
            .call(
                &plan_id,
                policy,
                CallRequest {
                    tool: tool.into(),
                    arguments: args,
                    parent_skill: None,
                    resource: None,
                },
            )
            .unwrap()
    }

    fn outside_files(root: &Path) -> Vec<String> {
        let mut out: Vec<String> = fs::read_dir(root)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        out.sort();
        out
    }

    const WRITERS: [(&str, &str); 8] = [
        ("write_file", r#"{"path": "n.txt", "content": "x"}"#),
        (
            "edit_file",
            r#"{"path": "a.txt", "edits": [{"old_text": "one", "new_text": "1"}]}"#,
        ),
        ("delete_file", r#"{"path": "a.txt"}"#),
        (
            "move_file",
            r#"{"source": "a.txt", "destination": "b.txt"}"#,
        ),
        (
            "copy_file",
            r#"{"source": "a.txt", "destination": "b.txt"}"#,
        ),
        ("create_directory", r#"{"path": "d"}"#),
        ("delete_directory", r#"{"path": "src", "recursive": true}"#),
        ("shell_execute", r#"{"command": "touch z"}"#),
    ];

    #[test]
    fn strategize_and_read_only_actions_refuse_every_writing_tool_before_it_runs() {
        let mut f = fixture(Phase::Strategize);
        let strategize = Policy::for_plan(&f.plan);
        let mut read_only_action = strategize.clone();
        read_only_action.phase = Phase::Execute;
        read_only_action.read_only_action = true;
        read_only_action.allow_unsafe_tools = true;
        for policy in [&strategize, &read_only_action] {
            for (tool, args) in WRITERS {
                let r = call(&mut f, policy, tool, serde_json::from_str(args).unwrap());
                assert_eq!(
                    r.record.outcome,
                    CallOutcome::Denied,
                    "{tool}: {:?}",
                    r.result
                );
                assert!(matches!(r.result, Err(ToolError::PermissionDenied(_))));
                assert!(r.changes.is_empty());
            }
            let offered: Vec<String> = policy
                .offered()
                .iter()
                .map(|t| t.name().to_string())
                .collect();
            assert!(
                offered.iter().all(|n| !WRITERS.iter().any(|(w, _)| w == n)),
                "{offered:?}"
            );
            assert!(offered.contains(&"read_file".to_string()));
        }
        // Refused calls create no sandbox; a read does.
        assert!(
            f.store
                .sandboxes_of_plan(&f.plan.plan_id)
                .unwrap()
                .is_empty()
        );
        let r = call(&mut f, &strategize, "read_file", json!({"path": "a.txt"}));
        assert_eq!(r.result.unwrap()["content"], "one\ntwo\n");
        assert_eq!(
            f.store.tool_calls(&f.plan.plan_id).unwrap().len(),
            17,
            "every call is logged"
        );
    }

    #[test]
    fn read_only_links_refuse_writes() {
        let mut f = fixture(Phase::Execute);
        f.store
            .conn()
            .execute("UPDATE sandbox_targets SET read_only = 1", [])
            .unwrap();
        let policy = Policy::for_plan(&f.plan);
        let r = call(
            &mut f,
            &policy,
            "write_file",
            json!({"path": "n.txt", "content": "x"}),
        );
        assert!(
            matches!(&r.result, Err(ToolError::PermissionDenied(m)) if m.contains("read-only")),
            "{:?}",
            r.result
        );
        let r = call(&mut f, &policy, "read_file", json!({"path": "a.txt"}));
        assert!(r.result.is_ok());
    }

    #[test]
    fn installed_dependencies_under_node_modules_are_read_but_never_changed_by_file_tools() {
        let mut f = fixture(Phase::Execute);
        let policy = Policy::for_plan(&f.plan);
        call(&mut f, &policy, "read_file", json!({"path": "a.txt"}));
        let sb = f
            .sandboxes
            .existing(&f.store, &f.plan.plan_id, "local/user")
            .unwrap()
            .unwrap();
        let pkg = sb.work_dir().join("web/node_modules/pkg");
        fs::create_dir_all(&pkg).unwrap();
        fs::write(pkg.join("index.js"), "module.exports = 1;\n").unwrap();
        let r = call(
            &mut f,
            &policy,
            "read_file",
            json!({"path": "web/node_modules/pkg/index.js"}),
        );
        assert!(r.result.is_ok(), "{:?}", r.result);
        let attempts = [
            (
                "write_file",
                json!({"path": "web/node_modules/pkg/index.js", "content": "pwned"}),
            ),
            (
                "edit_file",
                json!({"path": "web/node_modules/pkg/index.js", "edits": [{"old_text": "1", "new_text": "2"}]}),
            ),
            (
                "delete_file",
                json!({"path": "web/node_modules/pkg/index.js"}),
            ),
            ("create_directory", json!({"path": "node_modules/new"})),
            (
                "move_file",
                json!({"source": "a.txt", "destination": "node_modules/a.txt"}),
            ),
            (
                "delete_directory",
                json!({"path": "web/node_modules", "recursive": true}),
            ),
        ];
        for (tool, args) in attempts {
            let r = call(&mut f, &policy, tool, args.clone());
            assert!(
                matches!(&r.result, Err(ToolError::PermissionDenied(m)) if m.contains("node_modules")),
                "{tool} {args}: {:?}",
                r.result
            );
        }
        assert_eq!(
            fs::read_to_string(pkg.join("index.js")).unwrap(),
            "module.exports = 1;\n"
        );
    }

    #[test]
    fn escape_attempts_through_file_tools_are_refused_and_leave_nothing_outside() {
        let mut f = fixture(Phase::Execute);
        let policy = Policy::for_plan(&f.plan);
        // Create the sandbox, then plant links inside it.
        call(&mut f, &policy, "read_file", json!({"path": "a.txt"}));
        let sb = f
            .sandboxes
            .existing(&f.store, &f.plan.plan_id, "local/user")
            .unwrap()
            .unwrap();
        let secret = f.dir.path().join("secret.txt");
        fs::write(&secret, "secret\n").unwrap();
        std::os::unix::fs::symlink(&secret, sb.work_dir().join("link")).unwrap();
        std::os::unix::fs::symlink(f.dir.path(), sb.work_dir().join("linkdir")).unwrap();
        let before = outside_files(f.dir.path());
        let long = "d/".repeat(3000) + "f";
        let attempts = [
            ("read_file", json!({"path": "../secret.txt"})),
            (
                "write_file",
                json!({"path": "../escape.txt", "content": "x"}),
            ),
            ("read_file", json!({"path": secret.to_string_lossy()})),
            (
                "write_file",
                json!({"path": f.dir.path().join("escape.txt").to_string_lossy(), "content": "x"}),
            ),
            ("read_file", json!({"path": "link"})),
            ("write_file", json!({"path": "link", "content": "pwned"})),
            (
                "edit_file",
                json!({"path": "link", "edits": [{"old_text": "secret", "new_text": "x"}]}),
            ),
            (
                "write_file",
                json!({"path": "linkdir/escape.txt", "content": "x"}),
            ),
            ("read_file", json!({"path": "linkdir/secret.txt"})),
            (
                "copy_file",
                json!({"source": "a.txt", "destination": "linkdir/escape.txt"}),
            ),
            (
                "move_file",
                json!({"source": "a.txt", "destination": "linkdir/escape.txt"}),
            ),
            ("create_directory", json!({"path": "linkdir/newdir"})),
            (
                "delete_directory",
                json!({"path": "linkdir", "recursive": true}),
            ),
            ("write_file", json!({"path": ".git/config", "content": "x"})),
            (
                "write_file",
                json!({"path": "src/.git/config", "content": "x"}),
            ),
            ("write_file", json!({"path": "a\u{0}b", "content": "x"})),
            ("write_file", json!({"path": long, "content": "x"})),
            ("list_directory", json!({"path": "linkdir"})),
            ("list_directory", json!({"path": ".."})),
            (
                "search_files",
                json!({"content_pattern": "secret", "path": ".."}),
            ),
            ("get_file_info", json!({"path": "linkdir/secret.txt"})),
        ];
        for (tool, args) in attempts {
            let r = call(&mut f, &policy, tool, args.clone());
            assert!(
                matches!(r.result, Err(ToolError::PermissionDenied(_))),
                "{tool} {args}: {:?}",
                r.result
            );
            assert_eq!(r.record.outcome, CallOutcome::Denied);
        }
        assert_eq!(fs::read_to_string(&secret).unwrap(), "secret\n");
        assert_eq!(outside_files(f.dir.path()), before);
        // A search of the whole sandbox does not follow the link out.
        let r = call(
            &mut f,
            &policy,
            "search_files",
            json!({"content_pattern": "secret"}),
        );
        assert_eq!(r.result.unwrap()["count"], 0);
        // Deleting the link removes the link only.
        let r = call(&mut f, &policy, "delete_file", json!({"path": "linkdir"}));
        assert!(r.result.is_ok(), "{:?}", r.result);
        assert!(secret.exists());
    }

    #[test]
    fn invalid_arguments_name_the_field_and_the_plan_continues() {
        let mut f = fixture(Phase::Execute);
        let policy = Policy::for_plan(&f.plan);
        let r = call(
            &mut f,
            &policy,
            "write_file",
            json!({"path": "a.txt", "contents": "x"}),
        );
        match &r.result {
            Err(ToolError::InvalidArguments { field, .. }) => assert_eq!(field, "content"),
            other => panic!("{other:?}"),
        }
        assert_eq!(r.record.outcome, CallOutcome::Invalid);
        let r = call(
            &mut f,
            &policy,
            "write_file",
            json!({"path": "a.txt", "content": "x"}),
        );
        assert!(r.result.is_ok());
        assert_eq!(
            f.store.plan(&f.plan.plan_id).unwrap().unwrap().status,
            f.plan.status
        );
        let r = call(&mut f, &policy, "writ_file", json!({}));
        assert!(
            matches!(&r.result, Err(ToolError::NotFound(m)) if m.contains("did you mean write_file"))
        );
    }

    #[test]
    fn edits_fail_clearly_when_absent_or_ambiguous_and_change_nothing() {
        let mut f = fixture(Phase::Execute);
        let policy = Policy::for_plan(&f.plan);
        let r = call(
            &mut f,
            &policy,
            "write_file",
            json!({"path": "e.txt", "content": "x\ny\nx\n"}),
        );
        assert!(r.result.is_ok());
        let r = call(
            &mut f,
            &policy,
            "edit_file",
            json!({"path": "e.txt", "edits": [{"old_text": "y", "new_text": "Y"}, {"old_text": "x", "new_text": "X"}]}),
        );
        assert!(
            matches!(&r.result, Err(ToolError::Failed(m)) if m.contains("edit 2") && m.contains("2 times") && m.contains("lines 1, 3")),
            "{:?}",
            r.result
        );
        let r = call(
            &mut f,
            &policy,
            "edit_file",
            json!({"path": "e.txt", "edits": [{"old_text": "zz", "new_text": "Y"}]}),
        );
        assert!(matches!(&r.result, Err(ToolError::Failed(m)) if m.contains("not found")));
        let r = call(&mut f, &policy, "read_file", json!({"path": "e.txt"}));
        assert_eq!(r.result.unwrap()["content"], "x\ny\nx\n");
        let r = call(
            &mut f,
            &policy,
            "edit_file",
            json!({"path": "e.txt", "edits": [{"old_text": "x", "new_text": "X", "replace_all": true}]}),
        );
        assert_eq!(r.result.unwrap()["replacements"], 2);
        assert_eq!(r.changes.len(), 1);
        assert_eq!(
            r.changes[0].operation,
            super::super::change::ChangeOp::Modify
        );
        assert_ne!(r.changes[0].old_hash, r.changes[0].new_hash);
    }

    #[test]
    fn the_user_repository_is_never_written() {
        let mut f = fixture(Phase::Execute);
        let policy = Policy::for_plan(&f.plan);
        let index = fs::read(f.repo.join(".git/index")).unwrap();
        call(
            &mut f,
            &policy,
            "write_file",
            json!({"path": "a.txt", "content": "changed"}),
        );
        assert_eq!(fs::read(f.repo.join(".git/index")).unwrap(), index);
        assert_eq!(
            fs::read_to_string(f.repo.join("a.txt")).unwrap(),
            "one\ntwo\n"
        );
        assert!(!f.repo.join(".git/worktrees").exists());
    }

    #[test]
    fn read_and_git_tools_report_the_sandbox_not_the_user_checkout() {
        let mut f = fixture(Phase::Execute);
        let policy = Policy::for_plan(&f.plan);
        fs::write(f.repo.join("a.txt"), "uncommitted\n").unwrap();
        let ok = |r: CallResult| r.result.unwrap_or_else(|e| panic!("{e}"));
        let v = ok(call(
            &mut f,
            &policy,
            "write_file",
            json!({"path": "src/new.rs", "content": "fn new() {}\n"}),
        ));
        assert_eq!(v["status"], "created");
        ok(call(
            &mut f,
            &policy,
            "copy_file",
            json!({"source": "a.txt", "destination": "docs/a-copy.txt"}),
        ));
        ok(call(
            &mut f,
            &policy,
            "create_directory",
            json!({"path": "empty/dir"}),
        ));
        ok(call(
            &mut f,
            &policy,
            "shell_execute",
            json!({"command": "printf 'a\\000b' > blob.bin"}),
        ));
        let v = ok(call(
            &mut f,
            &policy,
            "list_files",
            json!({"pattern": "**/*.rs"}),
        ));
        assert_eq!(v["files"], json!(["src/lib.rs", "src/new.rs"]));
        let v = ok(call(
            &mut f,
            &policy,
            "search_files",
            json!({"content_pattern": "fn (x|new)"}),
        ));
        let hits: Vec<String> = v["matches"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| format!("{}:{}", m["path"].as_str().unwrap(), m["line_number"]))
            .collect();
        assert_eq!(hits, ["src/lib.rs:1", "src/new.rs:1"]);
        let v = ok(call(
            &mut f,
            &policy,
            "list_directory",
            json!({"path": "src", "pattern": "*.rs"}),
        ));
        assert_eq!(v["entries"].as_array().unwrap().len(), 2);
        let v = ok(call(
            &mut f,
            &policy,
            "get_file_info",
            json!({"path": "blob.bin"}),
        ));
        assert_eq!(
            (v["binary"].clone(), v["size"].clone()),
            (json!(true), json!(3))
        );
        let v = ok(call(
            &mut f,
            &policy,
            "get_file_info",
            json!({"path": "a.txt"}),
        ));
        assert_eq!(
            (v["binary"].clone(), v["line_count"].clone()),
            (json!(false), json!(2))
        );
        let v = ok(call(
            &mut f,
            &policy,
            "read_file",
            json!({"path": "a.txt", "start_line": 2}),
        ));
        assert_eq!(v["content"], "two\n");
        let v = ok(call(&mut f, &policy, "git_status", json!({})));
        let codes: Vec<String> = v["files"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| {
                format!(
                    "{} {}",
                    e["code"].as_str().unwrap(),
                    e["path"].as_str().unwrap()
                )
            })
            .collect();
        assert_eq!(codes, ["A blob.bin", "A docs/a-copy.txt", "A src/new.rs"]);
        let v = ok(call(
            &mut f,
            &policy,
            "git_diff",
            json!({"path": "blob.bin"}),
        ));
        assert!(
            v["diff"].as_str().unwrap().contains("Binary files differ"),
            "{v}"
        );
        let v = ok(call(&mut f, &policy, "git_log", json!({"count": 5})));
        assert_eq!(v["commits"][0]["summary"], "initial");
        let v = ok(call(
            &mut f,
            &policy,
            "delete_directory",
            json!({"path": "docs", "recursive": true}),
        ));
        assert_eq!(v["files_deleted"], 1);
        let r = call(&mut f, &policy, "delete_directory", json!({"path": "src"}));
        assert!(
            matches!(&r.result, Err(ToolError::Failed(m)) if m.contains("not empty")),
            "{:?}",
            r.result
        );
        assert_eq!(
            fs::read_to_string(f.repo.join("a.txt")).unwrap(),
            "uncommitted\n"
        );
    }

    #[test]
    fn bindings_follow_path_prefixes_aliases_and_explicit_resources() {
        let mut f = fixture(Phase::Execute);
        let other = f.dir.path().join("other");
        fs::create_dir_all(&other).unwrap();
        fs::write(other.join("o.txt"), "other\n").unwrap();
        f.sandboxes
            .register_target(
                &mut f.store,
                &SandboxTarget {
                    plan_id: f.plan.plan_id,
                    resource_name: "local/other".into(),
                    alias: Some("directory".into()),
                    kind: TargetKind::Directory { root: other },
                    read_only: false,
                },
            )
            .unwrap();
        let policy = Policy::for_plan(&f.plan);
        let r = call(&mut f, &policy, "read_file", json!({"path": "o.txt"}));
        assert_eq!(
            r.result.unwrap()["content"],
            "other\n",
            "the slot name `directory` is the alias"
        );
        let r = call(
            &mut f,
            &policy,
            "read_file",
            json!({"path": "path://app/a.txt"}),
        );
        assert_eq!(r.record.resource_name.as_deref(), Some("local/user"));
        assert_eq!(r.result.unwrap()["content"], "one\ntwo\n");
        let r = call(&mut f, &policy, "git_log", json!({}));
        assert_eq!(
            r.record.resource_name.as_deref(),
            Some("local/user"),
            "git tools bind the git checkout? {:?}",
            r.result
        );
        let r = call(
            &mut f,
            &policy,
            "read_file",
            json!({"path": "path://nope/a.txt"}),
        );
        assert!(
            matches!(&r.result, Err(ToolError::InvalidArguments { field, .. }) if field == "path")
        );
        let r = call(
            &mut f,
            &policy,
            "move_file",
            json!({"source": "path://app/a.txt", "destination": "path://other/a.txt"}),
        );
        assert!(
            matches!(&r.result, Err(ToolError::InvalidArguments { .. })),
            "{:?}",
            r.result
        );
    }

    #[test]
    fn the_actions_sandbox_key_widens_network_and_writable_paths() {
        if !crate::sandbox::landlock::probe().enforced(false) {
            assert_ne!(std::env::var("CI").as_deref(), Ok("true"));
            return;
        }
        let mut f = fixture(Phase::Execute);
        let extra = f.dir.path().join("extra");
        fs::create_dir_all(&extra).unwrap();
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let command = format!(
            "echo ok > {}/w && bash -c 'echo hi > /dev/tcp/127.0.0.1/{port}'",
            extra.display()
        );
        let mut policy = Policy::for_plan(&f.plan);
        let r = call(
            &mut f,
            &policy,
            "shell_execute",
            json!({"command": command}),
        );
        assert_ne!(r.result.unwrap()["exit_code"], 0);
        assert!(!extra.join("w").exists());
        policy.shell = ShellPolicy {
            env: Vec::new(),
            network: true,
            writable_paths: vec![extra.clone()],
            ..ShellPolicy::default()
        };
        let r = call(
            &mut f,
            &policy,
            "shell_execute",
            json!({"command": command}),
        );
        assert_eq!(r.result.unwrap()["exit_code"], 0);
        assert!(extra.join("w").exists());
        assert!(listener.accept().is_ok());
        let r = call(
            &mut f,
            &policy,
            "shell_execute",
            json!({"command": "head -c 400000 /dev/zero | tr '\\0' x"}),
        );
        let v = r.result.unwrap();
        assert_eq!(v["stdout_truncated"], true);
        assert_eq!(
            v["stdout"].as_str().unwrap().len(),
            super::super::shell::OUTPUT_CAP
        );
    }

    /// The tree a full scan of the plan's one sandbox finds.
    fn full_tree(f: &Fixture) -> String {
        let sb = f
            .sandboxes
            .active(&f.store, &f.plan.plan_id)
            .unwrap()
            .remove(0);
        crate::sandbox::written::forget(&sb.layout.git_dir);
        checkpoint::trees(&f.store, &f.sandboxes, &f.plan.plan_id, false)
            .unwrap()
            .remove(0)
            .1
    }

    fn written_tree(f: &Fixture) -> String {
        checkpoint::trees(&f.store, &f.sandboxes, &f.plan.plan_id, true)
            .unwrap()
            .remove(0)
            .1
    }

    #[test]
    fn a_command_after_file_tool_writes_reports_only_what_the_command_changed() {
        let mut f = fixture(Phase::Execute);
        let policy = Policy::for_plan(&f.plan);
        // A full snapshot makes the written set known; the file tools then note their paths.
        let write = |f: &mut Fixture, path: &str, content: &str| {
            let r = call(
                f,
                &policy,
                "write_file",
                json!({"path": path, "content": content}),
            );
            r.result.unwrap();
        };
        write(&mut f, "a.txt", "first\n");
        written_tree(&f);
        for (path, content) in [("a.txt", "by the tool\n"), ("docs/new.md", "new\n")] {
            write(&mut f, path, content);
        }
        let r = call(
            &mut f,
            &policy,
            "shell_execute",
            json!({"command": "echo by-shell > shell.txt && echo more >> src/lib.rs"}),
        );
        let out = r.result.unwrap();
        assert_eq!(out["exit_code"], 0);
        assert_eq!(out["files_changed"], 2, "{out}");
        let mut changed: Vec<_> = r.changes.iter().map(|c| c.path.clone()).collect();
        changed.sort();
        assert_eq!(changed, ["shell.txt", "src/lib.rs"]);
        assert_eq!(written_tree(&f), full_tree(&f));
        // Twice in a row: the second command starts from the first one's closing tree.
        let r = call(
            &mut f,
            &policy,
            "shell_execute",
            json!({"command": "rm shell.txt"}),
        );
        assert_eq!(r.result.unwrap()["files_changed"], 1);
        assert_eq!(written_tree(&f), full_tree(&f));
    }

    #[test]
    fn a_checkpoint_of_the_written_paths_still_captures_what_shell_commands_wrote() {
        let mut f = fixture(Phase::Execute);
        let policy = Policy::for_plan(&f.plan);
        let write = |f: &mut Fixture, path: &str, content: &str| {
            let r = call(
                f,
                &policy,
                "write_file",
                json!({"path": path, "content": content}),
            );
            r.result.unwrap();
        };
        write(&mut f, "a.txt", "first\n");
        let first = written_tree(&f);
        assert_eq!(first, full_tree(&f));
        write(&mut f, "docs/new.md", "new\n");
        let r = call(
            &mut f,
            &policy,
            "shell_execute",
            json!({"command": "echo by-shell > shell.txt && echo more >> src/lib.rs && rm a.txt"}),
        );
        assert_eq!(r.result.unwrap()["exit_code"], 0);
        write(&mut f, "b.txt", "after the command\n");
        let ours = written_tree(&f);
        let full = full_tree(&f);
        assert_eq!(ours, full, "the written-only checkpoint missed a change");
        let sb = f
            .sandboxes
            .active(&f.store, &f.plan.plan_id)
            .unwrap()
            .remove(0);
        let repo = sb.repo().unwrap();
        let tree = repo.find_tree(git2::Oid::from_str(&ours).unwrap()).unwrap();
        for path in ["shell.txt", "docs/new.md", "b.txt"] {
            assert!(tree.get_path(Path::new(path)).is_ok(), "{path}");
        }
        assert!(
            tree.get_path(Path::new("a.txt")).is_err(),
            "deleted by the command"
        );
        // A command that only writes (the last call before the checkpoint).
        let r = call(
            &mut f,
            &policy,
            "shell_execute",
            json!({"command": "mkdir -p gen && echo x > gen/out.txt"}),
        );
        assert_eq!(r.result.unwrap()["exit_code"], 0);
        assert_eq!(written_tree(&f), full_tree(&f));
    }
}
