//! The CleverAgents terminal user interface.
//!
//! This crate knows nothing about the engine. It renders its own view models
//! ([`model::PlanRow`], [`model::DecisionNode`], [`model::DiffView`], [`model::ApprovalItem`]) and
//! speaks a small protocol: [`Msg`] in (key presses and data updates), [`Cmd`] out (what the
//! user asked the engine to do). The root package's `tui_bridge` maps engine events to `Msg` and
//! `Cmd` to engine operations, and owns the terminal.
//!
//! Both halves are pure: [`App::update`] changes the state and returns commands, and [`render()`]
//! draws a state into a buffer. A frame loop is therefore:
//!
//! ```
//! use cleveragents_ui::{App, Cmd, Key, Msg, Theme, render};
//! use ratatui::{buffer::Buffer, layout::Rect};
//!
//! let mut app = App::new();
//! let theme = Theme::default();
//! let cmds = app.update(Msg::Key(Key::Char('q')));
//! assert_eq!(cmds, [Cmd::Quit]);
//!
//! let area = Rect::new(0, 0, 80, 24);
//! let mut buf = Buffer::empty(area);
//! render(&app, &theme, area, &mut buf);
//! ```

pub mod app;
pub mod highlight;
pub mod keymap;
pub mod model;
pub mod msg;
pub mod overlay;
pub mod panes;
pub mod render;
pub mod theme;

#[doc(hidden)]
pub mod fixtures;

pub use app::App;
pub use keymap::{Keymap, KeymapError};
pub use msg::{Cmd, Key, Mouse, Msg};
pub use panes::Pane;
pub use render::render;
pub use theme::{Slot, Theme, ThemeError};
