//! The UI's protocol: [`Msg`] goes in, [`Cmd`] comes out.
//!
//! Key presses are abstracted as [`Key`] so that tests (and recordings) do not depend on the
//! terminal library; [`Key::from_crossterm`] converts a real key event.

use ratatui::crossterm::event::{KeyCode, KeyEvent, KeyEventKind, KeyModifiers};
use serde::{Deserialize, Serialize};

use crate::model::Pane;

use crate::highlight::HighlightResult;
use crate::model::{
    ApprovalItem, CheckpointItem, CorrectionMode, CorrectionPreview, DecisionNode, DiffView,
    Explanation, LiveUpdate, PlanRow, ReviewMark, UseChoices,
};

/// A mouse action, in terminal cells (0-based, from the top-left corner).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Mouse {
    /// Left button pressed at (column, row).
    Click(u16, u16),
    /// Wheel turned up over (column, row).
    ScrollUp(u16, u16),
    /// Wheel turned down over (column, row).
    ScrollDown(u16, u16),
}

impl Mouse {
    /// Converts a crossterm mouse event; `None` for moves, drags and other buttons.
    pub fn from_crossterm(event: ratatui::crossterm::event::MouseEvent) -> Option<Self> {
        use ratatui::crossterm::event::{MouseButton, MouseEventKind};
        let (x, y) = (event.column, event.row);
        match event.kind {
            MouseEventKind::Down(MouseButton::Left) => Some(Self::Click(x, y)),
            MouseEventKind::ScrollUp => Some(Self::ScrollUp(x, y)),
            MouseEventKind::ScrollDown => Some(Self::ScrollDown(x, y)),
            _ => None,
        }
    }
}

/// A key press, as the UI understands it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Key {
    /// A printable character (shifted characters arrive as their shifted form, e.g. `G`).
    Char(char),
    /// A character typed with Control held, always lower case (`Ctrl('c')`).
    Ctrl(char),
    /// Enter / Return.
    Enter,
    /// Escape.
    Esc,
    /// Tab.
    Tab,
    /// Shift-Tab.
    BackTab,
    /// Backspace.
    Backspace,
    /// Arrow up.
    Up,
    /// Arrow down.
    Down,
    /// Arrow left.
    Left,
    /// Arrow right.
    Right,
    /// Home.
    Home,
    /// End.
    End,
    /// Page up.
    PageUp,
    /// Page down.
    PageDown,
    /// Delete (forward).
    Delete,
}

impl Key {
    /// Converts a crossterm key event; returns `None` for key releases and keys the UI ignores.
    pub fn from_crossterm(event: KeyEvent) -> Option<Self> {
        if event.kind == KeyEventKind::Release {
            return None;
        }
        let ctrl = event.modifiers.contains(KeyModifiers::CONTROL);
        let key = match event.code {
            KeyCode::Char(c) if ctrl => Self::Ctrl(c.to_ascii_lowercase()),
            KeyCode::Char(c) => Self::Char(c),
            KeyCode::Enter => Self::Enter,
            KeyCode::Esc => Self::Esc,
            KeyCode::Tab if event.modifiers.contains(KeyModifiers::SHIFT) => Self::BackTab,
            KeyCode::Tab => Self::Tab,
            KeyCode::BackTab => Self::BackTab,
            KeyCode::Backspace => Self::Backspace,
            KeyCode::Up => Self::Up,
            KeyCode::Down => Self::Down,
            KeyCode::Left => Self::Left,
            KeyCode::Right => Self::Right,
            KeyCode::Home => Self::Home,
            KeyCode::End => Self::End,
            KeyCode::PageUp => Self::PageUp,
            KeyCode::PageDown => Self::PageDown,
            KeyCode::Delete => Self::Delete,
            _ => return None,
        };
        Some(key)
    }

    /// How the key is written in help text (`q`, `Tab`, `Ctrl-c`, `↑`).
    pub fn label(self) -> String {
        match self {
            Self::Char(' ') => "Space".to_owned(),
            Self::Char(c) => c.to_string(),
            Self::Ctrl(c) => format!("Ctrl-{c}"),
            Self::Enter => "Enter".to_owned(),
            Self::Esc => "Esc".to_owned(),
            Self::Tab => "Tab".to_owned(),
            Self::BackTab => "Shift-Tab".to_owned(),
            Self::Backspace => "Backspace".to_owned(),
            Self::Up => "↑".to_owned(),
            Self::Down => "↓".to_owned(),
            Self::Left => "←".to_owned(),
            Self::Right => "→".to_owned(),
            Self::Home => "Home".to_owned(),
            Self::End => "End".to_owned(),
            Self::PageUp => "PgUp".to_owned(),
            Self::PageDown => "PgDn".to_owned(),
            Self::Delete => "Del".to_owned(),
        }
    }
}

/// Everything that can happen to the UI.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum Msg {
    /// The user pressed a key.
    Key(Key),
    /// The full, current list of plans.
    PlansUpdated(Vec<PlanRow>),
    /// The decision tree of a plan (dropped unless that plan is selected).
    TreeUpdated {
        /// The plan the tree belongs to.
        plan_id: String,
        /// The root decisions.
        nodes: Vec<DecisionNode>,
    },
    /// The sandbox diff of a plan (dropped unless that plan is selected).
    DiffUpdated {
        /// The plan the diff belongs to.
        plan_id: String,
        /// The changes.
        diff: DiffView,
    },
    /// The full, current list of pending approvals across all plans.
    ApprovalsUpdated(Vec<ApprovalItem>),
    /// The explanation of a decision, answering [`Cmd::ExplainDecision`].
    Explanation(Explanation),
    /// The dry-run impact of a correction, answering [`Cmd::PreviewCorrection`]: the preview,
    /// or the message of the command that failed.
    CorrectionPreview {
        /// The decision being corrected.
        decision_id: String,
        /// The impact, or why it could not be computed.
        result: Result<CorrectionPreview, String>,
    },
    /// A plan's checkpoints, answering [`Cmd::ListCheckpoints`].
    Checkpoints {
        /// The plan.
        plan_id: String,
        /// Its live checkpoints, oldest first.
        items: Vec<CheckpointItem>,
    },
    /// What the "use an action" form offers, answering [`Cmd::ListUseChoices`].
    UseChoices(UseChoices),
    /// Commands this TUI started that are still running (one line each), for the status bar
    /// and the quit question.
    Activity(Vec<String>),
    /// A [`Cmd::Use`] this TUI sent ended: the plan it created (then selected, if the form's
    /// plan was not selected yet), or `None` when no plan was created.
    UseEnded {
        /// The action used.
        action: String,
        /// The project used.
        project: String,
        /// The plan created.
        plan_id: Option<String>,
    },
    /// A command this TUI started finished; shown in the status line.
    Finished {
        /// Whether it succeeded (exit 0, or 3 for "waiting for you").
        ok: bool,
        /// One line saying what happened.
        text: String,
    },
    /// What a plan this TUI drives is doing right now, for the live area.
    Live {
        /// The plan.
        plan_id: String,
        /// What it did.
        update: LiveUpdate,
    },
    /// Syntax and intraline highlights for some hunks (dropped unless they belong to the
    /// diff shown now).
    Highlighted(HighlightResult),
    /// The mouse was used.
    Mouse(Mouse),
    /// The terminal has this size, in cells (sent at start and on every resize).
    Resize {
        /// Columns.
        width: u16,
        /// Rows.
        height: u16,
    },
    /// Select this plan (for example from `agents tui --plan ID`); ignored if it is unknown.
    SelectPlan(String),
    /// Move the focus to a pane (for example from `agents tui --focus diff`).
    Focus(Pane),
    /// The engine refused or failed a command; shown as a popup.
    Error {
        /// One-line headline.
        title: String,
        /// What happened and what to do next.
        detail: String,
    },
}

/// Everything the UI can ask of the engine.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Cmd {
    /// The user selected a plan: stream its decision tree and diff.
    SelectPlan(String),
    /// Approve a pending approval.
    Approve {
        /// The approval answered.
        approval_id: String,
    },
    /// Reject a pending approval.
    Reject {
        /// The approval answered.
        approval_id: String,
        /// Why, in the user's words.
        reason: String,
    },
    /// Answer a pending approval by choosing one of its options.
    Choose {
        /// The approval answered.
        approval_id: String,
        /// The chosen option, verbatim from [`crate::model::ApprovalItem::options`].
        option: String,
    },
    /// Give the plan guidance in answer to a pending approval.
    Guidance {
        /// The approval answered.
        approval_id: String,
        /// The plan that receives the guidance.
        plan_id: String,
        /// The guidance, in the user's words.
        text: String,
    },
    /// Fetch the explanation of a decision (answered by [`Msg::Explanation`]).
    ExplainDecision {
        /// The plan the decision belongs to.
        plan_id: String,
        /// The decision to explain.
        decision_id: String,
    },
    /// Run the plan's next phase: `agents plan execute PLAN`.
    Execute {
        /// The plan.
        plan_id: String,
    },
    /// Apply the plan's changes after the user reviewed the diff and confirmed:
    /// `agents plan apply --yes PLAN`.
    Apply {
        /// The plan.
        plan_id: String,
    },
    /// Cancel the plan (confirmed): `agents plan cancel PLAN`.
    Cancel {
        /// The plan.
        plan_id: String,
    },
    /// List the plan's checkpoints (answered by [`Msg::Checkpoints`]): `agents plan checkpoints`.
    ListCheckpoints {
        /// The plan.
        plan_id: String,
    },
    /// Roll the plan back to a checkpoint (confirmed):
    /// `agents plan rollback --yes PLAN CHECKPOINT`.
    Rollback {
        /// The plan.
        plan_id: String,
        /// The checkpoint (`cp_...`).
        checkpoint_id: String,
    },
    /// Give a plan guidance: `agents plan prompt PLAN TEXT`.
    Prompt {
        /// The plan.
        plan_id: String,
        /// The guidance.
        text: String,
    },
    /// List the actions and projects the "use" form offers (answered by [`Msg::UseChoices`]):
    /// `agents action list`, `agents project list`.
    ListUseChoices,
    /// Use an action on a project, creating a plan:
    /// `agents plan use ACTION PROJECT [--automation-profile PROFILE] [--arg NAME=VALUE]...`.
    /// Answered by [`Msg::UseEnded`] (and [`Msg::Finished`]).
    Use {
        /// The action's name.
        action: String,
        /// The project's name.
        project: String,
        /// The automation profile chosen; `None` for the default (as without
        /// `--automation-profile`).
        profile: Option<String>,
        /// The arguments given, in the action's order (empty values left out).
        args: Vec<(String, String)>,
    },
    /// Compute what a correction would recompute, without changing anything (answered by
    /// [`Msg::CorrectionPreview`]): `agents plan correct --dry-run --format json`.
    PreviewCorrection {
        /// The decision to correct.
        decision_id: String,
        /// Revert or append.
        mode: CorrectionMode,
        /// The user's guidance.
        guidance: String,
    },
    /// Correct a decision (after the preview and a confirm):
    /// `agents plan correct --mode MODE --guidance TEXT --yes DECISION`.
    Correct {
        /// The decision to correct.
        decision_id: String,
        /// Revert or append.
        mode: CorrectionMode,
        /// The user's guidance.
        guidance: String,
    },
    /// Mark review items of a plan's diff (`docs/review.md`): `agents plan review PLAN
    /// --accept|--reject|--reset ID... [--reason TEXT]`.
    Review {
        /// The plan.
        plan_id: String,
        /// The items' ids ([`crate::model::ReviewItem::id`]).
        item_ids: Vec<String>,
        /// The mark ([`ReviewMark::Pending`] resets).
        mark: ReviewMark,
        /// Why, when given.
        reason: Option<String>,
    },
    /// Leave the TUI (interrupting the commands it started, which leave their plans queued).
    Quit,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(code: KeyCode, modifiers: KeyModifiers) -> KeyEvent {
        KeyEvent::new(code, modifiers)
    }

    #[test]
    fn crossterm_keys_convert() {
        let none = KeyModifiers::NONE;
        assert_eq!(
            Key::from_crossterm(event(KeyCode::Char('q'), none)),
            Some(Key::Char('q'))
        );
        assert_eq!(
            Key::from_crossterm(event(KeyCode::Char('G'), KeyModifiers::SHIFT)),
            Some(Key::Char('G'))
        );
        assert_eq!(
            Key::from_crossterm(event(KeyCode::Char('C'), KeyModifiers::CONTROL)),
            Some(Key::Ctrl('c'))
        );
        assert_eq!(
            Key::from_crossterm(event(KeyCode::Tab, KeyModifiers::SHIFT)),
            Some(Key::BackTab)
        );
        assert_eq!(
            Key::from_crossterm(event(KeyCode::BackTab, none)),
            Some(Key::BackTab)
        );
        assert_eq!(
            Key::from_crossterm(event(KeyCode::Tab, none)),
            Some(Key::Tab)
        );
        assert_eq!(Key::from_crossterm(event(KeyCode::F(5), none)), None);
    }

    #[test]
    fn key_releases_are_ignored() {
        let mut release = event(KeyCode::Char('q'), KeyModifiers::NONE);
        release.kind = KeyEventKind::Release;
        assert_eq!(Key::from_crossterm(release), None);
    }

    #[test]
    fn key_labels() {
        assert_eq!(Key::Char(' ').label(), "Space");
        assert_eq!(Key::Ctrl('c').label(), "Ctrl-c");
        assert_eq!(Key::BackTab.label(), "Shift-Tab");
        assert_eq!(Key::Down.label(), "↓");
    }
}
