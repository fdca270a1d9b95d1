//! Durable Execute: a driver killed with SIGKILL in the middle of a model executor's step
//! resumes at the exact call (docs/sandbox.md, "Resuming a step"): the next `plan execute`
//! restores the sandbox to the checkpoint after the last completed tool call, rebuilds the
//! conversation from the step's journal, and makes again only the model call that was in
//! flight. No paid call is bought twice, no completed tool call runs twice, and usage counts
//! each call once: the one in flight as interrupted (tokens unknown), its re-issue as a retry.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use serde_json::Value;

use super::lifecycle::{Setup, scripted_env, setup_with};
use crate::support::kill::{self, chat_requests};
use crate::support::provider_server::{ProviderServer, Turn};
use crate::support::{db_file, run_keyed};

const ACTION: &str = "name: local/six\ndescription: Append six lines\ndefinition-of-done: calls.log has six lines\nstrategy-actor: builtin/checklist-strategist\nexecution-actor: builtin/script-executor\n";

const DECISION: &str = r#"{"key": "six", "decision_type": "implementation_choice", "question": "How?", "chosen_option": "six shell calls", "confidence_score": 0.9, "rationale": "asked for", "step": {"instructions": "append six lines to calls.log, one shell call each"}}"#;

/// Executor tool calls in the step.
const CALLS: usize = 6;

/// Tool results already in a request's conversation.
fn results_in(body: &Value) -> usize {
    body["messages"]
        .as_array()
        .map(|m| m.iter().filter(|m| m["role"] == "tool").count())
        .unwrap_or(0)
}

fn offers(body: &Value, tool: &str) -> bool {
    body["tools"]
        .as_array()
        .is_some_and(|t| t.iter().any(|t| t["function"]["name"] == tool))
}

/// A model that reads its conversation: as strategist it records one decision and finishes;
/// as executor it appends `call N` to `calls.log` with `shell_execute` until six calls are
/// answered, then answers. With `stall_at = Some(k)`, the first executor request that
/// carries `k` tool results gets a reply that never comes (the model call in flight when the
/// driver is killed); `stalled` is set then.
fn model(stall_at: Option<usize>, stalled: Arc<AtomicBool>) -> ProviderServer {
    model_with(stall_at, stalled, None)
}

/// As [`model`]; with `gate`, the fifth call appends its line and then waits until the file
/// `gate` exists (a tool call in flight, its partial effect already made).
fn model_with(
    stall_at: Option<usize>,
    stalled: Arc<AtomicBool>,
    gate: Option<std::path::PathBuf>,
) -> ProviderServer {
    let ids = AtomicUsize::new(0);
    ProviderServer::responding(move |body| {
        let n = results_in(body);
        let id = ids.fetch_add(1, Ordering::SeqCst);
        if offers(body, "finish_strategy") {
            return if n == 0 {
                Turn::tools("", &[("record_decision", DECISION)], (10, 5))
            } else {
                Turn::tools(
                    "",
                    &[("finish_strategy", r#"{"summary": "one step"}"#)],
                    (10, 5),
                )
            };
        }
        if stall_at == Some(n) && !stalled.swap(true, Ordering::SeqCst) {
            return Turn::Stall;
        }
        if n < CALLS {
            let mut command = format!("printf 'call {} ({id})\\n' >> calls.log", n + 1);
            if let Some(gate) = gate.as_ref().filter(|_| n + 1 == 5) {
                command.push_str(&format!(
                    "; while [ ! -e '{}' ]; do sleep 0.05; done",
                    gate.display()
                ));
            }
            let args = serde_json::json!({"command": command});
            Turn::tools("", &[("shell_execute", &args.to_string())], (100, 7))
        } else {
            Turn::text("Appended six lines.", (100, 7))
        }
    })
}

/// A plan of `local/six` with the scripted strategist and executor, stopped at the execute
/// gate (`supervised`).
fn planned(server: &ProviderServer) -> (Setup, String) {
    let s = setup_with(ACTION);
    scripted_env(&s, server, "openai");
    let (doc, code) = run_keyed(
        &s.env,
        &[
            "plan",
            "use",
            "--strategy-actor",
            "scripted/m",
            "--execution-actor",
            "scripted/m",
            "--automation-profile",
            "supervised",
            "local/six",
            "app",
        ],
    );
    assert_eq!(code, 3, "stops at the execute gate: {doc:#}");
    let id = doc["data"]["plan_id"].as_str().unwrap().to_string();
    (s, id)
}

/// `calls.log` in the plan's sandbox, without the ids that tell the replies apart.
fn calls_log(s: &Setup, plan: &str) -> Vec<String> {
    crate::support::sandbox::read_of(&s.env, plan, None, "calls.log")
        .ok()
        .flatten()
        .unwrap_or_default()
        .lines()
        .map(|l| l.split(" (").next().unwrap_or_default().to_string())
        .collect()
}

fn usage(s: &Setup, plan: &str) -> cleveragents_engine::store::model_calls::UsageRollup {
    let id: cleveragents_engine::domain::Id = plan.parse().unwrap();
    let store = cleveragents_engine::store::Store::open(&db_file(&s.env)).unwrap();
    store.usage_for_plan(&id).unwrap()
}

/// (turn, retry) of the plan's model calls marked as retries.
fn retries(s: &Setup) -> Vec<(i64, i64)> {
    let db = rusqlite::Connection::open(db_file(&s.env)).unwrap();
    let mut stmt = db
        .prepare("SELECT turn, retry FROM model_calls WHERE retry = 1 ORDER BY started_at")
        .unwrap();
    stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
        .unwrap()
        .map(Result::unwrap)
        .collect()
}

/// (turn, retry) of the plan's model calls recorded as in flight when their driver vanished.
fn interrupted(s: &Setup) -> Vec<(i64, i64)> {
    let db = rusqlite::Connection::open(db_file(&s.env)).unwrap();
    let mut stmt = db
        .prepare("SELECT turn, retry FROM model_calls WHERE error_kind = 'interrupted' ORDER BY started_at")
        .unwrap();
    stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
        .unwrap()
        .map(Result::unwrap)
        .collect()
}

/// Spawns `plan execute` and kills it (SIGKILL) once `ready` holds.
fn kill_when(s: &Setup, id: &str, ready: &dyn Fn() -> bool) {
    kill::kill_when(&s.env, &["plan", "execute", id], ready);
}

/// A plan of [`model`] whose driver was killed while the model call after the fourth tool
/// call (the fifth executor call) was in flight; `stalled` is set. The plan's next `plan
/// execute` resumes it.
fn killed_during_the_fifth_call() -> (ProviderServer, Setup, String, Arc<AtomicBool>) {
    let stalled = Arc::new(AtomicBool::new(false));
    let server = model(Some(4), Arc::clone(&stalled));
    let (s, id) = planned(&server);
    kill_when(&s, &id, &|| stalled.load(Ordering::SeqCst));
    (server, s, id, stalled)
}

fn expected_log() -> Vec<String> {
    (1..=CALLS).map(|i| format!("call {i}")).collect()
}

#[test]
fn a_driver_killed_after_the_fourth_tool_call_resumes_at_the_fifth_model_call() {
    // Uninterrupted, for comparison.
    let server = model(None, Arc::new(AtomicBool::new(false)));
    let (s, id) = planned(&server);
    let (doc, code) = run_keyed(&s.env, &["plan", "execute", &id]);
    assert_eq!(code, 3, "waits at the apply gate: {doc:#}");
    let uninterrupted = chat_requests(&server);
    assert_eq!(uninterrupted, 2 + CALLS + 1);
    assert_eq!(calls_log(&s, &id), expected_log());
    let whole = usage(&s, &id);
    assert_eq!(whole.calls, uninterrupted as u64, "{whole:?}");

    // Killed while the model call after the fourth tool call is in flight.
    let (server, s, id, _stalled) = killed_during_the_fifth_call();
    let before_resume = chat_requests(&server);
    assert_eq!(
        before_resume,
        2 + 4 + 1,
        "strategy, four calls, the stalled one"
    );
    assert_eq!(calls_log(&s, &id).len(), 4);

    let (doc, code) = run_keyed(&s.env, &["plan", "execute", &id]);
    assert_eq!(code, 3, "the resumed plan waits at the apply gate: {doc:#}");
    let total = chat_requests(&server);
    assert!(
        total <= uninterrupted + 1,
        "{total} model calls, {uninterrupted} uninterrupted: the resumed step bought completed calls again"
    );
    assert_eq!(
        calls_log(&s, &id),
        expected_log(),
        "every tool call's effect exactly once"
    );
    let resumed = usage(&s, &id);
    assert_eq!(
        (
            resumed.calls,
            resumed.failed_calls,
            resumed.input_tokens,
            resumed.output_tokens,
            resumed.cost_usd
        ),
        (
            whole.calls + 1,
            whole.failed_calls + 1,
            whole.input_tokens,
            whole.output_tokens,
            whole.cost_usd
        ),
        "usage is the uninterrupted run's plus only the call in flight, its tokens unknown: {resumed:?} vs {whole:?}"
    );
    assert_eq!(
        (resumed.interrupted_calls, resumed.retried_calls),
        (1, 1),
        "{resumed:?}"
    );
    assert_eq!(
        retries(&s),
        vec![(5, 1)],
        "the call made again is marked as a retry"
    );
    assert_eq!(interrupted(&s), vec![(5, 0)], "the call in flight, once");
    let (status, _) = run_keyed(&s.env, &["plan", "status", &id]);
    assert_eq!(
        status["data"]["resumed"],
        serde_json::json!({"phase": "execute", "step": 1, "call": 5, "text": "resumed at call 5 of step 1"}),
        "{status:#}"
    );
    let u = &status["data"]["usage"];
    assert_eq!(
        (&u["calls"], &u["retried_calls"], &u["interrupted_calls"]),
        (
            &serde_json::json!(whole.calls + 1),
            &serde_json::json!(1),
            &serde_json::json!(1)
        ),
        "{status:#}"
    );
    let out = s.env.run(&["--format", "plain", "plan", "status", &id]);
    let text = crate::support::stdout(&out);
    assert!(
        text.contains("Resumed at call 5 of step 1 after its driver vanished"),
        "{text}"
    );
    assert!(
        text.contains(&format!(
            "{} (1 in flight when the driver vanished, tokens unknown; 1 retry)",
            whole.calls + 1
        )),
        "{text}"
    );
}

#[test]
fn a_driver_killed_during_a_tool_call_re_issues_only_that_call_with_its_partial_effect_undone() {
    let gate = tempfile::tempdir().unwrap();
    let go = gate.path().join("go");
    let server = model_with(None, Arc::new(AtomicBool::new(false)), Some(go.clone()));
    let (s, id) = planned(&server);
    // The fifth call has appended its line and waits: it is in flight.
    kill_when(&s, &id, &|| calls_log(&s, &id).len() == 5);
    let before_resume = chat_requests(&server);
    assert_eq!(before_resume, 2 + 5, "strategy and five executor calls");
    std::fs::write(&go, b"").unwrap();
    let (doc, code) = run_keyed(&s.env, &["plan", "execute", &id]);
    assert_eq!(code, 3, "the resumed plan waits at the apply gate: {doc:#}");
    assert_eq!(
        chat_requests(&server),
        2 + CALLS + 1,
        "no model call is made again: the fifth reply is in the journal"
    );
    assert_eq!(
        calls_log(&s, &id),
        expected_log(),
        "the partial effect of the call in flight was rolled back before it ran again"
    );
    assert!(retries(&s).is_empty(), "{:?}", retries(&s));
    assert!(interrupted(&s).is_empty(), "no model call was in flight");
    let (status, _) = run_keyed(&s.env, &["plan", "status", &id]);
    assert_eq!(
        status["data"]["resumed"]["text"], "resumed at call 5 of step 1",
        "{status:#}"
    );
}

#[test]
fn a_driver_killed_again_while_it_resumes_makes_only_the_call_in_flight_again() {
    let (server, s, id, stalled) = killed_during_the_fifth_call();
    // The resumed driver restores the sandbox, makes the fifth call again, and is killed
    // while that call is in flight too.
    stalled.store(false, Ordering::SeqCst);
    kill_when(&s, &id, &|| stalled.load(Ordering::SeqCst));
    assert_eq!(chat_requests(&server), 2 + 4 + 2);
    assert_eq!(calls_log(&s, &id).len(), 4);
    let (doc, code) = run_keyed(&s.env, &["plan", "execute", &id]);
    assert_eq!(code, 3, "the resumed plan waits at the apply gate: {doc:#}");
    assert_eq!(
        chat_requests(&server),
        2 + CALLS + 1 + 2,
        "two kills, each with one call in flight"
    );
    assert_eq!(calls_log(&s, &id), expected_log());
    let u = usage(&s, &id);
    assert_eq!(
        (
            u.calls,
            u.failed_calls,
            u.interrupted_calls,
            u.retried_calls
        ),
        (2 + CALLS as u64 + 1 + 2, 2, 2, 2),
        "each call in flight counted once, never answered: {u:?}"
    );
    assert_eq!(
        interrupted(&s),
        vec![(5, 0), (5, 1)],
        "the first call in flight, then its retry in flight"
    );
    assert_eq!(retries(&s), vec![(5, 1), (5, 1)]);
}

const FIRST: &str = r#"{"key": "first", "decision_type": "implementation_choice", "question": "What first?", "chosen_option": "FIRST.md", "confidence_score": 0.9, "rationale": "asked for", "step": {"instructions": "write FIRST.md"}}"#;

/// As [`model`] with a first step that writes `FIRST.md` (so that the six-call step starts
/// at a checkpoint), stalling the six-call step's fifth model call once.
fn two_step_model(stalled: Arc<AtomicBool>) -> ProviderServer {
    ProviderServer::responding(move |body| {
        let n = results_in(body);
        if offers(body, "finish_strategy") {
            return match n {
                0 => Turn::tools("", &[("record_decision", FIRST)], (10, 5)),
                1 => Turn::tools("", &[("record_decision", DECISION)], (10, 5)),
                _ => Turn::tools(
                    "",
                    &[("finish_strategy", r#"{"summary": "two steps"}"#)],
                    (10, 5),
                ),
            };
        }
        let prompt = body["messages"][1]["content"].as_str().unwrap_or_default();
        if prompt.starts_with("Carry out this step now: write FIRST.md") {
            return if n == 0 {
                let args = serde_json::json!({"path": "FIRST.md", "content": "first\n"});
                Turn::tools("", &[("write_file", &args.to_string())], (100, 7))
            } else {
                Turn::text("Wrote FIRST.md.", (100, 7))
            };
        }
        if n == 4 && !stalled.swap(true, Ordering::SeqCst) {
            return Turn::Stall;
        }
        if n < CALLS {
            let args =
                serde_json::json!({"command": format!("printf 'call {}\\n' >> calls.log", n + 1)});
            Turn::tools("", &[("shell_execute", &args.to_string())], (100, 7))
        } else {
            Turn::text("Appended six lines.", (100, 7))
        }
    })
}

#[test]
fn a_rollback_of_an_interrupted_step_runs_it_again_from_its_start_not_from_its_journal() {
    let stalled = Arc::new(AtomicBool::new(false));
    let server = two_step_model(Arc::clone(&stalled));
    let (s, id) = planned(&server);
    kill_when(&s, &id, &|| stalled.load(Ordering::SeqCst));
    assert_eq!(calls_log(&s, &id).len(), 4);
    // Back to the six-call step's start checkpoint.
    let (doc, code) = run_keyed(&s.env, &["plan", "checkpoints", &id]);
    assert_eq!(code, 0, "{doc:#}");
    let start = doc["data"]["checkpoints"]
        .as_array()
        .unwrap()
        .iter()
        .rev()
        .find(|c| c["label"] == "start")
        .unwrap_or_else(|| panic!("no start checkpoint: {doc:#}"))["checkpoint_id"]
        .as_str()
        .unwrap()
        .to_string();
    let (doc, code) = run_keyed(&s.env, &["plan", "rollback", "--yes", &id, &start]);
    assert_eq!(code, 0, "{doc:#}");
    assert!(calls_log(&s, &id).is_empty());
    let before = chat_requests(&server);
    let (doc, code) = run_keyed(&s.env, &["plan", "execute", &id]);
    assert_eq!(code, 3, "waits at the apply gate: {doc:#}");
    assert_eq!(calls_log(&s, &id), expected_log());
    assert_eq!(
        chat_requests(&server) - before,
        CALLS + 1,
        "the whole step was asked for again"
    );
    let (status, _) = run_keyed(&s.env, &["plan", "status", &id]);
    assert_eq!(status["data"]["resumed"], Value::Null, "{status:#}");
}

const NOTES: &str = r#"{"key": "notes", "decision_type": "implementation_choice", "question": "Where do notes go?", "chosen_option": "NOTES.md", "confidence_score": 0.9, "rationale": "asked for", "depends_on": ["six"], "step": {"instructions": "write NOTES.md"}}"#;

/// A strategist that reads before each decision: `read_file README`, `record_decision`
/// six, `list_files`, `record_decision` notes, `finish_strategy` (five model calls). With
/// `stall_at = Some(k)`, the first request carrying `k` tool results gets a reply that never
/// comes; `stalled` is set then.
fn strategist(stall_at: Option<usize>, stalled: Arc<AtomicBool>) -> ProviderServer {
    ProviderServer::responding(move |body| {
        if stall_at == Some(results_in(body)) && !stalled.swap(true, Ordering::SeqCst) {
            return Turn::Stall;
        }
        strategist_reply(body)
    })
}

/// The reply of [`strategist`] to a request.
fn strategist_reply(body: &Value) -> Turn {
    match results_in(body) {
        0 => Turn::tools("", &[("read_file", r#"{"path": "README"}"#)], (50, 5)),
        1 => Turn::tools("", &[("record_decision", DECISION)], (60, 6)),
        2 => Turn::tools("", &[("list_files", r#"{"glob": "**"}"#)], (70, 7)),
        3 => Turn::tools("", &[("record_decision", NOTES)], (80, 8)),
        _ => Turn::tools(
            "",
            &[("finish_strategy", r#"{"summary": "two steps"}"#)],
            (90, 9),
        ),
    }
}

/// A plan of `local/six` with the scripted strategist under `manual`: created, waiting at
/// its strategize gate.
fn waiting_to_strategize(server: &ProviderServer) -> (Setup, String) {
    let s = setup_with(ACTION);
    scripted_env(&s, server, "openai");
    let (doc, code) = run_keyed(
        &s.env,
        &[
            "plan",
            "use",
            "--strategy-actor",
            "scripted/m",
            "--execution-actor",
            "scripted/m",
            "--automation-profile",
            "manual",
            "local/six",
            "app",
        ],
    );
    assert_eq!(code, 3, "waits at the strategize gate: {doc:#}");
    let id = doc["data"]["plan_id"].as_str().unwrap().to_string();
    (s, id)
}

/// (question, chosen option) of the plan's strategist decisions, in order.
fn strategist_decisions(s: &Setup, plan: &str) -> Vec<(String, String)> {
    let db = rusqlite::Connection::open(db_file(&s.env)).unwrap();
    let mut stmt = db
        .prepare("SELECT question, chosen_option FROM decisions WHERE plan_id = ?1 AND decision_type = 'implementation_choice' ORDER BY sequence_number")
        .unwrap();
    stmt.query_map([plan], |r| Ok((r.get(0)?, r.get(1)?)))
        .unwrap()
        .map(Result::unwrap)
        .collect()
}

#[test]
fn a_strategist_killed_during_its_fourth_model_call_resumes_at_that_call() {
    // Uninterrupted, for comparison.
    let server = strategist(None, Arc::new(AtomicBool::new(false)));
    let (s, id) = waiting_to_strategize(&server);
    let (doc, code) = run_keyed(&s.env, &["plan", "execute", &id]);
    assert_eq!(code, 3, "waits at the execute gate: {doc:#}");
    assert_eq!(chat_requests(&server), 5);
    let decisions = strategist_decisions(&s, &id);
    assert_eq!(decisions.len(), 2, "{decisions:?}");
    let whole = usage(&s, &id);
    assert_eq!(whole.calls, 5, "{whole:?}");

    // Killed while the fourth model call (after read, decision, list) is in flight.
    let stalled = Arc::new(AtomicBool::new(false));
    let server = strategist(Some(3), Arc::clone(&stalled));
    let (s, id) = waiting_to_strategize(&server);
    kill_when(&s, &id, &|| stalled.load(Ordering::SeqCst));
    assert_eq!(chat_requests(&server), 4, "three answered, one in flight");

    let (doc, code) = run_keyed(&s.env, &["plan", "execute", &id]);
    assert_eq!(
        code, 3,
        "the resumed Strategize waits at the execute gate: {doc:#}"
    );
    assert_eq!(
        chat_requests(&server),
        5 + 1,
        "only the call in flight was made again, not the whole Strategize"
    );
    assert_eq!(
        strategist_decisions(&s, &id),
        decisions,
        "the decision recorded before the kill is kept, once"
    );
    let u = usage(&s, &id);
    assert_eq!(
        (
            u.calls,
            u.input_tokens,
            u.output_tokens,
            u.interrupted_calls,
            u.retried_calls
        ),
        (
            whole.calls + 1,
            whole.input_tokens,
            whole.output_tokens,
            1,
            1
        ),
        "{u:?} vs {whole:?}"
    );
    assert_eq!(interrupted(&s), vec![(4, 0)]);
    assert_eq!(retries(&s), vec![(4, 1)]);
    let (status, _) = run_keyed(&s.env, &["plan", "status", &id]);
    assert_eq!(
        status["data"]["resumed"],
        serde_json::json!({"phase": "strategize", "step": null, "call": 4, "text": "resumed at call 4 of Strategize"}),
        "{status:#}"
    );
    let out = s.env.run(&["--format", "plain", "plan", "status", &id]);
    let text = crate::support::stdout(&out);
    assert!(
        text.contains("Resumed at call 4 of Strategize after its driver vanished"),
        "{text}"
    );
    let id_: cleveragents_engine::domain::Id = id.parse().unwrap();
    let store = cleveragents_engine::store::Store::open(&db_file(&s.env)).unwrap();
    let left: Vec<String> = store
        .journal(&id_, "strategize")
        .unwrap()
        .into_iter()
        .map(|e| e.kind)
        .collect();
    assert_eq!(
        left,
        vec!["resumed".to_string()],
        "a recorded strategy leaves nothing to continue"
    );
}

/// The state letter of process `pid` (`Z` for a zombie), if it is listed.
fn process_state(pid: u32) -> Option<String> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let (_, rest) = stat.rsplit_once(')')?;
    rest.split_whitespace().next().map(str::to_string)
}

/// (pid, start time) recorded with the plan's lease, if it has one.
fn lease_row(s: &Setup, plan: &str) -> Option<(i64, Option<i64>)> {
    let db = rusqlite::Connection::open(db_file(&s.env)).unwrap();
    db.query_row(
        "SELECT pid, started FROM plan_leases WHERE plan_id = ?1",
        [plan],
        |r| Ok((r.get(0)?, r.get(1)?)),
    )
    .ok()
}

#[test]
fn a_driver_left_defunct_after_sigkill_does_not_hold_its_plan() {
    let stalled = Arc::new(AtomicBool::new(false));
    let server = model(Some(4), Arc::clone(&stalled));
    let (s, id) = planned(&server);
    let mut driver = kill::kill_unreaped_when(&s.env, &["plan", "execute", &id], &|| {
        stalled.load(Ordering::SeqCst)
    });
    let pid = driver.id();
    let deadline = Instant::now() + Duration::from_secs(10);
    while process_state(pid).as_deref() != Some("Z") {
        assert!(
            Instant::now() < deadline,
            "the killed driver never became defunct"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    assert_eq!(
        lease_row(&s, &id).map(|(p, _)| p),
        Some(i64::from(pid)),
        "the dead driver's lease is still recorded, its heartbeat fresh"
    );
    // The zombie is still listed under its pid while the plan is taken over.
    let (doc, code) = run_keyed(&s.env, &["plan", "execute", &id]);
    assert_eq!(code, 3, "taken over and resumed to the apply gate: {doc:#}");
    assert_eq!(process_state(pid).as_deref(), Some("Z"));
    assert_eq!(calls_log(&s, &id), expected_log());
    assert_eq!(chat_requests(&server), 2 + CALLS + 1 + 1);
    driver.wait().unwrap();
}

#[test]
fn a_lease_whose_pid_now_belongs_to_another_process_is_taken_over() {
    let (server, s, id, _stalled) = killed_during_the_fifth_call();
    let (_, started) = lease_row(&s, &id).expect("the dead driver's lease");
    assert!(
        started.is_some(),
        "the lease records its owner's start time"
    );
    // The pid is recycled: a live process has it now, started later than the driver.
    let mut other = std::process::Command::new("sleep")
        .arg("60")
        .spawn()
        .unwrap();
    let db = rusqlite::Connection::open(db_file(&s.env)).unwrap();
    db.execute(
        "UPDATE plan_leases SET pid = ?2 WHERE plan_id = ?1",
        rusqlite::params![id, other.id()],
    )
    .unwrap();
    drop(db);
    let (doc, code) = run_keyed(&s.env, &["plan", "execute", &id]);
    assert_eq!(code, 3, "taken over and resumed to the apply gate: {doc:#}");
    assert_eq!(calls_log(&s, &id), expected_log());
    assert_eq!(chat_requests(&server), 2 + CALLS + 1 + 1);
    other.kill().unwrap();
    other.wait().unwrap();
}

#[test]
fn a_lease_whose_live_owner_has_the_recorded_start_time_is_not_taken_over() {
    let (_server, s, id, _stalled) = killed_during_the_fifth_call();
    // A live process recorded with its own start time: the owner, alive.
    let mut owner = std::process::Command::new("sleep")
        .arg("60")
        .spawn()
        .unwrap();
    let stat = std::fs::read_to_string(format!("/proc/{}/stat", owner.id())).unwrap();
    let started: i64 = stat
        .rsplit_once(')')
        .unwrap()
        .1
        .split_whitespace()
        .nth(19)
        .unwrap()
        .parse()
        .unwrap();
    let db = rusqlite::Connection::open(db_file(&s.env)).unwrap();
    db.execute(
        "UPDATE plan_leases SET pid = ?2, started = ?3 WHERE plan_id = ?1",
        rusqlite::params![id, owner.id(), started],
    )
    .unwrap();
    drop(db);
    let (doc, code) = run_keyed(&s.env, &["plan", "execute", &id]);
    assert_ne!(code, 0, "{doc:#}");
    assert_eq!(doc["error"]["code"], "CONFLICT", "{doc:#}");
    assert_eq!(calls_log(&s, &id).len(), 4, "nothing ran");
    owner.kill().unwrap();
    owner.wait().unwrap();
}

const CHILD_SIX: &str = "name: local/child-six\ndescription: Append six lines\ndefinition-of-done: calls.log has six lines\nstrategy-actor: builtin/checklist-strategist\nexecution-actor: scripted/m\nreusable: true\n";

const PARENT_SIX: &str = "name: local/parent-six\ndescription: Let a child append six lines\ndefinition-of-done: calls.log has six lines\nstrategy-actor: builtin/checklist-strategist\nexecution-actor: builtin/script-executor\nscript:\n  - name: six\n    spawn:\n      action: local/child-six\n      args: {}\n";

/// The parent's and the child's ids once the child plan exists.
fn parent_and_child(s: &Setup) -> Option<(String, String)> {
    let store = cleveragents_engine::store::Store::open(&db_file(&s.env)).ok()?;
    let child = store
        .plans()
        .ok()?
        .into_iter()
        .find(|p| p.parent_plan_id.is_some())?;
    Some((child.parent_plan_id?.to_string(), child.plan_id.to_string()))
}

#[test]
fn a_child_plans_step_killed_with_its_parent_resumes_at_the_exact_call() {
    if crate::support::through_server::in_process_only(
        "it kills the process that drives the plan; through a server that is the server",
    ) {
        return;
    }
    let stalled = Arc::new(AtomicBool::new(false));
    let server = model(Some(4), Arc::clone(&stalled));
    let s = setup_with(ACTION);
    scripted_env(&s, &server, "openai");
    for (name, action) in [("child-six", CHILD_SIX), ("parent-six", PARENT_SIX)] {
        let file = s.env.root().join(format!("{name}.yaml"));
        std::fs::write(&file, action).unwrap();
        crate::support::ok(
            &s.env,
            &[
                "action",
                "create",
                "--available",
                "--config",
                file.to_str().unwrap(),
            ],
        );
    }
    // The parent drives its child in its own process; both are killed while the child's
    // fifth model call is in flight.
    kill::kill_when(
        &s.env,
        &[
            "plan",
            "use",
            "--automation-profile",
            "trusted",
            "local/parent-six",
            "app",
        ],
        &|| stalled.load(Ordering::SeqCst),
    );
    let (parent, child) = parent_and_child(&s).expect("a child plan");
    assert_eq!(
        chat_requests(&server),
        4 + 1,
        "four answered, one in flight"
    );
    assert_eq!(calls_log(&s, &child).len(), 4);

    let (doc, code) = run_keyed(&s.env, &["plan", "execute", &parent]);
    assert_eq!(code, 3, "the parent resumes to its apply gate: {doc:#}");
    assert_eq!(
        chat_requests(&server),
        CALLS + 1 + 1,
        "the child continued at its fifth call: only the call in flight was made again"
    );
    assert_eq!(calls_log(&s, &child), expected_log());
    assert_eq!(
        calls_log(&s, &parent),
        expected_log(),
        "merged into the parent"
    );
    let (kids, _) = run_keyed(&s.env, &["plan", "status", &parent]);
    let kids = kids["data"]["children"].as_array().unwrap().clone();
    assert_eq!(kids.len(), 1, "the same child continued: {kids:#?}");
    assert_eq!(kids[0]["plan_id"], child.as_str());
    let (status, _) = run_keyed(&s.env, &["plan", "status", &child]);
    assert_eq!(
        status["data"]["resumed"]["text"], "resumed at call 5 of step 1",
        "{status:#}"
    );
    let u = &status["data"]["usage"];
    assert_eq!(
        (&u["calls"], &u["interrupted_calls"], &u["retried_calls"]),
        (
            &serde_json::json!(CALLS + 1 + 1),
            &serde_json::json!(1),
            &serde_json::json!(1)
        ),
        "{status:#}"
    );
}

#[test]
fn a_strategist_whose_fourth_call_failed_transiently_retries_at_that_call() {
    // `manual` does not retry a transient failure in the client: the plan asks whether to
    // retry, and the retry continues Strategize at the call that failed.
    let failed = AtomicBool::new(false);
    let server = ProviderServer::responding(move |body| {
        if results_in(body) == 3 && !failed.swap(true, Ordering::SeqCst) {
            return Turn::status(503, "overloaded");
        }
        strategist_reply(body)
    });
    let (s, id) = waiting_to_strategize(&server);
    let (doc, code) = run_keyed(&s.env, &["plan", "execute", &id]);
    assert_ne!(code, 0, "{doc:#}");
    assert_eq!(
        chat_requests(&server),
        4,
        "three answered, the fourth failed"
    );
    let (doc, _) = run_keyed(&s.env, &["plan", "approvals", &id]);
    let approvals = doc["data"]["approvals"].as_array().unwrap();
    assert_eq!(approvals[0]["kind"], "transient_failure", "{doc:#}");
    let apr = approvals[0]["approval_id"].as_str().unwrap().to_string();

    let (doc, code) = run_keyed(&s.env, &["plan", "decide", &apr, "--option", "1"]);
    assert_eq!(
        code, 3,
        "the retried Strategize waits at the execute gate: {doc:#}"
    );
    assert_eq!(
        chat_requests(&server),
        5 + 1,
        "the retry asked again only for the call that failed, not for the three answered"
    );
    let decisions = strategist_decisions(&s, &id);
    assert_eq!(
        decisions.len(),
        2,
        "each decision recorded once: {decisions:?}"
    );
    let u = usage(&s, &id);
    assert_eq!(
        (u.calls, u.failed_calls, u.interrupted_calls),
        (6, 1, 0),
        "five answered and the one that failed: {u:?}"
    );
}

/// The ids of the candidate invariants listed in an invariant actor's system prompt.
fn candidate_ids(body: &Value) -> Vec<String> {
    body["messages"][0]["content"]
        .as_str()
        .unwrap_or_default()
        .lines()
        .filter_map(|l| l.strip_prefix("- ")?.split_once(" (").map(|(id, _)| id))
        .filter(|id| !id.contains(' '))
        .map(str::to_string)
        .collect()
}

/// A model that is the plan's invariant actor and its strategist. As invariant actor it
/// first answers without a candidate (an error comes back), then with every candidate
/// effective; as strategist it is [`strategist`]. `stall` names what stalls once:
/// `"invariants"` (the invariant actor's second call) or `"strategist"` (the strategist's
/// second call); `stalled` is set then.
fn reconciling(stall: &'static str, stalled: Arc<AtomicBool>) -> ProviderServer {
    ProviderServer::responding(move |body| {
        let n = results_in(body);
        if offers(body, "reconcile_invariants") {
            if stall == "invariants" && n == 1 && !stalled.swap(true, Ordering::SeqCst) {
                return Turn::Stall;
            }
            let ids = candidate_ids(body);
            let effective = if n == 0 { &ids[..0] } else { &ids[..] };
            let args = serde_json::json!({"effective": effective, "dropped": []});
            return Turn::tools("", &[("reconcile_invariants", &args.to_string())], (30, 3));
        }
        if stall == "strategist" && n == 1 && !stalled.swap(true, Ordering::SeqCst) {
            return Turn::Stall;
        }
        strategist_reply(body)
    })
}

/// A plan of `local/six` with `scripted/m` as its invariant actor and strategist, waiting at
/// its strategize gate (`manual`).
fn waiting_to_reconcile(server: &ProviderServer) -> (Setup, String) {
    let s = setup_with(ACTION);
    scripted_env(&s, server, "openai");
    let (doc, code) = run_keyed(
        &s.env,
        &[
            "plan",
            "use",
            "--invariant-actor",
            "scripted/m",
            "--strategy-actor",
            "scripted/m",
            "--execution-actor",
            "scripted/m",
            "--automation-profile",
            "manual",
            "local/six",
            "app",
        ],
    );
    assert_eq!(code, 3, "waits at the strategize gate: {doc:#}");
    let id = doc["data"]["plan_id"].as_str().unwrap().to_string();
    (s, id)
}

/// The chat requests that offered `tool` (the invariant actor's, or the strategist's).
fn requests_offering(server: &ProviderServer, tool: &str) -> usize {
    server
        .requests()
        .iter()
        .filter(|r| r.path.ends_with("/chat/completions") && offers(&r.body, tool))
        .count()
}

#[test]
fn an_invariant_actor_killed_during_its_second_call_resumes_at_that_call_and_is_not_asked_again() {
    // Uninterrupted: two invariant actor calls, five strategist calls.
    let server = reconciling("none", Arc::new(AtomicBool::new(false)));
    let (s, id) = waiting_to_reconcile(&server);
    let (doc, code) = run_keyed(&s.env, &["plan", "execute", &id]);
    assert_eq!(code, 3, "waits at the execute gate: {doc:#}");
    assert_eq!(requests_offering(&server, "reconcile_invariants"), 2);
    assert_eq!(requests_offering(&server, "finish_strategy"), 5);
    let decisions = strategist_decisions(&s, &id);

    // Killed while the invariant actor's second call is in flight.
    let stalled = Arc::new(AtomicBool::new(false));
    let server = reconciling("invariants", Arc::clone(&stalled));
    let (s, id) = waiting_to_reconcile(&server);
    kill_when(&s, &id, &|| stalled.load(Ordering::SeqCst));
    assert_eq!(requests_offering(&server, "reconcile_invariants"), 2);
    let (doc, code) = run_keyed(&s.env, &["plan", "execute", &id]);
    assert_eq!(
        code, 3,
        "the resumed plan waits at the execute gate: {doc:#}"
    );
    assert_eq!(
        requests_offering(&server, "reconcile_invariants"),
        2 + 1,
        "only the call in flight was made again"
    );
    assert_eq!(strategist_decisions(&s, &id), decisions);
    assert_eq!(interrupted(&s), vec![(2, 0)], "the call in flight, once");

    // Killed while the strategist's second call is in flight, after the invariant actor
    // answered: the answer is in its journal, so the invariant actor is not asked again.
    let stalled = Arc::new(AtomicBool::new(false));
    let server = reconciling("strategist", Arc::clone(&stalled));
    let (s, id) = waiting_to_reconcile(&server);
    kill_when(&s, &id, &|| stalled.load(Ordering::SeqCst));
    assert_eq!(requests_offering(&server, "reconcile_invariants"), 2);
    let (doc, code) = run_keyed(&s.env, &["plan", "execute", &id]);
    assert_eq!(
        code, 3,
        "the resumed plan waits at the execute gate: {doc:#}"
    );
    assert_eq!(
        requests_offering(&server, "reconcile_invariants"),
        2,
        "the invariant actor's answer was not bought again"
    );
    assert_eq!(requests_offering(&server, "finish_strategy"), 5 + 1);
    assert_eq!(strategist_decisions(&s, &id), decisions);
    let (status, _) = run_keyed(&s.env, &["plan", "status", &id]);
    let u = &status["data"]["usage"];
    assert_eq!(
        (&u["calls"], &u["interrupted_calls"]),
        (&serde_json::json!(2 + 5 + 1), &serde_json::json!(1)),
        "{status:#}"
    );
}
