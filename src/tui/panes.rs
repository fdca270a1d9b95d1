//! The selected plan's tree and diff, read on a thread of their own, newest request first,
//! so the frame loop never waits on the engine (the diff may wait on the sandbox lock while a
//! step runs; through a server it is a round trip). STYLE.md: nothing slow on the draw path.

use std::sync::{Arc, mpsc};

use cleveragents_engine::api::Client;
use cleveragents_ui::Msg;

use super::views;

/// The worker: requests go in, [`Msg::TreeUpdated`] and [`Msg::DiffUpdated`] come out.
#[derive(Debug)]
pub struct PaneWorker {
    requests: mpsc::Sender<String>,
    results: mpsc::Receiver<Msg>,
    in_flight: usize,
}

impl PaneWorker {
    /// Starts the worker on `client`.
    pub fn spawn(client: Arc<dyn Client>) -> Self {
        let (req_tx, req_rx) = mpsc::channel::<String>();
        let (res_tx, res_rx) = mpsc::channel();
        std::thread::spawn(move || serve(client.as_ref(), &req_rx, &res_tx));
        Self {
            requests: req_tx,
            results: res_rx,
            in_flight: 0,
        }
    }

    /// Whether a request is not answered yet.
    pub fn busy(&self) -> bool {
        self.in_flight > 0
    }

    /// Asks for plan `plan_id`'s tree and diff.
    pub fn request(&mut self, plan_id: &str) {
        if self.requests.send(plan_id.to_owned()).is_ok() {
            self.in_flight += 1;
        }
    }

    /// The answers that arrived.
    pub fn ready(&mut self) -> Vec<Msg> {
        let mut out = Vec::new();
        for msg in self.results.try_iter() {
            // Each request ends with its diff (or a placeholder when a newer one replaced it).
            if matches!(msg, Msg::Activity(_) | Msg::DiffUpdated { .. }) {
                self.in_flight = self.in_flight.saturating_sub(1);
            }
            if !matches!(msg, Msg::Activity(_)) {
                out.push(msg);
            }
        }
        out
    }
}

fn serve(client: &dyn Client, requests: &mpsc::Receiver<String>, results: &mpsc::Sender<Msg>) {
    while let Ok(mut plan_id) = requests.recv() {
        let mut skipped = 0;
        while let Ok(newer) = requests.try_recv() {
            plan_id = newer;
            skipped += 1;
        }
        // The tree first (a quick read), then the diff (which may wait on the sandbox lock
        // while a step runs). A plan that cannot be read shows an empty tree and diff.
        let nodes = client
            .plan_tree(&plan_id)
            .map(|roots| roots.iter().map(views::tree_node).collect())
            .unwrap_or_default();
        let tree = Msg::TreeUpdated {
            plan_id: plan_id.clone(),
            nodes,
        };
        if results.send(tree).is_err() {
            return;
        }
        let diff = client
            .plan_changes(&plan_id)
            .map(|c| views::changes_view(&c))
            .unwrap_or_default();
        // One answer per request, so the owner can count what is in flight; the skipped
        // ones answer with nothing.
        for _ in 0..skipped {
            let _ = results.send(Msg::Activity(Vec::new()));
        }
        if results.send(Msg::DiffUpdated { plan_id, diff }).is_err() {
            return;
        }
    }
}
