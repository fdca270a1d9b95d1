//! Registry reads (spec sections 05-08 and 23): resources, resource types, projects (with
//! their context policies) and invariants, list and show, and the checks a change's
//! confirmation question needs.
//!
//! One family of calls of the protocol ([`Request::Registry`]): its requests, its views, how
//! an [`Engine`] answers them and the typed calls on a [`Client`]. The types a face needs to
//! render the views are re-exported here.

mod calls;

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::{ApiError, Engine};
use crate::domain::check::Check;
use crate::domain::next::Next;
use crate::domain::{ActionState, Id, Plan};
use crate::index;
use crate::store::Store;

pub use crate::context::policy::{
    ContextPolicy, Resolved as ResolvedPolicy, VIEWS as CONTEXT_VIEWS,
};
pub use crate::domain::check::CheckStatus;
pub use crate::index::{IndexState, IndexStatus};
pub use crate::registry::custom_types::{ArgType, CustomType, TypeError, TypeOptions};
pub use crate::registry::invariants::{
    Dropped, EffectiveView, Filter as InvariantFilter, Invariant, InvariantError, ReconcilerChoice,
    Targets,
};
pub use crate::registry::projects::{
    self as projects, CreateRequest, LinkedResource, Project, ProjectError, Validation,
    ValidationRequest,
};
pub use crate::registry::resource_types::{
    BUILTIN_TYPES, Capabilities, ResourceType, builtin as builtin_type, user_addable,
};
pub use crate::registry::resources::{
    self as resources, AddArgs, Added, Details as ResourceDetails, RemovalPlan, Resource,
    ResourceError, TreeNode,
};
pub use crate::store::latest_schema_version;
pub use crate::system::{Info, VERSION, platform};

/// One call of this family.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(tag = "query", rename_all = "snake_case")]
pub enum RegistryQuery {
    /// `resource list`.
    Resources(ResourceFilter),
    /// `resource show`.
    Resource {
        /// Name or id.
        resource: String,
    },
    /// `resource tree`.
    ResourceTree {
        /// The root, by name or id.
        resource: String,
        /// Levels to show.
        depth: u32,
        /// Only this type (and the path to it).
        type_name: Option<String>,
    },
    /// What `resource remove` would remove (refused as the removal would be).
    ResourceRemoval {
        /// Name or id.
        resource: String,
    },
    /// The two ends of a manual link `resource unlink-child` may remove.
    ManualLink {
        /// The parent, by name or id.
        parent: String,
        /// The child, by name or id.
        child: String,
    },
    /// Every custom resource type.
    CustomTypes,
    /// One custom resource type (`NOT_FOUND` when there is none; built-ins are refused).
    CustomType {
        /// The type's name.
        name: String,
    },
    /// The custom type a `resource add` word names, if there is one.
    CustomTypeNamed {
        /// The word.
        name: String,
    },
    /// `project list`.
    Projects {
        /// Only this namespace.
        namespace: Option<String>,
        /// Only names matching this regular expression.
        regex: Option<String>,
    },
    /// `project show`.
    Project {
        /// Name or id.
        project: String,
    },
    /// What `project unlink-resource` would unlink (refused as the unlink would be).
    ProjectUnlink {
        /// The project, by name or id.
        project: String,
        /// The resource, by name, alias or id.
        resource: String,
    },
    /// How many resources a project links, and how many projects link a resource.
    LinkCounts {
        /// The project, by name or id.
        project: String,
        /// The resource, by name.
        resource: String,
    },
    /// What `project delete` would cancel (refused without `force` when plans are active).
    ProjectDeletion {
        /// Name or id.
        project: String,
        /// Active plans would be cancelled.
        force: bool,
    },
    /// One validation of a project.
    Validation {
        /// The project, by name or id.
        project: String,
        /// The validation's id or a unique prefix.
        validation: String,
    },
    /// A project's validations.
    Validations {
        /// The project, by name or id.
        project: String,
    },
    /// A project's context policy for one view, resolved.
    ProjectContext {
        /// The project, by name or id.
        project: String,
        /// The view (`strategize`, `execute`, `apply`, `default`).
        view: String,
    },
    /// `invariant list`.
    Invariants {
        /// Which invariants.
        filter: InvariantFilter,
        /// Only texts matching this regular expression.
        regex: Option<String>,
    },
    /// One invariant.
    Invariant {
        /// Its id or a unique prefix.
        invariant: String,
    },
    /// `invariant list --plan P --effective`.
    EffectiveInvariants {
        /// Plan id or unique prefix.
        plan: String,
        /// The global `invariant-actor` setting, if any.
        global_actor: Option<String>,
        /// Only texts matching this regular expression (applied after reconciling).
        regex: Option<String>,
    },
    /// `agents info`: the environment, the database and the code indexes.
    Info,
    /// `agents diagnostics`: every health check (answered without opening the database
    /// first: a broken one is a finding).
    Diagnostics,
    /// What is registered in a namespace (`config set providers.NAME...` must not hide it):
    /// (kind, name) pairs.
    NamespaceUsers {
        /// The namespace.
        namespace: String,
    },
    /// Whether a custom automation profile is registered (`NOT_FOUND` when it is not).
    Profile {
        /// The profile's name.
        name: String,
    },
    /// The state of the action named `name`, if there is one (`quickstart`).
    ActionState {
        /// The action's name.
        name: String,
    },
}

impl RegistryQuery {
    /// The call's name as the protocol spells it.
    pub fn name(&self) -> &'static str {
        match self {
            RegistryQuery::Resources(_) => "resources",
            RegistryQuery::Resource { .. } => "resource",
            RegistryQuery::ResourceTree { .. } => "resource_tree",
            RegistryQuery::ResourceRemoval { .. } => "resource_removal",
            RegistryQuery::ManualLink { .. } => "manual_link",
            RegistryQuery::CustomTypes => "custom_types",
            RegistryQuery::CustomType { .. } => "custom_type",
            RegistryQuery::CustomTypeNamed { .. } => "custom_type_named",
            RegistryQuery::Projects { .. } => "projects",
            RegistryQuery::Project { .. } => "project",
            RegistryQuery::ProjectUnlink { .. } => "project_unlink",
            RegistryQuery::LinkCounts { .. } => "link_counts",
            RegistryQuery::ProjectDeletion { .. } => "project_deletion",
            RegistryQuery::Validation { .. } => "validation",
            RegistryQuery::Validations { .. } => "validations",
            RegistryQuery::ProjectContext { .. } => "project_context",
            RegistryQuery::Invariants { .. } => "invariants",
            RegistryQuery::Invariant { .. } => "invariant",
            RegistryQuery::EffectiveInvariants { .. } => "effective_invariants",
            RegistryQuery::Info => "info",
            RegistryQuery::Diagnostics => "diagnostics",
            RegistryQuery::NamespaceUsers { .. } => "namespace_users",
            RegistryQuery::Profile { .. } => "profile",
            RegistryQuery::ActionState { .. } => "action_state",
        }
    }
}

/// Which resources `resource list` shows.
#[derive(Debug, Clone, Default, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ResourceFilter {
    /// Only this namespace.
    pub namespace: Option<String>,
    /// Only this type (discovered resources included).
    pub type_name: Option<String>,
    /// Discovered resources too.
    pub all: bool,
    /// Only names matching this regular expression.
    pub regex: Option<String>,
}

/// A row of `resource list`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ResourceRow {
    /// The resource.
    pub resource: Resource,
    /// Direct children (discovered and manual).
    pub children: usize,
    /// Projects linking it.
    pub projects: Vec<String>,
}

/// `resource show`: the details and, for a resource with files, its index checked for changes.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ResourceShown {
    /// Parents, children, projects, sandbox strategy.
    pub details: ResourceDetails,
    /// The code index, for a resource with files to index.
    pub indexing: Option<IndexStatus>,
}

/// `project show`: the details and the index of each linked resource with files.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ProjectShown {
    /// Resources, validations, invariants, active plans.
    pub details: projects::Details,
    /// The code index of each linked resource with files, checked for changes.
    pub indexing: Vec<IndexStatus>,
}

/// A project's context policy for one view.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ProjectContextView {
    /// The project.
    pub project: Project,
    /// The policy set for each view.
    pub views: BTreeMap<String, ContextPolicy>,
    /// The asked view's policy with every value filled in.
    pub resolved: ResolvedPolicy,
}

/// `invariant list --effective`.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct EffectiveInvariants {
    /// The plan.
    pub plan_id: Id,
    /// What applies (matching the regular expression), and what reconciling dropped.
    pub view: EffectiveView,
    /// The invariant actor that checks semantic conflicts, and where it was found.
    pub choice: Option<ReconcilerChoice>,
    /// Invariants a correction stopped enforcing: (invariant id, the correcting decision).
    pub removed: Vec<(String, Id)>,
    /// Those of them the plan would otherwise respect.
    pub gone: Vec<Invariant>,
}

/// The answer to a [`RegistryQuery`], one variant per call.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(tag = "kind", content = "view", rename_all = "snake_case")]
pub enum RegistryView {
    /// [`RegistryQuery::Resources`].
    Resources(Vec<ResourceRow>),
    /// [`RegistryQuery::Resource`].
    Resource(Box<ResourceShown>),
    /// [`RegistryQuery::ResourceTree`].
    ResourceTree(Box<TreeNode>),
    /// [`RegistryQuery::ResourceRemoval`].
    ResourceRemoval(Box<RemovalPlan>),
    /// [`RegistryQuery::ManualLink`]: parent and child.
    ManualLink(Box<(Resource, Resource)>),
    /// [`RegistryQuery::CustomTypes`].
    CustomTypes(Vec<CustomType>),
    /// [`RegistryQuery::CustomType`] and [`RegistryQuery::CustomTypeNamed`].
    CustomType(Option<Box<CustomType>>),
    /// [`RegistryQuery::Projects`].
    Projects(Vec<projects::Summary>),
    /// [`RegistryQuery::Project`].
    Project(Box<ProjectShown>),
    /// [`RegistryQuery::ProjectUnlink`] and [`RegistryQuery::ProjectDeletion`]: the project,
    /// the link (for an unlink) and the active plans.
    ProjectPlans(Box<(Project, Option<LinkedResource>, Vec<Plan>)>),
    /// [`RegistryQuery::LinkCounts`]: the project's linked resources, the resource's projects.
    LinkCounts(usize, usize),
    /// [`RegistryQuery::Validation`] and [`RegistryQuery::Validations`].
    Validations(Box<Project>, Vec<Validation>),
    /// [`RegistryQuery::ProjectContext`].
    ProjectContext(Box<ProjectContextView>),
    /// [`RegistryQuery::Invariants`] and [`RegistryQuery::Invariant`].
    Invariants(Vec<Invariant>),
    /// [`RegistryQuery::EffectiveInvariants`].
    EffectiveInvariants(Box<EffectiveInvariants>),
    /// [`RegistryQuery::Info`].
    Info(Box<InfoView>),
    /// [`RegistryQuery::Diagnostics`]: each check with the step that fixes it, if any.
    Diagnostics(Vec<(Check, Option<Next>)>),
    /// [`RegistryQuery::NamespaceUsers`]: (kind, name) pairs.
    Names(Vec<(String, String)>),
    /// [`RegistryQuery::Profile`]: found.
    Found,
    /// [`RegistryQuery::ActionState`].
    ActionState(Option<ActionState>),
}

/// `agents info`: facts about the environment and its code indexes.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct InfoView {
    /// Version, paths, schema, plan counts, providers.
    pub info: Info,
    /// Every code index of the data directory.
    pub indexes: Vec<IndexStatus>,
}

/// Answers `request` on `engine`.
///
/// # Errors
/// The registry's own error (`NOT_FOUND`, `CONFLICT`, ...) as the matching change would
/// report it; [`ApiError::InvalidInput`] for a regular expression that does not parse.
pub(crate) fn answer(engine: &Engine, request: RegistryQuery) -> Result<RegistryView, ApiError> {
    if let RegistryQuery::Diagnostics = request {
        let mut checks = crate::system::diagnostics(engine.paths(), &|name| {
            std::env::var(name).ok().filter(|v| !v.is_empty())
        });
        checks.push(index::check(engine.paths()));
        return Ok(RegistryView::Diagnostics(
            checks
                .into_iter()
                .map(|c| {
                    let step = c.fix_step.clone();
                    (c, step)
                })
                .collect(),
        ));
    }
    let store = engine.store()?;
    match request {
        RegistryQuery::Resources(f) => Ok(RegistryView::Resources(resource_rows(&store, &f)?)),
        RegistryQuery::Resource { resource } => {
            let details = resources::details(&store, &resource)?;
            let indexing = index::target(engine.paths(), &details.resource)
                .map(|_| index::status(engine.paths(), &details.resource, true));
            Ok(RegistryView::Resource(Box::new(ResourceShown {
                details,
                indexing,
            })))
        }
        RegistryQuery::ResourceTree {
            resource,
            depth,
            type_name,
        } => Ok(RegistryView::ResourceTree(Box::new(resources::tree(
            &store,
            &resource,
            depth,
            type_name.as_deref(),
        )?))),
        RegistryQuery::ResourceRemoval { resource } => Ok(RegistryView::ResourceRemoval(Box::new(
            resources::plan_removal(&store, &resource)?,
        ))),
        RegistryQuery::ManualLink { parent, child } => Ok(RegistryView::ManualLink(Box::new(
            resources::check_unlink(&store, &parent, &child)?,
        ))),
        RegistryQuery::CustomTypes => Ok(RegistryView::CustomTypes(
            crate::registry::custom_types::all(&store)?,
        )),
        RegistryQuery::CustomType { name } => Ok(RegistryView::CustomType(Some(Box::new(
            crate::registry::custom_types::find(&store, &name)?,
        )))),
        RegistryQuery::CustomTypeNamed { name } => Ok(RegistryView::CustomType(
            custom_type_named(&store, &name)?.map(Box::new),
        )),
        other => answer_projects(engine, &store, other),
    }
}

/// The project and invariant calls of [`answer`].
fn answer_projects(
    engine: &Engine,
    store: &Store,
    request: RegistryQuery,
) -> Result<RegistryView, ApiError> {
    Ok(match request {
        RegistryQuery::Projects { namespace, regex } => RegistryView::Projects(projects::list(
            store,
            namespace.as_deref(),
            pattern(regex.as_deref())?.as_ref(),
        )?),
        RegistryQuery::Project { project } => {
            let details = projects::details(store, &project)?;
            let indexing = details
                .resources
                .iter()
                .filter(|l| index::target(engine.paths(), &l.resource).is_some())
                .map(|l| index::status(engine.paths(), &l.resource, true))
                .collect();
            RegistryView::Project(Box::new(ProjectShown { details, indexing }))
        }
        RegistryQuery::ProjectUnlink { project, resource } => {
            let (p, l, active) = projects::check_unlink(store, &project, &resource)?;
            RegistryView::ProjectPlans(Box::new((p, Some(l), active)))
        }
        RegistryQuery::LinkCounts { project, resource } => {
            let p = projects::find(store, &project)?;
            let linked = store.project_resources(&p.project_id)?.len();
            let projects = resources::details(store, &resource).map_or(0, |d| d.projects.len());
            RegistryView::LinkCounts(linked, projects)
        }
        RegistryQuery::ProjectDeletion { project, force } => {
            let (p, active) = projects::check_delete(store, &project, force)?;
            RegistryView::ProjectPlans(Box::new((p, None, active)))
        }
        RegistryQuery::Validation {
            project,
            validation,
        } => {
            let (p, v) = projects::find_validation(store, &project, &validation)?;
            RegistryView::Validations(Box::new(p), vec![v])
        }
        RegistryQuery::Validations { project } => {
            let p = projects::find(store, &project)?;
            let vs = store.validations(&p.project_id)?;
            RegistryView::Validations(Box::new(p), vs)
        }
        RegistryQuery::ProjectContext { project, view } => {
            let project = projects::find(store, &project)?;
            let views = crate::context::policy::project_policies(store, &project.project_id)?;
            let resolved = crate::context::policy::resolve(&views, &view);
            RegistryView::ProjectContext(Box::new(ProjectContextView {
                project,
                views,
                resolved,
            }))
        }
        other => answer_invariants(engine, store, other)?,
    })
}

/// The calls of [`answer`] about the environment.
fn answer_environment(
    engine: &Engine,
    store: &Store,
    request: RegistryQuery,
) -> Result<RegistryView, ApiError> {
    Ok(match request {
        RegistryQuery::Info => {
            let paths = engine.paths();
            let config = crate::config::Config::load(&paths.config_path).map_err(|e| {
                ApiError::InvalidInput {
                    message: e.to_string(),
                }
            })?;
            RegistryView::Info(Box::new(InfoView {
                info: crate::system::info(paths, &config, store)?,
                indexes: index::statuses(paths, false),
            }))
        }
        RegistryQuery::NamespaceUsers { namespace } => {
            RegistryView::Names(store.names_in_namespace(&namespace)?)
        }
        RegistryQuery::Profile { name } => {
            crate::registry::profiles::find(store, &name)?;
            RegistryView::Found
        }
        RegistryQuery::ActionState { name } => {
            RegistryView::ActionState(store.action_by_name(&name)?.map(|a| a.state))
        }
        other => {
            return Err(ApiError::Protocol {
                message: format!("the registry call `{}` has no answer", other.name()),
            });
        }
    })
}

/// The invariant calls of [`answer`].
fn answer_invariants(
    engine: &Engine,
    store: &Store,
    request: RegistryQuery,
) -> Result<RegistryView, ApiError> {
    use crate::registry::invariants;
    Ok(match request {
        RegistryQuery::Invariants { filter, regex } => {
            let re = pattern(regex.as_deref())?;
            RegistryView::Invariants(
                invariants::list(store, &filter)?
                    .into_iter()
                    .filter(|i| re.as_ref().is_none_or(|r| r.is_match(&i.text)))
                    .collect(),
            )
        }
        RegistryQuery::Invariant { invariant } => {
            RegistryView::Invariants(vec![invariants::find(store, &invariant)?])
        }
        RegistryQuery::EffectiveInvariants {
            plan,
            global_actor,
            regex,
        } => RegistryView::EffectiveInvariants(Box::new(effective(
            engine,
            store,
            &plan,
            global_actor.as_deref(),
            regex.as_deref(),
        )?)),
        other => answer_environment(engine, store, other)?,
    })
}

/// A regular expression given to a call.
fn pattern(regex: Option<&str>) -> Result<Option<regex::Regex>, ApiError> {
    regex
        .map(regex::Regex::new)
        .transpose()
        .map_err(|e| ApiError::InvalidInput {
            message: format!("invalid regular expression: {e}"),
        })
}

/// The rows of `resource list`.
fn resource_rows(store: &Store, f: &ResourceFilter) -> Result<Vec<ResourceRow>, ApiError> {
    let re = pattern(f.regex.as_deref())?;
    let ty = f.type_name.as_deref();
    let ns = f.namespace.as_deref();
    let mut rows = Vec::new();
    for r in store.resources()? {
        let keep = (f.all || ty.is_some() || !r.is_discovered())
            && ty.is_none_or(|t| r.type_name == t)
            && ns.is_none_or(|n| r.name.starts_with(&format!("{n}/")))
            && re.as_ref().is_none_or(|re| re.is_match(&r.name));
        if !keep {
            continue;
        }
        let children = store.children(&r.resource_id)?.len();
        let projects = store
            .project_links_of(&[r.resource_id])?
            .into_iter()
            .map(|(p, _, _)| p)
            .collect();
        rows.push(ResourceRow {
            resource: r,
            children,
            projects,
        });
    }
    Ok(rows)
}

/// The custom type `word` names, if one is registered (`None` for anything else, built-in
/// names included).
fn custom_type_named(store: &Store, word: &str) -> Result<Option<CustomType>, ApiError> {
    use crate::registry::custom_types;
    if word.is_empty() || word.starts_with('-') || builtin_type(word).is_some() {
        return Ok(None);
    }
    match custom_types::find(store, word) {
        Ok(t) => Ok(Some(t)),
        Err(TypeError::NotFound(_) | TypeError::BuiltIn(_)) => Ok(None),
        Err(e) => Err(e.into()),
    }
}

/// The effective invariants of a plan, without those a correction removed (`plan correct`
/// of an `invariant_enforced` decision), narrowed to texts matching `regex`.
fn effective(
    engine: &Engine,
    store: &Store,
    plan: &str,
    global_actor: Option<&str>,
    regex: Option<&str>,
) -> Result<EffectiveInvariants, ApiError> {
    let re = pattern(regex)?;
    let (plan_id, mut view, choice) = crate::registry::invariants::effective(
        store,
        &engine.settings().providers,
        plan,
        global_actor,
    )?;
    let removed = removed_by_correction(store, &plan_id)?;
    let (gone, kept): (Vec<_>, Vec<_>) = std::mem::take(&mut view.effective)
        .into_iter()
        .partition(|i| removed.iter().any(|(id, _)| *id == i.invariant_id));
    // The regular expression narrows what is shown; the reconciliation ran over every
    // invariant.
    view.effective = kept
        .into_iter()
        .filter(|i| re.as_ref().is_none_or(|r| r.is_match(&i.text)))
        .collect();
    Ok(EffectiveInvariants {
        plan_id,
        view,
        choice,
        removed,
        gone,
    })
}

/// The invariants a correction removed from `plan`: (invariant id, the current correcting
/// decision), from the `user_intervention` decisions that replaced `invariant_enforced` ones.
fn removed_by_correction(store: &Store, plan: &Id) -> Result<Vec<(String, Id)>, ApiError> {
    let decisions = store.decisions(plan)?;
    Ok(decisions
        .iter()
        .filter(|d| d.is_current() && d.context_snapshot.get("removed_invariant").is_some())
        .filter_map(|d| {
            let old = d.context_snapshot["invariant_decision"].as_str()?;
            let old = decisions
                .iter()
                .find(|o| o.decision_id.to_string() == old)?;
            let id = old.context_snapshot["references"][0].as_str()?;
            Some((id.to_string(), d.decision_id))
        })
        .collect())
}

/// The user-addable custom types of the data directory `paths` names, read only from this
/// machine's database (for `agents resource add --help`, which runs before any command);
/// empty without a database or when it cannot be read.
pub fn local_addable_types(paths: &crate::paths::Paths) -> Vec<CustomType> {
    let database = paths.database();
    if !database.exists() {
        return Vec::new();
    }
    let Ok(store) = Store::open_read_only(&database) else {
        return Vec::new();
    };
    crate::registry::custom_types::all(&store)
        .unwrap_or_default()
        .into_iter()
        .filter(|t| t.user_addable)
        .collect()
}

/// The view a call answered with when it is not the one asked for.
fn unexpected(asked: &'static str) -> ApiError {
    ApiError::Protocol {
        message: format!("the registry call `{asked}` was answered with another view"),
    }
}
