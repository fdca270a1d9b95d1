//! The live area: what a plan this TUI drives is doing right now: the model's streamed reply
//! text, its tool calls with their arguments, and the output lines of script steps. Nothing of
//! it is stored; it shows the newest plan that reported something.
//!
//! It is not a focusable pane: it sits under the decisions and diff panes while it has
//! something to show, and takes no keys.

use std::collections::VecDeque;

use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Paragraph, Widget};

use crate::model::{LiveUpdate, short_id};
use crate::theme::{Slot, Theme};

/// Lines the live area keeps (older ones scroll away).
pub const KEPT_LINES: usize = 200;

/// What a line of the live area shows (its style).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LineKind {
    /// Model reply text.
    Text,
    /// A tool call, started or finished without error.
    Tool,
    /// A failed tool call, a retry.
    Problem,
    /// A step's output.
    Output,
}

/// The live area's state.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct LiveArea {
    plan_id: Option<String>,
    actor: Option<String>,
    lines: VecDeque<(LineKind, String)>,
    /// Whether the last text line is still being streamed into.
    open_text: bool,
    /// The tool whose progress the last line shows (the next progress of it replaces it).
    open_progress: Option<String>,
}

impl LiveArea {
    /// Whether there is anything to show (the area is drawn only then).
    pub fn is_empty(&self) -> bool {
        self.lines.is_empty()
    }

    /// The plan shown.
    pub fn plan_id(&self) -> Option<&str> {
        self.plan_id.as_deref()
    }

    /// The lines kept, oldest first.
    pub fn lines(&self) -> impl Iterator<Item = &(LineKind, String)> {
        self.lines.iter()
    }

    /// Adds one live update of `plan_id`; a plan other than the one shown replaces it.
    pub fn push(&mut self, plan_id: &str, update: LiveUpdate) {
        if self.plan_id.as_deref() != Some(plan_id) {
            *self = Self {
                plan_id: Some(plan_id.to_owned()),
                ..Self::default()
            };
        }
        match update {
            LiveUpdate::Turn { actor, .. } => {
                self.actor = Some(actor);
                self.open_text = false;
            }
            LiveUpdate::Text { text } => self.text(&text),
            LiveUpdate::Retrying { attempt, reason } => self.line(
                LineKind::Problem,
                format!("↻ attempt {attempt} failed, retrying: {reason}"),
            ),
            LiveUpdate::ToolStarted { name, arguments } => {
                self.line(LineKind::Tool, format!("⚙ {name} {}", one_line(&arguments)));
            }
            LiveUpdate::ToolFinished {
                name,
                is_error,
                duration_ms,
            } => {
                let (kind, mark) = if is_error {
                    (LineKind::Problem, "✗")
                } else {
                    (LineKind::Tool, "✓")
                };
                self.line(kind, format!("{mark} {name} ({duration_ms} ms)"));
            }
            LiveUpdate::ToolProgress {
                name,
                progress,
                total,
                message,
            } => self.progress(name, progress, total, message.as_deref()),
            LiveUpdate::Progress { text } => self.line(LineKind::Tool, format!("▶ {text}")),
            LiveUpdate::Output { step, line } => {
                self.line(LineKind::Output, format!("{step} │ {line}"));
            }
        }
    }

    /// One line `⋯ tool: 3/5 message`, replaced in place by the same tool's next progress.
    fn progress(&mut self, name: String, progress: f64, total: Option<f64>, message: Option<&str>) {
        let mut line = format!("⋯ {name}: {}", number(progress));
        if let Some(total) = total {
            line.push_str(&format!("/{}", number(total)));
        }
        if let Some(message) = message.map(one_line).filter(|m| !m.is_empty()) {
            line.push(' ');
            line.push_str(&message);
        }
        if self.open_progress.as_deref() == Some(name.as_str())
            && let Some((_, last)) = self.lines.back_mut()
        {
            *last = line;
        } else {
            self.line(LineKind::Tool, line);
            self.open_progress = Some(name);
        }
    }

    fn text(&mut self, text: &str) {
        self.open_progress = None;
        for (i, piece) in text.split('\n').enumerate() {
            if i > 0 {
                self.open_text = false;
            }
            if self.open_text
                && let Some((LineKind::Text, last)) = self.lines.back_mut()
            {
                last.push_str(piece);
            } else if !piece.is_empty() || i > 0 {
                self.lines.push_back((LineKind::Text, piece.to_owned()));
                self.trim();
            }
            self.open_text = true;
        }
    }

    fn line(&mut self, kind: LineKind, text: String) {
        self.open_text = false;
        self.open_progress = None;
        self.lines.push_back((kind, text));
        self.trim();
    }

    fn trim(&mut self) {
        while self.lines.len() > KEPT_LINES {
            self.lines.pop_front();
        }
    }
}

/// `3` for a whole number, `0.25` otherwise.
fn number(n: f64) -> String {
    if n.fract() == 0.0 && n.abs() < 1e15 {
        format!("{n:.0}")
    } else {
        format!("{n}")
    }
}

fn one_line(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Draws the area: a bordered block titled with the plan and the actor, and the newest lines
/// that fit, long lines wrapped.
pub fn render(live: &LiveArea, running: bool, theme: &Theme, area: Rect, buf: &mut Buffer) {
    let mut title = vec![
        Span::raw(" "),
        Span::styled("Live", theme.style(Slot::PaneTitle)),
    ];
    let mut detail = Vec::new();
    if let Some(plan) = &live.plan_id {
        detail.push(format!("plan {}", short_id(plan)));
    }
    if let Some(actor) = &live.actor {
        detail.push(actor.clone());
    }
    if !running {
        detail.push("finished".to_owned());
    }
    if !detail.is_empty() {
        title.push(Span::styled(
            format!(" · {}", detail.join(" · ")),
            theme.style(Slot::TextDim),
        ));
    }
    title.push(Span::raw(" "));
    let block = Block::bordered()
        .border_style(theme.style(Slot::PaneBorder))
        .title(Line::from(title));
    let inner = block.inner(area);
    block.render(area, buf);
    let width = usize::from(inner.width.max(1));
    let height = usize::from(inner.height);
    let mut rows: Vec<Line> = Vec::new();
    for (kind, text) in live.lines.iter().rev() {
        let slot = match kind {
            LineKind::Text => Slot::Text,
            LineKind::Tool => Slot::DecisionType,
            LineKind::Problem => Slot::StatusError,
            LineKind::Output => Slot::TextDim,
        };
        let chars: Vec<char> = text.chars().collect();
        let mut chunks: Vec<String> = chars
            .chunks(width)
            .map(|c| c.iter().collect::<String>())
            .collect();
        if chunks.is_empty() {
            chunks.push(String::new());
        }
        for chunk in chunks.into_iter().rev() {
            rows.push(Line::from(Span::styled(chunk, theme.style(slot))));
        }
        if rows.len() >= height {
            break;
        }
    }
    rows.truncate(height);
    rows.reverse();
    Paragraph::new(rows).render(inner, buf);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(t: &str) -> LiveUpdate {
        LiveUpdate::Text { text: t.into() }
    }

    fn shown(live: &LiveArea) -> Vec<String> {
        live.lines().map(|(_, t)| t.clone()).collect()
    }

    #[test]
    fn streamed_pieces_join_into_lines_and_line_breaks_start_new_ones() {
        let mut live = LiveArea::default();
        for piece in ["Hel", "lo wor", "ld\nsecond", " line"] {
            live.push("P1", text(piece));
        }
        assert_eq!(shown(&live), ["Hello world", "second line"]);
    }

    #[test]
    fn a_tool_call_ends_the_text_line_and_shows_its_arguments_on_one_line() {
        let mut live = LiveArea::default();
        live.push("P1", text("Reading"));
        live.push(
            "P1",
            LiveUpdate::ToolStarted {
                name: "file_read".into(),
                arguments: "{\n  \"path\": \"a.txt\"\n}".into(),
            },
        );
        live.push(
            "P1",
            LiveUpdate::ToolFinished {
                name: "file_read".into(),
                is_error: false,
                duration_ms: 3,
            },
        );
        live.push("P1", text("done"));
        assert_eq!(
            shown(&live),
            [
                "Reading",
                "⚙ file_read { \"path\": \"a.txt\" }",
                "✓ file_read (3 ms)",
                "done"
            ]
        );
    }

    fn progress(
        name: &str,
        progress: f64,
        total: Option<f64>,
        message: Option<&str>,
    ) -> LiveUpdate {
        LiveUpdate::ToolProgress {
            name: name.into(),
            progress,
            total,
            message: message.map(Into::into),
        }
    }

    #[test]
    fn a_tools_progress_is_one_line_replaced_in_place_until_something_else_is_shown() {
        let mut live = LiveArea::default();
        live.push(
            "P1",
            LiveUpdate::ToolStarted {
                name: "everything.slow".into(),
                arguments: "{}".into(),
            },
        );
        live.push("P1", progress("everything.slow", 1.0, Some(5.0), None));
        live.push(
            "P1",
            progress("everything.slow", 3.0, Some(5.0), Some("copying\nfiles")),
        );
        assert_eq!(
            shown(&live),
            [
                "⚙ everything.slow {}",
                "⋯ everything.slow: 3/5 copying files"
            ]
        );
        // Another tool's progress gets its own line; after other lines a new one starts.
        live.push("P1", progress("other", 0.5, None, None));
        live.push("P1", text("still working"));
        live.push("P1", progress("other", 0.75, None, None));
        assert_eq!(
            shown(&live)[2..],
            ["⋯ other: 0.5", "still working", "⋯ other: 0.75"]
        );
    }

    #[test]
    fn another_plan_replaces_what_is_shown_and_old_lines_scroll_away() {
        let mut live = LiveArea::default();
        live.push("P1", text("old"));
        live.push(
            "P2",
            LiveUpdate::Output {
                step: "build".into(),
                line: "ok".into(),
            },
        );
        assert_eq!(live.plan_id(), Some("P2"));
        assert_eq!(shown(&live), ["build │ ok"]);
        for i in 0..KEPT_LINES + 5 {
            live.push(
                "P2",
                LiveUpdate::Output {
                    step: "s".into(),
                    line: i.to_string(),
                },
            );
        }
        assert_eq!(live.lines().count(), KEPT_LINES);
        assert_eq!(shown(&live)[0], "s │ 5");
    }
}
