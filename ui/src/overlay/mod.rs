//! Overlays: popups stacked over the panes. The topmost one consumes every key first.
//!
//! Each overlay has its own module with its key handling and its drawing; this one holds the
//! [`Overlay`] enum that dispatches to them and the helpers they share (centring, frame,
//! footer, labelled lines).

use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, BorderType, Clear, Paragraph, Widget, Wrap};

use crate::keymap::Keymap;
use crate::model::{CheckpointItem, DecisionRef, Explanation};
use crate::msg::{Cmd, Key};
use crate::theme::{Slot, Theme};

mod checkpoints;
mod choice;
mod confirm;
mod correct;
mod explain;
mod help;
mod input;
mod message;
mod use_form;

pub use correct::{CorrectForm, CorrectStage, Editor};
pub use input::InputPurpose;
pub use use_form::{UseCursor, UseForm};

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
    /// Why a decision was taken and what depends on it.
    Explain {
        /// The explanation.
        explanation: Box<Explanation>,
        /// Lines scrolled past.
        scroll: usize,
    },
    /// Correct a decision.
    Correct(Box<CorrectForm>),
    /// Pick a checkpoint to roll a plan back to.
    Checkpoints {
        /// The plan.
        plan_id: String,
        /// Its checkpoints, oldest first.
        items: Vec<CheckpointItem>,
        /// The highlighted one.
        selected: usize,
    },
    /// Use an action on a project.
    Use(UseForm),
    /// A message to read and close (engine errors, notes).
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
    /// The overlay stays open and sends a command.
    Send(Cmd),
    /// The overlay gives way to another one.
    Replace(Box<Overlay>),
}

fn move_index(index: &mut usize, len: usize, key: Key) -> bool {
    match key {
        Key::Char('j') | Key::Down => *index = (*index + 1).min(len.saturating_sub(1)),
        Key::Char('k') | Key::Up => *index = index.saturating_sub(1),
        Key::Home => *index = 0,
        Key::End => *index = len.saturating_sub(1),
        _ => return false,
    }
    true
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
                InputPurpose::Prompt { .. } | InputPurpose::ReviewReason { .. } => None,
            },
            Self::Choice { approval_id, .. } => Some(approval_id),
            Self::Help
            | Self::Message { .. }
            | Self::Explain { .. }
            | Self::Correct(_)
            | Self::Checkpoints { .. }
            | Self::Use(_) => None,
        }
    }

    /// Whether keys typed here are text (so Ctrl-C is the only way out besides Esc).
    pub fn takes_text(&self) -> bool {
        matches!(self, Self::Input { .. })
            || matches!(self, Self::Correct(form) if matches!(form.stage, CorrectStage::Editing { .. }))
    }

    pub(crate) fn handle_key(&mut self, key: Key) -> Outcome {
        match self {
            Self::Help => help::handle_key(key),
            Self::Message { .. } => message::handle_key(key),
            Self::Confirm { on_yes, .. } => confirm::handle_key(on_yes, key),
            Self::Choice {
                approval_id,
                options,
                selected,
                ..
            } => choice::handle_key(approval_id, options, selected, key),
            Self::Explain {
                explanation,
                scroll,
            } => explain::handle_key(explanation, scroll, key),
            Self::Checkpoints {
                plan_id,
                items,
                selected,
            } => checkpoints::handle_key(plan_id, items, selected, key),
            Self::Use(form) => form.key(key),
            Self::Correct(form) => correct::handle_key(form, key),
            Self::Input {
                text,
                error,
                purpose,
                ..
            } => input::handle_key(text, error, purpose, key),
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

fn text_lines<'a>(text: &str, style: ratatui::style::Style) -> Vec<Line<'a>> {
    text.lines()
        .map(|l| Line::styled(l.to_owned(), style))
        .collect()
}

fn labelled<'a>(label: &str, value: String, theme: &Theme) -> Line<'a> {
    Line::from(vec![
        Span::styled(format!("{label}: "), theme.style(Slot::TextDim)),
        Span::styled(value, theme.style(Slot::Text)),
    ])
}

/// The first line of a possibly multi-line text (a script step's command), marked with `…`
/// when more follows, for one-line lists.
fn first_line(text: &str) -> String {
    let mut lines = text.lines();
    let first = lines.next().unwrap_or_default().to_owned();
    if lines.next().is_some() {
        format!("{first} …")
    } else {
        first
    }
}

/// A label and a value that may span lines: the first line beside the label, the others
/// indented under it (at most `max` lines, then a count of the rest).
fn labelled_lines<'a>(
    label: &str,
    value: &str,
    slot: Slot,
    max: usize,
    theme: &Theme,
) -> Vec<Line<'a>> {
    let mut rest = value.lines();
    let mut out = vec![Line::from(vec![
        Span::styled(format!("{label}: "), theme.style(Slot::TextDim)),
        Span::styled(
            rest.next().unwrap_or_default().to_owned(),
            theme.style(slot),
        ),
    ])];
    let rest: Vec<&str> = rest.collect();
    for l in rest.iter().take(max) {
        out.push(Line::styled(format!("    {l}"), theme.style(slot)));
    }
    if rest.len() > max {
        out.push(Line::styled(
            format!("    … {} more line(s)", rest.len() - max),
            theme.style(Slot::TextDim),
        ));
    }
    out
}

fn decision_refs<'a>(refs: &[DecisionRef], limit: usize, theme: &Theme) -> Vec<Line<'a>> {
    let mut lines: Vec<Line> = refs
        .iter()
        .take(limit)
        .map(|d| {
            // No short ids here: decisions taken in the same second share their first
            // characters, so the type and the choice say more.
            Line::from(vec![
                Span::styled("  · ", theme.style(Slot::TextDim)),
                Span::styled(d.decision_type.clone(), theme.style(Slot::DecisionType)),
                Span::styled(" → ", theme.style(Slot::TextDim)),
                Span::styled(first_line(&d.chosen), theme.style(Slot::DecisionChosen)),
            ])
        })
        .collect();
    if refs.len() > limit {
        lines.push(Line::styled(
            format!("  … and {} more", refs.len() - limit),
            theme.style(Slot::TextDim),
        ));
    }
    lines
}

/// Draws one overlay, centred in `area`.
pub(crate) fn render(
    overlay: &Overlay,
    keymap: &Keymap,
    theme: &Theme,
    area: Rect,
    buf: &mut Buffer,
) {
    match overlay {
        Overlay::Help => help::render(keymap, theme, area, buf),
        Overlay::Explain {
            explanation,
            scroll,
        } => explain::render(explanation, *scroll, theme, area, buf),
        Overlay::Correct(form) => correct::render(form, theme, area, buf),
        Overlay::Use(form) => use_form::render(form, theme, area, buf),
        Overlay::Checkpoints {
            plan_id,
            items,
            selected,
        } => checkpoints::render(plan_id, items, *selected, theme, area, buf),
        Overlay::Confirm { title, body, .. } => confirm::render(title, body, theme, area, buf),
        Overlay::Input {
            title,
            prompt,
            text,
            error,
            ..
        } => input::render(title, prompt, text, error.as_deref(), theme, area, buf),
        Overlay::Choice {
            title,
            options,
            selected,
            ..
        } => choice::render(title, options, *selected, theme, area, buf),
        Overlay::Message {
            title,
            body,
            is_error,
        } => message::render(title, body, *is_error, theme, area, buf),
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_multi_line_script_step_is_shown_line_by_line_in_explanations_and_by_its_first_line_in_lists()
     {
        // Regression: `run:` steps once ran together ("...final newline# Rust...").
        let theme = Theme::default();
        let lines = labelled_lines(
            "Chosen",
            "set -e\nfind . -name x\necho ok",
            Slot::Text,
            1,
            &theme,
        );
        let text: Vec<String> = lines.iter().map(ToString::to_string).collect();
        assert_eq!(
            text,
            [
                "Chosen: set -e",
                "    find . -name x",
                "    … 1 more line(s)"
            ]
        );
        assert_eq!(first_line("set -e\nfind ."), "set -e …");
        assert_eq!(first_line("one line"), "one line");
    }
}
