//! Shell completion: `--show-completion [SHELL]` prints the script, `--install-completion
//! [SHELL]` writes it where the shell looks for user completions.

use std::io::Write;
use std::path::PathBuf;

use clap::CommandFactory;
use clap_complete::Shell;

use super::{Cli, CliError};
use crate::output::{Element, Report};

/// The binary name the user invoked (`agents` or `cleveragents`).
fn bin_name() -> String {
    std::env::args_os()
        .next()
        .and_then(|a| {
            PathBuf::from(a)
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
        })
        .filter(|n| n == "cleveragents")
        .unwrap_or_else(|| "agents".to_string())
}

/// Parses a shell name, or takes it from `$SHELL` when `name` is empty.
fn shell(name: &str) -> Result<Shell, CliError> {
    let name = if name.is_empty() {
        std::env::var("SHELL")
            .ok()
            .and_then(|s| s.rsplit('/').next().map(str::to_string))
            .unwrap_or_default()
    } else {
        name.to_string()
    };
    name.parse::<Shell>().map_err(|_| {
        CliError::invalid_input(format!("unsupported shell `{name}`"))
            .hint("name one of: bash, zsh, fish, elvish, powershell (e.g. --show-completion bash)")
    })
}

/// Writes the completion script for `name` to `out`.
///
/// # Errors
/// `INVALID_INPUT` for an unknown shell.
pub fn show(name: &str, out: &mut dyn Write) -> Result<(), CliError> {
    let shell = shell(name)?;
    clap_complete::generate(shell, &mut Cli::command(), bin_name(), out);
    Ok(())
}

/// Installs the completion script in the shell's per-user completion directory.
///
/// # Errors
/// `INVALID_INPUT` for an unknown or unsupported shell; `IO_ERROR` when writing fails.
pub fn install(name: &str) -> Result<Report, CliError> {
    let shell = shell(name)?;
    let bin = bin_name();
    let home = directories::BaseDirs::new()
        .ok_or_else(|| CliError::new("ENVIRONMENT", "no home directory"))?;
    let path = match shell {
        Shell::Bash => home
            .data_local_dir()
            .join("bash-completion/completions")
            .join(&bin),
        Shell::Zsh => home.home_dir().join(".zfunc").join(format!("_{bin}")),
        Shell::Fish => home
            .config_dir()
            .join("fish/completions")
            .join(format!("{bin}.fish")),
        other => {
            return Err(CliError::invalid_input(format!(
                "--install-completion does not support {other}"
            ))
            .hint(format!(
                "print the script with --show-completion {other} and load it from your profile"
            )));
        }
    };
    let mut script = Vec::new();
    clap_complete::generate(shell, &mut Cli::command(), &bin, &mut script);
    let io = |e: std::io::Error| {
        CliError::new("IO_ERROR", format!("cannot write {}: {e}", path.display()))
    };
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(io)?;
    }
    std::fs::write(&path, script).map_err(io)?;
    let mut report = Report::ok(
        "install-completion",
        serde_json::json!({"shell": shell.to_string(), "path": path}),
        format!("Completion installed for {shell}"),
    )
    .with(Element::panel(
        "Completion",
        [
            ("Shell", shell.to_string()),
            ("File", path.display().to_string()),
        ],
    ));
    if shell == Shell::Zsh {
        report = report.with(Element::List {
            title: "Next".into(),
            items: vec![
                "add `fpath=(~/.zfunc $fpath); autoload -Uz compinit; compinit` to ~/.zshrc".into(),
            ],
        });
    }
    Ok(report)
}
