//! `tool add|remove` and `skill add|remove` (spec sections 05, 06, 18, 19): read the YAML (or
//! build the definition from flags), validate it completely, then store it in one write.
//! Nothing is stored when anything is wrong.

use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::domain::name::QualifiedName;
use crate::registry::yaml::{self, YamlError};
use crate::skill_registry::{
    self, AgentSkillRef, IncludeRef, ResolvedSkill, SkillDef, SkillFile, SkillRegError, ToolRef,
};
use crate::store::tools::Registration;
use crate::store::{Store, StoreError};
use crate::tools::custom::{McpServerSpec, ToolDef, ToolFile, ToolSource};

/// Why a registration failed.
#[derive(Debug, thiserror::Error)]
pub enum RegisterError {
    /// The YAML does not parse or has wrong fields.
    #[error(transparent)]
    Yaml(#[from] YamlError),
    /// A field is invalid.
    #[error("{field}: {message}")]
    Invalid {
        /// The field or flag.
        field: String,
        /// What is wrong.
        message: String,
    },
    /// The name exists and `--update` was not given, or it is still referenced.
    #[error("{0}")]
    Conflict(String),
    /// No such tool or skill.
    #[error("{0}")]
    NotFound(String),
    /// A skill problem (unknown tool or include, cycle, override).
    #[error(transparent)]
    Skill(#[from] SkillRegError),
    /// The database failed.
    #[error(transparent)]
    Store(#[from] StoreError),
}

fn invalid(field: impl Into<String>, message: impl Into<String>) -> RegisterError {
    RegisterError::Invalid {
        field: field.into(),
        message: message.into(),
    }
}

/// What `tool add` was given.
#[derive(Debug, Clone, Default, serde::Serialize, serde::Deserialize, schemars::JsonSchema)]
pub struct AddTool {
    /// `-c FILE`.
    pub config: Option<PathBuf>,
    /// `NAME` (overrides the file's).
    pub name: Option<String>,
    /// `-d`.
    pub description: Option<String>,
    /// `--update`.
    pub update: bool,
    /// `--source`.
    pub source: Option<String>,
    /// `--input-schema JSON`.
    pub input_schema: Option<String>,
    /// `--code` (a script) .
    pub code: Option<String>,
    /// `--writes` / `--no-writes`.
    pub writes: Option<bool>,
    /// `--checkpointable` / `--no-checkpointable`.
    pub checkpointable: Option<bool>,
    /// The text of `config`, read on a client and sent to a server (`None`: read it here).
    #[serde(default)]
    pub config_text: Option<String>,
}

fn check_name(name: &str, what: &str) -> Result<String, RegisterError> {
    let q =
        QualifiedName::parse(name).map_err(|e| invalid("NAME", format!("{what} `{name}`: {e}")))?;
    if !name.contains('/') || q.is_builtin() {
        return Err(invalid(
            "NAME",
            format!(
                "{what} `{name}` needs a namespace such as local/{name} (bare names are built-ins)"
            ),
        ));
    }
    Ok(name.to_string())
}

fn base_dir(path: &Path) -> Option<String> {
    let dir = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    std::fs::canonicalize(dir)
        .ok()
        .map(|d| d.display().to_string())
}

/// Registers a tool.
///
/// # Errors
/// [`RegisterError`]: YAML, invalid fields (schema, capability, command), duplicate without
/// `update`.
pub fn add_tool(
    store: &mut Store,
    input: &AddTool,
) -> Result<Registration<ToolDef>, RegisterError> {
    let (mut def, config_path, hash) = match &input.config {
        Some(path) => {
            let (file, text): (ToolFile, String) =
                yaml::load_given(path, input.config_text.as_deref())?;
            let mut def = file.tool;
            def.base_dir = base_dir(path);
            (
                def,
                Some(yaml::stored_path(path)),
                Some(crate::registry::actors::fingerprint(text.as_bytes())),
            )
        }
        None => {
            let empty: ToolDef = serde_json::from_value(serde_json::json!({})).expect("defaults");
            (empty, None, None)
        }
    };
    if let Some(n) = &input.name {
        def.name = Some(n.clone());
    }
    if let Some(d) = &input.description {
        def.description.clone_from(d);
    }
    if let Some(s) = &input.source {
        def.source = ToolSource::parse(s).ok_or_else(|| {
            invalid(
                "--source",
                format!("`{s}` is not a tool source; use command, mcp or agent_skill"),
            )
        })?;
    }
    if let Some(schema) = &input.input_schema {
        def.input_schema = serde_json::from_str(schema)
            .map_err(|e| invalid("--input-schema", format!("is not JSON: {e}")))?;
    }
    if let Some(code) = &input.code {
        def.code = Some(code.clone());
        def.command = None;
    }
    let mut cap = def.capability.as_object().cloned().unwrap_or_default();
    if let Some(w) = input.writes {
        cap.insert("writes".into(), Value::Bool(w));
        cap.insert("read_only".into(), Value::Bool(!w));
    }
    if let Some(c) = input.checkpointable {
        cap.insert("checkpointable".into(), Value::Bool(c));
    }
    def.capability = Value::Object(cap);
    let name = def.name.clone().ok_or_else(|| {
        invalid(
            "tool.name",
            "is required: give `name:` in the file or NAME on the command line",
        )
    })?;
    let name = check_name(&name, "tool")?;
    def.check("tool").map_err(|e| invalid(e.field, e.message))?;
    for (slot, s) in &def.resources {
        if let Some(r) = &s.bind
            && store.resource_by_name(r)?.is_none()
        {
            return Err(invalid(
                format!("tool.resources.{slot}.bind"),
                format!(
                    "resource `{r}` is not registered (static bindings are checked at registration)"
                ),
            ));
        }
    }
    let existing = store.registered_tool::<ToolDef>(&name)?;
    if existing.is_some() && !input.update {
        return Err(RegisterError::Conflict(format!(
            "tool {name} is already registered; pass --update to replace it"
        )));
    }
    let now = jiff::Timestamp::now();
    let reg = Registration {
        name: name.clone(),
        definition: def.clone(),
        config_path,
        config_hash: hash,
        created_at: existing.map_or(now, |e| e.created_at),
        updated_at: now,
    };
    store.upsert_tool(def.source.as_str(), &reg)?;
    Ok(reg)
}

/// The custom skills that name `tool` directly.
///
/// # Errors
/// Store errors.
pub fn skills_naming_tool(store: &Store, tool: &str) -> Result<Vec<String>, RegisterError> {
    Ok(store
        .custom_skills::<SkillDef>()?
        .into_iter()
        .filter(|s| {
            s.definition.tools.iter().any(|r| match r {
                ToolRef::Name(n) | ToolRef::Full { name: n, .. } => n == tool,
            })
        })
        .map(|s| s.name)
        .collect())
}

/// Removes a registered tool, refusing while a skill names it.
///
/// # Errors
/// [`RegisterError::NotFound`], [`RegisterError::Conflict`] naming the skills.
pub fn remove_tool(store: &mut Store, name: &str) -> Result<Registration<ToolDef>, RegisterError> {
    let reg = store
        .registered_tool::<ToolDef>(name)?
        .ok_or_else(|| RegisterError::NotFound(format!("tool `{name}` is not registered")))?;
    // A bare name found `local/NAME`: what follows acts on the registered name.
    let name = reg.name.as_str();
    let users = skills_naming_tool(store, name)?;
    if !users.is_empty() {
        return Err(RegisterError::Conflict(format!(
            "tool {name} is named by skill(s) {}; remove it from their `tools:` (skill add --update) first",
            users.join(", ")
        )));
    }
    store.delete_tool(name)?;
    Ok(reg)
}

/// What `skill add` was given.
#[derive(Debug, Clone, Default, serde::Serialize, serde::Deserialize, schemars::JsonSchema)]
pub struct AddSkill {
    /// `-c FILE`.
    pub config: Option<PathBuf>,
    /// `NAME`.
    pub name: Option<String>,
    /// `-d`.
    pub description: Option<String>,
    /// `--update`.
    pub update: bool,
    /// `--tool` (repeatable).
    pub tools: Vec<String>,
    /// `--include-skill` (repeatable).
    pub includes: Vec<String>,
    /// `--mcp-server NAME=COMMAND|URL` (repeatable).
    pub mcp_servers: Vec<String>,
    /// `--agent-skill DIR`.
    pub agent_skill: Option<PathBuf>,
    /// The text of `config`, read on a client and sent to a server (`None`: read it here).
    #[serde(default)]
    pub config_text: Option<String>,
}

/// Registers a skill after flattening it (unknown tools and includes, cycles and bad
/// overrides are refused).
///
/// # Errors
/// [`RegisterError`].
pub fn add_skill(
    store: &mut Store,
    input: &AddSkill,
) -> Result<(Registration<SkillDef>, ResolvedSkill), RegisterError> {
    let (mut def, config_path, hash) = match &input.config {
        Some(path) => {
            let (file, text): (SkillFile, String) =
                yaml::load_given(path, input.config_text.as_deref())?;
            let mut def = file.skill;
            def.base_dir = base_dir(path);
            (
                def,
                Some(yaml::stored_path(path)),
                Some(crate::registry::actors::fingerprint(text.as_bytes())),
            )
        }
        None => (SkillDef::default(), None, None),
    };
    if let Some(dir) = &input.agent_skill {
        let skill =
            skill_registry::load_agent_skill(dir).map_err(|m| invalid("--agent-skill", m))?;
        if def.name.is_none() && input.name.is_none() {
            def.name = Some(format!("local/{}", skill.name));
        }
        if def.description.is_empty() {
            def.description.clone_from(&skill.description);
        }
        def.agent_skills.push(AgentSkillRef {
            path: skill.dir.display().to_string(),
            sandbox_policy: None,
        });
    }
    if let Some(n) = &input.name {
        def.name = Some(n.clone());
    }
    if let Some(d) = &input.description {
        def.description.clone_from(d);
    }
    def.tools
        .extend(input.tools.iter().cloned().map(ToolRef::Name));
    def.includes
        .extend(input.includes.iter().cloned().map(IncludeRef::Name));
    for m in &input.mcp_servers {
        let spec = McpServerSpec::parse_flag(m).map_err(|e| invalid("--mcp-server", e))?;
        spec.check().map_err(|e| invalid("--mcp-server", e))?;
        def.mcp_servers.push(spec);
    }
    let name = def.name.clone().ok_or_else(|| {
        invalid(
            "skill.name",
            "is required: give `name:` in the file or NAME on the command line",
        )
    })?;
    let name = check_name(&name, "skill")?;
    if def.tools.is_empty()
        && def.includes.is_empty()
        && def.builtins.is_empty()
        && def.anonymous_tools.is_empty()
        && def.mcp_servers.is_empty()
        && def.agent_skills.is_empty()
    {
        return Err(invalid(
            "skill",
            "a skill needs tools: give tools, includes, builtins, anonymous_tools, mcp_servers or agent_skills (or --tool, --include-skill, --mcp-server, --agent-skill)",
        ));
    }
    if crate::skills::lookup(&name).is_ok() {
        return Err(RegisterError::Conflict(format!(
            "`{name}` is a built-in skill"
        )));
    }
    let mut names = std::collections::HashSet::new();
    for m in &def.mcp_servers {
        if !names.insert(m.name.clone()) {
            return Err(invalid(
                "skill.mcp_servers",
                format!(
                    "two servers are named `{}`; tools are offered as <server>.<tool>, so names must differ",
                    m.name
                ),
            ));
        }
    }
    let existing = store.custom_skill::<SkillDef>(&name)?;
    if existing.is_some() && !input.update {
        return Err(RegisterError::Conflict(format!(
            "skill {name} is already registered; pass --update to replace it"
        )));
    }
    // Flattening resolves every include from the store, so an update that would close a
    // cycle (A includes B, B includes A) is refused here, naming it.
    let resolved = skill_registry::flatten_def(store, &name, &def, &mut Vec::new())?;
    let now = jiff::Timestamp::now();
    let reg = Registration {
        name: name.clone(),
        definition: def,
        config_path,
        config_hash: hash,
        created_at: existing.map_or(now, |e| e.created_at),
        updated_at: now,
    };
    store.upsert_skill(&reg)?;
    Ok((reg, resolved))
}

fn includes(def: &SkillDef, name: &str) -> bool {
    def.includes.iter().any(|i| match i {
        IncludeRef::Name(n) | IncludeRef::Full { name: n, .. } => n == name,
    })
}

/// Removes a custom skill, refusing while another skill includes it. Returns the actors that
/// still name it.
///
/// # Errors
/// [`RegisterError::NotFound`], [`RegisterError::Conflict`].
pub fn remove_skill(
    store: &mut Store,
    name: &str,
) -> Result<(Registration<SkillDef>, Vec<String>), RegisterError> {
    if crate::skills::lookup(name).is_ok() {
        return Err(RegisterError::Conflict(format!(
            "`{name}` is a built-in skill and cannot be removed"
        )));
    }
    let reg = store
        .custom_skill::<SkillDef>(name)?
        .ok_or_else(|| RegisterError::NotFound(format!("skill `{name}` is not registered")))?;
    // A bare name found `local/NAME`: what follows acts on the registered name.
    let name = reg.name.clone();
    let name = name.as_str();
    let parents: Vec<String> = store
        .custom_skills::<SkillDef>()?
        .into_iter()
        .filter(|s| includes(&s.definition, name))
        .map(|s| s.name)
        .collect();
    if !parents.is_empty() {
        return Err(RegisterError::Conflict(format!(
            "skill {name} is included by {}; remove it from their `includes:` first",
            parents.join(", ")
        )));
    }
    let actors: Vec<String> = store
        .actors()?
        .into_iter()
        .filter(|a| a.definition.skills.iter().any(|s| s == name))
        .map(|a| a.name)
        .collect();
    store.delete_skill(name)?;
    Ok((reg, actors))
}
