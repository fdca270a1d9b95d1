//! Projects (spec section 14): the boundary of a plan's work — linked resources (with a
//! per-project read-only flag and alias), validations, project invariants, an invariant actor
//! and an automation profile.

use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::config::Provider;
use crate::domain::invariant::{Invariant, NewInvariant};
use crate::domain::name::{NameError, QualifiedName};
pub use crate::domain::project::{LinkedResource, Project, Validation};
use crate::domain::{Id, InvariantScope, Plan, ProcessingState, ProjectLink};
use crate::registry::actors::{self, ActorError};
use crate::registry::profiles::{self, ProfileError};
use crate::registry::resources::{self, ResourceError};
use crate::store::{Store, StoreError};

/// Prefix of validation ids.
pub const VALIDATION_PREFIX: &str = "val_";
/// Default validation timeout, in seconds (spec 06).
pub const DEFAULT_TIMEOUT_SECS: u64 = 300;

/// Errors from the project registry.
#[derive(Debug, thiserror::Error)]
pub enum ProjectError {
    /// The name is invalid or reserved.
    #[error("project name `{name}`: {source}")]
    Name {
        /// The name as given.
        name: String,
        /// Why.
        source: NameError,
    },
    /// A project of that name exists.
    #[error("project {0} already exists")]
    Exists(String),
    /// No project of that name or id.
    #[error("project `{0}` not found")]
    NotFound(crate::registry::lookup::Missing),
    /// An id prefix matches several items.
    #[error(transparent)]
    Ambiguous(crate::domain::IdPrefixError),
    /// The resource is linked already.
    #[error("resource {resource} is already linked to {project}")]
    AlreadyLinked {
        /// Project.
        project: String,
        /// Resource.
        resource: String,
    },
    /// The resource is not linked.
    #[error("resource {resource} is not linked to {project}")]
    NotLinked {
        /// Project.
        project: String,
        /// Resource.
        resource: String,
    },
    /// The alias is invalid or used.
    #[error("--alias: {0}")]
    Alias(String),
    /// `--resource` listed twice.
    #[error("--resource {0} is given twice")]
    DuplicateResource(String),
    /// Validations still use the resource.
    #[error("validations {} of {project} are scoped to {resource}", ids.join(", "))]
    UsedByValidations {
        /// Project.
        project: String,
        /// Resource.
        resource: String,
        /// Validation ids.
        ids: Vec<String>,
    },
    /// Plans that are not finished block deletion.
    #[error("project {project} has {} active plan(s)", plans.len())]
    ActivePlans {
        /// Project.
        project: String,
        /// `(id, phase/state, action)`.
        plans: Vec<(String, String, String)>,
    },
    /// A validation was not found.
    #[error("validation `{id}` not found in {project}")]
    ValidationNotFound {
        /// Project.
        project: String,
        /// Id as given.
        id: String,
    },
    /// A value is out of range or empty.
    #[error("{flag}: {message}")]
    Invalid {
        /// The flag or argument.
        flag: &'static str,
        /// What is wrong.
        message: String,
    },
    /// Writing the backup failed; nothing was deleted.
    #[error("cannot write the project backup {}: {message}; nothing was deleted", path.display())]
    Backup {
        /// The backup file.
        path: PathBuf,
        /// The I/O error.
        message: String,
    },
    /// A resource did not resolve.
    #[error(transparent)]
    Resource(#[from] ResourceError),
    /// An actor did not resolve.
    #[error(transparent)]
    Actor(#[from] ActorError),
    /// A profile did not resolve.
    #[error(transparent)]
    Profile(#[from] ProfileError),
    /// The database failed.
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl From<crate::registry::lookup::LookupError> for ProjectError {
    fn from(e: crate::registry::lookup::LookupError) -> Self {
        match e {
            crate::registry::lookup::LookupError::NotFound(m) => ProjectError::NotFound(m),
            crate::registry::lookup::LookupError::Ambiguous(a) => ProjectError::Ambiguous(a),
        }
    }
}

/// What `project create` was given.
#[derive(Debug, Clone, Default, serde::Serialize, serde::Deserialize, schemars::JsonSchema)]
pub struct CreateRequest {
    /// NAME.
    pub name: String,
    /// `--description`.
    pub description: Option<String>,
    /// `--resource`, in order.
    pub resources: Vec<String>,
    /// `--invariant`, in order.
    pub invariants: Vec<String>,
    /// `--invariant-actor`.
    pub invariant_actor: Option<String>,
}

/// A created project.
#[derive(Debug, Clone, Serialize, serde::Deserialize, schemars::JsonSchema)]
pub struct Created {
    /// The project.
    pub project: Project,
    /// Linked resources.
    pub resources: Vec<LinkedResource>,
    /// Project invariants created with it.
    pub invariants: Vec<Invariant>,
}

/// Creates a project with its resources and invariants in one transaction.
///
/// # Errors
/// Name errors, an existing project, unknown resources or actor, empty invariants.
pub fn create(
    store: &mut Store,
    providers: &[Provider],
    req: &CreateRequest,
) -> Result<Created, ProjectError> {
    let name_err = |source| ProjectError::Name {
        name: req.name.clone(),
        source,
    };
    let q = QualifiedName::resolve_user_input(&req.name, &[]).map_err(name_err)?;
    q.check_user_creatable(&providers.iter().map(|p| p.name.clone()).collect::<Vec<_>>())
        .map_err(name_err)?;
    if q.name.contains(':') {
        return Err(ProjectError::Invalid {
            flag: "NAME",
            message: format!("`{}`: `:` is not allowed in project names", req.name),
        });
    }
    let name = q.to_string();
    if store.project_by_name(&name)?.is_some() {
        return Err(ProjectError::Exists(name));
    }
    let mut resources = Vec::new();
    for r in &req.resources {
        let res = resources::find(store, r)?;
        if resources
            .iter()
            .any(|l: &LinkedResource| l.resource.resource_id == res.resource_id)
        {
            return Err(ProjectError::DuplicateResource(res.name));
        }
        resources.push(LinkedResource {
            resource: res,
            alias: None,
            read_only: false,
        });
    }
    if let Some(a) = &req.invariant_actor {
        actors::resolve(store, providers, a)?;
    }
    let now = super::now();
    let project = Project {
        project_id: Id::generate(),
        name,
        description: req.description.clone(),
        invariant_actor: req.invariant_actor.as_deref().map(actors::canonical),
        automation_profile: None,
        created_at: now,
        updated_at: now,
    };
    let mut rows = Vec::new();
    for t in &req.invariants {
        if t.trim().is_empty() {
            return Err(ProjectError::Invalid {
                flag: "--invariant",
                message: "an invariant cannot be empty".into(),
            });
        }
        if let Err(m) = crate::registry::invariant_form::machine_form(t) {
            return Err(ProjectError::Invalid {
                flag: "--invariant",
                message: format!("invariant `{}`: {m}", t.trim()),
            });
        }
        let mut r = NewInvariant::new(t, None, InvariantScope::Project);
        r.project_id = Some(project.project_id.to_string());
        rows.push(r);
    }
    store.insert_project(&project, &resources, &rows)?;
    let invariants = rows
        .iter()
        .filter_map(|r| store.invariant(&r.invariant_id).transpose())
        .collect::<Result<Vec<_>, _>>()?;
    Ok(Created {
        project,
        resources,
        invariants,
    })
}

/// Finds a project by name (bare names mean `local/NAME`) or id / unique id prefix.
///
/// # Errors
/// [`ProjectError::NotFound`].
pub fn find(store: &Store, input: &str) -> Result<Project, ProjectError> {
    Ok(crate::registry::lookup::Lookup {
        kind: "project",
        by_name: &|n| store.project_by_name(n),
        by_id: &|i| store.project_by_id(i),
        ids: &|| store.project_ids(),
        names: &|| Ok(store.projects()?.into_iter().map(|p| p.name).collect()),
    }
    .find(input)??)
}

/// Links a registered resource to a project.
///
/// # Errors
/// Unknown project or resource, an existing link, an invalid or duplicate alias.
pub fn link_resource(
    store: &mut Store,
    project: &str,
    resource: &str,
    read_only: bool,
    alias: Option<&str>,
) -> Result<(Project, LinkedResource), ProjectError> {
    let p = find(store, project)?;
    let r = resources::find(store, resource)?;
    let links = store.project_resources(&p.project_id)?;
    if links
        .iter()
        .any(|l| l.resource.resource_id == r.resource_id)
    {
        return Err(ProjectError::AlreadyLinked {
            project: p.name,
            resource: r.name,
        });
    }
    let alias = match alias {
        Some(a) => {
            let checked = ProjectLink::new(&p.name, Some(a), read_only)
                .map_err(|e| ProjectError::Alias(e.to_string()))?
                .alias;
            if let Some(other) = links.iter().find(|l| l.alias == checked) {
                return Err(ProjectError::Alias(format!(
                    "`{}` is already the alias of {} in {}",
                    a, other.resource.name, p.name
                )));
            }
            checked
        }
        None => None,
    };
    let link = LinkedResource {
        resource: r,
        alias,
        read_only,
    };
    store.insert_project_resource(&p.project_id, &link, links.len())?;
    Ok((p, link))
}

/// Checks that a resource can be unlinked; returns the project, the link and the project's
/// active plans (to warn about).
///
/// # Errors
/// Unknown project or resource, [`ProjectError::NotLinked`], [`ProjectError::UsedByValidations`].
pub fn check_unlink(
    store: &Store,
    project: &str,
    resource: &str,
) -> Result<(Project, LinkedResource, Vec<Plan>), ProjectError> {
    let p = find(store, project)?;
    let links = store.project_resources(&p.project_id)?;
    let target = resources::find(store, resource).ok();
    let link = links
        .into_iter()
        .find(|l| {
            target
                .as_ref()
                .is_some_and(|t| t.resource_id == l.resource.resource_id)
                || l.alias.as_deref() == Some(resource)
        })
        .ok_or_else(|| ProjectError::NotLinked {
            project: p.name.clone(),
            resource: resource.to_string(),
        })?;
    let ids: Vec<String> = store
        .validations(&p.project_id)?
        .into_iter()
        .filter(|v| v.resource.as_deref() == Some(link.resource.name.as_str()))
        .map(|v| v.validation_id)
        .collect();
    if !ids.is_empty() {
        return Err(ProjectError::UsedByValidations {
            project: p.name,
            resource: link.resource.name,
            ids,
        });
    }
    let active = active_plans(store, &p)?;
    Ok((p, link, active))
}

/// Unlinks a resource (it stays registered).
///
/// # Errors
/// As [`check_unlink`].
pub fn unlink_resource(
    store: &mut Store,
    project: &str,
    resource: &str,
) -> Result<(Project, LinkedResource, Vec<Plan>), ProjectError> {
    let (p, link, active) = check_unlink(store, project, resource)?;
    store.delete_project_resource(&p.project_id, &link.resource.resource_id)?;
    Ok((p, link, active))
}

/// Plans targeting the project that are not applied or cancelled.
///
/// # Errors
/// Store errors.
pub fn active_plans(store: &Store, project: &Project) -> Result<Vec<Plan>, StoreError> {
    Ok(store
        .plans_for_project(&project.project_id)?
        .into_iter()
        .filter(|p| !p.status.is_terminal())
        .collect())
}

/// A row of `project list`.
#[derive(Debug, Clone, Serialize, serde::Deserialize, schemars::JsonSchema)]
pub struct Summary {
    /// The project.
    pub project: Project,
    /// Linked resources.
    pub resources: usize,
    /// Active plans.
    pub active_plans: usize,
}

/// Projects, optionally filtered by namespace and a regular expression on the name.
///
/// # Errors
/// Store errors.
pub fn list(
    store: &Store,
    namespace: Option<&str>,
    pattern: Option<&regex::Regex>,
) -> Result<Vec<Summary>, ProjectError> {
    let mut out = Vec::new();
    for p in store.projects()? {
        if namespace.is_some_and(|ns| !p.name.starts_with(&format!("{ns}/"))) {
            continue;
        }
        if pattern.is_some_and(|re| !re.is_match(&p.name)) {
            continue;
        }
        out.push(Summary {
            resources: store.project_resources(&p.project_id)?.len(),
            active_plans: active_plans(store, &p)?.len(),
            project: p,
        });
    }
    Ok(out)
}

/// Everything `project show` displays.
#[derive(Debug, Clone, Serialize, serde::Deserialize, schemars::JsonSchema)]
pub struct Details {
    /// The project.
    pub project: Project,
    /// Linked resources, in link order.
    pub resources: Vec<LinkedResource>,
    /// Validations.
    pub validations: Vec<Validation>,
    /// Project invariants.
    pub invariants: Vec<Invariant>,
    /// Active plans.
    pub active_plans: Vec<Plan>,
}

/// Loads a project's details.
///
/// # Errors
/// [`ProjectError::NotFound`], store errors.
pub fn details(store: &Store, input: &str) -> Result<Details, ProjectError> {
    let project = find(store, input)?;
    Ok(Details {
        resources: store.project_resources(&project.project_id)?,
        validations: store.validations(&project.project_id)?,
        invariants: store
            .invariants()?
            .into_iter()
            .filter(|i| {
                i.scope == InvariantScope::Project
                    && i.project.as_deref() == Some(project.name.as_str())
            })
            .collect(),
        active_plans: active_plans(store, &project)?,
        project,
    })
}

/// What `project delete` did.
#[derive(Debug, Clone, Serialize, serde::Deserialize, schemars::JsonSchema)]
pub struct Deleted {
    /// The deleted project.
    pub project: Project,
    /// Resources that were linked (they stay registered).
    pub resources_unlinked: usize,
    /// Validations removed.
    pub validations_removed: usize,
    /// Project invariants removed.
    pub invariants_removed: usize,
    /// Plans cancelled by `--force`: (id, `phase/state` before).
    pub plans_cancelled: Vec<(String, String)>,
    /// The JSON backup of the project's records.
    pub backup: PathBuf,
}

/// The project's active plans as `(id, phase/state, action)`, for the blocked message.
fn describe(plans: &[Plan]) -> Vec<(String, String, String)> {
    plans
        .iter()
        .map(|p| {
            (
                p.plan_id.to_string(),
                format!("{}/{}", p.phase(), p.state()),
                p.action_name.clone(),
            )
        })
        .collect()
}

/// Checks whether a project can be deleted without `--force`.
///
/// # Errors
/// [`ProjectError::ActivePlans`] when plans that are not applied or cancelled target it.
pub fn check_delete(
    store: &Store,
    input: &str,
    force: bool,
) -> Result<(Project, Vec<Plan>), ProjectError> {
    let project = find(store, input)?;
    let active = active_plans(store, &project)?;
    if !active.is_empty() && !force {
        return Err(ProjectError::ActivePlans {
            project: project.name,
            plans: describe(&active),
        });
    }
    Ok((project, active))
}

/// Deletes a project after writing a JSON backup of its records into `backups_dir`. With
/// `force`, active plans are cancelled first (in the same transaction as the deletion).
///
/// # Errors
/// As [`check_delete`]; [`ProjectError::Backup`] when the backup cannot be written (nothing is
/// deleted then).
pub fn delete(
    store: &mut Store,
    input: &str,
    force: bool,
    backups_dir: &Path,
) -> Result<Deleted, ProjectError> {
    let (project, active) = check_delete(store, input, force)?;
    let d = details(store, &project.name)?;
    let now = super::now();
    let stamp = now.strftime("%Y%m%dT%H%M%SZ").to_string();
    let file = backups_dir.join(format!(
        "project-{}-{stamp}.json",
        project.name.replace('/', "-")
    ));
    let backup = serde_json::json!({
        "kind": "project-backup",
        "deleted_at": now.to_string(),
        "project": d.project,
        "resources": d.resources.iter().map(|l| serde_json::json!({"resource": l.resource.name, "resource_id": l.resource.resource_id.to_string(), "alias": l.alias, "read_only": l.read_only})).collect::<Vec<_>>(),
        "validations": d.validations,
        "invariants": d.invariants,
        "plans": store.plans_for_project(&project.project_id)?.iter().map(|p| p.plan_id.to_string()).collect::<Vec<_>>(),
    });
    let write = || -> std::io::Result<()> {
        std::fs::create_dir_all(backups_dir)?;
        let tmp = file.with_extension("json.tmp");
        let mut bytes = serde_json::to_vec_pretty(&backup).expect("backup serializes");
        bytes.push(b'\n');
        std::fs::write(&tmp, bytes)?;
        std::fs::rename(&tmp, &file)
    };
    write().map_err(|e| ProjectError::Backup {
        path: file.clone(),
        message: e.to_string(),
    })?;
    let mut cancelled = Vec::new();
    let mut statuses = Vec::new();
    for p in &active {
        let before = format!("{}/{}", p.phase(), p.state());
        let mut status = p.status;
        if status.set_state(ProcessingState::Cancelled).is_ok() {
            statuses.push((p.plan_id, status));
            cancelled.push((p.plan_id.to_string(), before));
        }
    }
    // Each cancellation is recorded as a `plan_cancelled` event, like `plan cancel`, in the
    // transaction that cancels the plan and deletes the project.
    let reason = format!("project {} was deleted with --force", project.name);
    store.delete_project(&project.project_id, &statuses, now, |tx| {
        for (id, status) in &statuses {
            withdraw_approvals(tx, id, &reason)?;
            crate::events::append(
                tx,
                Some(id),
                &crate::events::EventKind::PlanCancelled(crate::domain::event::PlanCancelled {
                    phase: status.phase,
                    reason: reason.clone(),
                    project_deleted: Some(project.name.clone()),
                }),
            )?;
        }
        Ok(())
    })?;
    Ok(Deleted {
        resources_unlinked: d.resources.len(),
        validations_removed: d.validations.len(),
        invariants_removed: d.invariants.len(),
        plans_cancelled: cancelled,
        backup: file,
        project,
    })
}

/// Withdraws the pending approvals of a plan cancelled because its project was deleted, as
/// `plan cancel` does, so none is left to answer (each with its `approval_resolved` event).
fn withdraw_approvals(
    tx: &crate::store::Transaction<'_>,
    plan: &Id,
    reason: &str,
) -> Result<(), StoreError> {
    let answer = serde_json::json!({"reason": "the plan was cancelled", "cancel_reason": reason});
    for id in crate::store::approvals::pending_ids_in(tx, plan, None)? {
        crate::store::approvals::resolve_in(
            tx,
            &id,
            crate::domain::ApprovalStatus::Withdrawn,
            &answer,
        )?;
    }
    crate::store::lifecycle_run::set_state_reason(tx, plan, Some("cancelled"))
}

/// Sets (or with `None` clears) the project's automation profile; returns the project and the
/// previous value.
///
/// # Errors
/// Unknown project or profile.
pub fn set_profile(
    store: &mut Store,
    project: &str,
    profile: Option<&str>,
) -> Result<(Project, Option<String>), ProjectError> {
    let mut p = find(store, project)?;
    let name = profile
        .map(|n| profiles::find(store, n).map(|p| p.name))
        .transpose()?;
    let previous = p.automation_profile.clone();
    p.automation_profile = name;
    p.updated_at = super::now();
    store.update_project_profile(&p)?;
    Ok((p, previous))
}

/// What `project validation add` was given.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize, schemars::JsonSchema)]
pub struct ValidationRequest {
    /// PROJECT.
    pub project: String,
    /// COMMAND.
    pub command: String,
    /// `--description`.
    pub description: Option<String>,
    /// `--informational` makes it false.
    pub required: bool,
    /// `--timeout`.
    pub timeout_secs: u64,
    /// `--resource` (name or alias of a linked resource).
    pub resource: Option<String>,
    /// `--network`: keep the host network.
    pub network: bool,
}

/// Adds a validation.
///
/// # Errors
/// Unknown project, an empty command, a timeout of 0, a resource that is not linked.
pub fn add_validation(
    store: &mut Store,
    req: &ValidationRequest,
) -> Result<Validation, ProjectError> {
    let p = find(store, &req.project)?;
    if req.command.trim().is_empty() {
        return Err(ProjectError::Invalid {
            flag: "COMMAND",
            message: "the command is empty".into(),
        });
    }
    if req.timeout_secs == 0 || req.timeout_secs > 86_400 {
        return Err(ProjectError::Invalid {
            flag: "--timeout",
            message: format!(
                "{} is out of range; use 1 to 86400 seconds",
                req.timeout_secs
            ),
        });
    }
    let resource = match &req.resource {
        None => None,
        Some(r) => {
            let links = store.project_resources(&p.project_id)?;
            let target = resources::find(store, r).ok();
            let link = links
                .into_iter()
                .find(|l| {
                    l.alias.as_deref() == Some(r.as_str())
                        || target
                            .as_ref()
                            .is_some_and(|t| t.resource_id == l.resource.resource_id)
                })
                .ok_or_else(|| ProjectError::NotLinked {
                    project: p.name.clone(),
                    resource: r.clone(),
                })?;
            Some(link.resource)
        }
    };
    let v = Validation {
        validation_id: format!("{VALIDATION_PREFIX}{}", Id::generate()),
        project: p.name.clone(),
        command: req.command.clone(),
        description: req.description.clone(),
        required: req.required,
        timeout_secs: req.timeout_secs,
        resource: resource.as_ref().map(|r| r.name.clone()),
        network: req.network,
        created_at: super::now(),
    };
    store.insert_validation(&p.project_id, &v, resource.as_ref().map(|r| &r.resource_id))?;
    Ok(v)
}

/// Finds a validation of a project by id (`val_...` or a unique prefix of the ULID part).
///
/// # Errors
/// [`ProjectError::ValidationNotFound`].
pub fn find_validation(
    store: &Store,
    project: &str,
    id: &str,
) -> Result<(Project, Validation), ProjectError> {
    let p = find(store, project)?;
    let bare = id
        .strip_prefix(VALIDATION_PREFIX)
        .unwrap_or(id)
        .to_ascii_uppercase();
    let all = store.validations(&p.project_id)?;
    let matches: Vec<&Validation> = all
        .iter()
        .filter(|v| {
            bare.len() >= 4 && v.validation_id[VALIDATION_PREFIX.len()..].starts_with(&bare)
        })
        .collect();
    match matches.as_slice() {
        [one] => Ok((p.clone(), (*one).clone())),
        _ => Err(ProjectError::ValidationNotFound {
            project: p.name,
            id: id.to_string(),
        }),
    }
}

/// Removes a validation.
///
/// # Errors
/// As [`find_validation`].
pub fn remove_validation(
    store: &mut Store,
    project: &str,
    id: &str,
) -> Result<Validation, ProjectError> {
    let (_, v) = find_validation(store, project, id)?;
    store.delete_validation(&v.validation_id)?;
    Ok(v)
}
