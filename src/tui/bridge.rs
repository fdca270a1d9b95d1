//! The bridge between the engine and the TUI (`cleveragents-ui`): the engine's views become
//! [`Msg`]s, the UI's [`Cmd`]s become calls of the engine's API. It reaches the engine only
//! through a [`Client`]: in process, or the server the TUI is attached to, with the same panes
//! and keys either way.

use std::sync::Arc;
use std::time::Duration;

use cleveragents_engine::api::{ApiError, Client};
use cleveragents_ui::model as view;
use cleveragents_ui::{Cmd, Msg};

use super::feed::Feed;
use super::jobs::{Jobs, StopSignal};
use super::panes::PaneWorker;
use super::state::PlansAndApprovals;
use super::{commands, views};

/// How the TUI reaches the engine.
pub struct Connection {
    /// Reads and operations (shared by the worker threads).
    pub client: Arc<dyn Client>,
    /// The live feed's own client: its follow lasts as long as the TUI.
    pub feed: Box<dyn Client>,
    /// Raised when the user quits (an in-process engine observes it).
    pub stop: Arc<StopSignal>,
    /// Whether operations may run (an unusable config file leaves the TUI read-only).
    pub operations: bool,
}

impl std::fmt::Debug for Connection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Connection")
            .field("client", &self.client.location())
            .field("operations", &self.operations)
            .finish_non_exhaustive()
    }
}

impl Connection {
    /// An engine in this process: it observes the stop signal.
    pub fn in_process(engine: cleveragents_engine::api::Engine, operations: bool) -> Self {
        let stop = Arc::new(StopSignal::default());
        let engine = engine.with_observer(stop.clone());
        Self {
            client: Arc::new(engine.clone()),
            feed: Box::new(engine),
            stop,
            operations,
        }
    }

    /// A server: `client` for calls, `feed` (another client of it) for the event stream.
    pub fn remote(client: Box<dyn Client>, feed: Box<dyn Client>) -> Self {
        Self {
            client: Arc::from(client),
            feed,
            stop: Arc::default(),
            operations: true,
        }
    }
}

/// Engine-side state of a TUI session: what was last sent, the selected plan, the pane
/// worker, the live feed and the operations under way.
pub struct Bridge {
    client: Arc<dyn Client>,
    operations: bool,
    global_profile: Option<String>,
    selected: Option<String>,
    state: PlansAndApprovals,
    panes: PaneWorker,
    feed: Feed,
    jobs: Jobs,
}

impl std::fmt::Debug for Bridge {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Bridge")
            .field("client", &self.client.location())
            .field("selected", &self.selected)
            .field("panes", &self.panes)
            .field("jobs", &self.jobs)
            .finish_non_exhaustive()
    }
}

impl Bridge {
    /// A bridge over `connection`; `global_profile` is the configured automation profile new
    /// plans get unless their action or project names one. The live feed starts at the
    /// newest event.
    ///
    /// # Errors
    /// [`ApiError`] when the engine cannot be asked where its event log ends.
    pub fn new(connection: Connection, global_profile: Option<String>) -> Result<Self, ApiError> {
        let after = connection.client.last_seq()?;
        Ok(Self {
            panes: PaneWorker::spawn(Arc::clone(&connection.client)),
            feed: Feed::start(connection.feed, after),
            jobs: Jobs::new(Arc::clone(&connection.client), connection.stop),
            client: connection.client,
            operations: connection.operations,
            global_profile,
            selected: None,
            state: PlansAndApprovals::default(),
        })
    }

    /// Whether background work (a pane read, an operation) is under way, so the frame loop
    /// should look for its result soon.
    pub fn is_busy(&self) -> bool {
        self.panes.busy() || self.jobs.busy()
    }

    /// Results of background work: panes read, live area lines, operations that ended.
    pub fn background(&mut self) -> Vec<Msg> {
        let mut msgs = self.panes.ready();
        let live = self.feed.ready();
        // A plan moved on: the selected plan's tree and diff may have changed with it.
        let moved = live.iter().any(|m| {
            matches!(
                m,
                Msg::Live {
                    update: view::LiveUpdate::Progress { .. },
                    ..
                }
            )
        });
        if moved
            && let Some(selected) = self.selected.clone()
            && !self.panes.busy()
        {
            self.panes.request(&selected);
        }
        msgs.extend(live);
        msgs.extend(self.jobs.ready());
        msgs
    }

    /// Stops the operations this TUI runs the way Ctrl-C does in a terminal, and waits up to
    /// `patience` for them to end; stops the live feed.
    pub fn shutdown(&mut self, patience: Duration) {
        self.feed.stop();
        self.jobs.shutdown(patience);
    }

    /// The messages that bring the plans list and the approval queue up to date, if they
    /// changed since the last call (always on the first call); the selected plan's tree and
    /// diff are then asked for again (they arrive through [`Bridge::background`]).
    ///
    /// # Errors
    /// [`ApiError`] when the engine cannot be asked.
    pub fn refresh(&mut self) -> Result<Vec<Msg>, ApiError> {
        let msgs = self.state.refresh(self.client.as_ref())?;
        if !msgs.is_empty()
            && let Some(selected) = self.selected.clone()
        {
            self.panes.request(&selected);
        }
        Ok(msgs)
    }

    /// Why a decision was taken, and everything downstream of it.
    ///
    /// # Errors
    /// The engine's message for an unknown decision or a failed read.
    pub fn explanation(&self, decision_id: &str) -> Result<view::Explanation, String> {
        self.client
            .explanation(decision_id)
            .map(|e| views::explanation(&e))
            .map_err(|e| e.to_string())
    }

    /// Carries out one UI command and returns the messages that answer it now (operations
    /// run on worker threads answer later, through [`Bridge::background`]).
    pub fn handle(&mut self, cmd: Cmd) -> Vec<Msg> {
        match cmd {
            Cmd::SelectPlan(plan_id) => {
                self.panes.request(&plan_id);
                self.selected = Some(plan_id);
                Vec::new()
            }
            Cmd::Quit => Vec::new(),
            Cmd::ExplainDecision { decision_id, .. } => match self.explanation(&decision_id) {
                Ok(e) => vec![Msg::Explanation(e)],
                Err(detail) => vec![error("Cannot explain this decision", detail)],
            },
            Cmd::ListCheckpoints { plan_id } => match self.client.rollback_checkpoints(&plan_id) {
                Ok(c) => vec![Msg::Checkpoints {
                    plan_id,
                    items: c.iter().map(views::checkpoint_item).collect(),
                }],
                Err(e) => vec![error("Cannot list checkpoints", e.to_string())],
            },
            Cmd::ListUseChoices => {
                let listed = self
                    .client
                    .use_choices()
                    .and_then(|c| Ok((c, self.client.profiles()?)));
                match listed {
                    Ok((c, profiles)) => vec![Msg::UseChoices(views::use_choices(
                        &c,
                        &profiles,
                        self.global_profile.as_deref(),
                    ))],
                    Err(e) => vec![error(
                        "Cannot list actions, projects and profiles",
                        e.to_string(),
                    )],
                }
            }
            cmd if !self.operations => vec![not_yet(match cmd {
                Cmd::Approve { .. }
                | Cmd::Reject { .. }
                | Cmd::Choose { .. }
                | Cmd::Guidance { .. } => "answering approvals from this TUI session",
                _ => "running operations from this TUI session",
            })],
            Cmd::Approve { .. }
            | Cmd::Reject { .. }
            | Cmd::Choose { .. }
            | Cmd::Guidance { .. } => commands::answer(&mut self.jobs, self.client.as_ref(), cmd),
            Cmd::PreviewCorrection {
                decision_id, mode, ..
            } => self.preview_correction(decision_id, mode),
            cmd => commands::operation(&mut self.jobs, self.global_profile.as_deref(), cmd),
        }
    }

    /// What a correction would touch, computed as `plan correct --dry-run` computes it.
    fn preview_correction(&mut self, decision_id: String, mode: view::CorrectionMode) -> Vec<Msg> {
        let what = format!("plan correct --dry-run {}", view::short_id(&decision_id));
        let append = mode == view::CorrectionMode::Append;
        self.jobs.spawn(what, move |client| Msg::CorrectionPreview {
            result: client
                .correction_preview(&decision_id, append)
                .map(|p| views::correction_preview(&p))
                .map_err(|e| e.to_string()),
            decision_id,
        })
    }
}

fn error(title: &str, detail: String) -> Msg {
    Msg::Error {
        title: title.to_string(),
        detail,
    }
}

fn not_yet(what: &str) -> Msg {
    Msg::Error {
        title: "Not yet supported".to_string(),
        detail: format!("{what} is not yet supported in this version."),
    }
}
