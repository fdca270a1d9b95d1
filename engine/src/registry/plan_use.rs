//! Plan creation (`agents plan use`, spec sections 08-10 and 27): one application of an
//! available action to one or more projects.
//!
//! `plan use` checks the arguments against the action's schema, resolves every actor, resolves
//! and freezes the automation profile (its name, where it came from and a snapshot of its 13
//! flags), renders the action's text and script with the argument values, carries the action's
//! invariants and the `--invariant` texts into the plan, and stores the plan at
//! strategize/queued, attempt 1, with its project links in order — all in one transaction. A
//! non-reusable action is archived in the same transaction. Running the plan is the lifecycle's
//! job.

use serde::Serialize;
use serde_json::json;

use crate::config::Provider;
use crate::domain::{ActionState, Id, InvariantScope, Plan, ProjectLink};
use crate::registry::actions::{self, Action, ActionError, ArgumentError, ScriptStep};
use crate::registry::actors::{self, ActorError};
use crate::registry::invariants::{self, EffectiveView, NewInvariant};
use crate::registry::profiles::{self, Profile, ProfileError, ResolvedFrom};
use crate::registry::projects::{self, Project, ProjectError};
use crate::registry::template::TemplateError;
use crate::store::{Store, StoreError};

/// What `plan use` was given.
#[derive(Debug, Clone, Default, serde::Serialize, serde::Deserialize, schemars::JsonSchema)]
pub struct Request {
    /// ACTION (name or id).
    pub action: String,
    /// PROJECT..., in order.
    pub projects: Vec<String>,
    /// `--automation-profile`.
    pub automation_profile: Option<String>,
    /// `--invariant`, in order.
    pub invariants: Vec<String>,
    /// `--strategy-actor`.
    pub strategy_actor: Option<String>,
    /// `--execution-actor`.
    pub execution_actor: Option<String>,
    /// `--estimation-actor`.
    pub estimation_actor: Option<String>,
    /// `--invariant-actor`.
    pub invariant_actor: Option<String>,
    /// `--arg NAME=VALUE`, in order.
    pub args: Vec<String>,
    /// The global profile (config key or environment), if set.
    pub global_profile: Option<String>,
}

/// Errors from plan creation.
#[derive(Debug, thiserror::Error)]
pub enum PlanUseError {
    /// The action is draft or archived.
    #[error("action {name} is {state}; only available actions can be used")]
    NotAvailable {
        /// The action.
        name: String,
        /// Its state.
        state: ActionState,
    },
    /// No project was given.
    #[error("give at least one PROJECT")]
    NoProject,
    /// A project is listed twice.
    #[error("project {0} is listed twice")]
    DuplicateProject(String),
    /// An argument is wrong.
    #[error(transparent)]
    Argument(#[from] ArgumentError),
    /// An actor does not resolve.
    #[error("{field}: {source}")]
    Actor {
        /// `--strategy-actor` or the action field.
        field: String,
        /// Why.
        source: Box<ActorError>,
    },
    /// A template failed to render.
    #[error("{field}: {source}")]
    Template {
        /// The action field.
        field: String,
        /// Why.
        source: TemplateError,
    },
    /// `--invariant` is empty.
    #[error("--invariant: an invariant cannot be empty")]
    EmptyInvariant,
    /// An `--invariant` machine form does not parse.
    #[error("--invariant: {0}")]
    BadInvariant(String),
    /// The action failed.
    #[error(transparent)]
    Action(Box<ActionError>),
    /// A project failed.
    #[error(transparent)]
    Project(Box<ProjectError>),
    /// The profile failed.
    #[error(transparent)]
    Profile(#[from] ProfileError),
    /// A target resource's base (HEAD commit, branch) cannot be recorded.
    #[error("{0}")]
    Base(String),
    /// The script has `run:` steps, shell commands cannot be confined by the kernel here, and
    /// the profile blocks unsafe tools.
    #[error(
        "the action runs shell commands (script step `{step}`), but shell commands cannot be confined \
         on this machine ({why}) and profile `{profile}` blocks unsafe tools"
    )]
    UnsafeShell {
        /// The first `run:` step.
        step: String,
        /// Why confinement is unavailable.
        why: String,
        /// The profile that blocks unsafe tools.
        profile: String,
    },
    /// The plan has several resources and script steps the script executor runs name none,
    /// so Execute could not tell where they run.
    #[error(
        "the plan has several resources ({}) and script step{} {} name{} none of them",
        resources.join(", "),
        if steps.len() == 1 { "" } else { "s" },
        steps.iter().map(|s| format!("`{s}`")).collect::<Vec<_>>().join(", "),
        if steps.len() == 1 { "s" } else { "" }
    )]
    UnboundSteps {
        /// The steps that name no resource, in script order.
        steps: Vec<String>,
        /// The plan's resources.
        resources: Vec<String>,
    },
    /// An organization's policy refuses the plan (spec section 22); nothing was written.
    #[error("{0}")]
    Policy(Box<crate::team::policy::PolicyDenial>),
    /// The database failed.
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl From<crate::team::policy::PolicyDenial> for PlanUseError {
    fn from(d: crate::team::policy::PolicyDenial) -> Self {
        PlanUseError::Policy(Box::new(d))
    }
}

impl From<ActionError> for PlanUseError {
    fn from(e: ActionError) -> Self {
        PlanUseError::Action(Box::new(e))
    }
}

impl From<ProjectError> for PlanUseError {
    fn from(e: ProjectError) -> Self {
        PlanUseError::Project(Box::new(e))
    }
}

/// A created plan and what went into it.
#[derive(Debug, Clone, Serialize, serde::Deserialize, schemars::JsonSchema)]
pub struct Created {
    /// The stored plan.
    pub plan: Plan,
    /// The action it came from (state before use).
    pub action: Action,
    /// Target projects, in order.
    pub projects: Vec<Project>,
    /// The frozen profile.
    pub profile: Profile,
    /// Where the profile came from.
    pub profile_source: ResolvedFrom,
    /// Which actor references were overridden on the command line.
    pub actor_overrides: Vec<(String, String)>,
    /// The plan's effective invariants right now (reconciliation proper happens when the plan
    /// enters strategize).
    pub invariants: EffectiveView,
    /// Whether the action was archived because it is not reusable.
    pub action_archived: bool,
    /// The organization policies that bind the plan (those of its projects' namespaces).
    #[serde(default, skip_serializing_if = "crate::team::policy::Policies::is_empty")]
    pub policies: crate::team::policy::Policies,
}

fn check_actor(
    store: &Store,
    providers: &[Provider],
    field: &str,
    reference: &str,
) -> Result<String, PlanUseError> {
    actors::resolve(store, providers, reference)
        .map(|r| r.name().to_string())
        .map_err(|source| PlanUseError::Actor {
            field: field.to_string(),
            source: Box::new(source),
        })
}

/// Creates a plan (see the module documentation). Nothing is written when anything is wrong.
/// The policies binding a plan on `targets`, once the action's network, the profile and an
/// explicit budget passed them.
fn checked_policies(
    store: &Store,
    targets: &[Project],
    action: &Action,
    profile: &str,
    max_cost_usd: Option<f64>,
) -> Result<crate::team::policy::Policies, PlanUseError> {
    let policies = store.policies_of_items(targets.iter().map(|p| p.name.as_str()))?;
    policies.check_network(action.sandbox.as_ref().is_some_and(|sb| sb.network))?;
    policies.check_profile(profile)?;
    if max_cost_usd.is_some() {
        policies.check_budget(max_cost_usd)?;
    }
    Ok(policies)
}

/// Freezes what the policies ask of the plan's tool calls into its profile snapshot.
fn freeze_policies(plan: &mut Plan, policies: &crate::team::policy::Policies) {
    if !policies.is_empty()
        && let Some(snapshot) = plan.effective_profile_snapshot.as_mut()
    {
        snapshot["org_policy"] = json!({
            "orgs": policies.each.iter().map(|(org, _)| org).collect::<Vec<_>>(),
            "skills_require_approval": policies.skills_requiring_approval(),
        });
    }
}

/// The policies of the organizations whose namespaces the projects live in bind the plan
/// (spec section 22): a sandbox asking for the network, a profile they do not allow or a
/// budget (`max_cost_usd`, as asked for on the command line) above their cap is refused.
///
/// # Errors
/// [`PlanUseError`] naming the argument, actor, project, template or policy key at fault.
pub fn create(
    store: &mut Store,
    data_dir: &std::path::Path,
    providers: &[Provider],
    req: &Request,
    max_cost_usd: Option<f64>,
) -> Result<Created, PlanUseError> {
    let action = actions::find(store, &req.action)?;
    if action.state != ActionState::Available {
        return Err(PlanUseError::NotAvailable {
            name: action.name.clone(),
            state: action.state,
        });
    }
    let targets = target_projects(store, &req.projects)?;
    let bound = actions::bind_arguments(&action, &req.args)?;
    let (actors, overrides) = pick_actors(store, providers, &action, req)?;
    let project_profile = targets.iter().find_map(|p| p.automation_profile.clone());
    let (profile, source) = profiles::resolve(
        store,
        req.automation_profile.as_deref(),
        action.automation_profile.as_deref(),
        project_profile.as_deref(),
        req.global_profile.as_deref(),
    )?;
    let policies = checked_policies(store, &targets, &action, &profile.name, max_cost_usd)?;
    let values = actions::template_values(&action, &bound);
    let render = |field: &str, text: &str| {
        crate::registry::template::render(text, &values).map_err(|source| PlanUseError::Template {
            field: field.to_string(),
            source,
        })
    };
    let description = action
        .description
        .as_deref()
        .map(|d| render("description", d))
        .transpose()?;
    let dod = render("definition-of-done", &action.definition_of_done)?;
    let script = action
        .script
        .as_deref()
        .map(|s| actions::render_script(s, &values))
        .transpose()
        .map_err(|(field, source)| PlanUseError::Template { field, source })?;
    check_confinement(&profile, &action, script.as_deref())?;
    let cli_invariants = req
        .invariants
        .iter()
        .map(|t| match t.trim() {
            "" => Err(PlanUseError::EmptyInvariant),
            t => invariants::machine_form(t)
                .map(|_| t.to_string())
                .map_err(|m| PlanUseError::BadInvariant(format!("invariant `{t}`: {m}"))),
        })
        .collect::<Result<Vec<_>, _>>()?;

    let now = super::now();
    let mut plan = Plan::new(
        &action.name,
        action.name.rsplit('/').next().unwrap_or(&action.name),
        now,
    );
    plan.description = description;
    plan.definition_of_done = Some(dod);
    plan.project_links = targets
        .iter()
        .map(|p| ProjectLink {
            project_name: p.name.clone(),
            alias: None,
            read_only: action.read_only,
        })
        .collect();
    plan.automation_profile = Some(profile.name.clone());
    plan.automation_level = profile.flags.level();
    plan.effective_profile_snapshot = Some(json!({
        "name": profile.name,
        "source": source,
        "flags": profile.flags,
    }));
    freeze_policies(&mut plan, &policies);
    [
        plan.strategy_actor,
        plan.execution_actor,
        plan.estimation_actor,
        plan.invariant_actor,
    ] = actors;
    plan.arguments = bound;

    let plan_id = plan.plan_id.to_string();
    let rows = invariant_rows(store, &action, &plan_id, &cli_invariants)?;
    let archive = !action.reusable;
    let mut archived = action.clone();
    if archive {
        archived.state = ActionState::Archived;
        archived.updated_at = now;
        archived.archived_at = Some(now);
    }
    let origin = crate::store::plan_links::Origin {
        action_id: action.action_id,
        profile_source: source,
        read_only: action.read_only,
        script,
        sandbox: action.sandbox.clone(),
    };
    let bases =
        crate::sandbox::bases::collect(store, data_dir, &targets, action.read_only).map_err(|e| match e {
            crate::sandbox::bases::BaseError::Store(s) => PlanUseError::Store(s),
            other => PlanUseError::Base(other.to_string()),
        })?;
    check_steps_name_resources(
        plan.execution_actor.as_deref(),
        origin.script.as_deref(),
        &bases,
    )?;
    store.create_plan(
        &plan,
        &targets.iter().map(|p| p.project_id).collect::<Vec<Id>>(),
        &origin,
        &rows,
        archive.then_some(&archived),
        &bases,
        None,
        Some(&crate::lease::this_process(plan.phase().as_str())),
    )?;
    let plan = store.plan(&plan.plan_id)?.unwrap_or(plan);
    let (_, view, _) =
        invariants::effective(store, providers, &plan_id, None).map_err(|e| match e {
            invariants::InvariantError::Store(s) => PlanUseError::Store(s),
            other => PlanUseError::Store(StoreError::Corrupt {
                table: "plans",
                column: "invariants",
                message: other.to_string(),
            }),
        })?;
    Ok(Created {
        plan,
        action,
        projects: targets,
        profile,
        profile_source: source,
        actor_overrides: overrides,
        invariants: view,
        action_archived: archive,
        policies,
    })
}

/// Refuses a script the script executor would run in a plan of several resources when some
/// of its `run:` or `tool:` steps say nowhere which resource they work on (spec section 14,
/// bindings resolve per step): Execute would stop at the first of them, after the earlier
/// steps ran. A step names its resource with `resource:`, a `resource` argument, or a
/// `path://RESOURCE/...` argument; a resource whose alias is the tool's slot (`directory`,
/// `repo`) binds without one, and a git tool binds the only git checkout.
fn check_steps_name_resources(
    execution_actor: Option<&str>,
    script: Option<&[ScriptStep]>,
    bases: &[crate::store::lifecycle_run::PlanBase],
) -> Result<(), PlanUseError> {
    use crate::store::lifecycle_run::BaseKind;
    use crate::tools::ToolGroup;
    let (Some(actors::SCRIPT_EXECUTOR), Some(script)) = (execution_actor, script) else {
        return Ok(());
    };
    if bases.len() < 2 {
        return Ok(());
    }
    let names_one = |step: &ScriptStep| {
        step.resource.is_some()
            || step.args.as_ref().is_some_and(|args| {
                args.contains_key("resource")
                    || args
                        .values()
                        .any(|v| v.as_str().is_some_and(|s| s.starts_with("path://")))
            })
    };
    let binds_alone = |tool: &str| {
        let Some(group) = crate::tools::builtin(tool).map(|t| t.group()) else {
            // Another tool (MCP, skill script) binds as it declares: not judged here.
            return true;
        };
        let fits: Vec<_> = bases
            .iter()
            .filter(|b| group != ToolGroup::GitOperations || b.kind == BaseKind::GitCheckout)
            .collect();
        fits.len() < 2
            || fits
                .iter()
                .any(|b| b.alias.as_deref() == Some(group.slot()))
    };
    let steps: Vec<String> = script
        .iter()
        .filter(|s| s.spawn.is_none() && !names_one(s))
        .filter(|s| match (&s.run, &s.tool) {
            (Some(_), _) => !binds_alone("shell_execute"),
            (None, Some(tool)) => !binds_alone(tool),
            (None, None) => false,
        })
        .map(|s| s.name.clone())
        .collect();
    if steps.is_empty() {
        return Ok(());
    }
    Err(PlanUseError::UnboundSteps {
        steps,
        resources: bases.iter().map(|b| b.resource_name.clone()).collect(),
    })
}

/// A plan's strategy, execution, estimation and invariant actors.
type PlanActors = [Option<String>; 4];

/// The plan's actors (strategy, execution, estimation, invariant), each the one given on the
/// command line or else the action's, checked; and the command-line overrides by flag.
fn pick_actors(
    store: &Store,
    providers: &[Provider],
    action: &Action,
    req: &Request,
) -> Result<(PlanActors, Vec<(String, String)>), PlanUseError> {
    let mut overrides = Vec::new();
    let mut pick = |flag: &str,
                    field: &str,
                    given: &Option<String>,
                    default: Option<&String>|
     -> Result<Option<String>, PlanUseError> {
        match (given, default) {
            (Some(g), _) => {
                overrides.push((flag.trim_start_matches("--").to_string(), g.clone()));
                check_actor(store, providers, flag, g).map(Some)
            }
            (None, Some(d)) => check_actor(
                store,
                providers,
                &format!("action {} {field}", action.name),
                d,
            )
            .map(Some),
            (None, None) => Ok(None),
        }
    };
    let strategy = pick(
        "--strategy-actor",
        "strategy-actor",
        &req.strategy_actor,
        Some(&action.strategy_actor),
    )?;
    let execution = pick(
        "--execution-actor",
        "execution-actor",
        &req.execution_actor,
        Some(&action.execution_actor),
    )?;
    let estimation = pick(
        "--estimation-actor",
        "estimation-actor",
        &req.estimation_actor,
        action.estimation_actor.as_ref(),
    )?;
    let inv_actor = pick(
        "--invariant-actor",
        "invariant-actor",
        &req.invariant_actor,
        action.invariant_actor.as_ref(),
    )?;
    Ok(([strategy, execution, estimation, inv_actor], overrides))
}

/// The target projects of `plan use`, each named once.
fn target_projects(store: &Store, names: &[String]) -> Result<Vec<Project>, PlanUseError> {
    if names.is_empty() {
        return Err(PlanUseError::NoProject);
    }
    let mut targets: Vec<Project> = Vec::new();
    for p in names {
        let project = projects::find(store, p)?;
        if targets.iter().any(|t| t.project_id == project.project_id) {
            return Err(PlanUseError::DuplicateProject(project.name));
        }
        targets.push(project);
    }
    Ok(targets)
}

/// `run:` steps need kernel confinement unless the profile allows unsafe tools.
fn check_confinement(
    profile: &Profile,
    action: &Action,
    script: Option<&[ScriptStep]>,
) -> Result<(), PlanUseError> {
    if profile.flags.allow_unsafe_tools {
        return Ok(());
    }
    let Some(step) = script.into_iter().flatten().find(|st| st.run.is_some()) else {
        return Ok(());
    };
    let network = action.sandbox.as_ref().is_some_and(|sb| sb.network);
    if crate::tools::shell::capability(network).is_unsafe {
        return Err(PlanUseError::UnsafeShell {
            step: step.name.clone(),
            why: crate::sandbox::launcher::probe().describe().join("; "),
            profile: profile.name.clone(),
        });
    }
    Ok(())
}

/// The invariant rows a new plan starts with: those given with `--invariant`, and copies of
/// its action's invariants.
fn invariant_rows(
    store: &Store,
    action: &Action,
    plan_id: &str,
    given: &[String],
) -> Result<Vec<NewInvariant>, PlanUseError> {
    let mut rows: Vec<NewInvariant> = given
        .iter()
        .map(|t| {
            let mut r = NewInvariant::new(t, None, InvariantScope::Plan);
            r.plan_id = Some(plan_id.to_string());
            r
        })
        .collect();
    for inv in store.invariants()?.into_iter().filter(|i| {
        i.scope == InvariantScope::Action
            && i.plan_id.is_none()
            && i.action.as_deref() == Some(action.name.as_str())
    }) {
        let mut r = NewInvariant::new(&inv.text, inv.key.clone(), InvariantScope::Action);
        r.action_id = Some(action.action_id.to_string());
        r.plan_id = Some(plan_id.to_string());
        rows.push(r);
    }
    Ok(rows)
}

/// What a spawn asks for: a child plan of `action` with `args`, branched from its parent's
/// sandboxes.
#[derive(Debug, Clone)]
pub struct ChildRequest {
    /// The spawned action (name or id).
    pub action: String,
    /// Its arguments (JSON values; strings as written, others as their JSON text).
    pub args: serde_json::Map<String, serde_json::Value>,
    /// Guidance from whoever spawned it (a model executor's `create_subplan`); it becomes part
    /// of the child's root prompt.
    pub guidance: Option<String>,
    /// The child's bases: the parent's sandbox repositories at the spawn.
    pub bases: Vec<crate::store::lifecycle_run::PlanBase>,
    /// The link row (child id filled in by [`create_child`]).
    pub link: crate::store::children::ChildLink,
}

/// Creates a child plan of `parent` (one transaction: plan, origin, bases, child link, event).
/// It inherits the parent's projects and frozen automation profile (with what the
/// organizations' policies asked of it); its actors, text and script come from the spawned
/// action with the spawn's arguments. A spawned action whose sandbox asks for the network is
/// refused as `plan use` would refuse it. It is stored at
/// strategize/queued; the parent's process runs it.
///
/// # Errors
/// [`PlanUseError`] naming the action, argument or template at fault; nothing is written then.
pub fn create_child(
    store: &mut Store,
    providers: &[Provider],
    parent: &Plan,
    req: &ChildRequest,
) -> Result<Plan, PlanUseError> {
    let action = actions::find(store, &req.action)?;
    if action.state != ActionState::Available {
        return Err(PlanUseError::NotAvailable {
            name: action.name.clone(),
            state: action.state,
        });
    }
    let given: Vec<String> = req
        .args
        .iter()
        .map(|(k, v)| match v {
            serde_json::Value::String(s) => format!("{k}={s}"),
            other => format!("{k}={other}"),
        })
        .collect();
    let bound = actions::bind_arguments(&action, &given)?;
    // A child runs on its parent's projects: their organizations' policies bind it too.
    store
        .policies_of_items(parent.project_links.iter().map(|l| l.project_name.as_str()))?
        .check_network(action.sandbox.as_ref().is_some_and(|sb| sb.network))?;
    let actor = |field: &str, r: Option<&String>| -> Result<Option<String>, PlanUseError> {
        r.map(|r| {
            check_actor(
                store,
                providers,
                &format!("action {} {field}", action.name),
                r,
            )
        })
        .transpose()
    };
    let strategy = actor("strategy-actor", Some(&action.strategy_actor))?;
    let execution = actor("execution-actor", Some(&action.execution_actor))?;
    let estimation = actor("estimation-actor", action.estimation_actor.as_ref())?;
    let inv_actor = actor("invariant-actor", action.invariant_actor.as_ref())?;
    let values = actions::template_values(&action, &bound);
    let render = |field: &str, text: &str| {
        crate::registry::template::render(text, &values).map_err(|source| PlanUseError::Template {
            field: field.to_string(),
            source,
        })
    };
    let mut description = action
        .description
        .as_deref()
        .map(|d| render("description", d))
        .transpose()?;
    if let Some(g) = req.guidance.as_deref().filter(|g| !g.trim().is_empty()) {
        let base = description.unwrap_or_default();
        description = Some(
            format!("{base}\n\nGuidance from the parent plan: {}", g.trim())
                .trim()
                .to_string(),
        );
    }
    let dod = render("definition-of-done", &action.definition_of_done)?;
    let script = action
        .script
        .as_deref()
        .map(|s| actions::render_script(s, &values))
        .transpose()
        .map_err(|(field, source)| PlanUseError::Template { field, source })?;
    let parent_origin = store.plan_origin(&parent.plan_id)?;
    let mut plan = Plan::new(
        &action.name,
        action.name.rsplit('/').next().unwrap_or(&action.name),
        super::now(),
    );
    plan.description = description;
    plan.definition_of_done = Some(dod);
    plan.project_links = parent.project_links.clone();
    plan.automation_profile = parent.automation_profile.clone();
    plan.automation_level = parent.automation_level;
    plan.effective_profile_snapshot = parent.effective_profile_snapshot.clone();
    plan.strategy_actor = strategy;
    plan.execution_actor = execution;
    plan.estimation_actor = estimation;
    plan.invariant_actor = inv_actor;
    plan.arguments = bound;
    plan.parent_plan_id = Some(parent.plan_id);
    plan.root_plan_id = Some(parent.root_plan_id.unwrap_or(parent.plan_id));
    let read_only = action.read_only || parent_origin.as_ref().is_some_and(|o| o.read_only);
    let origin = crate::store::plan_links::Origin {
        action_id: action.action_id,
        profile_source: parent_origin
            .as_ref()
            .map(|o| o.profile_source)
            .unwrap_or(ResolvedFrom::Default),
        read_only,
        script,
        sandbox: action.sandbox.clone(),
    };
    let projects: Vec<Id> = store
        .plan_project_ids(&parent.plan_id)?
        .iter()
        .filter_map(|p| p.parse().ok())
        .collect();
    let mut link = req.link.clone();
    link.child_plan_id = plan.plan_id;
    let mut bases = req.bases.clone();
    for b in &mut bases {
        b.read_only |= read_only;
    }
    store.create_plan(&plan, &projects, &origin, &[], None, &bases, Some(&link), None)?;
    Ok(store.plan(&plan.plan_id)?.unwrap_or(plan))
}
