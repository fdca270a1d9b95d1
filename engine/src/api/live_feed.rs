//! The live feed a watching face holds (spec section 20, "live area"; section 21, event
//! stream): every committed event after a `seq`, in order, and, between them, the live-only
//! events (model text, tool calls, step output lines) of the plans this engine drives, which
//! are never stored. In process the engine is this process; on a server it is the server's,
//! and the stream carries both (`GET /v1/events?live=true`).

use std::ops::ControlFlow;
use std::time::{Duration, Instant};

use super::client::Followed;
use super::{ApiError, Engine};
use crate::events::live::{self, LiveEvent};
use crate::store::events::Follower;

/// How long the feed waits for a live event before it looks at the store again when nothing
/// happens (a step's output line reaches the face within this).
const LIVE_TICK: Duration = Duration::from_millis(40);

/// [`super::Client::follow_live`] on a local database: every event after `after` (of every
/// plan) to `sink` as the store has it (looked at every `poll`), and every live event published
/// in this process meanwhile to `live`, until `sink` breaks. A live event is handed on only
/// after the stored events committed before it, so a step's first output line never
/// precedes the event that started its step.
///
/// # Errors
/// Store errors.
pub fn follow_store_live(
    engine: &Engine,
    after: i64,
    poll: Duration,
    sink: &mut dyn FnMut(Followed) -> ControlFlow<()>,
    live: &mut dyn FnMut(LiveEvent),
) -> Result<(), ApiError> {
    let subscription = live::subscribe();
    let store = engine.store()?;
    let mut follower = Follower::new(after, None);
    let mut next_poll = Instant::now();
    loop {
        // Taken before the store is read: whatever these events follow is committed by now.
        let mut arrived: Vec<LiveEvent> = subscription.try_iter().collect();
        if arrived.is_empty()
            && let Ok(first) = subscription.recv_timeout(LIVE_TICK)
        {
            arrived.push(first);
            arrived.extend(subscription.try_iter());
        }
        let stored = if arrived.is_empty() && Instant::now() < next_poll {
            Vec::new()
        } else {
            next_poll = Instant::now() + poll;
            follower.poll(&store)?
        };
        let idle = stored.is_empty() && arrived.is_empty();
        for e in stored {
            if sink(Followed::Event(Box::new(e))).is_break() {
                return Ok(());
            }
        }
        arrived.into_iter().for_each(&mut *live);
        if idle && sink(Followed::Idle).is_break() {
            return Ok(());
        }
    }
}
