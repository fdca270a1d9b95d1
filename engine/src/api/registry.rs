//! Registry changes through the API (spec sections 09, 14-19, 23 and 25): one request type per
//! change, gathered in [`RegistryOp`] (carried by [`super::Op::Registry`]) with its result in
//! [`RegistryOutcome`]. [`Engine::change`] runs one request and returns its own result type, so
//! a face that knows what it asked for needs no match on the outcome.
//!
//! Every change writes a `registry_changed` event in the transaction that changes the registry
//! (the store does it, so no path can forget it); a change that cancels plans (a forced project
//! delete) writes their events in that transaction too.

pub(super) mod index_ops;

use std::collections::BTreeMap;
use std::path::PathBuf;

use super::{ApiError, Engine};
use crate::context::policy::{self, ContextPolicy};
use crate::domain::{ActionState, Id, Plan};
use crate::registry::custom_types::{self, CustomType, TypeAdded, TypeError, TypeOptions};
use crate::registry::invariants::{self, Invariant, InvariantError, Targets};
use crate::registry::projects::{self, LinkedResource, Project, ProjectError, Validation};
use crate::registry::resources::{self, AddArgs, RemovalPlan, Resource, ResourceError};
use crate::registry::tool_registration::{self as tools, AddSkill, AddTool, RegisterError};
use crate::registry::{actions, actors, profiles};
use crate::skill_registry::{ResolvedSkill, SkillDef};
use crate::store::Store;
use crate::store::tools::Registration;
use crate::tools::custom::ToolDef;
use index_ops::{BuildIndex, IndexOutcome, IndexRemoved, RemoveIndex};

/// Why a registry change failed: the registry's own error, unchanged, so a face renders it
/// with the hints it knows for that registry.
#[derive(Debug, thiserror::Error)]
pub enum RegistryError {
    /// Resources.
    #[error(transparent)]
    Resource(#[from] ResourceError),
    /// Projects, their links and validations.
    #[error(transparent)]
    Project(#[from] ProjectError),
    /// Actions.
    #[error(transparent)]
    Action(#[from] actions::ActionError),
    /// Actors.
    #[error(transparent)]
    Actor(#[from] actors::ActorError),
    /// Invariants.
    #[error(transparent)]
    Invariant(#[from] InvariantError),
    /// Automation profiles.
    #[error(transparent)]
    Profile(#[from] profiles::ProfileError),
    /// Tools and skills.
    #[error(transparent)]
    Register(#[from] RegisterError),
    /// Custom resource types.
    #[error(transparent)]
    Type(#[from] TypeError),
}

/// Each registry's error is an [`ApiError::Registry`], so a change's `?` needs no mapping.
macro_rules! into_api_error {
    ($($t:ty),+) => {
        $(impl From<$t> for ApiError {
            fn from(e: $t) -> Self {
                RegistryError::from(e).into()
            }
        })+
    };
}

into_api_error!(
    ResourceError,
    ProjectError,
    actions::ActionError,
    actors::ActorError,
    InvariantError,
    profiles::ProfileError,
    RegisterError,
    TypeError
);

/// One registry change: a request that [`Engine::change`] runs on a fresh connection.
pub trait RegistryChange: Into<RegistryOp> {
    /// What the change returns.
    type Output;

    /// Makes the change.
    ///
    /// # Errors
    /// [`ApiError::Registry`] with the registry's error; [`ApiError::Store`].
    fn apply(self, engine: &Engine, store: &mut Store) -> Result<Self::Output, ApiError>;
}

/// Takes a change's own result out of the [`RegistryOutcome`] a transport carried back.
pub trait TakeOutcome: RegistryChange {
    /// The result, or the name of the other change whose outcome this is.
    ///
    /// # Errors
    /// The other change's name.
    fn take(outcome: RegistryOutcome) -> Result<Self::Output, &'static str>;
}

impl Engine {
    /// Runs one registry change and returns its result.
    ///
    /// # Errors
    /// [`ApiError::Registry`] with the registry's error; [`ApiError::Store`] when the
    /// database cannot be opened.
    pub fn change<C: RegistryChange>(&self, change: C) -> Result<C::Output, ApiError> {
        let mut store = self.store()?;
        change.apply(self, &mut store)
    }

    fn provider_names(&self) -> Vec<String> {
        self.settings
            .providers
            .iter()
            .map(|p| p.name.clone())
            .collect()
    }
}

macro_rules! registry_changes {
    ($($(#[$doc:meta])* $variant:ident($req:ident) -> $out:ty;)+) => {
        /// A registry change (one variant per change, each carrying its request).
        #[derive(Debug, Clone, serde::Serialize, serde::Deserialize, schemars::JsonSchema)]
        #[serde(tag = "change", content = "request", rename_all = "snake_case")]
        pub enum RegistryOp {
            $($(#[$doc])* $variant($req),)+
        }

        /// What a [`RegistryOp`] did, one variant per change (each face renders its own;
        /// not serialised as a whole, since a resolved skill's tools are runtime values).
        #[derive(Debug, Clone, serde::Serialize, serde::Deserialize, schemars::JsonSchema)]
        #[serde(tag = "change", content = "outcome", rename_all = "snake_case")]
        pub enum RegistryOutcome {
            $($(#[$doc])* $variant($out),)+
        }

        $(impl From<$req> for RegistryOp {
            fn from(r: $req) -> Self {
                RegistryOp::$variant(r)
            }
        }

        impl TakeOutcome for $req {
            fn take(outcome: RegistryOutcome) -> Result<$out, &'static str> {
                match outcome {
                    RegistryOutcome::$variant(out) => Ok(out),
                    other => Err(other.name()),
                }
            }
        })+

        impl RegistryOp {
            /// The change's name (`CreateProject`).
            pub fn name(&self) -> &'static str {
                match self {
                    $(RegistryOp::$variant(_) => stringify!($variant),)+
                }
            }
        }

        impl RegistryOutcome {
            /// The change's name, as the protocol spells it.
            pub fn name(&self) -> &'static str {
                match self {
                    $(RegistryOutcome::$variant(_) => stringify!($variant),)+
                }
            }
        }

        /// Runs `op` (see [`super::Op::Registry`]).
        pub(crate) fn run(engine: &Engine, op: RegistryOp) -> Result<RegistryOutcome, ApiError> {
            let mut store = engine.store()?;
            Ok(match op {
                $(RegistryOp::$variant(r) => RegistryOutcome::$variant(r.apply(engine, &mut store)?),)+
            })
        }
    };
}

registry_changes! {
    /// `resource add`.
    AddResource(AddResource) -> resources::Added;
    /// `resource add` of a custom resource type.
    AddCustomResource(AddCustomResource) -> resources::Added;
    /// `resource remove`.
    RemoveResource(RemoveResource) -> RemovalPlan;
    /// `resource link`.
    LinkResources(LinkResources) -> (Resource, Resource);
    /// `resource unlink`.
    UnlinkResources(UnlinkResources) -> (Resource, Resource);
    /// `resource type add`.
    AddResourceType(AddResourceType) -> TypeAdded;
    /// `resource type remove`.
    RemoveResourceType(RemoveResourceType) -> CustomType;
    /// `project create`.
    CreateProject(CreateProject) -> projects::Created;
    /// `project link-resource`.
    LinkProjectResource(LinkProjectResource) -> (Project, LinkedResource);
    /// `project unlink-resource`.
    UnlinkProjectResource(UnlinkProjectResource) -> (Project, LinkedResource, Vec<Plan>);
    /// `project delete`.
    DeleteProject(DeleteProject) -> projects::Deleted;
    /// `config set automation-profile --project`.
    SetProjectProfile(SetProjectProfile) -> (Project, Option<String>);
    /// `project validation add`.
    AddValidation(AddValidation) -> Validation;
    /// `project validation remove`.
    RemoveValidation(RemoveValidation) -> Validation;
    /// `project context set`.
    SetContextPolicy(SetContextPolicy) -> ();
    /// `action create`.
    CreateAction(CreateAction) -> actions::Created;
    /// `action available`.
    MakeActionAvailable(MakeActionAvailable) -> (actions::Action, ActionState, Vec<actions::Check>);
    /// `action archive`.
    ArchiveAction(ArchiveAction) -> (actions::Action, ActionState);
    /// `action delete`.
    DeleteAction(DeleteAction) -> actions::Deleted;
    /// `actor add`.
    AddActor(AddActor) -> actors::Added;
    /// `actor remove`.
    RemoveActor(RemoveActor) -> (actors::Actor, actors::Impact);
    /// `invariant add`.
    AddInvariant(AddInvariant) -> Vec<Invariant>;
    /// `invariant remove`.
    RemoveInvariant(RemoveInvariant) -> Invariant;
    /// `automation-profile add`.
    AddProfile(AddProfile) -> profiles::Added;
    /// `automation-profile remove`.
    RemoveProfile(RemoveProfile) -> profiles::Profile;
    /// `tool add`.
    RegisterTool(RegisterTool) -> Registration<ToolDef>;
    /// `tool remove`.
    RemoveTool(RemoveTool) -> Registration<ToolDef>;
    /// `skill add`.
    RegisterSkill(RegisterSkill) -> (Registration<SkillDef>, ResolvedSkill);
    /// `skill remove`: the removed skill and the actors that named it.
    RemoveSkill(RemoveSkill) -> (Registration<SkillDef>, Vec<String>);
    /// The code index of a resource, built or brought up to date (`resource add`, `resource
    /// reindex`, `project link-resource`).
    BuildIndex(BuildIndex) -> IndexOutcome;
    /// The code index of a removed or unlinked resource, removed.
    RemoveIndex(RemoveIndex) -> IndexRemoved;
}

/// Registers a resource of a built-in type (and what it discovers).
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize, schemars::JsonSchema)]
pub struct AddResource {
    /// The type (`git-checkout`, `fs-directory`, ...).
    pub type_name: String,
    /// The name as the user gave it.
    pub name: String,
    /// The type's arguments.
    pub args: AddArgs,
}

impl RegistryChange for AddResource {
    type Output = resources::Added;
    fn apply(self, engine: &Engine, store: &mut Store) -> Result<Self::Output, ApiError> {
        let names = engine.provider_names();
        resources::add(store, &names, &self.type_name, &self.name, &self.args)
            .map_err(|e| on_server_host(engine, e).into())
    }
}

/// A path a server cannot find is named as missing on the server's host: the client that
/// sent it may well have it (spec section 21, "paths on the server host").
fn on_server_host(engine: &Engine, e: resources::ResourceError) -> resources::ResourceError {
    match e {
        resources::ResourceError::Path {
            flag,
            path,
            problem,
        } if !engine.caller().is_local() => resources::ResourceError::NotOnServerHost {
            flag,
            path,
            problem,
            host: crate::lease::host_name(),
        },
        other => other,
    }
}

/// Registers a resource of a custom type.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize, schemars::JsonSchema)]
pub struct AddCustomResource {
    /// The custom type.
    pub custom: CustomType,
    /// The name as the user gave it.
    pub name: String,
    /// The type's arguments by name.
    pub values: BTreeMap<String, String>,
    /// A description.
    pub description: Option<String>,
    /// Replace an existing resource of that name.
    pub update: bool,
}

impl RegistryChange for AddCustomResource {
    type Output = resources::Added;
    fn apply(self, engine: &Engine, store: &mut Store) -> Result<Self::Output, ApiError> {
        let names = engine.provider_names();
        Ok(resources::add_custom(
            store,
            &names,
            &self.custom,
            &self.name,
            &self.values,
            self.description,
            self.update,
        )?)
    }
}

/// Removes a resource (and what it discovered).
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize, schemars::JsonSchema)]
pub struct RemoveResource {
    /// The resource, by name or id.
    pub resource: String,
}

impl RegistryChange for RemoveResource {
    type Output = RemovalPlan;
    fn apply(self, _: &Engine, store: &mut Store) -> Result<Self::Output, ApiError> {
        Ok(resources::remove(store, &self.resource)?)
    }
}

/// Links a child resource under a parent by hand.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize, schemars::JsonSchema)]
pub struct LinkResources {
    /// The parent, by name or id.
    pub parent: String,
    /// The child, by name or id.
    pub child: String,
}

impl RegistryChange for LinkResources {
    type Output = (Resource, Resource);
    fn apply(self, _: &Engine, store: &mut Store) -> Result<Self::Output, ApiError> {
        Ok(resources::link_child(store, &self.parent, &self.child)?)
    }
}

/// Removes a manual link between two resources.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize, schemars::JsonSchema)]
pub struct UnlinkResources {
    /// The parent, by name or id.
    pub parent: String,
    /// The child, by name or id.
    pub child: String,
}

impl RegistryChange for UnlinkResources {
    type Output = (Resource, Resource);
    fn apply(self, _: &Engine, store: &mut Store) -> Result<Self::Output, ApiError> {
        Ok(resources::unlink_child(store, &self.parent, &self.child)?)
    }
}

/// Registers a custom resource type from a file or from options.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize, schemars::JsonSchema)]
pub struct AddResourceType {
    /// The YAML file, if any.
    pub file: Option<PathBuf>,
    /// The name, when not taken from the file.
    pub name: Option<String>,
    /// Options given as flags.
    pub options: TypeOptions,
}

impl RegistryChange for AddResourceType {
    type Output = TypeAdded;
    fn apply(self, engine: &Engine, store: &mut Store) -> Result<Self::Output, ApiError> {
        let names = engine.provider_names();
        Ok(custom_types::add(
            store,
            self.file.as_deref(),
            self.name.as_deref(),
            &self.options,
            &names,
        )?)
    }
}

/// Removes a custom resource type no resource uses.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize, schemars::JsonSchema)]
pub struct RemoveResourceType {
    /// The type's name.
    pub name: String,
}

impl RegistryChange for RemoveResourceType {
    type Output = CustomType;
    fn apply(self, _: &Engine, store: &mut Store) -> Result<Self::Output, ApiError> {
        Ok(custom_types::remove(store, &self.name)?)
    }
}

/// Creates a project.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize, schemars::JsonSchema)]
pub struct CreateProject(pub projects::CreateRequest);

impl RegistryChange for CreateProject {
    type Output = projects::Created;
    fn apply(self, engine: &Engine, store: &mut Store) -> Result<Self::Output, ApiError> {
        Ok(projects::create(
            store,
            &engine.settings.providers,
            &self.0,
        )?)
    }
}

/// Links a resource to a project.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize, schemars::JsonSchema)]
pub struct LinkProjectResource {
    /// The project, by name or id.
    pub project: String,
    /// The resource, by name or id.
    pub resource: String,
    /// Plans may read it but not change it.
    pub read_only: bool,
    /// The name plans see it under.
    pub alias: Option<String>,
}

impl RegistryChange for LinkProjectResource {
    type Output = (Project, LinkedResource);
    fn apply(self, _: &Engine, store: &mut Store) -> Result<Self::Output, ApiError> {
        Ok(projects::link_resource(
            store,
            &self.project,
            &self.resource,
            self.read_only,
            self.alias.as_deref(),
        )?)
    }
}

/// Unlinks a resource from a project; returns the plans that still use it.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize, schemars::JsonSchema)]
pub struct UnlinkProjectResource {
    /// The project, by name or id.
    pub project: String,
    /// The resource, by name, alias or id.
    pub resource: String,
}

impl RegistryChange for UnlinkProjectResource {
    type Output = (Project, LinkedResource, Vec<Plan>);
    fn apply(self, _: &Engine, store: &mut Store) -> Result<Self::Output, ApiError> {
        Ok(projects::unlink_resource(
            store,
            &self.project,
            &self.resource,
        )?)
    }
}

/// Deletes a project (backed up first); `force` cancels its active plans, each with its event.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize, schemars::JsonSchema)]
pub struct DeleteProject {
    /// The project, by name or id.
    pub project: String,
    /// Cancel active plans instead of refusing.
    pub force: bool,
}

impl RegistryChange for DeleteProject {
    type Output = projects::Deleted;
    fn apply(self, engine: &Engine, store: &mut Store) -> Result<Self::Output, ApiError> {
        let backups = engine.paths().data_dir.join("backups");
        Ok(projects::delete(
            store,
            &self.project,
            self.force,
            &backups,
        )?)
    }
}

/// Sets (or with `None`, clears) a project's automation profile.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize, schemars::JsonSchema)]
pub struct SetProjectProfile {
    /// The project, by name or id.
    pub project: String,
    /// The profile; `None` inherits the global one.
    pub profile: Option<String>,
}

impl RegistryChange for SetProjectProfile {
    type Output = (Project, Option<String>);
    fn apply(self, _: &Engine, store: &mut Store) -> Result<Self::Output, ApiError> {
        // The policy of the project's organization must allow the profile (spec 22): a
        // project setting cannot widen it. Unknown names are left to `set_profile` to report.
        if let (Some(profile), Ok(project)) = (&self.profile, projects::find(store, &self.project))
            && let Ok(found) = crate::registry::profiles::find(store, profile)
        {
            store
                .policies_of_items([project.name.as_str()])?
                .check_profile(&found.name)?;
        }
        Ok(projects::set_profile(
            store,
            &self.project,
            self.profile.as_deref(),
        )?)
    }
}

/// Adds a validation to a project.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize, schemars::JsonSchema)]
pub struct AddValidation(pub projects::ValidationRequest);

impl RegistryChange for AddValidation {
    type Output = Validation;
    fn apply(self, _: &Engine, store: &mut Store) -> Result<Self::Output, ApiError> {
        Ok(projects::add_validation(store, &self.0)?)
    }
}

/// Removes a project's validation.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize, schemars::JsonSchema)]
pub struct RemoveValidation {
    /// The project, by name or id.
    pub project: String,
    /// The validation's id (or a unique prefix).
    pub validation: String,
}

impl RegistryChange for RemoveValidation {
    type Output = Validation;
    fn apply(self, _: &Engine, store: &mut Store) -> Result<Self::Output, ApiError> {
        Ok(projects::remove_validation(
            store,
            &self.project,
            &self.validation,
        )?)
    }
}

/// Sets (or with an empty policy, clears) one view of a project's context policy.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize, schemars::JsonSchema)]
pub struct SetContextPolicy {
    /// The project.
    pub project: Id,
    /// The view (`strategize`, `execute`, ...).
    pub view: String,
    /// The policy.
    pub policy: ContextPolicy,
}

impl RegistryChange for SetContextPolicy {
    type Output = ();
    fn apply(self, _: &Engine, store: &mut Store) -> Result<Self::Output, ApiError> {
        Ok(policy::set_project_policy(
            store,
            &self.project,
            &self.view,
            &self.policy,
        )?)
    }
}

/// Creates an action from its YAML file and flags.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize, schemars::JsonSchema)]
pub struct CreateAction(pub actions::CreateRequest);

impl RegistryChange for CreateAction {
    type Output = actions::Created;
    fn apply(self, engine: &Engine, store: &mut Store) -> Result<Self::Output, ApiError> {
        Ok(actions::create(store, &engine.settings.providers, &self.0)?)
    }
}

/// Checks an action and marks it available.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize, schemars::JsonSchema)]
pub struct MakeActionAvailable {
    /// The action, by name or id.
    pub action: String,
}

impl RegistryChange for MakeActionAvailable {
    type Output = (actions::Action, ActionState, Vec<actions::Check>);
    fn apply(self, engine: &Engine, store: &mut Store) -> Result<Self::Output, ApiError> {
        Ok(actions::make_available(
            store,
            &engine.settings.providers,
            &self.action,
        )?)
    }
}

/// Archives an action.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize, schemars::JsonSchema)]
pub struct ArchiveAction {
    /// The action, by name or id.
    pub action: String,
}

impl RegistryChange for ArchiveAction {
    type Output = (actions::Action, ActionState);
    fn apply(self, _: &Engine, store: &mut Store) -> Result<Self::Output, ApiError> {
        Ok(actions::archive(store, &self.action)?)
    }
}

/// Deletes an action and frees its name.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize, schemars::JsonSchema)]
pub struct DeleteAction {
    /// The action, by name or id.
    pub action: String,
}

impl RegistryChange for DeleteAction {
    type Output = actions::Deleted;
    fn apply(self, _: &Engine, store: &mut Store) -> Result<Self::Output, ApiError> {
        Ok(actions::delete(store, &self.action)?)
    }
}

/// Registers (or with `update`, replaces) an actor from its YAML file.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize, schemars::JsonSchema)]
pub struct AddActor {
    /// The YAML file.
    pub file: PathBuf,
    /// The name, when not taken from the file.
    pub name: Option<String>,
    /// Values given as flags over the file's.
    pub overrides: actors::Overrides,
    /// Replace an existing actor of that name.
    pub update: bool,
    /// The file's text, read on a client and sent to a server (`None`: read `file` here).
    #[serde(default)]
    pub config_text: Option<String>,
}

impl RegistryChange for AddActor {
    type Output = actors::Added;
    fn apply(self, engine: &Engine, store: &mut Store) -> Result<Self::Output, ApiError> {
        Ok(actors::add_given(
            store,
            &engine.settings.providers,
            (&self.file, self.config_text.as_deref()),
            self.name.as_deref(),
            &self.overrides,
            self.update,
        )?)
    }
}

/// Removes a custom actor; returns what named it.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize, schemars::JsonSchema)]
pub struct RemoveActor {
    /// The actor.
    pub actor: String,
}

impl RegistryChange for RemoveActor {
    type Output = (actors::Actor, actors::Impact);
    fn apply(self, engine: &Engine, store: &mut Store) -> Result<Self::Output, ApiError> {
        Ok(actors::remove(
            store,
            &engine.settings.providers,
            &self.actor,
        )?)
    }
}

/// Adds an invariant to each of the targets.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize, schemars::JsonSchema)]
pub struct AddInvariant {
    /// Where it applies (global, projects, actions, plans).
    pub targets: Targets,
    /// Its text (a machine form or free text).
    pub text: String,
    /// A key that lets a narrower scope override it.
    pub key: Option<String>,
}

impl RegistryChange for AddInvariant {
    type Output = Vec<Invariant>;
    fn apply(self, _: &Engine, store: &mut Store) -> Result<Self::Output, ApiError> {
        Ok(invariants::add(
            store,
            &self.targets,
            &self.text,
            self.key.as_deref(),
        )?)
    }
}

/// Removes an invariant.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize, schemars::JsonSchema)]
pub struct RemoveInvariant {
    /// The invariant's id (or a unique prefix).
    pub invariant: String,
}

impl RegistryChange for RemoveInvariant {
    type Output = Invariant;
    fn apply(self, _: &Engine, store: &mut Store) -> Result<Self::Output, ApiError> {
        Ok(invariants::remove(store, &self.invariant)?)
    }
}

/// Registers (or with `update`, replaces) a custom automation profile from its YAML file.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize, schemars::JsonSchema)]
pub struct AddProfile {
    /// The YAML file.
    pub file: PathBuf,
    /// The name, when not taken from the file.
    pub name: Option<String>,
    /// Replace an existing profile of that name.
    pub update: bool,
    /// The file's text, read on a client and sent to a server (`None`: read `file` here).
    #[serde(default)]
    pub config_text: Option<String>,
}

impl RegistryChange for AddProfile {
    type Output = profiles::Added;
    fn apply(self, engine: &Engine, store: &mut Store) -> Result<Self::Output, ApiError> {
        let names = engine.provider_names();
        Ok(profiles::add_given(
            store,
            (&self.file, self.config_text.as_deref()),
            self.name.as_deref(),
            self.update,
            &names,
        )?)
    }
}

/// Removes a custom automation profile that nothing uses as a default.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize, schemars::JsonSchema)]
pub struct RemoveProfile {
    /// The profile.
    pub profile: String,
    /// The global defaults in force, as `(value, where it was set)`.
    pub globals: Vec<(String, String)>,
}

impl RegistryChange for RemoveProfile {
    type Output = profiles::Profile;
    fn apply(self, _: &Engine, store: &mut Store) -> Result<Self::Output, ApiError> {
        let globals: Vec<profiles::GlobalDefault<'_>> = self
            .globals
            .iter()
            .map(|(value, origin)| profiles::GlobalDefault { value, origin })
            .collect();
        Ok(profiles::remove(store, &self.profile, &globals)?)
    }
}

/// Registers (or replaces) a custom tool.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize, schemars::JsonSchema)]
pub struct RegisterTool(pub AddTool);

impl RegistryChange for RegisterTool {
    type Output = Registration<ToolDef>;
    fn apply(self, _: &Engine, store: &mut Store) -> Result<Self::Output, ApiError> {
        Ok(tools::add_tool(store, &self.0)?)
    }
}

/// Removes a custom tool.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize, schemars::JsonSchema)]
pub struct RemoveTool {
    /// The tool.
    pub name: String,
}

impl RegistryChange for RemoveTool {
    type Output = Registration<ToolDef>;
    fn apply(self, _: &Engine, store: &mut Store) -> Result<Self::Output, ApiError> {
        Ok(tools::remove_tool(store, &self.name)?)
    }
}

/// Registers (or replaces) a custom skill.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize, schemars::JsonSchema)]
pub struct RegisterSkill(pub AddSkill);

impl RegistryChange for RegisterSkill {
    type Output = (Registration<SkillDef>, ResolvedSkill);
    fn apply(self, _: &Engine, store: &mut Store) -> Result<Self::Output, ApiError> {
        Ok(tools::add_skill(store, &self.0)?)
    }
}

/// Removes a custom skill.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize, schemars::JsonSchema)]
pub struct RemoveSkill {
    /// The skill.
    pub name: String,
}

impl RegistryChange for RemoveSkill {
    type Output = (Registration<SkillDef>, Vec<String>);
    fn apply(self, _: &Engine, store: &mut Store) -> Result<Self::Output, ApiError> {
        Ok(tools::remove_skill(store, &self.name)?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::{Op, Outcome, Settings};
    use crate::domain::event::EventKind;
    use crate::paths::Paths;

    fn engine(dir: &std::path::Path) -> Engine {
        let paths = Paths::resolve(Some(dir.join("data")), Some(dir.join("config.toml"))).unwrap();
        std::fs::create_dir_all(&paths.data_dir).unwrap();
        Engine::new(paths, Settings::default())
    }

    fn registry_events(engine: &Engine) -> Vec<(String, String, String)> {
        crate::store::events::after(&engine.store().unwrap(), 0, None, 100)
            .unwrap()
            .into_iter()
            .filter_map(|e| match e.kind {
                EventKind::RegistryChanged(r) => Some((r.registry, r.name, r.change)),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn a_registry_change_through_op_and_through_change_returns_its_result_and_records_it() {
        let dir = tempfile::tempdir().unwrap();
        let engine = engine(dir.path());
        let global = Targets {
            global: true,
            ..Targets::default()
        };
        let op = Op::Registry(Box::new(
            AddInvariant {
                targets: global,
                text: "Keep the changelog".into(),
                key: None,
            }
            .into(),
        ));
        let Outcome::Registry(outcome) = engine.run(op).unwrap() else {
            panic!("a registry op answers with a registry outcome");
        };
        let RegistryOutcome::AddInvariant(added) = *outcome else {
            panic!("AddInvariant answers with AddInvariant: {outcome:?}");
        };
        let id = added[0].invariant_id.clone();
        let removed = engine
            .change(RemoveInvariant {
                invariant: id.clone(),
            })
            .unwrap();
        assert_eq!(removed.text, "Keep the changelog");
        assert_eq!(
            registry_events(&engine),
            [
                ("invariant".into(), id.clone(), "added".into()),
                ("invariant".into(), id, "removed".into())
            ]
        );
    }

    #[test]
    fn a_refused_change_writes_nothing_and_keeps_the_registrys_error() {
        let dir = tempfile::tempdir().unwrap();
        let engine = engine(dir.path());
        let err = engine
            .change(RemoveInvariant {
                invariant: "inv_nope".into(),
            })
            .unwrap_err();
        assert!(
            matches!(err.into_registry(), Ok(RegistryError::Invariant(_))),
            "the registry's own error"
        );
        assert!(registry_events(&engine).is_empty());
    }
}
