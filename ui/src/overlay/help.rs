//! The list of keys.

use ratatui::buffer::Buffer;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Clear, Paragraph, Widget};

use super::{Outcome, centered, footer, frame};
use crate::keymap::{self, Keymap, Scope};
use crate::msg::Key;
use crate::theme::{Slot, Theme};

pub(super) fn handle_key(key: Key) -> Outcome {
    match key {
        Key::Esc | Key::Char('?' | 'q') => Outcome::Close,
        _ => Outcome::Stay,
    }
}

fn help_column<'a>(keymap: &Keymap, scopes: &[Scope], theme: &Theme) -> Vec<Line<'a>> {
    let mut lines = Vec::new();
    let width = scopes
        .iter()
        .flat_map(|s| keymap.bindings_for(*s))
        .map(|b| Line::raw(keymap::keys_label(b)).width())
        .max()
        .unwrap_or(0);
    for scope in scopes {
        if !lines.is_empty() {
            lines.push(Line::default());
        }
        lines.push(Line::styled(
            scope.heading().to_owned(),
            theme.style(Slot::PaneTitle),
        ));
        for binding in keymap.bindings_for(*scope).filter(|b| !b.keys.is_empty()) {
            let label = keymap::keys_label(binding);
            let pad = width.saturating_sub(Line::raw(label.as_str()).width());
            lines.push(Line::from(vec![
                Span::styled(
                    format!(" {label}{} ", " ".repeat(pad)),
                    theme.style(Slot::StatusKey),
                ),
                Span::styled(binding.help, theme.style(Slot::Text)),
            ]));
        }
    }
    lines
}

/// Every binding of the keymap in use, in three columns (everywhere; plans and decisions;
/// diff and approvals), plus the keys of the correction editor.
pub(super) fn render(keymap: &Keymap, theme: &Theme, area: Rect, buf: &mut Buffer) {
    use crate::panes::Pane;
    let columns = [
        help_column(keymap, &[Scope::Global], theme),
        help_column(
            keymap,
            &[Scope::Pane(Pane::Plans), Scope::Pane(Pane::Tree)],
            theme,
        ),
        help_column(
            keymap,
            &[Scope::Pane(Pane::Diff), Scope::Pane(Pane::Approvals)],
            theme,
        ),
    ];
    let rows = u16::try_from(columns.iter().map(Vec::len).max().unwrap_or(0)).unwrap_or(u16::MAX);
    let rect = centered(area, 96, rows + 4);
    Clear.render(rect, buf);
    let block = frame("Keys", theme, false);
    let inner = block.inner(rect);
    block.render(rect, buf);
    let [body, foot] = Layout::vertical([Constraint::Fill(1), Constraint::Length(1)]).areas(inner);
    let areas: [Rect; 3] = Layout::horizontal([
        Constraint::Fill(5),
        Constraint::Fill(4),
        Constraint::Fill(4),
    ])
    .spacing(1)
    .areas(body.inner(ratatui::layout::Margin::new(1, 0)));
    for (lines, rect) in columns.into_iter().zip(areas) {
        Paragraph::new(lines).render(rect, buf);
    }
    Paragraph::new(footer(
        &[
            ("Esc/?", "close"),
            ("correction editor:", "Ctrl-s impact, Tab mode"),
        ],
        theme,
    ))
    .render(foot.inner(ratatui::layout::Margin::new(1, 0)), buf);
}

#[cfg(test)]
mod tests {
    use crate::msg::Key;
    use crate::overlay::{Outcome, Overlay};

    #[test]
    fn help_closes_on_escape_question_mark_and_q_only() {
        assert_eq!(Overlay::Help.handle_key(Key::Char('j')), Outcome::Stay);
        assert_eq!(Overlay::Help.handle_key(Key::Tab), Outcome::Stay);
        for key in [Key::Esc, Key::Char('?'), Key::Char('q')] {
            assert_eq!(Overlay::Help.handle_key(key), Outcome::Close);
        }
    }
}
