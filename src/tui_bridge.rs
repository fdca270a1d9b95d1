//! The bridge between the engine and the TUI (`cleveragents-ui`): engine state becomes
//! [`Msg`]s, the UI's [`Cmd`]s become engine operations, and this module owns the terminal.
//!
//! The UI crate never sees SQLite, git or HTTP; everything it shows passes through the view
//! models built here. Other processes (headless commands in other terminals) change the same
//! database; the bridge notices through SQLite's `data_version` and sends fresh view models.

use std::time::{Duration, Instant};

use cleveragents_ui::model::{self as view, PlanRow};
use cleveragents_ui::{App, Cmd, Key, Msg, Pane, Theme};
use ratatui::crossterm::event::{self, Event};

use crate::engine::domain::approval::{Approval, ApprovalKind};
use crate::engine::domain::decision::Decision;
use crate::engine::domain::lifecycle::{Phase, ProcessingState};
use crate::engine::domain::plan::Plan;
use crate::engine::sandbox::Sandboxes;
use crate::engine::sandbox::diff::{self, DiffRequest};
use crate::engine::store::{Store, StoreError};

/// How often the bridge checks the database for changes made by other processes.
pub const POLL_INTERVAL: Duration = Duration::from_millis(250);

/// What `agents tui` was asked to show first.
#[derive(Debug, Clone, Default)]
pub struct LaunchOptions {
    /// Plan to select (full id).
    pub plan_id: Option<String>,
    /// Pane to focus.
    pub focus: Option<Pane>,
}

fn phase(p: Phase) -> view::Phase {
    match p {
        Phase::Strategize => view::Phase::Strategize,
        Phase::Execute => view::Phase::Execute,
        Phase::Apply => view::Phase::Apply,
        Phase::Applied => view::Phase::Applied,
    }
}

fn state(s: ProcessingState) -> view::ProcessingState {
    match s {
        ProcessingState::Queued => view::ProcessingState::Queued,
        ProcessingState::Processing => view::ProcessingState::Processing,
        ProcessingState::Errored => view::ProcessingState::Errored,
        ProcessingState::Complete => view::ProcessingState::Complete,
        ProcessingState::Cancelled => view::ProcessingState::Cancelled,
    }
}

/// The plans list row for a plan. Elapsed time runs from creation to completion (or now);
/// cost is unknown until model calls are accounted.
pub fn plan_row(plan: &Plan, now: jiff::Timestamp) -> PlanRow {
    let end = plan.completed_at.unwrap_or(now);
    let elapsed_ms = end.duration_since(plan.created_at).as_millis().max(0);
    PlanRow {
        plan_id: plan.plan_id.to_string(),
        action: plan.action_name.clone(),
        project: plan.project_names().join(", "),
        phase: phase(plan.phase()),
        state: state(plan.state()),
        elapsed_ms: u64::try_from(elapsed_ms).unwrap_or(u64::MAX),
        cost_usd: None,
    }
}

/// The approval queue row for a pending approval.
pub fn approval_item(approval: &Approval) -> view::ApprovalItem {
    view::ApprovalItem {
        approval_id: approval.approval_id.clone(),
        plan_id: approval.plan_id.to_string(),
        kind: match approval.kind {
            ApprovalKind::PhaseGate => view::ApprovalKind::PhaseGate,
            ApprovalKind::Decision => view::ApprovalKind::DecisionChoice,
            ApprovalKind::ChildSpawn => view::ApprovalKind::ChildSpawn,
            ApprovalKind::TransientFailure => view::ApprovalKind::TransientFailure,
            // A merge conflict is answered like an errored plan (retry or cancel).
            ApprovalKind::Errored | ApprovalKind::ErrorRecovery => view::ApprovalKind::ErroredPlan,
        },
        summary: approval.summary.clone(),
        options: approval.options.clone(),
    }
}

/// Engine-side state of a TUI session: the store and what was last sent.
#[derive(Debug)]
pub struct Bridge {
    store: Store,
    sandboxes: Sandboxes,
    data_version: Option<i64>,
    selected: Option<String>,
    answers: Option<AnswerRunner>,
}

/// Runs the headless command that answers an approval (`plan execute`, `plan apply --yes`,
/// `plan decide`, `plan reject`) as a child process of the same binary, so that the plan is
/// driven outside the TUI's frame loop; the TUI follows its progress through the database.
#[derive(Debug, Clone)]
pub struct AnswerRunner {
    /// The `agents` binary.
    pub exe: std::path::PathBuf,
    /// Global options to repeat (`--data-dir`, `--config-path`).
    pub globals: Vec<String>,
    /// File that receives the commands' output.
    pub log: std::path::PathBuf,
}

impl AnswerRunner {
    fn spawn(&self, args: &[String]) -> Result<(), String> {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.log)
            .map_err(|e| format!("cannot open {}: {e}", self.log.display()))?;
        let err = log.try_clone().map_err(|e| e.to_string())?;
        let mut child = std::process::Command::new(&self.exe)
            .args(&self.globals)
            .args(["--format", "json"])
            .args(args)
            .stdin(std::process::Stdio::null())
            .stdout(log)
            .stderr(err)
            .spawn()
            .map_err(|e| format!("cannot start {}: {e}", self.exe.display()))?;
        // Reap it when it ends, without blocking the frame loop.
        std::thread::spawn(move || child.wait());
        Ok(())
    }
}

impl Bridge {
    /// A bridge over an open store.
    pub fn new(store: Store, sandboxes: Sandboxes) -> Self {
        Self {
            store,
            sandboxes,
            data_version: None,
            selected: None,
            answers: None,
        }
    }

    /// Lets the bridge answer approvals by running the answering commands.
    pub fn with_answers(mut self, runner: AnswerRunner) -> Self {
        self.answers = Some(runner);
        self
    }

    /// Answers an approval: the same command a user would run headlessly.
    fn answer(&mut self, cmd: Cmd) -> Vec<Msg> {
        let Some(runner) = self.answers.clone() else {
            return vec![not_yet("answering approvals from this TUI session")];
        };
        let approval_id = match &cmd {
            Cmd::Approve { approval_id }
            | Cmd::Reject { approval_id, .. }
            | Cmd::Choose { approval_id, .. }
            | Cmd::Guidance { approval_id, .. } => approval_id.clone(),
            _ => return Vec::new(),
        };
        let approval = match self.store.approval(&approval_id) {
            Ok(Some(a)) => a,
            _ => {
                return vec![Msg::Error {
                    title: "Approval not found".into(),
                    detail: format!("{approval_id} was answered or withdrawn elsewhere."),
                }];
            }
        };
        let s = |v: &str| v.to_string();
        let args: Vec<String> = match cmd {
            Cmd::Approve { .. } if approval.kind == ApprovalKind::PhaseGate => {
                let plan = approval.plan_id.to_string();
                match approval.context["gate"].as_str() {
                    Some("apply") => vec![s("plan"), s("apply"), s("--yes"), plan],
                    _ => vec![s("plan"), s("execute"), plan],
                }
            }
            Cmd::Approve { .. } => vec![s("plan"), s("decide"), approval_id, s("--option"), s("1")],
            Cmd::Reject { reason, .. } => {
                vec![s("plan"), s("reject"), approval_id, s("--reason"), reason]
            }
            Cmd::Choose { option, .. } => {
                let Some(n) = approval.options.iter().position(|o| *o == option) else {
                    return vec![Msg::Error {
                        title: "Unknown option".into(),
                        detail: option,
                    }];
                };
                vec![
                    s("plan"),
                    s("decide"),
                    approval_id,
                    s("--option"),
                    (n + 1).to_string(),
                ]
            }
            Cmd::Guidance { text, .. } => {
                vec![s("plan"), s("decide"), approval_id, s("--guidance"), text]
            }
            _ => return Vec::new(),
        };
        match runner.spawn(&args) {
            Ok(()) => Vec::new(),
            Err(detail) => vec![Msg::Error {
                title: "Could not answer".into(),
                detail,
            }],
        }
    }

    /// The decision tree of a plan: roots (no parent) in sequence order, each with its
    /// children nested by `parent_decision_id`.
    fn decision_tree(&self, plan_id: &str) -> Vec<view::DecisionNode> {
        let Ok(id) = plan_id.parse() else {
            return Vec::new();
        };
        let Ok(decisions) = self.store.decisions(&id) else {
            return Vec::new();
        };
        fn node(d: &Decision, all: &[Decision]) -> view::DecisionNode {
            view::DecisionNode {
                decision_id: d.decision_id.to_string(),
                decision_type: d.decision_type.as_str().to_string(),
                summary: d
                    .question
                    .clone()
                    .unwrap_or_else(|| d.chosen_option.clone()),
                chosen: d.chosen_option.clone(),
                confidence: d.confidence_score.map(|c| c as f32),
                superseded: d.superseded_by.is_some(),
                children: all
                    .iter()
                    .filter(|c| c.parent_decision_id == Some(d.decision_id))
                    .map(|c| node(c, all))
                    .collect(),
                child_plan_id: None,
            }
        }
        decisions
            .iter()
            .filter(|d| d.parent_decision_id.is_none())
            .map(|d| node(d, &decisions))
            .collect()
    }

    /// The plan's changes across its sandboxes, as the diff pane shows them (empty before
    /// Execute has created a sandbox).
    fn diff_view(&self, plan_id: &str) -> view::DiffView {
        let Ok(id) = plan_id.parse() else {
            return view::DiffView::default();
        };
        let Ok(active) = self.sandboxes.active(&self.store, &id) else {
            return view::DiffView::default();
        };
        let request = DiffRequest {
            path: None,
            hunks: true,
        };
        let mut files = Vec::new();
        for sb in &active {
            let Ok(diffs) =
                crate::engine::sandbox::attribution::attributed_diff(&self.store, sb, &request)
            else {
                continue;
            };
            for f in diffs {
                files.push(view::DiffFile {
                    path: f.path.clone(),
                    added: usize::try_from(f.additions).unwrap_or(usize::MAX),
                    removed: usize::try_from(f.deletions).unwrap_or(usize::MAX),
                    hunks: f
                        .hunks
                        .iter()
                        .map(|h| view::DiffHunk {
                            old_start: h.old_start,
                            old_lines: h.old_lines,
                            new_start: h.new_start,
                            new_lines: h.new_lines,
                            lines: h
                                .lines
                                .iter()
                                .map(|l| view::DiffLine {
                                    kind: match l.kind {
                                        diff::LineKind::Context => view::DiffLineKind::Context,
                                        diff::LineKind::Added => view::DiffLineKind::Added,
                                        diff::LineKind::Removed => view::DiffLineKind::Removed,
                                    },
                                    text: l.text.clone(),
                                })
                                .collect(),
                            decision_ids: h.decision_ids.clone(),
                        })
                        .collect(),
                });
            }
        }
        view::DiffView { files }
    }

    fn plan_views(&self, plan_id: &str) -> Vec<Msg> {
        vec![
            Msg::TreeUpdated {
                plan_id: plan_id.to_string(),
                nodes: self.decision_tree(plan_id),
            },
            Msg::DiffUpdated {
                plan_id: plan_id.to_string(),
                diff: self.diff_view(plan_id),
            },
        ]
    }

    /// The messages that bring the UI up to date, if the database changed since the last call
    /// (always on the first call).
    ///
    /// # Errors
    /// [`StoreError`] when the database cannot be read.
    pub fn refresh(&mut self) -> Result<Vec<Msg>, StoreError> {
        let version = self.store.data_version()?;
        if self.data_version == Some(version) {
            return Ok(Vec::new());
        }
        self.data_version = Some(version);
        let now = jiff::Timestamp::now();
        let rows = self
            .store
            .plans()?
            .iter()
            .map(|p| plan_row(p, now))
            .collect();
        let approvals = self
            .store
            .pending_approvals(None)?
            .iter()
            .map(approval_item)
            .collect();
        let mut msgs = vec![Msg::PlansUpdated(rows), Msg::ApprovalsUpdated(approvals)];
        if let Some(selected) = self.selected.clone() {
            msgs.extend(self.plan_views(&selected));
        }
        Ok(msgs)
    }

    /// Carries out one UI command and returns the messages that answer it.
    pub fn handle(&mut self, cmd: Cmd) -> Vec<Msg> {
        match cmd {
            Cmd::SelectPlan(plan_id) => {
                let msgs = self.plan_views(&plan_id);
                self.selected = Some(plan_id);
                msgs
            }
            Cmd::Quit => Vec::new(),
            Cmd::ExplainDecision { decision_id, .. } => {
                vec![not_yet(&format!("explaining decision {decision_id}"))]
            }
            Cmd::Approve { .. }
            | Cmd::Reject { .. }
            | Cmd::Choose { .. }
            | Cmd::Guidance { .. } => self.answer(cmd),
        }
    }
}

fn not_yet(what: &str) -> Msg {
    Msg::Error {
        title: "Not yet supported".to_string(),
        detail: format!("{what} is not yet supported in this version."),
    }
}

/// Why the TUI stopped abnormally.
#[derive(Debug, thiserror::Error)]
pub enum TuiError {
    /// The terminal could not be set up, drawn or read.
    #[error("terminal error: {0}")]
    Terminal(#[from] std::io::Error),
    /// The database could not be read.
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// Runs the full-screen TUI until the user quits. The terminal is restored on return, on error
/// and on panic (ratatui's panic hook restores it before the panic message prints).
///
/// # Errors
/// [`TuiError`] for terminal or database failures.
pub fn run(
    store: Store,
    sandboxes: Sandboxes,
    answers: Option<AnswerRunner>,
    theme: &Theme,
    options: LaunchOptions,
) -> Result<(), TuiError> {
    let mut terminal = ratatui::try_init()?;
    let result = event_loop(
        &mut terminal,
        match answers {
            Some(a) => Bridge::new(store, sandboxes).with_answers(a),
            None => Bridge::new(store, sandboxes),
        },
        theme,
        options,
    );
    ratatui::restore();
    result
}

fn event_loop(
    terminal: &mut ratatui::DefaultTerminal,
    mut bridge: Bridge,
    theme: &Theme,
    options: LaunchOptions,
) -> Result<(), TuiError> {
    let mut app = App::new();
    let mut pending: Vec<Msg> = Vec::new();
    if let Some(pane) = options.focus {
        pending.push(Msg::Focus(pane));
    }
    if let Some(id) = options.plan_id {
        pending.push(Msg::SelectPlan(id));
    }
    let mut next_poll = Instant::now();
    loop {
        if Instant::now() >= next_poll {
            pending.extend(bridge.refresh()?);
            next_poll = Instant::now() + POLL_INTERVAL;
        }
        // Apply every message, and every message the resulting commands produce.
        while !pending.is_empty() {
            for msg in std::mem::take(&mut pending) {
                for cmd in app.update(msg) {
                    if cmd == Cmd::Quit {
                        return Ok(());
                    }
                    pending.extend(bridge.handle(cmd));
                }
            }
        }
        terminal.draw(|frame| {
            let area = frame.area();
            cleveragents_ui::render(&app, theme, area, frame.buffer_mut());
        })?;
        let wait = next_poll.saturating_duration_since(Instant::now());
        if event::poll(wait)?
            && let Event::Key(key) = event::read()?
            && let Some(key) = Key::from_crossterm(key)
        {
            pending.push(Msg::Key(key));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plans_become_rows_with_phase_state_and_elapsed_time() {
        let created = jiff::Timestamp::from_second(1_000).unwrap();
        let mut plan = Plan::new("local/fmt", "fmt", created);
        plan.project_links
            .push(crate::engine::domain::plan::ProjectLink::new("local/api", None, false).unwrap());
        let row = plan_row(&plan, jiff::Timestamp::from_second(1_075).unwrap());
        assert_eq!(row.plan_id, plan.plan_id.to_string());
        assert_eq!(
            (row.action.as_str(), row.project.as_str()),
            ("local/fmt", "local/api")
        );
        assert_eq!(
            (row.phase, row.state),
            (view::Phase::Strategize, view::ProcessingState::Queued)
        );
        assert_eq!(row.elapsed_ms, 75_000);
        assert_eq!(row.cost_usd, None);
    }

    #[test]
    fn refresh_sends_plans_once_and_again_after_another_process_writes() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("db");
        let mut bridge = Bridge::new(
            Store::open(&path).unwrap(),
            Sandboxes::at(dir.path().join("sandboxes")),
        );
        let first = bridge.refresh().unwrap();
        assert!(matches!(&first[0], Msg::PlansUpdated(rows) if rows.is_empty()));
        assert!(bridge.refresh().unwrap().is_empty(), "nothing changed");
        let mut other = Store::open(&path).unwrap();
        other
            .insert_plan(&Plan::new("local/a", "a", jiff::Timestamp::now()))
            .unwrap();
        let again = bridge.refresh().unwrap();
        assert!(
            matches!(&again[0], Msg::PlansUpdated(rows) if rows.len() == 1),
            "{again:?}"
        );
    }

    #[test]
    fn pending_approvals_reach_the_queue() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("db");
        let mut store = Store::open(&path).unwrap();
        let plan = Plan::new("local/a", "a", jiff::Timestamp::now());
        store.insert_plan(&plan).unwrap();
        let apr = Approval::new(
            plan.plan_id,
            ApprovalKind::PhaseGate,
            "Move to apply",
            "agents plan apply X",
            jiff::Timestamp::now(),
        );
        store.insert_approval(&apr).unwrap();
        let mut bridge = Bridge::new(
            Store::open(&path).unwrap(),
            Sandboxes::at(dir.path().join("sandboxes")),
        );
        let msgs = bridge.refresh().unwrap();
        let Msg::ApprovalsUpdated(items) = &msgs[1] else {
            panic!("{msgs:?}")
        };
        assert_eq!(items.len(), 1);
        assert_eq!(
            (items[0].kind, items[0].summary.as_str()),
            (view::ApprovalKind::PhaseGate, "Move to apply")
        );
    }

    #[test]
    fn selecting_a_plan_sends_its_decision_tree_nested_by_parent() {
        use crate::engine::domain::decision::{Decision, DecisionType};
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("db");
        let mut store = Store::open(&path).unwrap();
        let plan = Plan::new("local/a", "a", jiff::Timestamp::now());
        store.insert_plan(&plan).unwrap();
        let root = Decision::new(
            plan.plan_id,
            DecisionType::PromptDefinition,
            "Write notes",
            jiff::Timestamp::now(),
        );
        let mut step = Decision::new(
            plan.plan_id,
            DecisionType::ImplementationChoice,
            "NOTES.md",
            jiff::Timestamp::now(),
        );
        step.parent_decision_id = Some(root.decision_id);
        step.question = Some("Where do the notes go?".into());
        step.confidence_score = Some(0.5);
        store.insert_decision(&root).unwrap();
        store.insert_decision(&step).unwrap();
        let mut bridge = Bridge::new(
            Store::open(&path).unwrap(),
            Sandboxes::at(dir.path().join("sandboxes")),
        );
        let msgs = bridge.handle(Cmd::SelectPlan(plan.plan_id.to_string()));
        let Msg::TreeUpdated { nodes, .. } = &msgs[0] else {
            panic!("{msgs:?}")
        };
        assert_eq!(nodes.len(), 1);
        assert_eq!(nodes[0].decision_type, "prompt_definition");
        assert_eq!(nodes[0].children.len(), 1);
        let child = &nodes[0].children[0];
        assert_eq!(
            (
                child.summary.as_str(),
                child.chosen.as_str(),
                child.confidence
            ),
            ("Where do the notes go?", "NOTES.md", Some(0.5))
        );
        let Msg::DiffUpdated { diff, .. } = &msgs[1] else {
            panic!("{msgs:?}")
        };
        assert!(diff.files.is_empty(), "no sandbox yet, no changes");
    }

    #[test]
    fn commands_that_need_the_lifecycle_say_so() {
        let dir = tempfile::tempdir().unwrap();
        let mut bridge = Bridge::new(
            Store::open(&dir.path().join("db")).unwrap(),
            Sandboxes::at(dir.path().join("sandboxes")),
        );
        let msgs = bridge.handle(Cmd::Approve {
            approval_id: "x".into(),
        });
        assert!(matches!(&msgs[0], Msg::Error { title, .. } if title == "Not yet supported"));
    }
}
