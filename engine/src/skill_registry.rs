//! Custom skills (spec section 19 "Skill Configuration", "Skill Hierarchy and Composition")
//! and Agent Skills folders (spec 18 "Agent Skills Integration Details").
//!
//! A skill YAML names registered tools (`tools:`, each optionally with an `override:` of
//! `capability` and `description`), includes other skills (`includes:`, optionally with
//! `tool_overrides:`), defines `anonymous_tools:` (the tool YAML body, with an optional bare
//! `name`), opts into built-in groups (`builtins:`), connects `mcp_servers:` and loads
//! `agent_skills:` folders.
//!
//! Flattening ([`resolve`]): direct tools first (built-in groups, named tools, anonymous
//! tools, Agent Skill scripts), then each include's flattened tools with its overrides. A
//! direct tool wins over an included one of the same name; two includes offering the same
//! name are a conflict: both are offered as `<skill>.<tool>` and the conflict is reported.
//! An include cycle is refused naming the cycle. Built-in tools' metadata cannot be
//! overridden; schemas never can.
//!
//! An Agent Skill is a folder with `SKILL.md` (YAML front matter `name`, `description`, then
//! the instructions) and optional `scripts/`, `references/`, `assets/`. Its name and
//! description go into the actor's system prompt; `load_skill` returns the instructions; each
//! file in `scripts/` is a command tool `<skill>.<script>` run in the sandbox.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::skills;
use crate::store::Store;
use crate::store::tools::Registration;
use crate::tools::custom::{McpServerSpec, ToolCapability, ToolDef, ToolSource};
use crate::tools::external::{ExternalTool, Runnable};

/// The name of the tool that returns an Agent Skill's instructions.
pub const LOAD_SKILL: &str = "load_skill";

/// An override at a point of use (spec 18 "Metadata Overrides"): only `capability` and
/// `description`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Override {
    /// Capability fields to replace (shallow merge).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capability: Option<Value>,
    /// A new description.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
}

/// A named tool reference: `local/lint` or `{name, override}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(untagged)]
pub enum ToolRef {
    /// Just the name.
    Name(String),
    /// The name with an override.
    Full {
        /// Tool name.
        name: String,
        /// Its override.
        #[serde(default, rename = "override")]
        over: Option<Override>,
    },
}

impl ToolRef {
    fn parts(&self) -> (&str, Option<&Override>) {
        match self {
            ToolRef::Name(n) => (n, None),
            ToolRef::Full { name, over } => (name, over.as_ref()),
        }
    }
}

/// One `tool_overrides` entry of an include.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ToolOverride {
    /// The included tool's name.
    pub tool: String,
    /// The override.
    #[serde(rename = "override")]
    pub over: Override,
}

/// An include: `local/git-ops` or `{name, tool_overrides}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(untagged)]
pub enum IncludeRef {
    /// Just the name.
    Name(String),
    /// The name with per-tool overrides.
    Full {
        /// Skill name.
        name: String,
        /// Overrides of its tools.
        #[serde(default)]
        tool_overrides: Vec<ToolOverride>,
    },
}

impl IncludeRef {
    fn parts(&self) -> (&str, &[ToolOverride]) {
        match self {
            IncludeRef::Name(n) => (n, &[]),
            IncludeRef::Full {
                name,
                tool_overrides,
            } => (name, tool_overrides),
        }
    }
}

/// A built-in group: `file_operations` or `{group: file_operations}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(untagged)]
pub enum BuiltinRef {
    /// The group's name.
    Name(String),
    /// `{group: NAME}`.
    Group {
        /// The group's name.
        group: String,
    },
}

/// An `agent_skills` entry.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AgentSkillRef {
    /// The folder (relative to the skill YAML, or absolute).
    pub path: String,
    /// Informational (`none`, `container`): scripts always run confined in the sandbox.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sandbox_policy: Option<String>,
}

/// The body of a skill YAML (`skill:`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SkillDef {
    /// Namespaced name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// What it is for.
    #[serde(default)]
    pub description: String,
    /// Named tool references.
    #[serde(default)]
    pub tools: Vec<ToolRef>,
    /// Included skills.
    #[serde(default)]
    pub includes: Vec<IncludeRef>,
    /// MCP servers whose tools it exposes.
    #[serde(default)]
    pub mcp_servers: Vec<McpServerSpec>,
    /// Agent Skills folders.
    #[serde(default)]
    pub agent_skills: Vec<AgentSkillRef>,
    /// Built-in groups.
    #[serde(default)]
    pub builtins: Vec<BuiltinRef>,
    /// Inline tools.
    #[serde(default)]
    pub anonymous_tools: Vec<ToolDef>,
    /// The directory the YAML was read from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub base_dir: Option<String>,
}

/// A skill YAML file.
#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SkillFile {
    /// Format header.
    #[serde(default)]
    pub cleveragents: Option<Value>,
    /// The skill.
    pub skill: SkillDef,
}

/// A loaded Agent Skill folder.
#[derive(Debug, Clone, PartialEq, Serialize, serde::Deserialize, schemars::JsonSchema)]
pub struct AgentSkill {
    /// Front matter `name`.
    pub name: String,
    /// Front matter `description`.
    pub description: String,
    /// The folder.
    pub dir: PathBuf,
    /// The instructions (the Markdown after the front matter).
    #[serde(skip)]
    pub body: String,
    /// Files in `scripts/`, by file name.
    pub scripts: Vec<String>,
}

/// One tool of a flattened skill.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize, schemars::JsonSchema)]
pub struct ResolvedTool {
    /// Name as offered.
    pub name: String,
    /// Description (after overrides).
    pub description: String,
    /// Source.
    pub source: ToolSource,
    /// Capability (after overrides).
    pub capability: ToolCapability,
    /// The included skill it came from (`None`: defined in this skill).
    pub from_skill: Option<String>,
    /// How it runs (`None` for built-ins, which the runner knows).
    pub external: Option<ExternalTool>,
}

impl ResolvedTool {
    /// As structured data.
    pub fn to_json(&self) -> Value {
        json!({
            "name": self.name,
            "description": self.description,
            "source": self.source.as_str(),
            "from_skill": self.from_skill,
            "capability": self.capability,
        })
    }
}

/// A skill with its tools flattened.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize, schemars::JsonSchema)]
pub struct ResolvedSkill {
    /// Name.
    pub name: String,
    /// Description.
    pub description: String,
    /// `builtin` or `custom`.
    pub kind: std::borrow::Cow<'static, str>,
    /// Direct includes.
    pub includes: Vec<String>,
    /// Every tool, direct then included.
    pub tools: Vec<ResolvedTool>,
    /// MCP servers (own and included), with the skill that declared each.
    pub mcp_servers: Vec<(String, McpServerSpec)>,
    /// Agent Skills (own and included).
    pub agent_skills: Vec<AgentSkill>,
    /// Name conflicts between includes, resolved by qualification.
    pub conflicts: Vec<String>,
    /// Where a discovered skill was found (`None` for built-in and registered skills).
    pub origin: Option<String>,
}

impl ResolvedSkill {
    /// The distinct sources of its tools (MCP servers count as `mcp`).
    pub fn sources(&self) -> Vec<&'static str> {
        let mut s: Vec<&'static str> = self.tools.iter().map(|t| t.source.as_str()).collect();
        if !self.mcp_servers.is_empty() {
            s.push("mcp");
        }
        s.sort_unstable();
        s.dedup();
        s
    }
}

/// Why a skill cannot be registered or resolved.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SkillRegError {
    /// No such skill.
    #[error("unknown skill `{name}`{hint}")]
    Unknown {
        /// The name.
        name: String,
        /// A suggestion, in words.
        hint: String,
        /// The nearest skill name, if one is close.
        suggestion: Option<String>,
    },
    /// A referenced tool is not registered.
    #[error("skill {skill}: tool `{tool}` is not registered{hint}")]
    UnknownTool {
        /// The skill.
        skill: String,
        /// The tool.
        tool: String,
        /// A suggestion.
        hint: String,
    },
    /// Includes form a cycle.
    #[error("skill includes form a cycle: {}", cycle.join(" -> "))]
    Cycle {
        /// The names around the cycle, first repeated at the end.
        cycle: Vec<String>,
    },
    /// Anything else, naming the field.
    #[error("skill {skill}: {field}: {message}")]
    Invalid {
        /// The skill.
        skill: String,
        /// The field.
        field: String,
        /// What is wrong.
        message: String,
    },
}

fn invalid(skill: &str, field: impl Into<String>, message: impl Into<String>) -> SkillRegError {
    SkillRegError::Invalid {
        skill: skill.to_string(),
        field: field.into(),
        message: message.into(),
    }
}

/// Parses `SKILL.md`: YAML front matter between `---` lines with `name` and `description`.
///
/// # Errors
/// A message naming the file and what is missing.
pub fn load_agent_skill(dir: &Path) -> Result<AgentSkill, String> {
    let file = dir.join("SKILL.md");
    let text = std::fs::read_to_string(&file).map_err(|e| {
        format!(
            "{}: {e} (an Agent Skill folder holds a SKILL.md)",
            file.display()
        )
    })?;
    let rest = text.strip_prefix("---").ok_or_else(|| {
        format!(
            "{}: must start with YAML front matter between --- lines",
            file.display()
        )
    })?;
    let (front, body) = rest.split_once("\n---").ok_or_else(|| {
        format!(
            "{}: the front matter has no closing --- line",
            file.display()
        )
    })?;
    let meta: Value = serde_yaml::from_str(front)
        .map_err(|e| format!("{}: front matter: {e}", file.display()))?;
    let field = |k: &str| {
        meta.get(k)
            .and_then(Value::as_str)
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(str::to_string)
            .ok_or_else(|| format!("{}: front matter `{k}` is required", file.display()))
    };
    let name = field("name")?;
    if !name
        .chars()
        .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
    {
        return Err(format!(
            "{}: name `{name}` must be lowercase letters, digits and hyphens",
            file.display()
        ));
    }
    let mut scripts: Vec<String> = std::fs::read_dir(dir.join("scripts"))
        .into_iter()
        .flatten()
        .flatten()
        .filter(|e| e.path().is_file())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    scripts.sort();
    check_script_names(&file, &name, &scripts)?;
    Ok(AgentSkill {
        name,
        description: field("description")?,
        dir: std::fs::canonicalize(dir).unwrap_or_else(|_| dir.to_path_buf()),
        body: body.trim_start_matches(['-', '\n']).trim().to_string(),
        scripts,
    })
}

/// Refuses scripts whose tools could not be offered: a name that is a built-in's once
/// offered (`write/scripts/file.sh` is `write_file`), or two scripts of one stem.
fn check_script_names(file: &Path, skill: &str, scripts: &[String]) -> Result<(), String> {
    let mut seen: Vec<String> = Vec::new();
    for script in scripts {
        let stem = Path::new(script)
            .file_stem()
            .map_or_else(|| script.clone(), |s| s.to_string_lossy().into_owned());
        let tool = format!("{skill}.{stem}");
        if let Some(why) = crate::tools::external::shadows_builtin(&tool) {
            return Err(format!(
                "{}: scripts/{script}: {why}; rename the script or the skill",
                file.display()
            ));
        }
        let wire = crate::tools::external::wire_name(&tool);
        if seen.contains(&wire) {
            return Err(format!(
                "{}: scripts/{script}: another script is also offered as `{wire}`; rename one",
                file.display()
            ));
        }
        seen.push(wire);
    }
    Ok(())
}

/// The command tool for an Agent Skill script: `<skill>.<script stem>`, run with the
/// interpreter its extension names (`.py` python3, `.sh` sh, else directly), its `args`
/// passed as arguments and the whole JSON on stdin.
pub fn script_tool(skill: &AgentSkill, script: &str, from: Option<&str>) -> ResolvedTool {
    let path = skill.dir.join("scripts").join(script);
    let stem = Path::new(script)
        .file_stem()
        .map_or_else(|| script.to_string(), |s| s.to_string_lossy().into_owned());
    let quoted = shell_words::quote(&path.display().to_string()).into_owned();
    let command = match Path::new(script).extension().and_then(|e| e.to_str()) {
        Some("py") => format!("python3 {quoted} {{{{ args }}}}"),
        Some("sh") => format!("sh {quoted} {{{{ args }}}}"),
        _ => format!("{quoted} {{{{ args }}}}"),
    };
    let def = ToolDef {
        name: Some(format!("{}.{stem}", skill.name)),
        description: format!(
            "Script {script} of the Agent Skill {} (load_skill first for how to use it)",
            skill.name
        ),
        source: ToolSource::AgentSkill,
        input_schema: json!({"type": "object", "properties": {"args": {"type": "array", "items": {"type": "string"}, "description": "Command-line arguments"}}, "additionalProperties": true}),
        output_schema: None,
        capability: json!({}),
        resources: BTreeMap::new(),
        command: Some(command),
        code: None,
        timeout_secs: None,
        env: Vec::new(),
        mcp_server: None,
        agent_skill: Some(json!({"path": skill.dir.display().to_string()})),
        base_dir: Some(skill.dir.display().to_string()),
    };
    external_of(def.name.clone().unwrap_or_default(), def, from, None)
        .expect("an Agent Skill script's definition is valid")
}

fn external_of(
    name: String,
    def: ToolDef,
    from: Option<&str>,
    skill: Option<&str>,
) -> Result<ResolvedTool, String> {
    let capability = def.capability().map_err(|e| e.to_string())?;
    Ok(ResolvedTool {
        name: name.clone(),
        description: def.description.clone(),
        source: def.source,
        capability: capability.clone(),
        from_skill: from.map(str::to_string),
        external: Some(ExternalTool {
            name,
            description: def.description.clone(),
            input_schema: def.input_schema.clone(),
            capability,
            source: def.source,
            skill: skill.map(str::to_string),
            resources: def.resources.clone().into_iter().collect(),
            runnable: Runnable::Command(Box::new(def)),
        }),
    })
}

fn apply_override(
    t: &mut ResolvedTool,
    over: &Override,
    skill: &str,
    field: &str,
) -> Result<(), SkillRegError> {
    if t.source == ToolSource::Builtin {
        return Err(invalid(
            skill,
            field,
            format!(
                "`{}` is a built-in tool; its metadata is authoritative and cannot be overridden",
                t.name
            ),
        ));
    }
    if let Some(c) = &over.capability {
        t.capability = t
            .capability
            .merged(c)
            .map_err(|m| invalid(skill, field, m))?;
    }
    if let Some(d) = &over.description {
        t.description = d.clone();
    }
    if let Some(e) = &mut t.external {
        e.capability = t.capability.clone();
        e.description = t.description.clone();
    }
    Ok(())
}

fn builtin_tool(name: &str, from: Option<&str>) -> Option<ResolvedTool> {
    let t = crate::tools::builtin(name)?;
    Some(ResolvedTool {
        name: t.name().to_string(),
        description: t.description().to_string(),
        source: ToolSource::Builtin,
        capability: t.capability().into(),
        from_skill: from.map(str::to_string),
        external: None,
    })
}

/// Resolves a skill by name: a built-in (bare name) or a registered custom skill, flattened.
///
/// # Errors
/// [`SkillRegError`].
pub fn resolve(store: &Store, name: &str) -> Result<ResolvedSkill, SkillRegError> {
    flatten(store, name, &mut Vec::new())
}

fn flatten(
    store: &Store,
    name: &str,
    stack: &mut Vec<String>,
) -> Result<ResolvedSkill, SkillRegError> {
    if let Ok(b) = skills::lookup(name) {
        return Ok(ResolvedSkill {
            name: b.name.clone(),
            description: b.description.clone(),
            kind: "builtin".into(),
            includes: Vec::new(),
            tools: b
                .tools
                .iter()
                .filter_map(|t| builtin_tool(&t.name, None))
                .collect(),
            mcp_servers: Vec::new(),
            agent_skills: Vec::new(),
            conflicts: Vec::new(),
            origin: None,
        });
    }
    let reg: Registration<SkillDef> = store
        .custom_skill(name)
        .map_err(|e| invalid(name, "(store)", e.to_string()))?
        .ok_or_else(|| unknown(store, name))?;
    flatten_def(store, &reg.name, &reg.definition, stack)
}

fn unknown(store: &Store, name: &str) -> SkillRegError {
    let mut names: Vec<String> = skills::builtin_names()
        .iter()
        .map(|s| s.to_string())
        .collect();
    if let Ok(custom) = store.custom_skills::<Value>() {
        names.extend(custom.into_iter().map(|r| r.name));
    }
    let bare = name.rsplit('/').next().unwrap_or(name);
    let suggestion = crate::config::nearest(name, names.iter().map(String::as_str))
        .or_else(|| crate::config::nearest(bare, names.iter().map(String::as_str)))
        .or_else(|| {
            crate::config::nearest(&bare.replace('-', "_"), names.iter().map(String::as_str))
        });
    let hint = match &suggestion {
        Some(s) => format!("; did you mean `{s}`?"),
        None => format!("; skills: {}", names.join(", ")),
    };
    let hint = if name.contains('/') {
        format!(" (no custom skill of that name is registered){hint}")
    } else {
        hint
    };
    SkillRegError::Unknown {
        name: name.to_string(),
        hint,
        suggestion,
    }
}

/// Flattens a definition not (yet) stored under `name` (what `skill add` checks): its direct
/// tools (built-in groups, named tools, anonymous tools, Agent Skill scripts), its MCP
/// servers, then each include merged in order, and `load_skill` when Agent Skills are present.
///
/// # Errors
/// [`SkillRegError`]: unknown tools or includes, a cycle, a bad override or anonymous tool.
pub fn flatten_def(
    store: &Store,
    name: &str,
    def: &SkillDef,
    stack: &mut Vec<String>,
) -> Result<ResolvedSkill, SkillRegError> {
    if let Some(pos) = stack.iter().position(|s| s == name) {
        let mut cycle: Vec<String> = stack[pos..].to_vec();
        cycle.push(name.to_string());
        return Err(SkillRegError::Cycle { cycle });
    }
    stack.push(name.to_string());
    let mut flat = Flat::default();
    add_builtin_groups(name, def, &mut flat)?;
    add_named_tools(store, name, def, &mut flat)?;
    add_anonymous_tools(name, def, &mut flat)?;
    add_agent_skills(name, def, &mut flat)?;
    for (i, m) in def.mcp_servers.iter().enumerate() {
        m.check()
            .map_err(|e| invalid(name, format!("mcp_servers[{i}]"), e))?;
        flat.mcp_servers.push((name.to_string(), m.clone()));
    }
    let direct = flat.tools.len();
    for (i, inc) in def.includes.iter().enumerate() {
        merge_include(store, name, i, inc, direct, stack, &mut flat)?;
    }
    if !flat.agent_skills.is_empty() && !flat.tools.iter().any(|t| t.name == LOAD_SKILL) {
        flat.tools.push(load_skill_tool());
    }
    stack.pop();
    Ok(ResolvedSkill {
        name: name.to_string(),
        description: def.description.clone(),
        kind: "custom".into(),
        includes: flat.includes,
        tools: flat.tools,
        mcp_servers: flat.mcp_servers,
        agent_skills: flat.agent_skills,
        conflicts: flat.conflicts,
        origin: None,
    })
}

/// What flattening has gathered so far.
#[derive(Default)]
struct Flat {
    tools: Vec<ResolvedTool>,
    agent_skills: Vec<AgentSkill>,
    mcp_servers: Vec<(String, McpServerSpec)>,
    includes: Vec<String>,
    conflicts: Vec<String>,
}

/// `builtins:`: every tool of each built-in group, once.
fn add_builtin_groups(name: &str, def: &SkillDef, flat: &mut Flat) -> Result<(), SkillRegError> {
    for (i, b) in def.builtins.iter().enumerate() {
        let group = match b {
            BuiltinRef::Name(n) | BuiltinRef::Group { group: n } => n,
        };
        let skill = skills::lookup(group)
            .map_err(|e| invalid(name, format!("builtins[{i}]"), e.to_string()))?;
        for t in &skill.tools {
            if !flat.tools.iter().any(|x| x.name == t.name)
                && let Some(bt) = builtin_tool(&t.name, None)
            {
                flat.tools.push(bt);
            }
        }
    }
    Ok(())
}

/// `tools:`: built-in or registered tools by name, each with its `override`.
fn add_named_tools(
    store: &Store,
    name: &str,
    def: &SkillDef,
    flat: &mut Flat,
) -> Result<(), SkillRegError> {
    for (i, r) in def.tools.iter().enumerate() {
        let (tool, over) = r.parts();
        let field = format!("tools[{i}]");
        let mut t = if let Some(bt) = builtin_tool(tool, None) {
            bt
        } else {
            let reg: Registration<ToolDef> = store
                .registered_tool(tool)
                .map_err(|e| invalid(name, &field, e.to_string()))?
                .ok_or_else(|| SkillRegError::UnknownTool {
                    skill: name.to_string(),
                    tool: tool.to_string(),
                    // A command inside a sentence stays (D-commands-2): it explains the error rather than suggesting the next step.
                    hint: "; register it first with `agents tool add -c FILE`".into(),
                })?;
            external_of(tool.to_string(), reg.definition, None, Some(name))
                .map_err(|m| invalid(name, &field, m))?
        };
        if let Some(o) = over {
            apply_override(&mut t, o, name, &format!("{field}.override"))?;
        }
        flat.tools.push(t);
    }
    Ok(())
}

/// `anonymous_tools:`: checked tool bodies with a bare name (or `anonymous_<n>`).
fn add_anonymous_tools(name: &str, def: &SkillDef, flat: &mut Flat) -> Result<(), SkillRegError> {
    for (i, a) in def.anonymous_tools.iter().enumerate() {
        let field = format!("anonymous_tools[{i}]");
        let mut a = a.clone();
        if a.base_dir.is_none() {
            a.base_dir.clone_from(&def.base_dir);
        }
        a.check(&field)
            .map_err(|e| invalid(name, e.field, e.message))?;
        let bare = a
            .name
            .clone()
            .unwrap_or_else(|| format!("anonymous_{}", i + 1));
        if bare.contains('/') {
            return Err(invalid(
                name,
                format!("{field}.name"),
                "an anonymous tool's name is bare (no namespace); register it with `tool add` to give it one",
            ));
        }
        flat.tools
            .push(external_of(bare, a, None, Some(name)).map_err(|m| invalid(name, &field, m))?);
    }
    Ok(())
}

/// `agent_skills:`: each folder loaded, its scripts as command tools.
fn add_agent_skills(name: &str, def: &SkillDef, flat: &mut Flat) -> Result<(), SkillRegError> {
    for (i, a) in def.agent_skills.iter().enumerate() {
        let dir = resolve_dir(def.base_dir.as_deref(), &a.path);
        let skill = load_agent_skill(&dir)
            .map_err(|m| invalid(name, format!("agent_skills[{i}].path"), m))?;
        for s in &skill.scripts {
            let mut t = script_tool(&skill, s, None);
            if let Some(e) = &mut t.external {
                e.skill = Some(name.to_string());
            }
            flat.tools.push(t);
        }
        flat.agent_skills.push(skill);
    }
    Ok(())
}

/// Moves a `tool_overrides` entry naming `<server>.<tool>` of an included MCP server into
/// that server's overrides (applied when it lists the tool); `false` when it names no server.
fn route_mcp_override(sub: &mut ResolvedSkill, o: &ToolOverride) -> bool {
    let Some((server, tool)) = o.tool.split_once('.') else {
        return false;
    };
    let Some((_, spec)) = sub.mcp_servers.iter_mut().find(|(_, m)| m.name == server) else {
        return false;
    };
    let mut entry = serde_json::Map::new();
    entry.insert("tool".into(), Value::String(tool.to_string()));
    if let Some(c) = &o.over.capability {
        entry.insert("capability".into(), c.clone());
    }
    spec.overrides
        .retain(|x| x.get("tool").and_then(Value::as_str) != Some(tool));
    spec.overrides.push(Value::Object(entry));
    true
}

/// Include `i`: its flattened tools with its `tool_overrides` applied, merged after the first
/// `direct` (own) tools. An own tool wins over an included one of the same name; two
/// includes offering the same name are both qualified as `<skill>.<tool>` and the conflict is
/// recorded.
fn merge_include(
    store: &Store,
    name: &str,
    i: usize,
    inc: &IncludeRef,
    direct: usize,
    stack: &mut Vec<String>,
    flat: &mut Flat,
) -> Result<(), SkillRegError> {
    let (child, overrides) = inc.parts();
    flat.includes.push(child.to_string());
    let mut sub = flatten(store, child, stack)?;
    for (j, o) in overrides.iter().enumerate() {
        if route_mcp_override(&mut sub, o) {
            continue;
        }
        if !sub.tools.iter().any(|t| t.name == o.tool) {
            return Err(invalid(
                name,
                format!("includes[{i}].tool_overrides[{j}].tool"),
                format!(
                    "`{}` is not a tool of {child} ({})",
                    o.tool,
                    sub.tools
                        .iter()
                        .map(|t| t.name.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            ));
        }
    }
    for mut t in sub.tools {
        if let Some(o) = overrides.iter().find(|o| o.tool == t.name) {
            apply_override(
                &mut t,
                &o.over,
                name,
                &format!("includes[{i}].tool_overrides"),
            )?;
        }
        if t.from_skill.is_none() {
            t.from_skill = Some(child.to_string());
        }
        if let Some(pos) = flat.tools.iter().position(|x| x.name == t.name) {
            if pos < direct || flat.tools[pos].external == t.external {
                continue; // a direct tool wins; the same tool twice is one tool
            }
            qualify_conflict(&mut flat.tools[pos], &mut t, &mut flat.conflicts);
        }
        flat.tools.push(t);
    }
    flat.mcp_servers.extend(sub.mcp_servers);
    flat.agent_skills.extend(sub.agent_skills);
    flat.conflicts.extend(sub.conflicts);
    Ok(())
}

/// Two included tools of one name: both become `<skill>.<tool>`, and the conflict is noted.
fn qualify_conflict(first: &mut ResolvedTool, second: &mut ResolvedTool, notes: &mut Vec<String>) {
    let other = first.from_skill.clone().unwrap_or_default();
    let from = second.from_skill.clone().unwrap_or_default();
    let bare = second.name.clone();
    notes.push(format!(
        "`{bare}` is offered by {other} and {from}; they are offered as {other}.{bare} and {from}.{bare}"
    ));
    for (t, skill) in [(first, &other), (second, &from)] {
        let q = format!("{skill}.{}", t.name);
        t.name.clone_from(&q);
        if let Some(e) = &mut t.external {
            e.name = q;
        }
    }
}

/// The description of `load_skill`.
pub fn load_skill_description() -> String {
    "Load the full instructions of one of the available Agent Skills by name; follow them, reading its references/ and assets/ with the file tools and running its scripts with its tools".into()
}

/// A folder path relative to `base` (the YAML's directory) unless absolute.
pub fn resolve_dir(base: Option<&str>, path: &str) -> PathBuf {
    let p = Path::new(path);
    if p.is_absolute() {
        p.to_path_buf()
    } else {
        base.map_or_else(|| p.to_path_buf(), |b| Path::new(b).join(p))
    }
}

/// The `<available_agent_skills>` block for a system prompt (spec 16, progressive
/// disclosure: names and descriptions only).
pub fn prompt_block(skills: &[AgentSkill]) -> Option<String> {
    if skills.is_empty() {
        return None;
    }
    let mut out = String::from("<available_agent_skills>\n");
    for s in skills {
        out.push_str(&format!(
            "<agent_skill><name>{}</name><description>{}</description><tool>{LOAD_SKILL}</tool></agent_skill>\n",
            s.name, s.description
        ));
    }
    out.push_str("</available_agent_skills>\nCall load_skill with a skill's name to read its instructions before using it.");
    Some(out)
}

/// The MCP servers the registered skills configure, as `(skill, server)` pairs in skill
/// order; none when the skills cannot be read (the store's own checks report that).
pub fn mcp_servers(store: &Store) -> Vec<(String, McpServerSpec)> {
    let Ok(skills) = store.custom_skills::<SkillDef>() else {
        return Vec::new();
    };
    skills
        .into_iter()
        .flat_map(|r| {
            let name = r.name.clone();
            r.definition
                .mcp_servers
                .into_iter()
                .map(move |m| (name.clone(), m))
        })
        .collect()
}

/// The tools, MCP servers and Agent Skills of an actor's skills (their union; the first
/// occurrence of a name wins).
///
/// # Errors
/// The first skill that does not resolve.
pub fn union(store: &Store, names: &[String]) -> Result<ResolvedSkill, SkillRegError> {
    let mut all = ResolvedSkill {
        name: names.join(", "),
        description: String::new(),
        kind: "custom".into(),
        includes: names.to_vec(),
        tools: Vec::new(),
        mcp_servers: Vec::new(),
        agent_skills: Vec::new(),
        conflicts: Vec::new(),
        origin: None,
    };
    for n in names {
        let s = resolve(store, n)?;
        for t in s.tools {
            if !all.tools.iter().any(|x| x.name == t.name) {
                all.tools.push(t);
            }
        }
        for m in s.mcp_servers {
            if !all.mcp_servers.iter().any(|(_, x)| x.name == m.1.name) {
                all.mcp_servers.push(m);
            }
        }
        for a in s.agent_skills {
            if !all.agent_skills.iter().any(|x| x.name == a.name) {
                all.agent_skills.push(a);
            }
        }
    }
    Ok(all)
}

/// The namespace discovered Agent Skills are listed under (`discovered/<name>`).
pub const DISCOVERED_NS: &str = "discovered";

/// The folder of a resource that holds its Agent Skills (searched when
/// `agent-skills-in-resources` is true).
pub const RESOURCE_SKILLS_DIR: &str = ".agents/skills";

/// An Agent Skill found by discovery (spec 18 "AgentSkillAdapter", `discover()`), with where.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Discovered {
    /// The skill.
    pub skill: AgentSkill,
    /// Where it was found: `agent-skill-dirs: <dir>` or `resource <name>: <dir>`.
    pub origin: String,
}

impl Discovered {
    /// As a skill of its own, `discovered/<name>`: `load_skill` and its script tools.
    pub fn resolved(&self) -> ResolvedSkill {
        let name = format!("{DISCOVERED_NS}/{}", self.skill.name);
        let mut tools: Vec<ResolvedTool> = self
            .skill
            .scripts
            .iter()
            .map(|s| discovered_script(&self.skill, s, &name))
            .collect();
        tools.push(load_skill_tool());
        ResolvedSkill {
            name,
            description: self.skill.description.clone(),
            kind: "discovered".into(),
            includes: Vec::new(),
            tools,
            mcp_servers: Vec::new(),
            agent_skills: vec![self.skill.clone()],
            conflicts: Vec::new(),
            origin: Some(self.origin.clone()),
        }
    }
}

/// The command tool of a discovered skill's script, logged under the skill `parent`.
pub fn discovered_script(skill: &AgentSkill, script: &str, parent: &str) -> ResolvedTool {
    let mut t = script_tool(skill, script, None);
    if let Some(e) = &mut t.external {
        e.skill = Some(parent.to_string());
    }
    t
}

/// The Agent Skill folders in `dir`: `dir` itself when it holds a `SKILL.md`, else each of its
/// subfolders that does, by folder name. A missing `dir` holds none; a folder whose
/// `SKILL.md` does not parse is returned among the problems (`path: why`) and skipped.
pub fn discover_in(dir: &Path) -> (Vec<AgentSkill>, Vec<String>) {
    let mut found = Vec::new();
    let mut problems = Vec::new();
    let mut folders: Vec<PathBuf> = if dir.join("SKILL.md").is_file() {
        vec![dir.to_path_buf()]
    } else {
        std::fs::read_dir(dir)
            .into_iter()
            .flatten()
            .flatten()
            .map(|e| e.path())
            .filter(|p| p.join("SKILL.md").is_file())
            .collect()
    };
    folders.sort();
    for f in folders {
        match load_agent_skill(&f) {
            Ok(s) => found.push(s),
            Err(e) => problems.push(e),
        }
    }
    (found, problems)
}

/// Every discoverable Agent Skill: those in the configured `dirs` (`agent-skill-dirs`), then
/// those in `.agents/skills/` of each `resources` entry (`(name, path)`; pass none unless
/// `agent-skills-in-resources` is true). The first skill of a name wins. Returns the skills
/// and the problems, in words: a configured directory that does not exist, a `SKILL.md` that
/// does not parse (skipped), a later skill of a name already found (skipped).
pub fn discover(
    dirs: &[PathBuf],
    resources: &[(String, PathBuf)],
) -> (Vec<Discovered>, Vec<String>) {
    let mut out: Vec<Discovered> = Vec::new();
    let mut problems: Vec<String> = dirs
        .iter()
        .filter(|d| !d.is_dir())
        .map(|d| format!("agent-skill-dirs: {} is not a directory", d.display()))
        .collect();
    let places = dirs
        .iter()
        .map(|d| (d.clone(), format!("agent-skill-dirs: {}", d.display())))
        .chain(resources.iter().map(|(name, root)| {
            let d = root.join(RESOURCE_SKILLS_DIR);
            let origin = format!("resource {name}: {}", d.display());
            (d, origin)
        }));
    let roots = dirs
        .iter()
        .map(|_| None)
        .chain(resources.iter().map(|(_, root)| Some(root.as_path())));
    for ((dir, origin), root) in places.zip(roots) {
        let (found, broken) = discover_in(&dir);
        problems.extend(
            broken
                .into_iter()
                .map(|p| format!("Agent Skill skipped: {p}")),
        );
        for mut skill in found {
            // A repository's skill is the repository's: a `SKILL.md`, a folder or a script
            // linked out of it would send the model (or run) a file the repository does not
            // hold.
            if let Some(root) = root {
                if let Some(why) = leaves(root, &skill) {
                    problems.push(format!(
                        "Agent Skill {} in {origin} skipped: {why}",
                        skill.name
                    ));
                    continue;
                }
                skill.scripts.retain(|script| {
                    let path = skill.dir.join("scripts").join(script);
                    let inside = within(root, &path);
                    if !inside {
                        problems.push(format!(
                            "Agent Skill {} in {origin}: script {script} skipped: it links out of the resource",
                            skill.name
                        ));
                    }
                    inside
                });
            }
            if let Some(first) = out.iter().find(|d| d.skill.name == skill.name) {
                problems.push(format!(
                    "Agent Skill {} in {origin} skipped: the one in {} has that name",
                    skill.name, first.origin
                ));
                continue;
            }
            out.push(Discovered {
                skill,
                origin: origin.clone(),
            });
        }
    }
    (out, problems)
}

/// Whether `path`, links resolved, lies beneath `root` (links resolved); a path that cannot
/// be resolved does not.
fn within(root: &Path, path: &Path) -> bool {
    match (std::fs::canonicalize(root), std::fs::canonicalize(path)) {
        (Ok(root), Ok(path)) => path.starts_with(root),
        _ => false,
    }
}

/// Why a skill found in resource `root` reaches out of it: its folder or its `SKILL.md` is a
/// link to somewhere else.
fn leaves(root: &Path, skill: &AgentSkill) -> Option<String> {
    if !within(root, &skill.dir) {
        return Some(format!(
            "its folder links out of the resource (to {})",
            skill.dir.display()
        ));
    }
    let file = skill.dir.join("SKILL.md");
    (!within(root, &file)).then(|| {
        let to = std::fs::canonicalize(&file).unwrap_or(file);
        format!("its SKILL.md links out of the resource (to {})", to.display())
    })
}

fn load_skill_tool() -> ResolvedTool {
    ResolvedTool {
        name: LOAD_SKILL.into(),
        description: load_skill_description(),
        source: ToolSource::AgentSkill,
        capability: ToolCapability::settle(&json!({"read_only": true, "idempotent": true}))
            .expect("valid"),
        from_skill: None,
        external: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn skill_md_front_matter_gives_name_description_and_body() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("scripts")).unwrap();
        std::fs::write(dir.path().join("scripts/count.sh"), "wc -l \"$@\"\n").unwrap();
        std::fs::write(
            dir.path().join("SKILL.md"),
            "---\nname: line-count\ndescription: Count lines of files\n---\n# How\nRun count.\n",
        )
        .unwrap();
        let s = load_agent_skill(dir.path()).unwrap();
        assert_eq!(
            (s.name.as_str(), s.description.as_str()),
            ("line-count", "Count lines of files")
        );
        assert_eq!(s.body, "# How\nRun count.");
        assert_eq!(s.scripts, ["count.sh"]);
        let t = script_tool(&s, "count.sh", None);
        assert_eq!(t.name, "line-count.count");
        std::fs::write(dir.path().join("SKILL.md"), "no front matter").unwrap();
        assert!(
            load_agent_skill(dir.path())
                .unwrap_err()
                .contains("front matter")
        );
    }

    #[test]
    fn a_resources_skill_linked_out_of_the_resource_is_skipped() {
        let root = tempfile::tempdir().unwrap();
        let outside = root.path().join("outside");
        folder(&outside.join("secret-skill"), "secret-skill");
        std::fs::write(outside.join("notes.md"), "---\nname: notes\ndescription: host notes\n---\nprivate\n").unwrap();
        std::fs::write(outside.join("run.sh"), "echo host\n").unwrap();
        let repo = root.path().join("repo");
        let skills = repo.join(RESOURCE_SKILLS_DIR);
        // SKILL.md itself a link out of the repository.
        std::fs::create_dir_all(skills.join("notes")).unwrap();
        std::os::unix::fs::symlink(outside.join("notes.md"), skills.join("notes/SKILL.md")).unwrap();
        // The whole folder a link out.
        std::os::unix::fs::symlink(outside.join("secret-skill"), skills.join("secret-skill")).unwrap();
        // A good skill whose one script links out.
        folder(&skills.join("good"), "good");
        std::fs::create_dir_all(skills.join("good/scripts")).unwrap();
        std::fs::write(skills.join("good/scripts/ok.sh"), "echo ok\n").unwrap();
        std::os::unix::fs::symlink(outside.join("run.sh"), skills.join("good/scripts/host.sh")).unwrap();
        let (found, problems) = discover(&[], &[("local/repo".into(), repo)]);
        let names: Vec<&str> = found.iter().map(|d| d.skill.name.as_str()).collect();
        assert_eq!(names, ["good"], "{problems:?}");
        assert_eq!(found[0].skill.scripts, ["ok.sh"], "{problems:?}");
        let all = problems.join("\n");
        assert!(all.contains("notes in resource local/repo") && all.contains("SKILL.md links out"), "{all}");
        assert!(all.contains("secret-skill") && all.contains("folder links out"), "{all}");
        assert!(all.contains("script host.sh skipped"), "{all}");
        // The same folders configured in `agent-skill-dirs` are the user's own: followed.
        let (mine, _) = discover(&[outside], &[]);
        assert_eq!(mine.len(), 1);
    }

    fn folder(dir: &Path, name: &str) {
        std::fs::create_dir_all(dir).unwrap();
        std::fs::write(
            dir.join("SKILL.md"),
            format!("---\nname: {name}\ndescription: about {name}\n---\nBody of {name}.\n"),
        )
        .unwrap();
    }

    #[test]
    fn discovery_finds_folders_one_level_down_first_name_winning_and_skips_broken_ones() {
        let root = tempfile::tempdir().unwrap();
        let dirs = root.path().join("dirs");
        folder(&dirs.join("b-skill"), "b-skill");
        folder(&dirs.join("a-skill"), "a-skill");
        std::fs::create_dir_all(dirs.join("broken")).unwrap();
        std::fs::write(dirs.join("broken/SKILL.md"), "no front matter").unwrap();
        std::fs::create_dir_all(dirs.join("plain")).unwrap();
        let single = root.path().join("single");
        folder(&single, "a-skill");
        let (found, problems) = discover_in(&dirs);
        let names: Vec<&str> = found.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, ["a-skill", "b-skill"]);
        assert_eq!(problems.len(), 1, "{problems:?}");
        assert!(problems[0].contains("broken"), "{problems:?}");
        // A directory that is itself a skill folder; the first of a name wins.
        let repo = root.path().join("repo");
        folder(&repo.join(RESOURCE_SKILLS_DIR).join("r"), "repo-skill");
        let (all, problems) = discover(
            &[dirs.clone(), single, root.path().join("missing")],
            &[("local/repo".into(), repo)],
        );
        assert_eq!(
            problems.len(),
            3,
            "broken, a-skill again, missing: {problems:?}"
        );
        assert!(
            problems
                .iter()
                .any(|p| p.contains("missing is not a directory"))
        );
        let got: Vec<(&str, &str)> = all
            .iter()
            .map(|d| (d.skill.name.as_str(), d.origin.as_str()))
            .collect();
        assert_eq!(got.len(), 3, "{got:?}");
        assert!(got[0].1.contains(&dirs.display().to_string()), "{got:?}");
        assert_eq!(got[2].0, "repo-skill");
        assert!(got[2].1.starts_with("resource local/repo: "), "{got:?}");
        let resolved = all[2].resolved();
        assert_eq!(resolved.name, "discovered/repo-skill");
        assert_eq!(resolved.kind, "discovered");
        assert!(resolved.tools.iter().any(|t| t.name == LOAD_SKILL));
    }
}
