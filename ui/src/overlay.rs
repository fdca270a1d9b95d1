//! Overlays: popups stacked over the panes. The topmost one consumes every key first.

use ratatui::buffer::Buffer;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, BorderType, Clear, Paragraph, Widget, Wrap};

use crate::keymap::{self, Scope};
use crate::msg::{Cmd, Key};
use crate::panes::Pane;
use crate::theme::{Slot, Theme};

/// What an [`Overlay::Input`] submits.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum InputPurpose {
    /// The reason for rejecting an approval.
    RejectReason {
        /// The approval to reject.
        approval_id: String,
    },
    /// Guidance in answer to an approval.
    Guidance {
        /// The approval answered.
        approval_id: String,
        /// The plan that receives the guidance.
        plan_id: String,
    },
}

/// A popup over the panes.
#[derive(Clone, Debug, PartialEq)]
pub enum Overlay {
    /// The list of keys.
    Help,
    /// A yes/no question; `y` or Enter emits `on_yes`.
    Confirm {
        /// Headline.
        title: String,
        /// What is being confirmed.
        body: String,
        /// The command sent on yes.
        on_yes: Cmd,
    },
    /// A one-line text prompt.
    Input {
        /// Headline.
        title: String,
        /// Context shown above the text.
        prompt: String,
        /// What was typed so far.
        text: String,
        /// Why the last submit was refused.
        error: Option<String>,
        /// What the text is for.
        purpose: InputPurpose,
    },
    /// Pick one option of an approval.
    Choice {
        /// Headline.
        title: String,
        /// The approval answered.
        approval_id: String,
        /// The options.
        options: Vec<String>,
        /// Index of the highlighted option.
        selected: usize,
    },
    /// A message to read and close (explanations, engine errors).
    Message {
        /// Headline.
        title: String,
        /// The text, possibly several lines.
        body: String,
        /// Whether this reports an error.
        is_error: bool,
    },
}

/// What a key did to the topmost overlay.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Outcome {
    /// The overlay stays open.
    Stay,
    /// The overlay closes without a command.
    Close,
    /// The overlay closes and sends a command.
    Submit(Cmd),
}

impl Overlay {
    /// The approval this overlay would answer, if any.
    pub fn approval_id(&self) -> Option<&str> {
        match self {
            Self::Confirm { on_yes, .. } => match on_yes {
                Cmd::Approve { approval_id }
                | Cmd::Reject { approval_id, .. }
                | Cmd::Choose { approval_id, .. }
                | Cmd::Guidance { approval_id, .. } => Some(approval_id),
                _ => None,
            },
            Self::Input { purpose, .. } => match purpose {
                InputPurpose::RejectReason { approval_id }
                | InputPurpose::Guidance { approval_id, .. } => Some(approval_id),
            },
            Self::Choice { approval_id, .. } => Some(approval_id),
            Self::Help | Self::Message { .. } => None,
        }
    }

    pub(crate) fn handle_key(&mut self, key: Key) -> Outcome {
        match self {
            Self::Help => match key {
                Key::Esc | Key::Char('?' | 'q') => Outcome::Close,
                _ => Outcome::Stay,
            },
            Self::Message { .. } => match key {
                Key::Esc | Key::Enter | Key::Char('q') => Outcome::Close,
                _ => Outcome::Stay,
            },
            Self::Confirm { on_yes, .. } => match key {
                Key::Char('y') | Key::Enter => Outcome::Submit(on_yes.clone()),
                Key::Char('n') | Key::Esc => Outcome::Close,
                _ => Outcome::Stay,
            },
            Self::Choice {
                approval_id,
                options,
                selected,
                ..
            } => match key {
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
                        approval_id: approval_id.clone(),
                        option: option.clone(),
                    }),
                    None => Outcome::Close,
                },
                Key::Esc => Outcome::Close,
                _ => Outcome::Stay,
            },
            Self::Input {
                text,
                error,
                purpose,
                ..
            } => match key {
                Key::Char(c) => {
                    text.push(c);
                    *error = None;
                    Outcome::Stay
                }
                Key::Backspace => {
                    text.pop();
                    Outcome::Stay
                }
                Key::Esc => Outcome::Close,
                Key::Enter => {
                    let typed = text.trim();
                    if typed.is_empty() {
                        *error = Some(
                            match purpose {
                                InputPurpose::RejectReason { .. } => "A reason is required.",
                                InputPurpose::Guidance { .. } => "Guidance cannot be empty.",
                            }
                            .to_owned(),
                        );
                        return Outcome::Stay;
                    }
                    Outcome::Submit(match purpose {
                        InputPurpose::RejectReason { approval_id } => Cmd::Reject {
                            approval_id: approval_id.clone(),
                            reason: typed.to_owned(),
                        },
                        InputPurpose::Guidance {
                            approval_id,
                            plan_id,
                        } => Cmd::Guidance {
                            approval_id: approval_id.clone(),
                            plan_id: plan_id.clone(),
                            text: typed.to_owned(),
                        },
                    })
                }
                _ => Outcome::Stay,
            },
        }
    }
}

fn centered(area: Rect, width: u16, height: u16) -> Rect {
    let width = width
        .min(area.width.saturating_sub(2))
        .max(area.width.min(20));
    let height = height
        .min(area.height.saturating_sub(2))
        .max(area.height.min(3));
    Rect {
        x: area.x + (area.width - width) / 2,
        y: area.y + (area.height - height) / 2,
        width,
        height,
    }
}

fn frame<'a>(title: &str, theme: &Theme, error: bool) -> Block<'a> {
    let border = if error {
        Slot::StatusError
    } else {
        Slot::OverlayBorder
    };
    Block::bordered()
        .border_type(BorderType::Double)
        .border_style(theme.style(border))
        .title(Line::styled(
            format!(" {title} "),
            theme.style(Slot::OverlayTitle),
        ))
        .style(theme.style(Slot::Text))
}

fn footer<'a>(hints: &[(&str, &str)], theme: &Theme) -> Line<'a> {
    let mut spans = Vec::new();
    for (i, (keys, what)) in hints.iter().enumerate() {
        if i > 0 {
            spans.push(Span::styled("  ", theme.style(Slot::TextDim)));
        }
        spans.push(Span::styled(keys.to_string(), theme.style(Slot::StatusKey)));
        spans.push(Span::styled(format!(" {what}"), theme.style(Slot::TextDim)));
    }
    Line::from(spans)
}

/// Draws one overlay, centred in `area`.
pub(crate) fn render(overlay: &Overlay, theme: &Theme, area: Rect, buf: &mut Buffer) {
    match overlay {
        Overlay::Help => render_help(theme, area, buf),
        Overlay::Confirm { title, body, .. } => {
            let mut lines: Vec<Line> = body
                .lines()
                .map(|l| Line::styled(l.to_owned(), theme.style(Slot::Text)))
                .collect();
            lines.push(Line::default());
            lines.push(footer(&[("y/Enter", "yes"), ("n/Esc", "no")], theme));
            render_box(title, lines, theme, false, area, buf);
        }
        Overlay::Input {
            title,
            prompt,
            text,
            error,
            ..
        } => {
            let mut lines: Vec<Line> = prompt
                .lines()
                .map(|l| Line::styled(l.to_owned(), theme.style(Slot::Text)))
                .collect();
            lines.extend([
                Line::default(),
                Line::from(vec![
                    Span::styled("> ", theme.style(Slot::StatusKey)),
                    Span::styled(text.clone(), theme.style(Slot::Text)),
                    Span::styled("▏", theme.style(Slot::StatusKey)),
                ]),
            ]);
            if let Some(error) = error {
                lines.push(Line::styled(error.clone(), theme.style(Slot::StatusError)));
            }
            lines.push(Line::default());
            lines.push(footer(&[("Enter", "send"), ("Esc", "cancel")], theme));
            render_box(title, lines, theme, false, area, buf);
        }
        Overlay::Choice {
            title,
            options,
            selected,
            ..
        } => {
            let mut lines: Vec<Line> = options
                .iter()
                .enumerate()
                .map(|(i, option)| {
                    if i == *selected {
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
        Overlay::Message {
            title,
            body,
            is_error,
        } => {
            let style = theme.style(if *is_error {
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
            render_box(title, lines, theme, *is_error, area, buf);
        }
    }
}

fn render_box(
    title: &str,
    lines: Vec<Line<'_>>,
    theme: &Theme,
    error: bool,
    area: Rect,
    buf: &mut Buffer,
) {
    let widest = lines
        .iter()
        .map(Line::width)
        .max()
        .unwrap_or(0)
        .max(title.len() + 4);
    let width = u16::try_from(widest + 4).unwrap_or(u16::MAX).min(72);
    let inner_width = usize::from(width.saturating_sub(4)).max(1);
    let wrapped: usize = lines
        .iter()
        .map(|l| l.width().div_ceil(inner_width).max(1))
        .sum();
    let height = u16::try_from(wrapped + 2).unwrap_or(u16::MAX);
    let rect = centered(area, width, height);
    Clear.render(rect, buf);
    let block = frame(title, theme, error).padding(ratatui::widgets::Padding::horizontal(1));
    Paragraph::new(lines)
        .block(block)
        .wrap(Wrap { trim: false })
        .render(rect, buf);
}

fn help_column<'a>(scopes: &[(&str, Scope)], theme: &Theme) -> Vec<Line<'a>> {
    let mut lines = Vec::new();
    for (heading, scope) in scopes {
        if !lines.is_empty() {
            lines.push(Line::default());
        }
        lines.push(Line::styled(
            heading.to_string(),
            theme.style(Slot::PaneTitle),
        ));
        for binding in keymap::bindings_for(*scope) {
            lines.push(Line::from(vec![
                Span::styled(
                    format!("  {:<12}", keymap::keys_label(binding)),
                    theme.style(Slot::StatusKey),
                ),
                Span::styled(binding.help, theme.style(Slot::Text)),
            ]));
        }
    }
    lines
}

fn render_help(theme: &Theme, area: Rect, buf: &mut Buffer) {
    let left = help_column(&[("Everywhere", Scope::Global)], theme);
    let right = help_column(
        &[
            ("Decisions pane", Scope::Pane(Pane::Tree)),
            ("Diff pane", Scope::Pane(Pane::Diff)),
            ("Approvals pane", Scope::Pane(Pane::Approvals)),
        ],
        theme,
    );
    let rows = u16::try_from(left.len().max(right.len())).unwrap_or(u16::MAX);
    let rect = centered(area, 64, rows + 4);
    Clear.render(rect, buf);
    let block = frame("Help", theme, false);
    let inner = block.inner(rect);
    block.render(rect, buf);
    let [body, foot] = Layout::vertical([Constraint::Fill(1), Constraint::Length(1)]).areas(inner);
    let [l, r] = Layout::horizontal([Constraint::Fill(1), Constraint::Fill(1)])
        .spacing(2)
        .areas(body.inner(ratatui::layout::Margin::new(1, 0)));
    Paragraph::new(left).render(l, buf);
    Paragraph::new(right).render(r, buf);
    Paragraph::new(footer(&[("Esc/?", "close help")], theme))
        .render(foot.inner(ratatui::layout::Margin::new(1, 0)), buf);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn input(purpose: InputPurpose) -> Overlay {
        Overlay::Input {
            title: "t".into(),
            prompt: "p".into(),
            text: String::new(),
            error: None,
            purpose,
        }
    }

    fn type_text(overlay: &mut Overlay, text: &str) {
        for c in text.chars() {
            assert_eq!(overlay.handle_key(Key::Char(c)), Outcome::Stay);
        }
    }

    #[test]
    fn input_refuses_blank_text_then_submits_trimmed() {
        let mut overlay = input(InputPurpose::RejectReason {
            approval_id: "A1".into(),
        });
        type_text(&mut overlay, "  ");
        assert_eq!(overlay.handle_key(Key::Enter), Outcome::Stay);
        let Overlay::Input { error, .. } = &overlay else {
            panic!("still an input")
        };
        assert_eq!(error.as_deref(), Some("A reason is required."));
        type_text(&mut overlay, "too riskyy");
        overlay.handle_key(Key::Backspace);
        assert_eq!(
            overlay.handle_key(Key::Enter),
            Outcome::Submit(Cmd::Reject {
                approval_id: "A1".into(),
                reason: "too risky".into()
            })
        );
    }

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

    #[test]
    fn help_closes_on_escape_question_mark_and_q_only() {
        assert_eq!(Overlay::Help.handle_key(Key::Char('j')), Outcome::Stay);
        assert_eq!(Overlay::Help.handle_key(Key::Tab), Outcome::Stay);
        for key in [Key::Esc, Key::Char('?'), Key::Char('q')] {
            assert_eq!(Overlay::Help.handle_key(key), Outcome::Close);
        }
    }
}
