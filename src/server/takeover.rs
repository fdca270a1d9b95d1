//! Every instance resumes the plans whose driver is gone (spec section 21: several instances,
//! one database, and an instance that dies loses nothing). On start and then at a third of the
//! lease expiry, the server asks the engine for abandoned plans (a driver that died, froze past
//! its lease's expiry, or an instance that stopped and handed its plans over) and drives each
//! on, from its last checkpoint, as `plan execute` would resume it. Two instances that find
//! the same plan race for its lease; the loser is refused and leaves it.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use cleveragents_engine::api::Engine;
use cleveragents_engine::domain::Id;

use super::Shared;

/// How often an instance looks for abandoned plans: a third of the lease expiry, between one
/// and ten seconds.
pub fn interval(expiry: Duration) -> Duration {
    (expiry / 3).clamp(Duration::from_secs(1), Duration::from_secs(10))
}

/// Looks for abandoned plans now and every [`interval`] until the server stops.
pub fn spawn(shared: Arc<Shared>) -> tokio::task::JoinHandle<()> {
    let resuming: Arc<Mutex<HashSet<Id>>> = Arc::default();
    tokio::spawn(async move {
        while !shared.stopping.is_set() {
            let engine = shared.engine.engine();
            let every = interval(engine.settings().lease_expiry);
            sweep(engine, &resuming, &shared).await;
            tokio::select! {
                () = tokio::time::sleep(every) => {},
                () = shared.stopping.wait() => {},
            }
        }
    })
}

/// Starts a driver for each abandoned plan this instance is not already resuming.
async fn sweep(engine: Engine, resuming: &Arc<Mutex<HashSet<Id>>>, shared: &Arc<Shared>) {
    let finder = engine.clone();
    let found = match tokio::task::spawn_blocking(move || finder.abandoned_plans()).await {
        Ok(Ok(plans)) => plans,
        Ok(Err(e)) => {
            tracing::warn!(error = %e, "cannot look for plans to take over");
            return;
        }
        Err(e) => {
            tracing::warn!(error = %e, "the search for plans to take over failed");
            return;
        }
    };
    for plan in found {
        if shared.stopping.is_set() || !lock(resuming).insert(plan) {
            continue;
        }
        tracing::info!(plan = %plan, "taking over a plan whose driver is gone");
        let (engine, resuming) = (engine.clone(), Arc::clone(resuming));
        tokio::task::spawn_blocking(move || {
            match engine.take_over(&plan) {
                Ok(_) => tracing::info!(plan = %plan, "took the plan over and drove it on"),
                Err(e) => tracing::info!(plan = %plan, error = %e, "did not take the plan over"),
            }
            lock(&resuming).remove(&plan);
        });
    }
}

fn lock(set: &Mutex<HashSet<Id>>) -> std::sync::MutexGuard<'_, HashSet<Id>> {
    set.lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}
