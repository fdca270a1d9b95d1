//! Overlays: popups stacked over the panes. The topmost one consumes every key first.

use ratatui::buffer::Buffer;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, BorderType, Clear, Paragraph, Widget, Wrap};

use ratatui_textarea::TextArea;

use crate::keymap::{self, Keymap, Scope};
use crate::model::{
    ArgumentField, CheckpointItem, CorrectionMode, CorrectionPreview, DecisionRef, Explanation,
    short_id,
};
use crate::msg::{Cmd, Key};
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

/// The "use an action on a project" form.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UseForm {
    /// Action names.
    pub actions: Vec<String>,
    /// Project names.
    pub projects: Vec<String>,
    /// The arguments each action declares, by name.
    pub arguments: std::collections::BTreeMap<String, Vec<ArgumentField>>,
    /// Highlighted action.
    pub action: usize,
    /// Highlighted project.
    pub project: usize,
    /// Which part has the cursor.
    pub cursor: UseCursor,
    /// One value per argument of the highlighted action (its default to start with).
    pub values: Vec<String>,
    /// Why the last Enter was refused (a required argument left empty).
    pub error: Option<String>,
}

/// Where the cursor of the "use an action" form is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum UseCursor {
    /// The action list.
    Actions,
    /// The project list.
    Projects,
    /// The argument field at this index.
    Argument(usize),
}

impl UseForm {
    /// A form over the choices, on the first action and project.
    pub fn new(choices: crate::model::UseChoices) -> Self {
        let mut form = Self {
            actions: choices.actions,
            projects: choices.projects,
            arguments: choices.arguments,
            action: 0,
            project: 0,
            cursor: UseCursor::Actions,
            values: Vec::new(),
            error: None,
        };
        form.reset_values();
        form
    }

    /// The arguments of the highlighted action.
    pub fn fields(&self) -> &[ArgumentField] {
        self.actions
            .get(self.action)
            .and_then(|a| self.arguments.get(a))
            .map_or(&[], Vec::as_slice)
    }

    fn reset_values(&mut self) {
        self.values = self
            .fields()
            .iter()
            .map(|f| f.default.clone().unwrap_or_default())
            .collect();
    }

    /// Tab order: actions, projects, then each argument.
    fn next_cursor(&self, back: bool) -> UseCursor {
        let n = self.fields().len();
        let order: Vec<UseCursor> = [UseCursor::Actions, UseCursor::Projects]
            .into_iter()
            .chain((0..n).map(UseCursor::Argument))
            .collect();
        let at = order.iter().position(|c| *c == self.cursor).unwrap_or(0);
        let len = order.len();
        order[if back {
            (at + len - 1) % len
        } else {
            (at + 1) % len
        }]
    }

    /// Enter: the plan to create, or the first required argument left empty.
    fn submit(&mut self) -> Outcome {
        let (Some(action), Some(project)) = (
            self.actions.get(self.action).cloned(),
            self.projects.get(self.project).cloned(),
        ) else {
            return Outcome::Close;
        };
        let fields = self.fields().to_vec();
        if let Some(i) = fields
            .iter()
            .zip(&self.values)
            .position(|(f, v)| f.required && v.trim().is_empty())
        {
            self.error = Some(format!("`{}` is required", fields[i].name));
            self.cursor = UseCursor::Argument(i);
            return Outcome::Stay;
        }
        let args = fields
            .iter()
            .zip(&self.values)
            .filter(|(_, v)| !v.is_empty())
            .map(|(f, v)| (f.name.clone(), v.clone()))
            .collect();
        Outcome::Submit(Cmd::Use {
            action,
            project,
            args,
        })
    }

    fn key(&mut self, key: Key) -> Outcome {
        match (self.cursor, key) {
            (_, Key::Esc) => Outcome::Close,
            (_, Key::Enter) => self.submit(),
            (_, Key::Tab | Key::BackTab) => {
                self.cursor = self.next_cursor(key == Key::BackTab);
                Outcome::Stay
            }
            (UseCursor::Argument(i), key) => {
                match key {
                    Key::Char(c) => self.values[i].push(c),
                    Key::Backspace => {
                        self.values[i].pop();
                    }
                    Key::Up if i > 0 => self.cursor = UseCursor::Argument(i - 1),
                    Key::Down if i + 1 < self.values.len() => {
                        self.cursor = UseCursor::Argument(i + 1);
                    }
                    _ => return Outcome::Stay,
                }
                self.error = None;
                Outcome::Stay
            }
            (
                UseCursor::Actions | UseCursor::Projects,
                Key::Left | Key::Right | Key::Char('h' | 'l'),
            ) => {
                self.cursor = if self.cursor == UseCursor::Actions {
                    UseCursor::Projects
                } else {
                    UseCursor::Actions
                };
                Outcome::Stay
            }
            (UseCursor::Projects, key) => {
                move_index(&mut self.project, self.projects.len(), key);
                Outcome::Stay
            }
            (UseCursor::Actions, key) => {
                let before = self.action;
                move_index(&mut self.action, self.actions.len(), key);
                if self.action != before {
                    self.reset_values();
                    self.error = None;
                }
                Outcome::Stay
            }
        }
    }
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

/// The confirm overlay for rolling a plan back to a checkpoint.
fn rollback_confirm(plan_id: &str, cp: &CheckpointItem) -> Overlay {
    Overlay::Confirm {
        title: "Roll back?".to_owned(),
        body: format!(
            "Roll plan {} back to checkpoint #{} {} ({})?\nLater work in the sandbox is discarded \
             and its steps run again.",
            short_id(plan_id),
            cp.seq,
            cp.checkpoint_id,
            cp.label
        ),
        on_yes: Cmd::Rollback {
            plan_id: plan_id.to_owned(),
            checkpoint_id: cp.checkpoint_id.clone(),
        },
    }
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
            Self::Explain {
                explanation,
                scroll,
            } => match key {
                Key::Esc | Key::Enter | Key::Char('q') => Outcome::Close,
                Key::Char('j') | Key::Down => {
                    *scroll += 1;
                    Outcome::Stay
                }
                Key::Char('k') | Key::Up => {
                    *scroll = scroll.saturating_sub(1);
                    Outcome::Stay
                }
                Key::Char('c') => {
                    Outcome::Replace(Box::new(Overlay::Correct(Box::new(CorrectForm::new(
                        explanation.decision_id.clone(),
                        format!("{} → {}", explanation.decision_type, explanation.chosen),
                    )))))
                }
                _ => Outcome::Stay,
            },
            Self::Checkpoints {
                plan_id,
                items,
                selected,
            } => match key {
                Key::Esc => Outcome::Close,
                Key::Enter => match items.get(*selected) {
                    Some(cp) => Outcome::Replace(Box::new(rollback_confirm(plan_id, cp))),
                    None => Outcome::Close,
                },
                _ => {
                    move_index(selected, items.len(), key);
                    Outcome::Stay
                }
            },
            Self::Use(form) => form.key(key),
            Self::Correct(form) => correct_key(form, key),
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
            },
        }
    }
}

fn correct_key(form: &mut CorrectForm, key: Key) -> Outcome {
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

fn explanation_lines<'a>(e: &Explanation, theme: &Theme) -> Vec<Line<'a>> {
    let mut lines = vec![
        labelled("Decision", e.decision_id.clone(), theme),
        labelled(
            "Question",
            e.question
                .clone()
                .unwrap_or_else(|| "(not recorded)".to_owned()),
            theme,
        ),
    ];
    let mut chosen = labelled_lines("Chosen", &e.chosen, Slot::DecisionChosen, 12, theme);
    if let Some(c) = e.confidence {
        chosen[0].spans.push(Span::styled(
            format!("  (confidence {:.0}%)", (c.clamp(0.0, 1.0) * 100.0).round()),
            theme.style(Slot::TextDim),
        ));
    }
    lines.extend(chosen);
    if e.alternatives.is_empty() {
        lines.push(labelled("Alternatives", "none recorded".to_owned(), theme));
    } else {
        lines.push(Line::styled("Alternatives:", theme.style(Slot::TextDim)));
        for alt in &e.alternatives {
            lines.push(Line::styled(
                format!("  · {}", first_line(alt)),
                theme.style(Slot::Text),
            ));
        }
    }
    lines.extend(labelled_lines(
        "Rationale",
        e.rationale.as_deref().unwrap_or("(not recorded)"),
        Slot::Text,
        6,
        theme,
    ));
    if let Some(by) = &e.superseded_by {
        lines.push(Line::styled(
            format!("Superseded by decision {by}"),
            theme.style(Slot::StatusWarn),
        ));
    }
    lines.push(Line::default());
    let impact = match (e.impact.len(), e.impact_child_plans.len()) {
        (0, 0) => "nothing downstream depends on it".to_owned(),
        (1, 0) => "1 downstream decision".to_owned(),
        (n, 0) => format!("{n} downstream decisions"),
        (n, c) => format!("{n} downstream decisions, {c} child plan(s)"),
    };
    lines.push(labelled(
        "Impact of a correction",
        format!(
            "{impact}; {} step(s) run again, {} file(s) ({})",
            e.impact_steps,
            e.impact_files.len(),
            e.impact_level
        ),
        theme,
    ));
    lines.extend(decision_refs(&e.impact, 8, theme));
    for file in e.impact_files.iter().take(5) {
        lines.push(Line::styled(
            format!("  {file}"),
            theme.style(Slot::TextDim),
        ));
    }
    if e.impact_files.len() > 5 {
        lines.push(Line::styled(
            format!("  … {} more file(s)", e.impact_files.len() - 5),
            theme.style(Slot::TextDim),
        ));
    }
    for plan in &e.impact_child_plans {
        lines.push(Line::styled(
            format!("  child plan {}", short_id(plan)),
            theme.style(Slot::DecisionChildPlan),
        ));
    }
    lines
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

fn render_correct(form: &CorrectForm, theme: &Theme, area: Rect, buf: &mut Buffer) {
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

fn render_use(form: &UseForm, theme: &Theme, area: Rect, buf: &mut Buffer) {
    let rows = form.actions.len().max(form.projects.len()).min(12);
    let fields = form.fields();
    let args_height = if fields.is_empty() {
        0
    } else {
        fields.len() + 2
    };
    let rect = centered(
        area,
        72,
        u16::try_from(rows + 6 + args_height).unwrap_or(24),
    );
    Clear.render(rect, buf);
    let block = frame("Use an action on a project", theme, false)
        .padding(ratatui::widgets::Padding::horizontal(1));
    let inner = block.inner(rect);
    block.render(rect, buf);
    let [body, args, foot] = Layout::vertical([
        Constraint::Fill(1),
        Constraint::Length(u16::try_from(args_height).unwrap_or(0)),
        Constraint::Length(2),
    ])
    .areas(inner);
    let [left, right] = Layout::horizontal([Constraint::Fill(1), Constraint::Fill(1)])
        .spacing(2)
        .areas(body);
    let column = |title: &str, items: &[String], selected: usize, active: bool| {
        let mut lines = vec![Line::styled(
            title.to_owned(),
            theme.style(if active {
                Slot::PaneTitle
            } else {
                Slot::TextDim
            }),
        )];
        let height = usize::from(body.height.saturating_sub(1)).max(1);
        let offset = selected.saturating_sub(height - 1);
        for (i, item) in items.iter().enumerate().skip(offset).take(height) {
            lines.push(if i == selected {
                let slot = if active {
                    Slot::ListSelected
                } else {
                    Slot::Text
                };
                Line::styled(format!("» {item}"), theme.style(slot))
            } else {
                Line::styled(format!("  {item}"), theme.style(Slot::Text))
            });
        }
        Paragraph::new(lines)
    };
    column(
        "Action",
        &form.actions,
        form.action,
        form.cursor == UseCursor::Actions,
    )
    .render(left, buf);
    column(
        "Project",
        &form.projects,
        form.project,
        form.cursor == UseCursor::Projects,
    )
    .render(right, buf);
    if !fields.is_empty() {
        let on_args = matches!(form.cursor, UseCursor::Argument(_));
        let mut lines = vec![
            Line::default(),
            Line::styled(
                "Arguments (* required)",
                theme.style(if on_args {
                    Slot::PaneTitle
                } else {
                    Slot::TextDim
                }),
            ),
        ];
        let width = fields.iter().map(|f| f.name.len() + 1).max().unwrap_or(0);
        for (i, (field, value)) in fields.iter().zip(&form.values).enumerate() {
            let active = form.cursor == UseCursor::Argument(i);
            let name = format!("{}{}", field.name, if field.required { "*" } else { "" });
            let mut spans = vec![
                Span::styled(
                    format!("{} {name:<width$} ", if active { "»" } else { " " }),
                    theme.style(Slot::Text),
                ),
                Span::styled(
                    format!("[{value}{}]", if active { "▏" } else { "" }),
                    theme.style(if active {
                        Slot::ListSelected
                    } else {
                        Slot::Text
                    }),
                ),
            ];
            if let Some(d) = &field.description {
                spans.push(Span::styled(format!("  {d}"), theme.style(Slot::TextDim)));
            }
            lines.push(Line::from(spans));
        }
        Paragraph::new(lines).render(args, buf);
    }
    let first = match &form.error {
        Some(e) => Line::styled(e.clone(), theme.style(Slot::StatusError)),
        None => Line::default(),
    };
    Paragraph::new(vec![
        first,
        footer(
            &[
                ("j/k", "move"),
                ("Tab", "next field"),
                ("Enter", "create plan"),
                ("Esc", "cancel"),
            ],
            theme,
        ),
    ])
    .render(foot, buf);
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
        Overlay::Help => render_help(keymap, theme, area, buf),
        Overlay::Explain {
            explanation,
            scroll,
        } => {
            let mut lines = explanation_lines(explanation, theme);
            let skip = (*scroll).min(lines.len().saturating_sub(1));
            lines.drain(..skip);
            lines.push(Line::default());
            lines.push(footer(
                &[("c", "correct it"), ("j/k", "scroll"), ("Esc", "close")],
                theme,
            ));
            let title = format!("Why {}", explanation.decision_type);
            render_box(&title, lines, theme, false, area, buf);
        }
        Overlay::Correct(form) => render_correct(form, theme, area, buf),
        Overlay::Use(form) => render_use(form, theme, area, buf),
        Overlay::Checkpoints {
            plan_id,
            items,
            selected,
        } => render_checkpoints(plan_id, items, *selected, theme, area, buf),
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

/// The checkpoint list a rollback chooses from, scrolled to keep the selection in view.
fn render_checkpoints(
    plan_id: &str,
    items: &[CheckpointItem],
    selected: usize,
    theme: &Theme,
    area: Rect,
    buf: &mut Buffer,
) {
    let height = usize::from(area.height.saturating_sub(6)).max(1);
    let offset = selected.saturating_sub(height - 1);
    let mut lines: Vec<Line> = items
        .iter()
        .enumerate()
        .skip(offset)
        .take(height)
        .map(|(i, cp)| {
            let text = format!(
                "#{:<3} {:<5} {} · {} file(s) · {}",
                cp.seq,
                cp.label,
                cp.taken,
                cp.files_changed,
                cp.step.as_deref().unwrap_or("-"),
            );
            if i == selected {
                Line::styled(format!("» {text}"), theme.style(Slot::ListSelected))
            } else {
                Line::styled(format!("  {text}"), theme.style(Slot::Text))
            }
        })
        .collect();
    lines.push(Line::default());
    lines.push(footer(
        &[
            ("j/k", "move"),
            ("Enter", "roll back to it"),
            ("Esc", "cancel"),
        ],
        theme,
    ));
    render_box(
        &format!("Checkpoints of plan {}", short_id(plan_id)),
        lines,
        theme,
        false,
        area,
        buf,
    );
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
fn render_help(keymap: &Keymap, theme: &Theme, area: Rect, buf: &mut Buffer) {
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
