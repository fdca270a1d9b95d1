//! Spinners and progress bars for `rich` output, drawn on stderr only when stderr is a
//! terminal; in every other case they draw nothing.

use std::time::Duration;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

use super::format::{Format, Terminal};

/// A spinner for work of unknown length. Dropping it clears it.
#[derive(Debug)]
pub struct Spinner {
    bar: Option<ProgressBar>,
}

impl Spinner {
    /// Starts a spinner with `message` when the format is `rich` and stderr is a terminal.
    pub fn start(format: Format, terminal: &Terminal, message: &str) -> Self {
        if format != Format::Rich || !terminal.stderr_tty {
            return Self { bar: None };
        }
        let bar = ProgressBar::with_draw_target(None, ProgressDrawTarget::stderr());
        bar.set_style(
            ProgressStyle::with_template("{spinner} {msg} {elapsed}")
                .unwrap_or_else(|_| ProgressStyle::default_spinner()),
        );
        bar.set_message(message.to_string());
        bar.enable_steady_tick(Duration::from_millis(80));
        Self { bar: Some(bar) }
    }

    /// Changes the message.
    pub fn set_message(&self, message: &str) {
        if let Some(bar) = &self.bar {
            bar.set_message(message.to_string());
        }
    }

    /// Whether anything is being drawn.
    pub fn is_visible(&self) -> bool {
        self.bar.is_some()
    }
}

impl Drop for Spinner {
    fn drop(&mut self) {
        if let Some(bar) = &self.bar {
            bar.finish_and_clear();
        }
    }
}

/// A progress bar for work of known length (`Indexing local/api  340/1200`), drawn like
/// [`Spinner`] only for `rich` on a terminal. Dropping it clears it.
#[derive(Debug)]
pub struct Bar {
    bar: Option<ProgressBar>,
}

impl Bar {
    /// Starts a bar with `message` when the format is `rich` and stderr is a terminal.
    pub fn start(format: Format, terminal: &Terminal, message: &str) -> Self {
        if format != Format::Rich || !terminal.stderr_tty {
            return Self { bar: None };
        }
        let bar = ProgressBar::with_draw_target(Some(0), ProgressDrawTarget::stderr());
        bar.set_style(
            ProgressStyle::with_template("{msg} [{bar:30}] {pos}/{len} {elapsed}")
                .unwrap_or_else(|_| ProgressStyle::default_bar()),
        );
        bar.set_message(message.to_string());
        Self { bar: Some(bar) }
    }

    /// Sets how far the work is.
    pub fn set(&self, done: u64, total: u64) {
        if let Some(bar) = &self.bar {
            bar.set_length(total);
            bar.set_position(done);
        }
    }
}

impl Drop for Bar {
    fn drop(&mut self) {
        if let Some(bar) = &self.bar {
            bar.finish_and_clear();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spinners_draw_only_for_rich_on_a_terminal() {
        let tty = Terminal {
            stdout_tty: true,
            stderr_tty: true,
            stdin_tty: true,
            no_color: false,
        };
        let pipe = Terminal {
            stderr_tty: false,
            ..tty
        };
        assert!(!Spinner::start(Format::Table, &tty, "x").is_visible());
        assert!(!Spinner::start(Format::Rich, &pipe, "x").is_visible());
        assert!(Spinner::start(Format::Rich, &tty, "x").is_visible());
    }
}
