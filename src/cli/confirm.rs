//! Confirmations: `<Verb> <target>? [y/N]:` on stderr, skipped by `--yes`.
//!
//! Nothing reads stdin unless it is a terminal: without one (and without `--yes`) the command
//! stops at once with exit 3 and names the command that answers.

use std::io::{BufRead, Write};

use serde_json::json;

use super::error::CliError;
use crate::output::Terminal;

/// Asks `question` (e.g. `Reset /data?`) unless `yes`. `answer_with` is the full command that
/// proceeds without asking (shown when no terminal is attached).
///
/// # Errors
/// `NEEDS_APPROVAL` (exit 3) without a terminal; `ABORTED` (exit 1) when the user declines.
pub fn confirm(
    question: &str,
    yes: bool,
    terminal: &Terminal,
    answer_with: &str,
) -> Result<(), CliError> {
    if yes {
        return Ok(());
    }
    if !terminal.stdin_tty {
        return Err(CliError::new("NEEDS_APPROVAL", format!("confirmation needed: {question}"))
            .detail("no terminal is attached to answer the prompt, and --yes was not given")
            .hint(answer_with.to_string())
            .data(json!({
                "approval": {"kind": "confirmation", "question": question, "answer_with": answer_with}
            })));
    }
    let mut stderr = std::io::stderr();
    let _ = write!(stderr, "{question} [y/N]: ");
    let _ = stderr.flush();
    // Read on a helper thread so that Ctrl-C can end the prompt cleanly (exit 130).
    let guard = super::interrupt::Guard::new();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut line = String::new();
        let result = std::io::stdin().lock().read_line(&mut line).map(|_| line);
        let _ = tx.send(result);
    });
    let answer = loop {
        if guard.interrupted() {
            let _ = writeln!(stderr);
            return Err(super::interrupt::cancelled());
        }
        match rx.recv_timeout(std::time::Duration::from_millis(50)) {
            Ok(result) => {
                break result.map_err(|e| {
                    CliError::new("IO_ERROR", format!("cannot read the answer: {e}"))
                })?;
            }
            Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {}
            Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => break String::new(),
        }
    };
    if answer.is_empty() {
        // End of input (Ctrl-D): end the prompt line so that what follows starts on its own.
        let _ = writeln!(stderr);
    }
    match answer.trim().to_ascii_lowercase().as_str() {
        "y" | "yes" => Ok(()),
        _ => Err(CliError::new(
            "ABORTED",
            "nothing was changed: the confirmation was declined",
        )),
    }
}
