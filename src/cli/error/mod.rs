//! The one error type at the CLI edge: a stable code, a message, details and hints, an exit
//! code. Engine errors convert into it here, and nowhere else.

pub mod runs;

use crate::output::{ErrorBody, Exit};
use cleveragents_engine::api::ErrorCode;
use cleveragents_engine::api::failures::{self, InitError, StoreError};
use cleveragents_engine::config::ConfigError;
use cleveragents_engine::domain::IdPrefixError;
use cleveragents_engine::paths::PathsError;

/// A command failure as shown to the user.
#[derive(Debug, Clone)]
pub struct CliError {
    /// What is rendered (boxed: errors travel up many frames and stay small).
    pub body: Box<ErrorBody>,
    /// Data for structured output (for exit 3: the pending approval).
    pub data: serde_json::Value,
}

/// The exit code of an error (spec section 04, "Exit codes"): the one mapping from
/// [`ErrorCode`] to [`Exit`] that every error of the CLI goes through. Exhaustive, so that a
/// new code needs a decision here.
pub fn exit_of(code: ErrorCode) -> Exit {
    use ErrorCode as C;
    match code {
        C::Usage => Exit::Usage,
        C::NeedsApproval => Exit::NeedsHuman,
        C::Interrupted => Exit::Interrupted,
        C::PermissionDenied | C::PolicyDenied => Exit::Denied,
        C::NotFound
        | C::Ambiguous
        | C::InvalidInput
        | C::Conflict
        | C::Aborted
        | C::Cancelled
        | C::PlanErrored
        | C::CorrectionFailed
        | C::ConfigInvalid
        | C::SchemaTooNew
        | C::DatabaseError
        | C::IoError
        | C::GitError
        | C::SandboxError
        | C::Environment
        | C::Terminal
        | C::NotSupported
        | C::ProviderUnavailable
        | C::ProviderAuth
        | C::ProviderError
        | C::ToolFailed
        | C::UnsafeTool
        | C::AlreadyExists
        | C::ChecksFailed
        | C::Internal
        | C::Unauthenticated => Exit::Failure,
    }
}

/// The exit code of an error whose code is spelled `code` ([`exit_of`]); 1 for a spelling
/// that is no [`ErrorCode`] (a test keeps the CLI free of those).
pub fn exit_of_str(code: &str) -> Exit {
    code.parse::<ErrorCode>().map_or(Exit::Failure, exit_of)
}

impl CliError {
    /// The error for an interrupted command: exit 130, status `cancelled`.
    pub fn interrupted() -> Self {
        CliError::new("INTERRUPTED", "Operation cancelled")
    }

    /// A failure with a code and message; its exit code is the code's ([`exit_of`]).
    pub fn new(code: &'static str, message: impl Into<String>) -> Self {
        Self {
            body: Box::new(ErrorBody {
                code,
                message: message.into(),
                detail: None,
                suggestions: Vec::new(),
                exit: exit_of_str(code),
            }),
            data: serde_json::Value::Null,
        }
    }

    /// Adds detail.
    pub fn detail(mut self, detail: impl Into<String>) -> Self {
        self.body.detail = Some(detail.into());
        self
    }

    /// Adds a suggestion (a command or an action).
    pub fn hint(mut self, hint: impl Into<String>) -> Self {
        self.body.suggestions.push(hint.into());
        self
    }

    /// Sets another exit code than the code's own ([`exit_of`]); for a report that is not a
    /// failure of its code.
    pub fn exit(mut self, exit: Exit) -> Self {
        self.body.exit = exit;
        self
    }

    /// Attaches structured data.
    pub fn data(mut self, data: serde_json::Value) -> Self {
        self.data = data;
        self
    }

    /// `INVALID_INPUT`: an argument or value is not acceptable.
    pub fn invalid_input(message: impl Into<String>) -> Self {
        Self::new("INVALID_INPUT", message)
    }
}

impl From<ConfigError> for CliError {
    fn from(e: ConfigError) -> Self {
        let message = e.to_string();
        match e {
            ConfigError::UnknownKey { suggestion, .. } => {
                let err = CliError::new("NOT_FOUND", message);
                let err = match suggestion {
                    Some(s) => err.hint(format!("did you mean `{s}`?")),
                    None => err,
                };
                err.hint("agents config list")
            }
            ConfigError::InvalidValue { .. } => CliError::invalid_input(message),
            ConfigError::Parse { path, snippet, .. } => {
                let err = CliError::new("CONFIG_INVALID", message)
                    .hint(format!("fix {} by hand at the line shown", path.display()))
                    .hint(format!(
                        "or move it aside (mv {0} {0}.broken): CleverAgents then uses its defaults",
                        path.display()
                    ));
                match snippet {
                    Some(s) => err.detail(s),
                    None => err,
                }
            }
            ConfigError::InvalidEntry { path, key, .. } => CliError::new("CONFIG_INVALID", message)
                .hint(format!("agents config set {key} <VALUE>"))
                .hint(format!("or edit {} by hand", path.display())),
            ConfigError::Read { .. } | ConfigError::Write { .. } => {
                CliError::new("IO_ERROR", message)
                    .hint("check the file's permissions and free disk space")
            }
        }
    }
}

impl From<StoreError> for CliError {
    fn from(e: StoreError) -> Self {
        let message = e.to_string();
        match e {
            StoreError::TooNew { path, .. } => CliError::new("SCHEMA_TOO_NEW", message)
                .detail(format!("{} was left unchanged", path.display()))
                .hint("upgrade CleverAgents to the version that wrote this database")
                .hint("or use another data directory with --data-dir"),
            StoreError::CreateDir { .. } => {
                CliError::new("IO_ERROR", message).hint("choose a writable --data-dir")
            }
            _ => CliError::new("DATABASE_ERROR", message).hint("agents diagnostics"),
        }
    }
}

impl From<InitError> for CliError {
    fn from(e: InitError) -> Self {
        let message = e.to_string();
        match e {
            InitError::PlansProcessing(_) => CliError::new("CONFLICT", message)
                .hint("agents plan list --state processing")
                .hint("then `agents plan cancel PLAN_ID` for each plan it lists"),
            InitError::Store(s) => s.into(),
            InitError::NotADataDir { .. } => CliError::new("INVALID_INPUT", message)
                .hint("check --data-dir / AGENTS_DATA_DIR: it must name the data directory itself"),
            InitError::Io { .. } => CliError::new("IO_ERROR", message)
                .detail("nothing was deleted: the old data is either in place or in the backup"),
        }
    }
}

impl From<PathsError> for CliError {
    fn from(e: PathsError) -> Self {
        CliError::new("ENVIRONMENT", e.to_string())
            .hint("pass --data-dir and --config-path, or set AGENTS_DATA_DIR and AGENTS_CONFIG")
    }
}

impl From<IdPrefixError> for CliError {
    fn from(e: IdPrefixError) -> Self {
        let code = match e {
            IdPrefixError::NotFound { .. } => "NOT_FOUND",
            IdPrefixError::Ambiguous { .. } => "AMBIGUOUS",
            IdPrefixError::TooShort(_) => "INVALID_INPUT",
        };
        CliError::new(code, e.to_string())
    }
}

use cleveragents_engine::api::failures::{
    ActionError, ActorError, ArgumentError, InvariantError, PlanUseError, ProfileError,
    ProjectError, ResourceError, YamlError,
};

impl From<YamlError> for CliError {
    fn from(e: YamlError) -> Self {
        let message = e.to_string();
        match &e {
            YamlError::Read { path, .. } => CliError::new("NOT_FOUND", message).hint(format!(
                "check that {} exists and is readable",
                path.display()
            )),
            YamlError::NotLoadable { .. } => CliError::invalid_input(message)
                .hint("pass the definition's YAML file itself: a regular file of at most 1 MiB"),
            YamlError::Invalid { path, field, .. } | YamlError::Rule { path, field, .. } => {
                let err = CliError::invalid_input(message).detail(format!(
                    "file: {}{}",
                    path.display(),
                    if field.is_empty() {
                        String::new()
                    } else {
                        format!("; field: {field}")
                    }
                ));
                err.hint(format!(
                    "fix {} and run the command again; nothing was saved",
                    path.display()
                ))
            }
        }
    }
}

impl From<ProfileError> for CliError {
    fn from(e: ProfileError) -> Self {
        let message = e.to_string();
        match e {
            ProfileError::Yaml(y) => y.into(),
            ProfileError::Store(s) => s.into(),
            ProfileError::NotFound(m) => not_found(message, &m, "agents automation-profile list"),
            ProfileError::Exists(name) => CliError::new("CONFLICT", message).hint(format!(
                "to replace it: agents automation-profile add --update --config FILE {name}"
            )),
            ProfileError::InUse { .. } => CliError::new("CONFLICT", message),
            ProfileError::BuiltIn(_) => CliError::new("CONFLICT", message).hint(
                "built-in profiles are fixed; add a custom profile such as local/careful instead",
            ),
            ProfileError::NoName(_) | ProfileError::Name { .. } => CliError::invalid_input(message),
        }
    }
}

impl From<ActorError> for CliError {
    fn from(e: ActorError) -> Self {
        let message = e.to_string();
        match e {
            ActorError::Yaml(y) => y.into(),
            ActorError::Store(s) => s.into(),
            ActorError::Exists(name) => CliError::new("CONFLICT", message)
                .detail(format!("Actor already exists: {name}"))
                .hint(format!(
                    "use --update to replace: agents actor add --update --config FILE {name}"
                )),
            ActorError::Unresolved { .. } => CliError::new("NOT_FOUND", message)
                .hint("agents actor list")
                .hint("register one with `agents actor add --config <file>`"),
            ActorError::BuiltIn(_) | ActorError::ProviderModel(_) => {
                CliError::new("CONFLICT", message).hint("agents actor list")
            }
            ActorError::NoName(_) | ActorError::Name { .. } | ActorError::Option(..) => {
                CliError::invalid_input(message)
            }
            ActorError::Skill(_) => CliError::invalid_input(message)
                .detail("nothing was saved")
                .hint("agents skill list"),
        }
    }
}

impl From<failures::SkillError> for CliError {
    fn from(e: failures::SkillError) -> Self {
        use failures::SkillError;
        let message = e.to_string();
        match e {
            SkillError::Name { .. } => CliError::invalid_input(message).hint("agents skill list"),
            SkillError::Unknown { suggestion, .. } => {
                let err = CliError::new("NOT_FOUND", message);
                match suggestion {
                    Some(s) => err.hint(format!("agents skill show {s}")),
                    None => err.hint("agents skill list"),
                }
            }
        }
    }
}

impl From<ArgumentError> for CliError {
    fn from(e: ArgumentError) -> Self {
        CliError::invalid_input(e.to_string())
    }
}

/// `NOT_FOUND` with "did you mean `NAME`?" when a registered name is close, then the list
/// command.
pub(super) fn not_found(message: String, missing: &failures::Missing, list: &str) -> CliError {
    let err = CliError::new("NOT_FOUND", message);
    match &missing.suggestion {
        Some(s) => err.hint(format!("did you mean `{s}`?")),
        None => err,
    }
    .hint(list)
}

impl From<ActionError> for CliError {
    fn from(e: ActionError) -> Self {
        let message = e.to_string();
        match e {
            ActionError::Yaml(y) => y.into(),
            ActionError::Store(s) => s.into(),
            ActionError::Actor(a) => a.into(),
            ActionError::Profile(p) => p.into(),
            ActionError::Exists(name) => CliError::new("CONFLICT", message)
                .detail("action names are never reused, also after archiving; choose a new name")
                .hint(format!("agents action show {name}"))
                .data(serde_json::json!({ "existing_action": name })),
            ActionError::NotFound(m) => not_found(message, &m, "agents action list --state all"),
            ActionError::Ambiguous(a) => a.into(),
            ActionError::NotReady { failures, name } => CliError::new("INVALID_INPUT", message)
                .detail(format!(
                    "{}\nfix the references, then make the action available again",
                    failures.join("\n")
                ))
                .hint("agents actor list")
                .hint("agents automation-profile list")
                .hint(format!(
                    "agents action available {}",
                    shell_words::quote(&name)
                )),
            ActionError::State { .. } => CliError::new("CONFLICT", message),
            ActionError::InUse { .. } => CliError::new("CONFLICT", message).detail(
                "plans keep the definition they were made from, but an unfinished plan still refers to its action; apply or cancel it first",
            ),
            ActionError::Flag { .. } | ActionError::NoName(_) | ActionError::Name { .. } => {
                CliError::invalid_input(message)
            }
        }
    }
}

impl From<ResourceError> for CliError {
    fn from(e: ResourceError) -> Self {
        let message = e.to_string();
        let missing_path = e.is_missing_path();
        match e {
            ResourceError::Store(s) => s.into(),
            ResourceError::Exists(_) | ResourceError::SameTarget { .. } => {
                CliError::new("CONFLICT", message)
            }
            ResourceError::NotFound(m) => not_found(message, &m, "agents resource list --all"),
            ResourceError::Ambiguous(a) => a.into(),
            ResourceError::Linked { links, .. } => {
                // One command per link, with the real names: unlink first, then retry.
                links.iter().fold(
                    CliError::new("CONFLICT", message).detail("unlink it from each project first"),
                    |err, (project, resource)| {
                        err.hint(format!(
                            "agents project unlink-resource {} {}",
                            shell_words::quote(project),
                            shell_words::quote(resource)
                        ))
                    },
                )
            }
            ResourceError::UsedByPlans { plans, .. } => plans.iter().fold(
                CliError::new("CONFLICT", message)
                    .detail("a resource is re-discovered only while no plan that is not finished uses it; apply or cancel them first"),
                |err, plan| err.hint(format!("agents plan status {plan}")),
            ),
            ResourceError::Discovered { .. } | ResourceError::AutoLink { .. } | ResourceError::AlreadyLinked { .. } => {
                CliError::new("CONFLICT", message)
            }
            ResourceError::Cycle { .. } => CliError::new("CONFLICT", message)
                .hint("the resource graph must stay acyclic; link the other way round or not at all"),
            ResourceError::LinkRule { .. } => CliError::invalid_input(message).hint("agents resource type show TYPE"),
            ResourceError::NotLinked { .. } => CliError::new("NOT_FOUND", message),
            ResourceError::NotAddable { .. } => CliError::invalid_input(message).hint("agents resource type list"),
            ResourceError::NotWorkTree { .. } => CliError::invalid_input(message)
                .hint("a git-checkout is the top directory of a work tree; for a plain directory use `agents resource add fs-directory <name> --path <dir>`"),
            ResourceError::BranchMismatch { checked_out, .. } => CliError::invalid_input(message)
                .hint(format!("omit --branch to use `{checked_out}`, or check out the branch first (git switch BRANCH)")),
            ResourceError::Detached { .. } => CliError::invalid_input(message).hint("check out a branch first (git switch BRANCH)"),
            ResourceError::Unreachable { .. } => CliError::invalid_input(message)
                .hint("check the URL with `git ls-remote URL` on this host (the server's, with --server): its credentials are the ones used"),
            ResourceError::NotOnServerHost { .. } => CliError::invalid_input(message)
                .hint("the server reads paths on its own host: give a path there, or register the repository by URL (agents resource add git NAME --url URL)"),
            ResourceError::Path { .. } if missing_path => CliError::invalid_input(message)
                .hint("check the path for a typo; a relative path is read from the directory the command runs in"),
            ResourceError::Path { .. } | ResourceError::Name { .. } | ResourceError::ChildName(_) | ResourceError::Git { .. } => {
                CliError::invalid_input(message)
            }
        }
    }
}

impl From<ProjectError> for CliError {
    fn from(e: ProjectError) -> Self {
        let message = e.to_string();
        match e {
            ProjectError::Store(s) => s.into(),
            ProjectError::Resource(r) => r.into(),
            ProjectError::Actor(a) => a.into(),
            ProjectError::Profile(p) => p.into(),
            ProjectError::Exists(_) => {
                CliError::new("CONFLICT", message).hint("agents project list")
            }
            ProjectError::NotFound(m) => not_found(message, &m, "agents project list"),
            ProjectError::Ambiguous(a) => a.into(),
            ProjectError::AlreadyLinked { .. } => CliError::new("CONFLICT", message),
            ProjectError::NotLinked { project, .. } => {
                CliError::new("NOT_FOUND", message).hint(format!("agents project show {project}"))
            }
            ProjectError::UsedByValidations { project, ids, .. } => {
                CliError::new("CONFLICT", message).hint(format!(
                    "remove them first: agents project validation remove {project} {}",
                    ids.join(" ")
                ))
            }
            ProjectError::ActivePlans { plans, project } => {
                CliError::new("CONFLICT", "Delete blocked: the project has active plans")
                    .detail(
                        plans
                            .iter()
                            .zip(cleveragents_engine::domain::id::unique_prefixes(
                                &plans.iter().map(|(id, ..)| id.as_str()).collect::<Vec<_>>(),
                            ))
                            .map(|((_, st, action), short)| format!("{short} - {st} ({action})"))
                            .collect::<Vec<_>>()
                            .join("\n"),
                    )
                    .hint("agents plan list")
                    .hint(format!(
                        "agents project delete --force --yes {}",
                        shell_words::quote(&project)
                    ))
            }
            ProjectError::ValidationNotFound { project, .. } => CliError::new("NOT_FOUND", message)
                .hint(format!("agents project validation list {project}")),
            ProjectError::Backup { .. } => CliError::new("IO_ERROR", message),
            ProjectError::Name { .. }
            | ProjectError::Alias(_)
            | ProjectError::DuplicateResource(_)
            | ProjectError::Invalid { .. } => CliError::invalid_input(message),
        }
    }
}

impl From<InvariantError> for CliError {
    fn from(e: InvariantError) -> Self {
        let message = e.to_string();
        match e {
            InvariantError::Store(s) => s.into(),
            InvariantError::Project(p) => p.into(),
            InvariantError::Action(a) => a.into(),
            InvariantError::NotFound(m) => not_found(message, &m, "agents invariant list"),
            InvariantError::Ambiguous(a) => a.into(),
            InvariantError::Plan(_) => CliError::new("NOT_FOUND", message).hint("agents plan list"),
            InvariantError::NoScope
            | InvariantError::Empty
            | InvariantError::InvalidKey(_)
            | InvariantError::EffectiveNeedsPlan
            | InvariantError::BadForm { .. } => CliError::invalid_input(message),
        }
    }
}

impl From<PlanUseError> for CliError {
    fn from(e: PlanUseError) -> Self {
        let message = e.to_string();
        match e {
            PlanUseError::Store(s) => s.into(),
            PlanUseError::Policy(d) => cleveragents_engine::api::ApiError::PolicyDenied(d).into(),
            PlanUseError::Action(a) => (*a).into(),
            PlanUseError::Project(p) => (*p).into(),
            PlanUseError::Profile(p) => p.into(),
            PlanUseError::Argument(a) => CliError::invalid_input(message)
                .detail(a.to_string())
                .hint("agents action show <action> (lists its arguments)"),
            PlanUseError::NotAvailable { name, .. } => CliError::new("INVALID_INPUT", message)
                .hint(format!("agents action available {name}")),
            PlanUseError::Actor { .. } => {
                CliError::new("NOT_FOUND", message).hint("agents actor list")
            }
            PlanUseError::Base(_) => CliError::invalid_input(message)
                .detail("nothing was saved")
                .hint("make a first commit in the checkout, or link a directory resource instead"),
            PlanUseError::UnboundSteps { resources, .. } => CliError::invalid_input(message)
                .detail("nothing was saved; Execute would stop at the first of these steps")
                .hint(format!(
                    "name the resource on each of these steps of the action's script: `resource: {}`",
                    resources
                        .first()
                        .map(|r| r.rsplit('/').next().unwrap_or(r))
                        .unwrap_or_default()
                ))
                .hint(format!(
                    "or give a tool step a `resource` argument, or a path://{}/... path",
                    resources.first().map(String::as_str).unwrap_or("RESOURCE")
                )),
            PlanUseError::UnsafeShell { .. } => CliError::new("UNSAFE_TOOL", message)
                .detail("nothing was saved; `agents diagnostics` shows the Shell sandbox mode")
                .hint("run on a kernel with Landlock (Linux 5.13+), or")
                .hint("agents plan use ... --automation-profile full-auto (allows unsafe tools; review the script first)"),
            PlanUseError::Template { .. }
            | PlanUseError::NoProject
            | PlanUseError::DuplicateProject(_)
            | PlanUseError::EmptyInvariant
            | PlanUseError::BadInvariant(_) => CliError::invalid_input(message),
        }
    }
}

impl From<failures::RunError> for CliError {
    fn from(e: failures::RunError) -> Self {
        use failures::RunError;
        let message = e.to_string();
        match e {
            RunError::NotFound(id) => CliError::new("NOT_FOUND", message)
                .hint("agents plan list")
                .data(serde_json::json!({"plan_id": id.to_string()})),
            RunError::ResourceBusy { .. } => CliError::new("CONFLICT", message)
                .hint("wait for the other apply to finish, then run this command again"),
            RunError::Busy {
                plan_id,
                pid,
                host,
                kind,
            } => CliError::new("CONFLICT", message)
                .detail("another process drives this plan; it may be read but not driven until that process stops")
                .hint(format!("agents plan status {plan_id}"))
                .hint(format!("agents plan cancel {plan_id}"))
                .data(serde_json::json!({"owner": {"pid": pid, "host": host, "kind": kind}})),
            RunError::WrongState { hints, phase, state, .. } => {
                let mut err = CliError::new("CONFLICT", message)
                    .data(serde_json::json!({"phase": phase, "state": state}));
                for h in &hints {
                    err = err.hint(super::next::command(h));
                }
                err
            }
            RunError::Invalid(_) => CliError::invalid_input(message),
            RunError::GateAnswer { approval_id, approve } => CliError::invalid_input(format!(
                "approval {approval_id} is a phase gate; answer it with `{}` or decline it with `{}`",
                super::next::command(&approve),
                super::next::command(&cleveragents_engine::domain::Next::Reject { approval: approval_id.clone() }),
            )),
            RunError::BudgetLimitMissing { approval_id } => CliError::invalid_input(format!(
                "approval {approval_id} needs the new limit: `agents plan decide {approval_id} --max-cost-usd USD` or `--max-tokens N`"
            )),
            RunError::ApprovalNotFound(_) => {
                CliError::new("NOT_FOUND", message).hint("agents plan approvals")
            }
            RunError::NotYetSupported(_) => CliError::new("NOT_SUPPORTED", message),
            RunError::Sandbox(_) => CliError::new("SANDBOX_ERROR", message).hint("agents diagnostics"),
            RunError::Store(s) => s.into(),
        }
    }
}

impl From<failures::SandboxError> for CliError {
    fn from(e: failures::SandboxError) -> Self {
        use failures::SandboxError as E;
        let message = e.to_string();
        match e {
            E::Store(s) => s.into(),
            E::PlanNotFound(_) | E::NoTarget { .. } => {
                CliError::new("NOT_FOUND", message).hint("agents plan list")
            }
            E::InvalidTarget(_) => CliError::invalid_input(message),
            E::TargetConflict { .. } => CliError::new("CONFLICT", message),
            E::Gone { .. } => CliError::new("CONFLICT", message)
                .hint("a released or removed sandbox cannot be used; start a new plan"),
            E::Checkpoint(_) => CliError::new("CONFLICT", message),
            E::Missing { .. } => CliError::new("SANDBOX_ERROR", message).hint(
                "set `checkpoint-store` in config.toml to a directory every instance can read \
                 (agents config set checkpoint-store /shared/agents-checkpoints), so another \
                 instance can rebuild a plan's sandbox; see docs/server.md",
            ),
            E::Overlay(_) => CliError::new("SANDBOX_ERROR", message).hint(
                "`agents diagnostics` says how this process makes sandboxes (Sandbox checkouts)",
            ),
            E::Git { .. } => CliError::new("GIT_ERROR", message).hint("agents diagnostics"),
            E::Io { path, .. } => {
                let dir = path.parent().unwrap_or(&path).display().to_string();
                CliError::new("IO_ERROR", message).hint(format!(
                    "check that {dir} exists, is writable and has free space"
                ))
            }
        }
    }
}

impl From<failures::LeaseError> for CliError {
    fn from(e: failures::LeaseError) -> Self {
        failures::RunError::from(e).into()
    }
}

impl From<failures::RunnerError> for CliError {
    fn from(e: failures::RunnerError) -> Self {
        use failures::RunnerError as E;
        match e {
            E::Store(s) => s.into(),
            E::Sandbox(s) => s.into(),
            E::PlanNotFound(_) => {
                CliError::new("NOT_FOUND", e.to_string()).hint("agents plan list")
            }
        }
    }
}

impl From<failures::RegisterError> for CliError {
    fn from(e: failures::RegisterError) -> Self {
        use failures::RegisterError as R;
        match e {
            R::Yaml(y) => y.into(),
            R::Store(s) => s.into(),
            R::Skill(s) => s.into(),
            R::Invalid { field, message } => CliError::invalid_input(format!("{field}: {message}"))
                .hint("docs/tools.md and docs/skills.md describe the YAML"),
            R::Conflict(m) => CliError::new("CONFLICT", m),
            R::NotFound(m) => {
                CliError::new("NOT_FOUND", m).hint("agents tool list / agents skill list")
            }
        }
    }
}

impl From<failures::SkillRegError> for CliError {
    fn from(e: failures::SkillRegError) -> Self {
        use failures::SkillRegError as S;
        match &e {
            S::Unknown { suggestion, .. } => {
                let err = CliError::new("NOT_FOUND", e.to_string());
                match suggestion {
                    Some(s) => err.hint(format!("agents skill show {s}")),
                    None => err.hint("agents skill list"),
                }
            }
            S::UnknownTool { .. } => CliError::new("NOT_FOUND", e.to_string()).hint("agents tool list"),
            S::Cycle { .. } => CliError::new("INVALID_INPUT", e.to_string())
                .detail("a skill may not include itself, directly or through other skills; nothing was registered"),
            S::Invalid { .. } => CliError::invalid_input(e.to_string()),
        }
    }
}

impl From<cleveragents_engine::api::ApiError> for CliError {
    fn from(e: cleveragents_engine::api::ApiError) -> Self {
        use cleveragents_engine::api::ApiError as E;
        match e {
            E::Run(r) => r.into(),
            E::Sandbox(s) => s.into(),
            E::PlanUse(p) => p.into(),
            E::Id(i) => i.into(),
            E::Store(s) => s.into(),
            E::Review(r) => r.into(),
            E::Export(x) => export_error(x),
            E::Registry(r) => (*r).into(),
            E::Remote(r) => remote_error(r),
            E::Unreachable { url, reason } if is_certificate_failure(&reason) => {
                CliError::new("IO_ERROR", format!("the server at {url} presented a TLS certificate this machine does not trust: {reason}"))
                    .detail("nothing was sent. For a self-signed certificate, or one signed by your own authority, give that certificate (or the authority's) in PEM to the client")
                    .hint("AGENTS_CA_CERT=CERT.pem, or log in with it: agents server login NAME URL --token-stdin --ca-cert CERT.pem")
                    .hint("the certificate to give is the --tls-cert file the server was started with (or the authority that signed it)")
            }
            E::Unreachable { url, reason } => {
                CliError::new("IO_ERROR", format!("cannot reach the server at {url}: {reason}"))
                    .hint("check that `agents server start` runs on the server host and listens on that address")
                    .hint("agents server status")
            }
            E::Protocol { message } => CliError::new("INTERNAL", message)
                .hint("the client and the server may be of different versions: compare `agents version` with `agents server status`"),
            E::Token(t) => token_error(t),
            E::Team(t) => team_error(t),
            E::PermissionDenied(d) => permission_denied(&d),
            E::ApprovalsNeeded(n) => CliError::new("NEEDS_APPROVAL", n.to_string())
                .data(serde_json::to_value(&*n).unwrap_or_default())
                .hint(format!(
                    "another maintainer of `{}` approves and applies it: agents plan apply --yes {}",
                    n.org, n.plan
                )),
            E::PolicyDenied(d) => CliError::new("POLICY_DENIED", d.to_string())
                .data(serde_json::json!({"org": d.org, "key": d.key}))
                .hint(format!("an owner of {} can show or change the policy: agents server policy show {}", d.org, d.org)),
            E::InvalidInput { message } => CliError::invalid_input(message),
            E::NotSupported { what } => CliError::new("NOT_SUPPORTED", format!("{what} is not answered yet"))
                .hint("run it without --server on the machine that holds the data"),
            E::Config { message } => CliError::new("CONFIG_INVALID", message),
            E::Session(s) => s.into(),
            E::Tell(t) => runs::tell_error(*t),
            E::OneShot { actor, error } => runs::start_error(*error, &actor),
            E::Context(c) => runs::context_error(c),
            E::ToolRunner(r) => r.into(),
            E::Stopped { stop, hints, data } => runs::stopped_error(&stop, hints, *data),
            E::Failed { code, message, detail, hints, data } => {
                let mut err = CliError::new(code.as_str(), message).data(*data);
                if let Some(d) = detail {
                    err = err.detail(d);
                }
                hints.into_iter().fold(err, CliError::hint)
            }
        }
    }
}

impl From<cleveragents_engine::api::RegistryError> for CliError {
    fn from(e: cleveragents_engine::api::RegistryError) -> Self {
        use cleveragents_engine::api::RegistryError as R;
        match e {
            R::Resource(x) => x.into(),
            R::Project(x) => x.into(),
            R::Action(x) => x.into(),
            R::Actor(x) => x.into(),
            R::Invariant(x) => x.into(),
            R::Profile(x) => x.into(),
            R::Register(x) => x.into(),
            R::Type(x) => x.into(),
        }
    }
}

/// A server's failure as the server's own CLI would have printed it.
/// Whether a transport failure is the server's TLS certificate failing verification here.
fn is_certificate_failure(reason: &str) -> bool {
    reason.contains("certificate") || reason.contains("UnknownIssuer")
}

fn remote_error(r: cleveragents_engine::api::protocol::RemoteError) -> CliError {
    let mut err = CliError::new(r.code.as_str(), r.message)
        .data(r.data.map_or(serde_json::Value::Null, |d| *d));
    if let Some(d) = r.detail {
        err = err.detail(d);
    }
    r.hints.into_iter().fold(err, CliError::hint)
}

/// How the CLI says why a server token could not be created or revoked.
fn token_error(e: cleveragents_engine::api::tokens::TokenError) -> CliError {
    use cleveragents_engine::api::tokens::TokenError as T;
    let message = e.to_string();
    match e {
        T::BadName(_) | T::BadLifetime(_) => CliError::invalid_input(message),
        T::NameTaken(name) => CliError::new("CONFLICT", message)
            .hint(format!(
                "choose another name, or revoke it first: agents server token revoke {name}"
            ))
            .hint("name the token: agents server token create --user USER NAME"),
        T::NotFound(_) => CliError::new("NOT_FOUND", message).hint("agents server token list"),
        T::Random(_) => CliError::new("ENVIRONMENT", message),
    }
}

/// How the CLI says why a user, organization or membership could not be changed.
fn team_error(e: cleveragents_engine::api::team::TeamError) -> CliError {
    use cleveragents_engine::api::team::TeamError as T;
    let message = e.to_string();
    match e {
        T::BadName { .. } => CliError::invalid_input(message),
        T::NameTaken(_) => CliError::new("CONFLICT", message)
            .hint("agents server user list; agents server org list"),
        T::UnknownUser(name) => CliError::new("NOT_FOUND", message)
            .hint(format!("add the user first: agents server user add {name}")),
        T::UnknownOrg(name) => CliError::new("NOT_FOUND", message).hint(format!(
            "add it first: agents server org add {name} --owner USER"
        )),
        T::NotMember { org, .. } => {
            CliError::new("NOT_FOUND", message).hint(format!("agents server org show {org}"))
        }
        T::LastOwner { org, .. } => CliError::new("CONFLICT", message).hint(format!(
            "agents server org member add {org} USER --role owner"
        )),
    }
}

/// How the CLI says that the caller's role does not allow a call, and who could allow it.
fn permission_denied(d: &cleveragents_engine::api::Denial) -> CliError {
    let hint = match d.needed {
        Some(role) => format!(
            "an owner of `{}` can grant it: agents server org member add {} {} --role {role}",
            d.namespace, d.namespace, d.user
        ),
        None => "ask a server administrator".to_string(),
    };
    CliError::new("PERMISSION_DENIED", format!("permission denied: {d}"))
        .data(serde_json::to_value(d).unwrap_or_default())
        .hint(hint)
}

/// How the CLI says why no sandbox could be chosen for `plan export`.
fn export_error(e: cleveragents_engine::api::ExportError) -> CliError {
    use cleveragents_engine::api::ExportError as X;
    let message = e.to_string();
    match e {
        X::NoSandbox => CliError::new("NOT_FOUND", message),
        X::NoSandboxFor { available, .. } => {
            CliError::new("NOT_FOUND", message).hint(format!("sandboxes: {}", available.join(", ")))
        }
        X::SeveralSandboxes { .. } => {
            CliError::invalid_input(format!("{message}; choose one with --resource NAME"))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_usage_approvals_denials_and_interrupts_leave_the_failure_exit_code() {
        let special: Vec<(ErrorCode, u8)> = ErrorCode::ALL
            .iter()
            .map(|c| (*c, exit_of(*c).code()))
            .filter(|(_, exit)| *exit != 1)
            .collect();
        assert_eq!(
            special,
            [
                (ErrorCode::Usage, 2),
                (ErrorCode::NeedsApproval, 3),
                (ErrorCode::Interrupted, 130),
                (ErrorCode::PermissionDenied, 4),
                (ErrorCode::PolicyDenied, 4)
            ]
        );
        assert_eq!(
            CliError::new("NEEDS_APPROVAL", "x").body.exit,
            Exit::NeedsHuman
        );
        assert_eq!(exit_of_str("NO_SUCH_CODE"), Exit::Failure);
    }

    /// Every code the CLI spells out is an [`ErrorCode`], so every error gets its exit code
    /// from the one mapping.
    #[test]
    fn every_error_code_written_in_the_cli_is_a_known_code() {
        let pattern = regex::Regex::new(r#"(?:CliError::new\(|code: )\s*"([A-Z_]+)""#).unwrap();
        let mut unknown = Vec::new();
        let mut seen = 0;
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
        let mut dirs = vec![root];
        while let Some(dir) = dirs.pop() {
            for entry in std::fs::read_dir(&dir).unwrap() {
                let path = entry.unwrap().path();
                if path.is_dir() {
                    dirs.push(path);
                } else if path.extension().is_some_and(|e| e == "rs") {
                    let text = std::fs::read_to_string(&path).unwrap();
                    for c in pattern.captures_iter(&text) {
                        seen += 1;
                        if c[1].parse::<ErrorCode>().is_err() {
                            unknown.push(format!("{}: {}", path.display(), &c[1]));
                        }
                    }
                }
            }
        }
        assert!(seen > 100, "the scan found only {seen} codes");
        assert!(unknown.is_empty(), "unknown codes: {unknown:?}");
    }
}
