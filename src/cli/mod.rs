//! The command line (spec sections 05 and 06): clap definitions, global options, dispatch.
//!
//! Each command group has its own file; each parses its arguments, calls the engine and
//! returns a [`Report`](crate::output::Report) or a [`CliError`]. [`main`] renders the result
//! in the resolved format and maps it to an exit code.

pub mod completion;
pub mod config;
pub mod confirm;
pub mod error;
pub mod plan_sandbox;
pub mod system;
pub mod tool;

use std::ffi::OsString;
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

use clap::{CommandFactory, FromArgMatches, Parser, Subcommand};

pub use error::CliError;

use crate::engine::config::{Config, FlagValues};
use crate::engine::paths::Paths;
use crate::engine::store::Store;
use crate::output::{self, ErrorBody, Exit, Format, Outcome, Report, Terminal, resolve_format};

/// `agents` / `cleveragents`: supervise AI agents on large, reviewable, correctable work.
#[derive(Debug, Parser)]
#[command(name = "agents", version, about, long_about = None, propagate_version = true, max_term_width = 100)]
pub struct Cli {
    /// Data directory (database, logs, sandboxes) [env: AGENTS_DATA_DIR]
    #[arg(
        long,
        global = true,
        value_name = "PATH",
        env = "AGENTS_DATA_DIR",
        hide_env = true
    )]
    pub data_dir: Option<PathBuf>,

    /// Configuration file [env: AGENTS_CONFIG]
    #[arg(
        long,
        global = true,
        value_name = "PATH",
        env = "AGENTS_CONFIG",
        hide_env = true
    )]
    pub config_path: Option<PathBuf>,

    /// Output format [env: AGENTS_FORMAT; config: format; default: rich on a terminal, plain otherwise]
    #[arg(long, global = true, value_enum, value_name = "FORMAT")]
    pub format: Option<Format>,

    /// More detail in the log file (-v debug, -vv trace)
    #[arg(short = 'v', long = "verbose", global = true, action = clap::ArgAction::Count)]
    pub verbose: u8,

    /// Install shell completion for SHELL (default: from $SHELL)
    #[arg(long, value_name = "SHELL", num_args = 0..=1, default_missing_value = "")]
    pub install_completion: Option<String>,

    /// Print the completion script for SHELL (default: from $SHELL)
    #[arg(long, value_name = "SHELL", num_args = 0..=1, default_missing_value = "")]
    pub show_completion: Option<String>,

    /// The command to run.
    #[command(subcommand)]
    pub command: Option<Command>,
}

/// Top-level commands.
#[derive(Debug, Subcommand)]
pub enum Command {
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
    /// Work with plans: diffs, artifacts, checkpoints, rollback, export, cleanup
    #[command(subcommand)]
    Plan(plan_sandbox::PlanSandboxCommand),
    /// Run built-in tools against a plan's sandbox
    #[command(subcommand)]
    Tool(tool::ToolCommand),
}

impl Command {
    /// The command path shown in the envelope's `command`.
    pub fn path(&self) -> String {
        match self {
            Command::Version => "version".into(),
            Command::Info => "info".into(),
            Command::Init { .. } => "init".into(),
            Command::Config(c) => format!("config {}", c.name()),
            Command::Diagnostics => "diagnostics".into(),
            Command::Plan(c) => format!("plan {}", c.name()),
            Command::Tool(c) => format!("tool {}", c.name()),
        }
    }
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
        let mut words = vec!["agents".to_string()];
        words.extend(
            self.repeat_args
                .iter()
                .map(|a| shell_words::quote(a).into_owned()),
        );
        words.push(rest.to_string());
        words.join(" ")
    }

    /// Opens (creating if needed) the database.
    ///
    /// # Errors
    /// Store errors, converted for display.
    pub fn store(&self) -> Result<Store, CliError> {
        Ok(Store::open(&self.paths.database())?)
    }
}

/// Reads an environment variable (empty counts as unset).
pub fn env_var(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.is_empty())
}

/// Runs the program with the process's arguments and returns its exit code.
pub fn main() -> ExitCode {
    let started = Instant::now();
    let terminal = Terminal::detect();
    let args: Vec<OsString> = std::env::args_os().collect();
    let parsed = Cli::command()
        .try_get_matches_from(&args)
        .and_then(|matches| {
            let mut repeat_args = Vec::new();
            for (id, flag) in [("data_dir", "--data-dir"), ("config_path", "--config-path")] {
                if matches.value_source(id) == Some(clap::parser::ValueSource::CommandLine)
                    && let Some(value) = matches.get_one::<PathBuf>(id)
                {
                    repeat_args.push(flag.to_string());
                    repeat_args.push(value.display().to_string());
                }
            }
            Cli::from_arg_matches(&matches).map(|cli| (cli, repeat_args))
        });
    let code = match parsed {
        Ok((cli, repeat_args)) => run(cli, repeat_args, terminal, started),
        Err(e) => usage_error(&e, &args),
    };
    ExitCode::from(code)
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
                exit: Exit::Usage,
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
/// `--format=X`, else `AGENTS_FORMAT`.
fn requested_format(args: &[OsString]) -> Option<Format> {
    let args: Vec<String> = args
        .iter()
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    let from_flag = args.iter().enumerate().find_map(|(i, a)| {
        if a == "--format" {
            args.get(i + 1).cloned()
        } else {
            a.strip_prefix("--format=").map(str::to_string)
        }
    });
    from_flag
        .or_else(|| env_var("AGENTS_FORMAT"))
        .and_then(|f| f.parse().ok())
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
    path.join(" ")
}

/// Runs a parsed command line; returns the exit code.
pub fn run(cli: Cli, repeat_args: Vec<String>, terminal: Terminal, started: Instant) -> u8 {
    if let Some(shell) = cli.install_completion.as_deref() {
        return finish(
            completion::install(shell),
            "install-completion",
            Format::Plain,
            &terminal,
            started,
        );
    }
    if let Some(shell) = cli.show_completion.as_deref() {
        return match completion::show(shell, &mut std::io::stdout()) {
            Ok(()) => 0,
            Err(e) => finish(Err(e), "show-completion", Format::Plain, &terminal, started),
        };
    }
    let Some(command) = cli.command else {
        let _ = Cli::command().print_help();
        return 0;
    };
    let command_path = command.path();
    let paths = match Paths::resolve(cli.data_dir, cli.config_path) {
        Ok(p) => p,
        Err(e) => {
            return finish(
                Err(e.into()),
                &command_path,
                Format::Plain,
                &terminal,
                started,
            );
        }
    };
    let config = Config::load(&paths.config_path).map_err(CliError::from);
    let env_format = match env_var("AGENTS_FORMAT").map(|v| v.parse::<Format>()) {
        Some(Ok(f)) => Some(f),
        Some(Err(msg)) => {
            let err = CliError::invalid_input(format!("AGENTS_FORMAT: {msg}"))
                .hint("unset AGENTS_FORMAT or fix its value");
            let format = resolve_format(cli.format, None, None, terminal.stdout_tty);
            return finish(Err(err), &command_path, format, &terminal, started);
        }
        None => None,
    };
    let config_format = config
        .as_ref()
        .ok()
        .and_then(|c| c.file.format.as_deref())
        .and_then(|f| f.parse().ok());
    let format = resolve_format(cli.format, env_format, config_format, terminal.stdout_tty);
    let ctx = Context {
        paths,
        config,
        flags: FlagValues {
            format: cli.format.map(|f| f.as_str().to_string()),
            verbose: cli.verbose,
        },
        format,
        terminal,
        repeat_args,
    };
    // Logging starts for every command but `init`, which must not touch the data directory
    // before it is confirmed; it starts logging itself afterwards.
    let _guard = match command {
        Command::Init { .. } => None,
        _ => start_logging(&ctx),
    };
    tracing::debug!(command = %command_path, format = %format, "command started");
    let result = dispatch(command, &ctx);
    finish(result, &command_path, format, &ctx.terminal, started)
}

/// Starts file logging for a context.
pub fn start_logging(ctx: &Context) -> Option<tracing_appender::non_blocking::WorkerGuard> {
    let level = ctx
        .config
        .as_ref()
        .ok()
        .and_then(|c| c.file.log_level.clone())
        .unwrap_or_else(|| "info".into());
    crate::logging::init(
        &ctx.paths.logs_dir(),
        env_var("AGENTS_LOG").as_deref(),
        &level,
        ctx.flags.verbose,
    )
}

fn dispatch(command: Command, ctx: &Context) -> Result<Report, CliError> {
    // Every command creates the data directory and database on first use; `init` does it
    // only after its confirmation, and `diagnostics` reports a broken database as a finding.
    if !matches!(command, Command::Init { .. } | Command::Diagnostics) {
        ctx.store()?;
    }
    match command {
        Command::Version => system::version(ctx),
        Command::Info => system::info(ctx),
        Command::Init { yes } => system::init(ctx, yes),
        Command::Config(c) => config::run(c, ctx),
        Command::Diagnostics => system::diagnostics(ctx),
        Command::Plan(c) => plan_sandbox::run(c, ctx),
        Command::Tool(c) => tool::run(c, ctx),
    }
}

/// Renders the result and returns the exit code; a closed stdout exits quietly.
fn finish(
    result: Result<Report, CliError>,
    command: &str,
    format: Format,
    terminal: &Terminal,
    started: Instant,
) -> u8 {
    let outcome = match result {
        Ok(report) => Outcome::Done(report),
        Err(e) => {
            tracing::warn!(code = e.body.code, message = %e.body.message, "command failed");
            Outcome::Failed {
                command: command.to_string(),
                error: *e.body,
                data: e.data,
            }
        }
    };
    let exit = outcome.exit().code();
    let mut stdout = std::io::stdout().lock();
    match output::emit(&outcome, format, terminal, started.elapsed(), &mut stdout) {
        Ok(()) => exit,
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => exit,
        Err(_) => {
            let _ = writeln!(std::io::stderr(), "error: cannot write to stdout");
            Exit::Failure.code()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_command_line_definition_is_consistent() {
        Cli::command().debug_assert();
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
