//! A model executor's step, journaled call by call (docs/sandbox.md, "Resuming a step").
//!
//! [`StepJournal`] is the runtime's [`RunJournal`] for one step: each model call (the
//! assistant message with its tool calls, and the call's accounting row) and each tool call
//! (its result and, when the tool may have written, the trees of the plan's sandboxes after
//! it: an internal checkpoint) is one SQLite transaction, committed before the next call.
//!
//! [`rebuild`] reads a journal back: the conversation as it stood, the turns and usage so
//! far, the tool calls of the last reply without a result (the one in flight is re-issued),
//! and the internal checkpoint to restore. [`continue_from`] restores the sandboxes to that
//! checkpoint before the step runs again.

use std::collections::BTreeSet;
use std::sync::Mutex;

use serde_json::{Value, json};

use crate::actors::accounting::{self, CallContext};
use crate::actors::messages::{Message, ToolCall, ToolResult, Usage};
use crate::actors::runtime::{ModelCallRecord, ResumePoint, RunJournal, ToolCallRecord};

/// The journal key of a plan's Strategize run (a step's journal is keyed by its decision id):
/// the strategist's calls are journaled as a step's are (docs/sandbox.md, "Resuming a step").
pub(crate) const STRATEGIZE_KEY: &str = "strategize";

/// The error kind of a model call that was in flight when the process driving its run
/// vanished: made, never answered (docs/sandbox.md, "Resuming a step").
pub(crate) const INTERRUPTED: &str = "interrupted";
use crate::config::Provider;
use crate::domain::Id;
use crate::sandbox::checkpoint;
use crate::sandbox::{SandboxError, Sandboxes};
use crate::store::Store;
use crate::store::step_journal::JournalEntry;

/// The journal of one step's run.
pub(crate) struct StepJournal {
    store: Mutex<Store>,
    sandboxes: Sandboxes,
    plan_id: Id,
    /// The journal's key: the step's decision id, or [`STRATEGIZE_KEY`].
    key: String,
    ctx: CallContext,
    providers: Vec<Provider>,
    fallback: Provider,
    /// Tools whose calls may have written (checkpointed after each call).
    writers: BTreeSet<String>,
    /// Writers whose writes the sandboxes' write notes do not see (their checkpoint scans
    /// every work tree).
    unnoted: BTreeSet<String>,
    /// Model calls of the run made before this journal's (a graph node's loop: the calls of
    /// the nodes before it), added to the turns of its accounting rows and `resumed`
    /// entries so that they count across the whole run.
    offset: u32,
}

impl std::fmt::Debug for StepJournal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StepJournal")
            .field("plan_id", &self.plan_id)
            .field("key", &self.key)
            .finish_non_exhaustive()
    }
}

/// Who a step's journal accounts its calls to, and what it checkpoints.
#[derive(Clone)]
pub(crate) struct Journaled {
    /// The plan.
    pub plan_id: Id,
    /// The journal's key: the step's decision id, or [`STRATEGIZE_KEY`] for the strategist.
    pub key: String,
    /// The decision the model calls are accounted to (`None`: the plan's, as Strategize's).
    pub decision_id: Option<Id>,
    /// The actor's name.
    pub actor: String,
    /// The configured providers (each call is priced with its own).
    pub providers: Vec<Provider>,
    /// The actor's provider.
    pub fallback: Provider,
    /// Tools whose calls may have written.
    pub writers: BTreeSet<String>,
    /// Writers that do not go through the tool runner, so their writes are not noted
    /// (`create_subplan`): the checkpoint after them scans every work tree.
    pub unnoted: BTreeSet<String>,
}

impl StepJournal {
    /// A journal for `step` on its own connection to the database at `db`.
    ///
    /// # Errors
    /// A message when the database cannot be opened.
    pub fn open(
        db: &crate::store::Location,
        sandboxes: Sandboxes,
        step: Journaled,
    ) -> Result<Self, String> {
        let store = db.open().map_err(|e| e.to_string())?;
        Ok(Self {
            store: Mutex::new(store),
            sandboxes,
            plan_id: step.plan_id,
            key: step.key,
            ctx: CallContext {
                run_id: Id::generate(),
                plan_id: Some(step.plan_id),
                decision_id: step.decision_id.map(|d| d.to_string()),
                actor: step.actor,
            },
            providers: step.providers,
            fallback: step.fallback,
            writers: step.writers,
            unnoted: step.unnoted,
            offset: 0,
        })
    }

    /// This journal, its calls numbered after `offset` calls of the run.
    pub fn after(mut self, offset: u32) -> Self {
        self.offset = offset;
        self
    }

    /// Appends one entry (with a model call's row); a failure is logged, and the run goes
    /// on: it then resumes from an earlier call, or from the step's start.
    fn append(
        &self,
        kind: &str,
        entry: &Value,
        call: Option<&crate::store::model_calls::NewModelCall>,
    ) {
        let Ok(mut store) = self.store.lock() else {
            return;
        };
        if let Err(e) = store.journal_append(&self.plan_id, &self.key, kind, entry, call) {
            tracing::warn!(error = %e, kind, "the step journal could not be written");
        }
    }

    /// Records that the step continues from its journal at model call `turn`; a model call
    /// that was in flight (`lost`, its `model_started` entry) is recorded, in the same
    /// transaction, as made but never answered: the provider may have billed it, so it counts
    /// as a call, with unknown tokens and cost (docs/cost.md).
    pub fn resumed(&self, turn: u32, point: &ResumePoint, lost: Option<&Value>) {
        let row = lost.map(|lost| {
            let provider_name = lost["provider"].as_str().unwrap_or(&self.fallback.name);
            let provider = self
                .providers
                .iter()
                .find(|p| p.name == provider_name)
                .unwrap_or(&self.fallback);
            let started_at = lost["started_at"]
                .as_str()
                .and_then(|t| t.parse().ok())
                .unwrap_or_else(jiff::Timestamp::now);
            let record = ModelCallRecord {
                turn: lost["turn"]
                    .as_u64()
                    .and_then(|t| u32::try_from(t).ok())
                    .unwrap_or(turn),
                provider: provider_name.to_string(),
                model: lost["model"].as_str().unwrap_or("unknown").to_string(),
                usage: Usage::default(),
                usage_reported: false,
                estimated_input_tokens: 0,
                estimated_output_tokens: 0,
                stop_reason: None,
                attempts: 1,
                started_at,
                duration_ms: u64::try_from(
                    jiff::Timestamp::now()
                        .duration_since(started_at)
                        .as_millis()
                        .max(0),
                )
                .unwrap_or(0),
                error: Some((
                    INTERRUPTED.to_string(),
                    "in flight when the process driving the plan vanished: never answered, its tokens and cost are unknown".to_string(),
                )),
            };
            let mut row = accounting::call_row(&self.ctx, provider, &record);
            row.cost_usd = None;
            row.retry = lost["retry"] == true;
            row.turn += self.offset;
            row
        });
        self.append(
            "resumed",
            &json!({
                "turn": turn + self.offset,
                "model_in_flight": point.model_in_flight,
                "tool_in_flight": point.tool_in_flight,
                "interrupted_call_recorded": row.is_some(),
            }),
            row.as_ref(),
        );
    }

    /// The trees of the plan's sandboxes now, with the highest tool-call sequence logged.
    /// After a call through the tool runner only the paths written since the last snapshot
    /// are looked at, when they are known (docs/sandbox.md, "Checkpoints that cost what
    /// changed").
    fn checkpoint(&self, tool: &str) -> Result<Value, SandboxError> {
        let store = self
            .store
            .lock()
            .map_err(|_| SandboxError::Checkpoint("the journal's store is unavailable".into()))?;
        internal_checkpoint(
            &store,
            &self.sandboxes,
            &self.plan_id,
            !self.unnoted.contains(tool),
        )
    }
}

/// An internal checkpoint: the trees of the plan's sandboxes now, with the highest tool-call
/// sequence logged. With `written_only`, only the paths written since the last snapshot are
/// looked at, when they are known (docs/sandbox.md, "Checkpoints that cost what changed").
///
/// # Errors
/// Git, I/O and store errors.
pub(crate) fn internal_checkpoint(
    store: &Store,
    sandboxes: &Sandboxes,
    plan_id: &Id,
    written_only: bool,
) -> Result<Value, SandboxError> {
    let trees = checkpoint::trees(store, sandboxes, plan_id, written_only)?;
    let seq = store.max_tool_call_seq(plan_id)?;
    Ok(json!({
        "trees": trees.into_iter().map(|(s, t)| json!({"sandbox_id": s, "tree": t})).collect::<Vec<_>>(),
        "tool_call_seq": seq,
    }))
}

impl RunJournal for StepJournal {
    fn started(&self, history: &[Message]) {
        self.append("start", &json!({"history": history}), None);
    }

    fn model_started(&self, turn: u32, provider: &str, model: &str, retry: bool) {
        self.append(
            "model_started",
            &json!({"turn": turn, "provider": provider, "model": model, "retry": retry, "started_at": jiff::Timestamp::now()}),
            None,
        );
    }

    fn model_ended(&self, record: &ModelCallRecord, reply: Option<&Message>, retry: bool) {
        let provider = self
            .providers
            .iter()
            .find(|p| p.name == record.provider)
            .unwrap_or(&self.fallback);
        let mut row = accounting::call_row(&self.ctx, provider, record);
        row.retry = retry;
        row.turn += self.offset;
        self.append(
            "model",
            &json!({"turn": record.turn, "reply": reply, "record": record, "retry": retry}),
            Some(&row),
        );
    }

    fn noted(&self, message: &Message) {
        self.append("note", &json!({"message": message}), None);
    }

    fn tool_started(&self, turn: u32, call_id: &str, name: &str) {
        self.append(
            "tool_started",
            &json!({"turn": turn, "call_id": call_id, "name": name}),
            None,
        );
    }

    fn tool_ended(&self, record: &ToolCallRecord, ends_run: bool, retry: bool) {
        let wrote = self.writers.contains(&record.name);
        let checkpoint = if wrote {
            match self.checkpoint(&record.name) {
                Ok(cp) => cp,
                Err(e) => {
                    tracing::warn!(error = %e, "no checkpoint after the tool call");
                    Value::Null
                }
            }
        } else {
            Value::Null
        };
        self.append(
            "tool",
            &json!({"record": record, "ends_run": ends_run, "retry": retry, "may_have_written": wrote, "checkpoint": checkpoint}),
            None,
        );
    }
}

/// Records each model call of a run that keeps no journal (a graph actor's nodes) as it is
/// made, so that a run killed midway still counts the calls it paid for (docs/cost.md). It
/// writes no journal entries: such a run is never continued, only run again. Turns are
/// numbered in the order the calls end, across the graph's nodes.
pub(crate) struct CallRecorder {
    store: Mutex<Store>,
    ctx: CallContext,
    providers: Vec<Provider>,
    fallback: Provider,
    turns: std::sync::atomic::AtomicU32,
}

impl std::fmt::Debug for CallRecorder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CallRecorder")
            .field("plan_id", &self.ctx.plan_id)
            .finish_non_exhaustive()
    }
}

impl CallRecorder {
    /// A recorder on its own connection to the database at `db`.
    ///
    /// # Errors
    /// A message when the database cannot be opened.
    pub fn open(
        db: &crate::store::Location,
        ctx: CallContext,
        providers: Vec<Provider>,
        fallback: Provider,
    ) -> Result<Self, String> {
        Ok(Self {
            store: Mutex::new(db.open().map_err(|e| e.to_string())?),
            ctx,
            providers,
            fallback,
            turns: std::sync::atomic::AtomicU32::new(0),
        })
    }
}

impl RunJournal for CallRecorder {
    fn started(&self, _: &[Message]) {}

    fn model_started(&self, _: u32, _: &str, _: &str, _: bool) {}

    fn model_ended(&self, record: &ModelCallRecord, _: Option<&Message>, _: bool) {
        let provider = self
            .providers
            .iter()
            .find(|p| p.name == record.provider)
            .unwrap_or(&self.fallback);
        let mut row = accounting::call_row(&self.ctx, provider, record);
        row.turn = self
            .turns
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst)
            .saturating_add(1);
        let Ok(mut store) = self.store.lock() else {
            return;
        };
        if let Err(e) = store.record_model_calls(&[row]) {
            tracing::warn!(error = %e, "a model call could not be recorded");
        }
    }

    fn noted(&self, _: &Message) {}

    fn tool_started(&self, _: u32, _: &str, _: &str) {}

    fn tool_ended(&self, _: &ToolCallRecord, _: bool, _: bool) {}
}

/// A journal read back: the conversation, where the run continues, and the internal
/// checkpoint to restore first (`None`: no call that may have written completed, so the
/// step's start).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Rebuilt {
    /// The conversation up to the last recorded reply.
    pub history: Vec<Message>,
    /// Where the run continues.
    pub point: ResumePoint,
    /// The trees and tool-call sequence after the last completed call that may have written.
    pub checkpoint: Option<Value>,
    /// The `model_started` entry of a model call that was in flight and is not accounted
    /// for yet (no earlier continuation recorded it as interrupted).
    pub lost: Option<Value>,
    /// The journal ends with a model call that failed (a provider error ended the run, which
    /// the user chose to retry): the run continues with that call made again, and its driver
    /// did not vanish.
    pub failed_call: bool,
}

impl Rebuilt {
    /// The model call the run continues at: the one whose tool calls are re-run, else the
    /// next one.
    pub fn call(&self) -> u32 {
        if self.point.pending.is_empty() {
            self.point.turns + 1
        } else {
            self.point.turns
        }
    }
}

/// The last reply's tool calls and the results recorded so far.
struct Open {
    calls: Vec<ToolCall>,
    done: Vec<ToolResult>,
    truncated: bool,
}

/// Reads a step's journal back. `None` when it cannot be continued and the step runs again
/// from its start: it is empty, or a tool ended the run (a question or an approval the
/// journal does not hold), a call that may have written has no checkpoint, or its last reply
/// was a text cut by the token limit.
pub(crate) fn rebuild(entries: &[JournalEntry]) -> Option<Rebuilt> {
    let mut history: Option<Vec<Message>> = None;
    let mut point = ResumePoint::default();
    let mut checkpoint = None;
    let mut lost = None;
    let mut open: Option<Open> = None;
    let mut failed_call = false;
    for e in entries {
        let v = &e.entry;
        failed_call = e.kind == "model" && v["reply"].is_null() && !v["record"]["error"].is_null();
        match e.kind.as_str() {
            "start" => history = Some(serde_json::from_value(v["history"].clone()).ok()?),
            "model_started" => {
                point.model_in_flight = true;
                point.answered = None;
                lost = Some(v.clone());
            }
            // A continuation recorded the call in flight as interrupted: it is not counted
            // again, though the next call is still its retry.
            "resumed" => lost = None,
            "model" => {
                point.model_in_flight = false;
                lost = None;
                let record = &v["record"];
                let turn = u32::try_from(record["turn"].as_u64()?).ok()?;
                point.turns = point.turns.max(turn);
                let usage: Usage = serde_json::from_value(record["usage"].clone()).ok()?;
                point.usage += usage;
                if v["reply"].is_null() {
                    continue;
                }
                let reply: Message = serde_json::from_value(v["reply"].clone()).ok()?;
                let Message::Assistant { text, tool_calls } = &reply else {
                    return None;
                };
                let truncated = matches!(
                    record["stop_reason"].as_str(),
                    Some("length" | "max_tokens")
                );
                if tool_calls.is_empty() {
                    if truncated {
                        return None;
                    }
                    point.answered = Some(text.clone());
                } else {
                    open = Some(Open {
                        calls: tool_calls.clone(),
                        done: Vec::new(),
                        truncated,
                    });
                }
                history.as_mut()?.push(reply);
            }
            "note" => history
                .as_mut()?
                .push(serde_json::from_value(v["message"].clone()).ok()?),
            "tool_started" => point.tool_in_flight = v["call_id"].as_str().map(str::to_string),
            "tool" => {
                if v["ends_run"] == true {
                    return None;
                }
                point.tool_in_flight = None;
                if !v["checkpoint"].is_null() {
                    checkpoint = Some(v["checkpoint"].clone());
                } else if v["may_have_written"] == true {
                    // Its effects are in no checkpoint: only the step's start is safe.
                    return None;
                }
                let o = open.as_mut()?;
                let r = &v["record"];
                o.done.push(ToolResult {
                    call_id: r["call_id"].as_str()?.to_string(),
                    content: r["result"].as_str()?.to_string(),
                    is_error: r["is_error"].as_bool()?,
                    // A resumed call's images are not journaled; its text names them.
                    images: Vec::new(),
                });
                if o.done.len() == o.calls.len() {
                    let o = open.take()?;
                    let results = o
                        .calls
                        .iter()
                        .filter_map(|c| o.done.iter().find(|r| r.call_id == c.id).cloned())
                        .collect();
                    history.as_mut()?.push(Message::ToolResults { results });
                }
            }
            _ => {}
        }
    }
    if let Some(o) = open {
        point.pending = o.calls;
        point.done = o.done;
        point.truncated = o.truncated;
    }
    Some(Rebuilt {
        history: history?,
        point,
        checkpoint,
        lost,
        failed_call,
    })
}

/// Restores the plan's sandboxes to a journal's internal checkpoint (a sandbox created after
/// it goes back to its base) and marks the tool calls logged after it discarded: their
/// effects are gone. Commands the vanished driver left running are killed first.
///
/// # Errors
/// Git, I/O and store errors.
pub(crate) fn continue_from(
    store: &mut Store,
    sandboxes: &Sandboxes,
    plan_id: &Id,
    checkpoint: &Value,
) -> Result<Value, SandboxError> {
    let killed = crate::tools::shell::kill_orphans(&sandboxes.plan_dir(plan_id));
    let mut resources = Vec::new();
    for sb in sandboxes.active(store, plan_id)? {
        let _lock = sb.lock()?;
        let id = sb.record.sandbox_id.to_string();
        let tree = checkpoint["trees"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|t| t["sandbox_id"] == id.as_str())
            .and_then(|t| t["tree"].as_str())
            .map(git2::Oid::from_str)
            .transpose()
            .map_err(SandboxError::git("reading a journaled tree id"))?;
        match tree {
            Some(tree) => checkpoint::restore_tree(&sb, tree)?,
            None => checkpoint::restore(&sb, sb.base_commit()?)?,
        }
        resources.push(sb.record.resource_name.clone());
    }
    let seq = checkpoint["tool_call_seq"].as_u64().unwrap_or(u64::MAX);
    let discarded = store.discard_tool_calls_after(plan_id, seq)?;
    Ok(
        json!({"resources": resources, "discarded_tool_calls": discarded, "killed_process_groups": killed}),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(seq: u32, kind: &str, entry: Value) -> JournalEntry {
        JournalEntry {
            seq,
            kind: kind.into(),
            entry,
        }
    }

    fn reply(calls: &[&str]) -> Value {
        json!(Message::Assistant {
            text: String::new(),
            tool_calls: calls
                .iter()
                .map(|id| ToolCall {
                    id: (*id).into(),
                    name: "shell_execute".into(),
                    arguments: "{}".into(),
                })
                .collect(),
        })
    }

    fn model(turn: u32, calls: &[&str]) -> Value {
        json!({"reply": reply(calls), "record": {"turn": turn, "usage": {"input_tokens": 10, "output_tokens": 2}, "stop_reason": null}})
    }

    fn tool(id: &str, checkpoint: Value) -> Value {
        json!({"record": {"call_id": id, "result": format!("ok {id}"), "is_error": false}, "ends_run": false, "checkpoint": checkpoint})
    }

    #[test]
    fn a_journal_rebuilds_the_conversation_and_re_issues_only_the_call_in_flight() {
        let start = json!({"history": [Message::User { text: "go".into() }]});
        let entries = vec![
            entry(1, "start", start),
            entry(2, "model_started", json!({"turn": 1})),
            entry(3, "model", model(1, &["a"])),
            entry(4, "tool_started", json!({"call_id": "a"})),
            entry(5, "tool", tool("a", json!({"tool_call_seq": 1}))),
            entry(6, "model_started", json!({"turn": 2})),
            entry(7, "model", model(2, &["b", "c"])),
            entry(8, "tool_started", json!({"call_id": "b"})),
            entry(9, "tool", tool("b", json!({"tool_call_seq": 2}))),
            entry(10, "tool_started", json!({"call_id": "c"})),
        ];
        let r = rebuild(&entries).unwrap();
        assert_eq!(r.history.len(), 4, "{:?}", r.history);
        assert!(
            matches!(&r.history[2], Message::ToolResults { results } if results[0].content == "ok a")
        );
        assert_eq!(r.point.turns, 2);
        assert_eq!(r.point.usage.input_tokens, 20);
        assert_eq!(r.point.pending.len(), 2);
        assert_eq!(r.point.done.len(), 1);
        assert_eq!(r.point.tool_in_flight.as_deref(), Some("c"));
        assert!(!r.point.model_in_flight);
        assert_eq!(r.checkpoint, Some(json!({"tool_call_seq": 2})));
        assert_eq!(r.call(), 2);
        // The call finishes and the next model call is in flight.
        let mut more = entries.clone();
        more.push(entry(11, "tool", tool("c", Value::Null)));
        more.push(entry(12, "model_started", json!({"turn": 3})));
        let r = rebuild(&more).unwrap();
        assert!(r.point.pending.is_empty() && r.point.model_in_flight);
        assert_eq!((r.history.len(), r.call()), (5, 3));
        assert_eq!(
            r.checkpoint,
            Some(json!({"tool_call_seq": 2})),
            "c wrote nothing"
        );
        // The call in flight is lost, to be recorded once: a continuation that recorded it
        // (`resumed`) leaves it accounted, though the next call is still its retry.
        assert_eq!(r.lost, Some(json!({"turn": 3})));
        more.push(entry(13, "resumed", json!({"turn": 3, "model_in_flight": true})));
        let r = rebuild(&more).unwrap();
        assert!(r.lost.is_none() && r.point.model_in_flight);
        // A tool that ended the run cannot be continued from the journal.
        let mut ended = entries;
        ended.push(entry(11, "tool", json!({"ends_run": true})));
        assert!(rebuild(&ended).is_none());
        assert!(rebuild(&[]).is_none());
    }
}
