//! Live-only events: what a running plan is doing right now, delivered to subscribers in this
//! process and never stored (architecture: "live token deltas and tool calls, which are never
//! stored").
//!
//! Producers call [`publish`]; it costs one uncontended lock when nobody listens. A face calls
//! [`subscribe`] once and drains the [`Subscription`] from its own loop. Other processes' plans
//! are not seen here: their stored events reach a face through [`super::Follower`].

use std::sync::Mutex;
use std::sync::mpsc::{self, Receiver, Sender, TryIter};

use serde::{Deserialize, Serialize};

use crate::domain::id::Id;

/// One live event of a plan.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct LiveEvent {
    /// The plan whose work produced it.
    pub plan: Id,
    /// What happened.
    pub kind: LiveKind,
}

/// What a live event says.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum LiveKind {
    /// A model call started (a new turn of an actor's run).
    TurnStarted {
        /// The actor (`openai/gpt-4o`).
        actor: String,
        /// 1-based turn of the run.
        turn: u32,
    },
    /// A piece of the model's streamed reply text.
    TextDelta {
        /// The actor.
        actor: String,
        /// Turn.
        turn: u32,
        /// The text, as streamed (may end mid-word or mid-line).
        text: String,
    },
    /// The model call failed transiently and is retried; this turn's text so far is void.
    Retrying {
        /// The actor.
        actor: String,
        /// The attempt that failed.
        attempt: u32,
        /// What failed.
        reason: String,
    },
    /// A tool call is starting.
    ToolCallStarted {
        /// The actor that called it.
        actor: String,
        /// The provider's call id.
        call_id: String,
        /// The tool, as the model named it.
        name: String,
        /// The arguments, as the model sent them (JSON text).
        arguments: String,
    },
    /// A tool call finished.
    ToolCallFinished {
        /// The actor that called it.
        actor: String,
        /// The provider's call id.
        call_id: String,
        /// The tool.
        name: String,
        /// Whether it failed.
        is_error: bool,
        /// How long it took, in milliseconds.
        duration_ms: u64,
    },
    /// A running tool reported progress (an MCP server's `notifications/progress`); each
    /// replaces the previous one of the same tool.
    ToolProgress {
        /// The tool.
        name: String,
        /// The progress so far.
        progress: f64,
        /// The total, when known.
        total: Option<f64>,
        /// What the tool says it is doing.
        message: Option<String>,
    },
    /// One line of what a step printed (a script step's command output).
    StepOutput {
        /// The step (its name in the action's script).
        step: String,
        /// Which stream: `stdout` or `stderr`.
        stream: String,
        /// The line, without its line break.
        line: String,
    },
}

static SUBSCRIBERS: Mutex<Vec<Sender<LiveEvent>>> = Mutex::new(Vec::new());

/// A subscription to every live event published in this process from now on. Dropping it
/// unsubscribes (the next [`publish`] forgets it).
#[derive(Debug)]
pub struct Subscription {
    events: Receiver<LiveEvent>,
}

impl Subscription {
    /// The events published since the last call, oldest first, without waiting.
    pub fn try_iter(&self) -> TryIter<'_, LiveEvent> {
        self.events.try_iter()
    }

    /// Waits up to `timeout` for the next event.
    ///
    /// # Errors
    /// [`mpsc::RecvTimeoutError`] when none came in time.
    pub fn recv_timeout(
        &self,
        timeout: std::time::Duration,
    ) -> Result<LiveEvent, mpsc::RecvTimeoutError> {
        self.events.recv_timeout(timeout)
    }
}

/// Subscribes to live events (see [`Subscription`]).
pub fn subscribe() -> Subscription {
    let (tx, rx) = mpsc::channel();
    SUBSCRIBERS
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .push(tx);
    Subscription { events: rx }
}

/// Whether anyone listens (producers may skip building events when nobody does).
pub fn has_subscribers() -> bool {
    !SUBSCRIBERS
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .is_empty()
}

/// Delivers `event` to every current subscriber; subscribers that went away are forgotten.
pub fn publish(plan: Id, kind: LiveKind) {
    let mut subs = SUBSCRIBERS
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    if subs.is_empty() {
        return;
    }
    let event = LiveEvent { plan, kind };
    subs.retain(|s| s.send(event.clone()).is_ok());
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn subscribers_get_what_is_published_after_they_subscribe_and_nothing_is_stored() {
        let plan = Id::generate();
        publish(
            plan,
            LiveKind::TurnStarted {
                actor: "a".into(),
                turn: 1,
            },
        );
        let sub = subscribe();
        for line in ["one", "two"] {
            publish(
                plan,
                LiveKind::StepOutput {
                    step: "step-1".into(),
                    stream: "stdout".into(),
                    line: line.into(),
                },
            );
        }
        let mine: Vec<LiveKind> =
            std::iter::from_fn(|| sub.recv_timeout(Duration::from_secs(1)).ok())
                .filter(|e| e.plan == plan)
                .take(2)
                .map(|e| e.kind)
                .collect();
        let lines: Vec<&str> = mine
            .iter()
            .map(|k| match k {
                LiveKind::StepOutput { line, .. } => line.as_str(),
                other => panic!("unexpected {other:?}"),
            })
            .collect();
        assert_eq!(lines, ["one", "two"]);
    }

    #[test]
    fn a_dropped_subscription_is_forgotten() {
        let sub = subscribe();
        drop(sub);
        // Publishing to a dropped receiver must not fail or block.
        publish(
            Id::generate(),
            LiveKind::TurnStarted {
                actor: "a".into(),
                turn: 1,
            },
        );
    }
}
