//! The CLI reference in Markdown (`docs/cli.md`), generated from the clap definition so that
//! it cannot drift: a test regenerates it and compares.

use std::fmt::Write;

/// The whole reference: global options, then every command depth-first in definition order.
pub fn markdown() -> String {
    let mut root = super::Cli::command_for_reference();
    // Building propagates bin names, so each subcommand's usage reads `agents plan use ...`.
    root.build();
    let mut out = String::new();
    out.push_str("# CLI reference\n\n");
    out.push_str(
        "Generated from the command-line definition; do not edit by hand. Regenerate with\n\
         `UPDATE_CLI_DOCS=1 cargo test --test all cli::reference`.\n\n",
    );
    out.push_str("Every command also takes the global options below and `-h`/`--help`.\n\n");
    out.push_str("## Global options\n\n");
    options(&mut out, &root, true);
    out.push_str("## Commands\n\n");
    for sub in visible(&root) {
        let _ = writeln!(
            out,
            "- [`agents {}`](#agents-{}) — {}",
            sub.get_name(),
            sub.get_name(),
            about(sub)
        );
    }
    out.push('\n');
    for sub in visible(&root) {
        command(&mut out, sub, &["agents"]);
    }
    out
}

fn visible(cmd: &clap::Command) -> impl Iterator<Item = &clap::Command> {
    cmd.get_subcommands()
        .filter(|s| !s.is_hide_set() && s.get_name() != "help")
}

fn about(cmd: &clap::Command) -> String {
    cmd.get_about()
        .map(|a| a.to_string().replace('\n', " "))
        .unwrap_or_default()
}

fn command(out: &mut String, cmd: &clap::Command, parents: &[&str]) {
    let mut path: Vec<&str> = parents.to_vec();
    path.push(cmd.get_name());
    let title = path.join(" ");
    let _ = writeln!(out, "## {title}\n");
    if let Some(long) = cmd.get_long_about().or(cmd.get_about()) {
        let _ = writeln!(out, "{}\n", long.to_string().trim());
    }
    let usage = cmd.clone().render_usage().to_string();
    let usage = usage.trim_start_matches("Usage: ").to_string();
    let _ = writeln!(out, "```text\n{}\n```\n", usage.trim());
    let subs: Vec<&clap::Command> = visible(cmd).collect();
    if !subs.is_empty() {
        out.push_str("| subcommand | what it does |\n|---|---|\n");
        for s in &subs {
            let _ = writeln!(out, "| `{}` | {} |", s.get_name(), escape(&about(s)));
        }
        out.push('\n');
    }
    options(out, cmd, false);
    for s in subs {
        command(out, s, &path);
    }
}

fn escape(s: &str) -> String {
    s.replace('|', "\\|")
}

/// The arguments and options of `cmd` as a table: globals only (`globals`) or its own.
fn options(out: &mut String, cmd: &clap::Command, globals: bool) {
    let args: Vec<&clap::Arg> = cmd
        .get_arguments()
        .filter(|a| !a.is_hide_set())
        .filter(|a| !matches!(a.get_id().as_str(), "help" | "version"))
        .filter(|a| a.is_global_set() == globals)
        .collect();
    if args.is_empty() {
        return;
    }
    out.push_str("| argument | description |\n|---|---|\n");
    for a in args {
        let value = if !a.is_positional() && a.get_action().takes_values() {
            a.get_value_names()
                .and_then(|v| v.first().map(|s| format!(" <{s}>")))
                .unwrap_or_default()
        } else {
            String::new()
        };
        let name = match (a.get_short(), a.get_long()) {
            _ if a.is_positional() => {
                let v = a
                    .get_value_names()
                    .and_then(|v| v.first().map(|s| s.to_string()))
                    .unwrap_or_else(|| a.get_id().as_str().to_uppercase());
                if a.is_required_set() {
                    format!("`<{v}>`")
                } else {
                    format!("`[{v}]`")
                }
            }
            (Some(s), Some(l)) => format!("`-{s}`, `--{l}{value}`"),
            (None, Some(l)) => format!("`--{l}{value}`"),
            (Some(s), None) => format!("`-{s}{value}`"),
            (None, None) => format!("`{}`", a.get_id()),
        };
        let mut help = a.get_help().map(|h| h.to_string()).unwrap_or_default();
        let values: Vec<String> = a
            .get_possible_values()
            .iter()
            .filter(|v| !v.is_hide_set())
            .map(|v| format!("`{}`", v.get_name()))
            .collect();
        if !values.is_empty() && a.get_action().takes_values() {
            let _ = write!(help, " (one of {})", values.join(", "));
        }
        let defaults: Vec<String> = a
            .get_default_values()
            .iter()
            .map(|v| v.to_string_lossy().into_owned())
            .collect();
        if !defaults.is_empty() {
            let _ = write!(help, " [default: {}]", defaults.join(", "));
        }
        let _ = writeln!(out, "| {name} | {} |", escape(help.trim()));
    }
    out.push('\n');
}
