//! The orchestrator's tools (spec section 06, `session tell`: "the orchestrator can create
//! actions, plans, or project changes by issuing the necessary CleverAgents commands").
//!
//! Every tool is the equivalent of one `agents` command line, built here from the model's
//! arguments and run through a [`Commands`] implementation supplied by the face (the CLI runs
//! it in-process through the same code path as the typed command). The model gets the
//! command's JSON envelope back. Mutations are recorded as [`ExecutedCommand`]s with their
//! command line; plans they create are linked to the session.
//!
//! Rules the tools enforce before anything runs:
//! - Writing to a project only happens through a plan and its gates: `use_plan` always runs
//!   under the session's automation profile, and no tool approves a gate or answers a
//!   decision (the orchestrator answers nothing on the user's behalf).
//! - `apply_plan` is refused unless the session's profile auto-applies; the refusal is
//!   recorded and reported to the model, and nothing runs.

use std::path::PathBuf;
use std::sync::Mutex;

use serde_json::{Value, json};

use super::ExecutedCommand;
use crate::actors::messages::ToolSpec;
use crate::actors::runtime::{ToolHost, ToolOutcome};
use crate::domain::id::Id;

/// The result of one command run for a tool.
#[derive(Debug, Clone, PartialEq)]
pub struct CommandResult {
    /// The process exit code the command would have had (0 ok, 1 failure, 3 needs a human).
    pub exit_code: i32,
    /// Its `--format json` envelope.
    pub envelope: Value,
}

/// Runs an `agents` command line (without the program name) and returns its envelope; the
/// face decides how (the CLI runs it in-process).
pub trait Commands: Send + Sync {
    /// Runs `argv`, e.g. `["project", "list"]`.
    fn run(&self, argv: &[String]) -> CommandResult;
}

/// Longest envelope text handed back to the model, in characters.
const MAX_RESULT_CHARS: usize = 24_000;

/// The orchestrator's tool host for one turn.
pub struct OrchestratorTools<C: Commands> {
    commands: C,
    profile: String,
    auto_apply: bool,
    actions_dir: PathBuf,
    executed: Mutex<Vec<ExecutedCommand>>,
    plans: Mutex<Vec<Id>>,
}

fn spec(name: &str, description: &str, properties: Value, required: &[&str]) -> ToolSpec {
    ToolSpec {
        name: name.into(),
        description: description.into(),
        input_schema: json!({
            "type": "object",
            "properties": properties,
            "required": required,
            "additionalProperties": false,
        }),
    }
}

fn string(desc: &str) -> Value {
    json!({"type": "string", "description": desc})
}

/// The offered tools: queries first, then mutations.
pub fn specs() -> Vec<ToolSpec> {
    let id = || json!({"plan_id": string("plan id or unique prefix")});
    let name = || json!({"name": string("namespaced name, e.g. local/app")});
    vec![
        spec(
            "list_projects",
            "List projects (agents project list).",
            json!({}),
            &[],
        ),
        spec(
            "show_project",
            "Show a project: resources, validations, invariants, active plans (agents project show).",
            name(),
            &["name"],
        ),
        spec(
            "list_resources",
            "List registered resources (agents resource list).",
            json!({}),
            &[],
        ),
        spec(
            "list_actions",
            "List actions (agents action list).",
            json!({}),
            &[],
        ),
        spec(
            "show_action",
            "Show an action's definition (agents action show).",
            name(),
            &["name"],
        ),
        spec(
            "list_actors",
            "List actors (agents actor list).",
            json!({}),
            &[],
        ),
        spec(
            "list_plans",
            "List plans (agents plan list).",
            json!({}),
            &[],
        ),
        spec(
            "plan_status",
            "A plan's phase, state and progress (agents plan status).",
            id(),
            &["plan_id"],
        ),
        spec(
            "plan_tree",
            "A plan's decision tree (agents plan tree).",
            id(),
            &["plan_id"],
        ),
        spec(
            "plan_diff",
            "A plan's changes against its base (agents plan diff).",
            id(),
            &["plan_id"],
        ),
        spec(
            "plan_explain",
            "Explain a plan's decision (agents plan explain PLAN DECISION).",
            json!({"plan_id": string("plan id"), "decision_id": string("decision id or prefix")}),
            &["plan_id", "decision_id"],
        ),
        spec(
            "create_action",
            "Create an action from YAML you write (agents action create --config FILE). The YAML is validated; errors come back with line and column.",
            json!({"yaml": string("the action definition (name, description, definition-of-done, strategy-actor, execution-actor, arguments, script)"), "available": {"type": "boolean", "description": "make it available for plan use at once (default false: draft)"}}),
            &["yaml"],
        ),
        spec(
            "add_resource",
            "Register a resource (agents resource add TYPE NAME --path PATH).",
            json!({"type": string("resource type, e.g. git-checkout or fs-directory"), "name": string("resource name, e.g. local/platform-repo"), "path": string("absolute path")}),
            &["type", "name", "path"],
        ),
        spec(
            "link_resource",
            "Link a resource to a project (agents project link-resource PROJECT RESOURCE).",
            json!({"project": string("project name"), "resource": string("resource name")}),
            &["project", "resource"],
        ),
        spec(
            "use_plan",
            "Create a plan from an available action on a project (agents plan use ACTION PROJECT) under the session's automation profile; the plan stops at the gates that profile keeps for a human.",
            json!({"action": string("action name"), "project": string("project name"), "arguments": {"type": "object", "description": "action arguments as name: value", "additionalProperties": {"type": "string"}}}),
            &["action", "project"],
        ),
        spec(
            "apply_plan",
            "Apply an executed plan (agents plan apply). Refused unless the session's automation profile applies plans without a human.",
            id(),
            &["plan_id"],
        ),
    ]
}

fn arg<'a>(args: &'a Value, key: &str) -> Result<&'a str, String> {
    args.get(key)
        .and_then(Value::as_str)
        .filter(|s| !s.trim().is_empty())
        .ok_or_else(|| format!("`{key}` is required and must be a non-empty string"))
}

/// `agents` and the shell-quoted words.
pub fn command_line(argv: &[String]) -> String {
    let mut words = vec!["agents".to_string()];
    words.extend(argv.iter().map(|a| shell_words::quote(a).into_owned()));
    words.join(" ")
}

fn summary_of(envelope: &Value) -> String {
    if let Some(m) = envelope.pointer("/error/message").and_then(Value::as_str) {
        return m.to_string();
    }
    envelope
        .get("messages")
        .and_then(Value::as_array)
        .and_then(|m| m.last())
        .and_then(|m| m.get("text"))
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string()
}

fn clip(text: String) -> String {
    if text.chars().count() <= MAX_RESULT_CHARS {
        text
    } else {
        let mut t: String = text.chars().take(MAX_RESULT_CHARS).collect();
        t.push_str("\n... (cut; ask for less)");
        t
    }
}

impl<C: Commands> OrchestratorTools<C> {
    /// Tools running `commands` for a session under `profile` (`auto_apply`: whether that
    /// profile applies plans without a human); action files are written under `actions_dir`.
    pub fn new(commands: C, profile: &str, auto_apply: bool, actions_dir: PathBuf) -> Self {
        Self {
            commands,
            profile: profile.to_string(),
            auto_apply,
            actions_dir,
            executed: Mutex::new(Vec::new()),
            plans: Mutex::new(Vec::new()),
        }
    }

    /// The mutations run (or refused) so far, in order.
    pub fn executed(&self) -> Vec<ExecutedCommand> {
        self.executed.lock().map(|v| v.clone()).unwrap_or_default()
    }

    /// The plans created so far.
    pub fn plans(&self) -> Vec<Id> {
        self.plans.lock().map(|v| v.clone()).unwrap_or_default()
    }

    fn record(&self, c: ExecutedCommand) {
        if let Ok(mut v) = self.executed.lock() {
            v.push(c);
        }
    }

    /// The command line of a tool call, and whether it mutates; `Err` goes back to the model.
    fn argv(&self, name: &str, args: &Value) -> Result<(Vec<String>, bool), String> {
        let s = |v: &[&str]| v.iter().map(|w| (*w).to_string()).collect::<Vec<_>>();
        Ok(match name {
            "list_projects" => (s(&["project", "list"]), false),
            "show_project" => (s(&["project", "show", arg(args, "name")?]), false),
            "list_resources" => (s(&["resource", "list"]), false),
            "list_actions" => (s(&["action", "list"]), false),
            "show_action" => (s(&["action", "show", arg(args, "name")?]), false),
            "list_actors" => (s(&["actor", "list"]), false),
            "list_plans" => (s(&["plan", "list"]), false),
            "plan_status" => (s(&["plan", "status", arg(args, "plan_id")?]), false),
            "plan_tree" => (s(&["plan", "tree", arg(args, "plan_id")?]), false),
            "plan_diff" => (s(&["plan", "diff", arg(args, "plan_id")?]), false),
            "plan_explain" => (
                s(&[
                    "plan",
                    "explain",
                    arg(args, "plan_id")?,
                    arg(args, "decision_id")?,
                ]),
                false,
            ),
            "create_action" => {
                let file = self.write_action(arg(args, "yaml")?)?;
                let mut v = s(&["action", "create"]);
                if args.get("available").and_then(Value::as_bool) == Some(true) {
                    v.push("--available".into());
                }
                v.push("--config".into());
                v.push(file);
                (v, true)
            }
            "add_resource" => (
                s(&[
                    "resource",
                    "add",
                    arg(args, "type")?,
                    arg(args, "name")?,
                    "--path",
                    arg(args, "path")?,
                ]),
                true,
            ),
            "link_resource" => (
                s(&[
                    "project",
                    "link-resource",
                    arg(args, "project")?,
                    arg(args, "resource")?,
                ]),
                true,
            ),
            "use_plan" => {
                let mut v = s(&[
                    "plan",
                    "use",
                    arg(args, "action")?,
                    arg(args, "project")?,
                    "--automation-profile",
                    &self.profile,
                ]);
                if let Some(map) = args.get("arguments").and_then(Value::as_object) {
                    for (k, val) in map {
                        let text = match val {
                            Value::String(t) => t.clone(),
                            other => other.to_string(),
                        };
                        v.push("--arg".into());
                        v.push(format!("{k}={text}"));
                    }
                }
                (v, true)
            }
            "apply_plan" => (s(&["plan", "apply", "--yes", arg(args, "plan_id")?]), true),
            other => return Err(format!("unknown tool `{other}`")),
        })
    }

    fn write_action(&self, yaml: &str) -> Result<String, String> {
        std::fs::create_dir_all(&self.actions_dir)
            .map_err(|e| format!("cannot create {}: {e}", self.actions_dir.display()))?;
        let n = std::fs::read_dir(&self.actions_dir)
            .map(|d| d.count())
            .unwrap_or(0);
        let path = self.actions_dir.join(format!("action-{}.yaml", n + 1));
        std::fs::write(&path, yaml).map_err(|e| format!("cannot write {}: {e}", path.display()))?;
        Ok(path.display().to_string())
    }

    fn refuse_apply(&self, plan: &str, line: String) -> ToolOutcome {
        let why = format!(
            // A command inside a sentence stays (D-commands-2): it is said to a model, which reads it as text.
            "refused: the session's automation profile `{}` does not apply plans without a human, so Apply stays at its gate; the user can review the plan and run `agents plan apply {plan}`",
            self.profile
        );
        self.record(ExecutedCommand {
            command: line,
            ok: false,
            status: "refused".into(),
            summary: why.clone(),
        });
        ToolOutcome::error(why)
    }

    fn run_command(&self, argv: &[String], mutates: bool) -> ToolOutcome {
        let line = command_line(argv);
        let result = self.commands.run(argv);
        let ok = matches!(result.exit_code, 0 | 3);
        if mutates {
            self.record(ExecutedCommand {
                command: line.clone(),
                ok,
                status: result
                    .envelope
                    .get("status")
                    .and_then(Value::as_str)
                    .unwrap_or(if ok { "ok" } else { "error" })
                    .to_string(),
                summary: summary_of(&result.envelope),
            });
            if argv.first().map(String::as_str) == Some("plan")
                && argv.get(1).map(String::as_str) == Some("use")
                && let Some(id) = result
                    .envelope
                    .pointer("/data/plan_id")
                    .and_then(Value::as_str)
                    .and_then(|s| s.parse::<Id>().ok())
                && let Ok(mut plans) = self.plans.lock()
            {
                plans.push(id);
            }
        }
        let text = clip(format!(
            "$ {line}\nexit code {}\n{}",
            result.exit_code,
            serde_json::to_string_pretty(&result.envelope).unwrap_or_default()
        ));
        if ok {
            ToolOutcome::ok(text)
        } else {
            ToolOutcome::error(text)
        }
    }
}

impl<C: Commands> ToolHost for OrchestratorTools<C> {
    fn specs(&self) -> Vec<ToolSpec> {
        specs()
    }

    async fn call(&self, name: &str, args: Value) -> ToolOutcome {
        let (argv, mutates) = match self.argv(name, &args) {
            Ok(v) => v,
            Err(e) => return ToolOutcome::error(e),
        };
        if name == "apply_plan" && !self.auto_apply {
            let plan = args
                .get("plan_id")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string();
            return self.refuse_apply(&plan, command_line(&argv));
        }
        // The command may run its own async runtime (a plan's lifecycle), so it runs on a
        // thread of its own rather than inside this one.
        std::thread::scope(|scope| {
            scope
                .spawn(|| self.run_command(&argv, mutates))
                .join()
                .unwrap_or_else(|_| ToolOutcome::error(format!("`{name}` failed unexpectedly")))
        })
    }
}
