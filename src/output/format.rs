//! Output formats and how the one in force is chosen (spec section 26, "Format resolution").

use std::fmt;
use std::io::IsTerminal;
use std::str::FromStr;

/// The six output formats.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    /// Tables and panels with box drawing and colour, plus spinners and progress bars.
    Rich,
    /// The plain layout with ANSI colour.
    Color,
    /// Box-drawing panels and tables with colour, no animation.
    Table,
    /// ASCII only, no escape codes: safe for pipes and logs.
    Plain,
    /// One JSON document (the envelope).
    Json,
    /// One YAML document (the envelope).
    Yaml,
}

impl Format {
    /// The lowercase name.
    pub fn as_str(self) -> &'static str {
        match self {
            Format::Rich => "rich",
            Format::Color => "color",
            Format::Table => "table",
            Format::Plain => "plain",
            Format::Json => "json",
            Format::Yaml => "yaml",
        }
    }

    /// Whether this is json or yaml.
    pub fn is_structured(self) -> bool {
        matches!(self, Format::Json | Format::Yaml)
    }
}

impl fmt::Display for Format {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Format {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "rich" => Ok(Format::Rich),
            "color" => Ok(Format::Color),
            "table" => Ok(Format::Table),
            "plain" => Ok(Format::Plain),
            "json" => Ok(Format::Json),
            "yaml" => Ok(Format::Yaml),
            _ => Err(format!(
                "`{s}` is not a format; use one of rich, color, table, plain, json, yaml"
            )),
        }
    }
}

/// What the terminal around the process can do, detected once at start-up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Terminal {
    /// stdout is a terminal.
    pub stdout_tty: bool,
    /// stderr is a terminal.
    pub stderr_tty: bool,
    /// stdin is a terminal (prompts may read it).
    pub stdin_tty: bool,
    /// `NO_COLOR` is set (any value, even empty).
    pub no_color: bool,
}

impl Terminal {
    /// Detects the real process's terminal.
    pub fn detect() -> Self {
        Self {
            stdout_tty: std::io::stdout().is_terminal(),
            stderr_tty: std::io::stderr().is_terminal(),
            stdin_tty: std::io::stdin().is_terminal(),
            no_color: std::env::var_os("NO_COLOR").is_some(),
        }
    }
}

/// Chooses the format: `--format` > `AGENTS_FORMAT` > config `format` > `plain` when stdout is
/// not a terminal > `rich`. An explicit `rich` on a non-terminal renders as `table`.
pub fn resolve_format(
    flag: Option<Format>,
    env: Option<Format>,
    config: Option<Format>,
    stdout_tty: bool,
) -> Format {
    match flag.or(env).or(config) {
        Some(Format::Rich) if !stdout_tty => Format::Table,
        Some(explicit) => explicit,
        None if stdout_tty => Format::Rich,
        None => Format::Plain,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flag_beats_env_beats_config() {
        let r = |f, e, c| resolve_format(f, e, c, true);
        assert_eq!(
            r(Some(Format::Yaml), Some(Format::Json), Some(Format::Table)),
            Format::Yaml
        );
        assert_eq!(
            r(None, Some(Format::Json), Some(Format::Table)),
            Format::Json
        );
        assert_eq!(r(None, None, Some(Format::Table)), Format::Table);
        assert_eq!(r(None, None, None), Format::Rich);
    }

    #[test]
    fn non_terminals_get_plain_unless_asked_and_rich_becomes_table() {
        assert_eq!(resolve_format(None, None, None, false), Format::Plain);
        assert_eq!(
            resolve_format(Some(Format::Rich), None, None, false),
            Format::Table
        );
        assert_eq!(
            resolve_format(None, None, Some(Format::Rich), false),
            Format::Table
        );
        assert_eq!(
            resolve_format(None, None, Some(Format::Color), false),
            Format::Color
        );
    }

    #[test]
    fn names_round_trip() {
        for f in [
            Format::Rich,
            Format::Color,
            Format::Table,
            Format::Plain,
            Format::Json,
            Format::Yaml,
        ] {
            assert_eq!(f.as_str().parse::<Format>().unwrap(), f);
        }
        assert!("html".parse::<Format>().unwrap_err().contains("plain"));
    }
}
