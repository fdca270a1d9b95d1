//! A one-line text prompt: a rejection's reason, guidance for an approval or a plan.

use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};

use super::{Outcome, footer, render_box};
use crate::msg::{Cmd, Key};
use crate::theme::{Slot, Theme};

/// What an [`Overlay::Input`](super::Overlay::Input) submits.
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
    /// Guidance for a plan, outside any approval (`agents plan prompt`).
    Prompt {
        /// The plan that receives the guidance.
        plan_id: String,
    },
    /// The optional reason for rejecting review items of a plan's diff.
    ReviewReason {
        /// The plan.
        plan_id: String,
        /// The items rejected.
        item_ids: Vec<String>,
    },
}

pub(super) fn handle_key(
    text: &mut String,
    error: &mut Option<String>,
    purpose: &InputPurpose,
    key: Key,
) -> Outcome {
    match key {
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
            if let InputPurpose::ReviewReason { plan_id, item_ids } = purpose {
                return Outcome::Submit(Cmd::Review {
                    plan_id: plan_id.clone(),
                    item_ids: item_ids.clone(),
                    mark: crate::model::ReviewMark::Rejected,
                    reason: (!typed.is_empty()).then(|| typed.to_owned()),
                });
            }
            if typed.is_empty() {
                *error = Some(
                    match purpose {
                        InputPurpose::RejectReason { .. } => "A reason is required.",
                        InputPurpose::Guidance { .. }
                        | InputPurpose::Prompt { .. }
                        | InputPurpose::ReviewReason { .. } => "Guidance cannot be empty.",
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
                InputPurpose::Prompt { plan_id } => Cmd::Prompt {
                    plan_id: plan_id.clone(),
                    text: typed.to_owned(),
                },
                InputPurpose::ReviewReason { .. } => return Outcome::Stay,
            })
        }
        _ => Outcome::Stay,
    }
}

pub(super) fn render(
    title: &str,
    prompt: &str,
    text: &str,
    error: Option<&str>,
    theme: &Theme,
    area: Rect,
    buf: &mut Buffer,
) {
    let mut lines: Vec<Line> = prompt
        .lines()
        .map(|l| Line::styled(l.to_owned(), theme.style(Slot::Text)))
        .collect();
    lines.extend([
        Line::default(),
        Line::from(vec![
            Span::styled("> ", theme.style(Slot::StatusKey)),
            Span::styled(text.to_owned(), theme.style(Slot::Text)),
            Span::styled("▏", theme.style(Slot::StatusKey)),
        ]),
    ]);
    if let Some(error) = error {
        lines.push(Line::styled(
            error.to_owned(),
            theme.style(Slot::StatusError),
        ));
    }
    lines.push(Line::default());
    lines.push(footer(&[("Enter", "send"), ("Esc", "cancel")], theme));
    render_box(title, lines, theme, false, area, buf);
}

#[cfg(test)]
mod tests {
    use super::InputPurpose;
    use crate::msg::{Cmd, Key};
    use crate::overlay::{Outcome, Overlay};

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
}
