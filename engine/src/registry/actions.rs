//! Actions (spec section 09): reusable, project-agnostic definitions of work, created from a
//! YAML file with command-line overrides, then moved draft -> available -> archived.
//!
//! The YAML schema (published in `docs/actions.md`) uses the spec's kebab-case keys; the
//! snake_case spellings are accepted too. Unknown keys are errors with line and column.

use std::collections::{BTreeMap, HashSet};

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::config::Provider;
pub use crate::domain::action::{
    Action, ArgType, ArgumentSpec, SandboxSpec, ScriptStep, SpawnSpec,
};
use crate::domain::name::{NameError, QualifiedName};
use crate::domain::{ActionState, Id};
use crate::registry::actors::{self, ActorError};
use crate::registry::profiles::{self, ProfileError};
use crate::registry::template::{self, TemplateError};
use crate::registry::yaml::{self, YamlError};
use crate::store::{Store, StoreError};
use crate::tools::shell::Interpreter;

impl ArgType {
    /// The lowercase name.
    pub fn as_str(self) -> &'static str {
        match self {
            ArgType::String => "string",
            ArgType::Integer => "integer",
            ArgType::Number => "number",
            ArgType::Boolean => "boolean",
            ArgType::Path => "path",
        }
    }

    /// Parses `string|integer|number|boolean|path` (and `str`, `int`, `float`, `bool`).
    pub fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "string" | "str" => ArgType::String,
            "integer" | "int" => ArgType::Integer,
            "number" | "float" => ArgType::Number,
            "boolean" | "bool" => ArgType::Boolean,
            "path" => ArgType::Path,
            _ => return None,
        })
    }

    /// Converts a command-line value (`--arg k=v`) to a typed JSON value.
    ///
    /// # Errors
    /// What the type accepts.
    pub fn coerce_str(self, raw: &str) -> Result<Value, String> {
        match self {
            ArgType::String => Ok(Value::String(raw.to_string())),
            ArgType::Path if raw.is_empty() => Err("expected a non-empty path".into()),
            ArgType::Path => Ok(Value::String(raw.to_string())),
            ArgType::Integer => raw
                .trim()
                .parse::<i64>()
                .map(Value::from)
                .map_err(|_| format!("expected a whole number, got `{raw}`")),
            ArgType::Number => raw
                .trim()
                .parse::<f64>()
                .ok()
                .filter(|f| f.is_finite())
                .and_then(serde_json::Number::from_f64)
                .map(Value::Number)
                .ok_or_else(|| format!("expected a number, got `{raw}`")),
            ArgType::Boolean => match raw.trim().to_ascii_lowercase().as_str() {
                "true" | "yes" | "1" => Ok(Value::Bool(true)),
                "false" | "no" | "0" => Ok(Value::Bool(false)),
                _ => Err(format!("expected true or false, got `{raw}`")),
            },
        }
    }

    /// Checks a YAML default value against the type, converting integers written as numbers.
    ///
    /// # Errors
    /// What the type accepts.
    pub fn check_value(self, v: &Value) -> Result<Value, String> {
        if v.as_str().is_some_and(|s| s.contains('\0')) {
            return Err(NUL_MESSAGE.into());
        }
        match (self, v) {
            (ArgType::String | ArgType::Path, Value::String(_)) => Ok(v.clone()),
            (ArgType::Integer, Value::Number(n)) if n.is_i64() => Ok(v.clone()),
            (ArgType::Number, Value::Number(_)) => Ok(v.clone()),
            (ArgType::Boolean, Value::Bool(_)) => Ok(v.clone()),
            _ => Err(format!(
                "`{v}` is not {} {}",
                if self == ArgType::Integer { "an" } else { "a" },
                self.as_str()
            )),
        }
    }
}

/// Why a value holding NUL is refused (shell words, environment variables and file names end
/// at NUL, so the value could never arrive whole).
pub const NUL_MESSAGE: &str = "the value holds a NUL character (\\0), which no shell command, environment variable or file name can carry; remove it";

/// The environment variable that carries argument `name` to shell steps: `AGENTS_ARG_` and
/// the name in upper case (`from` -> `AGENTS_ARG_FROM`).
pub fn env_name(name: &str) -> String {
    format!("AGENTS_ARG_{}", name.to_ascii_uppercase())
}

/// The environment shell steps see for a plan's bound arguments ([`env_name`] -> value):
/// strings as they are, numbers and booleans as their JSON text. Arguments without a value are
/// absent.
pub fn argument_env(arguments: &Map<String, Value>) -> BTreeMap<String, String> {
    arguments
        .iter()
        .filter(|(_, v)| !v.is_null())
        .map(|(k, v)| {
            let text = match v {
                Value::String(s) => s.clone(),
                other => other.to_string(),
            };
            (env_name(k), text)
        })
        .collect()
}

impl ArgumentSpec {
    /// Parses `name:type:required|optional[:description]`.
    ///
    /// # Errors
    /// What is wrong with the spec.
    pub fn parse_cli(spec: &str) -> Result<Self, String> {
        let mut parts = spec.splitn(4, ':');
        let name = parts.next().unwrap_or("").trim();
        let ty = parts.next().map(str::trim);
        let req = parts.next().map(str::trim);
        let desc = parts.next().map(str::trim).filter(|d| !d.is_empty());
        let (Some(ty), Some(req)) = (ty, req) else {
            return Err(format!(
                "`{spec}` is not NAME:TYPE:required|optional[:DESCRIPTION], e.g. target:integer:required:Target coverage"
            ));
        };
        let arg_type = ArgType::parse(ty).ok_or_else(|| {
            format!("`{ty}` is not a type; use string, integer, number, boolean or path")
        })?;
        let required = match req {
            "required" => true,
            "optional" => false,
            other => return Err(format!("`{other}` must be `required` or `optional`")),
        };
        Ok(Self {
            name: name.to_string(),
            arg_type,
            required,
            description: desc.map(str::to_string),
            default: None,
        })
    }
}

impl ScriptStep {
    /// `run`, `tool` or `spawn`.
    pub fn kind(&self) -> &'static str {
        if self.run.is_some() {
            "run"
        } else if self.tool.is_some() {
            "tool"
        } else {
            "spawn"
        }
    }
}

/// An action file as written.
#[derive(Debug, Clone, Default, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct ActionFile {
    /// Namespaced name (the NAME argument overrides it).
    pub name: Option<String>,
    /// Short description.
    pub description: Option<String>,
    /// Long description.
    #[serde(alias = "long_description")]
    pub long_description: Option<String>,
    /// When the work counts as done (required).
    #[serde(alias = "definition_of_done")]
    pub definition_of_done: Option<String>,
    /// Strategize actor (required).
    #[serde(alias = "strategy_actor")]
    pub strategy_actor: Option<String>,
    /// Execute actor (required).
    #[serde(alias = "execution_actor")]
    pub execution_actor: Option<String>,
    /// Cost/risk estimator.
    #[serde(alias = "estimation_actor")]
    pub estimation_actor: Option<String>,
    /// Invariant reconciliation actor.
    #[serde(alias = "invariant_actor")]
    pub invariant_actor: Option<String>,
    /// Default automation profile for plans of this action.
    #[serde(alias = "automation_profile")]
    pub automation_profile: Option<String>,
    /// Keep the action after use (default true).
    pub reusable: Option<bool>,
    /// Only read-only tools (default false).
    #[serde(alias = "read_only")]
    pub read_only: Option<bool>,
    /// Action-level invariants, carried into plans.
    #[serde(default)]
    pub invariants: Vec<String>,
    /// Declared arguments.
    #[serde(default)]
    pub arguments: Vec<ArgumentSpec>,
    /// Steps for the built-in offline actors.
    pub script: Option<Vec<ScriptStep>>,
    /// Sandbox widening for shell steps.
    pub sandbox: Option<SandboxSpec>,
    /// The interpreter of every `run:` step that names none (`sh` or `bash`).
    pub shell: Option<Interpreter>,
}

impl Action {
    /// The actor references with their field names, required ones first.
    pub fn actor_fields(&self) -> Vec<(&'static str, &str)> {
        let mut v = vec![
            ("strategy-actor", self.strategy_actor.as_str()),
            ("execution-actor", self.execution_actor.as_str()),
        ];
        if let Some(a) = &self.estimation_actor {
            v.push(("estimation-actor", a));
        }
        if let Some(a) = &self.invariant_actor {
            v.push(("invariant-actor", a));
        }
        v
    }
}

/// Errors from the action registry.
#[derive(Debug, thiserror::Error)]
pub enum ActionError {
    /// The YAML file is unreadable or invalid (line, column, field).
    #[error(transparent)]
    Yaml(#[from] YamlError),
    /// A command-line value is not acceptable.
    #[error("{flag}: {message}")]
    Flag {
        /// The flag (`--arg`, `--invariant`).
        flag: &'static str,
        /// What is wrong.
        message: String,
    },
    /// Neither the file nor the command line names the action.
    #[error("{0}: the action has no name; add `name: local/NAME` to the file or pass NAME")]
    NoName(String),
    /// The name is invalid or reserved.
    #[error("action name `{name}`: {source}")]
    Name {
        /// The name as given.
        name: String,
        /// Why.
        source: NameError,
    },
    /// An action of that name exists (and `--update` was not given).
    #[error("action {0} already exists")]
    Exists(String),
    /// Plans that are not finished use the action, so it cannot be deleted.
    #[error("action {name} is used by {} plan(s) that are not finished: {}", plans.len(), plans.join(", "))]
    InUse {
        /// The action.
        name: String,
        /// `PLAN_ID (phase/state)` of each.
        plans: Vec<String>,
    },
    /// No action of that name or id.
    #[error("action `{0}` not found")]
    NotFound(crate::registry::lookup::Missing),
    /// An id prefix matches several items.
    #[error(transparent)]
    Ambiguous(crate::domain::IdPrefixError),
    /// The action failed its availability checks.
    #[error("action {name} cannot be made available: {}", failures.join("; "))]
    NotReady {
        /// The action.
        name: String,
        /// Each failed check.
        failures: Vec<String>,
    },
    /// The state change is not allowed.
    #[error("action {name} is {from} and cannot become {to}")]
    State {
        /// The action.
        name: String,
        /// Current state.
        from: ActionState,
        /// Requested state.
        to: ActionState,
    },
    /// An actor reference failed.
    #[error(transparent)]
    Actor(#[from] ActorError),
    /// A profile reference failed.
    #[error(transparent)]
    Profile(#[from] ProfileError),
    /// The database failed.
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl From<crate::registry::lookup::LookupError> for ActionError {
    fn from(e: crate::registry::lookup::LookupError) -> Self {
        match e {
            crate::registry::lookup::LookupError::NotFound(m) => ActionError::NotFound(m),
            crate::registry::lookup::LookupError::Ambiguous(a) => ActionError::Ambiguous(a),
        }
    }
}

/// What `action create` was given on the command line.
#[derive(Debug, Clone, Default, serde::Serialize, serde::Deserialize, schemars::JsonSchema)]
pub struct CreateRequest {
    /// `--config FILE`.
    pub config: std::path::PathBuf,
    /// The file's text, read where the command was given (a client of a server sends it):
    /// when set, `config` only names it in messages.
    #[serde(default)]
    pub config_text: Option<String>,
    /// NAME.
    pub name: Option<String>,
    /// `--strategy-actor`.
    pub strategy_actor: Option<String>,
    /// `--execution-actor`.
    pub execution_actor: Option<String>,
    /// `--estimation-actor`.
    pub estimation_actor: Option<String>,
    /// `--invariant-actor`.
    pub invariant_actor: Option<String>,
    /// `--definition-of-done`.
    pub definition_of_done: Option<String>,
    /// `--description`.
    pub description: Option<String>,
    /// `--long-description`.
    pub long_description: Option<String>,
    /// `--automation-profile`.
    pub automation_profile: Option<String>,
    /// `--reusable` / `--no-reusable`.
    pub reusable: Option<bool>,
    /// `--read-only`.
    pub read_only: Option<bool>,
    /// `--available`.
    pub available: bool,
    /// `--invariant`, added to the file's.
    pub invariants: Vec<String>,
    /// `--arg` specs, replacing same-named file arguments.
    pub args: Vec<String>,
    /// `--update`: replace the definition of an existing action of the same name.
    pub update: bool,
}

/// One override the command line applied over the file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, serde::Deserialize, schemars::JsonSchema)]
pub struct OverrideApplied {
    /// Field (snake_case).
    pub field: String,
    /// Value in the file (`(not set)` when absent).
    pub from: String,
    /// Value from the command line.
    pub to: String,
}

/// The result of `action create`.
#[derive(Debug, Clone, Serialize, serde::Deserialize, schemars::JsonSchema)]
pub struct Created {
    /// The action.
    pub action: Action,
    /// Action-level invariants created with it: (id, text).
    pub invariants: Vec<(String, String)>,
    /// Command-line overrides.
    pub overrides: Vec<OverrideApplied>,
    /// Availability checks run for `--available`.
    pub checks: Vec<Check>,
    /// What the user should know although nothing is wrong (`| raw` placeholders).
    pub warnings: Vec<String>,
    /// With `--update` of an existing action: the version it replaced.
    pub replaced_version: Option<u32>,
}

fn valid_arg_name(n: &str) -> bool {
    n.chars()
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && n.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
}

fn merge(
    field: &str,
    file: Option<String>,
    flag: Option<String>,
    overrides: &mut Vec<OverrideApplied>,
) -> Option<String> {
    match (file, flag) {
        (f, Some(v)) => {
            if f.as_deref() != Some(v.as_str()) {
                overrides.push(OverrideApplied {
                    field: field.to_string(),
                    from: f.unwrap_or_else(|| "(not set)".into()),
                    to: v.clone(),
                });
            }
            Some(v)
        }
        (f, None) => f,
    }
}

/// Creates an action from a YAML file with command-line overrides (spec 09). The action is
/// `draft`, or `available` with `--available` after its availability checks pass. Nothing is
/// written when anything is wrong.
///
/// # Errors
/// YAML errors (line, column, field); missing required fields; invalid arguments, script or
/// placeholders; reserved or duplicate names; with `--available`, failed checks.
pub fn create(
    store: &mut Store,
    providers: &[Provider],
    req: &CreateRequest,
) -> Result<Created, ActionError> {
    let path = req.config.as_path();
    let (file, text): (ActionFile, String) = match &req.config_text {
        Some(text) => (yaml::parse(path, text)?, text.clone()),
        None => yaml::load(path)?,
    };
    let src = Source { path, text: &text };
    let (name, mut overrides) = resolve_name(providers, req, &file, path)?;
    let fields = merge_fields(&src, req, &file, &mut overrides)?;
    let arguments = check_arguments(&src, req, &file)?;
    let samples = sample_values(&arguments);
    check_sandbox(&src, &file)?;
    // Script: the action's `shell:` is the interpreter of every `run` step naming none.
    let script = file.script.clone().map(|mut steps| {
        for st in steps.iter_mut().filter(|st| st.run.is_some()) {
            st.shell = st.shell.or(file.shell);
        }
        steps
    });
    let mut warnings = Vec::new();
    if let Some(script) = &script {
        check_script(script, &samples).map_err(|(field, key, msg)| src.rule(&field, key, msg))?;
        warnings = raw_warnings(script);
    }
    check_placeholders(&src, req, &fields, &samples)?;
    if let Some(p) = &fields.profile {
        profiles::find(store, p)
            .map_err(|e| src.rule("automation-profile", "automation-profile", e.to_string()))?;
    }
    let invariants = collect_invariants(&src, req, &file)?;
    let existing = store.action_by_name(&name)?;
    if existing.is_some() && !req.update {
        return Err(ActionError::Exists(name));
    }
    let now = super::now();
    let mut action = Action {
        action_id: existing.as_ref().map_or_else(Id::generate, |e| e.action_id),
        name,
        state: existing.as_ref().map_or(ActionState::Draft, |e| e.state),
        description: fields.description,
        long_description: fields.long_description,
        definition_of_done: fields.dod,
        strategy_actor: actors::canonical(&fields.strategy),
        execution_actor: actors::canonical(&fields.execution),
        estimation_actor: fields.estimation.as_deref().map(actors::canonical),
        invariant_actor: fields.inv_actor.as_deref().map(actors::canonical),
        automation_profile: fields
            .profile
            .map(|p| profiles::parse_name(&p))
            .transpose()?,
        reusable: fields.reusable,
        read_only: fields.read_only,
        arguments,
        script,
        sandbox: file.sandbox.clone(),
        config_path: Some(yaml::stored_path(path)),
        created_at: existing.as_ref().map_or(now, |e| e.created_at),
        updated_at: now,
        archived_at: existing.as_ref().and_then(|e| e.archived_at),
        version: existing.as_ref().map_or(1, |e| e.version + 1),
    };
    let checks = check_available(store, providers, req, &mut action)?;
    let (invariant_rows, replaced_version) = store_action(store, &action, existing, invariants)?;
    Ok(Created {
        action,
        invariants: invariant_rows,
        overrides,
        checks,
        warnings,
        replaced_version,
    })
}

/// The action file being read: where a rule error points.
struct Source<'a> {
    path: &'a std::path::Path,
    text: &'a str,
}

impl Source<'_> {
    /// A rule error at `field` (key `key` in the file).
    fn rule(&self, field: &str, key: &str, msg: String) -> ActionError {
        ActionError::Yaml(yaml::rule(self.path, self.text, field, key, msg))
    }
}

/// The fields of an action after the command-line overrides.
struct Fields {
    dod: String,
    strategy: String,
    execution: String,
    estimation: Option<String>,
    inv_actor: Option<String>,
    description: Option<String>,
    long_description: Option<String>,
    profile: Option<String>,
    reusable: bool,
    read_only: bool,
}

/// The action's checked, qualified name (the NAME argument over the file's), and the
/// overrides of the name, the invariants and the arguments.
fn resolve_name(
    providers: &[Provider],
    req: &CreateRequest,
    file: &ActionFile,
    path: &std::path::Path,
) -> Result<(String, Vec<OverrideApplied>), ActionError> {
    let mut overrides = Vec::new();
    let raw_name = req
        .name
        .clone()
        .or(file.name.clone())
        .ok_or_else(|| ActionError::NoName(path.display().to_string()))?;
    let name_err = |source| ActionError::Name {
        name: raw_name.clone(),
        source,
    };
    let qualified = QualifiedName::resolve_user_input(&raw_name, &[]).map_err(name_err)?;
    qualified
        .check_user_creatable(&providers.iter().map(|p| p.name.clone()).collect::<Vec<_>>())
        .map_err(name_err)?;
    let name = qualified.to_string();
    if let (Some(from), Some(to)) = (&file.name, &req.name)
        && from != to
    {
        overrides.push(OverrideApplied {
            field: "name".into(),
            from: from.clone(),
            to: name.clone(),
        });
    }
    if !req.invariants.is_empty() {
        overrides.push(OverrideApplied {
            field: "invariants".into(),
            from: format!("{} from the file", file.invariants.len()),
            to: format!(
                "{} (+{} from --invariant)",
                file.invariants.len() + req.invariants.len(),
                req.invariants.len()
            ),
        });
    }
    if !req.args.is_empty() {
        overrides.push(OverrideApplied {
            field: "arguments".into(),
            from: format!("{} from the file", file.arguments.len()),
            to: format!("{} --arg given (same names replace)", req.args.len()),
        });
    }
    Ok((name, overrides))
}

/// The file's fields with the flags over them (each override recorded), the required ones
/// present and every actor a single reference.
fn merge_fields(
    src: &Source<'_>,
    req: &CreateRequest,
    file: &ActionFile,
    overrides: &mut Vec<OverrideApplied>,
) -> Result<Fields, ActionError> {
    let text = |field: &str, from_file: &Option<String>, flag: &Option<String>, o: &mut Vec<_>| {
        merge(field, from_file.clone(), flag.clone(), o)
    };
    let dod = text(
        "definition-of-done",
        &file.definition_of_done,
        &req.definition_of_done,
        overrides,
    );
    let strategy = text(
        "strategy-actor",
        &file.strategy_actor,
        &req.strategy_actor,
        overrides,
    );
    let execution = text(
        "execution-actor",
        &file.execution_actor,
        &req.execution_actor,
        overrides,
    );
    let estimation = text(
        "estimation-actor",
        &file.estimation_actor,
        &req.estimation_actor,
        overrides,
    );
    let inv_actor = text(
        "invariant-actor",
        &file.invariant_actor,
        &req.invariant_actor,
        overrides,
    );
    let description = text(
        "description",
        &file.description,
        &req.description,
        overrides,
    );
    let long_description = text(
        "long-description",
        &file.long_description,
        &req.long_description,
        overrides,
    );
    let profile = text(
        "automation-profile",
        &file.automation_profile,
        &req.automation_profile,
        overrides,
    );
    let reusable = merge_bool("reusable", file.reusable, req.reusable, true, overrides);
    let read_only = merge_bool("read-only", file.read_only, req.read_only, false, overrides);
    if req.available {
        overrides.push(OverrideApplied {
            field: "available".into(),
            from: "false".into(),
            to: "true".into(),
        });
    }
    let missing = |field: &str, flag: &str| {
        src.rule(
            field,
            field,
            format!(
                "missing required field `{field}`; add `{field}: ...` to the file or pass {flag}"
            ),
        )
    };
    let dod = dod
        .filter(|d| !d.trim().is_empty())
        .ok_or_else(|| missing("definition-of-done", "--definition-of-done"))?;
    let strategy = strategy.ok_or_else(|| missing("strategy-actor", "--strategy-actor"))?;
    let execution = execution.ok_or_else(|| missing("execution-actor", "--execution-actor"))?;
    let fields = Fields {
        dod,
        strategy,
        execution,
        estimation,
        inv_actor,
        description,
        long_description,
        profile,
        reusable,
        read_only,
    };
    check_actor_refs(src, req, &fields)?;
    Ok(fields)
}

/// Every actor field is one reference: not empty, no whitespace.
fn check_actor_refs(
    src: &Source<'_>,
    req: &CreateRequest,
    fields: &Fields,
) -> Result<(), ActionError> {
    for (field, value, flag, from_flag) in [
        (
            "strategy-actor",
            Some(&fields.strategy),
            "--strategy-actor",
            req.strategy_actor.is_some(),
        ),
        (
            "execution-actor",
            Some(&fields.execution),
            "--execution-actor",
            req.execution_actor.is_some(),
        ),
        (
            "estimation-actor",
            fields.estimation.as_ref(),
            "--estimation-actor",
            req.estimation_actor.is_some(),
        ),
        (
            "invariant-actor",
            fields.inv_actor.as_ref(),
            "--invariant-actor",
            req.invariant_actor.is_some(),
        ),
    ] {
        if let Some(v) = value
            && (v.trim().is_empty() || v.chars().any(char::is_whitespace))
        {
            let message = format!("`{v}` is not an actor reference");
            return Err(if from_flag {
                ActionError::Flag { flag, message }
            } else {
                src.rule(field, field, message)
            });
        }
    }
    Ok(())
}

/// The arguments: the file's entries, then `--arg` specs replacing same-named ones; names
/// valid and distinct (also as shell variables), defaults typed and only on optional ones.
fn check_arguments(
    src: &Source<'_>,
    req: &CreateRequest,
    file: &ActionFile,
) -> Result<Vec<ArgumentSpec>, ActionError> {
    let mut arguments = file.arguments.clone();
    for spec in &req.args {
        let a = ArgumentSpec::parse_cli(spec).map_err(|message| ActionError::Flag {
            flag: "--arg",
            message,
        })?;
        if !valid_arg_name(&a.name) {
            return Err(ActionError::Flag {
                flag: "--arg",
                message: format!(
                    "`{}` is not an argument name; use letters, digits and `_`",
                    a.name
                ),
            });
        }
        match arguments.iter_mut().find(|x| x.name == a.name) {
            Some(existing) => *existing = a,
            None => arguments.push(a),
        }
    }
    let mut seen = HashSet::new();
    for (i, a) in arguments.iter_mut().enumerate() {
        let field = format!("arguments[{i}]");
        if !valid_arg_name(&a.name) {
            return Err(src.rule(
                &format!("{field}.name"),
                "name",
                format!(
                    "`{}` is not an argument name; use letters, digits and `_`, starting with a letter",
                    a.name
                ),
            ));
        }
        if !seen.insert(a.name.clone()) {
            return Err(src.rule(
                &format!("{field}.name"),
                "name",
                format!("argument `{}` is declared twice", a.name),
            ));
        }
        if let Some(other) = seen
            .iter()
            .find(|o| **o != a.name && env_name(o) == env_name(&a.name))
        {
            return Err(src.rule(
                &format!("{field}.name"),
                "name",
                format!(
                    "arguments `{other}` and `{}` would both reach shell steps as `{}`; rename one",
                    a.name,
                    env_name(&a.name)
                ),
            ));
        }
        if let Some(d) = &a.default {
            if a.required {
                return Err(src.rule(
                    &format!("{field}.default"),
                    "default",
                    format!(
                        "argument `{}` is required, so a default would never be used; remove `default` or set `required: false`",
                        a.name
                    ),
                ));
            }
            a.default = Some(
                a.arg_type
                    .check_value(d)
                    .map_err(|m| src.rule(&format!("{field}.default"), "default", m))?,
            );
        }
    }
    Ok(arguments)
}

/// The `sandbox:` block: writable paths widen what shell steps may change outside the
/// sandbox, so the whole filesystem, relative paths and paths that climb out with `..` are
/// refused; `env` names must be environment variable names.
fn check_sandbox(src: &Source<'_>, file: &ActionFile) -> Result<(), ActionError> {
    for (i, p) in file
        .sandbox
        .iter()
        .flat_map(|s| s.writable_paths.iter())
        .enumerate()
    {
        let field = format!("sandbox.writable-paths[{i}]");
        if let Some(problem) = writable_path_problem(p) {
            return Err(src.rule(
                &field,
                "writable-paths",
                format!(
                    "{problem}; give a specific directory without `..`, e.g. `/tmp/build-cache`"
                ),
            ));
        }
    }
    for (i, name) in file.sandbox.iter().flat_map(|s| s.env.iter()).enumerate() {
        let valid = name
            .chars()
            .next()
            .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
            && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
        if !valid {
            return Err(src.rule(
                &format!("sandbox.env[{i}]"),
                "env",
                format!(
                    "`{name}` is not an environment variable name; use letters, digits and `_`, e.g. `RUSTUP_HOME`"
                ),
            ));
        }
    }
    Ok(())
}

/// Why a `sandbox.writable-paths` entry is refused, if it is.
fn writable_path_problem(p: &str) -> Option<String> {
    if p.trim().is_empty() {
        Some("an empty path".to_string())
    } else if std::path::Path::new(p)
        .components()
        .all(|c| matches!(c, std::path::Component::RootDir))
    {
        Some(format!("`{p}` would make the whole filesystem writable"))
    } else if !p.starts_with('/') {
        Some(format!(
            "`{p}` is relative, and would be resolved against whatever directory `agents` runs in; the sandbox's work tree is always writable, so name only directories outside it, as absolute paths"
        ))
    } else if std::path::Path::new(p)
        .components()
        .any(|c| matches!(c, std::path::Component::ParentDir))
    {
        Some(format!(
            "`{p}` contains `..`, which can climb out of the intended directory"
        ))
    } else {
        None
    }
}

/// The placeholders in the text fields render with sample argument values.
fn check_placeholders(
    src: &Source<'_>,
    req: &CreateRequest,
    fields: &Fields,
    samples: &Map<String, Value>,
) -> Result<(), ActionError> {
    for (field, value, flag, from_flag) in [
        (
            "description",
            fields.description.as_deref(),
            "--description",
            req.description.is_some(),
        ),
        (
            "long-description",
            fields.long_description.as_deref(),
            "--long-description",
            req.long_description.is_some(),
        ),
        (
            "definition-of-done",
            Some(fields.dod.as_str()),
            "--definition-of-done",
            req.definition_of_done.is_some(),
        ),
    ] {
        if let Some(v) = value {
            template::render(v, samples).map_err(|e| {
                if from_flag {
                    ActionError::Flag {
                        flag,
                        message: e.to_string(),
                    }
                } else {
                    src.rule(field, field, e.to_string())
                }
            })?;
        }
    }
    Ok(())
}

/// The invariants of the file, then of `--invariant`, trimmed; none may be empty.
fn collect_invariants(
    src: &Source<'_>,
    req: &CreateRequest,
    file: &ActionFile,
) -> Result<Vec<String>, ActionError> {
    let mut invariants: Vec<String> = Vec::new();
    for (i, t) in file.invariants.iter().enumerate() {
        if t.trim().is_empty() {
            return Err(src.rule(
                &format!("invariants[{i}]"),
                "invariants",
                "an invariant cannot be empty".into(),
            ));
        }
        if let Err(m) = crate::registry::invariant_form::machine_form(t) {
            return Err(src.rule(&format!("invariants[{i}]"), "invariants", m));
        }
        invariants.push(t.trim().to_string());
    }
    for t in &req.invariants {
        if t.trim().is_empty() {
            return Err(ActionError::Flag {
                flag: "--invariant",
                message: "an invariant cannot be empty".into(),
            });
        }
        if let Err(m) = crate::registry::invariant_form::machine_form(t) {
            return Err(ActionError::Flag {
                flag: "--invariant",
                message: format!("`{}`: {m}", t.trim()),
            });
        }
        invariants.push(t.trim().to_string());
    }
    Ok(invariants)
}

/// With `--available`, or when the action already is available (it stays usable, so its
/// new definition must pass too): runs the availability checks and makes it available.
/// Returns the checks run (none otherwise).
fn check_available(
    store: &Store,
    providers: &[Provider],
    req: &CreateRequest,
    action: &mut Action,
) -> Result<Vec<Check>, ActionError> {
    if !(req.available || action.state == ActionState::Available) {
        return Ok(Vec::new());
    }
    let checks = availability_checks(store, providers, action);
    let failures: Vec<String> = checks
        .iter()
        .filter(|c| !c.ok)
        .map(|c| format!("{}: {}", c.label, c.detail))
        .collect();
    if !failures.is_empty() {
        return Err(ActionError::NotReady {
            name: action.name.clone(),
            failures,
        });
    }
    action.state = ActionState::Available;
    action.archived_at = None;
    Ok(checks)
}

/// The invariant rows an action's store wrote and the version it replaced.
type Stored = (Vec<(String, String)>, Option<u32>);

/// Inserts the action, or updates `existing` (its invariants stay; the new ones of the file
/// are added). Returns the invariant rows written and the version replaced.
fn store_action(
    store: &mut Store,
    action: &Action,
    existing: Option<Action>,
    mut invariants: Vec<String>,
) -> Result<Stored, ActionError> {
    let Some(old) = existing else {
        return Ok((store.insert_action(action, &invariants)?, None));
    };
    let have: HashSet<String> = store
        .invariants()?
        .into_iter()
        .filter(|i| {
            i.scope == crate::domain::InvariantScope::Action
                && i.plan_id.is_none()
                && i.action.as_deref() == Some(action.name.as_str())
        })
        .map(|i| i.text.trim().to_string())
        .collect();
    invariants.retain(|t| !have.contains(t));
    invariants.dedup();
    Ok((store.update_action(action, &invariants)?, Some(old.version)))
}

fn merge_bool(
    field: &str,
    file: Option<bool>,
    flag: Option<bool>,
    default: bool,
    overrides: &mut Vec<OverrideApplied>,
) -> bool {
    match flag {
        Some(v) => {
            let before = file.unwrap_or(default);
            if before != v {
                overrides.push(OverrideApplied {
                    field: field.into(),
                    from: before.to_string(),
                    to: v.to_string(),
                });
            }
            v
        }
        None => file.unwrap_or(default),
    }
}

type ScriptProblem = (String, &'static str, String);

/// A value of each argument's type (its default when it has one), to try templates with.
fn sample_values(arguments: &[ArgumentSpec]) -> Map<String, Value> {
    arguments
        .iter()
        .map(|a| {
            let v = a.default.clone().unwrap_or_else(|| match a.arg_type {
                ArgType::String | ArgType::Path => Value::from("sample"),
                ArgType::Integer => Value::from(1),
                ArgType::Number => Value::from(1.5),
                ArgType::Boolean => Value::from(true),
            });
            (a.name.clone(), v)
        })
        .collect()
}

fn check_script(script: &[ScriptStep], samples: &Map<String, Value>) -> Result<(), ScriptProblem> {
    let mut names: BTreeMap<&str, usize> = BTreeMap::new();
    for (i, s) in script.iter().enumerate() {
        check_step(i, s, samples, &mut names)?;
    }
    check_dependencies(script, &names)
}

/// Checks script step `i` on its own (name, kind, fields, templates) and records its name.
fn check_step<'s>(
    i: usize,
    s: &'s ScriptStep,
    samples: &Map<String, Value>,
    names: &mut BTreeMap<&'s str, usize>,
) -> Result<(), ScriptProblem> {
    let f = format!("script[{i}]");
    if !valid_step_name(&s.name) {
        return Err((
            format!("{f}.name"),
            "name",
            format!(
                "`{}` is not a step name; use letters, digits, `-` and `_`",
                s.name
            ),
        ));
    }
    if names.insert(&s.name, i).is_some() {
        return Err((
            format!("{f}.name"),
            "name",
            format!("step name `{}` is used twice", s.name),
        ));
    }
    let kinds = [s.run.is_some(), s.tool.is_some(), s.spawn.is_some()]
        .iter()
        .filter(|b| **b)
        .count();
    if kinds != 1 {
        return Err((
            f.clone(),
            "name",
            format!(
                "step `{}` must have exactly one of `run`, `tool` or `spawn` (it has {kinds})",
                s.name
            ),
        ));
    }
    if s.resource.is_some() && s.spawn.is_some() {
        return Err((
            format!("{f}.resource"),
            "resource",
            format!(
                "step `{}`: a spawn step's child plan works on the projects it is given; `resource` belongs to `run` and `tool` steps",
                s.name
            ),
        ));
    }
    if s.args.is_some() && s.tool.is_none() {
        return Err((
            format!("{f}.args"),
            "args",
            format!(
                "step `{}`: `args` belongs to `tool` steps; a spawn step puts them under `spawn: {{action, args}}`",
                s.name
            ),
        ));
    }
    if let Some(run) = &s.run {
        if run.trim().is_empty() {
            return Err((format!("{f}.run"), "run", "the command is empty".into()));
        }
        template::render_shell(run, samples)
            .map_err(|e| (format!("{f}.run"), "run", e.to_string()))?;
        if let Some(problem) = template::shell_quoting_problem(run) {
            return Err((format!("{f}.run"), "run", problem));
        }
    }
    if s.shell.is_some() && s.run.is_none() {
        return Err((
            format!("{f}.shell"),
            "shell",
            format!(
                "step `{}`: `shell` belongs to `run` steps (a `tool: shell_execute` step puts it in `args`)",
                s.name
            ),
        ));
    }
    if let Some(command) = shell_command_of(s)
        && let Some(problem) = template::shell_quoting_problem(command)
    {
        return Err((format!("{f}.args.command"), "command", problem));
    }
    if let Some(tool) = &s.tool
        && (tool.trim().is_empty() || tool.chars().any(char::is_whitespace))
    {
        return Err((
            format!("{f}.tool"),
            "tool",
            format!("`{tool}` is not a tool name"),
        ));
    }
    if let Some(args) = &s.args {
        template::check_json_renders(&Value::Object(args.clone()), samples)
            .map_err(|(p, e)| (format!("{f}.args{p}"), "args", e.to_string()))?;
    }
    for (field, v) in s
        .run
        .iter()
        .map(|r| ("run".to_string(), Value::String(r.clone())))
        .chain(
            s.args
                .iter()
                .map(|a| ("args".to_string(), Value::Object(a.clone()))),
        )
        .chain(
            s.spawn
                .iter()
                .map(|sp| ("spawn.args".to_string(), Value::Object(sp.args.clone()))),
        )
    {
        if let Some(path) = nul_path(&v) {
            let key = field.rsplit('.').next().unwrap_or("run");
            return Err((
                format!("{f}.{field}{path}"),
                key_of(key),
                NUL_MESSAGE.into(),
            ));
        }
    }
    if let Some(sp) = &s.spawn {
        QualifiedName::parse(&sp.action)
            .map_err(|e| (format!("{f}.spawn.action"), "action", e.to_string()))?;
        template::check_json_renders(&Value::Object(sp.args.clone()), samples)
            .map_err(|(p, e)| (format!("{f}.spawn.args{p}"), "args", e.to_string()))?;
    }
    if s.parallel_group.is_some() && s.spawn.is_none() {
        return Err((
            format!("{f}.parallel-group"),
            "parallel-group",
            format!(
                "step `{}`: only spawn steps can share a parallel group",
                s.name
            ),
        ));
    }
    Ok(())
}

/// Every `depends-on` names another step, and the dependencies have no cycle.
fn check_dependencies(
    script: &[ScriptStep],
    names: &BTreeMap<&str, usize>,
) -> Result<(), ScriptProblem> {
    for (i, s) in script.iter().enumerate() {
        for d in s.depends_on.iter().flatten() {
            if d == &s.name {
                return Err((
                    format!("script[{i}].depends-on"),
                    "depends-on",
                    format!("step `{}` depends on itself", s.name),
                ));
            }
            if !names.contains_key(d.as_str()) {
                return Err((
                    format!("script[{i}].depends-on"),
                    "depends-on",
                    format!(
                        "step `{}` depends on `{d}`, which is not a step name (steps: {})",
                        s.name,
                        names.keys().copied().collect::<Vec<_>>().join(", ")
                    ),
                ));
            }
        }
    }
    // Cycles: depth-first over explicit dependencies (the implicit "previous step" edge always
    // points backwards, so it cannot close a cycle on its own).
    let deps = |i: usize| -> Vec<usize> {
        match &script[i].depends_on {
            Some(d) => d.iter().map(|n| names[n.as_str()]).collect(),
            None if i > 0 => vec![i - 1],
            None => vec![],
        }
    };
    let mut state = vec![0u8; script.len()];
    fn visit(i: usize, deps: &dyn Fn(usize) -> Vec<usize>, state: &mut [u8]) -> Option<usize> {
        if state[i] == 2 {
            return None;
        }
        if state[i] == 1 {
            return Some(i);
        }
        state[i] = 1;
        for d in deps(i) {
            if let Some(c) = visit(d, deps, state) {
                return Some(c);
            }
        }
        state[i] = 2;
        None
    }
    for i in 0..script.len() {
        if let Some(c) = visit(i, &deps, &mut state) {
            return Err((
                format!("script[{c}].depends-on"),
                "depends-on",
                format!("step `{}` is part of a dependency cycle", script[c].name),
            ));
        }
    }
    Ok(())
}

/// The path (`.key[1]`, empty for the value itself) of the first string holding NUL.
fn nul_path(v: &Value) -> Option<String> {
    match v {
        Value::String(s) => s.contains('\0').then(String::new),
        Value::Array(a) => a
            .iter()
            .enumerate()
            .find_map(|(i, x)| nul_path(x).map(|p| format!("[{i}]{p}"))),
        Value::Object(o) => o
            .iter()
            .find_map(|(k, x)| nul_path(x).map(|p| format!(".{k}{p}"))),
        _ => None,
    }
}

/// The YAML key a script field is found under (for the line number).
fn key_of(field: &str) -> &'static str {
    match field {
        "run" => "run",
        _ => "args",
    }
}

fn valid_step_name(n: &str) -> bool {
    n.chars().next().is_some_and(|c| c.is_ascii_alphanumeric())
        && n.chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
}

/// The names of the built-in tools a `tool:` step may use (from the tools registry).
pub fn builtin_tool_names() -> Vec<&'static str> {
    crate::tools::builtins().iter().map(|t| t.name()).collect()
}

/// Problems with what a script refers to: unknown tool names, spawned actions that are not
/// registered (or archived), and spawn `args` the spawned action does not declare or required
/// arguments it would miss. Empty when everything resolves.
fn script_reference_problems(store: &Store, action: &Action) -> Vec<String> {
    let mut problems = Vec::new();
    for (i, step) in action.script.iter().flatten().enumerate() {
        if let Some(tool) = &step.tool
            && crate::tools::builtin(tool).is_none()
        {
            let names = builtin_tool_names();
            let near = crate::config::nearest(tool, names.iter().copied())
                .map(|n| format!("did you mean `{n}`? "))
                .unwrap_or_default();
            problems.push(format!(
                "script[{i}].tool: unknown tool `{tool}`; {near}built-in tools: {}",
                names.join(", ")
            ));
        }
        let Some(spawn) = &step.spawn else { continue };
        let field = format!("script[{i}].spawn");
        let same = QualifiedName::resolve_user_input(&spawn.action, &[])
            .is_ok_and(|q| q.to_string() == action.name);
        let target = if same {
            action.clone()
        } else {
            match find(store, &spawn.action) {
                Ok(t) if t.state == ActionState::Archived => {
                    problems.push(format!(
                        // A command inside a sentence stays (D-commands-2): it explains the error rather than suggesting the next step.
                        "{field}.action: {} is archived; restore it with `agents action available {}`",
                        t.name, t.name
                    ));
                    continue;
                }
                Ok(t) => t,
                Err(ActionError::NotFound(m)) => {
                    problems.push(format!(
                        "{field}.action: no action `{}` is registered{}; create it before making this one available",
                        spawn.action,
                        m.suggestion
                            .map(|s| format!(" (did you mean `{s}`?)"))
                            .unwrap_or_default()
                    ));
                    continue;
                }
                Err(e) => {
                    problems.push(format!("{field}.action: {e}"));
                    continue;
                }
            }
        };
        let declared: Vec<&str> = target.arguments.iter().map(|a| a.name.as_str()).collect();
        for key in spawn.args.keys() {
            if !declared.contains(&key.as_str()) {
                problems.push(format!(
                    "{field}.args.{key}: {} declares no argument `{key}` (declared: {})",
                    target.name,
                    if declared.is_empty() {
                        "none".to_string()
                    } else {
                        declared.join(", ")
                    }
                ));
            }
        }
        for a in target.arguments.iter().filter(|a| a.required) {
            if !spawn.args.contains_key(&a.name) {
                problems.push(format!(
                    "{field}.args: {} requires argument `{}`",
                    target.name, a.name
                ));
            }
        }
    }
    problems
}

/// One availability check (`action available`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, serde::Deserialize, schemars::JsonSchema)]
pub struct Check {
    /// What was checked (`Strategy Actor`).
    pub label: String,
    /// Whether it passed.
    pub ok: bool,
    /// `resolved (provider)`, `present`, or why it failed.
    pub detail: String,
}

/// The checks `action available` runs: every actor resolves, the definition of done is
/// present, the argument schema and the automation profile are valid.
pub fn availability_checks(store: &Store, providers: &[Provider], action: &Action) -> Vec<Check> {
    let mut out = Vec::new();
    for (field, reference) in action.actor_fields() {
        let label = match field {
            "strategy-actor" => "Strategy Actor",
            "execution-actor" => "Execution Actor",
            "estimation-actor" => "Estimation Actor",
            _ => "Invariant Actor",
        };
        out.push(match actors::resolve(store, providers, reference) {
            Ok(r) => Check {
                label: label.into(),
                ok: true,
                detail: format!("resolved ({} {})", r.kind_label(), r.name()),
            },
            Err(e) => Check {
                label: label.into(),
                ok: false,
                detail: e.to_string(),
            },
        });
    }
    out.push(Check {
        label: "Definition of Done".into(),
        ok: !action.definition_of_done.trim().is_empty(),
        detail: if action.definition_of_done.trim().is_empty() {
            "missing".into()
        } else {
            "present".into()
        },
    });
    let schema = action
        .arguments
        .iter()
        .find_map(|a| {
            a.default.as_ref().and_then(|d| {
                a.arg_type
                    .check_value(d)
                    .err()
                    .map(|e| format!("{}: {e}", a.name))
            })
        })
        .or_else(|| {
            template::render(
                &action.definition_of_done,
                &sample_values(&action.arguments),
            )
            .err()
            .map(|e| e.to_string())
        });
    out.push(Check {
        label: "Arguments".into(),
        ok: schema.is_none(),
        detail: schema
            .unwrap_or_else(|| format!("valid schema ({} declared)", action.arguments.len())),
    });
    if let Some(script) = &action.script {
        let problems = script_reference_problems(store, action);
        out.push(Check {
            label: "Script".into(),
            ok: problems.is_empty(),
            detail: if problems.is_empty() {
                format!(
                    "{} step{}; tools and spawned actions resolve",
                    script.len(),
                    if script.len() == 1 { "" } else { "s" }
                )
            } else {
                problems.join("; ")
            },
        });
    }
    if let Some(p) = &action.automation_profile {
        out.push(match profiles::find(store, p) {
            Ok(_) => Check {
                label: "Automation Profile".into(),
                ok: true,
                detail: format!("{p} exists"),
            },
            Err(e) => Check {
                label: "Automation Profile".into(),
                ok: false,
                detail: e.to_string(),
            },
        });
    }
    out
}

/// Finds an action by name (bare names mean `local/NAME`) or by id / unique id prefix.
///
/// # Errors
/// [`ActionError::NotFound`], store errors.
pub fn find(store: &Store, input: &str) -> Result<Action, ActionError> {
    Ok(crate::registry::lookup::Lookup {
        kind: "action",
        by_name: &|n| store.action_by_name(n),
        by_id: &|i| store.action_by_id(i),
        ids: &|| store.action_ids(),
        names: &|| Ok(store.actions()?.into_iter().map(|a| a.name).collect()),
    }
    .find(input)??)
}

/// Marks an action available after its checks pass (draft or archived -> available).
/// Returns the action, its previous state and the checks.
///
/// # Errors
/// [`ActionError::NotReady`] listing failed checks; [`ActionError::NotFound`].
pub fn make_available(
    store: &mut Store,
    providers: &[Provider],
    input: &str,
) -> Result<(Action, ActionState, Vec<Check>), ActionError> {
    let mut action = find(store, input)?;
    let from = action.state;
    let checks = availability_checks(store, providers, &action);
    let failures: Vec<String> = checks
        .iter()
        .filter(|c| !c.ok)
        .map(|c| format!("{}: {}", c.label, c.detail))
        .collect();
    if !failures.is_empty() {
        return Err(ActionError::NotReady {
            name: action.name,
            failures,
        });
    }
    if from != ActionState::Available {
        action.state = ActionState::Available;
        action.updated_at = super::now();
        action.archived_at = None;
        store.update_action_state(&action)?;
    }
    Ok((action, from, checks))
}

/// Archives an action (hidden from lists; existing plans unchanged).
///
/// # Errors
/// [`ActionError::NotFound`]; [`ActionError::State`] when already archived.
pub fn archive(store: &mut Store, input: &str) -> Result<(Action, ActionState), ActionError> {
    let mut action = find(store, input)?;
    let from = action.state;
    if !from.can_become(ActionState::Archived) {
        return Err(ActionError::State {
            name: action.name,
            from,
            to: ActionState::Archived,
        });
    }
    let now = super::now();
    action.state = ActionState::Archived;
    action.updated_at = now;
    action.archived_at = Some(now);
    store.update_action_state(&action)?;
    Ok((action, from))
}

/// What `action delete` did.
#[derive(Debug, Clone, Serialize, serde::Deserialize, schemars::JsonSchema)]
pub struct Deleted {
    /// The action as it was.
    pub action: Action,
    /// Finished plans made from it, which keep it (hidden) as their origin.
    pub finished_plans: u64,
}

/// Deletes an action (spec 09 "archived" is kept for hiding; deleting frees the name): refused
/// while a plan that is not finished (neither applied nor cancelled) uses it. Finished plans
/// keep their record of it; the name can be used again at once.
///
/// # Errors
/// [`ActionError::NotFound`]; [`ActionError::InUse`] naming the unfinished plans.
pub fn delete(store: &mut Store, input: &str) -> Result<Deleted, ActionError> {
    let action = find(store, input)?;
    let unfinished = store.unfinished_plans_of_action(&action.action_id)?;
    if !unfinished.is_empty() {
        return Err(ActionError::InUse {
            name: action.name,
            plans: unfinished
                .into_iter()
                .map(|(id, phase, state)| format!("{id} ({phase}/{state})"))
                .collect(),
        });
    }
    let (finished_plans, _, _) = store.action_plan_counts(&action.action_id)?;
    store.delete_action(&action, super::now())?;
    Ok(Deleted {
        action,
        finished_plans,
    })
}

/// Why `plan use` arguments were refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ArgumentError {
    /// `--arg` is not `name=value`.
    #[error("--arg `{0}` is not NAME=VALUE")]
    Syntax(String),
    /// The action declares no such argument.
    #[error("--arg `{name}`: the action declares no argument `{name}` (declared: {declared})")]
    Unknown {
        /// The name given.
        name: String,
        /// Declared names.
        declared: String,
    },
    /// Given twice.
    #[error("--arg `{0}` is given twice")]
    Duplicate(String),
    /// The value holds NUL.
    #[error("argument `{0}`: {NUL_MESSAGE}")]
    Nul(String),
    /// Wrong type.
    #[error("--arg `{name}`: {message}")]
    Type {
        /// The argument.
        name: String,
        /// What the type accepts.
        message: String,
    },
    /// A required argument is given blank (empty or only spaces).
    #[error("required argument `{name}` ({arg_type}{desc}) is blank; pass --arg {name}=VALUE with a value")]
    Blank {
        /// The argument.
        name: String,
        /// Its type.
        arg_type: &'static str,
        /// `: description` or empty.
        desc: String,
    },
    /// A required argument is missing.
    #[error("missing required argument `{name}` ({arg_type}{desc}); pass --arg {name}=VALUE")]
    Missing {
        /// The argument.
        name: String,
        /// Its type.
        arg_type: &'static str,
        /// `: description` or empty.
        desc: String,
    },
}

/// Checks `--arg name=value` pairs against the action's schema and returns the typed values in
/// declaration order, defaults filled in (optional arguments without a default are absent).
///
/// # Errors
/// [`ArgumentError`] for the first problem.
pub fn bind_arguments(
    action: &Action,
    given: &[String],
) -> Result<Map<String, Value>, ArgumentError> {
    let mut raw: BTreeMap<String, String> = BTreeMap::new();
    for g in given {
        let (k, v) = g
            .split_once('=')
            .ok_or_else(|| ArgumentError::Syntax(g.clone()))?;
        let k = k.trim();
        if k.is_empty() {
            return Err(ArgumentError::Syntax(g.clone()));
        }
        if raw.insert(k.to_string(), v.to_string()).is_some() {
            return Err(ArgumentError::Duplicate(k.to_string()));
        }
    }
    for k in raw.keys() {
        if !action.arguments.iter().any(|a| &a.name == k) {
            let declared: Vec<&str> = action.arguments.iter().map(|a| a.name.as_str()).collect();
            return Err(ArgumentError::Unknown {
                name: k.clone(),
                declared: if declared.is_empty() {
                    "none".into()
                } else {
                    declared.join(", ")
                },
            });
        }
    }
    let mut out = Map::new();
    for a in &action.arguments {
        match raw.get(&a.name) {
            Some(v) if v.contains('\0') => return Err(ArgumentError::Nul(a.name.clone())),
            // A required value left blank is a slip, not a value: a blank task sent to a
            // model is a plan about nothing.
            Some(v) if a.required && v.trim().is_empty() => {
                return Err(ArgumentError::Blank {
                    name: a.name.clone(),
                    arg_type: a.arg_type.as_str(),
                    desc: described(a),
                });
            }
            Some(v) => {
                let value = a
                    .arg_type
                    .coerce_str(v)
                    .map_err(|message| ArgumentError::Type {
                        name: a.name.clone(),
                        message,
                    })?;
                out.insert(a.name.clone(), value);
            }
            None if a.required => {
                return Err(ArgumentError::Missing {
                    name: a.name.clone(),
                    arg_type: a.arg_type.as_str(),
                    desc: described(a),
                });
            }
            None => {
                if let Some(d) = &a.default {
                    out.insert(a.name.clone(), d.clone());
                }
            }
        }
    }
    Ok(out)
}

/// `: description` of an argument for its error, or empty.
fn described(a: &ArgumentSpec) -> String {
    a.description
        .as_ref()
        .map(|d| format!(": {d}"))
        .unwrap_or_default()
}

/// The action's script with argument values filled in.
///
/// # Errors
/// [`TemplateError`] with the step path; a placeholder written inside quotes, a comment or a
/// here-document of shell text ([`template::shell_quoting_problem`]).
pub fn render_script(
    script: &[ScriptStep],
    values: &Map<String, Value>,
) -> Result<Vec<ScriptStep>, (String, TemplateError)> {
    // An action stored before arguments were quoted may still hold `'{{ x }}'`: refused,
    // as `action create` refuses it now, rather than rendered wrong.
    for (field, text) in shell_texts(script) {
        if let Some(problem) = template::shell_quoting_problem(text) {
            return Err((
                field,
                TemplateError::Render(format!(
                    // A command inside a sentence stays (D-commands-2): it explains the error rather than suggesting the next step.
                    "{problem}; fix the file and run `agents action create --update --config FILE`"
                )),
            ));
        }
    }
    // Optional arguments without a value render as empty strings rather than failing.
    script
        .iter()
        .enumerate()
        .map(|(i, s)| {
            let mut s = s.clone();
            if let Some(r) = &s.run {
                s.run = Some(
                    template::render_shell(r, values)
                        .map_err(|e| (format!("script[{i}].run"), e))?,
                );
            }
            if let Some(a) = &s.args {
                let command = shell_command_of(&s).map(|c| {
                    template::render_shell(c, values)
                        .map_err(|e| (format!("script[{i}].args.command"), e))
                });
                match template::render_json(&Value::Object(a.clone()), values)
                    .map_err(|e| (format!("script[{i}].args"), e))?
                {
                    Value::Object(mut m) => {
                        if let Some(c) = command {
                            m.insert("command".into(), Value::String(c?));
                        }
                        s.args = Some(m)
                    }
                    _ => unreachable!("rendering keeps the shape"),
                }
            }
            if let Some(sp) = &mut s.spawn {
                match template::render_json(&Value::Object(sp.args.clone()), values)
                    .map_err(|e| (format!("script[{i}].spawn.args"), e))?
                {
                    Value::Object(m) => sp.args = m,
                    _ => unreachable!("rendering keeps the shape"),
                }
            }
            Ok(s)
        })
        .collect()
}

/// The shell text of a step other than `run`: the `command` of `tool: shell_execute`.
fn shell_command_of(step: &ScriptStep) -> Option<&str> {
    if step.tool.as_deref() != Some("shell_execute") {
        return None;
    }
    step.args.as_ref()?.get("command")?.as_str()
}

/// The shell texts of a script: `(field path, text)` of each `run` and `shell_execute`
/// command.
fn shell_texts(script: &[ScriptStep]) -> Vec<(String, &str)> {
    script
        .iter()
        .enumerate()
        .filter_map(|(i, s)| match (&s.run, shell_command_of(s)) {
            (Some(r), _) => Some((format!("script[{i}].run"), r.as_str())),
            (None, Some(c)) => Some((format!("script[{i}].args.command"), c)),
            _ => None,
        })
        .collect()
}

/// Warnings for a script's unquoted placeholders (`{{ cmd | raw }}`), one per placeholder.
pub fn raw_warnings(script: &[ScriptStep]) -> Vec<String> {
    let mut out = Vec::new();
    for (field, text) in shell_texts(script) {
        for p in template::raw_placeholders(text) {
            out.push(format!(
                "{field}: `{p}` pastes the value into the command unquoted, so whoever gives this argument can run any command in the sandbox; write it without `| raw` unless the argument is meant to be shell code"
            ));
        }
    }
    out
}

/// Fills optional arguments that have no value with `null`-free placeholders: every declared
/// argument gets a value (its given value, its default, or an empty string) so that templates
/// referring to optional arguments render.
pub fn template_values(action: &Action, bound: &Map<String, Value>) -> Map<String, Value> {
    let mut m = Map::new();
    for a in &action.arguments {
        m.insert(
            a.name.clone(),
            bound
                .get(&a.name)
                .cloned()
                .unwrap_or(Value::String(String::new())),
        );
    }
    m
}

#[cfg(test)]
mod tests {
    use super::*;

    fn action(args: Vec<ArgumentSpec>) -> Action {
        Action {
            action_id: Id::generate(),
            name: "local/a".into(),
            state: ActionState::Available,
            description: None,
            long_description: None,
            definition_of_done: "done".into(),
            strategy_actor: actors::CHECKLIST_STRATEGIST.into(),
            execution_actor: actors::SCRIPT_EXECUTOR.into(),
            estimation_actor: None,
            invariant_actor: None,
            automation_profile: None,
            reusable: true,
            read_only: false,
            arguments: args,
            script: None,
            sandbox: None,
            config_path: None,
            created_at: jiff::Timestamp::UNIX_EPOCH,
            updated_at: jiff::Timestamp::UNIX_EPOCH,
            archived_at: None,
            version: 1,
        }
    }

    #[test]
    fn cli_argument_specs_parse_like_the_yaml_form() {
        let a = ArgumentSpec::parse_cli("target:integer:required:Target coverage %").unwrap();
        assert_eq!(
            (a.name.as_str(), a.arg_type, a.required),
            ("target", ArgType::Integer, true)
        );
        assert_eq!(a.description.as_deref(), Some("Target coverage %"));
        assert!(ArgumentSpec::parse_cli("x:float:optional").is_ok());
        assert!(ArgumentSpec::parse_cli("x:decimal:optional").is_err());
        assert!(ArgumentSpec::parse_cli("x:string:maybe").is_err());
        assert!(ArgumentSpec::parse_cli("x").is_err());
    }

    #[test]
    fn arguments_are_typed_defaulted_and_required() {
        let a = action(vec![
            ArgumentSpec::parse_cli("target:integer:required").unwrap(),
            ArgumentSpec {
                default: Some(Value::from("cargo test")),
                ..ArgumentSpec::parse_cli("cmd:string:optional").unwrap()
            },
            ArgumentSpec::parse_cli("fast:boolean:optional").unwrap(),
        ]);
        let bound = bind_arguments(&a, &["target=85".into(), "fast=yes".into()]).unwrap();
        assert_eq!(
            Value::Object(bound),
            serde_json::json!({"target": 85, "cmd": "cargo test", "fast": true})
        );
        assert!(matches!(
            bind_arguments(&a, &[]),
            Err(ArgumentError::Missing { .. })
        ));
        assert!(matches!(
            bind_arguments(&a, &["target=high".into()]),
            Err(ArgumentError::Type { .. })
        ));
        assert!(matches!(
            bind_arguments(&a, &["target=1".into(), "nope=1".into()]),
            Err(ArgumentError::Unknown { .. })
        ));
        assert!(matches!(
            bind_arguments(&a, &["target".into()]),
            Err(ArgumentError::Syntax(_))
        ));
    }

    #[test]
    fn a_required_argument_given_blank_is_refused_naming_it_and_an_optional_one_is_kept() {
        let a = action(vec![
            ArgumentSpec::parse_cli("task:string:required:What to do").unwrap(),
            ArgumentSpec::parse_cli("note:string:optional").unwrap(),
        ]);
        for blank in ["task=", "task=   "] {
            let err = bind_arguments(&a, &[blank.into()]).unwrap_err();
            assert!(matches!(err, ArgumentError::Blank { .. }), "{err:?}");
            assert_eq!(
                err.to_string(),
                "required argument `task` (string: What to do) is blank; pass --arg task=VALUE with a value"
            );
        }
        let bound = bind_arguments(&a, &["task=ship it".into(), "note=".into()]).unwrap();
        assert_eq!(Value::Object(bound), serde_json::json!({"task": "ship it", "note": ""}));
    }

    fn step(name: &str, run: &str) -> ScriptStep {
        ScriptStep {
            name: name.into(),
            run: Some(run.into()),
            shell: None,
            tool: None,
            args: None,
            spawn: None,
            resource: None,
            depends_on: None,
            parallel_group: None,
        }
    }

    #[test]
    fn shell_steps_quote_values_refuse_quoted_placeholders_and_warn_about_raw() {
        let values: Map<String, Value> = [
            ("from".to_string(), Value::from("it's")),
            ("check".to_string(), Value::from("test -f x")),
            ("n".to_string(), Value::from(3)),
        ]
        .into_iter()
        .collect();
        let mut tool = step("t", "x");
        tool.run = None;
        tool.tool = Some("shell_execute".into());
        tool.args = Some(
            serde_json::json!({"command": "grep -e {{ from }} .", "timeout_secs": 5})
                .as_object()
                .unwrap()
                .clone(),
        );
        let mut spawn = step("s", "x");
        spawn.run = None;
        spawn.spawn = Some(SpawnSpec {
            action: "local/child".into(),
            args: serde_json::json!({"v": "{{ from }}"})
                .as_object()
                .unwrap()
                .clone(),
        });
        let steps = [
            step("a", "echo {{ from }} {{ n }}; {{ check | raw }}"),
            tool,
            spawn,
        ];
        let out = render_script(&steps, &values).unwrap();
        assert_eq!(out[0].run.as_deref(), Some("echo 'it'\\''s' 3; test -f x"));
        assert_eq!(
            out[1].args.as_ref().unwrap()["command"],
            "grep -e 'it'\\''s' ."
        );
        assert_eq!(
            out[2].spawn.as_ref().unwrap().args["v"],
            "it's",
            "data for the child"
        );
        let warnings = raw_warnings(&steps);
        assert_eq!(warnings.len(), 1);
        assert!(
            warnings[0].starts_with("script[0].run: `{{ check | raw }}`"),
            "{warnings:?}"
        );
        // A script stored before quoting existed is refused rather than rendered wrong.
        let (field, e) = render_script(&[step("q", "printf '{{ from }}'")], &values).unwrap_err();
        assert_eq!(field, "script[0].run");
        assert!(e.to_string().contains("single quotes"), "{e}");
    }

    #[test]
    fn bound_arguments_reach_shell_steps_as_agents_arg_variables_and_nul_is_refused() {
        let a = action(vec![
            ArgumentSpec::parse_cli("from:string:required").unwrap(),
            ArgumentSpec::parse_cli("n:integer:optional").unwrap(),
            ArgumentSpec::parse_cli("fast:boolean:optional").unwrap(),
        ]);
        let bound = bind_arguments(&a, &["from=a b".into(), "n=2".into()]).unwrap();
        let env = argument_env(&bound);
        assert_eq!(env["AGENTS_ARG_FROM"], "a b");
        assert_eq!(env["AGENTS_ARG_N"], "2");
        assert!(
            !env.contains_key("AGENTS_ARG_FAST"),
            "no value, no variable"
        );
        assert_eq!(
            bind_arguments(&a, &["from=a\0b".into()]),
            Err(ArgumentError::Nul("from".into()))
        );
        assert!(ArgType::String.check_value(&Value::from("a\0")).is_err());
    }

    #[test]
    fn scripts_need_unique_names_one_kind_and_acyclic_dependencies() {
        let x: Map<String, Value> = [("x".to_string(), Value::from("v"))].into_iter().collect();
        let none = Map::new();
        check_script(&[step("a", "echo {{ x }}"), step("b", "true")], &x).unwrap();
        assert!(
            check_script(&[step("a", "x"), step("a", "y")], &none)
                .unwrap_err()
                .2
                .contains("twice")
        );
        assert!(
            check_script(&[step("a", "echo {{ y }}")], &x)
                .unwrap_err()
                .2
                .contains("`{{ y }}`")
        );
        let mut a = step("a", "x");
        a.depends_on = Some(vec!["b".into()]);
        let mut b = step("b", "y");
        b.depends_on = Some(vec!["a".into()]);
        assert!(
            check_script(&[a.clone(), b], &none)
                .unwrap_err()
                .2
                .contains("cycle")
        );
        a.depends_on = Some(vec!["zz".into()]);
        assert!(
            check_script(&[a], &none)
                .unwrap_err()
                .2
                .contains("not a step name")
        );
        let mut both = step("c", "x");
        both.tool = Some("read_file".into());
        assert!(
            check_script(&[both], &none)
                .unwrap_err()
                .2
                .contains("exactly one")
        );
        let mut grouped = step("d", "x");
        grouped.parallel_group = Some("g".into());
        assert!(check_script(&[grouped], &none).is_err());
    }
}
