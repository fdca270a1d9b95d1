//! Shell completion: `--show-completion [SHELL]` prints the script, `--install-completion
//! [SHELL]` writes it where the shell looks for user completions.

use std::io::Write;

use clap::CommandFactory;
use clap_complete::Shell;

use super::{Cli, CliError, bin_name};
use crate::output::{Element, Report};

/// Parses a shell name, or takes it from `$SHELL` when `name` is empty.
fn shell(name: &str) -> Result<Shell, CliError> {
    let name = if name.is_empty() {
        let from_env = std::env::var("SHELL")
            .ok()
            .and_then(|s| s.rsplit('/').next().map(str::to_string));
        match from_env.filter(|s| !s.trim().is_empty()) {
            Some(s) => s,
            None => {
                return Err(
                    CliError::invalid_input("$SHELL is not set, so the shell is unknown").hint(
                        format!(
                            "name it: {} --show-completion bash (or zsh, fish, elvish, powershell)",
                            bin_name()
                        ),
                    ),
                );
            }
        }
    } else {
        name.to_string()
    };
    name.parse::<Shell>().map_err(|_| {
        CliError::invalid_input(format!("unsupported shell `{name}`"))
            .hint("name one of: bash, zsh, fish, elvish, powershell (e.g. --show-completion bash)")
    })
}

/// The completion script for a shell.
fn script(shell: Shell) -> Vec<u8> {
    let mut out = Vec::new();
    clap_complete::generate(
        shell,
        &mut Cli::command().name(bin_name()),
        bin_name(),
        &mut out,
    );
    out
}

/// Prints the script (`install` false; returns `Ok(None)`, also when the reader closed the
/// pipe early) or installs it (returns the report).
///
/// # Errors
/// `INVALID_INPUT` for an unknown or unsupported shell; `IO_ERROR` when writing fails.
pub fn show_or_install(install: bool, name: &str) -> Result<Option<Report>, CliError> {
    let shell = shell(name)?;
    if !install {
        let mut stdout = std::io::stdout().lock();
        return match stdout
            .write_all(&script(shell))
            .and_then(|()| stdout.flush())
        {
            Ok(()) => Ok(None),
            Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(None),
            Err(e) => Err(CliError::new(
                "IO_ERROR",
                format!("cannot write the completion script: {e}"),
            )),
        };
    }
    let bin = bin_name();
    let home = directories::BaseDirs::new()
        .ok_or_else(|| CliError::new("ENVIRONMENT", "no home directory"))?;
    let path = match shell {
        Shell::Bash => home
            .data_local_dir()
            .join("bash-completion/completions")
            .join(bin),
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
    let io = |e: std::io::Error| {
        CliError::new("IO_ERROR", format!("cannot write {}: {e}", path.display()))
    };
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(io)?;
    }
    std::fs::write(&path, script(shell)).map_err(io)?;
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
    Ok(Some(report))
}
