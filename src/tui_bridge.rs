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
use crate::engine::domain::lifecycle::{Phase, ProcessingState};
use crate::engine::domain::plan::Plan;
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
            ApprovalKind::Errored => view::ApprovalKind::ErroredPlan,
        },
        summary: approval.summary.clone(),
        options: approval.options.clone(),
    }
}

/// Engine-side state of a TUI session: the store and what was last sent.
#[derive(Debug)]
pub struct Bridge {
    store: Store,
    data_version: Option<i64>,
}

impl Bridge {
    /// A bridge over an open store.
    pub fn new(store: Store) -> Self {
        Self {
            store,
            data_version: None,
        }
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
        Ok(vec![
            Msg::PlansUpdated(rows),
            Msg::ApprovalsUpdated(approvals),
        ])
    }

    /// Carries out one UI command and returns the messages that answer it.
    pub fn handle(&mut self, cmd: Cmd) -> Vec<Msg> {
        match cmd {
            Cmd::SelectPlan(plan_id) => vec![
                // Decisions and sandbox diffs are recorded by the lifecycle engine; until a plan
                // has run, both are honestly empty.
                Msg::TreeUpdated {
                    plan_id: plan_id.clone(),
                    nodes: Vec::new(),
                },
                Msg::DiffUpdated {
                    plan_id,
                    diff: view::DiffView::default(),
                },
            ],
            Cmd::Quit => Vec::new(),
            Cmd::ExplainDecision { decision_id, .. } => {
                vec![not_yet(&format!("explaining decision {decision_id}"))]
            }
            Cmd::Approve { .. }
            | Cmd::Reject { .. }
            | Cmd::Choose { .. }
            | Cmd::Guidance { .. } => {
                vec![not_yet("answering approvals from the TUI")]
            }
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
pub fn run(store: Store, theme: &Theme, options: LaunchOptions) -> Result<(), TuiError> {
    let mut terminal = ratatui::try_init()?;
    let result = event_loop(&mut terminal, Bridge::new(store), theme, options);
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
        let mut bridge = Bridge::new(Store::open(&path).unwrap());
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
        let mut bridge = Bridge::new(Store::open(&path).unwrap());
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
    fn commands_that_need_the_lifecycle_say_so() {
        let dir = tempfile::tempdir().unwrap();
        let mut bridge = Bridge::new(Store::open(&dir.path().join("db")).unwrap());
        let msgs = bridge.handle(Cmd::Approve {
            approval_id: "x".into(),
        });
        assert!(matches!(&msgs[0], Msg::Error { title, .. } if title == "Not yet supported"));
    }
}
