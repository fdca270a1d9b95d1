//! The non-built-in tools an actor is offered for one plan run (spec sections 16, 18, 19):
//! the command, MCP and Agent Skill tools of its skills, with `load_skill`.
//!
//! - Offering follows the capability rule: outside Execute only read-only tools are offered
//!   (and a call to a writing one is refused by the runner anyway).
//! - MCP servers of the skills are started (stdio, confined, the sandbox as working
//!   directory) or reached (HTTP) when the offer is built. Inside a plan's Execute run they
//!   belong to the plan ([`crate::tools::mcp::plan_pool`]): started by the first step, reused by the
//!   next, stopped when the run ends. Elsewhere (`actor run`) they are stopped when the offer
//!   is dropped. A server that cannot start is reported and its tools are not offered; the
//!   plan goes on.
//! - A writing call is bracketed by checkpoints (the latest is reused when nothing changed),
//!   so a rollback covers what it changed in the sandbox.
//! - Names the model sees are the tool names with characters providers refuse (`/`, `.`)
//!   replaced by `_` ([`wire_name`]); the execution log keeps the real name. An offered
//!   name is never a built-in's or another offered tool's: a tool whose name would be is
//!   not offered, and the system prompt and the log say why ([`Offer::settle_names`]).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use serde_json::{Value, json};

use crate::domain::messages::ToolSpec;
use crate::domain::tool_host::ToolOutcome;
use crate::domain::{Id, Phase};
use crate::sandbox::Sandboxes;
use crate::sandbox::checkpoint::{self, CheckpointRequest};
use crate::skill_registry::{self, AgentSkill, DISCOVERED_NS, Discovered, LOAD_SKILL};
use crate::store::Store;
use crate::tools::custom::ToolSource;
use crate::tools::external::{ExternalCtx, ExternalTool, Runnable, run_command};
use crate::tools::mcp::{McpPool, Placement, plan_pool};
use crate::tools::runner::{CallRequest, Policy, ToolRunner};
use crate::tools::{ShellSettings, ToolError};

pub use crate::tools::external::wire_name;

/// Where a call runs: the host's database connection, sandboxes, plan, policy and cancel flag.
#[derive(Clone, Copy)]
pub struct Site<'a> {
    /// The host's connection.
    pub store: &'a Mutex<Store>,
    /// The sandboxes directory.
    pub sandboxes: &'a Sandboxes,
    /// The plan.
    pub plan_id: &'a Id,
    /// Its policy.
    pub policy: &'a Policy,
    /// Set when the run is cancelled.
    pub cancel: &'a Arc<AtomicBool>,
}

/// The external tools of one plan run.
pub struct Offer {
    tools: Vec<ExternalTool>,
    agent_skills: Vec<AgentSkill>,
    pool: Option<Arc<McpPool>>,
    /// Servers that could not be started, with why.
    pub failed_servers: Vec<(String, String)>,
    /// Tools not offered because of their name, with why.
    pub refused: Vec<(String, String)>,
}

impl std::fmt::Debug for Offer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Offer")
            .field(
                "tools",
                &self.tools.iter().map(|t| &t.name).collect::<Vec<_>>(),
            )
            .finish_non_exhaustive()
    }
}

impl Offer {
    /// No external tools.
    pub fn empty() -> Self {
        Self {
            tools: Vec::new(),
            agent_skills: Vec::new(),
            pool: None,
            failed_servers: Vec::new(),
            refused: Vec::new(),
        }
    }

    /// The offer of an actor's `skills` for `plan_id`: their command and Agent Skill tools,
    /// and (when `connect_mcp`) the tools of their MCP servers, started in the sandbox of
    /// the plan's first resource.
    ///
    /// # Errors
    /// A skill that does not resolve.
    pub fn build(
        store: &mut Store,
        sandboxes: &Sandboxes,
        plan_id: &Id,
        policy: &Policy,
        skills: &[String],
        connect_mcp: bool,
    ) -> Result<Self, String> {
        let all = skill_registry::union(store, skills).map_err(|e| e.to_string())?;
        let mut offer = Self::empty();
        offer.tools = all
            .tools
            .iter()
            .filter_map(|t| t.external.clone())
            .collect();
        offer.agent_skills = all.agent_skills;
        let mut servers = all.mcp_servers.clone();
        // A registered tool of source mcp runs on its own server, named after the tool.
        offer.tools.retain_mut(|t| {
            let Runnable::Command(def) = &t.runnable else {
                return true;
            };
            let Some(spec) = def
                .mcp_server
                .clone()
                .filter(|_| def.source == ToolSource::Mcp)
            else {
                return true;
            };
            if !connect_mcp {
                return false;
            }
            let mut spec = spec;
            spec.name = wire_name(&t.name);
            t.runnable = Runnable::Mcp {
                server: spec.name.clone(),
                tool: spec.tool_name.clone().unwrap_or_default(),
            };
            servers.push((t.skill.clone().unwrap_or_default(), spec));
            true
        });
        let registered: Vec<String> = offer
            .tools
            .iter()
            .filter_map(|t| match &t.runnable {
                Runnable::Mcp { server, .. } => Some(server.clone()),
                Runnable::Command(_) => None,
            })
            .collect();
        if connect_mcp && !servers.is_empty() {
            let place = placement(store, sandboxes, plan_id, policy)?;
            let pool = match plan_pool(plan_id) {
                Some(shared) => shared?,
                None => Arc::new(McpPool::new()?),
            };
            for (skill, spec) in &servers {
                match pool.connect(spec, &place) {
                    Ok(_) if registered.contains(&spec.name) => {}
                    Ok(tools) => {
                        for t in tools {
                            offer.tools.push(ExternalTool {
                                name: t.qualified.clone(),
                                description: t.description.clone(),
                                input_schema: t.input_schema.clone(),
                                capability: t.capability.clone(),
                                source: ToolSource::Mcp,
                                skill: Some(skill.clone()),
                                resources: Vec::new(),
                                runnable: Runnable::Mcp {
                                    server: t.server.clone(),
                                    tool: t.tool.clone(),
                                },
                            });
                        }
                    }
                    Err(e) => {
                        tracing::warn!(server = %spec.name, error = %e, "MCP server not started");
                        offer.failed_servers.push((spec.name.clone(), e));
                    }
                }
            }
            offer.pool = Some(pool);
        }
        offer.settle_names();
        Ok(offer)
    }

    /// Drops every tool whose offered name ([`wire_name`]) is a built-in's or role tool's, or
    /// is shared with another external tool (all of those: no order decides which one a
    /// call reaches), recording why in [`Offer::refused`].
    pub fn settle_names(&mut self) {
        let wires: Vec<String> = self.tools.iter().map(|t| wire_name(&t.name)).collect();
        let mut keep = Vec::with_capacity(self.tools.len());
        for (t, wire) in std::mem::take(&mut self.tools).into_iter().zip(&wires) {
            let shared = wires.iter().filter(|w| *w == wire).count() > 1;
            let why = crate::tools::external::shadows_builtin(&t.name).or_else(|| {
                shared.then(|| {
                    format!(
                        "`{}` would be offered as `{wire}`, as would another tool of this run",
                        t.name
                    )
                })
            });
            match why {
                Some(why) => {
                    tracing::warn!(tool = %t.name, %why, "tool not offered");
                    self.refused.push((t.name.clone(), why));
                }
                None => keep.push(t),
            }
        }
        self.tools = keep;
    }

    /// The offer for the actor called `actor` (a custom actor's `skills:`; none for other
    /// actors), for a plan run.
    ///
    /// # Errors
    /// A skill that does not resolve.
    pub fn for_actor(
        engine: &crate::lifecycle::Lifecycle,
        store: &mut Store,
        plan_id: &Id,
        policy: &Policy,
        actor: &str,
        connect_mcp: bool,
    ) -> Result<Self, String> {
        let skills =
            match crate::registry::actors::resolve(engine.store(), engine.providers(), actor) {
                Ok(crate::registry::actors::ActorRef::Custom { actor }) => actor.definition.skills,
                _ => Vec::new(),
            };
        let discovered = discovered_for_plan(engine, store, plan_id);
        if skills.is_empty() && discovered.is_empty() {
            return Ok(Self::empty());
        }
        let sandboxes = Sandboxes::new(engine.paths());
        let mut offer = Self::build(store, &sandboxes, plan_id, policy, &skills, connect_mcp)?;
        offer.add_discovered(&discovered);
        Ok(offer)
    }

    /// Adds discovered Agent Skills (their `load_skill` entry and script tools) that the
    /// actor's own skills do not already offer under the same name.
    pub fn add_discovered(&mut self, found: &[Discovered]) {
        for d in found {
            if self.agent_skills.iter().any(|s| s.name == d.skill.name) {
                continue;
            }
            let parent = format!("{DISCOVERED_NS}/{}", d.skill.name);
            for script in &d.skill.scripts {
                if let Some(e) =
                    skill_registry::discovered_script(&d.skill, script, &parent).external
                    && !self.tools.iter().any(|t| t.name == e.name)
                {
                    self.tools.push(e);
                }
            }
            self.agent_skills.push(d.skill.clone());
        }
        self.settle_names();
    }

    /// The tools offered under `policy` (read-only ones outside Execute), `load_skill` first
    /// when Agent Skills are present.
    pub fn specs(&self, policy: &Policy) -> Vec<ToolSpec> {
        let mut specs = Vec::new();
        if !self.agent_skills.is_empty() {
            specs.push(ToolSpec {
                name: LOAD_SKILL.into(),
                description: skill_registry::load_skill_description(),
                input_schema: json!({"type": "object", "properties": {"name": {"type": "string", "enum": self.agent_skills.iter().map(|s| s.name.clone()).collect::<Vec<_>>()}}, "required": ["name"]}),
            });
        }
        for t in &self.tools {
            if policy.phase != Phase::Execute && t.capability.writes {
                continue;
            }
            specs.push(ToolSpec {
                name: wire_name(&t.name),
                description: t.description.clone(),
                input_schema: t.input_schema.clone(),
            });
        }
        specs
    }

    /// What the system prompt gains: the `<available_agent_skills>` block, and a line per
    /// MCP server that could not be started (so the model knows its tools are missing).
    pub fn prompt_block(&self) -> Option<String> {
        let mut parts: Vec<String> = skill_registry::prompt_block(&self.agent_skills)
            .into_iter()
            .collect();
        for (name, why) in &self.failed_servers {
            parts.push(format!("The MCP server {name} is unavailable in this run ({why}); its tools are not offered."));
        }
        for (name, why) in &self.refused {
            parts.push(format!("The tool {name} is not offered: {why}."));
        }
        (!parts.is_empty()).then(|| parts.join("\n\n"))
    }

    /// Whether `name` (as the model called it) is one of these tools.
    pub fn has(&self, name: &str) -> bool {
        (name == LOAD_SKILL && !self.agent_skills.is_empty()) || self.find(name).is_some()
    }

    fn find(&self, name: &str) -> Option<&ExternalTool> {
        self.tools
            .iter()
            .find(|t| t.name == name)
            .or_else(|| self.tools.iter().find(|t| wire_name(&t.name) == name))
    }

    /// Whether a call to `name` (as the model called it) may write: a tool not declared
    /// read-only (`load_skill` only reads); `None` when it is not one of these tools.
    pub fn may_write(&self, name: &str) -> Option<bool> {
        if name == LOAD_SKILL && !self.agent_skills.is_empty() {
            return Some(false);
        }
        self.find(name).map(|t| !t.capability.read_only)
    }

    /// The connected MCP servers (for tests and diagnostics).
    pub fn pool(&self) -> Option<&McpPool> {
        self.pool.as_deref()
    }

    /// Every external tool, offered or not.
    pub fn tools(&self) -> &[ExternalTool] {
        &self.tools
    }

    fn load_skill(&self, args: &Value) -> ToolOutcome {
        let name = args.get("name").and_then(Value::as_str).unwrap_or_default();
        match self.agent_skills.iter().find(|s| s.name == name) {
            Some(s) => {
                let mut text = format!(
                    "# Agent Skill {}\nFolder: {}\n\n{}",
                    s.name,
                    s.dir.display(),
                    s.body
                );
                if !s.scripts.is_empty() {
                    let tools: Vec<String> = s
                        .scripts
                        .iter()
                        .map(|f| {
                            let stem = std::path::Path::new(f)
                                .file_stem()
                                .map_or_else(|| f.clone(), |x| x.to_string_lossy().into_owned());
                            wire_name(&format!("{}.{stem}", s.name))
                        })
                        .collect();
                    text.push_str(&format!(
                        "\n\nIts scripts run as the tools: {}",
                        tools.join(", ")
                    ));
                }
                ToolOutcome::ok(text)
            }
            None => ToolOutcome::error(format!(
                "load_skill: no Agent Skill `{name}`; available: {}",
                self.agent_skills
                    .iter()
                    .map(|s| s.name.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            )),
        }
    }

    /// The real name of the tool the model called `name`, and why a call to it needs a
    /// human's approval under `policy` ([`ToolRunner::approval_needed`]), or `None`.
    pub fn approval_needed(&self, policy: &Policy, name: &str) -> Option<(String, String)> {
        let tool = self.find(name)?;
        if ToolRunner::external_refusal(policy, tool).is_some() {
            // Refused anyway: the call says why, without asking anyone.
            return None;
        }
        ToolRunner::approval_needed(policy, tool).map(|why| (tool.name.clone(), why))
    }

    /// Runs one call through the runner: validation, capability rule, binding, execution,
    /// change capture, log; a writing call in Execute between two checkpoints. A tool that
    /// needs approval is refused unless `approved` (a human approved this very call).
    pub fn call(&self, site: &Site<'_>, name: &str, args: Value, approved: bool) -> ToolOutcome {
        let Site {
            store,
            sandboxes,
            plan_id,
            policy,
            cancel,
        } = *site;
        if cancel.load(Ordering::SeqCst) {
            return ToolOutcome::error("the run was cancelled; stop");
        }
        if name == LOAD_SKILL {
            return self.load_skill(&args);
        }
        let Some(tool) = self.find(name) else {
            return ToolOutcome::error(format!("there is no tool `{name}`"));
        };
        let Ok(mut store) = store.lock() else {
            return ToolOutcome::error("the tool runner is unavailable");
        };
        let bracket = tool.capability.writes
            && policy.phase == Phase::Execute
            && ToolRunner::external_refusal(policy, tool).is_none();
        let step = format!("tool: {}", tool.name);
        let checkpoint = |store: &mut Store, label: &str| {
            checkpoint::create(
                store,
                sandboxes,
                plan_id,
                &CheckpointRequest {
                    step: Some(step.clone()),
                    label: label.into(),
                    reuse_if_unchanged: true,
                    ..Default::default()
                },
            )
        };
        let request = CallRequest {
            tool: tool.name.clone(),
            arguments: args,
            parent_skill: tool.skill.clone(),
            resource: None,
        };
        if bracket {
            ToolRunner::new(&mut store, sandboxes).prepare_external(plan_id, tool, &request);
        }
        if bracket && let Err(e) = checkpoint(&mut store, "start") {
            return ToolOutcome::error(format!("the checkpoint before {} failed: {e}", tool.name));
        }
        let pool = self.pool.as_deref();
        // An MCP tool's images go to the model beside the text, not into the call log.
        let images = std::cell::RefCell::new(Vec::new());
        let progress = live_progress(*plan_id, tool.name.clone());
        let exec =
            |ctx: &ExternalCtx<'_>, t: &ExternalTool, args: Value| -> Result<Value, ToolError> {
                match &t.runnable {
                    Runnable::Command(def) => run_command(ctx, def, args),
                    Runnable::Mcp { server, tool } => {
                        let (v, found) = pool
                            .ok_or_else(|| ToolError::Failed("no MCP server is connected".into()))?
                            .call_with_images(server, tool, args, Some(progress.clone()))?;
                        *images.borrow_mut() = found;
                        Ok(v)
                    }
                }
            };
        let result = ToolRunner::new(&mut store, sandboxes)
            .with_cancel(Arc::clone(cancel))
            .call_external(plan_id, policy, tool, request, approved, &exec);
        if bracket && let Err(e) = checkpoint(&mut store, "end") {
            tracing::warn!(error = %e, "checkpoint after a tool call failed");
        }
        // What the model sees is redacted as the stored copy is (docs/sandbox.md): an MCP
        // server's result or error may hold a key it was handed.
        let redacted = |text: String| crate::redact::redact(&text).into_owned();
        match result {
            Ok(call) => match call.result {
                Ok(v) => ToolOutcome::ok(redacted(v.to_string())).with_images(images.take()),
                Err(e) => ToolOutcome::error(redacted(format!("{}: {e}", e.code()))),
            },
            Err(e) => ToolOutcome::error(redacted(format!("the tool runner failed: {e}"))),
        }
    }
}

/// Where an MCP call's progress notifications go: the plan's live events, as
/// [`LiveKind::ToolProgress`](crate::events::live::LiveKind::ToolProgress) of tool `name`
/// (shown in the live area, never stored).
fn live_progress(plan: Id, name: String) -> crate::tools::mcp::ProgressSink {
    Arc::new(move |p: crate::tools::mcp::McpProgress| {
        crate::events::live::publish(
            plan,
            crate::events::live::LiveKind::ToolProgress {
                name: name.clone(),
                progress: p.progress,
                total: p.total,
                // Redacted as the call's result is: the server may hold a key it was handed.
                message: p.message.map(|m| crate::redact::redact(&m).into_owned()),
            },
        );
    })
}

/// The Agent Skills discovered for a plan (spec 18 "Agent Skills Integration Details"): those
/// in the directories of `agent-skill-dirs`, then, when `agent-skills-in-resources` is true,
/// those in `.agents/skills/` of the plan's resources. A config file that does not load
/// discovers none (it is reported where it is loaded).
pub fn discovered_for_plan(
    engine: &crate::lifecycle::Lifecycle,
    store: &Store,
    plan_id: &Id,
) -> Vec<Discovered> {
    let config = match crate::config::Config::load(&engine.paths().config_path) {
        Ok(c) => c,
        Err(e) => {
            tracing::warn!(error = %e, "config not loaded; no Agent Skills discovered");
            return Vec::new();
        }
    };
    let resources: Vec<(String, std::path::PathBuf)> = if config.agent_skills_in_resources() {
        store
            .sandbox_targets(plan_id)
            .unwrap_or_default()
            .into_iter()
            .map(|t| {
                let root = match t.kind {
                    crate::domain::sandbox::TargetKind::GitCheckout { repo, .. } => repo,
                    crate::domain::sandbox::TargetKind::Directory { root } => root,
                };
                (t.resource_name, root)
            })
            .collect()
    } else {
        Vec::new()
    };
    let (found, problems) = skill_registry::discover(&config.agent_skill_dirs(), &resources);
    for p in problems {
        tracing::warn!(problem = %p, "Agent Skills discovery");
    }
    found
}

/// Where a plan's stdio MCP servers run: the sandbox of its first resource (created if
/// needed), with the per-plan HOME and the plan's network rule.
///
/// # Errors
/// The plan has no resource or its sandbox cannot be made.
pub fn placement(
    store: &mut Store,
    sandboxes: &Sandboxes,
    plan_id: &Id,
    policy: &Policy,
) -> Result<Placement, String> {
    let targets = store.sandbox_targets(plan_id).map_err(|e| e.to_string())?;
    let target = targets
        .first()
        .ok_or("the plan has no resources, so its MCP servers have no sandbox to run in")?;
    let sandbox = sandboxes
        .ensure(store, plan_id, &target.resource_name)
        .map_err(|e| e.to_string())?;
    let (home, cache, tmp) = sandboxes.plan_home(plan_id).map_err(|e| e.to_string())?;
    let settings = ShellSettings {
        home: home.clone(),
        cache: cache.clone(),
        tmp: tmp.clone(),
        policy: policy.shell.clone(),
        cancel: None,
        on_line: None,
    };
    let mut writable = vec![sandbox.work_dir().to_path_buf(), home, cache, tmp];
    writable.extend(policy.shell.writable_paths.iter().cloned());
    Ok(Placement {
        cwd: sandbox.work_dir().to_path_buf(),
        writable,
        env: crate::tools::command::base_env(&settings, Vec::new()),
        deny: policy.shell.deny_read.clone(),
        limits: policy.shell.limits,
        network: policy.shell.network,
        allow_unconfined: policy.allow_unsafe_tools,
        log_dir: Some(sandboxes.plan_dir(plan_id)),
        mounted: sandbox.keep_mounted(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tools::custom::ToolCapability;

    fn mcp(name: &str) -> ExternalTool {
        let (server, tool) = name.split_once('.').unwrap();
        ExternalTool {
            name: name.into(),
            description: String::new(),
            input_schema: json!({"type": "object"}),
            capability: ToolCapability::default(),
            source: ToolSource::Mcp,
            skill: Some("local/mcp".into()),
            resources: Vec::new(),
            runnable: Runnable::Mcp {
                server: server.into(),
                tool: tool.into(),
            },
        }
    }

    #[test]
    fn an_mcp_calls_progress_is_published_as_a_live_event_of_its_plan() {
        use crate::events::live::{self, LiveKind};
        let plan = Id::generate();
        let sub = live::subscribe();
        let sink = live_progress(plan, "everything.slow".into());
        sink(crate::tools::mcp::McpProgress {
            progress: 2.0,
            total: Some(5.0),
            message: Some("copying".into()),
        });
        let event = std::iter::from_fn(|| sub.recv_timeout(std::time::Duration::from_secs(1)).ok())
            .find(|e| e.plan == plan)
            .expect("the progress is published");
        assert_eq!(
            event.kind,
            LiveKind::ToolProgress {
                name: "everything.slow".into(),
                progress: 2.0,
                total: Some(5.0),
                message: Some("copying".into()),
            }
        );
    }

    #[test]
    fn an_mcp_tool_offered_under_a_builtin_or_a_shared_name_is_not_offered() {
        let mut offer = Offer::empty();
        offer.tools = ["write.file", "a.b_c", "a_b.c", "everything.echo"]
            .into_iter()
            .map(mcp)
            .collect();
        offer.settle_names();
        let policy = Policy {
            phase: Phase::Execute,
            state: crate::domain::ProcessingState::Processing,
            read_only_action: false,
            allow_unsafe_tools: false,
            require_checkpoints: false,
            deny_patterns: Vec::new(),
            shell: crate::tools::shell::ShellPolicy::default(),
            profile: None,
            approval_skills: Vec::new(),
        };
        let names: Vec<String> = offer.specs(&policy).into_iter().map(|s| s.name).collect();
        assert_eq!(names, ["everything_echo"]);
        assert!(
            !offer.has("write_file"),
            "the built-in's calls stay with it"
        );
        let refused: Vec<&str> = offer.refused.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(refused, ["write.file", "a.b_c", "a_b.c"]);
        let prompt = offer.prompt_block().unwrap();
        assert!(
            prompt.contains("`write.file` would be offered as `write_file`"),
            "{prompt}"
        );
    }
}
