//! A yes/no question.

use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::text::Line;

use super::{Outcome, footer, render_box};
use crate::msg::{Cmd, Key};
use crate::theme::{Slot, Theme};

pub(super) fn handle_key(on_yes: &Cmd, key: Key) -> Outcome {
    match key {
        Key::Char('y') | Key::Enter => Outcome::Submit(on_yes.clone()),
        Key::Char('n') | Key::Esc => Outcome::Close,
        _ => Outcome::Stay,
    }
}

pub(super) fn render(title: &str, body: &str, theme: &Theme, area: Rect, buf: &mut Buffer) {
    let mut lines: Vec<Line> = body
        .lines()
        .map(|l| Line::styled(l.to_owned(), theme.style(Slot::Text)))
        .collect();
    lines.push(Line::default());
    lines.push(footer(&[("y/Enter", "yes"), ("n/Esc", "no")], theme));
    render_box(title, lines, theme, false, area, buf);
}
