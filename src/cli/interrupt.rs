//! Ctrl-C: exit code 130 and status `cancelled`.
//!
//! Outside a guarded section, Ctrl-C ends the process at once with exit code 130, as it always
//! did. Inside one (a prompt now; plan driving later), it only sets a flag that the code polls,
//! so the command can stop cleanly and still print its result.

use std::sync::Once;
use std::sync::atomic::{AtomicBool, Ordering};

use super::error::CliError;
use crate::output::Exit;

static INSTALL: Once = Once::new();
static GUARDED: AtomicBool = AtomicBool::new(false);
static INTERRUPTED: AtomicBool = AtomicBool::new(false);

/// Installs the Ctrl-C handler (once per process).
pub fn install() {
    INSTALL.call_once(|| {
        let _ = ctrlc::set_handler(|| {
            if GUARDED.load(Ordering::SeqCst) {
                INTERRUPTED.store(true, Ordering::SeqCst);
            } else {
                std::process::exit(i32::from(Exit::Interrupted.code()));
            }
        });
    });
}

/// While alive, Ctrl-C sets a flag instead of ending the process.
#[derive(Debug)]
pub struct Guard(());

impl Guard {
    /// Enters a guarded section.
    pub fn new() -> Self {
        install();
        INTERRUPTED.store(false, Ordering::SeqCst);
        GUARDED.store(true, Ordering::SeqCst);
        Guard(())
    }

    /// Whether Ctrl-C was pressed since the section began.
    pub fn interrupted(&self) -> bool {
        INTERRUPTED.load(Ordering::SeqCst)
    }
}

impl Default for Guard {
    fn default() -> Self {
        Self::new()
    }
}

impl Drop for Guard {
    fn drop(&mut self) {
        GUARDED.store(false, Ordering::SeqCst);
    }
}

/// The error for an interrupted command: exit 130, status `cancelled`.
pub fn cancelled() -> CliError {
    CliError::interrupted()
}
