//! The live area's feed (spec section 20): one thread follows the engine's events through
//! [`Client::follow_live`] (in process the store and this process's live events; through a
//! server its event stream) and turns them into [`Msg::Live`]: where each plan is in its
//! lifecycle, and what its steps do right now (model text, tool calls, output lines).

use std::ops::ControlFlow;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, mpsc};
use std::time::Duration;

use cleveragents_engine::api::{Client, Followed, LiveEvent, LiveKind};
use cleveragents_engine::domain::event::EventKind;
use cleveragents_ui::Msg;
use cleveragents_ui::model::LiveUpdate;

/// The running feed; it stops at its next idle tick once [`Feed::stop`] is called.
#[derive(Debug)]
pub struct Feed {
    messages: mpsc::Receiver<Msg>,
    stop: Arc<AtomicBool>,
}

impl Feed {
    /// Follows every event after `after` on `client`, on a thread of its own. Returns once
    /// the feed listens (or after [`LISTEN_PATIENCE`]), so that what an operation started
    /// next does right away reaches the live area.
    pub fn start(client: Box<dyn Client>, after: i64) -> Self {
        let (tx, messages) = mpsc::channel();
        let (listening_tx, listening) = mpsc::channel();
        let stop = Arc::new(AtomicBool::new(false));
        let stopped = Arc::clone(&stop);
        let spawned = std::thread::Builder::new()
            .name("agents-tui-feed".into())
            .spawn(move || follow(client.as_ref(), after, &tx, &stopped, &listening_tx));
        if let Err(e) = spawned {
            return Self::failed(&e.to_string());
        }
        let _ = listening.recv_timeout(LISTEN_PATIENCE);
        Self { messages, stop }
    }

    /// A feed that never started, saying why once.
    fn failed(why: &str) -> Self {
        let (tx, messages) = mpsc::channel();
        let _ = tx.send(feed_stopped(why));
        Self {
            messages,
            stop: Arc::new(AtomicBool::new(true)),
        }
    }

    /// The live area's messages that arrived since the last call.
    pub fn ready(&self) -> Vec<Msg> {
        self.messages.try_iter().collect()
    }

    /// Asks the feed's thread to end.
    pub fn stop(&self) {
        self.stop.store(true, Ordering::SeqCst);
    }
}

/// How long starting the feed waits for it to listen.
pub const LISTEN_PATIENCE: Duration = Duration::from_secs(5);

fn follow(
    client: &dyn Client,
    after: i64,
    tx: &mpsc::Sender<Msg>,
    stop: &AtomicBool,
    listening: &mpsc::Sender<()>,
) {
    let mut sink = |f: Followed| {
        let _ = listening.send(());
        if stop.load(Ordering::SeqCst) {
            return ControlFlow::Break(());
        }
        if let Followed::Event(e) = f
            && let (Some(plan), Some(text)) = (e.plan_id, progress_text(&e))
        {
            let msg = Msg::Live {
                plan_id: plan.to_string(),
                update: LiveUpdate::Progress { text },
            };
            if tx.send(msg).is_err() {
                return ControlFlow::Break(());
            }
        }
        ControlFlow::Continue(())
    };
    let mut live = |e: LiveEvent| {
        let _ = tx.send(live_msg(e));
    };
    if let Err(e) = client.follow_live(after, &mut sink, &mut live)
        && !stop.load(Ordering::SeqCst)
    {
        let _ = tx.send(feed_stopped(&e.to_string()));
    }
}

fn feed_stopped(why: &str) -> Msg {
    Msg::Error {
        title: "The live area stopped".into(),
        detail: why.to_string(),
    }
}

/// The live area's line for a committed event: where the plan is in its lifecycle (spec
/// section 08), so the area follows a plan from its first event; on a server, with the human
/// who caused it.
fn progress_text(event: &cleveragents_engine::domain::event::EngineEvent) -> Option<String> {
    use EventKind as K;
    let kind = &event.kind;
    matches!(
        kind,
        K::StrategizeStarted(_)
            | K::StrategizeComplete(_)
            | K::ExecuteStarted(_)
            | K::ExecuteStep(_)
            | K::ExecuteComplete(_)
            | K::ApplyStarted(_)
            | K::ApplyComplete(_)
            | K::ApprovalRequested(_)
            | K::PlanErrored(_)
            | K::PlanCancelled(_)
    )
    .then(|| match &event.caused_by {
        Some(who) => format!("{} (by {who})", crate::event_text::summary(kind)),
        None => crate::event_text::summary(kind),
    })
}

/// The live area's form of a live engine event.
pub fn live_msg(event: LiveEvent) -> Msg {
    let update = match event.kind {
        LiveKind::TurnStarted { actor, turn } => LiveUpdate::Turn { actor, turn },
        LiveKind::TextDelta { text, .. } => LiveUpdate::Text { text },
        LiveKind::Retrying {
            attempt, reason, ..
        } => LiveUpdate::Retrying { attempt, reason },
        LiveKind::ToolCallStarted {
            name, arguments, ..
        } => LiveUpdate::ToolStarted { name, arguments },
        LiveKind::ToolCallFinished {
            name,
            is_error,
            duration_ms,
            ..
        } => LiveUpdate::ToolFinished {
            name,
            is_error,
            duration_ms,
        },
        LiveKind::ToolProgress {
            name,
            progress,
            total,
            message,
        } => LiveUpdate::ToolProgress {
            name,
            progress,
            total,
            message,
        },
        LiveKind::StepOutput { step, line, .. } => LiveUpdate::Output { step, line },
    };
    Msg::Live {
        plan_id: event.plan.to_string(),
        update,
    }
}
