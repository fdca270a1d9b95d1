//! A message to read and close (engine errors, notes).

use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::text::Line;

use super::{Outcome, footer, render_box};
use crate::msg::Key;
use crate::theme::{Slot, Theme};

pub(super) fn handle_key(key: Key) -> Outcome {
    match key {
        Key::Esc | Key::Enter | Key::Char('q') => Outcome::Close,
        _ => Outcome::Stay,
    }
}

pub(super) fn render(
    title: &str,
    body: &str,
    is_error: bool,
    theme: &Theme,
    area: Rect,
    buf: &mut Buffer,
) {
    let style = theme.style(if is_error {
        Slot::StatusError
    } else {
        Slot::Text
    });
    let mut lines: Vec<Line> = body
        .lines()
        .map(|l| Line::styled(l.to_owned(), style))
        .collect();
    lines.push(Line::default());
    lines.push(footer(&[("Esc", "close")], theme));
    render_box(title, lines, theme, is_error, area, buf);
}
