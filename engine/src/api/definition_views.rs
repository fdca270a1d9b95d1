//! Definition reads (spec sections 09, 14, 16-19): the list and show of actions, actors,
//! automation profiles, tools and skills.
//!
//! One family of calls of the protocol ([`Request::Definition`]): its requests, its views,
//! how an [`Engine`] answers them and the typed calls on a [`Client`]. The views carry the
//! registries' own rows; each face renders them.

mod calls;

mod live_mcp;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::{ApiError, Engine};
use crate::config::Config;
use crate::domain::InvariantScope;
use crate::domain::action::Action;
use crate::domain::actor::ActorRef;
use crate::domain::invariant::Invariant;
use crate::registry::actors::{self, ActorRow};
use crate::registry::profiles::{self, GlobalDefault, Profile};
use crate::registry::tool_registration::{self, RegisterError};
use crate::skill_registry::{self, Discovered};
use crate::store::Store;

pub use crate::actors::graph::{DEFAULT_MAX_STEPS, GraphDef, NodeDef, NodeKind};
pub use crate::registry::actions::{ActionError, CreateRequest};
pub use crate::registry::actors::{ActorError, ActorType, Overrides};
pub use crate::registry::profiles::{FLAG_GROUPS, ProfileError, Usage};
pub use crate::registry::tool_registration::{AddSkill, AddTool};
pub use crate::skill_registry::{ResolvedSkill, ResolvedTool};
pub use crate::skills::SOURCES as SKILL_SOURCES;
pub use crate::store::tools::Registration;
pub use crate::tools::custom::{ToolCapability, ToolDef, ToolSource};

/// One call of this family.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(tag = "query", rename_all = "snake_case")]
pub enum DefinitionQuery {
    /// Every action, archived ones too, with the plans made from each.
    Actions,
    /// One action by name or id, with its invariants and history.
    Action {
        /// Name or id.
        action: String,
    },
    /// Custom actors, the built-ins and one row per provider.
    Actors,
    /// One actor (custom, built-in or `PROVIDER/MODEL`), with the actions naming it.
    Actor {
        /// The reference.
        name: String,
    },
    /// Every automation profile, built-in then custom.
    Profiles,
    /// One automation profile.
    Profile {
        /// Name.
        name: String,
    },
    /// A custom profile that may be removed, and who still names it as a default.
    ProfileUsage {
        /// Name.
        name: String,
        /// The global defaults in force on the asking side, as `(value, where it was set)`.
        globals: Vec<(String, String)>,
    },
    /// The built-in tools and the registered ones.
    Tools,
    /// One tool as `tool show` names it (a bare name that is no built-in means `local/NAME`).
    Tool {
        /// Name.
        name: String,
    },
    /// Whether a tool of that name is built in or registered.
    ToolKind {
        /// Name.
        name: String,
    },
    /// Every skill: built-in, registered and discovered, with the problems of discovery.
    Skills,
    /// One skill (registered, built-in or discovered) with the actors naming it.
    Skill {
        /// Name.
        name: String,
    },
    /// Every tool a skill provides, its MCP servers' live tools included.
    SkillTools {
        /// Name.
        name: String,
    },
    /// Whether a skill of that name is built in or registered.
    SkillKind {
        /// Name.
        name: String,
    },
}

impl DefinitionQuery {
    /// The call's name as the protocol spells it.
    pub fn name(&self) -> &'static str {
        match self {
            DefinitionQuery::Actions => "actions",
            DefinitionQuery::Action { .. } => "action",
            DefinitionQuery::Actors => "actors",
            DefinitionQuery::Actor { .. } => "actor",
            DefinitionQuery::Profiles => "profiles",
            DefinitionQuery::Profile { .. } => "profile",
            DefinitionQuery::ProfileUsage { .. } => "profile_usage",
            DefinitionQuery::Tools => "tools",
            DefinitionQuery::Tool { .. } => "tool",
            DefinitionQuery::ToolKind { .. } => "tool_kind",
            DefinitionQuery::Skills => "skills",
            DefinitionQuery::Skill { .. } => "skill",
            DefinitionQuery::SkillTools { .. } => "skill_tools",
            DefinitionQuery::SkillKind { .. } => "skill_kind",
        }
    }
}

/// The answer to a [`DefinitionQuery`], one variant per call.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(tag = "kind", content = "view", rename_all = "snake_case")]
pub enum DefinitionView {
    /// [`DefinitionQuery::Actions`].
    Actions(Vec<ActionRow>),
    /// [`DefinitionQuery::Action`].
    Action(Box<ActionDetail>),
    /// [`DefinitionQuery::Actors`].
    Actors(ActorList),
    /// [`DefinitionQuery::Actor`].
    Actor(Box<ActorDetail>),
    /// [`DefinitionQuery::Profiles`].
    Profiles(Vec<Profile>),
    /// [`DefinitionQuery::Profile`].
    Profile(Box<Profile>),
    /// [`DefinitionQuery::ProfileUsage`].
    ProfileUsage(Box<ProfileUsage>),
    /// [`DefinitionQuery::Tools`].
    Tools(ToolList),
    /// [`DefinitionQuery::Tool`].
    Tool(Box<ToolView>),
    /// [`DefinitionQuery::ToolKind`], [`DefinitionQuery::SkillKind`].
    Kind(Option<DefinitionKind>),
    /// [`DefinitionQuery::Skills`], [`DefinitionQuery::SkillTools`] (one skill).
    Skills(SkillList),
    /// [`DefinitionQuery::Skill`].
    Skill(Box<SkillDetail>),
}

/// One action of `action list` with the number of plans made from it.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ActionRow {
    /// The action.
    pub action: Action,
    /// Plans made from it.
    pub plans: u64,
}

/// Everything `action show` says about one action.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ActionDetail {
    /// The action.
    pub action: Action,
    /// Its own invariants (action scope, not copied into a plan).
    pub invariants: Vec<Invariant>,
    /// Plans made from it.
    pub plans_created: u64,
    /// Of those, applied.
    pub plans_applied: u64,
    /// Of those, errored.
    pub plans_errored: u64,
}

/// `actor list`: the rows and the number of configured providers.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ActorList {
    /// Custom actors, built-ins, one row per provider.
    pub actors: Vec<ActorRow>,
    /// Configured providers.
    pub providers: usize,
}

/// Everything `actor show` says about one actor.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ActorDetail {
    /// What the reference resolved to.
    pub actor: ActorRef,
    /// Actions that name a custom actor (empty for the others).
    pub referenced_by_actions: Vec<String>,
}

/// A custom profile about to be removed and who still names it.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ProfileUsage {
    /// The profile.
    pub profile: Profile,
    /// Who names it as a default.
    pub usage: Usage,
}

/// A built-in tool as the registries show it.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct BuiltinTool {
    /// Bare name.
    pub name: String,
    /// What it does.
    pub description: String,
    /// Always `builtin`.
    pub source: String,
    /// Its group (`files`, `git`, ...).
    pub group: String,
    /// The built-in skills that offer it.
    pub skills: Vec<String>,
    /// Its fixed capability.
    pub capability: BuiltinCapability,
}

/// A built-in tool's fixed capability, as it is printed (`unsafe` spelt as in spec 18).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct BuiltinCapability {
    /// Only reads.
    pub read_only: bool,
    /// Changes the sandbox.
    pub writes: bool,
    /// Its effects can be rolled back.
    pub checkpointable: bool,
    /// `file` or `snapshot`.
    pub checkpoint_scope: Option<String>,
    /// Calling it twice is calling it once.
    pub idempotent: bool,
    /// Not confined by the kernel.
    #[serde(rename = "unsafe")]
    pub is_unsafe: bool,
    /// Effects beyond the sandbox's files.
    pub side_effects: Vec<String>,
}

impl From<&BuiltinCapability> for ToolCapability {
    fn from(c: &BuiltinCapability) -> Self {
        ToolCapability {
            read_only: c.read_only,
            writes: c.writes,
            write_scope: None,
            checkpointable: c.checkpointable,
            checkpoint_scope: c.checkpoint_scope.clone(),
            idempotent: c.idempotent,
            side_effects: c.side_effects.clone(),
            required_permissions: Vec::new(),
            cost_profile: None,
            human_approval_required: false,
            open_world: false,
            is_unsafe: c.is_unsafe,
        }
    }
}

impl BuiltinTool {
    fn of(t: &dyn crate::tools::Tool) -> Self {
        let c = t.capability();
        BuiltinTool {
            name: t.name().to_string(),
            description: t.description().to_string(),
            source: "builtin".into(),
            group: t.group().as_str().to_string(),
            skills: crate::skills::skills_with_tool(t.name())
                .into_iter()
                .map(str::to_string)
                .collect(),
            capability: BuiltinCapability {
                read_only: c.read_only,
                writes: c.writes,
                checkpointable: c.checkpointable,
                checkpoint_scope: c.checkpoint_scope.map(str::to_string),
                idempotent: c.idempotent,
                is_unsafe: c.is_unsafe,
                side_effects: c.side_effects.iter().map(|s| s.to_string()).collect(),
            },
        }
    }
}

/// `tool list`: the built-in tools, then the registered ones.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ToolList {
    /// Built in.
    pub builtins: Vec<BuiltinTool>,
    /// Registered.
    pub registered: Vec<Registration<ToolDef>>,
}

/// What `tool show NAME` found.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(tag = "found", rename_all = "snake_case")]
pub enum ToolView {
    /// A built-in tool with its input schema.
    Builtin {
        /// The tool.
        tool: Box<BuiltinTool>,
        /// Its input JSON Schema.
        input_schema: Value,
    },
    /// A registered tool with the skills that name it.
    Registered {
        /// The registration.
        tool: Box<Registration<ToolDef>>,
        /// Custom skills naming it.
        skills: Vec<String>,
    },
    /// No such tool.
    Unknown {
        /// The name asked for was namespaced, so only registered tools were looked at.
        namespaced: bool,
        /// The nearest known name, if any is near.
        nearest: Option<String>,
    },
}

/// Whether a name is a built-in or a registered definition.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum DefinitionKind {
    /// Built in.
    Builtin,
    /// Registered.
    Registered,
}

/// Skills with the problems met finding them.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct SkillList {
    /// The skills.
    pub skills: Vec<ResolvedSkill>,
    /// Problems of discovery or of the MCP servers, in words.
    pub problems: Vec<String>,
}

/// Everything `skill show` says about one skill.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct SkillDetail {
    /// The skill.
    pub skill: ResolvedSkill,
    /// Custom actors naming it in `skills:`.
    pub actors: Vec<String>,
}

/// Answers `request` on `engine`.
///
/// # Errors
/// [`ApiError`] as each call documents.
pub(crate) fn answer(
    engine: &Engine,
    request: DefinitionQuery,
) -> Result<DefinitionView, ApiError> {
    let store = engine.store()?;
    Ok(match request {
        DefinitionQuery::Actions => DefinitionView::Actions(actions(&store)?),
        DefinitionQuery::Action { action } => {
            DefinitionView::Action(Box::new(action_detail(&store, &action)?))
        }
        DefinitionQuery::Actors => DefinitionView::Actors(ActorList {
            actors: actors::list(&store, &engine.settings.providers)?,
            providers: engine.settings.providers.len(),
        }),
        DefinitionQuery::Actor { name } => {
            DefinitionView::Actor(Box::new(actor_detail(engine, &store, &name)?))
        }
        DefinitionQuery::Profiles => DefinitionView::Profiles(profiles::list(&store)?),
        DefinitionQuery::Profile { name } => {
            DefinitionView::Profile(Box::new(profiles::find(&store, &name)?))
        }
        DefinitionQuery::ProfileUsage { name, globals } => {
            DefinitionView::ProfileUsage(Box::new(profile_usage(&store, &name, &globals)?))
        }
        DefinitionQuery::Tools => DefinitionView::Tools(ToolList {
            builtins: crate::tools::builtins()
                .iter()
                .map(|t| BuiltinTool::of(t.as_ref()))
                .collect(),
            registered: store.registered_tools::<ToolDef>()?,
        }),
        DefinitionQuery::Tool { name } => DefinitionView::Tool(Box::new(tool(&store, &name)?)),
        DefinitionQuery::ToolKind { name } => DefinitionView::Kind(tool_kind(&store, &name)?),
        DefinitionQuery::Skills => DefinitionView::Skills(skills(engine, &store)?),
        DefinitionQuery::Skill { name } => {
            DefinitionView::Skill(Box::new(skill_detail(engine, &store, &name)?))
        }
        DefinitionQuery::SkillTools { name } => {
            let mut skill = resolve_any(engine, &store, &name)?;
            let (live, problems) = live_mcp::tools(&skill);
            skill.tools.extend(live);
            DefinitionView::Skills(SkillList {
                skills: vec![skill],
                problems,
            })
        }
        DefinitionQuery::SkillKind { name } => DefinitionView::Kind(skill_kind(&store, &name)?),
    })
}

fn actions(store: &Store) -> Result<Vec<ActionRow>, ApiError> {
    store
        .actions()?
        .into_iter()
        .map(|action| {
            let (plans, _, _) = store.action_plan_counts(&action.action_id)?;
            Ok(ActionRow { action, plans })
        })
        .collect()
}

fn action_detail(store: &Store, input: &str) -> Result<ActionDetail, ApiError> {
    let action = crate::registry::actions::find(store, input)?;
    let invariants = store
        .invariants()?
        .into_iter()
        .filter(|i| {
            i.scope == InvariantScope::Action
                && i.plan_id.is_none()
                && i.action.as_deref() == Some(action.name.as_str())
        })
        .collect();
    let (plans_created, plans_applied, plans_errored) =
        store.action_plan_counts(&action.action_id)?;
    Ok(ActionDetail {
        action,
        invariants,
        plans_created,
        plans_applied,
        plans_errored,
    })
}

fn actor_detail(engine: &Engine, store: &Store, name: &str) -> Result<ActorDetail, ApiError> {
    let actor = actors::resolve(store, &engine.settings.providers, name)?;
    let referenced_by_actions = match &actor {
        ActorRef::Custom { actor } => store.actions_referencing_actor(&actor.name)?,
        _ => Vec::new(),
    };
    Ok(ActorDetail {
        actor,
        referenced_by_actions,
    })
}

fn profile_usage(
    store: &Store,
    name: &str,
    globals: &[(String, String)],
) -> Result<ProfileUsage, ApiError> {
    let full = profiles::parse_name(name)?;
    if crate::domain::name::is_builtin_profile(&full) {
        return Err(ProfileError::BuiltIn(full).into());
    }
    let profile = profiles::find(store, name)?;
    let globals: Vec<GlobalDefault<'_>> = globals
        .iter()
        .map(|(value, origin)| GlobalDefault { value, origin })
        .collect();
    let usage = profiles::usage(store, &profile.name, &globals)?;
    Ok(ProfileUsage { profile, usage })
}

fn tool(store: &Store, name: &str) -> Result<ToolView, ApiError> {
    if let Some(t) = crate::tools::builtin(name) {
        return Ok(ToolView::Builtin {
            input_schema: t.input_schema(),
            tool: Box::new(BuiltinTool::of(t.as_ref())),
        });
    }
    // A bare name that is no built-in means `local/NAME`, as in every registry.
    let namespaced = name.contains('/');
    let full = if namespaced {
        name.to_string()
    } else {
        format!("local/{name}")
    };
    if let Some(reg) = store.registered_tool::<ToolDef>(&full)? {
        let skills = tool_registration::skills_naming_tool(store, &full)?;
        return Ok(ToolView::Registered {
            tool: Box::new(reg),
            skills,
        });
    }
    let nearest = if namespaced {
        let names: Vec<String> = store
            .registered_tools::<ToolDef>()?
            .into_iter()
            .map(|r| r.name)
            .collect();
        crate::config::nearest(name, names.iter().map(String::as_str))
    } else {
        let builtins = crate::tools::builtins();
        crate::config::nearest(name, builtins.iter().map(|t| t.name()))
    };
    Ok(ToolView::Unknown {
        namespaced,
        nearest,
    })
}

fn tool_kind(store: &Store, name: &str) -> Result<Option<DefinitionKind>, ApiError> {
    Ok(if crate::tools::builtin(name).is_some() {
        Some(DefinitionKind::Builtin)
    } else if store.registered_tool::<ToolDef>(name)?.is_some() {
        Some(DefinitionKind::Registered)
    } else {
        None
    })
}

fn skill_kind(store: &Store, name: &str) -> Result<Option<DefinitionKind>, ApiError> {
    Ok(if crate::skills::lookup(name).is_ok() {
        Some(DefinitionKind::Builtin)
    } else if store
        .custom_skill::<skill_registry::SkillDef>(name)?
        .is_some()
    {
        Some(DefinitionKind::Registered)
    } else {
        None
    })
}

/// Every skill (built-in, registered, discovered), with the problems of discovery.
fn skills(engine: &Engine, store: &Store) -> Result<SkillList, ApiError> {
    let mut all: Vec<ResolvedSkill> = Vec::new();
    for b in crate::skills::builtin_names() {
        all.push(skill_registry::resolve(store, b).map_err(RegisterError::from)?);
    }
    for r in store.custom_skills::<skill_registry::SkillDef>()? {
        match skill_registry::resolve(store, &r.name) {
            Ok(s) => all.push(s),
            Err(e) => tracing::warn!(skill = %r.name, error = %e, "skill does not resolve"),
        }
    }
    let (found, problems) = discovered(engine, store)?;
    all.extend(found.iter().map(Discovered::resolved));
    Ok(SkillList {
        skills: all,
        problems,
    })
}

fn skill_detail(engine: &Engine, store: &Store, name: &str) -> Result<SkillDetail, ApiError> {
    let skill = resolve_any(engine, store, name)?;
    let actors = store
        .actors()?
        .into_iter()
        .filter(|a| a.definition.skills.iter().any(|s| s == &skill.name))
        .map(|a| a.name)
        .collect();
    Ok(SkillDetail { skill, actors })
}

/// The configuration of the data directory's `config.toml` (the defaults when it is missing).
fn config(engine: &Engine) -> Result<Config, ApiError> {
    Config::load(&engine.paths().config_path).map_err(|e| ApiError::InvalidInput {
        message: e.to_string(),
    })
}

/// The Agent Skills discovered in `agent-skill-dirs` and, when `agent-skills-in-resources`
/// is true, in `.agents/skills/` of every registered resource with a path; with the
/// problems found on the way.
fn discovered(engine: &Engine, store: &Store) -> Result<(Vec<Discovered>, Vec<String>), ApiError> {
    let config = config(engine)?;
    let resources: Vec<(String, std::path::PathBuf)> = if config.agent_skills_in_resources() {
        store
            .resources()?
            .into_iter()
            .filter_map(|r| {
                let path = r.properties.get("path")?.as_str()?.to_string();
                Some((r.name, std::path::PathBuf::from(path)))
            })
            .collect()
    } else {
        Vec::new()
    };
    Ok(skill_registry::discover(
        &config.agent_skill_dirs(),
        &resources,
    ))
}

/// A registered or built-in skill, else a discovered one (`discovered/<name>`).
fn resolve_any(engine: &Engine, store: &Store, name: &str) -> Result<ResolvedSkill, ApiError> {
    match skill_registry::resolve(store, name) {
        Ok(s) => Ok(s),
        Err(e) => discovered(engine, store)?
            .0
            .iter()
            .map(Discovered::resolved)
            .find(|d| d.name == name)
            .ok_or_else(|| RegisterError::from(e).into()),
    }
}

/// The error for a view that does not answer the call `asked`.
fn unexpected(asked: &str, got: &DefinitionView) -> ApiError {
    let got = serde_json::to_value(got)
        .ok()
        .and_then(|v| v.get("kind").and_then(Value::as_str).map(str::to_string))
        .unwrap_or_default();
    ApiError::Protocol {
        message: format!("the definition call `{asked}` was answered with the view `{got}`"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::Settings;
    use crate::paths::Paths;

    fn engine(dir: &std::path::Path) -> Engine {
        let paths = Paths::resolve(Some(dir.join("data")), Some(dir.join("config.toml"))).unwrap();
        std::fs::create_dir_all(&paths.data_dir).unwrap();
        Engine::new(paths, Settings::default())
    }

    /// The view as it crosses the protocol, read back and written again.
    fn crossed(view: &DefinitionView) -> (Value, Value) {
        let sent = serde_json::to_value(view).unwrap();
        let back: DefinitionView = serde_json::from_value(sent.clone()).unwrap();
        (sent, serde_json::to_value(back).unwrap())
    }

    #[test]
    fn every_list_view_crosses_the_protocol_unchanged() {
        let dir = tempfile::tempdir().unwrap();
        let engine = engine(dir.path());
        for q in [
            DefinitionQuery::Actions,
            DefinitionQuery::Actors,
            DefinitionQuery::Profiles,
            DefinitionQuery::Tools,
            DefinitionQuery::Skills,
            DefinitionQuery::Tool {
                name: "read_file".into(),
            },
            DefinitionQuery::Skill {
                name: "file_operations".into(),
            },
        ] {
            let name = q.name();
            let view = answer(&engine, q).unwrap_or_else(|e| panic!("{name}: {e}"));
            let (sent, again) = crossed(&view);
            assert_eq!(sent, again, "{name}");
        }
    }

    #[test]
    fn a_bare_unknown_tool_names_the_nearest_built_in() {
        let dir = tempfile::tempdir().unwrap();
        let engine = engine(dir.path());
        let view = answer(
            &engine,
            DefinitionQuery::Tool {
                name: "read_fil".into(),
            },
        )
        .unwrap();
        let DefinitionView::Tool(tool) = view else {
            panic!("a tool call answers with a tool view");
        };
        let ToolView::Unknown {
            namespaced,
            nearest,
        } = *tool
        else {
            panic!("read_fil is no tool: {tool:?}");
        };
        assert!(!namespaced);
        assert_eq!(nearest.as_deref(), Some("read_file"));
    }
}
