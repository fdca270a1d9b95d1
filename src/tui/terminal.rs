//! The terminal while the TUI runs: it is taken over (raw mode, alternate screen, mouse
//! capture) and restored on return, on error and on panic; the frame loop applies the
//! bridge's messages and the keys, and draws only when something changed.

use std::time::{Duration, Instant};

use cleveragents_ui::{App, Cmd, Key, Keymap, Mouse, Msg, Theme};
use ratatui::crossterm::event::{self, Event};

use super::bridge::Bridge;
use super::state::POLL_INTERVAL;
use super::{LaunchOptions, TuiError};

/// How long quitting waits for the operations this TUI runs to stop.
pub const QUIT_PATIENCE: Duration = Duration::from_secs(5);

/// How soon the loop looks again while background work is under way.
const BUSY_POLL: Duration = Duration::from_millis(40);

/// Runs the full-screen TUI on `bridge` until the user quits. The terminal is restored on
/// return, on error and on panic (ratatui's panic hook restores it before the panic message
/// prints; mouse capture is turned off first).
///
/// # Errors
/// [`TuiError`] for terminal failures, or when the engine cannot be asked.
pub fn run(
    bridge: Bridge,
    theme: &Theme,
    keymap: Keymap,
    options: LaunchOptions,
) -> Result<(), TuiError> {
    use ratatui::crossterm::event::{DisableMouseCapture, EnableMouseCapture};
    let mut terminal = ratatui::try_init()?;
    let previous = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let _ = ratatui::crossterm::execute!(std::io::stdout(), DisableMouseCapture);
        previous(info);
    }));
    let _ = ratatui::crossterm::execute!(std::io::stdout(), EnableMouseCapture);
    let result = event_loop(&mut terminal, bridge, theme, keymap, options);
    let _ = ratatui::crossterm::execute!(std::io::stdout(), DisableMouseCapture);
    ratatui::restore();
    result
}

fn event_loop(
    terminal: &mut ratatui::DefaultTerminal,
    mut bridge: Bridge,
    theme: &Theme,
    keymap: Keymap,
    options: LaunchOptions,
) -> Result<(), TuiError> {
    let mut app = App::with_keymap(keymap);
    let highlighter = cleveragents_ui::highlight::Worker::spawn();
    let mut highlight_until: Option<Instant> = None;
    let size = terminal.size()?;
    let mut pending: Vec<Msg> = vec![Msg::Resize {
        width: size.width,
        height: size.height,
    }];
    if let Some(pane) = options.focus {
        pending.push(Msg::Focus(pane));
    }
    if let Some(id) = options.plan_id {
        pending.push(Msg::SelectPlan(id));
    }
    let mut next_poll = Instant::now();
    let mut dirty = true;
    loop {
        if Instant::now() >= next_poll {
            pending.extend(bridge.refresh()?);
            next_poll = Instant::now() + POLL_INTERVAL;
        }
        pending.extend(bridge.background());
        let highlighted: Vec<Msg> = highlighter
            .ready()
            .into_iter()
            .map(Msg::Highlighted)
            .collect();
        if !highlighted.is_empty() {
            highlight_until = None;
        }
        pending.extend(highlighted);
        dirty |= !pending.is_empty();
        // Apply every message, and every message the resulting commands produce.
        while !pending.is_empty() {
            for msg in std::mem::take(&mut pending) {
                for cmd in app.update(msg) {
                    if cmd == Cmd::Quit {
                        bridge.shutdown(QUIT_PATIENCE);
                        return Ok(());
                    }
                    pending.extend(bridge.handle(cmd));
                }
            }
        }
        if let Some(request) = app.take_highlight_request(theme.syntax()) {
            highlighter.request(request);
            highlight_until = Some(Instant::now() + Duration::from_secs(2));
        }
        // Draw only when something changed: an idle TUI does no work between polls.
        if dirty {
            terminal.draw(|frame| {
                let area = frame.area();
                cleveragents_ui::render(&app, theme, area, frame.buffer_mut());
            })?;
            dirty = false;
        }
        let mut wait = next_poll.saturating_duration_since(Instant::now());
        let highlighting = highlight_until.is_some_and(|t| Instant::now() < t);
        if bridge.is_busy() || highlighting {
            wait = wait.min(BUSY_POLL);
        }
        if event::poll(wait)? {
            match event::read()? {
                Event::Key(key) => pending.extend(Key::from_crossterm(key).map(Msg::Key)),
                Event::Mouse(mouse) => pending.extend(Mouse::from_crossterm(mouse).map(Msg::Mouse)),
                Event::Resize(width, height) => pending.push(Msg::Resize { width, height }),
                _ => {}
            }
        }
    }
}
