//! Pick one option of an approval.

use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::text::Line;

use super::{Outcome, footer, render_box};
use crate::msg::{Cmd, Key};
use crate::theme::{Slot, Theme};

pub(super) fn handle_key(
    approval_id: &str,
    options: &[String],
    selected: &mut usize,
    key: Key,
) -> Outcome {
    match key {
        Key::Char('j') | Key::Down => {
            *selected = (*selected + 1).min(options.len().saturating_sub(1));
            Outcome::Stay
        }
        Key::Char('k') | Key::Up => {
            *selected = selected.saturating_sub(1);
            Outcome::Stay
        }
        Key::Enter => match options.get(*selected) {
            Some(option) => Outcome::Submit(Cmd::Choose {
                approval_id: approval_id.to_owned(),
                option: option.clone(),
            }),
            None => Outcome::Close,
        },
        Key::Esc => Outcome::Close,
        _ => Outcome::Stay,
    }
}

pub(super) fn render(
    title: &str,
    options: &[String],
    selected: usize,
    theme: &Theme,
    area: Rect,
    buf: &mut Buffer,
) {
    let mut lines: Vec<Line> = options
        .iter()
        .enumerate()
        .map(|(i, option)| {
            if i == selected {
                Line::styled(format!("» {option}"), theme.style(Slot::ListSelected))
            } else {
                Line::styled(format!("  {option}"), theme.style(Slot::Text))
            }
        })
        .collect();
    lines.push(Line::default());
    lines.push(footer(
        &[("j/k", "move"), ("Enter", "choose"), ("Esc", "cancel")],
        theme,
    ));
    render_box(title, lines, theme, false, area, buf);
}

#[cfg(test)]
mod tests {
    use crate::msg::{Cmd, Key};
    use crate::overlay::{Outcome, Overlay};

    #[test]
    fn choice_moves_within_bounds() {
        let mut overlay = Overlay::Choice {
            title: "t".into(),
            approval_id: "A2".into(),
            options: vec!["x".into(), "y".into()],
            selected: 0,
        };
        overlay.handle_key(Key::Up);
        overlay.handle_key(Key::Down);
        overlay.handle_key(Key::Char('j'));
        assert_eq!(
            overlay.handle_key(Key::Enter),
            Outcome::Submit(Cmd::Choose {
                approval_id: "A2".into(),
                option: "y".into()
            })
        );
        assert_eq!(overlay.handle_key(Key::Esc), Outcome::Close);
    }
}
