//! The application state and its pure update function.

use crate::keymap::{self, Action};
use crate::model::short_id;
use crate::msg::{Cmd, Key, Msg};
use crate::overlay::{InputPurpose, Outcome, Overlay};
use crate::panes::Pane;
use crate::panes::approvals::ApprovalsPane;
use crate::panes::diff::DiffPane;
use crate::panes::plans::PlansPane;
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
    notice: Option<Notice>,
    quitting: bool,
}

impl Default for App {
    fn default() -> Self {
        Self::new()
    }
}

impl App {
    /// A fresh UI: plans focused, nothing loaded yet.
    pub fn new() -> Self {
        Self {
            focus: Pane::Plans,
            zoomed: false,
            overlays: Vec::new(),
            plans: PlansPane::default(),
            tree: TreePane::default(),
            diff: DiffPane::default(),
            approvals: ApprovalsPane::default(),
            notice: None,
            quitting: false,
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

    /// Whether the user asked to quit (a [`Cmd::Quit`] was emitted).
    pub fn is_quitting(&self) -> bool {
        self.quitting
    }

    /// Applies one message and returns the commands for the engine, in order.
    pub fn update(&mut self, msg: Msg) -> Vec<Cmd> {
        match msg {
            Msg::Key(key) => self.on_key(key),
            Msg::PlansUpdated(rows) => {
                let changed = self.plans.set_rows(rows);
                self.after_plan_selection(changed)
            }
            Msg::TreeUpdated { plan_id, nodes } => {
                self.tree.set_nodes(&plan_id, nodes);
                Vec::new()
            }
            Msg::DiffUpdated { plan_id, diff } => {
                self.diff.set_diff(&plan_id, diff);
                Vec::new()
            }
            Msg::ApprovalsUpdated(items) => {
                self.approvals.set_items(items);
                let before = self.overlays.len();
                let approvals = &self.approvals;
                self.overlays
                    .retain(|o| o.approval_id().is_none_or(|id| approvals.contains(id)));
                if self.overlays.len() < before {
                    self.notice = Some(Notice {
                        level: Level::Warn,
                        text: "That approval was answered elsewhere.".to_owned(),
                    });
                }
                Vec::new()
            }
            Msg::Explanation { decision_id, text } => {
                self.overlays.push(Overlay::Message {
                    title: format!("Why decision {}", short_id(&decision_id)),
                    body: text,
                    is_error: false,
                });
                Vec::new()
            }
            Msg::SelectPlan(id) => {
                let changed = self.plans.select(&id);
                self.after_plan_selection(changed)
            }
            Msg::Focus(pane) => self.set_focus(pane),
            Msg::Error { title, detail } => {
                self.overlays.push(Overlay::Message {
                    title,
                    body: detail,
                    is_error: true,
                });
                Vec::new()
            }
        }
    }

    fn after_plan_selection(&mut self, changed: bool) -> Vec<Cmd> {
        if !changed {
            return Vec::new();
        }
        let selected = self.plans.selected_id().map(str::to_owned);
        self.tree.reset(selected.clone());
        self.diff.reset(selected.clone());
        selected.map(Cmd::SelectPlan).into_iter().collect()
    }

    fn on_key(&mut self, key: Key) -> Vec<Cmd> {
        self.notice = None;
        if key == Key::Ctrl('c') {
            return self.quit();
        }
        if let Some(top) = self.overlays.last_mut() {
            return match top.handle_key(key) {
                Outcome::Stay => Vec::new(),
                Outcome::Close => {
                    self.overlays.pop();
                    Vec::new()
                }
                Outcome::Submit(cmd) => {
                    self.overlays.pop();
                    self.notice = Some(Notice {
                        level: Level::Ok,
                        text: sent(&cmd),
                    });
                    vec![cmd]
                }
            };
        }
        let Some(action) = keymap::lookup(self.focus, key) else {
            return Vec::new();
        };
        match action {
            Action::Quit => self.quit(),
            Action::Help => {
                self.overlays.push(Overlay::Help);
                Vec::new()
            }
            Action::FocusNext => self.set_focus(self.focus.next()),
            Action::FocusPrev => self.set_focus(self.focus.prev()),
            Action::Focus(pane) => self.set_focus(pane),
            Action::ToggleZoom => {
                self.zoomed = !self.zoomed;
                Vec::new()
            }
            _ => self.pane_action(action),
        }
    }

    fn quit(&mut self) -> Vec<Cmd> {
        self.quitting = true;
        vec![Cmd::Quit]
    }

    fn set_focus(&mut self, pane: Pane) -> Vec<Cmd> {
        self.focus = pane;
        Vec::new()
    }

    fn pane_action(&mut self, action: Action) -> Vec<Cmd> {
        match self.focus {
            Pane::Plans => {
                let changed = self.plans.handle(action);
                self.after_plan_selection(changed)
            }
            Pane::Tree => {
                let explain = self.tree.handle(action);
                match (explain, self.tree.plan_id()) {
                    (Some(decision_id), Some(plan_id)) => vec![Cmd::ExplainDecision {
                        plan_id: plan_id.to_owned(),
                        decision_id,
                    }],
                    _ => Vec::new(),
                }
            }
            Pane::Diff => {
                self.diff.handle(action);
                Vec::new()
            }
            Pane::Approvals => {
                self.approval_action(action);
                Vec::new()
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
            self.notice = Some(Notice {
                level: Level::Warn,
                text: "No approval is selected.".to_owned(),
            });
            return;
        };
        let context = format!(
            "{} · plan {}: {}",
            item.kind.label(),
            short_id(&item.plan_id),
            item.summary
        );
        let overlay = match action {
            Action::Approve => Overlay::Confirm {
                title: "Approve?".to_owned(),
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
                self.notice = Some(Notice {
                    level: Level::Warn,
                    text: "This approval has no options: approve (a) or reject (r) it.".to_owned(),
                });
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

fn sent(cmd: &Cmd) -> String {
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
        other => format!("Sent {other:?}."),
    }
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
        app.update(Msg::Explanation {
            decision_id: "D2".into(),
            text: "Because.".into(),
        });
        assert!(matches!(
            app.overlays(),
            [Overlay::Message {
                is_error: false,
                ..
            }]
        ));
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
