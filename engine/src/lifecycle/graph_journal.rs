//! A graph actor's step, journaled node by node (docs/actors.md, "Graph actors"; docs/sandbox.md,
//! "Resuming a step").
//!
//! The walk's journal, keyed as the step's (its decision id), holds a `node_started` entry
//! before each node and a `node_done` entry (the node's output, calls, tokens and cost, and,
//! when it may have written, an internal checkpoint of the sandboxes) after each node that
//! answered. Each llm node's loop keeps a step journal of its own under
//! `<walk>/<step>:<node>` ([`StepJournal`]), and a nested graph's walk journals under its
//! node's path in the same way. [`continuation`] reads it back for a step whose driver
//! vanished: the checkpoint to restore and the call the run continues at; the walk then
//! replays its finished nodes without running them and continues the node that was open.

use std::sync::{Arc, Mutex};

use serde_json::{Value, json};

use super::journal::{Journaled, StepJournal, internal_checkpoint, rebuild};
use crate::actors::messages::Message;
use crate::actors::runtime::{GraphJournal, NodeDone, NodeRun, RunJournal, WalkRecord};
use crate::domain::Id;
use crate::sandbox::Sandboxes;
use crate::store::step_journal::JournalEntry;
use crate::store::{Location, Store, StoreError};

/// The journal of one graph actor's step.
pub(crate) struct GraphStepJournal {
    store: Mutex<Store>,
    db: Location,
    sandboxes: Sandboxes,
    step: Journaled,
}

impl std::fmt::Debug for GraphStepJournal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GraphStepJournal")
            .field("plan_id", &self.step.plan_id)
            .field("key", &self.step.key)
            .finish_non_exhaustive()
    }
}

impl GraphStepJournal {
    /// A journal for `step` (its key is the walk's path) on its own connection to `db`.
    ///
    /// # Errors
    /// A message when the database cannot be opened.
    pub fn open(db: &Location, sandboxes: Sandboxes, step: Journaled) -> Result<Self, String> {
        Ok(Self {
            store: Mutex::new(db.open().map_err(|e| e.to_string())?),
            db: db.clone(),
            sandboxes,
            step,
        })
    }

    /// Appends an entry to the journal at `path`; a failure is logged, and the run goes on
    /// (it then resumes from an earlier node, or from the step's start).
    fn append(&self, path: &str, kind: &str, entry: &Value) {
        let Ok(mut store) = self.store.lock() else {
            return;
        };
        if let Err(e) = store.journal_append(&self.step.plan_id, path, kind, entry, None) {
            tracing::warn!(error = %e, kind, "the graph's journal could not be written");
        }
    }

    fn entries(&self, path: &str) -> Vec<JournalEntry> {
        self.store
            .lock()
            .ok()
            .and_then(|s| s.journal(&self.step.plan_id, path).ok())
            .unwrap_or_default()
    }
}

impl GraphJournal for GraphStepJournal {
    fn walk(&self, path: &str) -> WalkRecord {
        let mut record = WalkRecord::default();
        for e in self.entries(path) {
            match e.kind.as_str() {
                "node_started" => record.open = true,
                "node_done" => match serde_json::from_value(e.entry["done"].clone()) {
                    Ok(done) => {
                        record.done.push(done);
                        record.open = false;
                    }
                    Err(err) => {
                        tracing::warn!(error = %err, "a journaled graph node does not read back");
                        break;
                    }
                },
                _ => {}
            }
        }
        record
    }

    fn node_started(&self, path: &str, step: u32, node: &str, kind: &str) {
        self.append(
            path,
            "node_started",
            &json!({"step": step, "node": node, "kind": kind}),
        );
    }

    fn node_done(&self, path: &str, done: &NodeDone) {
        let wrote = done
            .tool_calls
            .iter()
            .any(|c| self.step.writers.contains(&c.name));
        let checkpoint = if wrote {
            let unnoted = done
                .tool_calls
                .iter()
                .any(|c| self.step.unnoted.contains(&c.name));
            let taken = self.store.lock().map_err(|_| ()).and_then(|store| {
                internal_checkpoint(&store, &self.sandboxes, &self.step.plan_id, !unnoted)
                    .map_err(|e| tracing::warn!(error = %e, "no checkpoint after the graph node"))
            });
            taken.unwrap_or(Value::Null)
        } else {
            Value::Null
        };
        self.append(
            path,
            "node_done",
            &json!({"done": done, "may_have_written": wrote, "checkpoint": checkpoint}),
        );
    }

    fn node_run(&self, path: &str, offset: u32) -> NodeRun {
        let mut step = self.step.clone();
        step.key = path.to_string();
        let journal = match StepJournal::open(&self.db, self.sandboxes.clone(), step) {
            Ok(j) => j.after(offset),
            Err(e) => {
                tracing::warn!(error = %e, "the graph node runs without a journal");
                return (Arc::new(Unjournaled), None);
            }
        };
        let entries = self.entries(path);
        let resumed = rebuild(&entries).map(|rebuilt| {
            journal.resumed(rebuilt.call(), &rebuilt.point, rebuilt.lost.as_ref());
            (rebuilt.history, rebuilt.point)
        });
        if resumed.is_none()
            && !entries.is_empty()
            && let Ok(mut store) = self.store.lock()
            && let Err(e) = store.journal_clear(&self.step.plan_id, path)
        {
            tracing::warn!(error = %e, "a graph node's journal could not be cleared");
        }
        (Arc::new(journal), resumed)
    }

    fn resumed(&self, path: &str, call: u32) {
        self.append(path, "resumed", &json!({"turn": call, "walk": true}));
    }
}

/// A node whose journal could not be opened records nothing.
#[derive(Debug)]
struct Unjournaled;

impl RunJournal for Unjournaled {
    fn started(&self, _: &[Message]) {}
    fn model_started(&self, _: u32, _: &str, _: &str, _: bool) {}
    fn model_ended(&self, _: &crate::actors::runtime::ModelCallRecord, _: Option<&Message>, _: bool) {}
    fn noted(&self, _: &Message) {}
    fn tool_started(&self, _: u32, _: &str, _: &str) {}
    fn tool_ended(&self, _: &crate::actors::runtime::ToolCallRecord, _: bool, _: bool) {}
}

/// Where a graph actor's step whose driver vanished continues.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Continuation {
    /// The internal checkpoint after the last completed call or node that may have written
    /// (`None`: none did, so the step's start).
    pub checkpoint: Option<Value>,
    /// The model call of the run it continues at.
    pub call: u32,
}

/// Reads back the graph journal at `path` (a step's key, or a nested walk's). `None` when it
/// is no graph journal, or cannot be continued and the step runs again from its start: a
/// node that may have written has no checkpoint, or the open node's own journal cannot be
/// continued (a tool ended its run, its last reply was cut).
///
/// # Errors
/// Store errors.
pub(crate) fn continuation(
    store: &Store,
    plan_id: &Id,
    path: &str,
) -> Result<Option<Continuation>, StoreError> {
    let entries = store.journal(plan_id, path)?;
    if !entries.iter().any(|e| e.kind == "node_started") {
        return Ok(None);
    }
    let mut checkpoint = None;
    let mut calls = 0u32;
    let mut open: Option<(String, String)> = None;
    for e in &entries {
        let v = &e.entry;
        match e.kind.as_str() {
            "node_started" => {
                let node = format!("{path}/{}:{}", v["step"], v["node"].as_str().unwrap_or(""));
                open = Some((node, v["kind"].as_str().unwrap_or("tool").to_string()));
            }
            "node_done" => {
                open = None;
                calls += v["done"]["turns"]
                    .as_u64()
                    .and_then(|t| u32::try_from(t).ok())
                    .unwrap_or(0);
                if !v["checkpoint"].is_null() {
                    checkpoint = Some(v["checkpoint"].clone());
                } else if v["may_have_written"] == true {
                    return Ok(None);
                }
            }
            _ => {}
        }
    }
    let mut call = calls + 1;
    match open {
        Some((node, kind)) if kind == "llm" => {
            let entries = store.journal(plan_id, &node)?;
            if !entries.is_empty() {
                let Some(rebuilt) = rebuild(&entries) else {
                    return Ok(None);
                };
                if rebuilt.checkpoint.is_some() {
                    checkpoint = rebuilt.checkpoint.clone();
                }
                call = calls + rebuilt.call();
            }
        }
        Some((node, kind)) if kind == "graph" => {
            if let Some(inner) = continuation(store, plan_id, &node)? {
                if inner.checkpoint.is_some() {
                    checkpoint = inner.checkpoint;
                }
                call = calls + inner.call;
            } else if !store.journal(plan_id, &node)?.is_empty() {
                return Ok(None);
            }
        }
        _ => {}
    }
    Ok(Some(Continuation { checkpoint, call }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::Plan;

    fn store() -> (tempfile::TempDir, Store, Id) {
        let dir = tempfile::tempdir().unwrap();
        let mut store = Store::open(&dir.path().join("db")).unwrap();
        let plan = Plan::new("local/x", "x", jiff::Timestamp::now());
        store.insert_plan(&plan).unwrap();
        let id = plan.plan_id;
        (dir, store, id)
    }

    fn add(store: &mut Store, plan: &Id, key: &str, kind: &str, entry: Value) {
        store.journal_append(plan, key, kind, &entry, None).unwrap();
    }

    fn done(step: u32, node: &str, turns: u32, checkpoint: Value, wrote: bool) -> Value {
        json!({"done": {"step": step, "node": node, "output": "ok", "is_error": false, "turns": turns,
            "usage": {"input_tokens": 1, "output_tokens": 1}, "spent_usd": 0.0, "tool_calls": []},
            "may_have_written": wrote, "checkpoint": checkpoint})
    }

    #[test]
    fn a_walk_continues_from_the_latest_checkpoint_of_its_finished_nodes_or_of_the_open_nested_node()
     {
        let (_dir, mut store, plan) = store();
        assert_eq!(continuation(&store, &plan, "d").unwrap(), None, "no journal");
        let cp = |n: u64| json!({"trees": [], "tool_call_seq": n});
        add(&mut store, &plan, "d", "node_started", json!({"step": 1, "node": "draft", "kind": "llm"}));
        add(&mut store, &plan, "d", "node_done", done(1, "draft", 2, cp(1), true));
        add(&mut store, &plan, "d", "node_started", json!({"step": 2, "node": "read", "kind": "tool"}));
        add(&mut store, &plan, "d", "node_done", done(2, "read", 0, Value::Null, false));
        add(&mut store, &plan, "d", "node_started", json!({"step": 3, "node": "sub", "kind": "graph"}));
        // The tool node in flight is run again after the draft's checkpoint is restored.
        assert_eq!(
            continuation(&store, &plan, "d").unwrap(),
            Some(Continuation { checkpoint: Some(cp(1)), call: 3 })
        );
        // The nested walk finished a writing tool node and is in its llm node's second call.
        add(&mut store, &plan, "d/3:sub", "node_started", json!({"step": 1, "node": "stamp", "kind": "tool"}));
        add(&mut store, &plan, "d/3:sub", "node_done", done(1, "stamp", 0, cp(2), true));
        add(&mut store, &plan, "d/3:sub", "node_started", json!({"step": 2, "node": "inner", "kind": "llm"}));
        let history = json!([{"role": "user", "text": "go"}]);
        add(&mut store, &plan, "d/3:sub/2:inner", "start", json!({"history": history}));
        add(&mut store, &plan, "d/3:sub/2:inner", "model", json!({"reply": {"role": "assistant", "text": "", "tool_calls": [{"id": "a", "name": "read_file", "arguments": "{}"}]},
            "record": {"turn": 1, "usage": {"input_tokens": 1, "output_tokens": 1}, "stop_reason": null}}));
        add(&mut store, &plan, "d/3:sub/2:inner", "tool", json!({"record": {"call_id": "a", "result": "x", "is_error": false}, "ends_run": false, "may_have_written": false, "checkpoint": null}));
        add(&mut store, &plan, "d/3:sub/2:inner", "model_started", json!({"turn": 2}));
        assert_eq!(
            continuation(&store, &plan, "d").unwrap(),
            Some(Continuation { checkpoint: Some(cp(2)), call: 2 + 2 }),
            "the draft's two calls, then the inner node's second"
        );
        // A node that may have written without a checkpoint cannot be continued.
        add(&mut store, &plan, "d/3:sub", "node_done", done(2, "inner", 2, Value::Null, true));
        assert_eq!(continuation(&store, &plan, "d").unwrap(), None);
    }
}
