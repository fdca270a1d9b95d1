//! The four panes and the live area. Each module holds one pane's state, its pure key handling
//! and its rendering.

use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, BorderType, Paragraph, Widget, Wrap};

pub use crate::model::Pane;
use crate::theme::{Slot, Theme};

pub mod approvals;
pub mod diff;
pub mod live;
pub mod plans;
pub mod tree;

/// The bordered block around a pane: ` 1 Plans · detail `, thick border when focused.
pub(crate) fn pane_block<'a>(
    pane: Pane,
    detail: Option<String>,
    theme: &Theme,
    focused: bool,
) -> Block<'a> {
    let mut title = vec![
        Span::raw(" "),
        Span::styled(
            format!("{} {}", pane.number(), pane.title()),
            theme.style(Slot::PaneTitle),
        ),
    ];
    if let Some(detail) = detail {
        title.push(Span::styled(
            format!(" · {detail}"),
            theme.style(Slot::TextDim),
        ));
    }
    title.push(Span::raw(" "));
    let (border_slot, border_type) = if focused {
        (Slot::PaneBorderFocused, BorderType::Thick)
    } else {
        (Slot::PaneBorder, BorderType::Plain)
    };
    Block::bordered()
        .border_type(border_type)
        .border_style(theme.style(border_slot))
        .title(Line::from(title))
}

/// An honest empty state: one dim, wrapped message inside the pane.
pub(crate) fn render_message(text: &str, theme: &Theme, area: Rect, buf: &mut Buffer) {
    Paragraph::new(text.to_owned())
        .style(theme.style(Slot::TextDim))
        .wrap(Wrap { trim: true })
        .render(area, buf);
}

/// How far PgUp/PgDn move a list selection.
pub(crate) const PAGE: usize = 10;

/// Moves an index within `0..len` by one of the list actions; `None` for other actions.
pub(crate) fn step(
    current: Option<usize>,
    len: usize,
    action: crate::keymap::Action,
) -> Option<usize> {
    use crate::keymap::Action;
    if len == 0 {
        return None;
    }
    let last = len - 1;
    let current = current.map(|i| i.min(last));
    Some(match (action, current) {
        (Action::First, _) | (Action::Down | Action::Up, None) => 0,
        (Action::Last, _) => last,
        (Action::Up, Some(i)) => i.saturating_sub(1),
        (Action::Down, Some(i)) => (i + 1).min(last),
        (Action::PageUp, Some(i)) => i.saturating_sub(PAGE),
        (Action::PageDown, Some(i)) => (i + PAGE).min(last),
        (Action::PageUp | Action::PageDown, None) => 0,
        _ => return current,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::keymap::Action;

    #[test]
    fn focus_cycles_both_ways() {
        assert_eq!(Pane::Plans.next(), Pane::Tree);
        assert_eq!(Pane::Approvals.next(), Pane::Plans);
        assert_eq!(Pane::Plans.prev(), Pane::Approvals);
        assert_eq!(Pane::Diff.prev(), Pane::Tree);
        assert_eq!(Pane::ALL.map(Pane::number), [1, 2, 3, 4]);
    }

    #[test]
    fn step_clamps_at_both_ends() {
        assert_eq!(step(Some(0), 3, Action::Up), Some(0));
        assert_eq!(step(Some(2), 3, Action::Down), Some(2));
        assert_eq!(step(Some(1), 3, Action::Down), Some(2));
        assert_eq!(step(None, 3, Action::Down), Some(0));
        assert_eq!(step(Some(0), 3, Action::Last), Some(2));
        assert_eq!(step(Some(2), 3, Action::First), Some(0));
        assert_eq!(step(Some(7), 3, Action::Up), Some(1));
        assert_eq!(step(Some(0), 0, Action::Down), None);
        assert_eq!(step(Some(1), 30, Action::PageDown), Some(11));
        assert_eq!(step(Some(25), 30, Action::PageDown), Some(29));
        assert_eq!(step(Some(5), 30, Action::PageUp), Some(0));
    }
}
