//! Custom resource types (spec section 23 "Custom Resource Types", section 06 `resource type
//! add|remove`): a user's YAML (or command-line) definition of a namespaced type whose instances
//! are added with `resource add <type>` and the arguments it declares.
//!
//! A custom type runs on one of the built-in handlers (`--handler`): `git-checkout`, `git`,
//! `fs-directory` or `fs-mount` (the spec's `GitCheckoutHandler`, `GitHandler` and
//! `FilesystemHandler` are accepted as names). Its command-line arguments feed the handler's
//! inputs (`path`, `branch`, `url`, `mount-path`) by name or through `maps_to`; the others are
//! stored as properties of the resource. Its sandbox strategy is the handler's own or `none`
//! (such resources are only ever read: every project link to them is read-only). Handlers
//! written by users and strategies the product has no implementation of (`transaction_rollback`,
//! `overlay`) are refused with `not yet supported`.
//!
//! A resource of a custom type keeps the custom name as its type; the properties `handler`
//! and `sandbox_strategy` tell the engine how to treat it ([`Resource::handler_type`]).

use std::path::Path;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::domain::name::{NameError, QualifiedName};
use crate::domain::resource::Resource;
use crate::registry::lookup::Missing;
use crate::registry::resource_error::ResourceError;
use crate::registry::resource_types::{self, Capabilities};
use crate::registry::yaml::{self, YamlError};
use crate::store::resource_types::StoredType;
use crate::store::{Store, StoreError};

/// The value kinds a command-line argument accepts.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum ArgType {
    /// Any text.
    #[default]
    String,
    /// A filesystem path (made absolute when it exists).
    Path,
    /// A URL or a local repository path.
    Url,
    /// A flag without a value (`--read-only`).
    Boolean,
    /// A whole number.
    Integer,
}

impl ArgType {
    /// The name used in YAML and views.
    pub fn label(self) -> &'static str {
        match self {
            ArgType::String => "string",
            ArgType::Path => "path",
            ArgType::Url => "url",
            ArgType::Boolean => "boolean",
            ArgType::Integer => "integer",
        }
    }
}

/// `validation:` of a command-line argument.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Validation {
    /// A regular expression the value must match (Rust `regex` syntax).
    pub pattern: Option<String>,
}

/// One argument of `resource add <type>`: `--<name> <VALUE>`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CliArgument {
    /// The flag without dashes (`connection-string`).
    pub name: String,
    /// Value kind (default `string`).
    #[serde(default, rename = "type")]
    pub value_type: ArgType,
    /// Whether it must be given.
    #[serde(default)]
    pub required: bool,
    /// The value when it is not given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default: Option<Value>,
    /// What it means (shown by `--help`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// Rules the value must follow.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub validation: Option<Validation>,
    /// The handler input it provides (`path`, `branch`, `url`, `mount-path`), when its own
    /// name is not one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub maps_to: Option<String>,
}

impl CliArgument {
    /// The handler input this argument feeds, if any.
    pub fn input(&self, handler: &str) -> Option<&str> {
        let name = self.maps_to.as_deref().unwrap_or(&self.name);
        handler_inputs(handler)
            .iter()
            .find(|(i, _)| *i == name)
            .map(|(i, _)| *i)
    }
}

/// One allowed child type.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ChildType {
    /// The child's type name.
    #[serde(rename = "type")]
    pub type_name: String,
    /// Created by the handler's discovery.
    #[serde(default)]
    pub auto_discover: bool,
    /// May be linked by hand (`resource link-child`).
    #[serde(default = "yes")]
    pub manual_link: bool,
    /// What the child is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
}

fn yes() -> bool {
    true
}

/// `physical_or_virtual:`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Nature {
    /// A concrete thing somewhere.
    Physical,
    /// An identity linking equivalent physical resources.
    Virtual,
}

/// `capabilities:` as written (each may only narrow what the handler can do).
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(deny_unknown_fields)]
pub struct CapabilitiesSpec {
    /// Can be read.
    pub readable: Option<bool>,
    /// Can be written.
    pub writable: Option<bool>,
    /// Can be sandboxed.
    pub sandboxable: Option<bool>,
    /// Supports checkpoints.
    pub checkpointable: Option<bool>,
}

/// The body of a resource type file, every field optional so that command-line options can
/// supply or override it (spec 06).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TypeSpec {
    /// Namespaced name (`local/notes`).
    pub name: Option<String>,
    /// What the type represents.
    pub description: Option<String>,
    /// `physical` (default) or `virtual`.
    pub physical_or_virtual: Option<Nature>,
    /// Whether `resource add <type>` exists for it (default true for physical types).
    pub user_addable: Option<bool>,
    /// Arguments of `resource add <type>`.
    #[serde(default)]
    pub cli_arguments: Vec<CliArgument>,
    /// `git_worktree`, `copy_on_write` or `none` (default: the handler's).
    pub sandbox_strategy: Option<String>,
    /// The built-in handler (`fs-directory`, `FilesystemHandler`, ...).
    pub handler: Option<String>,
    /// Shorthand for `capabilities.checkpointable`.
    pub checkpointable: Option<bool>,
    /// Types that may be its parent (empty: top level).
    #[serde(default)]
    pub allowed_parent_types: Vec<String>,
    /// Types that may be its children.
    #[serde(default)]
    pub child_types: Vec<ChildType>,
    /// Narrowed capabilities.
    pub capabilities: Option<CapabilitiesSpec>,
}

#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
struct Header {
    #[allow(dead_code)]
    version: Option<Value>,
}

#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
struct WrappedFile {
    #[allow(dead_code)]
    cleveragents: Option<Header>,
    resource_type: TypeSpec,
}

/// Command-line options of `resource type add`, applied over the file (spec 06).
#[derive(
    Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize, schemars::JsonSchema,
)]
pub struct TypeOptions {
    /// `--physical` (true) or `--virtual` (false).
    pub physical: Option<bool>,
    /// `--user-addable` / `--no-user-addable`.
    pub user_addable: Option<bool>,
    /// `--sandbox-strategy`.
    pub sandbox_strategy: Option<String>,
    /// `--handler`.
    pub handler: Option<String>,
    /// `--child-type TYPE[:auto|:manual]`, repeatable; replaces the file's list when given.
    pub child_types: Vec<String>,
    /// `--cli-arg NAME[:TYPE][:required|:optional][:DESCRIPTION]`, repeatable; replaces the
    /// file's list when given.
    pub cli_args: Vec<String>,
    /// `--update`.
    pub update: bool,
}

/// A registered custom type, as stored (table `resource_types`, column `definition`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct CustomType {
    /// Namespaced name.
    pub name: String,
    /// What it represents.
    pub description: Option<String>,
    /// Physical (true) or virtual.
    pub physical: bool,
    /// Whether `resource add <type>` exists for it.
    pub user_addable: bool,
    /// The built-in handler type (`fs-directory`); `None` for virtual types.
    pub handler: Option<String>,
    /// `git_worktree`, `copy_on_write` or `none`.
    pub sandbox_strategy: String,
    /// Arguments of `resource add <type>`.
    pub cli_arguments: Vec<CliArgument>,
    /// Allowed parent types (empty: top level).
    pub allowed_parent_types: Vec<String>,
    /// Allowed child types.
    pub child_types: Vec<ChildType>,
    /// What its resources can do.
    pub capabilities: Capabilities,
    /// The file it was read from, if any.
    pub config_path: Option<String>,
    /// When it was first registered.
    pub created_at: jiff::Timestamp,
    /// When it was last changed.
    pub updated_at: jiff::Timestamp,
}

/// Errors of custom resource types.
#[derive(Debug, thiserror::Error)]
pub enum TypeError {
    /// The file is unreadable, invalid, or a field breaks a rule.
    #[error(transparent)]
    Yaml(#[from] YamlError),
    /// A command-line option breaks a rule.
    #[error("{option}: {message}")]
    Option {
        /// The option (`--handler`).
        option: String,
        /// What is wrong and what is accepted.
        message: String,
    },
    /// Neither the file nor the command line names the type.
    #[error(
        "the resource type has no name; add `name: local/NAME` under `resource_type:` or pass NAME"
    )]
    NoName,
    /// The name is invalid or in a reserved namespace.
    #[error("resource type name `{name}`: {source}")]
    Name {
        /// The name as given.
        name: String,
        /// Why.
        source: NameError,
    },
    /// The name is a built-in type's.
    #[error("`{0}` is a built-in resource type and cannot be added, replaced or removed")]
    BuiltIn(String),
    /// A type of that name exists and `--update` was not given.
    #[error("resource type {0} already exists")]
    Exists(String),
    /// No custom type of that name.
    #[error("resource type `{0}` not found")]
    NotFound(Missing),
    /// Resources of the type exist.
    #[error("resource type {name} is used by {}", resources.join(", "))]
    InUse {
        /// The type.
        name: String,
        /// Resources of it.
        resources: Vec<String>,
    },
    /// The type exists but `resource add` does not accept it.
    #[error("resource type {0} is not user-addable (its resources are created by discovery)")]
    NotAddable(String),
    /// A value given to `resource add <type>` breaks its argument's rule.
    #[error("--{flag}: {message}")]
    Value {
        /// The argument.
        flag: String,
        /// What is wrong.
        message: String,
    },
    /// Registering the resource failed.
    #[error(transparent)]
    Resource(#[from] ResourceError),
    /// The database failed.
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// The built-in handlers a custom type may run on: (type name, spec handler name).
pub const HANDLERS: [(&str, &str); 4] = [
    ("git-checkout", "GitCheckoutHandler"),
    ("git", "GitHandler"),
    ("fs-directory", "FilesystemHandler"),
    ("fs-mount", "FilesystemMountHandler"),
];

/// The inputs a handler reads from `resource add`: (name, required).
pub fn handler_inputs(handler: &str) -> &'static [(&'static str, bool)] {
    match handler {
        "git-checkout" => &[("path", true), ("branch", false)],
        "git" => &[("url", true)],
        "fs-directory" => &[("path", true)],
        "fs-mount" => &[("mount-path", true)],
        _ => &[],
    }
}

/// Argument names `resource add <type>` keeps for itself.
const RESERVED_ARGS: [&str; 8] = [
    "help",
    "update",
    "description",
    "name",
    "format",
    "data-dir",
    "config-path",
    "verbose",
];

/// The built-in handler type a `--handler`/`handler:` value names.
fn handler_type(given: &str) -> Option<&'static str> {
    HANDLERS
        .iter()
        .find(|(t, h)| *t == given || h.eq_ignore_ascii_case(given))
        .map(|(t, _)| *t)
}

/// Reads a type file: the spec's shape (`cleveragents:` and `resource_type:`) or the bare
/// `resource_type` body.
///
/// # Errors
/// [`YamlError`] naming the file, line and field.
pub fn load(path: &Path) -> Result<(TypeSpec, String), TypeError> {
    let text = std::fs::read_to_string(path).map_err(|e| YamlError::Read {
        path: path.to_path_buf(),
        message: e.to_string(),
    })?;
    let wrapped = serde_yaml::from_str::<Value>(&text)
        .ok()
        .and_then(|v| v.get("resource_type").cloned())
        .is_some();
    let spec = if wrapped {
        yaml::parse::<WrappedFile>(path, &text)?.resource_type
    } else {
        yaml::parse::<TypeSpec>(path, &text)?
    };
    Ok((spec, text))
}

/// Where a problem is reported: a file field or a command-line option.
struct Blame<'a> {
    file: Option<(&'a Path, &'a str)>,
    wrapped: bool,
}

impl Blame<'_> {
    fn field(&self, field: &str, option: &str, message: impl Into<String>) -> TypeError {
        match self.file {
            Some((path, text)) => {
                let full = if self.wrapped {
                    format!("resource_type.{field}")
                } else {
                    field.to_string()
                };
                let key = field.rsplit('.').next().unwrap_or(field);
                let key = key.split('[').next().unwrap_or(key);
                yaml::rule(path, text, &full, key, message).into()
            }
            None => TypeError::Option {
                option: option.to_string(),
                message: message.into(),
            },
        }
    }
}

/// Parses `--child-type TYPE[:auto|:manual]`.
fn parse_child_option(spec: &str) -> Result<ChildType, TypeError> {
    let (ty, mode) = match spec.rsplit_once(':') {
        Some((t, m @ ("auto" | "manual"))) => (t, m),
        _ => (spec, "manual"),
    };
    if ty.is_empty() {
        return Err(TypeError::Option {
            option: format!("--child-type {spec}"),
            message: "give a type name, e.g. `--child-type fs-directory:manual`".into(),
        });
    }
    Ok(ChildType {
        type_name: ty.to_string(),
        auto_discover: mode == "auto",
        manual_link: mode == "manual",
        description: None,
    })
}

/// Parses `--cli-arg NAME[:TYPE][:required|:optional][:DESCRIPTION]`.
fn parse_arg_option(spec: &str) -> Result<CliArgument, TypeError> {
    let mut parts = spec.splitn(4, ':');
    let name = parts.next().unwrap_or_default().trim_start_matches("--");
    let mut arg = CliArgument {
        name: name.to_string(),
        value_type: ArgType::String,
        required: false,
        default: None,
        description: None,
        validation: None,
        maps_to: None,
    };
    let bad = |m: String| TypeError::Option {
        option: format!("--cli-arg {spec}"),
        message: m,
    };
    if let Some(t) = parts.next().filter(|t| !t.is_empty()) {
        arg.value_type = serde_yaml::from_str(t).map_err(|_| {
            bad(format!(
                "unknown type `{t}`; use string, path, url, boolean or integer (NAME:TYPE:required:DESCRIPTION)"
            ))
        })?;
    }
    match parts.next() {
        Some("required") => arg.required = true,
        Some("optional" | "") | None => {}
        Some(other) => {
            return Err(bad(format!(
                "`{other}` must be `required` or `optional` (NAME:TYPE:required:DESCRIPTION)"
            )));
        }
    }
    arg.description = parts.next().map(str::to_string);
    Ok(arg)
}

/// Builds a type from a file body and command-line options, checking every rule (nothing is
/// stored).
///
/// # Errors
/// [`TypeError`] naming the field (with the file's line) or the option, and what is accepted.
pub fn resolve(
    store: &Store,
    spec: TypeSpec,
    name_arg: Option<&str>,
    options: &TypeOptions,
    file: Option<(&Path, &str)>,
    providers: &[String],
) -> Result<CustomType, TypeError> {
    let wrapped = file.is_some_and(|(_, t)| t.contains("resource_type:"));
    let blame = Blame { file, wrapped };
    let name = check_name(
        name_arg.map(str::to_string).or(spec.name.clone()),
        providers,
    )?;
    let physical = options
        .physical
        .or(spec.physical_or_virtual.map(|n| n == Nature::Physical))
        .unwrap_or(true);
    let user_addable = options
        .user_addable
        .or(spec.user_addable)
        .unwrap_or(physical);
    let handler = match options.handler.as_deref().or(spec.handler.as_deref()) {
        None if physical && user_addable => {
            return Err(blame.field(
                "handler",
                "--handler",
                format!(
                    "a user-addable type needs a handler; use one of {}",
                    handler_list()
                ),
            ));
        }
        None => None,
        Some(h) => Some(handler_type(h).ok_or_else(|| {
            blame.field(
                "handler",
                "--handler",
                format!(
                    "`{h}`: handlers written by users are not yet supported; use one of {}",
                    handler_list()
                ),
            )
        })?),
    };
    if !physical && (user_addable || handler.is_some()) {
        return Err(blame.field(
            "physical_or_virtual",
            "--virtual",
            "virtual types are never user-addable and have no handler (spec 23); drop `handler` and set `user_addable: false`",
        ));
    }
    let natural = handler.map_or("none", |h| resource_types::effective_strategy(h, &[]));
    let strategy = options
        .sandbox_strategy
        .clone()
        .or(spec.sandbox_strategy.clone())
        .unwrap_or_else(|| natural.to_string());
    if strategy != natural && strategy != "none" {
        return Err(blame.field(
            "sandbox_strategy",
            "--sandbox-strategy",
            format!(
                "`{strategy}` is not yet supported for the {} handler; use `{natural}` or `none` (read-only)",
                handler.unwrap_or("(no)")
            ),
        ));
    }
    let cli_arguments = if options.cli_args.is_empty() {
        spec.cli_arguments
    } else {
        options
            .cli_args
            .iter()
            .map(|s| parse_arg_option(s))
            .collect::<Result<_, _>>()?
    };
    check_arguments(&cli_arguments, handler, &blame, options.cli_args.is_empty())?;
    let child_types = if options.child_types.is_empty() {
        spec.child_types
    } else {
        options
            .child_types
            .iter()
            .map(|s| parse_child_option(s))
            .collect::<Result<_, _>>()?
    };
    check_children(store, &name, &child_types, handler, &blame)?;
    for (i, p) in spec.allowed_parent_types.iter().enumerate() {
        if !known_type(store, p)? && *p != name {
            return Err(blame.field(
                &format!("allowed_parent_types[{i}]"),
                "allowed_parent_types",
                // A command inside a sentence stays (D-commands-2): it explains the error rather than suggesting the next step.
                format!("unknown resource type `{p}`; see `agents resource type list`"),
            ));
        }
    }
    let capabilities = capabilities(
        handler,
        &strategy,
        spec.capabilities.unwrap_or_default(),
        spec.checkpointable,
        &blame,
    )?;
    let now = jiff::Timestamp::now();
    Ok(CustomType {
        name,
        description: spec.description,
        physical,
        user_addable,
        handler: handler.map(str::to_string),
        sandbox_strategy: strategy,
        cli_arguments,
        allowed_parent_types: spec.allowed_parent_types,
        child_types,
        capabilities,
        config_path: file.map(|(p, _)| yaml::stored_path(p)),
        created_at: now,
        updated_at: now,
    })
}

fn handler_list() -> String {
    HANDLERS
        .iter()
        .map(|(t, _)| *t)
        .collect::<Vec<_>>()
        .join(", ")
}

fn check_name(raw: Option<String>, providers: &[String]) -> Result<String, TypeError> {
    let raw = raw.ok_or(TypeError::NoName)?;
    if resource_types::builtin(&raw).is_some() {
        return Err(TypeError::BuiltIn(raw));
    }
    let q = QualifiedName::resolve_user_input(&raw, &[]).map_err(|source| TypeError::Name {
        name: raw.clone(),
        source,
    })?;
    q.check_user_creatable(providers)
        .map_err(|source| TypeError::Name {
            name: raw.clone(),
            source,
        })?;
    Ok(q.to_string())
}

fn check_arguments(
    args: &[CliArgument],
    handler: Option<&str>,
    blame: &Blame<'_>,
    from_file: bool,
) -> Result<(), TypeError> {
    let at = |i: usize, f: &str| {
        if from_file {
            format!("cli_arguments[{i}].{f}")
        } else {
            "--cli-arg".to_string()
        }
    };
    for (i, a) in args.iter().enumerate() {
        let valid = a
            .name
            .chars()
            .next()
            .is_some_and(|c| c.is_ascii_lowercase())
            && a.name
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-');
        if !valid || RESERVED_ARGS.contains(&a.name.as_str()) {
            return Err(blame.field(
                &at(i, "name"),
                "--cli-arg",
                format!(
                    "`{}` is not a usable flag name; use lowercase letters, digits and `-` (not {})",
                    a.name,
                    RESERVED_ARGS.join(", ")
                ),
            ));
        }
        if args[..i].iter().any(|b| b.name == a.name) {
            return Err(blame.field(
                &at(i, "name"),
                "--cli-arg",
                format!("`{}` is declared twice", a.name),
            ));
        }
        if let Some(p) = a.validation.as_ref().and_then(|v| v.pattern.as_deref())
            && let Err(e) = regex::Regex::new(p)
        {
            return Err(blame.field(
                &at(i, "validation.pattern"),
                "--cli-arg",
                format!("not a valid regular expression: {e}"),
            ));
        }
        if let (Some(m), Some(h)) = (&a.maps_to, handler)
            && a.input(h).is_none()
        {
            let inputs: Vec<&str> = handler_inputs(h).iter().map(|(n, _)| *n).collect();
            return Err(blame.field(
                &at(i, "maps_to"),
                "--cli-arg",
                format!(
                    "the {h} handler has no input `{m}`; use one of {}",
                    inputs.join(", ")
                ),
            ));
        }
    }
    let Some(h) = handler else { return Ok(()) };
    for (input, required) in handler_inputs(h) {
        let given = args.iter().find(|a| a.input(h) == Some(input));
        if *required && !given.is_some_and(|a| a.required || a.default.is_some()) {
            return Err(blame.field(
                "cli_arguments",
                "--cli-arg",
                format!(
                    "the {h} handler needs `{input}`: declare a required argument named `{input}` or one with `maps_to: {input}`"
                ),
            ));
        }
    }
    Ok(())
}

fn known_type(store: &Store, name: &str) -> Result<bool, TypeError> {
    Ok(resource_types::builtin(name).is_some() || get(store, name)?.is_some())
}

fn check_children(
    store: &Store,
    own: &str,
    children: &[ChildType],
    handler: Option<&str>,
    blame: &Blame<'_>,
) -> Result<(), TypeError> {
    let discovered: Vec<&str> = handler
        .and_then(resource_types::builtin)
        .map(|t| t.auto_children())
        .unwrap_or_default();
    for (i, c) in children.iter().enumerate() {
        let field = format!("child_types[{i}].type");
        if c.type_name != own && !known_type(store, &c.type_name)? {
            return Err(blame.field(
                &field,
                "--child-type",
                format!(
                    // A command inside a sentence stays (D-commands-2): it explains the error rather than suggesting the next step.
                    "unknown resource type `{}`; see `agents resource type list`",
                    c.type_name
                ),
            ));
        }
        if c.auto_discover && !discovered.contains(&c.type_name.as_str()) {
            return Err(blame.field(
                &field,
                "--child-type",
                format!(
                    "`{}` cannot be auto-discovered: the {} handler discovers only {} (custom discovery is not yet supported)",
                    c.type_name,
                    handler.unwrap_or("(no)"),
                    if discovered.is_empty() { "nothing".to_string() } else { discovered.join(", ") }
                ),
            ));
        }
    }
    Ok(())
}

fn capabilities(
    handler: Option<&str>,
    strategy: &str,
    asked: CapabilitiesSpec,
    checkpointable: Option<bool>,
    blame: &Blame<'_>,
) -> Result<Capabilities, TypeError> {
    let base = handler
        .and_then(resource_types::builtin)
        .map(|t| t.capabilities)
        .unwrap_or(Capabilities {
            readable: false,
            writable: false,
            sandboxable: false,
            checkpointable: false,
        });
    let sandboxed = strategy != "none";
    let can = [
        ("readable", base.readable, asked.readable),
        ("writable", base.writable && sandboxed, asked.writable),
        (
            "sandboxable",
            base.sandboxable && sandboxed,
            asked.sandboxable,
        ),
        (
            "checkpointable",
            base.checkpointable && sandboxed,
            asked.checkpointable.or(checkpointable),
        ),
    ];
    let mut out = [false; 4];
    for (i, (name, possible, wanted)) in can.iter().enumerate() {
        if *wanted == Some(true) && !possible {
            return Err(blame.field(
                &format!("capabilities.{name}"),
                "capabilities",
                format!(
                    "the {} handler with sandbox strategy `{strategy}` is not {name}",
                    handler.unwrap_or("(no)")
                ),
            ));
        }
        out[i] = wanted.unwrap_or(*possible);
    }
    Ok(Capabilities {
        readable: out[0],
        writable: out[1],
        sandboxable: out[2],
        checkpointable: out[3],
    })
}

/// The custom type of this exact name, if registered.
///
/// # Errors
/// Store errors, or a stored definition that no longer decodes.
pub fn get(store: &Store, name: &str) -> Result<Option<CustomType>, TypeError> {
    Ok(stored(store, name)?)
}

fn stored(store: &Store, name: &str) -> Result<Option<CustomType>, StoreError> {
    store
        .resource_type_row(name)?
        .map(|row| {
            serde_json::from_str(&row.definition).map_err(|e| StoreError::Corrupt {
                table: "resource_types",
                column: "definition",
                message: e.to_string(),
            })
        })
        .transpose()
}

/// The rule for a manual link `parent -> child` when either type is custom: the parent's
/// `child_types` must let the child be linked by hand, and a custom child's
/// `allowed_parent_types` must name the parent's type. `None` when both are built-in (their
/// rules are [`resource_types::check_manual_link`]'s).
///
/// # Errors
/// Store errors; the inner `Err` says which rule is broken.
pub fn link_rule(
    store: &Store,
    parent: &str,
    child: &str,
) -> Result<Option<Result<(), String>>, StoreError> {
    let (p, c) = (stored(store, parent)?, stored(store, child)?);
    if p.is_none() && c.is_none() {
        return Ok(None);
    }
    if let Some(p) = &p {
        let manual: Vec<&str> = p
            .child_types
            .iter()
            .filter(|r| r.manual_link)
            .map(|r| r.type_name.as_str())
            .collect();
        if !manual.contains(&child) {
            return Ok(Some(Err(format!(
                "a {parent} cannot have a {child} child linked by hand (it may have: {})",
                if manual.is_empty() {
                    "none".to_string()
                } else {
                    manual.join(", ")
                }
            ))));
        }
    }
    if let Some(c) = &c
        && (p.is_none() || !c.allowed_parent_types.is_empty())
        && !c.allowed_parent_types.iter().any(|t| t == parent)
    {
        return Ok(Some(Err(format!(
            "a {child} cannot have a {parent} parent (allowed parents: {})",
            if c.allowed_parent_types.is_empty() {
                "none, it is top-level".to_string()
            } else {
                c.allowed_parent_types.join(", ")
            }
        ))));
    }
    Ok(Some(Ok(())))
}

/// Every custom type, by name.
///
/// # Errors
/// As [`get`].
pub fn all(store: &Store) -> Result<Vec<CustomType>, TypeError> {
    store
        .resource_type_rows()?
        .iter()
        .map(|row| decode(&row.definition))
        .collect()
}

fn decode(json: &str) -> Result<CustomType, TypeError> {
    serde_json::from_str(json).map_err(|e| {
        TypeError::Store(StoreError::Corrupt {
            table: "resource_types",
            column: "definition",
            message: e.to_string(),
        })
    })
}

fn put(store: &mut Store, t: &CustomType) -> Result<(), TypeError> {
    let row = StoredType {
        name: t.name.clone(),
        definition: serde_json::to_string(t).unwrap_or_default(),
    };
    store.upsert_resource_type_row(
        &row,
        t.config_path.as_deref(),
        &t.created_at.to_string(),
        &t.updated_at.to_string(),
    )?;
    Ok(())
}

/// The outcome of [`add`].
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize, schemars::JsonSchema)]
pub struct TypeAdded {
    /// The stored type.
    pub custom: CustomType,
    /// Whether an existing type was replaced (`--update`).
    pub replaced: bool,
}

/// Registers (or with `--update` replaces) a custom type from an optional file and options.
///
/// # Errors
/// The errors of [`load`] and [`resolve`], [`TypeError::Exists`] without `--update`.
pub fn add(
    store: &mut Store,
    file: Option<&Path>,
    name_arg: Option<&str>,
    options: &TypeOptions,
    providers: &[String],
) -> Result<TypeAdded, TypeError> {
    let (spec, text) = match file {
        Some(p) => load(p)?,
        None => (TypeSpec::default(), String::new()),
    };
    let mut custom = resolve(
        store,
        spec,
        name_arg,
        options,
        file.map(|p| (p, text.as_str())),
        providers,
    )?;
    let existing = get(store, &custom.name)?;
    if existing.is_some() && !options.update {
        return Err(TypeError::Exists(custom.name));
    }
    if let Some(e) = &existing {
        custom.created_at = e.created_at;
    }
    put(store, &custom)?;
    Ok(TypeAdded {
        replaced: existing.is_some(),
        custom,
    })
}

/// Finds a custom type by the name a user typed (bare names mean `local/NAME`).
///
/// # Errors
/// [`TypeError::NotFound`] with the nearest name, [`TypeError::BuiltIn`] for a built-in.
pub fn find(store: &Store, input: &str) -> Result<CustomType, TypeError> {
    if resource_types::builtin(input).is_some() {
        return Err(TypeError::BuiltIn(input.to_string()));
    }
    let name = QualifiedName::resolve_user_input(input, &[])
        .map(|q| q.to_string())
        .unwrap_or_else(|_| input.to_string());
    if let Some(t) = get(store, &name)? {
        return Ok(t);
    }
    let names: Vec<String> = all(store)?.into_iter().map(|t| t.name).collect();
    let mut missing = Missing::near(input, names.iter().map(String::as_str));
    missing.input = name;
    Err(TypeError::NotFound(missing))
}

/// Removes a custom type that no resource uses; returns it.
///
/// # Errors
/// [`TypeError::NotFound`], [`TypeError::BuiltIn`], [`TypeError::InUse`] naming the resources.
pub fn remove(store: &mut Store, input: &str) -> Result<CustomType, TypeError> {
    let t = find(store, input)?;
    let used: Vec<String> = store
        .resources()?
        .into_iter()
        .filter(|r| r.type_name == t.name)
        .map(|r| r.name)
        .collect();
    if !used.is_empty() {
        return Err(TypeError::InUse {
            name: t.name,
            resources: used,
        });
    }
    store.delete_resource_type_row(&t.name)?;
    Ok(t)
}

impl Resource {
    /// The built-in type whose handler treats this resource: the `handler` property of a
    /// resource of a custom type, else its own type.
    pub fn handler_type(&self) -> &str {
        self.prop("handler").unwrap_or(&self.type_name)
    }

    /// Its sandbox strategy: the custom type's (stored on the resource), else the built-in
    /// type's (`inherit` resolved to `none` without ancestors).
    pub fn sandbox_strategy(&self) -> &str {
        self.prop("sandbox_strategy")
            .unwrap_or_else(|| resource_types::effective_strategy(self.handler_type(), &[]))
    }

    /// What it can do: its handler type's capabilities, without writing, sandboxing and
    /// checkpoints when it is of a custom type that is only read ([`Resource::read_only_type`]).
    pub fn capabilities(&self) -> Option<Capabilities> {
        let mut c = self.resource_type()?.capabilities;
        if self.read_only_type() {
            c.writable = false;
            c.sandboxable = false;
            c.checkpointable = false;
        }
        Some(c)
    }

    /// Whether plans may only read it (a custom type with sandbox strategy `none`).
    pub fn read_only_type(&self) -> bool {
        self.prop("handler").is_some() && self.sandbox_strategy() == "none"
    }
}
