//! Registered tools (spec section 18 "Tool Configuration", "Tool Capability Metadata",
//! "Resource Bindings"): the tool YAML, its validation at `tool add`, and the owned capability
//! record every non-built-in tool carries.
//!
//! A tool YAML is `cleveragents: {version}` plus `tool:` with `name`, `description`, `source`
//! (`command`, `mcp`, `agent_skill`; `custom` is read as `command`), `input_schema` (a JSON
//! Schema, compiled at add time), `capability`, `resources` (slots with `bind` for static and
//! `from_param` for parameter binding; neither is contextual) and the implementation:
//! - `command:` a command line whose `{{ name }}` placeholders are replaced by the argument,
//!   shell-quoted; or `code:` a script run with `/bin/sh`. Either way the arguments arrive as
//!   JSON on stdin and the result is read from stdout ([`super::command`]).
//! - `mcp_server:` a server spec and `tool_name` ([`super::mcp`]).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::Capability;

/// Where a tool comes from (spec 18 "source").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ToolSource {
    /// Compiled in.
    Builtin,
    /// A command line or script run in the sandbox (`custom` in the spec's examples).
    #[serde(alias = "custom")]
    Command,
    /// A tool of an MCP server.
    Mcp,
    /// A script of an Agent Skill folder, or its instructions (`load_skill`).
    AgentSkill,
}

impl ToolSource {
    /// The source as written in YAML and shown by `tool list`.
    pub fn as_str(self) -> &'static str {
        match self {
            ToolSource::Builtin => "builtin",
            ToolSource::Command => "command",
            ToolSource::Mcp => "mcp",
            ToolSource::AgentSkill => "agent_skill",
        }
    }

    /// Parses a `--source` value (`custom` is `command`).
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "builtin" => Some(ToolSource::Builtin),
            "command" | "custom" => Some(ToolSource::Command),
            "mcp" => Some(ToolSource::Mcp),
            "agent_skill" => Some(ToolSource::AgentSkill),
            _ => None,
        }
    }
}

/// Capability metadata of any tool (spec 18 "Tool Capability Metadata"), owned so that it
/// can come from YAML, MCP annotations or overrides. A tool that says neither `read_only` nor
/// `writes` counts as writing.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct ToolCapability {
    /// Only reads.
    pub read_only: bool,
    /// Changes the sandbox (or the world).
    pub writes: bool,
    /// What it may change (free-form, shown by `tool show`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub write_scope: Option<Value>,
    /// Its effects can be captured by a checkpoint and rolled back.
    pub checkpointable: bool,
    /// Granularity of rollback (`file`, `snapshot`, `transaction`, ...).
    pub checkpoint_scope: Option<String>,
    /// Calling it twice has the effect of calling it once.
    pub idempotent: bool,
    /// Effects beyond the sandbox (`network`, `send_email`, ...).
    pub side_effects: Vec<String>,
    /// Permissions needed to invoke it (informational).
    pub required_permissions: Vec<String>,
    /// Rate limit and cost (informational).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cost_profile: Option<Value>,
    /// A human must approve each call (a `tool_approval`).
    pub human_approval_required: bool,
    /// Reaches outside the sandbox (MCP `openWorldHint`): its effects there are recorded as
    /// side effects and cannot be rolled back.
    pub open_world: bool,
    /// Not confined by the kernel (built-in shell without Landlock).
    #[serde(rename = "unsafe")]
    pub is_unsafe: bool,
}

impl Default for ToolCapability {
    fn default() -> Self {
        Self {
            read_only: false,
            writes: true,
            write_scope: None,
            checkpointable: true,
            checkpoint_scope: Some("snapshot".into()),
            idempotent: false,
            side_effects: Vec::new(),
            required_permissions: Vec::new(),
            cost_profile: None,
            human_approval_required: false,
            open_world: false,
            is_unsafe: false,
        }
    }
}

impl From<Capability> for ToolCapability {
    fn from(c: Capability) -> Self {
        Self {
            read_only: c.read_only,
            writes: c.writes,
            write_scope: None,
            checkpointable: c.checkpointable,
            checkpoint_scope: c.checkpoint_scope.map(str::to_string),
            idempotent: c.idempotent,
            side_effects: c.side_effects.iter().map(|s| s.to_string()).collect(),
            required_permissions: Vec::new(),
            cost_profile: None,
            human_approval_required: false,
            open_world: false,
            is_unsafe: c.is_unsafe,
        }
    }
}

impl ToolCapability {
    /// Settles `read_only`/`writes` from what was written in YAML: only `read_only: true`
    /// makes a tool read-only; everything else writes.
    ///
    /// # Errors
    /// Both `read_only: true` and `writes: true`.
    pub fn settle(raw: &Value) -> Result<Self, String> {
        let mut cap: ToolCapability =
            serde_json::from_value(raw.clone()).map_err(|e| e.to_string())?;
        let said = |k: &str| raw.get(k).and_then(Value::as_bool);
        match (said("read_only"), said("writes")) {
            (Some(true), Some(true)) => {
                return Err(
                    "read_only and writes are both true; a tool either only reads or writes".into(),
                );
            }
            (Some(true), _) => cap.writes = false,
            (_, Some(false)) => cap.read_only = true,
            _ => {
                cap.read_only = false;
                cap.writes = true;
            }
        }
        if cap.read_only && raw.get("checkpoint_scope").is_none() {
            cap.checkpoint_scope = None;
        }
        Ok(cap)
    }

    /// Shallow-merges an override (spec 18 "Metadata Overrides": only the given fields
    /// change). `read_only: true` clears `writes` and the other way round.
    ///
    /// # Errors
    /// A field that is not capability metadata, or a value of the wrong type.
    pub fn merged(&self, over: &Value) -> Result<Self, String> {
        let Some(over) = over.as_object() else {
            return Err("an override's capability must be a mapping".into());
        };
        let mut base = serde_json::to_value(self).map_err(|e| e.to_string())?;
        for (k, v) in over {
            base[k] = v.clone();
        }
        if over.get("read_only") == Some(&Value::Bool(true)) {
            base["writes"] = Value::Bool(false);
        }
        if over.get("writes") == Some(&Value::Bool(true)) {
            base["read_only"] = Value::Bool(false);
        }
        serde_json::from_value(base).map_err(|e| e.to_string())
    }
}

/// A resource slot (spec 18 "Resource Slots"): the binding mode is static with `bind`,
/// parameter with `from_param`, contextual with neither.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ResourceSlot {
    /// Resource type (`git-checkout`, `fs-directory`, ...).
    #[serde(rename = "type")]
    pub resource_type: String,
    /// `read_only`, `write_only` or `read_write`.
    #[serde(default = "read_write")]
    pub access: String,
    /// The slot must be bound.
    #[serde(default = "yes")]
    pub required: bool,
    /// What the tool uses it for.
    #[serde(default)]
    pub description: Option<String>,
    /// Static binding: always this registered resource.
    #[serde(default)]
    pub bind: Option<String>,
    /// Parameter binding: the argument that names the resource.
    #[serde(default)]
    pub from_param: Option<String>,
}

fn read_write() -> String {
    "read_write".into()
}
fn yes() -> bool {
    true
}

impl ResourceSlot {
    /// `contextual`, `static` or `parameter`.
    pub fn mode(&self) -> &'static str {
        if self.bind.is_some() {
            "static"
        } else if self.from_param.is_some() {
            "parameter"
        } else {
            "contextual"
        }
    }
}

/// An MCP server, as a skill's `mcp_servers` entry or a tool's `mcp_server` (spec 19 "MCP
/// Server Tools"): stdio with `command` (and `args`), or Streamable HTTP with `url`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct McpServerSpec {
    /// The name tools are offered under (`<name>.<tool>`).
    #[serde(default)]
    pub name: String,
    /// Stdio: the program, or a whole command line when `args` is empty.
    #[serde(default)]
    pub command: Option<String>,
    /// Stdio: its arguments. `{sandbox}` is replaced by the plan's sandbox directory.
    #[serde(default)]
    pub args: Vec<String>,
    /// Environment passed to a stdio server: values may name variables as `${NAME}`; nothing
    /// else of the parent's environment is passed but `PATH`, `LANG` and a per-plan `HOME`.
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// Streamable HTTP: the endpoint.
    #[serde(default)]
    pub url: Option<String>,
    /// Streamable HTTP: extra headers (values may name `${NAME}`).
    #[serde(default)]
    pub headers: BTreeMap<String, String>,
    /// Streamable HTTP: the environment variable holding the bearer token.
    #[serde(default)]
    pub token_env: Option<String>,
    /// The MCP tool name (a tool YAML's `mcp_server` only).
    #[serde(default)]
    pub tool_name: Option<String>,
    /// Seconds a call may take (default 60).
    #[serde(default)]
    pub timeout_secs: Option<u64>,
    /// Per-tool capability overrides, flat (`{tool, read_only, writes, ...}`).
    #[serde(default)]
    pub overrides: Vec<Value>,
    /// Stdio: extra directories the server may read (its code, when the launcher cannot tell
    /// it from an absolute program or argument path).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub readable: Vec<String>,
    /// Argument names holding paths confined to the sandbox (default: `path`, `paths`,
    /// `source`, `destination`).
    #[serde(default)]
    pub path_arguments: Option<Vec<String>>,
}

impl McpServerSpec {
    /// Parses a `--mcp-server` value: `NAME=COMMAND LINE` for stdio or `NAME=https://...`.
    ///
    /// # Errors
    /// A value without `NAME=`.
    pub fn parse_flag(spec: &str) -> Result<Self, String> {
        let (name, rest) = spec
            .split_once('=')
            .filter(|(n, r)| !n.trim().is_empty() && !r.trim().is_empty())
            .ok_or_else(|| {
                format!("--mcp-server `{spec}` must be NAME=COMMAND or NAME=URL, e.g. everything=\"npx mcp-server-everything\"")
            })?;
        let mut s = McpServerSpec {
            name: name.trim().to_string(),
            command: None,
            args: Vec::new(),
            env: BTreeMap::new(),
            url: None,
            headers: BTreeMap::new(),
            token_env: None,
            tool_name: None,
            timeout_secs: None,
            overrides: Vec::new(),
            readable: Vec::new(),
            path_arguments: None,
        };
        let rest = rest.trim();
        if rest.starts_with("http://") || rest.starts_with("https://") {
            s.url = Some(rest.to_string());
        } else {
            s.command = Some(rest.to_string());
        }
        Ok(s)
    }

    /// Checks the spec: a name of letters, digits, `-` and `_`; exactly one of `command` and
    /// `url`.
    ///
    /// # Errors
    /// What is wrong, naming the field.
    pub fn check(&self) -> Result<(), String> {
        if self.name.is_empty()
            || !self
                .name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
        {
            return Err(format!(
                "name `{}` must be letters, digits, `-` or `_` (tools are offered as <name>.<tool>)",
                self.name
            ));
        }
        match (&self.command, &self.url) {
            (Some(_), Some(_)) => {
                Err("give either command (stdio) or url (Streamable HTTP), not both".into())
            }
            (None, None) => {
                Err("give command (a stdio server) or url (a Streamable HTTP server)".into())
            }
            (Some(c), None) if c.trim().is_empty() => Err("command is empty".into()),
            (None, Some(u)) if !(u.starts_with("http://") || u.starts_with("https://")) => {
                Err(format!("url `{u}` must start with http:// or https://"))
            }
            _ => Ok(()),
        }
    }
}

/// The body of a tool YAML (`tool:`), also the shape of an anonymous tool.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ToolDef {
    /// Namespaced name (`local/lint`); absent for an anonymous tool.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// What it does, for actors and `tool show`.
    #[serde(default)]
    pub description: String,
    /// Where it comes from (default `command`).
    #[serde(default = "command_source")]
    pub source: ToolSource,
    /// JSON Schema of its arguments (default: any object).
    #[serde(default = "any_object")]
    pub input_schema: Value,
    /// JSON Schema of its result (informational).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_schema: Option<Value>,
    /// Capability metadata as written (settled by [`ToolCapability::settle`]).
    #[serde(default = "empty_map")]
    pub capability: Value,
    /// Resource slots.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub resources: BTreeMap<String, ResourceSlot>,
    /// A command line with `{{ argument }}` placeholders (shell-quoted when filled in).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command: Option<String>,
    /// A script run with `/bin/sh` (arguments as JSON on stdin).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub code: Option<String>,
    /// Seconds before the command is killed (default 120).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_secs: Option<u64>,
    /// Environment variables passed to the command by name.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub env: Vec<String>,
    /// `source: mcp`: the server and the tool's name on it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mcp_server: Option<McpServerSpec>,
    /// `source: agent_skill`: the folder.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent_skill: Option<Value>,
    /// The directory the YAML was read from (scripts given by relative path resolve here).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub base_dir: Option<String>,
}

fn command_source() -> ToolSource {
    ToolSource::Command
}
fn any_object() -> Value {
    serde_json::json!({"type": "object"})
}
fn empty_map() -> Value {
    Value::Object(serde_json::Map::new())
}

/// A tool YAML file: `cleveragents:` and `tool:`.
#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ToolFile {
    /// Format header.
    #[serde(default)]
    pub cleveragents: Option<Value>,
    /// The tool.
    pub tool: ToolDef,
}

/// A problem with a tool definition, naming the field.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {message}")]
pub struct DefError {
    /// The field (`tool.input_schema`).
    pub field: String,
    /// What is wrong.
    pub message: String,
}

fn def_err(field: impl Into<String>, message: impl Into<String>) -> DefError {
    DefError {
        field: field.into(),
        message: message.into(),
    }
}

impl ToolDef {
    /// The settled capability.
    ///
    /// # Errors
    /// As [`ToolCapability::settle`].
    pub fn capability(&self) -> Result<ToolCapability, DefError> {
        ToolCapability::settle(&self.capability).map_err(|m| def_err("capability", m))
    }

    /// Checks a definition (at `tool add`, and for anonymous tools at `skill add`): the
    /// schema compiles and describes an object, the capability is coherent, the source has
    /// its implementation, parameter slots name a schema property, placeholders name one too.
    ///
    /// # Errors
    /// The first problem, naming its field under `prefix` (`tool`, `anonymous_tools[0]`).
    pub fn check(&self, prefix: &str) -> Result<ToolCapability, DefError> {
        let f = |name: &str| format!("{prefix}.{name}");
        if self.description.trim().is_empty() {
            return Err(def_err(
                f("description"),
                "is required: say what the tool does; the model chooses tools by it",
            ));
        }
        if let Err(e) = jsonschema::validator_for(&self.input_schema) {
            return Err(def_err(
                f("input_schema"),
                format!("is not a valid JSON Schema: {e}"),
            ));
        }
        if self.input_schema.get("type").and_then(Value::as_str) != Some("object") {
            return Err(def_err(
                f("input_schema"),
                "must have `type: object` (tool arguments are a JSON object)",
            ));
        }
        let cap =
            ToolCapability::settle(&self.capability).map_err(|m| def_err(f("capability"), m))?;
        let props: Vec<String> = self
            .input_schema
            .get("properties")
            .and_then(Value::as_object)
            .map(|p| p.keys().cloned().collect())
            .unwrap_or_default();
        for (slot, s) in &self.resources {
            if !matches!(s.access.as_str(), "read_only" | "write_only" | "read_write") {
                return Err(def_err(
                    f(&format!("resources.{slot}.access")),
                    format!("`{}` is not read_only, write_only or read_write", s.access),
                ));
            }
            if let Some(p) = &s.from_param
                && !props.contains(p)
            {
                return Err(def_err(
                    f(&format!("resources.{slot}.from_param")),
                    format!(
                        "names `{p}`, which is not a property of input_schema ({})",
                        props.join(", ")
                    ),
                ));
            }
            if s.bind.is_some() && s.from_param.is_some() {
                return Err(def_err(
                    f(&format!("resources.{slot}")),
                    "give bind (static) or from_param (parameter), not both",
                ));
            }
        }
        match self.source {
            ToolSource::Builtin => {
                return Err(def_err(
                    f("source"),
                    "builtin tools are compiled in and cannot be registered; use command, mcp or agent_skill",
                ));
            }
            ToolSource::Command => match (&self.command, &self.code) {
                (None, None) => {
                    return Err(def_err(
                        f("command"),
                        "a command tool needs `command` (a command line) or `code` (a script)",
                    ));
                }
                (Some(_), Some(_)) => {
                    return Err(def_err(f("command"), "give command or code, not both"));
                }
                (Some(c), None) => {
                    for name in
                        super::command::placeholders(c).map_err(|m| def_err(f("command"), m))?
                    {
                        if !props.contains(&name) {
                            return Err(def_err(
                                f("command"),
                                format!(
                                    "placeholder `{{{{ {name} }}}}` is not a property of input_schema ({})",
                                    props.join(", ")
                                ),
                            ));
                        }
                    }
                }
                _ => {}
            },
            ToolSource::Mcp => {
                let Some(server) = &self.mcp_server else {
                    return Err(def_err(
                        f("mcp_server"),
                        "an mcp tool needs `mcp_server` with command or url and tool_name",
                    ));
                };
                let mut server = server.clone();
                if server.name.is_empty() {
                    server.name = "server".into();
                }
                server.check().map_err(|m| def_err(f("mcp_server"), m))?;
                if server.tool_name.as_deref().is_none_or(str::is_empty) {
                    return Err(def_err(
                        f("mcp_server.tool_name"),
                        "is required: the tool's name on the server",
                    ));
                }
            }
            ToolSource::AgentSkill => {
                if self.command.is_none() && self.code.is_none() {
                    return Err(def_err(
                        f("agent_skill"),
                        // A command inside a sentence stays (D-commands-2): it explains the error rather than suggesting the next step.
                        "register an Agent Skill folder with `agents skill add --agent-skill DIR`; a tool of source agent_skill needs `command` (its script)",
                    ));
                }
            }
        }
        Ok(cap)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_tool_that_says_nothing_writes_and_read_only_excludes_writes() {
        let c = ToolCapability::settle(&json!({})).unwrap();
        assert!(c.writes && !c.read_only);
        let c = ToolCapability::settle(&json!({"read_only": true})).unwrap();
        assert!(!c.writes && c.read_only);
        let c = ToolCapability::settle(&json!({"writes": false})).unwrap();
        assert!(c.read_only);
        assert!(ToolCapability::settle(&json!({"read_only": true, "writes": true})).is_err());
        assert!(ToolCapability::settle(&json!({"writez": true})).is_err());
    }

    #[test]
    fn overrides_change_only_the_given_fields() {
        let c = ToolCapability::settle(&json!({"writes": true, "idempotent": true})).unwrap();
        let o = c.merged(&json!({"human_approval_required": true})).unwrap();
        assert!(o.human_approval_required && o.idempotent && o.writes);
        let o = c.merged(&json!({"read_only": true})).unwrap();
        assert!(o.read_only && !o.writes);
        assert!(c.merged(&json!({"input_schema": {}})).is_err());
    }

    #[test]
    fn a_definition_is_checked_field_by_field() {
        let mut d: ToolDef = serde_json::from_value(json!({
            "name": "local/t", "description": "d", "command": "echo {{ x }}",
            "input_schema": {"type": "object", "properties": {"x": {"type": "string"}}}
        }))
        .unwrap();
        assert!(d.check("tool").is_ok());
        d.command = Some("echo {{ y }}".into());
        assert_eq!(d.check("tool").unwrap_err().field, "tool.command");
        d.command = Some("echo".into());
        d.input_schema = json!({"type": "object", "properties": {"x": {"type": 7}}});
        assert_eq!(d.check("tool").unwrap_err().field, "tool.input_schema");
        d.input_schema = json!({"type": "string"});
        assert_eq!(d.check("tool").unwrap_err().field, "tool.input_schema");
    }
}
