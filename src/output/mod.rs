//! The output framework (spec section 26): one structured result per command, rendered six ways.
//!
//! A command produces a [`Report`] (typed `data` for json/yaml, view [`Element`]s for the human
//! formats, messages and one final status line) or an [`ErrorBody`]. [`emit`] renders it in the
//! resolved [`Format`]:
//!
//! - `plain`: ASCII layout, markers and tree guides; no escape codes.
//! - `color`: the plain layout with ANSI colour.
//! - `table`: box-drawing panels and tables, with colour.
//! - `rich`: `table` plus spinners and progress bars on stderr during long work.
//! - `json` / `yaml`: the envelope `{command, status, exit_code, data, timing: {duration_ms},
//!   messages}` and, on failure, `error: {code, message, detail, suggestions}`.
//!
//! Data and the final status line go to stdout; progress, prompts and diagnostics go to stderr.

pub mod format;
pub mod human;
pub mod progress;
pub mod report;
pub mod structured;

pub use format::{Format, Terminal, resolve_format};
pub use report::{
    Align, Cell, Column, Element, ErrorBody, Exit, Level, Message, Payload, Report, Tone, TreeNode,
};

use std::io::Write;
use std::time::Duration;

/// What a command produced: a report, or a failure (which may carry data, e.g. the pending
/// approval when exiting 3).
#[derive(Debug, Clone)]
pub enum Outcome {
    /// The command ran; its report.
    Done(Report),
    /// The command failed or stopped for a human.
    Failed {
        /// Command path, e.g. `config get`.
        command: String,
        /// The error.
        error: ErrorBody,
        /// Data to include in structured output (e.g. `{"approval": ...}` for exit 3).
        data: serde_json::Value,
    },
}

impl Outcome {
    /// The process exit code for this outcome.
    pub fn exit(&self) -> Exit {
        match self {
            Outcome::Done(r) => r.exit,
            Outcome::Failed { error, .. } => error.exit,
        }
    }
}

/// Renders `outcome` in `format` to `out`. `elapsed` becomes `timing.duration_ms`.
///
/// # Errors
/// I/O errors from `out` (a closed pipe is the caller's to treat as a quiet exit).
pub fn emit(
    outcome: &Outcome,
    format: Format,
    terminal: &Terminal,
    elapsed: Duration,
    out: &mut dyn Write,
) -> std::io::Result<()> {
    let text = match (format, outcome) {
        (
            Format::Plain,
            Outcome::Done(Report {
                plain_only: Some(line),
                ..
            }),
        ) => format!("{line}\n"),
        (
            Format::Json,
            Outcome::Done(Report {
                announced: true, ..
            }),
        ) => return Ok(()),
        (format, _) => render(outcome, format, terminal, elapsed, out)?,
    };
    out.write_all(text.as_bytes())?;
    out.flush()
}

/// The text of `outcome` in `format` (json and the human formats are written to `out` straight
/// away: empty text).
fn render(
    outcome: &Outcome,
    format: Format,
    terminal: &Terminal,
    elapsed: Duration,
    out: &mut dyn Write,
) -> std::io::Result<String> {
    Ok(match format {
        Format::Json => {
            structured::write_json(outcome, elapsed, out)?;
            String::new()
        }
        Format::Yaml => structured::yaml(outcome, elapsed),
        human_format => {
            human::write(
                outcome,
                human::Style::for_format(human_format, terminal),
                out,
            )?;
            String::new()
        }
    })
}

/// Lets a large output reach a program reading it through a pipe in fewer, larger pieces:
/// where `out` is a pipe, it is asked to hold 1 MiB rather than Linux's default 64 KiB, so
/// the writer and the reader take turns 16 times less often (a 1,000-file `plan diff` in
/// json is 15 MB). Best effort: a pipe that cannot grow stays as it is.
pub fn widen_pipe(out: &impl std::os::fd::AsFd) {
    const SIZE: usize = 1 << 20;
    let is_pipe = rustix::fs::fstat(out).is_ok_and(|st| {
        rustix::fs::FileType::from_raw_mode(st.st_mode) == rustix::fs::FileType::Fifo
    });
    if is_pipe {
        let _ = rustix::pipe::fcntl_setpipe_size(out, SIZE);
    }
}

/// Writes one JSON Lines record (compact JSON, newline) to stdout and flushes it: the events
/// of a `--stream` run as they happen.
///
/// # Errors
/// I/O errors (a closed pipe included).
pub fn stream_line(value: &impl serde::Serialize) -> std::io::Result<()> {
    let mut line = serde_json::to_string(value).map_err(std::io::Error::other)?;
    line.push('\n');
    let mut out = std::io::stdout().lock();
    out.write_all(line.as_bytes())?;
    out.flush()
}

/// Renders `outcome` as a one-line JSON envelope (the last line of a `--stream` run).
///
/// # Errors
/// I/O errors from `out`.
pub fn emit_line(outcome: &Outcome, elapsed: Duration, out: &mut dyn Write) -> std::io::Result<()> {
    out.write_all(structured::json_line(outcome, elapsed).as_bytes())?;
    out.flush()
}
