//! The command line (spec sections 05 and 06): clap definitions, global options, dispatch.
//!
//! Each command group has its own file; each parses its arguments, calls the engine and
//! returns a [`Report`](crate::output::Report) or a [`CliError`]. [`main`] renders the result
//! in the resolved format and maps it to an exit code.

pub mod action;
pub mod actor;
pub mod actor_context;
pub mod actor_run;
pub mod completion;
pub mod config;
pub mod confirm;
pub mod error;
pub mod indexing;
pub mod interrupt;
pub mod invariant;
pub mod next;
pub mod plan;
pub mod plan_correct;
pub mod plan_sandbox;
pub mod profile;
pub mod project;
pub mod quickstart;
pub mod reference;
pub mod remote;
pub mod resource;
pub mod server;
pub mod server_audit;
pub mod server_host;
pub mod server_items;
pub mod server_policy;
pub mod server_team;
pub mod session;
pub mod skill;
pub mod system;
pub mod tool;
pub mod tui;
pub mod view;

use std::ffi::OsString;
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

use clap::{CommandFactory, FromArgMatches, Parser, Subcommand};

pub use error::CliError;

use crate::output::{self, ErrorBody, Exit, Format, Outcome, Report, Terminal, resolve_format};
use cleveragents_engine::config::{Config, FlagValues};
use cleveragents_engine::paths::Paths;

/// `agents` / `cleveragents`: supervise AI agents on large, reviewable, correctable work.
#[derive(Debug, Parser)]
#[command(name = "agents", version, about, long_about = None, propagate_version = true, max_term_width = 100)]
pub struct Cli {
    /// Data directory (database, logs, sandboxes) [env: AGENTS_DATA_DIR]
    #[arg(long, global = true, value_name = "PATH")]
    pub data_dir: Option<PathBuf>,

    /// Configuration file [env: AGENTS_CONFIG]
    #[arg(long, global = true, value_name = "PATH")]
    pub config_path: Option<PathBuf>,

    /// Output format [env: AGENTS_FORMAT; config: format; default: rich on a terminal, plain otherwise]
    #[arg(long, global = true, value_enum, value_name = "FORMAT")]
    pub format: Option<Format>,

    /// Talk to this server instead of the local engine: a name from `agents server login`, or
    /// a URL [env: AGENTS_SERVER; token: AGENTS_TOKEN]
    #[arg(long, global = true, value_name = "NAME|URL")]
    pub server: Option<String>,

    /// More detail in the log file (-v debug, -vv trace)
    #[arg(short = 'v', long = "verbose", global = true, action = clap::ArgAction::Count)]
    pub verbose: u8,

    /// Install shell completion for SHELL (default: from $SHELL)
    #[arg(long, value_name = "SHELL", num_args = 0..=1, default_missing_value = "")]
    pub install_completion: Option<String>,

    /// Print the completion script for SHELL (default: from $SHELL)
    #[arg(conflicts_with = "install_completion", long, value_name = "SHELL", num_args = 0..=1, default_missing_value = "")]
    pub show_completion: Option<String>,

    /// The command to run.
    #[command(subcommand)]
    pub command: Option<Command>,
}

/// Top-level commands. `agents --help` lists them in the groups of [`HELP_GROUPS`].
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run the main job offline on a sample project or your checkout (no key, no network)
    Quickstart(quickstart::QuickstartArgs),
    /// Create plans from actions and follow them
    #[command(subcommand)]
    Plan(plan::PlanCommand),
    /// Reusable definitions of work (YAML)
    #[command(subcommand)]
    Action(action::ActionCommand),
    /// Projects: linked resources, validations, invariants
    #[command(subcommand)]
    Project(project::ProjectCommand),
    /// Resources agents may touch (git checkouts, directories) and their DAG
    #[command(subcommand)]
    Resource(resource::ResourceCommand),
    /// Constraints at global, project, action and plan scope
    #[command(subcommand)]
    Invariant(invariant::InvariantCommand),
    /// Custom actors (YAML), built-in actors and provider models; run one on a prompt
    #[command(subcommand)]
    Actor(actor::ActorCommand),
    /// How much runs without a human (6 built-ins, custom YAML)
    #[command(subcommand)]
    AutomationProfile(profile::ProfileCommand),
    /// Print the version, build and schema information
    Version,
    /// Show paths, database and runtime information
    Info,
    /// Back up and reset the data directory and the config file
    Init {
        /// Do not ask for confirmation
        #[arg(short, long)]
        yes: bool,
    },
    /// Read and change configuration (config.toml)
    #[command(subcommand)]
    Config(config::ConfigCommand),
    /// Check configuration, database, data directory, git and providers
    Diagnostics,
    /// Open the full-screen terminal UI (also: `agents` with no command, in a terminal)
    Tui(tui::TuiArgs),
    /// Built-in tools: list, show (schema, capability), run against a plan's sandbox
    #[command(subcommand)]
    Tool(tool::ToolCommand),
    /// Skills: named collections of tools that actors reference
    #[command(subcommand)]
    Skill(skill::SkillCommand),
    /// Conversations with the orchestrator, which runs `agents` commands for you and shows them
    #[command(subcommand)]
    Session(session::SessionCommand),
    /// Serve the engine to other machines, manage its tokens, log in to a server
    #[command(subcommand)]
    Server(server::ServerCommand),
}

impl Command {
    /// Whether the command was asked to `--stream` its events as JSON Lines.
    pub fn streams(&self) -> bool {
        match self {
            Command::Plan(c) => c.streams(),
            _ => false,
        }
    }

    /// Whether the command streams JSON Lines only in the json format (`session tell
    /// --stream` prints text as it arrives in the human formats).
    pub fn streams_in_json(&self) -> bool {
        match self {
            Command::Session(c) => c.streams(),
            _ => false,
        }
    }

    /// The command path shown in the envelope's `command`.
    pub fn path(&self) -> String {
        match self {
            Command::Quickstart(_) => "quickstart".into(),
            Command::Version => "version".into(),
            Command::Info => "info".into(),
            Command::Init { .. } => "init".into(),
            Command::Config(c) => format!("config {}", c.name()),
            Command::Diagnostics => "diagnostics".into(),
            Command::Tui(_) => "tui".into(),
            Command::Actor(c) => format!("actor {}", c.name()),
            Command::Plan(c) => format!("plan {}", c.name()),
            Command::Action(c) => format!("action {}", c.name()),
            Command::Project(c) => format!("project {}", c.name()),
            Command::Resource(c) => format!("resource {}", c.name()),
            Command::Invariant(c) => format!("invariant {}", c.name()),
            Command::AutomationProfile(c) => format!("automation-profile {}", c.name()),
            Command::Tool(c) => format!("tool {}", c.name()),
            Command::Skill(c) => format!("skill {}", c.name()),
            Command::Session(c) => format!("session {}", c.name()),
            Command::Server(c) => format!("server {}", c.name()),
        }
    }

    /// Whether the command can run against a server (`--server`): it reaches the engine only
    /// through the [`api::Client`](cleveragents_engine::api::Client). Other commands refuse
    /// `--server` rather than act on this machine's data directory.
    pub fn served_remotely(&self) -> bool {
        match self {
            Command::Plan(c) => c.served_remotely(),
            Command::Action(c) => c.served_remotely(),
            Command::Project(c) => c.served_remotely(),
            Command::Resource(c) => c.served_remotely(),
            Command::Invariant(c) => c.served_remotely(),
            Command::Actor(c) => c.served_remotely(),
            Command::AutomationProfile(c) => c.served_remotely(),
            Command::Config(c) => c.served_remotely(),
            Command::Tool(c) => c.served_remotely(),
            Command::Skill(c) => c.served_remotely(),
            Command::Session(c) => c.served_remotely(),
            Command::Tui(a) => a.served_remotely(),
            Command::Server(c) => c.served_remotely(),
            Command::Quickstart(_)
            | Command::Version
            | Command::Info
            | Command::Init { .. }
            | Command::Diagnostics => false,
        }
    }
}

/// How `agents --help` groups the top-level commands (a command missing here is listed under
/// "Other commands").
pub const HELP_GROUPS: [(&str, &[&str]); 3] = [
    (
        "Work",
        &[
            "quickstart",
            "tui",
            "session",
            "plan",
            "action",
            "project",
            "resource",
            "invariant",
        ],
    ),
    (
        "Agents and automation",
        &["actor", "skill", "tool", "automation-profile"],
    ),
    (
        "Setup",
        &["config", "init", "info", "diagnostics", "version", "server"],
    ),
];

impl Cli {
    /// The plain clap definition (no grouped help template), named `agents`, for generated
    /// documentation.
    pub fn command_for_reference() -> clap::Command {
        Cli::command().name("agents").bin_name("agents")
    }
}

/// The command-line definition with the grouped command list in `--help`.
pub fn cli_command() -> clap::Command {
    let cmd = Cli::command().name(bin_name());
    let width = cmd
        .get_subcommands()
        .map(|s| s.get_name().len())
        .max()
        .unwrap_or(10)
        + 2;
    let line = |sub: &clap::Command| {
        format!(
            "  {:width$}{}\n",
            sub.get_name(),
            sub.get_about().map(|a| a.to_string()).unwrap_or_default()
        )
    };
    let mut text = String::new();
    let mut listed = Vec::new();
    for (title, names) in HELP_GROUPS {
        text.push_str(&format!("{title}:\n"));
        for name in names {
            if let Some(sub) = cmd.find_subcommand(name) {
                text.push_str(&line(sub));
                listed.push(*name);
            }
        }
        text.push('\n');
    }
    let others: Vec<&clap::Command> = cmd
        .get_subcommands()
        .filter(|s| !listed.contains(&s.get_name()) && s.get_name() != "help" && !s.is_hide_set())
        .collect();
    if !others.is_empty() {
        text.push_str("Other commands:\n");
        for sub in others {
            text.push_str(&line(sub));
        }
        text.push('\n');
    }
    cmd.after_help("Run `agents COMMAND --help` for a command's subcommands and options.")
        .help_template(format!(
        "{{about-with-newline}}\n{{usage-heading}} {{usage}}\n\n{}Options:\n{{options}}{{after-help}}",
        text.replace('{', "{{").replace('}', "}}")
    ))
    .subcommand_help_heading("Commands")
}

/// Everything a command needs from its surroundings.
#[derive(Debug)]
pub struct Context {
    /// Resolved file locations.
    pub paths: Paths,
    /// The loaded configuration (defaults when the file is missing), or why it is unusable.
    pub config: Result<Config, CliError>,
    /// Values from global flags that take part in config resolution.
    pub flags: FlagValues,
    /// The output format in force.
    pub format: Format,
    /// The terminal around the process.
    pub terminal: Terminal,
    /// Global options given on the command line that a suggested follow-up command must
    /// repeat to act on the same environment (`--data-dir X`, `--config-path Y`).
    pub repeat_args: Vec<String>,
    /// The server chosen with `--server` / `AGENTS_SERVER`; `None`: this machine's engine.
    pub server: Option<remote::ServerChoice>,
    /// For `info`, which runs on this machine: the server chosen, as its `Server Mode:` line
    /// shows it.
    pub server_mode: Option<String>,
}

impl Context {
    /// The configuration, or the error that made it unusable.
    ///
    /// # Errors
    /// The config file's error, converted for display.
    pub fn config(&self) -> Result<&Config, CliError> {
        self.config.as_ref().map_err(CliError::clone)
    }

    /// The flag values that take part in resolving settings for `config get|set|list`.
    /// This invocation's own `--format` only chooses how the answer is rendered, so it is left
    /// out: `agents --format yaml config get format` and `--format json` give one answer.
    pub fn setting_flags(&self) -> FlagValues {
        FlagValues {
            format: None,
            verbose: self.flags.verbose,
        }
    }

    /// A follow-up command for the user to run, repeating `--data-dir` / `--config-path` when
    /// they were given, shell-quoted: `agents --data-dir '/my data' init --yes`.
    pub fn suggest(&self, rest: &str) -> String {
        with_globals(&self.repeat_args, rest)
    }

    /// Rewrites a suggested `agents ...` command (from an error) so that it repeats
    /// `--data-dir` / `--config-path`; other text is returned unchanged.
    pub fn rewrite(&self, suggestion: &str) -> String {
        rewrite_suggestion(&self.repeat_args, suggestion)
    }

    /// A next step from the engine as the command that takes it here, repeating
    /// `--data-dir` / `--config-path` when they were given ([`next::command`]).
    pub fn next(&self, step: &cleveragents_engine::domain::Next) -> String {
        with_globals(&self.repeat_args, &next::rest(step))
    }

    /// A recovery hint as printed: `what: agents [--data-dir X] [--config-path Y] command`.
    pub fn hint(&self, hint: &cleveragents_engine::api::Hint) -> String {
        format!("{}: {}", hint.what, self.next(&hint.next))
    }

    /// An errored plan's recovery hints as printed (empty unless it is errored).
    pub fn recovery_hints(&self, plan: &cleveragents_engine::domain::Plan) -> Vec<String> {
        if plan.state() != cleveragents_engine::domain::ProcessingState::Errored {
            return Vec::new();
        }
        cleveragents_engine::api::recovery_hints(plan)
            .iter()
            .map(|h| self.hint(h))
            .collect()
    }

    /// The engine's API for this command: the chosen server's, else this machine's in
    /// process.
    ///
    /// # Errors
    /// `IO_ERROR` when the server's HTTP client cannot be built.
    pub fn client(&self) -> Result<Box<dyn cleveragents_engine::api::Client>, CliError> {
        match &self.server {
            Some(s) => s.client(),
            None => Ok(Box::new(self.registry_engine())),
        }
    }

    /// Checks that the data this command changes can be reached: this machine's database
    /// opens, created or migrated when needed (in process); through a server, the server
    /// answers for its own.
    ///
    /// # Errors
    /// Store errors, converted for display.
    pub fn check_store(&self) -> Result<(), CliError> {
        if self.server.is_some() {
            return Ok(());
        }
        self.registry_engine().schema_version()?;
        Ok(())
    }

    /// Opens (creating or migrating if needed) this machine's database before a command that
    /// needs it.
    ///
    /// # Errors
    /// Store errors, converted for display.
    fn open_store(&self) -> Result<(), CliError> {
        self.check_store()
    }

    /// `engine` keeping its records in the PostgreSQL database `AGENTS_DATABASE_URL` names,
    /// when it is set (a server host's administrator acting on the team's records; spec
    /// section 21), else in this data directory's SQLite file.
    pub fn with_database(
        &self,
        engine: cleveragents_engine::api::Engine,
    ) -> cleveragents_engine::api::Engine {
        match std::env::var("AGENTS_DATABASE_URL") {
            Ok(url) if !url.trim().is_empty() => {
                engine.with_database(cleveragents_engine::api::DatabaseLocation::Postgres(url))
            }
            _ => engine,
        }
    }

    /// The engine for a registry change: this data directory with the configured settings
    /// (the defaults when `config.toml` is unusable: a command that needs the providers
    /// checks [`Context::config`] first and reports that error).
    pub fn registry_engine(&self) -> cleveragents_engine::api::Engine {
        let settings = self
            .config()
            .map(cleveragents_engine::api::Settings::from_config)
            .unwrap_or_default();
        let engine = self
            .with_database(cleveragents_engine::api::Engine::new(
                self.paths.clone(),
                settings,
            ))
            .with_commands(session::commands(self));
        match self.config() {
            Ok(config) => engine.with_config(config.clone()),
            Err(_) => engine,
        }
    }

    /// Runs one registry change through the engine (which writes its `registry_changed`
    /// event with it).
    ///
    /// # Errors
    /// The registry's error, rendered with the hints the CLI has for it.
    pub fn change<C: cleveragents_engine::api::TakeOutcome>(
        &self,
        change: C,
    ) -> Result<C::Output, cleveragents_engine::api::ApiError> {
        match &self.server {
            Some(chosen) => chosen
                .client()
                .map_err(|e| cleveragents_engine::api::ApiError::Unreachable {
                    url: chosen.url.clone(),
                    reason: e.body.message.clone(),
                })?
                .change(change),
            None => self.registry_engine().change(change),
        }
    }
}

/// `agents [--data-dir X] [--config-path Y] rest`, shell-quoted.
fn with_globals(repeat_args: &[String], rest: &str) -> String {
    let mut words = vec![bin_name().to_string()];
    words.extend(
        repeat_args
            .iter()
            .map(|a| shell_words::quote(a).into_owned()),
    );
    words.push(rest.to_string());
    words.join(" ")
}

/// Refuses a value that is still a placeholder of a suggested command (`<guidance>`,
/// `<branch>`): a template hint pasted without putting a value in its place.
///
/// # Errors
/// `INVALID_INPUT` naming `arg`.
pub fn refuse_placeholder(arg: &str, value: &str) -> Result<(), CliError> {
    let v = value.trim();
    if v.len() > 2
        && v.starts_with('<')
        && v.ends_with('>')
        && !v[1..v.len() - 1].contains(['<', '>'])
    {
        return Err(CliError::invalid_input(format!(
            "{arg} is the placeholder {v} of a suggested command, not a value"
        ))
        .hint(format!("put your own value in place of {v}")));
    }
    Ok(())
}

/// Rewrites `agents rest` to [`with_globals`]; anything else unchanged.
fn rewrite_suggestion(repeat_args: &[String], suggestion: &str) -> String {
    match suggestion.strip_prefix("agents ") {
        // Already written for this environment (e.g. by `Context::suggest`).
        Some(rest)
            if ["--data-dir ", "--config-path ", "--server "]
                .iter()
                .any(|g| rest.starts_with(g)) =>
        {
            suggestion.to_string()
        }
        Some(rest) => with_globals(repeat_args, rest),
        // A command quoted inside a sentence (`agents plan review PLAN` lists ...).
        None if !repeat_args.is_empty() && suggestion.contains("`agents ") => {
            let globals = with_globals(repeat_args, "");
            let mut parts = suggestion.split("`agents ");
            let mut out = parts.next().unwrap_or_default().to_string();
            for part in parts {
                out.push('`');
                if ["--data-dir ", "--config-path ", "--server "]
                    .iter()
                    .any(|g| part.starts_with(g))
                {
                    out.push_str("agents ");
                } else {
                    out.push_str(&globals);
                }
                out.push_str(part);
            }
            out
        }
        None => suggestion.to_string(),
    }
}

/// Reads an environment variable (empty counts as unset).
pub fn env_var(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.is_empty())
}

/// The name the program was invoked as: `cleveragents` or (by default) `agents`.
pub fn bin_name() -> &'static str {
    let invoked = std::env::args_os().next().map(PathBuf::from);
    match invoked.as_deref().and_then(std::path::Path::file_name) {
        Some(name) if name == "cleveragents" => "cleveragents",
        _ => "agents",
    }
}

/// A path from an environment variable, with a leading `~/` expanded to the home directory;
/// empty counts as unset.
fn env_path(name: &str) -> Option<PathBuf> {
    let value = env_var(name)?;
    match value.strip_prefix("~/") {
        Some(rest) => directories::BaseDirs::new().map(|b| b.home_dir().join(rest)),
        None => Some(PathBuf::from(value)),
    }
}

/// Runs the program with the process's arguments and returns its exit code.
pub fn main() -> ExitCode {
    // First, while the process has one thread: a mount namespace of its own for sandboxes
    // that share their base's checkout (docs/sandbox.md, "Shared checkouts").
    let switch = std::env::var_os(cleveragents_engine::api::SANDBOX_OVERLAY_SWITCH);
    cleveragents_engine::api::enter_own_namespace(
        cleveragents_engine::api::sandbox_overlay_wanted(switch.as_deref()),
    );
    let started = Instant::now();
    let terminal = Terminal::detect();
    let args: Vec<OsString> = std::env::args_os().collect();
    let parsed = parse(&args).and_then(|(cli, repeat_args)| {
        match resource::types::hoist_globals(&cli, &args) {
            Some(hoisted) => parse(&hoisted),
            None => Ok((cli, repeat_args)),
        }
    });
    let code = match parsed {
        Ok((cli, repeat_args)) => run(cli, repeat_args, terminal, started),
        Err(e) => usage_error(&e, &args),
    };
    ExitCode::from(code)
}

/// Parses a command line: the command and the global options a suggested follow-up command
/// must repeat (`--data-dir X`, `--config-path Y`). Help for `resource add` lists the custom
/// resource types too.
fn parse(args: &[OsString]) -> Result<(Cli, Vec<String>), clap::Error> {
    resource::types::with_custom_types(cli_command(), args)
        .try_get_matches_from(args)
        .and_then(|matches| {
            let mut repeat_args = Vec::new();
            for (id, flag) in [("data_dir", "--data-dir"), ("config_path", "--config-path")] {
                if let Some(value) = matches.get_one::<PathBuf>(id) {
                    repeat_args.push(flag.to_string());
                    repeat_args.push(value.display().to_string());
                }
            }
            Cli::from_arg_matches(&matches).map(|cli| (cli, repeat_args))
        })
}

/// Handles a clap error: help and version print normally (exit 0); anything else exits 2,
/// as an envelope when json or yaml was asked for.
fn usage_error(e: &clap::Error, args: &[OsString]) -> u8 {
    use clap::error::ErrorKind;
    if matches!(e.kind(), ErrorKind::DisplayHelp | ErrorKind::DisplayVersion) {
        let _ = e.print();
        return 0;
    }
    let wanted = requested_format(args);
    if let Some(format @ (Format::Json | Format::Yaml)) = wanted {
        let rendered = e.render().to_string();
        let mut lines = rendered.lines().filter(|l| !l.trim().is_empty());
        let message = lines
            .next()
            .unwrap_or("invalid arguments")
            .trim_start_matches("error: ")
            .to_string();
        let detail: Vec<&str> = lines.collect();
        let outcome = Outcome::Failed {
            command: command_path_from_args(args),
            error: ErrorBody {
                code: "USAGE",
                message,
                detail: (!detail.is_empty()).then(|| detail.join("\n")),
                suggestions: vec!["agents --help".to_string()],
                exit: error::exit_of(cleveragents_engine::api::ErrorCode::Usage),
            },
            data: serde_json::Value::Null,
        };
        let terminal = Terminal::detect();
        let _ = output::emit(
            &outcome,
            format,
            &terminal,
            std::time::Duration::ZERO,
            &mut std::io::stdout(),
        );
    } else {
        let _ = e.print();
    }
    Exit::Usage.code()
}

/// The format asked for on a command line that clap could not parse: `--format X`,
/// `--format=X`, else `AGENTS_FORMAT`, else the config file's `format` (the file named by
/// `--config-path`, `AGENTS_CONFIG` or the default location).
fn requested_format(args: &[OsString]) -> Option<Format> {
    let args: Vec<String> = args
        .iter()
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    let flag = |name: &str| {
        args.iter().enumerate().find_map(|(i, a)| {
            if a == name {
                args.get(i + 1).cloned()
            } else {
                a.strip_prefix(&format!("{name}=")).map(str::to_string)
            }
        })
    };
    if let Some(format) = flag("--format").or_else(|| env_var("AGENTS_FORMAT")) {
        return format.parse().ok();
    }
    let config_path = flag("--config-path")
        .map(PathBuf::from)
        .or_else(|| env_path("AGENTS_CONFIG"));
    let paths = Paths::resolve(Some(PathBuf::from(".")), config_path).ok()?;
    Config::load(&paths.config_path)
        .ok()?
        .file
        .format?
        .parse()
        .ok()
}

/// The subcommand path named in `args`, as far as it matches the command tree.
fn command_path_from_args(args: &[OsString]) -> String {
    let mut cmd = Cli::command();
    let mut path = Vec::new();
    for arg in args.iter().skip(1).map(|a| a.to_string_lossy()) {
        if arg.starts_with('-') {
            continue;
        }
        match cmd.find_subcommand(arg.as_ref()) {
            Some(sub) => {
                path.push(sub.get_name().to_string());
                cmd = sub.clone();
            }
            None => continue,
        }
    }
    if path.is_empty() {
        bin_name().to_string()
    } else {
        path.join(" ")
    }
}

/// Runs a parsed command line; returns the exit code.
pub fn run(cli: Cli, repeat_args: Vec<String>, terminal: Terminal, started: Instant) -> u8 {
    let mut out = Finisher {
        command: String::new(),
        stream: false,
        format: Format::Plain,
        terminal,
        started,
        repeat_args: repeat_args.clone(),
    };
    let completion = cli
        .install_completion
        .as_deref()
        .map(|s| (true, s))
        .or(cli.show_completion.as_deref().map(|s| (false, s)));
    if let Some((install, shell)) = completion {
        out.command = if install {
            "install-completion"
        } else {
            "show-completion"
        }
        .to_string();
        if cli.command.is_some() {
            return out.finish(Err(CliError::invalid_input(
                "--install-completion and --show-completion cannot be combined with a command",
            )
            .hint(format!("{} --show-completion bash", bin_name()))));
        }
        return match (install, completion::show_or_install(install, shell)) {
            (false, Ok(None)) => 0,
            (_, Ok(Some(report))) => out.finish(Ok(report)),
            (_, Ok(None)) => 0,
            (_, Err(e)) => out.finish(Err(e)),
        };
    }
    let command = match cli.command {
        Some(command) => command,
        // `agents` alone opens the TUI in a terminal and prints help anywhere else.
        None if terminal.stdin_tty && terminal.stdout_tty => Command::Tui(tui::TuiArgs::default()),
        None => {
            let _ = cli_command().print_help();
            return 0;
        }
    };
    out.command = command.path();
    out.stream = command.streams();
    let data_dir = cli.data_dir.or_else(|| env_path("AGENTS_DATA_DIR"));
    let config_path = cli.config_path.or_else(|| env_path("AGENTS_CONFIG"));
    let paths = match Paths::resolve(data_dir, config_path) {
        Ok(p) => p,
        Err(e) => return out.finish(Err(e.into())),
    };
    let config = Config::load(&paths.config_path).map_err(CliError::from);
    let env_format = match env_var("AGENTS_FORMAT").map(|v| v.parse::<Format>()) {
        Some(Ok(f)) => Some(f),
        Some(Err(msg)) => {
            out.format = resolve_format(cli.format, None, None, terminal.stdout_tty);
            return out.finish(Err(CliError::invalid_input(format!(
                "AGENTS_FORMAT: {msg}"
            ))
            .hint("unset AGENTS_FORMAT or fix its value")));
        }
        None => None,
    };
    let config_format = config
        .as_ref()
        .ok()
        .and_then(|c| c.file.format.as_deref())
        .and_then(|f| f.parse().ok());
    out.format = resolve_format(cli.format, env_format, config_format, terminal.stdout_tty);
    out.stream = out.stream || (command.streams_in_json() && out.format == Format::Json);
    let ctx = Context {
        paths,
        config,
        flags: FlagValues {
            format: cli.format.map(|f| f.as_str().to_string()),
            verbose: cli.verbose,
        },
        format: out.format,
        terminal,
        repeat_args,
        server: None,
        server_mode: None,
    };
    let ctx = match choose_server(ctx, cli.server, &command) {
        Ok(ctx) => ctx,
        Err(e) => return out.finish(Err(e)),
    };
    // The commands an error suggests go to the same server, named as the user typed it.
    out.repeat_args.clone_from(&ctx.repeat_args);
    // Logging starts for every command but `init`, which must not touch the data directory
    // before it is confirmed; it starts logging itself afterwards.
    let _guard = match command {
        Command::Init { .. } => None,
        _ => start_logging(&ctx),
    };
    tracing::debug!(command = %out.command, format = %out.format, "command started");
    out.finish(dispatch(command, &ctx))
}

/// Starts file logging for a context. When the log file cannot be written, says so once on
/// stderr (stdout stays the command's data) and returns `None`: the command runs without a log.
pub fn start_logging(ctx: &Context) -> Option<tracing_appender::non_blocking::WorkerGuard> {
    let level = ctx
        .config
        .as_ref()
        .ok()
        .and_then(|c| c.file.log_level.clone())
        .unwrap_or_else(|| "info".into());
    match crate::logging::init(
        &ctx.paths.logs_dir(),
        env_var("AGENTS_LOG").as_deref(),
        &level,
        ctx.flags.verbose,
    ) {
        Ok(guard) => Some(guard),
        Err(crate::logging::LogOff::Unwritable(why)) => {
            let _ = writeln!(
                std::io::stderr(),
                "warning: logging to a file is off for this command: {why} (see `{}`)",
                ctx.suggest("diagnostics")
            );
            None
        }
        Err(crate::logging::LogOff::AlreadyInstalled) => None,
    }
}

/// Sets the server `--server` or `AGENTS_SERVER` chose, refusing it for a command that
/// cannot run against a server.
fn choose_server(
    mut ctx: Context,
    flag: Option<String>,
    command: &Command,
) -> Result<Context, CliError> {
    let explicit = flag.is_some();
    let Some(given) = flag.or_else(|| env_var("AGENTS_SERVER")) else {
        return Ok(ctx);
    };
    if let Command::Server(c) = command
        && c.administers()
        && !explicit
    {
        // AGENTS_SERVER exported on the server host itself: tokens, users and organizations
        // go through a server only when --server asks for it.
        return Ok(ctx);
    }
    if let Command::Server(c) = command
        && c.uses_data_dir()
        && !c.administers()
    {
        if !explicit {
            // AGENTS_SERVER exported on the server host itself.
            return Ok(ctx);
        }
        // `server start` and `server migrate` act on the data directory of the host they run
        // on.
        return Err(CliError::invalid_input(format!(
            "`agents {}` runs on the server host, against its data directory, not through --server",
            command.path()
        ))
        .hint("run it on the server host without --server (and without AGENTS_SERVER)"));
    }
    if matches!(command, Command::Version | Command::Diagnostics) {
        // About this machine: a chosen server changes nothing.
        return Ok(ctx);
    }
    if matches!(command, Command::Info) {
        // `info` describes this machine, and names the server in its `Server Mode:` line.
        let chosen = remote::choose(&ctx, &given)?;
        ctx.server_mode = Some(match &chosen.name {
            Some(name) => format!("{name} at {}", chosen.url),
            None => chosen.url,
        });
        return Ok(ctx);
    }
    if !command.served_remotely() {
        return Err(CliError::new(
            "NOT_SUPPORTED",
            format!("`agents {}` does not run against a server yet", command.path()),
        )
        .detail("docs/server.md, \"What runs remotely today\", lists the commands a server answers")
        .hint("run it without --server (and without AGENTS_SERVER) on the machine that holds the data"));
    }
    ctx.server = Some(remote::choose(&ctx, &given)?);
    // A suggested follow-up command goes to the same server.
    ctx.repeat_args.extend(["--server".to_string(), given]);
    Ok(ctx)
}

fn dispatch(command: Command, ctx: &Context) -> Result<Report, CliError> {
    if ctx.server.is_some() {
        // Served by the server: this machine's data directory is not touched.
        return match command {
            Command::Plan(c) => plan::run(c, ctx),
            Command::Action(c) => action::run(c, ctx),
            Command::Project(c) => project::run(c, ctx),
            Command::Resource(c) => resource::run(c, ctx),
            Command::Invariant(c) => invariant::run(c, ctx),
            Command::Actor(c) => actor::run(c, ctx),
            Command::AutomationProfile(c) => profile::run(c, ctx),
            Command::Config(c) => config::run(c, ctx),
            Command::Tool(c) => tool::run(c, ctx),
            Command::Skill(c) => skill::run(c, ctx),
            Command::Session(c) => session::run(c, ctx),
            Command::Tui(args) => tui::run(args, ctx),
            Command::Server(c) => server::run(c, ctx),
            Command::Quickstart(_)
            | Command::Version
            | Command::Info
            | Command::Init { .. }
            | Command::Diagnostics => Err(CliError::new("NOT_SUPPORTED", "not served remotely")),
        };
    }
    match command {
        // These need the database: it is created on first use.
        Command::Info
        | Command::Quickstart(_)
        | Command::Tui(_)
        | Command::Actor(_)
        | Command::Plan(_)
        | Command::Action(_)
        | Command::Project(_)
        | Command::Resource(_)
        | Command::Invariant(_)
        | Command::AutomationProfile(_)
        | Command::Tool(_)
        | Command::Skill(_)
        | Command::Session(_) => {
            ctx.open_store()?;
        }
        Command::Server(ref c) if c.uses_data_dir() => {
            ctx.open_store()?;
        }
        Command::Server(_) => {}
        // These work without it, but still create it on first use when they can, so that
        // every command leaves a usable environment behind.
        Command::Version | Command::Config(_) => {
            if let Err(e) = ctx.open_store() {
                tracing::warn!(error = %e.body.message, "database not available");
            }
        }
        // `init` touches nothing before its confirmation; `diagnostics` reports a broken
        // database as a finding.
        Command::Init { .. } | Command::Diagnostics => {}
    }
    match command {
        Command::Quickstart(a) => quickstart::run(a, ctx),
        Command::Version => system::version(ctx),
        Command::Info => system::info(ctx),
        Command::Init { yes } => system::init(ctx, yes),
        Command::Config(c) => config::run(c, ctx),
        Command::Diagnostics => system::diagnostics(ctx),
        Command::Tui(args) => tui::run(args, ctx),
        Command::Actor(c) => actor::run(c, ctx),
        Command::Plan(c) => plan::run(c, ctx),
        Command::Action(c) => action::run(c, ctx),
        Command::Project(c) => project::run(c, ctx),
        Command::Resource(c) => resource::run(c, ctx),
        Command::Invariant(c) => invariant::run(c, ctx),
        Command::AutomationProfile(c) => profile::run(c, ctx),
        Command::Tool(c) => tool::run(c, ctx),
        Command::Skill(c) => skill::run(c, ctx),
        Command::Session(c) => session::run(c, ctx),
        Command::Server(c) => server::run(c, ctx),
    }
}

/// A top-level setting (`automation-profile`, `invariant-actor`) resolved through environment,
/// config file and default; `None` when unset or when the config file is unusable.
pub fn global_setting(ctx: &Context, key: &str) -> Option<String> {
    let config = ctx.config.as_ref().ok()?;
    let path = cleveragents_engine::config::KeyPath::parse(key).ok()?;
    cleveragents_engine::config::resolve(config, None, &path, &ctx.setting_flags(), &env_var)
        .chain
        .into_iter()
        .filter(|c| c.source != cleveragents_engine::config::Source::Default)
        .find_map(|c| c.value)
}

/// Every level that sets `key` outside the compiled-in default, as (value, origin) pairs in
/// precedence order: the environment variable first, then `config.toml`.
pub fn global_setting_levels(ctx: &Context, key: &str) -> Vec<(String, String)> {
    let (Ok(config), Ok(path)) = (
        ctx.config.as_ref(),
        cleveragents_engine::config::KeyPath::parse(key),
    ) else {
        return Vec::new();
    };
    cleveragents_engine::config::resolve(config, None, &path, &ctx.setting_flags(), &env_var)
        .chain
        .into_iter()
        .filter(|c| c.source != cleveragents_engine::config::Source::Default)
        .filter_map(|c| c.value.map(|v| (v, c.origin)))
        .collect()
}

/// Renders a command's result: knows the command path, format and terminal, and the global
/// options that suggested commands must repeat.
struct Finisher {
    command: String,
    /// `--stream`: the envelope is one JSON line after the streamed events.
    stream: bool,
    format: Format,
    terminal: Terminal,
    started: Instant,
    repeat_args: Vec<String>,
}

impl Finisher {
    fn rewrite(&self, suggestion: &str) -> String {
        rewrite_suggestion(&self.repeat_args, suggestion)
    }

    /// Renders the result and returns the exit code; a closed stdout exits quietly.
    fn finish(&self, result: Result<Report, CliError>) -> u8 {
        let outcome = match result {
            Ok(mut report) => {
                if let Some(error) = &mut report.error {
                    error.suggestions = error.suggestions.iter().map(|s| self.rewrite(s)).collect();
                }
                Outcome::Done(report)
            }
            Err(e) => {
                tracing::warn!(code = e.body.code, message = %e.body.message, "command failed");
                let mut error = *e.body;
                error.suggestions = error.suggestions.iter().map(|s| self.rewrite(s)).collect();
                Outcome::Failed {
                    command: self.command.clone(),
                    error,
                    data: e.data,
                }
            }
        };
        let exit = outcome.exit().code();
        let written = if !self.stream && !cleveragents_engine::api::any_secret() {
            // No secret to hide: written as it is rendered, without a copy of the whole
            // output (tens of megabytes for a large tree or diff).
            let mut stdout = std::io::stdout().lock();
            output::widen_pipe(&stdout);
            output::emit(
                &outcome,
                self.format,
                &self.terminal,
                self.started.elapsed(),
                &mut stdout,
            )
        } else {
            self.render_redacted(&outcome)
        };
        match written {
            Ok(()) => exit,
            Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => exit,
            Err(_) => {
                let _ = writeln!(std::io::stderr(), "error: cannot write to stdout");
                Exit::Failure.code()
            }
        }
    }

    /// Writes `outcome` rendered whole, then redacted, so that no secret is printed
    /// (docs/sandbox.md).
    fn render_redacted(&self, outcome: &Outcome) -> std::io::Result<()> {
        let mut rendered = Vec::new();
        let written = if self.stream {
            output::emit_line(outcome, self.started.elapsed(), &mut rendered)
        } else {
            output::emit(
                outcome,
                self.format,
                &self.terminal,
                self.started.elapsed(),
                &mut rendered,
            )
        };
        written.and_then(|()| {
            let mut stdout = std::io::stdout().lock();
            stdout.write_all(&cleveragents_engine::api::redacted_bytes(&rendered))?;
            stdout.flush()
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_command_line_definition_is_consistent() {
        Cli::command().debug_assert();
        cli_command().debug_assert();
    }

    #[test]
    fn format_is_found_on_unparseable_command_lines() {
        let args = |v: &[&str]| v.iter().map(OsString::from).collect::<Vec<_>>();
        assert_eq!(
            requested_format(&args(&["agents", "--format", "json", "nope"])),
            Some(Format::Json)
        );
        assert_eq!(
            requested_format(&args(&["agents", "x", "--format=yaml"])),
            Some(Format::Yaml)
        );
        assert_eq!(
            command_path_from_args(&args(&["agents", "config", "get", "--bogus"])),
            "config get"
        );
    }
}
