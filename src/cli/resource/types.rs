//! `agents resource type list|show|add|remove` and `agents resource add <custom type>` (spec
//! sections 06 and 23 "Custom Resource Types").
//!
//! A custom type's `resource add` subcommand is built at run time from its declared arguments
//! (clap's builder API), so `agents resource add local/notes --help` lists them.

use std::collections::BTreeMap;
use std::path::PathBuf;

use clap::Subcommand;
use serde_json::json;

use crate::cli::{CliError, Context, confirm::confirm, view};
use crate::output::{Column, Element, Report};
use cleveragents_engine::api;
use cleveragents_engine::api::registry_views::{
    self as rv, AddArgs, ArgType, CustomType, ResourceType, TypeError, TypeOptions,
};

/// `agents resource type ...`
#[derive(Debug, Subcommand)]
pub enum TypeCommand {
    /// List resource types, built-in and custom
    List {
        /// Show only types whose name matches this regular expression
        regex: Option<String>,
    },
    /// Show a type: arguments, parents, children, sandbox
    Show {
        /// Type name
        name: String,
    },
    /// Register a custom type from YAML and/or options (options override the file)
    Add {
        /// Resource type YAML (`resource_type:` with name, handler, cli_arguments, ...)
        #[arg(short, long, value_name = "FILE")]
        config: Option<PathBuf>,
        /// Replace a custom type of the same name
        #[arg(long)]
        update: bool,
        /// Instances are physical (the default)
        #[arg(long, conflicts_with = "virtual_")]
        physical: bool,
        /// Instances are virtual (never user-addable, no handler)
        #[arg(long = "virtual")]
        virtual_: bool,
        /// Users may add instances with `resource add <type>` (default for physical types)
        #[arg(long, conflicts_with = "no_user_addable")]
        user_addable: bool,
        /// Only discovery creates instances
        #[arg(long)]
        no_user_addable: bool,
        /// Sandbox strategy: the handler's own (git_worktree, copy_on_write) or none (read-only)
        #[arg(long, value_name = "STRATEGY")]
        sandbox_strategy: Option<String>,
        /// Built-in handler: git-checkout, git, fs-directory or fs-mount
        #[arg(long, value_name = "NAME")]
        handler: Option<String>,
        /// Allowed child type, TYPE[:auto|:manual] (repeatable; replaces the file's list)
        #[arg(long = "child-type", value_name = "SPEC")]
        child_types: Vec<String>,
        /// Argument of `resource add <type>`, NAME[:TYPE][:required|:optional][:DESCRIPTION]
        /// (repeatable; replaces the file's list)
        #[arg(long = "cli-arg", value_name = "SPEC")]
        cli_args: Vec<String>,
        /// Namespaced type name (e.g. local/notes); optional when the file names it
        name: Option<String>,
    },
    /// Remove a custom type no resource uses (built-ins cannot be removed)
    Remove {
        /// Do not ask for confirmation
        #[arg(short, long)]
        yes: bool,
        /// Type name
        name: String,
    },
}

impl TypeCommand {
    /// Whether the subcommand can run against a server (`--server`): every one, since each
    /// reaches the engine only through the API.
    pub fn served_remotely(&self) -> bool {
        true
    }
}

/// Runs a `resource type` subcommand.
///
/// # Errors
/// Bad files and options (named), unknown types, built-in names, types in use.
pub fn run(command: TypeCommand, ctx: &Context) -> Result<Report, CliError> {
    match command {
        TypeCommand::List { regex } => type_list(ctx, regex.as_deref()),
        TypeCommand::Show { name } => type_show(ctx, &name),
        TypeCommand::Add {
            config,
            update,
            physical,
            virtual_,
            user_addable,
            no_user_addable,
            sandbox_strategy,
            handler,
            child_types,
            cli_args,
            name,
        } => {
            let options = TypeOptions {
                physical: flag_pair(physical, virtual_),
                user_addable: flag_pair(user_addable, no_user_addable),
                sandbox_strategy,
                handler,
                child_types,
                cli_args,
                update,
            };
            type_add(ctx, config.as_deref(), name.as_deref(), &options)
        }
        TypeCommand::Remove { yes, name } => type_remove(ctx, &name, yes),
    }
}

fn flag_pair(on: bool, off: bool) -> Option<bool> {
    match (on, off) {
        (true, _) => Some(true),
        (_, true) => Some(false),
        _ => None,
    }
}

fn providers(ctx: &Context) -> Result<Vec<String>, CliError> {
    Ok(ctx
        .config()?
        .providers()
        .into_iter()
        .map(|p| p.name)
        .collect())
}

fn type_add(
    ctx: &Context,
    config: Option<&std::path::Path>,
    name: Option<&str>,
    options: &TypeOptions,
) -> Result<Report, CliError> {
    ctx.check_store()?;
    providers(ctx)?;
    let added = ctx.change(api::AddResourceType {
        file: config.map(std::path::Path::to_path_buf),
        name: name.map(str::to_string),
        options: options.clone(),
    })?;
    let t = &added.custom;
    let mut report = custom_report(
        Report::ok(
            "resource type add",
            json!({"resource_type": custom_json(t), "replaced": added.replaced}),
            if added.replaced {
                "Resource type updated"
            } else {
                "Resource type registered"
            },
        ),
        t,
    );
    if t.user_addable {
        report = report.message(
            crate::output::Level::Info,
            format!("New subcommand available: agents resource add {}", t.name),
        );
    }
    Ok(report)
}

fn type_remove(ctx: &Context, name: &str, yes: bool) -> Result<Report, CliError> {
    let t = ctx.client()?.custom_type(name)?;
    confirm(
        &format!("Remove resource type {}?", t.name),
        yes,
        &ctx.terminal,
        &ctx.suggest(&format!("resource type remove --yes {}", t.name)),
    )?;
    let removed = ctx.change(api::RemoveResourceType {
        name: t.name.clone(),
    })?;
    Ok(Report::ok(
        "resource type remove",
        json!({"resource_type": custom_json(&removed), "resources_using": 0, "subcommand_removed": removed.user_addable}),
        "Resource type removed",
    )
    .with(Element::panel(
        "Resource Type Removed",
        [
            ("Name", view::id(removed.name.clone())),
            ("Resources Using", "0".into()),
            (
                "Subcommand Removed",
                view::yes_no(removed.user_addable).into(),
            ),
        ],
    )))
}

/// The custom type a `resource add` word names, if one is registered (`None` for anything
/// else, including built-in names).
///
/// # Errors
/// Store errors.
pub fn custom(ctx: &Context, word: &str) -> Result<Option<CustomType>, CliError> {
    if word.is_empty() || word.starts_with('-') || rv::builtin_type(word).is_some() {
        return Ok(None);
    }
    Ok(ctx.client()?.custom_type_named(word)?)
}

/// The `resource add <type>` command of a custom type, from its declared arguments.
fn add_command(t: &CustomType) -> clap::Command {
    use clap::{Arg, ArgAction};
    let mut cmd = clap::Command::new(format!("agents resource add {}", t.name))
        .no_binary_name(true)
        .about(t.description.clone().unwrap_or_default())
        .arg(
            Arg::new("name")
                .value_name("NAME")
                .required(true)
                .help("Resource name (e.g. local/my-notes)"),
        )
        .arg(
            Arg::new("description")
                .short('d')
                .long("description")
                .value_name("DESC")
                .help("What the resource is"),
        )
        .arg(
            Arg::new("update")
                .long("update")
                .action(ArgAction::SetTrue)
                .help("Replace a resource of the same name"),
        );
    for a in &t.cli_arguments {
        let mut arg = Arg::new(a.name.clone())
            .long(a.name.clone())
            .help(a.description.clone().unwrap_or_default());
        arg = if a.value_type == ArgType::Boolean {
            arg.action(ArgAction::SetTrue)
        } else {
            arg.value_name(a.value_type.label().to_ascii_uppercase())
                .required(a.required && a.default.is_none())
        };
        cmd = cmd.arg(arg);
    }
    cmd
}

/// `agents resource add <custom type> NAME --ARG VALUE...`.
///
/// # Errors
/// Usage errors (`--help` prints the arguments and exits 0), the type's argument rules, and
/// the errors of registering a resource.
pub fn add_resource(
    ctx: &Context,
    t: &CustomType,
    words: &[String],
    outer: AddArgs,
) -> Result<Report, CliError> {
    if !t.user_addable {
        return Err(TypeError::NotAddable(t.name.clone()).into());
    }
    let matches = match add_command(t).try_get_matches_from(&words[1..]) {
        Ok(m) => m,
        Err(e) => return Err(usage(t, &e)),
    };
    let mut values = BTreeMap::new();
    for a in &t.cli_arguments {
        if a.value_type == ArgType::Boolean {
            if matches.get_flag(&a.name) {
                values.insert(a.name.clone(), "true".to_string());
            }
        } else if let Some(v) = matches.get_one::<String>(&a.name) {
            // A path names a place in this shell's directory, also when a server registers it.
            let v = match a.value_type {
                ArgType::Path => super::super::remote::absolute(v.into())
                    .display()
                    .to_string(),
                ArgType::Url => super::super::remote::absolute_repository(v),
                _ => v.clone(),
            };
            values.insert(a.name.clone(), v);
        }
    }
    let name = matches
        .get_one::<String>("name")
        .cloned()
        .unwrap_or_default();
    let description = matches
        .get_one::<String>("description")
        .cloned()
        .or(outer.description);
    let update = outer.update || matches.get_flag("update");
    ctx.check_store()?;
    providers(ctx)?;
    let added = ctx.change(api::AddCustomResource {
        custom: t.clone(),
        name,
        values,
        description,
        update,
    })?;
    super::added_report(ctx, &added)
}

/// Help and version print and exit 0, as for every other command; other clap errors are usage
/// errors naming the type's help.
fn usage(t: &CustomType, e: &clap::Error) -> CliError {
    use clap::error::ErrorKind;
    if matches!(e.kind(), ErrorKind::DisplayHelp | ErrorKind::DisplayVersion) {
        let _ = e.print();
        std::process::exit(0);
    }
    let rendered = e.render().to_string();
    let mut lines = rendered
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with("Usage:") && !l.starts_with("For more"));
    let message = lines
        .next()
        .unwrap_or("invalid arguments")
        .trim_start_matches("error: ")
        .to_string();
    let detail: Vec<&str> = lines.collect();
    let err = CliError::new("USAGE", message)
        .exit(crate::output::Exit::Usage)
        .hint(format!("agents resource add {} --help", t.name));
    if detail.is_empty() {
        err
    } else {
        err.detail(detail.join("\n"))
    }
}

fn custom_json(t: &CustomType) -> serde_json::Value {
    json!({
        "name": t.name,
        "source": "custom",
        "description": t.description,
        "kind": if t.physical { "physical" } else { "virtual" },
        "user_addable": t.user_addable,
        "sandbox_strategy": t.sandbox_strategy,
        "handler": t.handler,
        "top_level": t.allowed_parent_types.is_empty(),
        "parents": t.allowed_parent_types,
        "children": t.child_types,
        "cli_args": t.cli_arguments,
        "capabilities": t.capabilities,
        "config_path": t.config_path,
        "created_at": t.created_at.to_string(),
        "updated_at": t.updated_at.to_string(),
    })
}

fn custom_report(report: Report, t: &CustomType) -> Report {
    let auto: Vec<&str> = t
        .child_types
        .iter()
        .filter(|c| c.auto_discover)
        .map(|c| c.type_name.as_str())
        .collect();
    let manual: Vec<&str> = t
        .child_types
        .iter()
        .filter(|c| c.manual_link)
        .map(|c| c.type_name.as_str())
        .collect();
    report
        .with(Element::panel(
            "Resource Type",
            [
                ("Name", view::id(t.name.clone())),
                ("Source", "custom".into()),
                ("Description", view::or(t.description.as_deref(), "(none)")),
                (
                    "Physical/Virtual",
                    if t.physical { "physical" } else { "virtual" }.into(),
                ),
                ("User Addable", view::yes_no(t.user_addable).into()),
                (
                    "Registered",
                    t.created_at.strftime("%Y-%m-%d %H:%M").to_string().into(),
                ),
            ],
        ))
        .with(Element::Table {
            title: format!("CLI Arguments (agents resource add {})", t.name),
            columns: ["Argument", "Required", "Type", "Description"]
                .map(Column::left)
                .into(),
            rows: t
                .cli_arguments
                .iter()
                .map(|a| {
                    vec![
                        view::id(format!("--{}", a.name)),
                        view::flag_cell(a.required),
                        a.value_type.label().into(),
                        a.description.clone().unwrap_or_default().into(),
                    ]
                })
                .collect(),
            empty: "(none)".into(),
        })
        .with(Element::panel(
            "Child Types",
            [
                ("Auto-discover", view::or(Some(&auto.join(", ")), "(none)")),
                ("Manual link", view::or(Some(&manual.join(", ")), "(none)")),
            ],
        ))
        .with(Element::panel(
            "Sandbox",
            [
                ("Strategy", t.sandbox_strategy.clone()),
                (
                    "Checkpointable",
                    view::yes_no(t.capabilities.checkpointable).to_string(),
                ),
                (
                    "Handler",
                    t.handler
                        .as_deref()
                        .map_or("(none)".to_string(), |h| format!("{h} (built-in handler)")),
                ),
            ],
        ))
}

impl From<TypeError> for CliError {
    fn from(e: TypeError) -> Self {
        let message = e.to_string();
        match e {
            TypeError::Yaml(y) => y.into(),
            TypeError::Resource(r) => r.into(),
            TypeError::Store(s) => s.into(),
            TypeError::Exists(n) => CliError::new("CONFLICT", message)
                .detail("use --update to replace it")
                .hint(format!("agents resource type show {n}")),
            TypeError::BuiltIn(_) => {
                CliError::new("CONFLICT", message).hint("agents resource type list")
            }
            TypeError::InUse { resources, .. } => resources.iter().fold(
                CliError::new("CONFLICT", message).detail("remove its resources first"),
                |err, r| err.hint(format!("agents resource remove {}", shell_words::quote(r))),
            ),
            TypeError::NotFound(m) => {
                crate::cli::error::not_found(message, &m, "agents resource type list")
            }
            TypeError::NotAddable(n) => {
                CliError::invalid_input(message).hint(format!("agents resource type show {n}"))
            }
            TypeError::Value { .. } => CliError::invalid_input(message),
            TypeError::Option { .. } | TypeError::NoName | TypeError::Name { .. } => {
                CliError::invalid_input(message).hint("agents resource type add --help")
            }
        }
    }
}

fn type_json(t: &ResourceType) -> serde_json::Value {
    json!({
        "name": t.name,
        "source": "built-in",
        "description": t.description,
        "kind": t.kind(),
        "user_addable": t.user_addable,
        "sandbox_strategy": t.sandbox_strategy,
        "handler": t.handler,
        "top_level": t.top_level,
        "parents": t.parents,
        "children": t.children,
        "cli_args": t.cli_args,
        "capabilities": t.capabilities,
    })
}

fn type_list(ctx: &Context, regex: Option<&str>) -> Result<Report, CliError> {
    let re = view::regex(regex, "agents resource type list '^git'")?;
    let keep = |n: &str| re.as_ref().is_none_or(|r| r.is_match(n));
    let types: Vec<&ResourceType> = rv::BUILTIN_TYPES.iter().filter(|t| keep(t.name)).collect();
    let all_custom = ctx.client()?.custom_types()?;
    let custom: Vec<&CustomType> = all_custom.iter().filter(|t| keep(&t.name)).collect();
    let mut rows: Vec<Vec<crate::output::Cell>> = types
        .iter()
        .map(|t| {
            let auto = t.auto_children();
            vec![
                view::id(t.name),
                "built-in".into(),
                t.kind().into(),
                view::flag_cell(t.user_addable),
                view::or(Some(&auto.join(", ")), "(none)"),
            ]
        })
        .collect();
    rows.extend(custom.iter().map(|t| {
        let auto: Vec<&str> = t
            .child_types
            .iter()
            .filter(|c| c.auto_discover)
            .map(|c| c.type_name.as_str())
            .collect();
        vec![
            view::id(t.name.clone()),
            "custom".into(),
            if t.physical { "physical" } else { "virtual" }.into(),
            view::flag_cell(t.user_addable),
            view::or(Some(&auto.join(", ")), "(none)"),
        ]
    }));
    let n = types.len() + custom.len();
    let mut listed: Vec<serde_json::Value> = types.iter().map(|t| type_json(t)).collect();
    listed.extend(custom.iter().map(|t| custom_json(t)));
    let addable = rv::user_addable().len() + all_custom.iter().filter(|t| t.user_addable).count();
    Ok(Report::ok(
        "resource type list",
        json!({ "resource_types": listed }),
        format!("{n} resource type{} listed", if n == 1 { "" } else { "s" }),
    )
    .with(Element::Table {
        title: "Resource Types".into(),
        columns: ["Name", "Source", "Phys/Virt", "Addable", "Auto-children"]
            .map(Column::left)
            .into(),
        rows,
        empty: "No types match.".into(),
    })
    .with(Element::panel(
        "Summary",
        [
            ("Built-in", rv::BUILTIN_TYPES.len().to_string()),
            ("Custom", all_custom.len().to_string()),
            ("User Addable", addable.to_string()),
        ],
    )))
}

fn type_show(ctx: &Context, name: &str) -> Result<Report, CliError> {
    let Some(t) = rv::builtin_type(name) else {
        let t = ctx.client()?.custom_type(name)?;
        return Ok(custom_report(
            Report::ok(
                "resource type show",
                json!({"resource_type": custom_json(&t)}),
                "Resource type details loaded",
            ),
            &t,
        ));
    };
    let mut report = Report::ok(
        "resource type show",
        json!({"resource_type": type_json(t)}),
        "Resource type details loaded",
    )
    .with(Element::panel(
        "Resource Type",
        [
            ("Name", view::id(t.name)),
            ("Source", "built-in".into()),
            ("Description", t.description.into()),
            ("Physical/Virtual", t.kind().into()),
            ("User Addable", view::yes_no(t.user_addable).into()),
        ],
    ));
    if t.user_addable {
        report = report.with(Element::Table {
            title: format!("CLI Arguments (agents resource add {})", t.name),
            columns: ["Argument", "Required", "Type", "Description"]
                .map(Column::left)
                .into(),
            rows: t
                .cli_args
                .iter()
                .map(|a| {
                    vec![
                        view::id(a.flag),
                        view::flag_cell(a.required),
                        a.value_type.into(),
                        a.description.into(),
                    ]
                })
                .collect(),
            empty: "(none)".into(),
        });
    }
    let parents = if t.parents.is_empty() {
        "(none, top-level only)".to_string()
    } else {
        let list: Vec<String> = t
            .parents
            .iter()
            .map(|p| {
                format!(
                    "{} ({})",
                    p.type_name,
                    p.max
                        .map(|m| format!("at most {m}"))
                        .unwrap_or_else(|| "any number".into())
                )
            })
            .collect();
        format!(
            "{}{}",
            list.join(", "),
            if t.top_level { "; top-level OK" } else { "" }
        )
    };
    Ok(report
        .with(Element::panel("Parent Types", [("Allowed", parents)]))
        .with(Element::Table {
            title: "Child Types".into(),
            columns: ["Type", "Auto", "Manual Link", "Description"]
                .map(Column::left)
                .into(),
            rows: t
                .children
                .iter()
                .map(|c| {
                    vec![
                        view::id(c.type_name),
                        view::flag_cell(c.auto),
                        view::flag_cell(c.manual),
                        c.description.into(),
                    ]
                })
                .collect(),
            empty: "(none)".into(),
        })
        .with(Element::panel(
            "Sandbox",
            [
                ("Strategy", t.sandbox_strategy.to_string()),
                (
                    "Checkpointable",
                    view::yes_no(t.capabilities.checkpointable).to_string(),
                ),
                ("Handler", t.handler.to_string()),
            ],
        )))
}

/// Global options a custom type's `resource add` words may carry. clap stops parsing at an
/// external subcommand, so `agents resource add local/notes --format json ...` leaves
/// `--format json` among the type's words; these names are reserved for the CLI (a type
/// cannot declare them), so they are moved in front of the command.
const GLOBALS_WITH_VALUE: [&str; 3] = ["--format", "--data-dir", "--config-path"];

/// The command line with the global options written after a custom type's name moved in front
/// of the command (`agents --format json resource add local/notes ...`), or `None` when the
/// command is not `resource add <custom type>` or carries no global option there. Words after
/// `--` are left alone.
pub fn hoist_globals(
    cli: &crate::cli::Cli,
    args: &[std::ffi::OsString],
) -> Option<Vec<std::ffi::OsString>> {
    use super::{AddKind, ResourceCommand};
    let Some(crate::cli::Command::Resource(ResourceCommand::Add {
        kind: AddKind::Other(words),
        ..
    })) = &cli.command
    else {
        return None;
    };
    if words.is_empty() || words.len() >= args.len() {
        return None;
    }
    let (head, tail) = args.split_at(args.len() - words.len());
    if tail
        .iter()
        .zip(words)
        .any(|(a, w)| a.to_str() != Some(w.as_str()))
    {
        return None;
    }
    let mut globals = Vec::new();
    let mut rest = vec![tail[0].clone()];
    let mut words = tail[1..].iter();
    while let Some(word) = words.next() {
        let s = word.to_string_lossy();
        if s == "--" {
            rest.push(word.clone());
            rest.extend(words.by_ref().cloned());
        } else if GLOBALS_WITH_VALUE.contains(&s.as_ref()) {
            globals.push(word.clone());
            globals.extend(words.next().cloned());
        } else if GLOBALS_WITH_VALUE
            .iter()
            .any(|g| s.starts_with(&format!("{g}=")))
            || s == "--verbose"
            || (s.len() > 1 && s.starts_with('-') && s[1..].chars().all(|c| c == 'v'))
        {
            globals.push(word.clone());
        } else {
            rest.push(word.clone());
        }
    }
    if globals.is_empty() {
        return None;
    }
    let mut out = vec![head[0].clone()];
    out.extend(globals);
    out.extend(head[1..].iter().cloned());
    out.extend(rest);
    Some(out)
}

/// `cmd` with every user-addable custom type as a subcommand of `resource add`, when `args`
/// ask for help there (`agents resource add --help`, `agents resource add local/notes -h`),
/// so that the help lists the custom types next to the built-in ones. The types are read
/// from the database of the data directory the arguments (or `AGENTS_DATA_DIR`) name, read
/// only; without a database, or when it cannot be read, `cmd` is returned as it is. Only help
/// is affected: parsing a real command keeps custom types behind the external subcommand.
pub fn with_custom_types(cmd: clap::Command, args: &[std::ffi::OsString]) -> clap::Command {
    let words: Vec<String> = args
        .iter()
        .skip(1)
        .map(|a| a.to_string_lossy().into_owned())
        .take_while(|a| a != "--")
        .collect();
    let wants_help = words.iter().any(|w| w == "--help" || w == "-h");
    let resource = words.iter().position(|w| w == "resource");
    let add = resource.and_then(|r| words[r..].iter().position(|w| w == "add"));
    if !wants_help || add.is_none() {
        return cmd;
    }
    let flag = words.iter().enumerate().find_map(|(i, w)| {
        if w == "--data-dir" {
            words.get(i + 1).cloned()
        } else {
            w.strip_prefix("--data-dir=").map(str::to_string)
        }
    });
    let data_dir = flag
        .map(PathBuf::from)
        .or_else(|| crate::cli::env_path("AGENTS_DATA_DIR"));
    let Ok(paths) = cleveragents_engine::paths::Paths::resolve(data_dir, None) else {
        return cmd;
    };
    let types = rv::local_addable_types(&paths);
    if types.is_empty() {
        return cmd;
    }
    cmd.mut_subcommand("resource", |r| {
        r.mut_subcommand("add", |mut add| {
            for t in &types {
                let about = match &t.description {
                    Some(d) => format!("{d} (custom type)"),
                    None => "Custom type".to_string(),
                };
                add = add.subcommand(
                    add_command(t)
                        .name(t.name.clone())
                        .no_binary_name(false)
                        .about(about),
                );
            }
            add
        })
    })
}
