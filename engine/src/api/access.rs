//! Who may make which call (spec section 22): every call a server answers is checked here
//! before it runs. A call is reduced to the operations it performs on its targets (a plan, an
//! approval, a decision, a namespaced item, the server); each target's namespace gives the
//! caller's role there; [`crate::team::decide`] answers. A denied call runs nothing and
//! changes nothing; it is answered with [`ApiError::PermissionDenied`].
//!
//! Lists are not refused but narrowed: plans, approvals and events of plans the caller may
//! not read are left out.

use std::collections::HashMap;

use super::protocol::{Request, Response};
use super::{ApiError, Engine, Op, RegistryOp};
use crate::domain::approval::ApprovalKind;
use crate::domain::{Id, QualifiedName};
use crate::team::permissions::role_in;
use crate::team::policy::RestrictedKind;
use crate::team::{Decision, Operation, Principal, Role, Standing, decide};

/// What one check is about.
#[derive(Debug, Clone)]
enum Scope {
    /// A plan by id or unique prefix.
    Plan(String),
    /// A plan that is driven on: passing a pending phase gate is [`Operation::Approve`],
    /// anything else [`Operation::DrivePlan`].
    PlanGate(Id),
    /// An approval by id; answering a phase gate is [`Operation::Approve`], any other
    /// approval [`Operation::DrivePlan`].
    Approval(String),
    /// A decision by id or unique prefix: its plan.
    Decision(String),
    /// A correction attempt by id or unique prefix: its plan.
    Attempt(String),
    /// An item by its (possibly bare) name: its namespace.
    Item(String),
    /// The skills the actors of a plan about to be made bring (each a target of its own).
    SkillsOf(Box<super::op::UseRequest>),
    /// The server host's own namespace (`local`).
    Host,
    /// A namespace by name (an organization).
    Namespace(String),
    /// Something of the user named: their own is allowed to them, anyone else's needs the
    /// check's operation.
    SelfOr(String),
    /// The server itself, and what is asked of it (for a refusal's message).
    Server(&'static str),
}

/// One operation on one target.
#[derive(Debug, Clone)]
struct Check {
    operation: Operation,
    scope: Scope,
}

fn check(operation: Operation, scope: Scope) -> Check {
    Check { operation, scope }
}

/// One resolved target: where it lives and how it is named in the audit log.
#[derive(Debug, Clone)]
pub(crate) struct Target {
    /// The operation, after the target decided it (an approval's kind).
    pub operation: Operation,
    /// The namespace.
    pub namespace: String,
    /// How the audit log names it (`plan 01J...`, `acme/review`).
    pub name: String,
    /// The kind of restricted item an organization's policy may name it as.
    pub restrictable: Option<RestrictedKind>,
}

/// The caller and the organizations they belong to, looked up once per call.
struct Caller<'a> {
    principal: &'a Principal,
    memberships: Vec<(String, Role)>,
}

impl Caller<'_> {
    fn standing(&self, namespace: &str) -> Standing {
        Standing {
            namespace: namespace.to_string(),
            role: role_in(self.principal, namespace, &self.memberships),
            restricted_to: None,
        }
    }
}

/// Serves `request` for `principal`: checks every operation it performs, then runs it as
/// [`super::serve`] would, with the caller recorded on what it changes; lists are narrowed
/// to what the caller may read. Every mutation that went through and every denial is appended
/// to the audit log.
///
/// # Errors
/// [`ApiError::PermissionDenied`] (nothing ran), or the call's own errors.
pub fn serve_as(
    engine: &Engine,
    principal: &Principal,
    request: Request,
) -> Result<Response, ApiError> {
    let engine = engine.as_caller(principal.clone());
    let operation = label(&request);
    let mutation = is_mutation(&request);
    let (result, targets) = if principal.server_admin {
        let targets = if mutation {
            targets_of(&engine, &request, &principal.user)
        } else {
            Vec::new()
        };
        (super::serve(&engine, request), targets)
    } else {
        crate::domain::name::with_default_namespace(&principal.user, || {
            serve_checked(&engine, principal, request)
        })
    };
    // A refused call is recorded; a call that failed otherwise changed nothing, so only the
    // mutations that went through are (a bad argument leaves the records byte for byte),
    // and an Apply that recorded its caller's approval while it waits for more.
    let denied = matches!(
        result,
        Err(ApiError::PermissionDenied(_) | ApiError::PolicyDenied(_))
    );
    let went_through = result.is_ok() || matches!(result, Err(ApiError::ApprovalsNeeded(_)));
    if (mutation && went_through) || denied {
        record(&engine, principal, operation, &targets, &result);
    }
    result
}

/// The targets of `request` as far as they can be found; an administrator's call is not
/// refused for a target that cannot (the call itself says what is wrong).
fn targets_of(engine: &Engine, request: &Request, caller: &str) -> Vec<Target> {
    checks(request)
        .iter()
        .filter_map(|c| resolve(engine, c, caller).ok())
        .flatten()
        .collect()
}

/// [`serve_as`] for a caller who is not a server administrator: the answer, and the targets
/// checked (the last one the refused target when a check failed).
fn serve_checked(
    engine: &Engine,
    principal: &Principal,
    request: Request,
) -> (Result<Response, ApiError>, Vec<Target>) {
    let mut checked = Vec::new();
    let result = (|| {
        let caller = Caller {
            principal,
            memberships: engine.memberships(&principal.user)?,
        };
        enforce(engine, &caller, &checks(&request), &mut checked)?;
        let response = super::serve(engine, request)?;
        narrow(engine, principal, response)
    })();
    (result, checked)
}

/// Appends the audit row of one call: who, what, on which targets, from where, allowed or
/// why not. A failure to append is logged; it does not undo the call.
fn record(
    engine: &Engine,
    principal: &Principal,
    operation: String,
    targets: &[Target],
    result: &Result<Response, ApiError>,
) {
    let (refused, namespace) = match result {
        Err(ApiError::PermissionDenied(d)) => (Some(d.to_string()), Some(d.namespace.clone())),
        Err(ApiError::PolicyDenied(d)) => (Some(d.to_string()), Some(d.org.clone())),
        _ => (None, None),
    };
    let named = match &namespace {
        Some(ns) => targets.iter().rev().find(|t| &t.namespace == ns),
        None => targets.first(),
    };
    let mut names: Vec<&str> = targets.iter().map(|t| t.name.as_str()).collect();
    names.dedup();
    let entry = super::audit::AuditEntry {
        user: Some(principal.user.clone()),
        operation,
        namespace: namespace.or_else(|| named.map(|t| t.namespace.clone())),
        target: (!names.is_empty()).then(|| names.join(", ")),
        address: principal.address.clone(),
        outcome: match refused {
            Some(reason) => super::audit::AuditOutcome::Denied { reason },
            None => super::audit::AuditOutcome::Allowed,
        },
    };
    if let Err(e) = engine.audit(&entry) {
        tracing::error!(error = %e, operation = %entry.operation, "the audit log could not be appended");
    }
}

/// How the audit log names a call: `run.apply`, `change.create_project`, `team.add_user`.
fn label(request: &Request) -> String {
    match request {
        Request::Run(op) => format!("run.{}", op.name()),
        Request::Change(op) => format!("change.{}", snake_case(op.name())),
        Request::Team(t) => format!("team.{}", t.name()),
        Request::Session(s) => format!("session.{}", s.name()),
        Request::RunCall(r) => format!("run_call.{}", r.name()),
        Request::Policy(super::policies::PolicyRequest::Set { .. }) => "policy.set".to_string(),
        Request::Policy(super::policies::PolicyRequest::Show { .. }) => "policy.show".to_string(),
        other => other.name().to_string(),
    }
}

/// `CreateProject` as `create_project`.
fn snake_case(name: &str) -> String {
    let mut out = String::new();
    for (i, c) in name.chars().enumerate() {
        if c.is_ascii_uppercase() && i > 0 {
            out.push('_');
        }
        out.push(c.to_ascii_lowercase());
    }
    out
}

/// Whether a call changes records (and so is audited even when allowed).
fn is_mutation(request: &Request) -> bool {
    use super::session_views::SessionRequest as S;
    use super::team_views::TeamRequest as T;
    match request {
        Request::Run(_) | Request::Change(_) | Request::RunCall(_) => true,
        Request::Session(s) => matches!(
            s,
            S::Create { .. } | S::Delete { .. } | S::Import { .. } | S::Tell(_)
        ),
        Request::Team(t) => !matches!(t, T::Users | T::Orgs | T::Org { .. } | T::Tokens),
        Request::Policy(p) => matches!(p, super::policies::PolicyRequest::Set { .. }),
        _ => false,
    }
}

/// `standing` with the restriction an organization's policy puts on the target, if any.
fn restricted(engine: &Engine, standing: Standing, target: &Target) -> Result<Standing, ApiError> {
    let Some(kind) = target.restrictable else {
        return Ok(standing);
    };
    let Some((_, policy)) = engine.policy_for_namespace(&target.namespace)? else {
        return Ok(standing);
    };
    Ok(Standing {
        restricted_to: policy
            .restriction_of(kind, &target.name)
            .map(|role| (role, target.name.clone())),
        ..standing
    })
}

/// Whether `principal` may read the plan `plan` (id or unique prefix): the event stream's
/// check.
///
/// # Errors
/// [`ApiError::PermissionDenied`], or the plan cannot be found.
pub fn check_read_plan(engine: &Engine, principal: &Principal, plan: &str) -> Result<(), ApiError> {
    if principal.server_admin {
        return Ok(());
    }
    let caller = Caller {
        principal,
        memberships: engine.memberships(&principal.user)?,
    };
    let read = [check(Operation::ReadPlan, Scope::Plan(plan.to_string()))];
    enforce(engine, &caller, &read, &mut Vec::new())
}

/// Decides every target of `checks` for `caller`, each pushed onto `checked` as it is
/// decided; the first refusal is the error.
fn enforce(
    engine: &Engine,
    caller: &Caller<'_>,
    checks: &[Check],
    checked: &mut Vec<Target>,
) -> Result<(), ApiError> {
    let principal = caller.principal;
    for check in checks {
        for target in resolve(engine, check, &principal.user)? {
            let standing = restricted(engine, caller.standing(&target.namespace), &target)?;
            let decision = decide(principal, target.operation, &standing);
            checked.push(target);
            if let Decision::Deny(mut denial) = decision {
                if denial.namespace == crate::team::permissions::SERVER {
                    denial.what = checked.last().map(|t| t.name.clone());
                }
                return Err(ApiError::PermissionDenied(Box::new(denial)));
            }
        }
    }
    Ok(())
}

/// The operations a request performs, on what.
fn checks(request: &Request) -> Vec<Check> {
    use Operation as O;
    let plan = |op, p: &str| vec![check(op, Scope::Plan(p.to_string()))];
    match request {
        Request::Hello | Request::LastSeq | Request::PlanList(_) => vec![],
        Request::Approvals { plan: None } | Request::Events { plan: None, .. } => vec![],
        Request::ResolvePlan { plan: p }
        | Request::Plan { plan: p }
        | Request::PlanStatus { plan: p }
        | Request::Review { plan: p }
        | Request::Decisions { plan: p }
        | Request::Approvals { plan: Some(p) }
        | Request::Events { plan: Some(p), .. } => plan(O::ReadPlan, p),
        Request::Approval { approval } => {
            vec![check(O::ReadPlan, Scope::Approval(approval.clone()))]
        }
        Request::PlanView(view) => plan(O::ReadPlan, view.plan()),
        Request::CorrectionView(view) => vec![check(O::ReadPlan, correction_scope(view))],
        Request::Registry(q) => registry_read_checks(q),
        Request::Definition(q) => definition_read_checks(q),
        Request::Session(s) => session_checks(s),
        // Direct runs reach the server host's files: server administrators only until they
        // carry the caller (D-team-3).
        Request::RunCall(_) => vec![check(
            O::ManageServer,
            Scope::Server("run actors and tools on the server host"),
        )],
        Request::Change(op) => registry_checks(op),
        Request::Run(op) => op_checks(op),
        Request::Team(team) => team_checks(team),
        // The whole log is the administrators'; an organization's rows are its owners'.
        Request::Audit(super::audit::AuditRequest::List(filter)) => match &filter.namespace {
            Some(org) => vec![check(O::ReadAudit, Scope::Namespace(org.clone()))],
            None => vec![check(
                O::ManageServer,
                Scope::Server(
                    "read the whole audit log (an organization's owners read theirs with --org ORG)",
                ),
            )],
        },
        Request::Audit(super::audit::AuditRequest::Verify { .. }) => {
            vec![check(
                O::ManageServer,
                Scope::Server("verify the audit log"),
            )]
        }
        // An organization's policy is changed by its owners and read by its members.
        Request::Policy(super::policies::PolicyRequest::Set { org, .. }) => {
            vec![check(O::ChangePolicy, Scope::Namespace(org.clone()))]
        }
        Request::Policy(super::policies::PolicyRequest::Show { org }) => {
            vec![check(O::ReadItem, Scope::Namespace(org.clone()))]
        }
    }
}

/// Reading one item is reading its namespace (a user's own `USER/` is theirs alone); lists
/// are narrowed to the namespaces the caller reads ([`narrow`]).
fn registry_read_checks(query: &super::registry_views::RegistryQuery) -> Vec<Check> {
    use super::registry_views::RegistryQuery as Q;
    let name = match query {
        Q::Resource { resource } | Q::ResourceTree { resource, .. } => Some(resource),
        Q::Project { project } | Q::Validations { project } | Q::ProjectContext { project, .. } => {
            Some(project)
        }
        _ => None,
    };
    read_item(name)
}

fn definition_read_checks(query: &super::definition_views::DefinitionQuery) -> Vec<Check> {
    use super::definition_views::DefinitionQuery as Q;
    // Actors, profiles, tools and skills may be named by provider (`ollama/MODEL`): only
    // actions are checked by their namespace so far.
    let name = match query {
        Q::Action { action } => Some(action),
        _ => None,
    };
    read_item(name)
}

fn read_item(name: Option<&String>) -> Vec<Check> {
    let scope = name.map_or(Scope::Host, |n| Scope::Item(n.clone()));
    vec![check(Operation::ReadItem, scope)]
}

fn team_checks(request: &super::team_views::TeamRequest) -> Vec<Check> {
    use super::team_views::TeamRequest as T;
    use Operation as O;
    match request {
        T::Users | T::Orgs => vec![check(O::ReadItem, Scope::Host)],
        T::Org { name } => vec![check(O::ReadItem, Scope::Namespace(name.clone()))],
        T::SetMember { org, .. } | T::RemoveMember { org, .. } => {
            vec![check(O::ManageMembers, Scope::Namespace(org.clone()))]
        }
        // A user may issue tokens for themself; anyone else's are the administrators'.
        T::CreateToken(new) => vec![check(O::ManageServer, Scope::SelfOr(new.user.clone()))],
        T::AddUser { .. } | T::AddOrg { .. } | T::Tokens | T::RevokeToken { .. } => {
            vec![check(
                O::ManageServer,
                Scope::Server("manage the server's users, organizations and tokens"),
            )]
        }
    }
}

/// The TUI's plan views are reads of their plan; sessions run the orchestrator's commands,
/// so they are server administrators' until those carry the caller (D-team-3).
fn session_checks(request: &super::session_views::SessionRequest) -> Vec<Check> {
    use super::session_views::SessionRequest as S;
    use Operation as O;
    match request {
        S::PlanTree { plan } | S::PlanChanges { plan } | S::Checkpoints { plan } => {
            vec![check(O::ReadPlan, Scope::Plan(plan.clone()))]
        }
        S::Explanation { decision } | S::CorrectionPreview { decision, .. } => {
            vec![check(O::ReadPlan, Scope::Decision(decision.clone()))]
        }
        S::UseChoices => vec![check(O::ReadItem, Scope::Host)],
        _ => vec![check(
            O::ManageServer,
            Scope::Server("use sessions on the server"),
        )],
    }
}

fn correction_scope(view: &super::correction_views::CorrectionViewRequest) -> Scope {
    use super::correction_views::CorrectionViewRequest as V;
    match view {
        V::Tree { plan, .. } => Scope::Plan(plan.clone()),
        V::Explain { decision }
        | V::RevertPreview { decision, .. }
        | V::AppendPreview { decision, .. } => Scope::Decision(decision.clone()),
        V::Attempt { attempt } => Scope::Attempt(attempt.clone()),
    }
}

fn op_checks(op: &Op) -> Vec<Check> {
    use Operation as O;
    let plan = |operation, id: &Id| vec![check(operation, Scope::Plan(id.to_string()))];
    match op {
        Op::Use(u) => {
            let mut checks = vec![check(O::RunAction, Scope::Item(u.request.action.clone()))];
            checks.extend(
                u.request
                    .projects
                    .iter()
                    .map(|p| check(O::RunAction, Scope::Item(p.clone()))),
            );
            checks.push(check(O::UseSkill, Scope::SkillsOf(u.clone())));
            checks
        }
        Op::Execute { plan: p } => vec![check(O::DrivePlan, Scope::PlanGate(*p))],
        Op::Prompt { plan: p, .. } | Op::Rollback { plan: p, .. } => plan(O::DrivePlan, p),
        Op::Apply { plan: p, .. } => plan(O::Apply, p),
        Op::Export(x) => plan(O::Apply, &x.plan),
        Op::Cancel { plan: p, .. } => plan(O::Cancel, p),
        Op::Review(r) => plan(O::Review, &r.plan),
        Op::Decide { approval, .. } | Op::Reject { approval, .. } => {
            vec![check(O::Approve, Scope::Approval(approval.clone()))]
        }
        Op::Correct(c) => vec![check(O::Correct, Scope::Decision(c.decision.to_string()))],
        Op::Cleanup => vec![check(
            O::ManageServer,
            Scope::Server("clean up every plan's sandboxes"),
        )],
        Op::Registry(r) => registry_checks(r),
    }
}

/// The name an action, actor, tool, skill or profile definition gives itself in its text.
fn name_in_config(text: Option<&str>) -> Option<String> {
    let value: serde_yaml::Value = serde_yaml::from_str(text?).ok()?;
    value.get("name")?.as_str().map(str::to_string)
}

fn named(given: Option<&String>, text: Option<&str>) -> Scope {
    Scope::Item(
        given
            .cloned()
            .or_else(|| name_in_config(text))
            .unwrap_or_default(),
    )
}

fn registry_checks(op: &RegistryOp) -> Vec<Check> {
    use Operation as O;
    let item = |operation, name: &str| vec![check(operation, Scope::Item(name.to_string()))];
    match op {
        RegistryOp::AddResource(r) => item(O::RegisterResource, &r.name),
        RegistryOp::AddCustomResource(r) => item(O::RegisterResource, &r.name),
        RegistryOp::RemoveResource(r) => item(O::RegisterResource, &r.resource),
        RegistryOp::LinkResources(l) => [&l.parent, &l.child]
            .iter()
            .flat_map(|n| item(O::LinkResource, n))
            .collect(),
        RegistryOp::UnlinkResources(l) => [&l.parent, &l.child]
            .iter()
            .flat_map(|n| item(O::LinkResource, n))
            .collect(),
        RegistryOp::AddResourceType(t) => vec![check(O::CreateItem, named(t.name.as_ref(), None))],
        RegistryOp::RemoveResourceType(t) => item(O::EditItem, &t.name),
        RegistryOp::CreateProject(p) => item(O::CreateItem, &p.0.name),
        RegistryOp::LinkProjectResource(l) => [
            check(O::LinkResource, Scope::Item(l.project.clone())),
            check(O::LinkResource, Scope::Item(l.resource.clone())),
        ]
        .to_vec(),
        RegistryOp::UnlinkProjectResource(l) => item(O::LinkResource, &l.project),
        RegistryOp::DeleteProject(p) => item(O::EditItem, &p.project),
        RegistryOp::SetProjectProfile(p) => item(O::EditItem, &p.project),
        RegistryOp::AddValidation(v) => item(O::EditItem, &v.0.project),
        RegistryOp::RemoveValidation(v) => item(O::EditItem, &v.project),
        RegistryOp::SetContextPolicy(_) => vec![check(O::EditItem, Scope::Host)],
        RegistryOp::CreateAction(a) => vec![check(
            O::CreateItem,
            named(a.0.name.as_ref(), a.0.config_text.as_deref()),
        )],
        RegistryOp::MakeActionAvailable(a) => item(O::EditItem, &a.action),
        RegistryOp::ArchiveAction(a) => item(O::EditItem, &a.action),
        RegistryOp::DeleteAction(a) => item(O::EditItem, &a.action),
        RegistryOp::AddActor(a) => vec![check(
            O::CreateItem,
            named(a.name.as_ref(), a.config_text.as_deref()),
        )],
        RegistryOp::RemoveActor(a) => item(O::EditItem, &a.actor),
        RegistryOp::AddInvariant(i) => invariant_checks(&i.targets),
        RegistryOp::RemoveInvariant(_) => vec![check(O::EditItem, Scope::Host)],
        RegistryOp::AddProfile(p) => vec![check(
            O::CreateItem,
            named(p.name.as_ref(), p.config_text.as_deref()),
        )],
        RegistryOp::RemoveProfile(p) => item(O::EditItem, &p.profile),
        RegistryOp::RegisterTool(t) => vec![check(O::CreateItem, named(t.0.name.as_ref(), None))],
        RegistryOp::RemoveTool(t) => item(O::EditItem, &t.name),
        RegistryOp::RegisterSkill(s) => vec![check(O::CreateItem, named(s.0.name.as_ref(), None))],
        RegistryOp::RemoveSkill(s) => item(O::EditItem, &s.name),
        RegistryOp::BuildIndex(b) => item(O::EditItem, &b.resource),
        RegistryOp::RemoveIndex(b) => item(O::EditItem, &b.resource),
    }
}

fn invariant_checks(targets: &crate::registry::invariants::Targets) -> Vec<Check> {
    use Operation as O;
    let mut checks: Vec<Check> = targets
        .project
        .iter()
        .chain(&targets.actions)
        .map(|n| check(O::EditItem, Scope::Item(n.clone())))
        .collect();
    checks.extend(
        targets
            .plans
            .iter()
            .map(|p| check(O::DrivePlan, Scope::Plan(p.clone()))),
    );
    if targets.global || checks.is_empty() {
        checks.push(check(O::EditItem, Scope::Host));
    }
    checks
}

/// The namespace of an item named `name` (a bare name's is the caller's default).
fn namespace_of(name: &str) -> String {
    QualifiedName::resolve_user_input(name, &[])
        .ok()
        .and_then(|q| q.namespace)
        .unwrap_or_else(crate::domain::name::default_namespace)
}

/// The targets a check reaches for the user `caller`: a plan's are its projects'
/// namespaces.
fn resolve(engine: &Engine, check: &Check, caller: &str) -> Result<Vec<Target>, ApiError> {
    let store = engine.store()?;
    let of_plan = |id: &Id, operation: Operation| -> Result<Vec<Target>, ApiError> {
        Ok(plan_namespaces(engine, id)?
            .into_iter()
            .map(|namespace| Target {
                operation,
                namespace,
                name: format!("plan {id}"),
                restrictable: None,
            })
            .collect())
    };
    match &check.scope {
        Scope::Plan(p) => of_plan(&store.resolve_plan_id(p)??, check.operation),
        Scope::PlanGate(id) => {
            let at_gate = store
                .pending_approvals(Some(id))?
                .iter()
                .any(|a| a.kind == ApprovalKind::PhaseGate);
            of_plan(
                id,
                if at_gate {
                    Operation::Approve
                } else {
                    check.operation
                },
            )
        }
        Scope::Approval(a) => {
            let approval = store
                .approval(a)?
                .ok_or_else(|| crate::lifecycle::RunError::ApprovalNotFound(a.clone()))?;
            let operation = match (check.operation, approval.kind) {
                (Operation::Approve, ApprovalKind::PhaseGate) => Operation::Approve,
                (Operation::Approve, _) => Operation::DrivePlan,
                (other, _) => other,
            };
            of_plan(&approval.plan_id, operation)
        }
        Scope::Decision(d) => {
            let id = store.resolve_decision_id(d)??;
            let decision = store
                .decision(&id)?
                .ok_or_else(|| crate::lifecycle::RunError::Invalid(format!("no decision {id}")))?;
            of_plan(&decision.plan_id, check.operation)
        }
        Scope::Attempt(a) => {
            let attempt = store.correction_attempt(a)??;
            of_plan(&attempt.plan_id, check.operation)
        }
        Scope::Item(name) => {
            let name = by_id(&store, name).unwrap_or_else(|| name.clone());
            Ok(vec![item(check.operation, &name)])
        }
        Scope::SkillsOf(u) => Ok(skills_of(engine, u)?
            .iter()
            .map(|skill| item(check.operation, skill))
            .collect()),
        Scope::Namespace(namespace) => Ok(vec![Target {
            operation: check.operation,
            namespace: namespace.clone(),
            name: format!("`{namespace}`"),
            restrictable: None,
        }]),
        Scope::SelfOr(user) if user == caller => Ok(vec![Target {
            operation: Operation::ReadItem,
            namespace: user.clone(),
            name: format!("user {user}"),
            restrictable: None,
        }]),
        Scope::SelfOr(user) => Ok(vec![Target {
            operation: check.operation,
            namespace: crate::team::permissions::SERVER.to_string(),
            name: format!("issue a token for {user}"),
            restrictable: None,
        }]),
        Scope::Host => Ok(vec![Target {
            operation: check.operation,
            namespace: crate::domain::name::LOCAL_NAMESPACE.to_string(),
            name: "the server host's items".to_string(),
            restrictable: None,
        }]),
        Scope::Server(what) => Ok(vec![Target {
            operation: check.operation,
            namespace: crate::team::permissions::SERVER.to_string(),
            name: (*what).to_string(),
            restrictable: None,
        }]),
    }
}

/// The qualified name of the action, project or resource `input` gives by its id (or an
/// id's unique prefix), as a command may send it: the item is checked in its own namespace,
/// not as a bare name in the caller's. `None` for a name.
fn by_id(store: &crate::store::Store, input: &str) -> Option<String> {
    if input.len() < 4 || !input.chars().all(|c| c.is_ascii_alphanumeric()) {
        return None;
    }
    let upper = input.to_ascii_uppercase();
    let is_id = |id: String| id.starts_with(&upper);
    if let Ok(a) = crate::registry::actions::find(store, input)
        && is_id(a.action_id.to_string())
    {
        return Some(a.name);
    }
    if let Ok(p) = crate::registry::projects::find(store, input)
        && is_id(p.project_id.to_string())
    {
        return Some(p.name);
    }
    match crate::registry::resources::find(store, input) {
        Ok(r) if is_id(r.resource_id.to_string()) => Some(r.name),
        _ => None,
    }
}

/// The target an item named `name` is for `operation`: by its qualified name, restrictable
/// where a policy may restrict it.
fn item(operation: Operation, name: &str) -> Target {
    let namespace = namespace_of(name);
    let qualified = match name.split_once('/') {
        Some(_) => name.to_string(),
        None if name.is_empty() => name.to_string(),
        None => format!("{namespace}/{name}"),
    };
    Target {
        operation,
        namespace,
        name: qualified,
        restrictable: match operation {
            Operation::RegisterResource | Operation::LinkResource => Some(RestrictedKind::Resource),
            Operation::UseSkill => Some(RestrictedKind::Skill),
            _ => None,
        },
    }
}

/// The skills the strategy and execution actors of a plan made by `u` would bring.
fn skills_of(engine: &Engine, u: &super::op::UseRequest) -> Result<Vec<String>, ApiError> {
    let store = engine.store()?;
    let action = QualifiedName::resolve_user_input(&u.request.action, &[])
        .ok()
        .map(|q| q.to_string())
        .and_then(|name| store.action_by_name(&name).transpose())
        .transpose()?;
    let Some(action) = action else {
        return Ok(Vec::new());
    };
    let actors = [
        u.request
            .strategy_actor
            .clone()
            .unwrap_or(action.strategy_actor),
        u.request
            .execution_actor
            .clone()
            .unwrap_or(action.execution_actor),
    ];
    let mut skills = Vec::new();
    for actor in actors {
        if let Some(found) = store.actor(&actor)? {
            skills.extend(found.definition.skills);
        }
    }
    skills.sort();
    skills.dedup();
    Ok(skills)
}

/// The namespaces a plan lives in: its projects', else its action's.
fn plan_namespaces(engine: &Engine, id: &Id) -> Result<Vec<String>, ApiError> {
    let plan = engine
        .store()?
        .plan(id)?
        .ok_or_else(|| crate::lifecycle::RunError::NotFound(*id))?;
    let mut namespaces: Vec<String> = plan
        .project_links
        .iter()
        .map(|l| namespace_of(&l.project_name))
        .collect();
    if namespaces.is_empty() {
        namespaces.push(namespace_of(&plan.action_name));
    }
    namespaces.sort();
    namespaces.dedup();
    Ok(namespaces)
}

/// Which plans one caller may read, remembered per plan: what narrows lists and event
/// streams.
pub struct PlanReader {
    engine: Engine,
    principal: Principal,
    memberships: Vec<(String, Role)>,
    known: HashMap<Id, bool>,
}

impl PlanReader {
    /// The reader for `principal`.
    ///
    /// # Errors
    /// Store errors.
    pub fn new(engine: &Engine, principal: &Principal) -> Result<Self, ApiError> {
        let memberships = if principal.server_admin {
            Vec::new()
        } else {
            engine.memberships(&principal.user)?
        };
        Ok(Self {
            engine: engine.clone(),
            principal: principal.clone(),
            memberships,
            known: HashMap::new(),
        })
    }

    /// Whether the caller may read the plan `plan` (a plan that vanished is not readable).
    pub fn may_read(&mut self, plan: &Id) -> bool {
        if self.principal.server_admin {
            return true;
        }
        if let Some(known) = self.known.get(plan) {
            return *known;
        }
        let caller = Caller {
            principal: &self.principal,
            memberships: self.memberships.clone(),
        };
        let allowed = plan_namespaces(&self.engine, plan).is_ok_and(|namespaces| {
            namespaces.iter().all(|ns| {
                decide(&self.principal, Operation::ReadPlan, &caller.standing(ns))
                    == Decision::Allow
            })
        });
        self.known.insert(*plan, allowed);
        allowed
    }
}

/// Leaves out of a list what the caller may not read.
fn narrow(
    engine: &Engine,
    principal: &Principal,
    response: Response,
) -> Result<Response, ApiError> {
    let mut reader = PlanReader::new(engine, principal)?;
    Ok(match response {
        Response::PlanList(mut list) => {
            list.plans.retain(|p| reader.may_read(&p.plan_id));
            let kept: std::collections::HashSet<Id> =
                list.plans.iter().map(|p| p.plan_id).collect();
            list.state_reasons.retain(|id, _| kept.contains(id));
            Response::PlanList(list)
        }
        Response::Approvals(mut approvals) => {
            approvals.retain(|a| reader.may_read(&a.plan_id));
            Response::Approvals(approvals)
        }
        Response::Events(mut events) => {
            events.retain(|e| e.plan_id.as_ref().is_none_or(|id| reader.may_read(id)));
            Response::Events(events)
        }
        Response::Registry(mut view) => {
            use super::registry_views::RegistryView as V;
            let reads = NamespaceReader::new(engine, principal)?;
            match view.as_mut() {
                V::Resources(rows) => rows.retain(|r| reads.may_read(&r.resource.name)),
                V::Projects(rows) => rows.retain(|p| reads.may_read(&p.project.name)),
                _ => {}
            }
            Response::Registry(view)
        }
        Response::Definition(mut view) => {
            use super::definition_views::DefinitionView as V;
            let reads = NamespaceReader::new(engine, principal)?;
            if let V::Actions(rows) = view.as_mut() {
                rows.retain(|a| reads.may_read(&a.action.name));
            }
            Response::Definition(view)
        }
        other => other,
    })
}

/// Whether a caller reads the namespace of an item, by its qualified name.
struct NamespaceReader<'a>(Caller<'a>);

impl<'a> NamespaceReader<'a> {
    fn new(engine: &Engine, principal: &'a Principal) -> Result<Self, ApiError> {
        Ok(Self(Caller {
            principal,
            memberships: engine.memberships(&principal.user)?,
        }))
    }

    fn may_read(&self, name: &str) -> bool {
        let standing = self.0.standing(&namespace_of(name));
        matches!(
            decide(self.0.principal, Operation::ReadItem, &standing),
            Decision::Allow
        )
    }
}
