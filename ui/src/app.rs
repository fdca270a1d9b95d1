//! The application state and its pure update function.

use ratatui::layout::{Constraint, Layout, Rect};

use crate::highlight::HighlightRequest;
use crate::keymap::{Action, Keymap};
use crate::model::{DiffView, ReviewCounts, ReviewMark, short_id};
use crate::msg::{Cmd, Key, Mouse, Msg};
use crate::overlay::{CorrectForm, CorrectStage, Editor, InputPurpose, Outcome, Overlay, UseForm};
use crate::panes::Pane;
use crate::panes::approvals::{ApprovalsPane, Moved};
use crate::panes::diff::DiffPane;
use crate::panes::live::LiveArea;
use crate::panes::plans::{FilterOutcome, PlansPane};
use crate::panes::tree::TreePane;

/// How a status-line notice should look.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Level {
    /// Something worked.
    Ok,
    /// Something needs attention.
    Warn,
    /// Something failed.
    Error,
}

/// A one-line message in the status line, cleared by the next key press.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Notice {
    /// How it should look.
    pub level: Level,
    /// The message.
    pub text: String,
}

/// The whole UI state. Update it with [`App::update`], draw it with [`crate::render()`].
#[derive(Clone, Debug, PartialEq)]
pub struct App {
    focus: Pane,
    zoomed: bool,
    overlays: Vec<Overlay>,
    plans: PlansPane,
    tree: TreePane,
    diff: DiffPane,
    approvals: ApprovalsPane,
    live: LiveArea,
    notice: Option<Notice>,
    quitting: bool,
    keymap: Keymap,
    size: Option<(u16, u16)>,
    running: Vec<String>,
    last_error: Option<String>,
    errors: Vec<String>,
    apply_review: Option<String>,
    /// A plan chosen by message (`--plan`, the quickstart) whose first approval is selected
    /// once the approvals arrive.
    approvals_of: Option<String>,
    /// The plan the use form asked for, selected once it is listed.
    new_plan: Option<NewPlanWatch>,
}

/// A plan asked for with the use form ([`Cmd::Use`]), to be selected when it is listed: the
/// command creates it and then drives it (Strategize may take minutes), so the plan is
/// recognised as soon as it is listed, by what it was made of, and by its id once the command
/// ends.
#[derive(Clone, Debug, PartialEq)]
struct NewPlanWatch {
    action: String,
    project: String,
    /// The plans listed when it was asked for.
    known: Vec<String>,
    /// Its id, once the command ended.
    plan_id: Option<String>,
}

/// How many errors the errors overlay keeps.
pub const KEPT_ERRORS: usize = 20;

impl Default for App {
    fn default() -> Self {
        Self::new()
    }
}

impl App {
    /// A fresh UI with the default keymap: plans focused, nothing loaded yet.
    pub fn new() -> Self {
        Self::with_keymap(Keymap::default())
    }

    /// A fresh UI with a keymap (from the user's keymap file).
    pub fn with_keymap(keymap: Keymap) -> Self {
        Self {
            focus: Pane::Plans,
            zoomed: false,
            overlays: Vec::new(),
            plans: PlansPane::default(),
            tree: TreePane::default(),
            diff: DiffPane::default(),
            approvals: ApprovalsPane::default(),
            live: LiveArea::default(),
            notice: None,
            quitting: false,
            keymap,
            size: None,
            running: Vec::new(),
            last_error: None,
            errors: Vec::new(),
            apply_review: None,
            approvals_of: None,
            new_plan: None,
        }
    }

    /// The focused pane.
    pub fn focus(&self) -> Pane {
        self.focus
    }

    /// Whether only the focused pane is shown.
    pub fn is_zoomed(&self) -> bool {
        self.zoomed
    }

    /// The overlay stack, bottom first; the last one receives keys.
    pub fn overlays(&self) -> &[Overlay] {
        &self.overlays
    }

    /// The plans pane.
    pub fn plans(&self) -> &PlansPane {
        &self.plans
    }

    /// The decision tree pane.
    pub fn tree(&self) -> &TreePane {
        &self.tree
    }

    /// The diff pane.
    pub fn diff(&self) -> &DiffPane {
        &self.diff
    }

    /// The approvals pane.
    pub fn approvals(&self) -> &ApprovalsPane {
        &self.approvals
    }

    /// The status-line notice, if any.
    pub fn notice(&self) -> Option<&Notice> {
        self.notice.as_ref()
    }

    /// The keymap in use.
    pub fn keymap(&self) -> &Keymap {
        &self.keymap
    }

    /// The live area (what a plan this TUI drives is doing now).
    pub fn live(&self) -> &LiveArea {
        &self.live
    }

    /// Commands this TUI started that still run, one line each.
    pub fn running(&self) -> &[String] {
        &self.running
    }

    /// The last error reported, for the status bar.
    pub fn last_error(&self) -> Option<&str> {
        self.last_error.as_deref()
    }

    /// The plan whose diff is being reviewed before apply, if any.
    pub fn apply_review(&self) -> Option<&str> {
        self.apply_review.as_deref()
    }

    /// Whether the user asked to quit (a [`Cmd::Quit`] was emitted).
    pub fn is_quitting(&self) -> bool {
        self.quitting
    }

    /// The highlights the diff pane needs for what it shows now, unless already requested;
    /// `syntax_theme` is the theme's [`crate::Theme::syntax`]. The caller hands the request to
    /// a [`crate::highlight::Worker`] and feeds its results back as [`Msg::Highlighted`].
    pub fn take_highlight_request(
        &mut self,
        syntax_theme: Option<&str>,
    ) -> Option<HighlightRequest> {
        let height = self.diff_height();
        self.diff.highlight_request(height, syntax_theme)
    }

    /// The screen, once known (the main area above the status bar).
    fn main_area(&self) -> Option<ratatui::layout::Rect> {
        let (w, h) = self.size?;
        Some(ratatui::layout::Rect::new(0, 0, w, h.saturating_sub(1)))
    }

    fn area_of(&self, pane: Pane) -> Option<ratatui::layout::Rect> {
        let main = self.main_area()?;
        if self.zoomed {
            return (pane == self.focus).then_some(main);
        }
        pane_areas(self, main)
            .into_iter()
            .find(|(p, _)| *p == pane)
            .map(|(_, r)| r)
    }

    /// Rows of the diff pane's text (a guess of 40 before the first resize).
    fn diff_height(&self) -> usize {
        let pane = if self.zoomed { self.focus } else { Pane::Diff };
        match (pane, self.area_of(Pane::Diff)) {
            (Pane::Diff, Some(r)) => usize::from(r.height.saturating_sub(2)),
            _ => 40,
        }
    }

    /// Applies one message and returns the commands for the engine, in order.
    pub fn update(&mut self, msg: Msg) -> Vec<Cmd> {
        match msg {
            Msg::Key(key) => self.on_key(key),
            Msg::PlansUpdated(rows) => {
                let moved = self.plans.set_rows(rows);
                let chosen = self.select_new_plan();
                self.after_plan_selection(moved || chosen)
            }
            Msg::UseEnded {
                action,
                project,
                plan_id,
            } => self.on_use_ended(&action, &project, plan_id),
            Msg::TreeUpdated { plan_id, nodes } => {
                self.tree.set_nodes(&plan_id, nodes);
                Vec::new()
            }
            Msg::DiffUpdated { plan_id, diff } => {
                self.diff.set_diff(&plan_id, diff);
                Vec::new()
            }
            Msg::Highlighted(result) => {
                self.diff.set_highlights(result);
                Vec::new()
            }
            Msg::ApprovalsUpdated(items) => {
                self.on_approvals(items);
                Vec::new()
            }
            Msg::Explanation(explanation) => {
                self.overlays.push(Overlay::Explain {
                    explanation: Box::new(explanation),
                    scroll: 0,
                });
                Vec::new()
            }
            Msg::CorrectionPreview {
                decision_id,
                result,
            } => {
                let waiting = self.overlays.iter_mut().rev().find_map(|o| match o {
                    Overlay::Correct(form)
                        if form.decision_id == decision_id
                            && form.stage == CorrectStage::Waiting =>
                    {
                        Some(form)
                    }
                    _ => None,
                });
                if let Some(form) = waiting {
                    form.stage = match result {
                        Ok(preview) => CorrectStage::Preview(preview),
                        Err(message) => CorrectStage::Failed(message),
                    };
                }
                Vec::new()
            }
            Msg::Checkpoints { plan_id, items } => {
                if items.is_empty() {
                    self.warn(&format!(
                        "Plan {} has no checkpoints to roll back to.",
                        self.plans.short(&plan_id)
                    ));
                } else {
                    let selected = items.len() - 1;
                    self.overlays.push(Overlay::Checkpoints {
                        plan_id,
                        items,
                        selected,
                    });
                }
                Vec::new()
            }
            Msg::UseChoices(choices) => {
                if choices.actions.is_empty() || choices.projects.is_empty() {
                    self.overlays.push(Overlay::Message {
                        title: "Nothing to use yet".to_owned(),
                        body: format!(
                            "{} available action(s), {} project(s).\nAdd them with `agents action add FILE` \
                             and `agents project create NAME`, then press u again.",
                            choices.actions.len(),
                            choices.projects.len()
                        ),
                        is_error: false,
                    });
                } else {
                    self.overlays.push(Overlay::Use(UseForm::new(choices)));
                }
                Vec::new()
            }
            Msg::Live { plan_id, update } => {
                self.live.push(&plan_id, update);
                Vec::new()
            }
            Msg::Activity(running) => {
                self.running = running;
                Vec::new()
            }
            Msg::Finished { ok, text } => {
                if !ok {
                    self.last_error = Some(text.clone());
                    self.remember_error(text.clone());
                }
                self.notice = Some(Notice {
                    level: if ok { Level::Ok } else { Level::Error },
                    text,
                });
                Vec::new()
            }
            Msg::Mouse(mouse) => self.on_mouse(mouse),
            Msg::Resize { width, height } => {
                self.size = Some((width, height));
                Vec::new()
            }
            Msg::SelectPlan(id) => {
                let changed = self.plans.select(&id);
                // The approvals queue opens on this plan's approval, not on another plan's.
                if !self.approvals.select_plan(&id) {
                    self.approvals_of = Some(id);
                }
                self.after_plan_selection(changed)
            }
            Msg::Focus(pane) => self.set_focus(pane),
            Msg::Error { title, detail } => {
                self.last_error = Some(match detail.lines().next() {
                    Some(first) if !first.is_empty() => format!("{title}: {first}"),
                    _ => title.clone(),
                });
                self.remember_error(if detail.is_empty() {
                    title.clone()
                } else {
                    format!("{title}\n{detail}")
                });
                self.overlays.push(Overlay::Message {
                    title,
                    body: detail,
                    is_error: true,
                });
                Vec::new()
            }
        }
    }

    /// Keeps an error, whole, for the errors overlay (the last [`KEPT_ERRORS`]).
    fn remember_error(&mut self, text: String) {
        if self.errors.len() == KEPT_ERRORS {
            self.errors.remove(0);
        }
        self.errors.push(text);
    }

    /// The errors kept for the errors overlay, oldest first.
    pub fn errors(&self) -> &[String] {
        &self.errors
    }

    fn warn(&mut self, text: &str) {
        self.notice = Some(Notice {
            level: Level::Warn,
            text: text.to_owned(),
        });
    }

    /// A new approval queue: the selection moves as [`ApprovalsPane`] says (the status line
    /// tells when it moved to another plan); a popup answering an approval that left closes.
    fn on_approvals(&mut self, items: Vec<crate::model::ApprovalItem>) {
        if let Moved::ToAnotherPlan { from, to } = self.approvals.set_items(items) {
            self.warn(&format!(
                "Nothing else waits for plan {}; the cursor is on plan {}'s approval.",
                self.plans.short(&from),
                self.plans.short(&to)
            ));
        }
        if let Some(plan) = &self.approvals_of
            && self.approvals.select_plan(plan)
        {
            self.approvals_of = None;
        }
        let before = self.overlays.len();
        let approvals = &self.approvals;
        self.overlays
            .retain(|o| o.approval_id().is_none_or(|id| approvals.contains(id)));
        if self.overlays.len() < before {
            self.warn("That approval was answered elsewhere.");
        }
    }

    /// The use form's command ended: select the plan it created (if not selected yet), or
    /// forget the request when none was created.
    fn on_use_ended(&mut self, action: &str, project: &str, plan_id: Option<String>) -> Vec<Cmd> {
        let Some(watch) = self
            .new_plan
            .as_mut()
            .filter(|w| w.action == action && w.project == project)
        else {
            return Vec::new();
        };
        match plan_id {
            Some(id) => {
                watch.plan_id = Some(id);
                let chosen = self.select_new_plan();
                self.after_plan_selection(chosen)
            }
            None => {
                self.new_plan = None;
                Vec::new()
            }
        }
    }

    /// Selects the plan the use form asked for if it is listed now (once); returns whether the
    /// selection changed.
    fn select_new_plan(&mut self) -> bool {
        let Some(watch) = &self.new_plan else {
            return false;
        };
        let found = self.plans.rows().iter().find(|r| match &watch.plan_id {
            Some(id) => r.plan_id == *id,
            None => {
                r.action == watch.action
                    && r.project == watch.project
                    && !watch.known.contains(&r.plan_id)
            }
        });
        let Some(id) = found.map(|r| r.plan_id.clone()) else {
            return false;
        };
        self.new_plan = None;
        self.plans.reveal(&id)
    }

    fn after_plan_selection(&mut self, changed: bool) -> Vec<Cmd> {
        if !changed {
            return Vec::new();
        }
        let selected = self.plans.selected_id().map(str::to_owned);
        self.tree.reset(selected.clone());
        self.diff.reset(selected.clone());
        if self.apply_review.is_some() && self.apply_review != selected {
            self.apply_review = None;
            self.zoomed = false;
        }
        selected.map(Cmd::SelectPlan).into_iter().collect()
    }

    fn on_key(&mut self, key: Key) -> Vec<Cmd> {
        self.notice = None;
        if key == Key::Ctrl('c') {
            // A second Ctrl-C at the quit question quits without more questions.
            let asking = matches!(
                self.overlays.last(),
                Some(Overlay::Confirm {
                    on_yes: Cmd::Quit,
                    ..
                })
            );
            if asking {
                self.quitting = true;
                return vec![Cmd::Quit];
            }
            return self.quit();
        }
        if self.overlays.is_empty() && self.plans.is_editing_filter() {
            return match self.plans.filter_key(key) {
                FilterOutcome::Edited { selection_changed } => {
                    self.after_plan_selection(selection_changed)
                }
                FilterOutcome::Done => Vec::new(),
            };
        }
        if let Some(top) = self.overlays.last_mut() {
            return match top.handle_key(key) {
                Outcome::Stay => Vec::new(),
                Outcome::Close => {
                    self.overlays.pop();
                    Vec::new()
                }
                Outcome::Replace(next) => {
                    self.overlays.pop();
                    self.overlays.push(*next);
                    Vec::new()
                }
                Outcome::Send(cmd) => vec![cmd],
                Outcome::Submit(cmd) => {
                    self.overlays.pop();
                    if cmd == Cmd::Quit {
                        self.quitting = true;
                    } else {
                        if let Cmd::Use {
                            action, project, ..
                        } = &cmd
                        {
                            self.new_plan = Some(NewPlanWatch {
                                action: action.clone(),
                                project: project.clone(),
                                known: self
                                    .plans
                                    .rows()
                                    .iter()
                                    .map(|r| r.plan_id.clone())
                                    .collect(),
                                plan_id: None,
                            });
                        }
                        if matches!(cmd, Cmd::Apply { .. }) {
                            // Back where the review started, as Esc leaves it.
                            self.apply_review = None;
                            self.zoomed = false;
                            self.focus = Pane::Plans;
                        }
                        self.notice = Some(Notice {
                            level: Level::Ok,
                            text: sent(&cmd, &self.plans),
                        });
                        if let Cmd::Review {
                            item_ids,
                            mark,
                            reason,
                            ..
                        } = &cmd
                        {
                            self.diff.set_marks(item_ids, *mark, reason.as_deref());
                        }
                    }
                    vec![cmd]
                }
            };
        }
        if let Some(plan_id) = self.apply_review.clone() {
            match key {
                Key::Esc => {
                    self.apply_review = None;
                    self.zoomed = false;
                    self.focus = Pane::Plans;
                    return Vec::new();
                }
                Key::Enter | Key::Char('A') => {
                    self.confirm_apply(&plan_id);
                    return Vec::new();
                }
                _ => {}
            }
        }
        let Some(action) = self.keymap.lookup(self.focus, key) else {
            return Vec::new();
        };
        match action {
            Action::Quit => self.quit(),
            Action::Help => {
                self.overlays.push(Overlay::Help);
                Vec::new()
            }
            Action::ShowErrors => {
                let body = if self.errors.is_empty() {
                    "No errors since the TUI started.".to_owned()
                } else {
                    self.errors
                        .iter()
                        .rev()
                        .map(String::as_str)
                        .collect::<Vec<_>>()
                        .join("\n\n")
                };
                self.overlays.push(Overlay::Message {
                    title: format!("Last errors (newest first, {})", self.errors.len()),
                    body,
                    is_error: !self.errors.is_empty(),
                });
                Vec::new()
            }
            Action::FocusNext => self.set_focus(self.focus.next()),
            Action::FocusPrev => self.set_focus(self.focus.prev()),
            Action::Focus(pane) => self.set_focus(pane),
            Action::ToggleZoom => {
                self.zoomed = !self.zoomed;
                Vec::new()
            }
            Action::UseAction => vec![Cmd::ListUseChoices],
            _ => self.pane_action(action),
        }
    }

    fn quit(&mut self) -> Vec<Cmd> {
        if self.running.is_empty() {
            self.quitting = true;
            return vec![Cmd::Quit];
        }
        let mut body = format!(
            "{} command(s) started here still run:\n",
            self.running.len()
        );
        for line in &self.running {
            body.push_str(&format!("  {line}\n"));
        }
        body.push_str(
            "Quitting stops them cooperatively; their plans stay queued (reason: interrupted).",
        );
        self.overlays.push(Overlay::Confirm {
            title: "Quit?".to_owned(),
            body,
            on_yes: Cmd::Quit,
        });
        Vec::new()
    }

    fn set_focus(&mut self, pane: Pane) -> Vec<Cmd> {
        self.focus = pane;
        Vec::new()
    }

    fn selected_plan(&mut self) -> Option<String> {
        let id = self.plans.selected_id().map(str::to_owned);
        if id.is_none() {
            self.warn("No plan is selected.");
        }
        id
    }

    fn confirm_apply(&mut self, plan_id: &str) {
        let project = self
            .plans
            .rows()
            .iter()
            .find(|r| r.plan_id == plan_id)
            .map(|r| r.project.clone())
            .unwrap_or_default();
        let diff = self
            .diff
            .diff()
            .filter(|_| self.diff.plan_id() == Some(plan_id));
        let body = match (diff, diff.and_then(DiffView::review_counts)) {
            (Some(d), Some(c)) if c.any_marked() => {
                partial_apply_body(&self.plans.short(plan_id), &project, d, c)
            }
            (Some(d), _) => format!(
                "Apply plan {} to {project}: {} file(s), +{} -{}?\nValidations run first; then one commit lands in the project.",
                self.plans.short(plan_id),
                d.files.len(),
                d.added(),
                d.removed()
            ),
            (None, _) => format!(
                "Apply plan {} to {project}: changes not loaded?\nValidations run first; then one commit lands in the project.",
                self.plans.short(plan_id)
            ),
        };
        self.overlays.push(Overlay::Confirm {
            title: "Apply?".to_owned(),
            body,
            on_yes: Cmd::Apply {
                plan_id: plan_id.to_owned(),
            },
        });
    }

    fn pane_action(&mut self, action: Action) -> Vec<Cmd> {
        match self.focus {
            Pane::Plans => self.plans_action(action),
            Pane::Tree => self.tree_action(action),
            Pane::Diff => self.diff_action(action),
            Pane::Approvals => {
                self.approval_action(action);
                Vec::new()
            }
        }
    }

    fn diff_action(&mut self, action: Action) -> Vec<Cmd> {
        match action {
            Action::AcceptHunk
            | Action::RejectHunk
            | Action::AcceptFile
            | Action::ResetHunk
            | Action::MarkReviewed
            | Action::CorrectHunk => self.review_action(action),
            _ => {
                let page = self.diff_height();
                self.diff.handle(action, page);
                Vec::new()
            }
        }
    }

    /// The marking keys of the diff pane (`docs/review.md`): each mark shows at once and goes
    /// to the engine as [`Cmd::Review`].
    fn review_action(&mut self, action: Action) -> Vec<Cmd> {
        let (Some(plan_id), Some((file, hunk, item))) = (
            self.diff.plan_id().map(str::to_owned),
            self.diff.current_item().map(|(f, h, i)| (f, h, i.clone())),
        ) else {
            self.warn("Nothing to review here: the changes are not loaded, or already applied.");
            return Vec::new();
        };
        let Some(diff) = self.diff.diff() else {
            return Vec::new();
        };
        let f = &diff.files[file];
        let what = match hunk {
            Some(h) => format!("{} of {}", f.hunks[h].header(), f.path),
            None => f.path.clone(),
        };
        let decision = hunk.and_then(|h| f.hunks[h].decision_ids.last().cloned());
        match action {
            Action::AcceptHunk => {
                let cmds = self.mark(plan_id, vec![item.id], ReviewMark::Accepted, None);
                self.diff.next_item();
                cmds
            }
            Action::ResetHunk => self.mark(plan_id, vec![item.id], ReviewMark::Pending, None),
            Action::MarkReviewed => {
                let cmds = self.mark(plan_id, vec![item.id], ReviewMark::Reviewed, None);
                self.diff.next_item();
                cmds
            }
            Action::AcceptFile => {
                let ids = self.diff.pending_items_of(file);
                if ids.is_empty() {
                    self.warn("Nothing pending is left in this file.");
                    return Vec::new();
                }
                let cmds = self.mark(plan_id, ids, ReviewMark::Accepted, None);
                self.diff.next_file_after(file);
                cmds
            }
            Action::RejectHunk => {
                self.overlays.push(Overlay::Input {
                    title: "Reject".to_owned(),
                    prompt: format!(
                        "Reject {what}?\nWhy (optional; it becomes the guidance if you correct the decision that produced it):"
                    ),
                    text: item.reason.unwrap_or_default(),
                    error: None,
                    purpose: InputPurpose::ReviewReason {
                        plan_id,
                        item_ids: vec![item.id],
                    },
                });
                Vec::new()
            }
            _ => {
                if item.mark != ReviewMark::Rejected {
                    self.warn("Reject it first (x): its reason becomes the correction's guidance.");
                    return Vec::new();
                }
                let Some(decision) = decision else {
                    self.warn("No recorded decision produced this change; correct one from the decisions pane (2).");
                    return Vec::new();
                };
                let mut form =
                    CorrectForm::new(decision, format!("the decision that produced {what}"));
                form.editor = Editor::with_text(item.reason.as_deref().unwrap_or_default());
                self.overlays.push(Overlay::Correct(Box::new(form)));
                Vec::new()
            }
        }
    }

    /// Shows a mark at once and sends it.
    fn mark(
        &mut self,
        plan_id: String,
        item_ids: Vec<String>,
        mark: ReviewMark,
        reason: Option<String>,
    ) -> Vec<Cmd> {
        self.diff.set_marks(&item_ids, mark, reason.as_deref());
        vec![Cmd::Review {
            plan_id,
            item_ids,
            mark,
            reason,
        }]
    }

    fn plans_action(&mut self, action: Action) -> Vec<Cmd> {
        match action {
            Action::Filter => {
                self.plans.start_filter();
                Vec::new()
            }
            Action::Execute => match self.selected_plan() {
                Some(plan_id) => {
                    self.notice = Some(Notice {
                        level: Level::Ok,
                        text: format!("Running plan execute {}…", self.plans.short(&plan_id)),
                    });
                    vec![Cmd::Execute { plan_id }]
                }
                None => Vec::new(),
            },
            Action::Apply => {
                if let Some(plan_id) = self.selected_plan() {
                    self.apply_review = Some(plan_id);
                    self.focus = Pane::Diff;
                    self.zoomed = true;
                    self.notice = Some(Notice {
                        level: Level::Warn,
                        text: "Review: Space accept · x reject · A/Enter apply · Esc back"
                            .to_owned(),
                    });
                }
                Vec::new()
            }
            Action::Cancel => {
                if let Some(plan_id) = self.selected_plan() {
                    self.overlays.push(Overlay::Confirm {
                        title: "Cancel plan?".to_owned(),
                        body: format!(
                            "Cancel plan {}? The process running it stops; the sandbox is kept.",
                            self.plans.short(&plan_id)
                        ),
                        on_yes: Cmd::Cancel { plan_id },
                    });
                }
                Vec::new()
            }
            Action::Rollback => self
                .selected_plan()
                .map(|plan_id| Cmd::ListCheckpoints { plan_id })
                .into_iter()
                .collect(),
            Action::Prompt => {
                if let Some(plan_id) = self.selected_plan() {
                    self.overlays.push(Overlay::Input {
                        title: "Guidance".to_owned(),
                        prompt: format!(
                            "Guidance for plan {} (agents plan prompt):",
                            self.plans.short(&plan_id)
                        ),
                        text: String::new(),
                        error: None,
                        purpose: InputPurpose::Prompt { plan_id },
                    });
                }
                Vec::new()
            }
            _ => {
                let changed = self.plans.handle(action);
                self.after_plan_selection(changed)
            }
        }
    }

    fn tree_action(&mut self, action: Action) -> Vec<Cmd> {
        match action {
            Action::Correct => {
                match self.tree.selected_node() {
                    Some(node) => {
                        let form = CorrectForm::new(
                            node.decision_id.clone(),
                            format!("{} → {}", node.decision_type, node.chosen),
                        );
                        self.overlays.push(Overlay::Correct(Box::new(form)));
                    }
                    None => self.warn("No decision is selected."),
                }
                Vec::new()
            }
            _ => {
                let explain = self.tree.handle(action);
                match (explain, self.tree.plan_id()) {
                    (Some(decision_id), Some(plan_id)) => vec![Cmd::ExplainDecision {
                        plan_id: plan_id.to_owned(),
                        decision_id,
                    }],
                    _ => Vec::new(),
                }
            }
        }
    }

    fn on_mouse(&mut self, mouse: Mouse) -> Vec<Cmd> {
        if !self.overlays.is_empty() {
            return Vec::new();
        }
        let (Mouse::Click(x, y) | Mouse::ScrollUp(x, y) | Mouse::ScrollDown(x, y)) = mouse;
        let pos = ratatui::layout::Position::new(x, y);
        let Some((pane, rect)) = Pane::ALL
            .into_iter()
            .filter_map(|p| self.area_of(p).map(|r| (p, r)))
            .find(|(_, r)| r.contains(pos))
        else {
            return Vec::new();
        };
        self.focus = pane;
        match mouse {
            Mouse::ScrollUp(..) | Mouse::ScrollDown(..) => {
                let action = if matches!(mouse, Mouse::ScrollUp(..)) {
                    Action::Up
                } else {
                    Action::Down
                };
                (0..3).flat_map(|_| self.pane_action(action)).collect()
            }
            Mouse::Click(..) => {
                // Rows below the border (and the header of tables); lists scroll like ratatui
                // does, keeping the selection on the last visible row.
                let header = u16::from(matches!(pane, Pane::Plans | Pane::Approvals));
                let top = rect.y + 1 + header;
                let height = usize::from(rect.height.saturating_sub(2 + header)).max(1);
                if y < top || y >= rect.bottom().saturating_sub(1) {
                    return Vec::new();
                }
                let row = usize::from(y - top);
                match pane {
                    Pane::Plans => {
                        let offset = self
                            .plans
                            .shown_index()
                            .unwrap_or(0)
                            .saturating_sub(height - 1);
                        let changed = self.plans.select_shown(offset + row);
                        self.after_plan_selection(changed)
                    }
                    Pane::Approvals => {
                        self.approvals.select_row(row, height);
                        Vec::new()
                    }
                    Pane::Tree => {
                        self.tree.select_row(row, height);
                        Vec::new()
                    }
                    Pane::Diff => Vec::new(),
                }
            }
        }
    }

    fn approval_action(&mut self, action: Action) {
        if !matches!(
            action,
            Action::Approve | Action::Reject | Action::Choose | Action::Guidance
        ) {
            self.approvals.handle(action);
            return;
        }
        let Some(item) = self.approvals.selected() else {
            self.warn("No approval is selected.");
            return;
        };
        let plan = self.plans.rows().iter().find(|p| p.plan_id == item.plan_id);
        let plan_name = match plan {
            Some(p) => format!("plan {} ({})", self.plans.short(&item.plan_id), p.action),
            None => format!("plan {}", self.plans.short(&item.plan_id)),
        };
        let project = plan.map_or_else(String::new, |p| format!(" on {}", p.project));
        let context = format!(
            "{}{project}\n{} · {}",
            capitalize(&plan_name),
            item.kind.label(),
            item.summary
        );
        let overlay = match action {
            Action::Approve => Overlay::Confirm {
                title: format!("Approve {plan_name}?"),
                body: context,
                on_yes: Cmd::Approve {
                    approval_id: item.approval_id.clone(),
                },
            },
            Action::Reject => Overlay::Input {
                title: "Reject".to_owned(),
                prompt: format!("{context}\nWhy are you rejecting this?"),
                text: String::new(),
                error: None,
                purpose: InputPurpose::RejectReason {
                    approval_id: item.approval_id.clone(),
                },
            },
            Action::Guidance => Overlay::Input {
                title: "Guidance".to_owned(),
                prompt: format!("{context}\nWhat should the plan do?"),
                text: String::new(),
                error: None,
                purpose: InputPurpose::Guidance {
                    approval_id: item.approval_id.clone(),
                    plan_id: item.plan_id.clone(),
                },
            },
            _ if item.options.is_empty() => {
                self.warn("This approval has no options: approve (a) or reject (r) it.");
                return;
            }
            _ => Overlay::Choice {
                title: format!("Choose · {}", item.summary),
                approval_id: item.approval_id.clone(),
                options: item.options.clone(),
                selected: 0,
            },
        };
        self.overlays.push(overlay);
    }
}

/// The apply question once items are marked: only the accepted part, file by file, and
/// what is left out.
/// `plan` is the plan's id as shown.
fn partial_apply_body(plan: &str, project: &str, d: &DiffView, c: ReviewCounts) -> String {
    let files: Vec<String> = d
        .files
        .iter()
        .filter_map(|f| {
            let items: Vec<_> = f.review_items().collect();
            let accepted = items
                .iter()
                .filter(|i| i.mark == ReviewMark::Accepted)
                .count();
            (accepted > 0)
                .then(|| format!("  {} {} ({accepted}/{})", f.status, f.path, items.len()))
        })
        .collect();
    format!(
        "Apply only the accepted part of plan {} to {project}: {} of {} item(s) in {} file(s)?\n{}\nLeft out, kept in the sandbox: {} rejected, {} pending.\nValidations run first on exactly that; then one commit lands in the project.",
        plan,
        c.accepted,
        c.total(),
        files.len(),
        files.join("\n"),
        c.rejected,
        c.pending
    )
}

/// `text` with its first letter in upper case.
fn capitalize(text: &str) -> String {
    let mut chars = text.chars();
    chars.next().map_or_else(String::new, |first| {
        first.to_uppercase().chain(chars).collect()
    })
}

/// What the status bar says of `cmd`, sent; plans named as `plan list` names them.
fn sent(cmd: &Cmd, plans: &PlansPane) -> String {
    match cmd {
        Cmd::Approve { approval_id } => format!("Approval sent for {}.", short_id(approval_id)),
        Cmd::Reject { approval_id, .. } => format!("Rejection sent for {}.", short_id(approval_id)),
        Cmd::Choose {
            approval_id,
            option,
        } => {
            format!("Choice {option:?} sent for {}.", short_id(approval_id))
        }
        Cmd::Guidance { approval_id, .. } => {
            format!("Guidance sent for {}.", short_id(approval_id))
        }
        Cmd::Apply { plan_id } => format!("Applying plan {}…", plans.short(plan_id)),
        Cmd::Cancel { plan_id } => format!("Cancelling plan {}…", plans.short(plan_id)),
        Cmd::Rollback {
            plan_id,
            checkpoint_id,
        } => format!(
            "Rolling plan {} back to {checkpoint_id}…",
            plans.short(plan_id)
        ),
        Cmd::Prompt { plan_id, .. } => format!("Guidance sent to plan {}.", plans.short(plan_id)),
        Cmd::Use {
            action,
            project,
            profile: Some(profile),
            ..
        } => format!("Creating a plan: {action} on {project} (profile {profile})…"),
        Cmd::Use {
            action, project, ..
        } => format!("Creating a plan: {action} on {project}…"),
        Cmd::Correct {
            decision_id, mode, ..
        } => format!("Correcting decision {decision_id} ({})…", mode.as_str()),
        Cmd::Review {
            item_ids,
            mark: ReviewMark::Rejected,
            ..
        } => format!(
            "Rejected {} item(s). c: correct the decision that produced it; n: next hunk.",
            item_ids.len()
        ),
        Cmd::Review { item_ids, mark, .. } => {
            format!("Marked {} item(s) {}.", item_ids.len(), mark.as_str())
        }
        other => format!("Sent {other:?}."),
    }
}

/// Where each pane goes when all four are shown: plans across the top, decisions and diff side
/// by side in the middle, approvals across the bottom. The plans and approvals panes take the
/// rows their lists need (header and borders included), capped so the middle keeps most of the
/// height.
pub fn pane_areas(app: &App, area: Rect) -> [(Pane, Rect); 4] {
    layout(app, area).0
}

/// Rows the live area takes at most (borders included), and at most this share of the middle.
const LIVE_ROWS: u16 = 8;

/// The panes' areas and, while it has something to show, the live area's: a strip under the
/// decisions and diff panes (see [`pane_areas`]).
pub fn layout(app: &App, area: Rect) -> ([(Pane, Rect); 4], Option<Rect>) {
    let fit = |items: usize, percent: u32| {
        let cap = u16::try_from(u32::from(area.height) * percent / 100)
            .unwrap_or(u16::MAX)
            .max(4);
        u16::try_from(items + 3).unwrap_or(u16::MAX).clamp(4, cap)
    };
    let [plans, middle, approvals] = Layout::vertical([
        Constraint::Length(fit(app.plans().rows().len(), 35)),
        Constraint::Fill(1),
        Constraint::Length(fit(app.approvals().items().len(), 30)),
    ])
    .areas(area);
    let (middle, live) = if app.live().is_empty() {
        (middle, None)
    } else {
        let rows = LIVE_ROWS.min(middle.height / 2).max(3);
        let [top, live] =
            Layout::vertical([Constraint::Fill(1), Constraint::Length(rows)]).areas(middle);
        (top, Some(live))
    };
    let [tree, diff] =
        Layout::horizontal([Constraint::Percentage(50), Constraint::Fill(1)]).areas(middle);
    (
        [
            (Pane::Plans, plans),
            (Pane::Tree, tree),
            (Pane::Diff, diff),
            (Pane::Approvals, approvals),
        ],
        live,
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixtures;

    /// Feeds every message in order and returns all the commands emitted.
    fn run(app: &mut App, msgs: impl IntoIterator<Item = Msg>) -> Vec<Cmd> {
        msgs.into_iter().flat_map(|m| app.update(m)).collect()
    }

    fn keys(text: &str) -> Vec<Msg> {
        text.chars().map(|c| Msg::Key(Key::Char(c))).collect()
    }

    fn loaded() -> App {
        let mut app = App::new();
        let cmds = run(&mut app, fixtures::load_all());
        assert_eq!(cmds, [Cmd::SelectPlan(fixtures::PLAN_A.to_owned())]);
        app
    }

    #[test]
    fn q_quits() {
        let mut app = App::new();
        assert_eq!(app.update(Msg::Key(Key::Char('q'))), [Cmd::Quit]);
        assert!(app.is_quitting());
    }

    #[test]
    fn ctrl_c_quits_even_from_an_overlay() {
        let mut app = App::new();
        let cmds = run(
            &mut app,
            [Msg::Key(Key::Char('?')), Msg::Key(Key::Ctrl('c'))],
        );
        assert_eq!(cmds, [Cmd::Quit]);
    }

    #[test]
    fn tab_shift_tab_and_digits_move_focus() {
        let mut app = App::new();
        let mut seen = Vec::new();
        for key in [
            Key::Tab,
            Key::Tab,
            Key::Tab,
            Key::Tab,
            Key::BackTab,
            Key::Char('2'),
        ] {
            assert_eq!(app.update(Msg::Key(key)), []);
            seen.push(app.focus());
        }
        assert_eq!(
            seen,
            [
                Pane::Tree,
                Pane::Diff,
                Pane::Approvals,
                Pane::Plans,
                Pane::Approvals,
                Pane::Tree
            ]
        );
        app.update(Msg::Key(Key::Char('3')));
        assert_eq!(app.focus(), Pane::Diff);
    }

    #[test]
    fn z_zooms_the_focused_pane_and_focus_moves_while_zoomed() {
        let mut app = App::new();
        assert_eq!(run(&mut app, keys("z4")), []);
        assert!(app.is_zoomed());
        assert_eq!(app.focus(), Pane::Approvals);
        app.update(Msg::Key(Key::Char('z')));
        assert!(!app.is_zoomed());
    }

    #[test]
    fn help_overlay_swallows_keys_until_closed() {
        let mut app = loaded();
        let cmds = run(
            &mut app,
            [
                Msg::Key(Key::Char('?')),
                Msg::Key(Key::Char('j')),
                Msg::Key(Key::Tab),
            ],
        );
        assert_eq!(cmds, []);
        assert_eq!(app.overlays(), [Overlay::Help]);
        assert_eq!(app.focus(), Pane::Plans);
        assert_eq!(app.plans().selected_index(), Some(0));
        assert_eq!(app.update(Msg::Key(Key::Esc)), []);
        assert!(app.overlays().is_empty());
        assert_eq!(app.update(Msg::Key(Key::Char('q'))), [Cmd::Quit]);
    }

    #[test]
    fn moving_in_the_plans_list_selects_plans() {
        let mut app = loaded();
        let cmds = run(
            &mut app,
            [
                Key::Char('j'),
                Key::Down,
                Key::Char('k'),
                Key::Up,
                Key::Up,
                Key::End,
            ]
            .map(Msg::Key),
        );
        assert_eq!(
            cmds,
            [
                Cmd::SelectPlan(fixtures::PLAN_B.to_owned()),
                Cmd::SelectPlan(fixtures::PLAN_C.to_owned()),
                Cmd::SelectPlan(fixtures::PLAN_B.to_owned()),
                Cmd::SelectPlan(fixtures::PLAN_A.to_owned()),
                Cmd::SelectPlan(fixtures::PLAN_D.to_owned()),
            ]
        );
        assert_eq!(app.plans().selected_id(), Some(fixtures::PLAN_D));
        assert_eq!(app.tree().plan_id(), Some(fixtures::PLAN_D));
        assert_eq!(
            app.tree().nodes(),
            None,
            "old tree dropped, new one awaited"
        );
        assert_eq!(app.diff().diff(), None);
    }

    #[test]
    fn stale_tree_and_diff_are_dropped() {
        let mut app = loaded();
        app.update(Msg::Key(Key::Char('j')));
        let before = app.clone();
        let cmds = run(
            &mut app,
            [
                Msg::TreeUpdated {
                    plan_id: fixtures::PLAN_A.into(),
                    nodes: fixtures::decisions(),
                },
                Msg::DiffUpdated {
                    plan_id: fixtures::PLAN_A.into(),
                    diff: fixtures::diff(),
                },
            ],
        );
        assert_eq!(cmds, []);
        assert_eq!(app, before);
    }

    #[test]
    fn live_plan_updates_keep_the_selection() {
        let mut app = loaded();
        let mut plans = fixtures::plans();
        plans[0].elapsed_ms += 1000;
        plans.swap(0, 3);
        assert_eq!(app.update(Msg::PlansUpdated(plans)), []);
        assert_eq!(app.plans().selected_id(), Some(fixtures::PLAN_A));
        assert!(app.tree().nodes().is_some(), "tree kept for the same plan");
    }

    #[test]
    fn enter_in_the_tree_asks_for_an_explanation_and_shows_it() {
        let mut app = loaded();
        let cmds = run(
            &mut app,
            [Key::Char('2'), Key::Char('j'), Key::Enter].map(Msg::Key),
        );
        assert_eq!(
            cmds,
            [Cmd::ExplainDecision {
                plan_id: fixtures::PLAN_A.into(),
                decision_id: "D2".into()
            }]
        );
        app.update(Msg::Explanation(fixtures::explanation("D2")));
        assert!(matches!(app.overlays(), [Overlay::Explain { .. }]));
        assert_eq!(app.update(Msg::Key(Key::Esc)), []);
        assert!(app.overlays().is_empty());
    }

    #[test]
    fn approve_asks_for_confirmation() {
        let mut app = loaded();
        let cmds = run(
            &mut app,
            [
                Key::Char('4'),
                Key::Char('a'),
                Key::Char('n'),
                Key::Char('a'),
                Key::Char('y'),
            ]
            .map(Msg::Key),
        );
        assert_eq!(
            cmds,
            [Cmd::Approve {
                approval_id: "A1".into()
            }]
        );
        assert!(app.overlays().is_empty());
        assert_eq!(app.notice().map(|n| n.level), Some(Level::Ok));
        app.update(Msg::Key(Key::Char('j')));
        assert_eq!(app.notice(), None, "a key press clears the notice");
    }

    #[test]
    fn an_answered_approval_leaving_the_list_leaves_the_cursor_on_the_next_pending_one() {
        let mut app = loaded();
        let selected = |app: &App| app.approvals().selected().map(|a| a.approval_id.clone());
        // The user answers plan B's approval, the second of three.
        let cmds = run(&mut app, keys("4jay"));
        assert_eq!(
            cmds,
            [Cmd::Approve {
                approval_id: "A2".into()
            }]
        );
        // Plan B runs: its approval leaves the list; the cursor is on the one now in its
        // place, plan C's, and the status line says it is another plan's.
        let mut queue = fixtures::approvals();
        queue.remove(1);
        app.update(Msg::ApprovalsUpdated(queue.clone()));
        assert_eq!(selected(&app).as_deref(), Some("A3"));
        let notice = app.notice().map(|n| n.text.clone()).unwrap_or_default();
        assert!(
            notice.contains("01JDQ5A2") && notice.contains("01JDQ6B3"),
            "{notice}"
        );
        // The confirm of the next answer names that plan.
        run(&mut app, keys("a"));
        let Some(Overlay::Confirm { title, .. }) = app.overlays().last() else {
            panic!("{:?}", app.overlays())
        };
        assert!(title.contains("01JDQ6B3"), "{title}");
        run(&mut app, keys("n"));
        // The last row answered: the cursor goes up to the row above, never to none.
        queue.remove(1);
        app.update(Msg::ApprovalsUpdated(queue.clone()));
        assert_eq!(selected(&app).as_deref(), Some("A1"));
        app.update(Msg::ApprovalsUpdated(queue));
        assert_eq!(selected(&app).as_deref(), Some("A1"), "a refresh keeps it");
        // Only an empty queue selects nothing; the next approval to arrive is selected.
        app.update(Msg::ApprovalsUpdated(Vec::new()));
        assert_eq!(selected(&app), None);
        app.update(Msg::ApprovalsUpdated(fixtures::approvals()[2..].to_vec()));
        assert_eq!(selected(&app).as_deref(), Some("A3"));
    }

    #[test]
    fn the_approve_confirm_names_the_plan_its_action_and_project() {
        let mut app = loaded();
        run(&mut app, keys("4j"));
        app.update(Msg::Key(Key::Char('a')));
        let [Overlay::Confirm { title, body, .. }] = app.overlays() else {
            panic!("a confirm is open: {:?}", app.overlays());
        };
        let plan = &fixtures::plans()[1];
        assert_eq!(plan.plan_id, fixtures::PLAN_B);
        assert!(title.contains(short_id(fixtures::PLAN_B)), "{title}");
        assert!(title.contains(&plan.action), "{title}");
        assert!(body.contains(&plan.project), "{body}");
    }

    #[test]
    fn reject_needs_a_reason_and_typing_does_not_trigger_bindings() {
        let mut app = loaded();
        let mut msgs = vec![
            Msg::Key(Key::Char('4')),
            Msg::Key(Key::Char('r')),
            Msg::Key(Key::Enter),
        ];
        msgs.extend(keys("q? z"));
        msgs.push(Msg::Key(Key::Enter));
        let cmds = run(&mut app, msgs);
        assert_eq!(
            cmds,
            [Cmd::Reject {
                approval_id: "A1".into(),
                reason: "q? z".into()
            }]
        );
        assert_eq!(app.focus(), Pane::Approvals);
        assert!(!app.is_zoomed());
    }

    #[test]
    fn choose_picks_an_option_and_guidance_names_the_plan() {
        let mut app = loaded();
        let mut msgs = vec![Msg::Key(Key::Char('4')), Msg::Key(Key::Char('j'))];
        msgs.extend([Key::Char('c'), Key::Down, Key::Enter].map(Msg::Key));
        msgs.push(Msg::Key(Key::Char('g')));
        msgs.extend(keys("use the v2 API"));
        msgs.push(Msg::Key(Key::Enter));
        let cmds = run(&mut app, msgs);
        assert_eq!(
            cmds,
            [
                Cmd::Choose {
                    approval_id: "A2".into(),
                    option: "keep both".into()
                },
                Cmd::Guidance {
                    approval_id: "A2".into(),
                    plan_id: fixtures::PLAN_B.into(),
                    text: "use the v2 API".into(),
                },
            ]
        );
    }

    #[test]
    fn choose_without_options_explains_instead() {
        let mut app = loaded();
        let cmds = run(&mut app, keys("4c"));
        assert_eq!(cmds, []);
        assert!(app.overlays().is_empty());
        assert_eq!(app.notice().map(|n| n.level), Some(Level::Warn));
    }

    #[test]
    fn approval_keys_with_nothing_pending_do_nothing_but_say_so() {
        let mut app = App::new();
        app.update(Msg::ApprovalsUpdated(Vec::new()));
        assert_eq!(run(&mut app, keys("4arcg")), []);
        assert!(app.overlays().is_empty());
        assert_eq!(
            app.notice().map(|n| n.text.as_str()),
            Some("No approval is selected.")
        );
    }

    #[test]
    fn an_approval_answered_elsewhere_closes_its_popup() {
        let mut app = loaded();
        run(&mut app, keys("4a"));
        assert_eq!(app.overlays().len(), 1);
        let mut remaining = fixtures::approvals();
        remaining.remove(0);
        app.update(Msg::ApprovalsUpdated(remaining));
        assert!(app.overlays().is_empty());
        assert_eq!(app.notice().map(|n| n.level), Some(Level::Warn));
        assert_eq!(
            app.update(Msg::Key(Key::Char('y'))),
            [],
            "the stale confirm is gone"
        );
    }

    #[test]
    fn engine_errors_stack_over_other_overlays() {
        let mut app = loaded();
        app.update(Msg::Key(Key::Char('?')));
        app.update(Msg::Error {
            title: "Approve failed".into(),
            detail: "already answered".into(),
        });
        assert_eq!(app.overlays().len(), 2);
        app.update(Msg::Key(Key::Esc));
        assert_eq!(app.overlays(), [Overlay::Help]);
    }

    #[test]
    fn an_empty_plan_list_clears_the_selection_without_commands() {
        let mut app = loaded();
        assert_eq!(app.update(Msg::PlansUpdated(Vec::new())), []);
        assert_eq!(app.plans().selected_id(), None);
        assert_eq!(app.tree().plan_id(), None);
        assert_eq!(app.update(Msg::Key(Key::Char('j'))), []);
    }
}

#[cfg(test)]
mod launch_tests {
    use super::*;
    use crate::model::{Phase, PlanRow, ProcessingState};

    fn row(id: &str) -> PlanRow {
        PlanRow {
            plan_id: id.to_owned(),
            action: "local/a".to_owned(),
            project: "local/p".to_owned(),
            phase: Phase::Strategize,
            state: ProcessingState::Queued,
            elapsed_ms: 0,
            cost_usd: None,
            gate_rejected: false,
        }
    }

    #[test]
    fn a_plan_chosen_before_the_list_arrives_stays_selected() {
        let mut app = App::new();
        assert_eq!(app.update(Msg::SelectPlan("B".into())), Vec::<Cmd>::new());
        let cmds = app.update(Msg::PlansUpdated(vec![row("A"), row("B")]));
        assert_eq!(cmds, [Cmd::SelectPlan("B".into())]);
        assert_eq!(app.plans().selected_id(), Some("B"));
    }

    #[test]
    fn selecting_an_unknown_plan_changes_nothing() {
        let mut app = App::new();
        app.update(Msg::PlansUpdated(vec![row("A")]));
        assert_eq!(app.update(Msg::SelectPlan("Z".into())), Vec::<Cmd>::new());
        assert_eq!(app.plans().selected_id(), Some("A"));
    }

    #[test]
    fn focus_can_be_set_by_message() {
        let mut app = App::new();
        app.update(Msg::Focus(Pane::Approvals));
        assert_eq!(app.focus(), Pane::Approvals);
    }
}

#[cfg(test)]
mod action_tests {
    //! Key sequences in, the exact commands out: every keyboard action of the TUI (docs/tui.md).
    use super::*;
    use crate::fixtures::{self, PLAN_A, PLAN_B, PLAN_D};
    use crate::model::{CorrectionMode, Phase, PlanRow, ProcessingState};

    fn loaded() -> App {
        let mut app = App::new();
        for msg in fixtures::load_all() {
            app.update(msg);
        }
        app.update(Msg::Resize {
            width: 120,
            height: 40,
        });
        app
    }

    fn press(app: &mut App, keys: &[Key]) -> Vec<Cmd> {
        keys.iter().flat_map(|k| app.update(Msg::Key(*k))).collect()
    }

    fn typed(app: &mut App, text: &str) -> Vec<Cmd> {
        text.chars()
            .flat_map(|c| {
                let key = if c == '\n' { Key::Enter } else { Key::Char(c) };
                app.update(Msg::Key(key))
            })
            .collect()
    }

    fn top(app: &App) -> Option<&Overlay> {
        app.overlays().last()
    }

    #[test]
    fn correcting_a_decision_previews_its_impact_then_corrects_with_guidance_and_mode() {
        let mut app = loaded();
        assert_eq!(
            press(&mut app, &[Key::Char('2'), Key::Char('j'), Key::Char('c')]),
            []
        );
        assert!(matches!(top(&app), Some(Overlay::Correct(f)) if f.decision_id == "D2"));
        // Typing goes to the editor, bindings do not fire; Enter is a new line.
        assert_eq!(typed(&mut app, "use sqlx\nnot diesel q?"), []);
        assert_eq!(press(&mut app, &[Key::Tab]), [], "Tab switches to append");
        let cmds = press(&mut app, &[Key::Ctrl('s')]);
        let guidance = "use sqlx\nnot diesel q?".to_owned();
        assert_eq!(
            cmds,
            [Cmd::PreviewCorrection {
                decision_id: "D2".into(),
                mode: CorrectionMode::Append,
                guidance: guidance.clone(),
            }]
        );
        assert_eq!(
            press(&mut app, &[Key::Char('y')]),
            [],
            "no confirm before the impact"
        );
        app.update(Msg::CorrectionPreview {
            decision_id: "D2".into(),
            result: Ok(fixtures::preview()),
        });
        assert!(
            matches!(top(&app), Some(Overlay::Correct(f)) if matches!(f.stage, CorrectStage::Preview(_)))
        );
        assert_eq!(
            press(&mut app, &[Key::Char('y')]),
            [Cmd::Correct {
                decision_id: "D2".into(),
                mode: CorrectionMode::Append,
                guidance,
            }]
        );
        assert!(app.overlays().is_empty());
    }

    #[test]
    fn a_failed_dry_run_shows_its_message_and_lets_the_user_edit_or_leave() {
        let mut app = loaded();
        press(&mut app, &[Key::Char('2'), Key::Char('c')]);
        typed(&mut app, "redo it");
        assert_eq!(press(&mut app, &[Key::Ctrl('s')]).len(), 1);
        app.update(Msg::CorrectionPreview {
            decision_id: "D1".into(),
            result: Err("error: unrecognized subcommand 'correct'".into()),
        });
        let Some(Overlay::Correct(form)) = top(&app) else {
            panic!("{:?}", app.overlays())
        };
        assert_eq!(
            form.stage,
            CorrectStage::Failed("error: unrecognized subcommand 'correct'".into())
        );
        assert_eq!(
            press(&mut app, &[Key::Char('y')]),
            [],
            "y does not correct after a failure"
        );
        press(&mut app, &[Key::Char('e')]);
        assert!(
            matches!(top(&app), Some(Overlay::Correct(f)) if f.stage == CorrectStage::Editing { error: None })
        );
        assert_eq!(press(&mut app, &[Key::Esc]), []);
        assert!(app.overlays().is_empty());
    }

    #[test]
    fn a_plan_chosen_at_launch_selects_its_own_approval_not_the_first_in_the_queue() {
        let mut app = App::new();
        app.update(Msg::Focus(Pane::Approvals));
        app.update(Msg::SelectPlan(crate::fixtures::PLAN_C.into()));
        for msg in fixtures::load_all() {
            app.update(msg);
        }
        let selected = app.approvals().selected().expect("an approval is selected");
        assert_eq!(selected.plan_id, crate::fixtures::PLAN_C);
        assert_ne!(
            app.approvals().items()[0].plan_id,
            crate::fixtures::PLAN_C,
            "the queue starts with another plan's approval"
        );
        // Later updates keep what the user selects.
        press(&mut app, &[Key::Char('k')]);
        let moved = app.approvals().selected().map(|a| a.approval_id.clone());
        app.update(Msg::ApprovalsUpdated(fixtures::approvals()));
        assert_eq!(
            app.approvals().selected().map(|a| a.approval_id.clone()),
            moved
        );
    }

    #[test]
    fn a_dry_run_that_says_the_revert_is_refused_offers_no_confirm() {
        let mut app = loaded();
        press(&mut app, &[Key::Char('2'), Key::Char('c')]);
        typed(&mut app, "redo it");
        assert_eq!(press(&mut app, &[Key::Ctrl('s')]).len(), 1);
        let refused = crate::model::CorrectionPreview {
            refused: Some("plan 01JDQ4V6 is applied; a revert cannot change applied work".into()),
            ..fixtures::preview()
        };
        app.update(Msg::CorrectionPreview {
            decision_id: "D1".into(),
            result: Ok(refused),
        });
        assert_eq!(press(&mut app, &[Key::Char('y')]), [], "y does not correct");
        assert!(
            matches!(top(&app), Some(Overlay::Correct(f)) if matches!(f.stage, CorrectStage::Preview(_)))
        );
        assert_eq!(
            press(&mut app, &[Key::Enter]),
            [],
            "Enter goes back to editing"
        );
        assert!(
            matches!(top(&app), Some(Overlay::Correct(f)) if f.stage == CorrectStage::Editing { error: None })
        );
        // Tab to append and preview again: that one can be confirmed.
        press(&mut app, &[Key::Tab]);
        assert_eq!(press(&mut app, &[Key::Ctrl('s')]).len(), 1);
        app.update(Msg::CorrectionPreview {
            decision_id: "D1".into(),
            result: Ok(fixtures::preview()),
        });
        assert_eq!(press(&mut app, &[Key::Char('y')]).len(), 1);
    }

    #[test]
    fn empty_guidance_is_refused_in_the_editor() {
        let mut app = loaded();
        press(&mut app, &[Key::Char('2'), Key::Char('c')]);
        typed(&mut app, "   ");
        assert_eq!(press(&mut app, &[Key::Ctrl('s')]), []);
        assert!(matches!(
            top(&app),
            Some(Overlay::Correct(f)) if matches!(&f.stage, CorrectStage::Editing { error: Some(_) })
        ));
    }

    #[test]
    fn a_late_preview_for_a_closed_correction_is_ignored() {
        let mut app = loaded();
        press(&mut app, &[Key::Char('2'), Key::Char('c')]);
        typed(&mut app, "x");
        press(&mut app, &[Key::Ctrl('s'), Key::Esc]);
        app.update(Msg::CorrectionPreview {
            decision_id: "D1".into(),
            result: Ok(fixtures::preview()),
        });
        assert!(app.overlays().is_empty());
    }

    #[test]
    fn the_explanation_leads_to_a_correction() {
        let mut app = loaded();
        app.update(Msg::Explanation(fixtures::explanation("D2")));
        press(&mut app, &[Key::Char('j'), Key::Char('c')]);
        assert!(matches!(app.overlays(), [Overlay::Correct(f)] if f.decision_id == "D2"));
    }

    #[test]
    fn execute_runs_at_once() {
        let mut app = loaded();
        assert_eq!(
            press(&mut app, &[Key::Char('e')]),
            [Cmd::Execute {
                plan_id: PLAN_A.into()
            }]
        );
    }

    #[test]
    fn cancel_asks_first() {
        let mut app = loaded();
        assert_eq!(press(&mut app, &[Key::Char('x'), Key::Char('n')]), []);
        assert_eq!(
            press(&mut app, &[Key::Char('j'), Key::Char('x'), Key::Char('y')]),
            [
                Cmd::SelectPlan(PLAN_B.into()),
                Cmd::Cancel {
                    plan_id: PLAN_B.into()
                }
            ]
        );
    }

    #[test]
    fn rollback_lists_checkpoints_then_confirms_the_chosen_one() {
        let mut app = loaded();
        assert_eq!(
            press(&mut app, &[Key::Char('R')]),
            [Cmd::ListCheckpoints {
                plan_id: PLAN_A.into()
            }]
        );
        app.update(Msg::Checkpoints {
            plan_id: PLAN_A.into(),
            items: fixtures::checkpoints(),
        });
        assert!(matches!(
            top(&app),
            Some(Overlay::Checkpoints { selected: 2, .. })
        ));
        assert_eq!(press(&mut app, &[Key::Char('k'), Key::Enter]), []);
        assert!(matches!(top(&app), Some(Overlay::Confirm { .. })));
        assert_eq!(
            press(&mut app, &[Key::Char('y')]),
            [Cmd::Rollback {
                plan_id: PLAN_A.into(),
                checkpoint_id: "cp_00000002".into()
            }]
        );
    }

    #[test]
    fn a_plan_without_checkpoints_says_so() {
        let mut app = loaded();
        app.update(Msg::Checkpoints {
            plan_id: PLAN_A.into(),
            items: vec![],
        });
        assert!(app.overlays().is_empty());
        assert_eq!(app.notice().map(|n| n.level), Some(Level::Warn));
    }

    #[test]
    fn apply_shows_the_diff_for_review_then_confirms() {
        let mut app = loaded();
        assert_eq!(press(&mut app, &[Key::Char('A')]), []);
        assert_eq!(app.apply_review(), Some(PLAN_A));
        assert_eq!((app.focus(), app.is_zoomed()), (Pane::Diff, true));
        // Reviewing: the diff keys work; nothing is sent.
        assert_eq!(
            press(&mut app, &[Key::Char('n'), Key::Char('n'), Key::Char('v')]),
            []
        );
        assert_eq!(press(&mut app, &[Key::Char('A')]), []);
        assert!(matches!(top(&app), Some(Overlay::Confirm { title, .. }) if title == "Apply?"));
        assert_eq!(
            press(&mut app, &[Key::Char('y')]),
            [Cmd::Apply {
                plan_id: PLAN_A.into()
            }]
        );
        assert_eq!(app.apply_review(), None);
        assert!(!app.is_zoomed());
        assert_eq!(app.focus(), Pane::Plans, "the plans' keys act again");
    }

    fn review(plan_id: &str, ids: &[&str], mark: ReviewMark, reason: Option<&str>) -> Cmd {
        Cmd::Review {
            plan_id: plan_id.into(),
            item_ids: ids.iter().map(|i| (*i).to_owned()).collect(),
            mark,
            reason: reason.map(str::to_owned),
        }
    }

    #[test]
    fn reviewing_sends_every_mark_and_shows_it_at_once() {
        let mut app = loaded();
        app.update(Msg::DiffUpdated {
            plan_id: PLAN_A.into(),
            diff: fixtures::reviewed_diff(),
        });
        press(&mut app, &[Key::Char('3')]);
        // The first file's header: its first hunk is the current item.
        assert_eq!(
            app.diff().current_item().map(|c| (c.0, c.1)),
            Some((0, Some(0)))
        );
        assert_eq!(
            press(&mut app, &[Key::Char(' ')]),
            [review(
                PLAN_A,
                &["a1b2c3d4e5f6"],
                ReviewMark::Accepted,
                None
            )]
        );
        // Accepting moves to the next hunk; rejecting asks for an optional reason.
        assert_eq!(
            app.diff().current_item().map(|c| (c.0, c.1)),
            Some((0, Some(1)))
        );
        assert_eq!(press(&mut app, &[Key::Char('x')]), []);
        assert!(matches!(
            top(&app),
            Some(Overlay::Input {
                purpose: InputPurpose::ReviewReason { .. },
                ..
            })
        ));
        // The earlier reason is offered; clear it and send none.
        let clear: Vec<Key> = std::iter::repeat_n(Key::Backspace, 20).collect();
        press(&mut app, &clear);
        assert_eq!(
            press(&mut app, &[Key::Enter]),
            [review(
                PLAN_A,
                &["0f9e8d7c6b5a"],
                ReviewMark::Rejected,
                None
            )]
        );
        press(&mut app, &[Key::Char('x')]);
        press(&mut app, &clear);
        assert_eq!(
            typed(&mut app, "too broad\n"),
            [review(
                PLAN_A,
                &["0f9e8d7c6b5a"],
                ReviewMark::Rejected,
                Some("too broad")
            )]
        );
        let item = app.diff().current_item().map(|c| c.2.clone()).unwrap();
        assert_eq!(
            (item.mark, item.reason.as_deref()),
            (ReviewMark::Rejected, Some("too broad"))
        );
        // The rejected hunk offers correcting the decision that produced it, the reason as
        // the guidance.
        assert_eq!(press(&mut app, &[Key::Char('c')]), []);
        let Some(Overlay::Correct(form)) = top(&app) else {
            panic!("a correction form: {:?}", top(&app));
        };
        assert_eq!(
            (form.decision_id.as_str(), form.editor.text()),
            ("D3", "too broad".to_owned())
        );
        press(&mut app, &[Key::Esc]);
        // `a` accepts the rest of a file and goes to the next one; `r` resets.
        assert_eq!(
            press(&mut app, &[Key::Char(']'), Key::Char('a')]),
            [review(
                PLAN_A,
                &["11aa22bb33cc"],
                ReviewMark::Accepted,
                None
            )]
        );
        assert_eq!(app.diff().position(), Some((2, None)));
        assert_eq!(
            press(&mut app, &[Key::Char('a')]),
            [review(
                PLAN_A,
                &["99ff88ee77dd"],
                ReviewMark::Accepted,
                None
            )]
        );
        assert_eq!(
            press(&mut app, &[Key::Char('a')]),
            [],
            "nothing pending left"
        );
        assert_eq!(
            press(&mut app, &[Key::Char('r')]),
            [review(PLAN_A, &["99ff88ee77dd"], ReviewMark::Pending, None)]
        );
        let counts = app.diff().diff().and_then(DiffView::review_counts).unwrap();
        assert_eq!(
            (counts.accepted, counts.rejected, counts.pending),
            (2, 1, 1)
        );
        // `m` marks the item reviewed: seen, no verdict.
        assert_eq!(
            press(&mut app, &[Key::Char('m')]),
            [review(
                PLAN_A,
                &["99ff88ee77dd"],
                ReviewMark::Reviewed,
                None
            )]
        );
        let counts = app.diff().diff().and_then(DiffView::review_counts).unwrap();
        assert_eq!(
            (
                counts.accepted,
                counts.rejected,
                counts.reviewed,
                counts.pending
            ),
            (2, 1, 1, 0)
        );
    }

    #[test]
    fn only_a_rejected_hunk_offers_a_correction_and_an_applied_diff_takes_no_marks() {
        let mut app = loaded();
        app.update(Msg::DiffUpdated {
            plan_id: PLAN_A.into(),
            diff: fixtures::reviewed_diff(),
        });
        press(&mut app, &[Key::Char('3')]);
        assert_eq!(press(&mut app, &[Key::Char('c')]), []);
        assert!(
            app.overlays().is_empty(),
            "the accepted hunk offers nothing"
        );
        app.update(Msg::DiffUpdated {
            plan_id: PLAN_A.into(),
            diff: DiffView {
                applied: Some("applied in 451487da7410".into()),
                ..fixtures::diff()
            },
        });
        assert_eq!(
            press(&mut app, &[Key::Char(' '), Key::Char('x'), Key::Char('a')]),
            []
        );
        assert!(app.overlays().is_empty());
    }

    #[test]
    fn leaving_the_apply_review_sends_nothing() {
        let mut app = loaded();
        assert_eq!(press(&mut app, &[Key::Char('A'), Key::Esc]), []);
        assert_eq!(app.apply_review(), None);
        assert_eq!((app.focus(), app.is_zoomed()), (Pane::Plans, false));
        assert_eq!(
            press(&mut app, &[Key::Char('A'), Key::Enter, Key::Char('n')]),
            []
        );
    }

    #[test]
    fn prompt_sends_guidance_to_the_selected_plan() {
        let mut app = loaded();
        let mut cmds = press(&mut app, &[Key::Char('g')]);
        cmds.extend(typed(&mut app, "focus on the tests\n"));
        assert_eq!(
            cmds,
            [Cmd::Prompt {
                plan_id: PLAN_A.into(),
                text: "focus on the tests".into()
            }]
        );
    }

    #[test]
    fn use_asks_for_the_lists_then_creates_a_plan_from_the_form() {
        let mut app = loaded();
        assert_eq!(press(&mut app, &[Key::Char('u')]), [Cmd::ListUseChoices]);
        app.update(Msg::UseChoices(fixtures::use_choices()));
        let cmds = press(
            &mut app,
            &[Key::Tab, Key::Char('j'), Key::Char('j'), Key::Enter],
        );
        assert_eq!(
            cmds,
            [Cmd::Use {
                action: "local/refactor-auth".into(),
                project: "local/infra".into(),
                profile: None,
                args: Vec::new(),
            }]
        );
    }

    #[test]
    fn the_use_form_asks_for_the_actions_arguments_and_refuses_a_missing_required_one() {
        let mut app = loaded();
        press(&mut app, &[Key::Char('u')]);
        app.update(Msg::UseChoices(fixtures::use_choices()));
        // The second action declares `engine` (required) and `limit` (default 20).
        let cmds = press(
            &mut app,
            &[Key::Char('j'), Key::Tab, Key::Char('j'), Key::Enter],
        );
        assert_eq!(cmds, [], "engine is required");
        let Some(Overlay::Use(form)) = top(&app) else {
            panic!("{:?}", app.overlays())
        };
        assert_eq!(form.error.as_deref(), Some("`engine` is required"));
        assert_eq!(form.cursor, crate::overlay::UseCursor::Argument(0));
        assert_eq!(form.values, ["", "20"]);
        // Letters that are keys elsewhere (j, k, h, l, q) are text in a field.
        typed(&mut app, "jq-lh");
        press(&mut app, &[Key::Backspace, Key::Backspace, Key::Backspace]);
        typed(&mut app, "kit");
        press(&mut app, &[Key::Down, Key::Backspace]);
        typed(&mut app, "5");
        assert_eq!(
            press(&mut app, &[Key::Enter]),
            [Cmd::Use {
                action: "local/add-search".into(),
                project: "local/docs-site".into(),
                profile: None,
                args: vec![
                    ("engine".into(), "jqkit".into()),
                    ("limit".into(), "25".into())
                ],
            }]
        );
    }

    #[test]
    fn changing_the_action_resets_the_argument_fields_to_its_defaults() {
        let mut app = loaded();
        press(&mut app, &[Key::Char('u')]);
        app.update(Msg::UseChoices(fixtures::use_choices()));
        // Actions, projects, the profile, the first argument.
        press(&mut app, &[Key::Char('j'), Key::Tab, Key::Tab, Key::Tab]);
        typed(&mut app, "x");
        // Tab from the last field comes back to the actions.
        press(&mut app, &[Key::Tab, Key::Tab, Key::Char('k')]);
        let Some(Overlay::Use(form)) = top(&app) else {
            panic!("{:?}", app.overlays())
        };
        assert!(
            form.fields().is_empty() && form.values.is_empty(),
            "{form:?}"
        );
        press(&mut app, &[Key::Char('j')]);
        let Some(Overlay::Use(form)) = top(&app) else {
            panic!()
        };
        assert_eq!(form.values, ["", "20"]);
    }

    #[test]
    fn the_plan_the_use_form_creates_is_selected_once_it_is_listed() {
        let mut app = loaded();
        press(&mut app, &[Key::Char('u')]);
        app.update(Msg::UseChoices(fixtures::use_choices()));
        let cmds = press(&mut app, &[Key::Tab, Key::Char('j'), Key::Enter]);
        assert!(matches!(&cmds[..], [Cmd::Use { .. }]), "{cmds:?}");
        // A plan another process made meanwhile, of another action, leaves the selection.
        let mut rows = fixtures::plans();
        let mut elsewhere = rows[1].clone();
        elsewhere.plan_id = "01JDQ8D5F1M7B9C4Z6H8J0K2NP".into();
        rows.push(elsewhere);
        assert_eq!(app.update(Msg::PlansUpdated(rows.clone())), []);
        assert_eq!(app.plans().selected_id(), Some(PLAN_A));
        // The plan of the action and project used arrives: it is selected, its tree asked for.
        let made = "01JDQ9E6G2N8C0D5A7J9K1M3PQ";
        rows.push(PlanRow {
            plan_id: made.into(),
            action: "local/refactor-auth".into(),
            project: "local/docs-site".into(),
            phase: Phase::Strategize,
            state: ProcessingState::Queued,
            elapsed_ms: 0,
            cost_usd: None,
            gate_rejected: false,
        });
        assert_eq!(
            app.update(Msg::PlansUpdated(rows.clone())),
            [Cmd::SelectPlan(made.into())]
        );
        assert_eq!(app.plans().selected_id(), Some(made));
        // Once: moving away is not undone by later updates.
        press(&mut app, &[Key::Char('1'), Key::Home]);
        assert_eq!(app.update(Msg::PlansUpdated(rows)), []);
        assert_eq!(app.plans().selected_id(), Some(PLAN_A));
    }

    #[test]
    fn the_use_form_passes_the_chosen_automation_profile_as_plan_use_does() {
        let mut app = loaded();
        press(&mut app, &[Key::Char('u')]);
        app.update(Msg::UseChoices(fixtures::use_choices()));
        // Tab order: actions, projects, the profile; it starts at the default.
        press(&mut app, &[Key::Tab, Key::Tab]);
        let Some(Overlay::Use(form)) = top(&app) else {
            panic!("{:?}", app.overlays())
        };
        assert_eq!(form.cursor, crate::overlay::UseCursor::Profile);
        assert_eq!(
            form.chosen_profile(),
            None,
            "the default, as without the flag"
        );
        assert_eq!(
            form.default_profile_hint(),
            "the action's, else the project's, else manual"
        );
        // → and l (or j) move through the registered profiles, ← and k back; letters stay keys.
        press(
            &mut app,
            &[Key::Right, Key::Char('l'), Key::Char('j'), Key::Char('k')],
        );
        let Some(Overlay::Use(form)) = top(&app) else {
            panic!()
        };
        assert_eq!(form.chosen_profile(), Some("supervised"));
        press(&mut app, &[Key::End]);
        assert_eq!(
            press(&mut app, &[Key::Enter]),
            [Cmd::Use {
                action: "local/refactor-auth".into(),
                project: "local/webshop".into(),
                profile: Some("local/careful".into()),
                args: Vec::new(),
            }]
        );
        // Back to the default: no profile is passed.
        press(&mut app, &[Key::Char('u')]);
        let mut choices = fixtures::use_choices();
        choices.configured_profile = Some("trusted".into());
        app.update(Msg::UseChoices(choices));
        press(&mut app, &[Key::Tab, Key::Tab, Key::Right, Key::Left]);
        let Some(Overlay::Use(form)) = top(&app) else {
            panic!()
        };
        assert_eq!(
            form.default_profile_hint(),
            "the action's, else the project's, else trusted"
        );
        assert!(matches!(
            &press(&mut app, &[Key::Enter])[..],
            [Cmd::Use { profile: None, .. }]
        ));
    }

    #[test]
    fn the_plan_the_use_form_creates_is_selected_by_its_id_when_the_command_ends_first() {
        let mut app = loaded();
        press(&mut app, &[Key::Char('u')]);
        app.update(Msg::UseChoices(fixtures::use_choices()));
        press(&mut app, &[Key::Enter]);
        let made = "01JDQ9E6G2N8C0D5A7J9K1M3PQ";
        let ended = |plan_id: Option<&str>| Msg::UseEnded {
            action: "local/refactor-auth".into(),
            project: "local/webshop".into(),
            plan_id: plan_id.map(str::to_owned),
        };
        assert_eq!(app.update(ended(Some(made))), [], "not listed yet");
        // Listed under another project name than the form's (several projects, say): its id
        // decides.
        let mut rows = fixtures::plans();
        let mut row = rows[0].clone();
        row.plan_id = made.into();
        rows.push(row);
        // A filter hiding it is cleared.
        press(&mut app, &[Key::Char('/')]);
        typed(&mut app, "bump\n");
        assert_eq!(
            app.update(Msg::PlansUpdated(rows.clone())),
            [Cmd::SelectPlan(made.into())]
        );
        assert_eq!(app.plans().filter(), "");
        // A failed command leaves the selection alone.
        press(&mut app, &[Key::Char('u')]);
        app.update(Msg::UseChoices(fixtures::use_choices()));
        press(&mut app, &[Key::Enter]);
        assert_eq!(app.update(ended(None)), []);
        let mut other = rows[0].clone();
        other.plan_id = "01JDQAF7H3P9D1E6B8K0M2N4QR".into();
        other.action = "local/refactor-auth".into();
        other.project = "local/webshop".into();
        rows.push(other);
        assert_eq!(app.update(Msg::PlansUpdated(rows)), []);
        assert_eq!(app.plans().selected_id(), Some(made));
    }

    #[test]
    fn use_without_actions_explains_what_to_do() {
        let mut app = loaded();
        app.update(Msg::UseChoices(crate::model::UseChoices::default()));
        assert!(matches!(
            top(&app),
            Some(Overlay::Message {
                is_error: false,
                ..
            })
        ));
        assert_eq!(press(&mut app, &[Key::Enter]), []);
    }

    #[test]
    fn quit_is_immediate_when_nothing_runs_here_and_asks_otherwise() {
        let mut app = loaded();
        app.update(Msg::Activity(vec!["plan execute 01JDQ4V6".into()]));
        assert_eq!(press(&mut app, &[Key::Char('q')]), []);
        assert!(matches!(
            top(&app),
            Some(Overlay::Confirm {
                on_yes: Cmd::Quit,
                ..
            })
        ));
        assert_eq!(press(&mut app, &[Key::Char('n')]), []);
        assert!(!app.is_quitting());
        assert_eq!(
            press(&mut app, &[Key::Char('q'), Key::Char('y')]),
            [Cmd::Quit]
        );
        assert!(app.is_quitting());

        let mut app = loaded();
        app.update(Msg::Activity(vec!["plan apply 01JDQ4V6".into()]));
        assert_eq!(press(&mut app, &[Key::Ctrl('c')]), []);
        assert_eq!(
            press(&mut app, &[Key::Ctrl('c')]),
            [Cmd::Quit],
            "twice quits"
        );

        let mut app = loaded();
        app.update(Msg::Activity(vec!["x".into()]));
        app.update(Msg::Activity(vec![]));
        assert_eq!(press(&mut app, &[Key::Char('q')]), [Cmd::Quit]);
    }

    #[test]
    fn the_fuzzy_filter_selects_the_best_match_and_typing_does_not_trigger_keys() {
        let mut app = loaded();
        let mut cmds = press(&mut app, &[Key::Char('/')]);
        cmds.extend(typed(&mut app, "bumpq"));
        cmds.extend(press(&mut app, &[Key::Backspace, Key::Enter]));
        assert_eq!(cmds, [Cmd::SelectPlan(PLAN_D.into())]);
        assert!(!app.is_quitting());
        assert_eq!(app.plans().filter(), "bump");
        assert_eq!(app.plans().shown_len(), 1);
        // The filter stays while navigating; `/` then Esc clears it.
        assert_eq!(press(&mut app, &[Key::Char('/'), Key::Esc]), []);
        assert_eq!(app.plans().shown_len(), 4);
    }

    #[test]
    fn the_mouse_focuses_selects_and_scrolls() {
        let mut app = loaded();
        let areas = pane_areas(&app, ratatui::layout::Rect::new(0, 0, 120, 39));
        let rect = |p: Pane| {
            areas
                .iter()
                .find(|(q, _)| *q == p)
                .map(|(_, r)| *r)
                .expect("pane")
        };
        let plans = rect(Pane::Plans);
        // Border, header, then the rows: the second row is PLAN_B.
        assert_eq!(
            app.update(Msg::Mouse(Mouse::Click(plans.x + 5, plans.y + 3))),
            [Cmd::SelectPlan(PLAN_B.into())]
        );
        let approvals = rect(Pane::Approvals);
        app.update(Msg::Mouse(Mouse::Click(approvals.x + 3, approvals.y + 3)));
        assert_eq!(app.focus(), Pane::Approvals);
        assert_eq!(
            app.approvals().selected().map(|a| a.approval_id.as_str()),
            Some("A2")
        );
        let tree = rect(Pane::Tree);
        app.update(Msg::Mouse(Mouse::ScrollDown(tree.x + 2, tree.y + 2)));
        assert_eq!(app.focus(), Pane::Tree);
        let diff = rect(Pane::Diff);
        app.update(Msg::Mouse(Mouse::ScrollDown(diff.x + 2, diff.y + 2)));
        assert_eq!(
            (app.focus(), app.diff().scroll()),
            (Pane::Diff, 0),
            "PLAN_B's diff is not loaded"
        );
    }

    #[test]
    fn a_keymap_file_changes_what_keys_do() {
        let keymap =
            Keymap::from_toml_str("[global]\nquit = [\"ctrl-q\"]\n[plans]\nexecute = [\"E\"]")
                .expect("valid");
        let mut app = App::with_keymap(keymap);
        for msg in fixtures::load_all() {
            app.update(msg);
        }
        assert_eq!(press(&mut app, &[Key::Char('q'), Key::Char('e')]), []);
        assert_eq!(
            press(&mut app, &[Key::Char('E'), Key::Ctrl('q')]),
            [
                Cmd::Execute {
                    plan_id: PLAN_A.into()
                },
                Cmd::Quit
            ]
        );
    }

    #[test]
    fn highlights_are_requested_once_and_stale_ones_are_dropped() {
        let mut app = loaded();
        let request = app
            .take_highlight_request(Some("base16-ocean.dark"))
            .expect("visible hunks need highlights");
        assert_eq!(
            request.hunks.len(),
            3,
            "every hunk of the small diff is visible"
        );
        assert_eq!(
            app.take_highlight_request(Some("base16-ocean.dark")),
            None,
            "already asked"
        );
        let highlighter = crate::highlight::Highlighter::new();
        let result = highlighter.highlight(&request, &mut || false);
        let mut stale = result.clone();
        stale.generation += 1;
        app.update(Msg::Highlighted(stale));
        assert_eq!(app.diff().highlighted_chunks(), 0);
        app.update(Msg::Highlighted(result));
        assert_eq!(app.diff().highlighted_chunks(), 3);
        // The same diff again keeps them; a changed diff drops them and asks again.
        app.update(Msg::DiffUpdated {
            plan_id: PLAN_A.into(),
            diff: fixtures::diff(),
        });
        assert_eq!(app.diff().highlighted_chunks(), 3);
        let mut changed = fixtures::diff();
        changed.files.pop();
        app.update(Msg::DiffUpdated {
            plan_id: PLAN_A.into(),
            diff: changed,
        });
        assert_eq!(app.diff().highlighted_chunks(), 0);
        assert!(app.take_highlight_request(None).is_some());
    }

    #[test]
    fn a_50000_line_diff_asks_only_for_the_chunks_on_screen() {
        let mut app = loaded();
        app.update(Msg::DiffUpdated {
            plan_id: PLAN_A.into(),
            diff: fixtures::big_diff(50_000),
        });
        let request = app.take_highlight_request(None).expect("request");
        let lines: usize = request.hunks.iter().map(|h| h.lines.len()).sum();
        assert!(lines < 200, "{lines} lines requested");
        press(&mut app, &[Key::Char('3'), Key::End]);
        let request = app
            .take_highlight_request(None)
            .expect("request at the end");
        assert!(
            request.hunks.iter().all(|h| h.file == 49),
            "{:?}",
            request.keys()
        );
    }

    #[test]
    fn the_diff_switches_to_side_by_side_keeping_the_hunk() {
        use crate::panes::diff::{DiffRow, Layout};
        let mut app = loaded();
        press(&mut app, &[Key::Char('3'), Key::Char('n'), Key::Char('n')]);
        let before = app.diff().position();
        press(&mut app, &[Key::Char('v')]);
        assert_eq!(app.diff().layout(), Layout::SideBySide);
        assert_eq!(app.diff().position(), before);
        let pairs: Vec<(Option<usize>, Option<usize>)> = app
            .diff()
            .display_rows()
            .iter()
            .filter_map(|r| match *r {
                DiffRow::Pair {
                    file: 0,
                    hunk: 0,
                    old,
                    new,
                } => Some((old, new)),
                _ => None,
            })
            .collect();
        // context | removed+added paired | added alone | context | context
        assert_eq!(
            pairs,
            [
                (Some(0), Some(0)),
                (Some(1), Some(2)),
                (None, Some(3)),
                (Some(4), Some(4)),
                (Some(5), Some(5))
            ]
        );
        press(&mut app, &[Key::Char('v')]);
        assert_eq!(app.diff().layout(), Layout::Unified);
    }

    #[test]
    fn the_errors_key_opens_every_kept_error_whole_newest_first() {
        let mut app = loaded();
        let long = format!(
            "plan apply 01JDQ4V6 failed: {}",
            "a long reason ".repeat(12)
        );
        app.update(Msg::Finished {
            ok: false,
            text: long.clone(),
        });
        app.update(Msg::Error {
            title: "Could not run plan execute".into(),
            detail: "first line\nsecond line".into(),
        });
        press(&mut app, &[Key::Esc]);
        assert_eq!(press(&mut app, &[Key::Char('!')]), []);
        match app.overlays() {
            [
                Overlay::Message {
                    title,
                    body,
                    is_error: true,
                },
            ] => {
                assert_eq!(title, "Last errors (newest first, 2)");
                assert_eq!(
                    body,
                    &format!("Could not run plan execute\nfirst line\nsecond line\n\n{long}")
                );
            }
            other => panic!("{other:?}"),
        }
        for n in 0..30 {
            app.update(Msg::Finished {
                ok: false,
                text: format!("failure {n}"),
            });
        }
        assert_eq!(app.errors().len(), KEPT_ERRORS);
        assert_eq!(app.errors().last().map(String::as_str), Some("failure 29"));
    }

    #[test]
    fn errors_and_failures_stay_in_the_status_bar() {
        let mut app = loaded();
        app.update(Msg::Finished {
            ok: false,
            text: "plan apply 01JDQ4V6 failed: validation `tests` failed".into(),
        });
        assert_eq!(app.notice().map(|n| n.level), Some(Level::Error));
        press(&mut app, &[Key::Char('j')]);
        assert_eq!(app.notice(), None);
        assert!(app.last_error().is_some_and(|e| e.contains("validation")));
    }
}
