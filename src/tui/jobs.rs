//! The operations the TUI runs: each on a worker thread of this process, as one call of the
//! engine's API (in process, or on the server the TUI is attached to), its end reported as a
//! status line. Quitting asks the engine to stop them the way Ctrl-C does in a terminal.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, mpsc};
use std::time::{Duration, Instant};

use cleveragents_engine::api::session_views::Stopped;
use cleveragents_engine::api::{ApiError, Client, Observer, Op, Outcome};
use cleveragents_ui::Msg;

/// Set when the user quits. An in-process engine observes it and stops its operations at
/// their next safe point (the plan stays queued with reason `interrupted`, resumable); a
/// server's operations run on there.
#[derive(Debug, Default)]
pub struct StopSignal(AtomicBool);

impl StopSignal {
    fn raise(&self) {
        self.0.store(true, Ordering::SeqCst);
    }
}

impl Observer for StopSignal {
    fn interrupted(&self) -> bool {
        self.0.load(Ordering::SeqCst)
    }
}

/// An operation running on a worker thread.
#[derive(Debug)]
struct Job {
    what: String,
    handle: std::thread::JoinHandle<()>,
}

/// The operations under way and what they reported.
pub struct Jobs {
    client: Arc<dyn Client>,
    stop: Arc<StopSignal>,
    running: Vec<Job>,
    results_tx: mpsc::Sender<Msg>,
    results: mpsc::Receiver<Msg>,
    reported: Vec<String>,
}

impl std::fmt::Debug for Jobs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Jobs")
            .field("running", &self.running)
            .finish_non_exhaustive()
    }
}

impl Jobs {
    /// Runs operations on `client`; `stop` is raised on [`Jobs::shutdown`].
    pub fn new(client: Arc<dyn Client>, stop: Arc<StopSignal>) -> Self {
        let (results_tx, results) = mpsc::channel();
        Self {
            client,
            stop,
            running: Vec::new(),
            results_tx,
            results,
            reported: Vec::new(),
        }
    }

    /// Whether an operation is under way.
    pub fn busy(&self) -> bool {
        !self.running.is_empty()
    }

    /// Runs `job` on a worker thread with the client; its message arrives through
    /// [`Jobs::ready`].
    pub fn spawn(
        &mut self,
        what: String,
        job: impl FnOnce(&dyn Client) -> Msg + Send + 'static,
    ) -> Vec<Msg> {
        self.spawn_all(what, move |client| vec![job(client)])
    }

    /// [`Jobs::spawn`] for a job that answers with several messages, sent in order.
    pub fn spawn_all(
        &mut self,
        what: String,
        job: impl FnOnce(&dyn Client) -> Vec<Msg> + Send + 'static,
    ) -> Vec<Msg> {
        let tx = self.results_tx.clone();
        let client = Arc::clone(&self.client);
        let spawned = std::thread::Builder::new()
            .name("agents-tui-op".into())
            .spawn(move || {
                for msg in job(client.as_ref()) {
                    let _ = tx.send(msg);
                }
            });
        match spawned {
            Ok(handle) => {
                self.running.push(Job { what, handle });
                self.activity()
            }
            Err(e) => vec![Msg::Error {
                title: format!("Could not run {what}"),
                detail: e.to_string(),
            }],
        }
    }

    /// Runs one engine operation on a worker thread; its end becomes a status line.
    pub fn run_op(
        &mut self,
        what: String,
        op: impl FnOnce(&dyn Client) -> Result<Op, ApiError> + Send + 'static,
    ) -> Vec<Msg> {
        let label = what.clone();
        self.spawn(what, move |client| {
            finished(&label, op(client).and_then(|op| client.run(op)))
        })
    }

    fn activity(&mut self) -> Vec<Msg> {
        let now: Vec<String> = self.running.iter().map(|j| j.what.clone()).collect();
        if now == self.reported {
            return Vec::new();
        }
        self.reported = now.clone();
        vec![Msg::Activity(now)]
    }

    /// What the operations reported since the last call, and the activity line when the set
    /// of running operations changed.
    pub fn ready(&mut self) -> Vec<Msg> {
        let mut msgs: Vec<Msg> = self.results.try_iter().collect();
        self.running.retain(|j| !j.handle.is_finished());
        // A job's message is sent before its thread ends: one sent in between arrives now.
        msgs.extend(self.results.try_iter());
        msgs.extend(self.activity());
        msgs
    }

    /// Asks the operations to stop and waits up to `patience` for them to end.
    pub fn shutdown(&mut self, patience: Duration) {
        self.stop.raise();
        let deadline = Instant::now() + patience;
        while self.running.iter().any(|j| !j.handle.is_finished()) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
        self.running.retain(|j| !j.handle.is_finished());
    }
}

/// The status line for an operation that ended: done, waiting for an answer, errored,
/// interrupted, or failed with the engine's message.
pub fn finished(what: &str, result: Result<Outcome, ApiError>) -> Msg {
    let outcome = match result {
        Ok(o) => o,
        Err(e) => {
            return Msg::Finished {
                ok: false,
                text: format!("{what} failed: {}", one_line(&e.to_string())),
            };
        }
    };
    let (driven, not_yet) = match &outcome {
        Outcome::Used(u) => (u.driven.as_ref(), u.not_yet_supported.clone()),
        Outcome::Driven(d) => (Some(&**d), None),
        Outcome::Answered(a) => (a.driven.as_ref(), a.not_yet_supported.clone()),
        Outcome::Prompted(p) => (p.driven.as_ref(), None),
        _ => (None, None),
    };
    if let Some(missing) = not_yet {
        return Msg::Finished {
            ok: false,
            text: format!("{what}: {missing} is not yet supported"),
        };
    }
    let (ok, text) = match driven.map(|d| &d.stopped) {
        Some(Stopped::Gate { .. } | Stopped::Decisions { .. }) => {
            (true, format!("{what}: waiting for you (see Approvals)."))
        }
        Some(Stopped::Errored { code, message }) => (
            false,
            format!("{what} failed: {code}: {}", one_line(message)),
        ),
        Some(Stopped::Interrupted) => (
            true,
            format!("{what}: interrupted; the plan is queued and can be resumed."),
        ),
        Some(Stopped::Cancelled { .. }) => (true, format!("{what}: cancelled.")),
        Some(Stopped::LeaseLost) => (
            false,
            format!("{what}: another process took the plan over."),
        ),
        _ => (true, format!("{what}: done.")),
    };
    Msg::Finished { ok, text }
}

fn one_line(text: &str) -> String {
    text.trim_end().replace('\n', " · ")
}
