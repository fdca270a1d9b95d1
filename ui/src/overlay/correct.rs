//! The correction overlay: write guidance for a decision, see the dry run's impact, confirm.

use ratatui::buffer::Buffer;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Clear, Paragraph, Widget, Wrap};

use ratatui_textarea::TextArea;

use super::{Outcome, centered, decision_refs, footer, frame, labelled, text_lines};
use crate::model::{CorrectionMode, CorrectionPreview};
use crate::msg::{Cmd, Key};
use crate::theme::{Slot, Theme};

/// A multi-line text editor (ratatui-textarea) that compares by its text and cursor.
#[derive(Clone, Debug)]
pub struct Editor(TextArea<'static>);

impl Default for Editor {
    fn default() -> Self {
        let mut area = TextArea::default();
        area.set_wrap_mode(ratatui_textarea::WrapMode::Word);
        area.set_cursor_line_style(ratatui::style::Style::default());
        Self(area)
    }
}

impl PartialEq for Editor {
    fn eq(&self, other: &Self) -> bool {
        self.0.lines() == other.0.lines() && self.0.cursor() == other.0.cursor()
    }
}

impl Editor {
    /// The text typed, lines joined with `\n`.
    pub fn text(&self) -> String {
        self.0.lines().join("\n")
    }

    /// An editor holding `text`, the cursor after it.
    pub fn with_text(text: &str) -> Self {
        let mut editor = Self::default();
        editor.0.insert_str(text);
        editor
    }

    /// Sends a key to the editor (characters, Enter for a new line, arrows, Backspace...).
    pub fn key(&mut self, key: Key) {
        use ratatui_textarea::{Input, Key as K};
        let (key, ctrl) = match key {
            Key::Char(c) => (K::Char(c), false),
            Key::Ctrl(c) => (K::Char(c), true),
            Key::Enter => (K::Enter, false),
            Key::Backspace => (K::Backspace, false),
            Key::Delete => (K::Delete, false),
            Key::Left => (K::Left, false),
            Key::Right => (K::Right, false),
            Key::Up => (K::Up, false),
            Key::Down => (K::Down, false),
            Key::Home => (K::Home, false),
            Key::End => (K::End, false),
            Key::PageUp => (K::PageUp, false),
            Key::PageDown => (K::PageDown, false),
            Key::Esc | Key::Tab | Key::BackTab => return,
        };
        self.0.input(Input {
            key,
            ctrl,
            alt: false,
            shift: false,
        });
    }
}

/// Where a correction stands in its overlay.
#[derive(Clone, Debug, PartialEq)]
pub enum CorrectStage {
    /// Writing the guidance; `error` says why the last submit was refused.
    Editing {
        /// Why the last submit was refused.
        error: Option<String>,
    },
    /// The dry run is computing the impact.
    Waiting,
    /// The dry run's impact, waiting for a confirm.
    Preview(CorrectionPreview),
    /// The dry run failed with this message.
    Failed(String),
}

/// The correction overlay: guidance, mode, dry-run impact, confirm.
#[derive(Clone, Debug, PartialEq)]
pub struct CorrectForm {
    /// The decision to correct.
    pub decision_id: String,
    /// What it decided, for the title (`implementation_choice → NOTES.md`).
    pub summary: String,
    /// Revert or append (Tab switches).
    pub mode: CorrectionMode,
    /// The guidance being written.
    pub editor: Editor,
    /// Where the correction stands.
    pub stage: CorrectStage,
}

impl CorrectForm {
    /// A fresh form for a decision.
    pub fn new(decision_id: String, summary: String) -> Self {
        Self {
            decision_id,
            summary,
            mode: CorrectionMode::Revert,
            editor: Editor::default(),
            stage: CorrectStage::Editing { error: None },
        }
    }
}

pub(super) fn handle_key(form: &mut CorrectForm, key: Key) -> Outcome {
    let command = |form: &CorrectForm, dry_run: bool| {
        let (decision_id, mode, guidance) = (
            form.decision_id.clone(),
            form.mode,
            form.editor.text().trim().to_owned(),
        );
        if dry_run {
            Cmd::PreviewCorrection {
                decision_id,
                mode,
                guidance,
            }
        } else {
            Cmd::Correct {
                decision_id,
                mode,
                guidance,
            }
        }
    };
    match (&form.stage, key) {
        (_, Key::Esc) => Outcome::Close,
        (CorrectStage::Editing { .. }, Key::Tab) => {
            form.mode = form.mode.toggled();
            Outcome::Stay
        }
        (CorrectStage::Editing { .. }, Key::Ctrl('s' | 'd')) => {
            if form.editor.text().trim().is_empty() {
                form.stage = CorrectStage::Editing {
                    error: Some("Write some guidance first.".to_owned()),
                };
                return Outcome::Stay;
            }
            form.stage = CorrectStage::Waiting;
            Outcome::Send(command(form, true))
        }
        (CorrectStage::Editing { .. }, key) => {
            form.editor.key(key);
            form.stage = CorrectStage::Editing { error: None };
            Outcome::Stay
        }
        (CorrectStage::Waiting, _) => Outcome::Stay,
        // A dry run that says the correction would be refused offers no confirm.
        (CorrectStage::Preview(p), Key::Char('y') | Key::Enter) if p.refused.is_none() => {
            Outcome::Submit(command(form, false))
        }
        (CorrectStage::Preview(_) | CorrectStage::Failed(_), Key::Char('e' | 'n') | Key::Enter) => {
            form.stage = CorrectStage::Editing { error: None };
            Outcome::Stay
        }
        (CorrectStage::Preview(_) | CorrectStage::Failed(_), Key::Tab) => {
            form.mode = form.mode.toggled();
            form.stage = CorrectStage::Editing { error: None };
            Outcome::Stay
        }
        _ => Outcome::Stay,
    }
}

fn preview_lines<'a>(p: &CorrectionPreview, theme: &Theme) -> Vec<Line<'a>> {
    if let Some(why) = &p.refused {
        let mut lines = vec![Line::styled(
            "This correction would be refused:",
            theme.style(Slot::StatusError),
        )];
        lines.extend(text_lines(why, theme.style(Slot::StatusError)));
        lines.push(Line::styled(
            "Edit the guidance, or Tab to the other mode.",
            theme.style(Slot::TextDim),
        ));
        return lines;
    }
    let mut lines = vec![Line::styled(
        format!(
            "This correction recomputes {} decision(s) (this one and what depends on it):",
            p.decisions.len()
        ),
        theme.style(Slot::Text),
    )];
    lines.extend(decision_refs(&p.decisions, 6, theme));
    let count = |label: &str, n: usize| labelled(label, n.to_string(), theme);
    lines.push(count("Steps run again", p.steps_rerun.len()));
    if !p.steps_replayed.is_empty() {
        lines.push(count("Steps replayed", p.steps_replayed.len()));
    }
    if !p.steps_may_rerun.is_empty() {
        lines.push(count("Steps that may run again", p.steps_may_rerun.len()));
    }
    if !p.child_plans.is_empty() {
        lines.push(count("Child plans recomputed", p.child_plans.len()));
    }
    let files = if p.files.is_empty() {
        "none".to_owned()
    } else if p.files.len() <= 4 {
        p.files.join(", ")
    } else {
        format!("{}, … ({} files)", p.files[..3].join(", "), p.files.len())
    };
    lines.push(labelled("Files redone", files, theme));
    if let Some(n) = p.estimated_model_calls {
        lines.push(labelled("Estimated model calls", n.to_string(), theme));
    }
    lines
}

pub(super) fn render(form: &CorrectForm, theme: &Theme, area: Rect, buf: &mut Buffer) {
    let rect = centered(area, 76, 20);
    Clear.render(rect, buf);
    let block = frame(
        &format!("Correct decision {}", form.decision_id),
        theme,
        false,
    )
    .padding(ratatui::widgets::Padding::horizontal(1));
    let inner = block.inner(rect);
    block.render(rect, buf);
    let mode = |m: CorrectionMode| {
        let style = if m == form.mode {
            theme.style(Slot::ListSelected)
        } else {
            theme.style(Slot::TextDim)
        };
        let mark = if m == form.mode { '●' } else { '○' };
        Span::styled(format!(" {mark} {} ", m.as_str()), style)
    };
    let head = vec![
        Line::styled(form.summary.clone(), theme.style(Slot::DecisionChosen)),
        Line::from(vec![
            Span::styled("Mode: ", theme.style(Slot::TextDim)),
            mode(CorrectionMode::Revert),
            Span::raw(" "),
            mode(CorrectionMode::Append),
            Span::styled(
                match form.mode {
                    CorrectionMode::Revert => "  replace it and recompute what follows",
                    CorrectionMode::Append => "  keep it, add the guidance on top",
                },
                theme.style(Slot::TextDim),
            ),
        ]),
    ];
    let [head_area, body, foot] = Layout::vertical([
        Constraint::Length(2),
        Constraint::Fill(1),
        Constraint::Length(2),
    ])
    .areas(inner);
    Paragraph::new(head).render(head_area, buf);
    let (hints, error): (&[(&str, &str)], Option<&str>) = match &form.stage {
        CorrectStage::Editing { error } => {
            let editor_block = Block::bordered()
                .border_style(theme.style(Slot::PaneBorderFocused))
                .title(Line::styled(" Guidance ", theme.style(Slot::PaneTitle)));
            let mut area = form.editor.0.clone();
            area.set_block(editor_block);
            area.set_style(theme.style(Slot::Text));
            area.set_cursor_style(
                theme
                    .style(Slot::ListSelected)
                    .add_modifier(ratatui::style::Modifier::REVERSED),
            );
            area.set_placeholder_text("What should the agent do differently?");
            Widget::render(&area, body, buf);
            (
                &[
                    ("Ctrl-s", "see impact"),
                    ("Tab", "mode"),
                    ("Enter", "new line"),
                    ("Esc", "cancel"),
                ],
                error.as_deref(),
            )
        }
        CorrectStage::Waiting => {
            Paragraph::new(Line::styled(
                "Computing the impact (agents plan correct --dry-run)…",
                theme.style(Slot::TextDim),
            ))
            .render(body, buf);
            (&[("Esc", "cancel")], None)
        }
        CorrectStage::Preview(preview) => {
            Paragraph::new(preview_lines(preview, theme))
                .wrap(Wrap { trim: false })
                .render(body, buf);
            if preview.refused.is_some() {
                (
                    &[("e/Enter", "edit"), ("Tab", "mode"), ("Esc", "cancel")],
                    None,
                )
            } else {
                (
                    &[("y/Enter", "correct"), ("e", "edit"), ("Esc", "cancel")],
                    None,
                )
            }
        }
        CorrectStage::Failed(message) => {
            let mut lines = vec![Line::styled(
                "The dry run failed:",
                theme.style(Slot::StatusError),
            )];
            lines.extend(text_lines(message, theme.style(Slot::StatusError)));
            Paragraph::new(lines)
                .wrap(Wrap { trim: false })
                .render(body, buf);
            (&[("e/Enter", "edit"), ("Esc", "cancel")], None)
        }
    };
    let mut foot_lines = vec![match error {
        Some(e) => Line::styled(e.to_owned(), theme.style(Slot::StatusError)),
        None => Line::default(),
    }];
    foot_lines.push(footer(hints, theme));
    Paragraph::new(foot_lines).render(foot, buf);
}
