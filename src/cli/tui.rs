//! `agents tui [--plan ID] [--focus PANE] [--theme NAME]`, also what `agents` with no
//! subcommand starts when stdin and stdout are terminals.

use std::path::Path;

use cleveragents_ui::{Keymap, Pane, Theme};

use super::{CliError, Context};
use crate::output::Report;
use crate::tui::{self, Bridge, Connection, LaunchOptions};

/// Options of `agents tui`.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct TuiArgs {
    /// Select this plan (id or unique prefix of at least 4 characters)
    #[arg(long, value_name = "ID")]
    pub plan: Option<String>,
    /// Focus this pane first
    #[arg(long, value_enum, value_name = "PANE")]
    pub focus: Option<FocusArg>,
    /// Theme: dark, light, high-contrast, or NAME.toml in the config directory's themes/
    #[arg(long, value_name = "NAME")]
    pub theme: Option<String>,
}

impl TuiArgs {
    /// Whether the TUI can attach to a server (`--server`): it reaches the engine only
    /// through the client.
    pub fn served_remotely(&self) -> bool {
        true
    }
}

/// Panes that `--focus` accepts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum FocusArg {
    /// The plans list.
    Plans,
    /// The decision tree.
    Tree,
    /// The diff.
    Diff,
    /// The approval queue.
    Approvals,
}

impl From<FocusArg> for Pane {
    fn from(f: FocusArg) -> Self {
        match f {
            FocusArg::Plans => Pane::Plans,
            FocusArg::Tree => Pane::Tree,
            FocusArg::Diff => Pane::Diff,
            FocusArg::Approvals => Pane::Approvals,
        }
    }
}

/// Finds a theme: a compiled-in preset, else `<config dir>/themes/NAME.toml`. `NO_COLOR`
/// replaces any theme with the monochrome one.
///
/// # Errors
/// `NOT_FOUND` for an unknown name (listing the presets), `INVALID_INPUT` for a theme file
/// with errors (naming the file and the slot).
pub fn load_theme(
    name: Option<&str>,
    config_dir: &Path,
    no_color: bool,
) -> Result<Theme, CliError> {
    if no_color {
        return Ok(Theme::no_color());
    }
    let Some(name) = name else {
        return Ok(Theme::default());
    };
    if let Some(theme) = Theme::preset(name) {
        return Ok(theme);
    }
    let file = config_dir.join("themes").join(format!("{name}.toml"));
    let text = std::fs::read_to_string(&file).map_err(|_| {
        CliError::new("NOT_FOUND", format!("no theme named `{name}`"))
            .detail(format!(
                "not a built-in theme, and {} does not exist",
                file.display()
            ))
            .hint(format!("use one of: {}", Theme::PRESETS.join(", ")))
    })?;
    Theme::from_toml_str(&text).map_err(|e| {
        CliError::invalid_input(format!("theme file {} is invalid: {e}", file.display()))
            .hint("fix the slot named above, or start from `extends = \"dark\"`")
    })
}

/// The keymap: the defaults, changed by `<config dir>/keys.toml` when it exists (format in
/// docs/tui.md).
///
/// # Errors
/// `INVALID_INPUT` naming the file and the table, action or key at fault.
pub fn load_keymap(config_dir: &Path) -> Result<Keymap, CliError> {
    let file = config_dir.join(KEYMAP_FILE);
    let text = match std::fs::read_to_string(&file) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Keymap::default()),
        Err(e) => {
            return Err(CliError::invalid_input(format!(
                "cannot read keymap file {}: {e}",
                file.display()
            )));
        }
    };
    Keymap::from_toml_str(&text).map_err(|e| {
        CliError::invalid_input(format!("keymap file {} is invalid: {e}", file.display())).hint(
            "fix the entry named above, or remove the file to use the default keys (docs/tui.md)",
        )
    })
}

/// The keymap file's name in the config directory.
pub const KEYMAP_FILE: &str = "keys.toml";

/// Runs the TUI. Refuses without a terminal on both stdin and stdout.
///
/// # Errors
/// `INVALID_INPUT` without a terminal; theme, plan-id and terminal errors.
pub fn run(args: TuiArgs, ctx: &Context) -> Result<Report, CliError> {
    if !(ctx.terminal.stdout_tty && ctx.terminal.stdin_tty) {
        return Err(CliError::invalid_input("the TUI needs a terminal on stdin and stdout")
            .hint("run it in an interactive terminal, or use headless commands such as `agents plan list`"));
    }
    let theme = load_theme(
        args.theme.as_deref(),
        ctx.paths.config_dir(),
        ctx.terminal.no_color,
    )?;
    let keymap = load_keymap(ctx.paths.config_dir())?;
    let connection = match ctx.server {
        Some(_) => Connection::remote(ctx.client()?, ctx.client()?),
        // Operations run in this process; an unusable config file leaves the TUI read-only
        // (the headless commands name the file's error).
        None => Connection::in_process(ctx.registry_engine(), ctx.config().is_ok()),
    };
    let plan_id = match args.plan.as_deref() {
        Some(input) => Some(connection.client.resolve_plan(input)?.to_string()),
        None => None,
    };
    // While the TUI runs in process, edits keep the code indexes current (dropped when it
    // ends); a server keeps its own. Following a large work tree walks its directories once,
    // so the watchers start beside the first frame rather than before it.
    let _watchers = match ctx.server {
        Some(_) => None,
        None => {
            let paths = ctx.paths.clone();
            std::thread::Builder::new()
                .name("index-watch-start".into())
                .spawn(move || cleveragents_engine::api::session_views::watch_code_indexes(&paths))
                .ok()
        }
    };
    let bridge = Bridge::new(connection, super::global_setting(ctx, "automation-profile"))?;
    tui::run(
        bridge,
        &theme,
        keymap,
        LaunchOptions {
            plan_id,
            focus: args.focus.map(Pane::from),
        },
    )
    .map_err(|e| match e {
        tui::TuiError::Api(e) => CliError::from(e),
        e => CliError::new("TERMINAL", e.to_string()),
    })?;
    Ok(Report::ok("tui", serde_json::json!({}), "TUI closed"))
}
