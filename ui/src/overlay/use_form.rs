//! The "use an action on a project" form: pick an action, a project and an automation profile,
//! fill the action's arguments, create the plan (`agents plan use`).

use ratatui::buffer::Buffer;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Clear, Paragraph, Widget};

use super::{Outcome, centered, footer, frame, move_index};
use crate::model::ArgumentField;
use crate::msg::{Cmd, Key};
use crate::theme::{Slot, Theme};

/// The "use an action on a project" form.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UseForm {
    /// Action names.
    pub actions: Vec<String>,
    /// Project names.
    pub projects: Vec<String>,
    /// The arguments each action declares, by name.
    pub arguments: std::collections::BTreeMap<String, Vec<ArgumentField>>,
    /// The registered automation profiles.
    pub profiles: Vec<String>,
    /// The configured default profile, if any (shown with the default choice).
    pub configured_profile: Option<String>,
    /// The chosen profile: 0 is the default (no `--automation-profile`), `n` is
    /// `profiles[n - 1]`.
    pub profile: usize,
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
    /// The automation profile.
    Profile,
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
            profiles: choices.profiles,
            configured_profile: choices.configured_profile,
            profile: 0,
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

    /// The chosen profile's name, `None` for the default.
    pub fn chosen_profile(&self) -> Option<&str> {
        self.profile
            .checked_sub(1)
            .and_then(|i| self.profiles.get(i))
            .map(String::as_str)
    }

    /// What the default choice means, as `agents plan use` without `--automation-profile`
    /// resolves it: the action's profile, else the project's, else the configured one, else
    /// `manual`.
    pub fn default_profile_hint(&self) -> String {
        format!(
            "the action's, else the project's, else {}",
            self.configured_profile.as_deref().unwrap_or("manual")
        )
    }

    /// Tab order: actions, projects, the profile, then each argument.
    fn next_cursor(&self, back: bool) -> UseCursor {
        let n = self.fields().len();
        let order: Vec<UseCursor> = [UseCursor::Actions, UseCursor::Projects]
            .into_iter()
            .chain((!self.profiles.is_empty()).then_some(UseCursor::Profile))
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
            profile: self.chosen_profile().map(str::to_owned),
            args,
        })
    }

    pub(super) fn key(&mut self, key: Key) -> Outcome {
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
            (UseCursor::Profile, key) => {
                let key = match key {
                    Key::Right | Key::Char('l') => Key::Down,
                    Key::Left | Key::Char('h') => Key::Up,
                    other => other,
                };
                move_index(&mut self.profile, self.profiles.len() + 1, key);
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

pub(super) fn render(form: &UseForm, theme: &Theme, area: Rect, buf: &mut Buffer) {
    let rows = form.actions.len().max(form.projects.len()).min(12);
    let fields = form.fields();
    let args_height = if fields.is_empty() {
        0
    } else {
        fields.len() + 2
    };
    let profile_height = if form.profiles.is_empty() { 0 } else { 2 };
    let rect = centered(
        area,
        72,
        u16::try_from(rows + 6 + profile_height + args_height).unwrap_or(24),
    );
    Clear.render(rect, buf);
    let block = frame("Use an action on a project", theme, false)
        .padding(ratatui::widgets::Padding::horizontal(1));
    let inner = block.inner(rect);
    block.render(rect, buf);
    let [body, profile, args, foot] = Layout::vertical([
        Constraint::Fill(1),
        Constraint::Length(u16::try_from(profile_height).unwrap_or(0)),
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
    if !form.profiles.is_empty() {
        render_profile(form, theme, profile, buf);
    }
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

/// The profile field: `default` (with what it means) or the chosen profile.
fn render_profile(form: &UseForm, theme: &Theme, area: Rect, buf: &mut Buffer) {
    let active = form.cursor == UseCursor::Profile;
    let mut spans = vec![
        Span::styled(
            format!("{} Profile ", if active { "»" } else { " " }),
            theme.style(if active {
                Slot::PaneTitle
            } else {
                Slot::TextDim
            }),
        ),
        Span::styled(
            format!("‹ {} ›", form.chosen_profile().unwrap_or("default")),
            theme.style(if active {
                Slot::ListSelected
            } else {
                Slot::Text
            }),
        ),
    ];
    if form.chosen_profile().is_none() {
        spans.push(Span::styled(
            format!("  {}", form.default_profile_hint()),
            theme.style(Slot::TextDim),
        ));
    }
    Paragraph::new(vec![Line::default(), Line::from(spans)]).render(area, buf);
}
