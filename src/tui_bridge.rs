//! The bridge between the engine and the TUI (`cleveragents-ui`): engine state becomes
//! [`Msg`]s, the UI's [`Cmd`]s become engine operations, and this module owns the terminal.
//!
//! The UI crate never sees SQLite, git or HTTP; everything it shows passes through the view
//! models built here. Operations run in this process, on worker threads, through the engine's
//! API ([`Engine::run`]); no child process is started for them. What the plans driven here do
//! right now (model text as it streams, tool calls, step output) arrives through the engine's
//! live events and goes to the live area. Other processes (headless commands in other
//! terminals) change the same database; the bridge notices through SQLite's `data_version` and
//! sends fresh view models. The tree and the explanation come from the engine functions
//! `plan tree` and `plan explain` use.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, mpsc};
use std::time::{Duration, Instant};

use cleveragents_ui::model::{self as view, LiveUpdate, PlanRow};
use cleveragents_ui::{App, Cmd, Key, Keymap, Mouse, Msg, Pane, Theme};
use ratatui::crossterm::event::{self, Event};

use cleveragents_engine::api::{
    ApiError, CorrectMode, Correction, Engine, Op, Outcome, ReviewRequest, UseRequest,
};
use cleveragents_engine::correction::{impact, tree};
use cleveragents_engine::domain::action::ActionState;
use cleveragents_engine::domain::approval::{Approval, ApprovalKind};
use cleveragents_engine::domain::id::Id;
use cleveragents_engine::domain::lifecycle::{Phase, ProcessingState};
use cleveragents_engine::domain::plan::Plan;
use cleveragents_engine::events::live::{self, LiveEvent, LiveKind};
use cleveragents_engine::lifecycle::Observer;
use cleveragents_engine::lifecycle::apply::reviewed_trees_in;
use cleveragents_engine::lifecycle::approvals::Answer;
use cleveragents_engine::lifecycle::driver::Stopped;
use cleveragents_engine::registry::plan_use::Request;
use cleveragents_engine::review;
use cleveragents_engine::sandbox::Sandboxes;
use cleveragents_engine::sandbox::diff::{self, DiffRequest};
use cleveragents_engine::store::{Store, StoreError};

/// How often the bridge checks the database for changes made by other processes.
pub const POLL_INTERVAL: Duration = Duration::from_millis(250);

/// What `agents tui` was asked to show first.
#[derive(Debug, Clone, Default)]
pub struct LaunchOptions {
    /// Plan to select (full id).
    pub plan_id: Option<String>,
    /// Pane to focus.
    pub focus: Option<Pane>,
}

fn phase(p: Phase) -> view::Phase {
    match p {
        Phase::Strategize => view::Phase::Strategize,
        Phase::Execute => view::Phase::Execute,
        Phase::Apply => view::Phase::Apply,
        Phase::Applied => view::Phase::Applied,
    }
}

fn state(s: ProcessingState) -> view::ProcessingState {
    match s {
        ProcessingState::Queued => view::ProcessingState::Queued,
        ProcessingState::Processing => view::ProcessingState::Processing,
        ProcessingState::Errored => view::ProcessingState::Errored,
        ProcessingState::Complete => view::ProcessingState::Complete,
        ProcessingState::Cancelled => view::ProcessingState::Cancelled,
    }
}

/// The plans list row for a plan. Elapsed time runs from creation to completion (or now);
/// cost is unknown until model calls are accounted.
pub fn plan_row(plan: &Plan, now: jiff::Timestamp) -> PlanRow {
    let end = plan.completed_at.unwrap_or(now);
    let elapsed_ms = end.duration_since(plan.created_at).as_millis().max(0);
    PlanRow {
        plan_id: plan.plan_id.to_string(),
        action: plan.action_name.clone(),
        project: plan.project_names().join(", "),
        phase: phase(plan.phase()),
        state: state(plan.state()),
        elapsed_ms: u64::try_from(elapsed_ms).unwrap_or(u64::MAX),
        cost_usd: None,
    }
}

/// The approval queue row for a pending approval.
pub fn approval_item(approval: &Approval) -> view::ApprovalItem {
    view::ApprovalItem {
        approval_id: approval.approval_id.clone(),
        plan_id: approval.plan_id.to_string(),
        kind: match approval.kind {
            ApprovalKind::PhaseGate => view::ApprovalKind::PhaseGate,
            ApprovalKind::Decision => view::ApprovalKind::DecisionChoice,
            ApprovalKind::ChildSpawn => view::ApprovalKind::ChildSpawn,
            ApprovalKind::TransientFailure => view::ApprovalKind::TransientFailure,
            // A merge conflict is answered like an errored plan (retry or cancel).
            ApprovalKind::Errored | ApprovalKind::ErrorRecovery => view::ApprovalKind::ErroredPlan,
            ApprovalKind::Budget => view::ApprovalKind::Budget,
            // Approve or reject one tool call: answered like a choice between two options.
            ApprovalKind::ToolApproval => view::ApprovalKind::DecisionChoice,
            // Accept, correct or cancel, with the evidence in the summary: a choice.
            ApprovalKind::InvariantViolation => view::ApprovalKind::DecisionChoice,
        },
        summary: approval.summary.clone(),
        options: approval.options.clone(),
    }
}
/// Engine-side state of a TUI session: the store, what was last sent, the diff worker, the
/// engine operations running on worker threads in this process, and the live events they
/// produce.
#[derive(Debug)]
pub struct Bridge {
    store: Store,
    sandboxes: Sandboxes,
    data_version: Option<i64>,
    selected: Option<String>,
    engine: Option<Engine>,
    global_profile: Option<String>,
    interrupt: Arc<Interrupt>,
    diffs: DiffWorker,
    jobs: Vec<Job>,
    results_tx: mpsc::Sender<Msg>,
    results: mpsc::Receiver<Msg>,
    live: live::Subscription,
    reported_activity: Vec<String>,
}

/// An engine operation running on a worker thread of this process.
#[derive(Debug)]
struct Job {
    what: String,
    handle: std::thread::JoinHandle<()>,
}

/// What the engine asks and tells while it drives a plan for the TUI: whether the user quit
/// (quitting sets it, and the engine stops at its next safe point exactly as on Ctrl-C in a
/// terminal: the plan stays queued with reason `interrupted` and can be resumed), and each
/// event it commits, which becomes a progress line of the live area.
#[derive(Debug, Default)]
struct Interrupt {
    quit: AtomicBool,
    progress: std::sync::Mutex<Option<mpsc::Sender<Msg>>>,
}

impl Observer for Interrupt {
    fn event(&self, event: &cleveragents_engine::domain::event::EngineEvent) {
        let (Some(plan), Some(text)) = (event.plan_id, progress_text(&event.kind)) else {
            return;
        };
        if let Ok(tx) = self.progress.lock()
            && let Some(tx) = tx.as_ref()
        {
            let _ = tx.send(Msg::Live {
                plan_id: plan.to_string(),
                update: LiveUpdate::Progress { text },
            });
        }
    }

    fn interrupted(&self) -> bool {
        self.quit.load(Ordering::SeqCst)
    }
}

/// The live area's line for a committed event of a plan driven here: where the plan is in its
/// lifecycle (spec section 08), so the area follows the plan from its first event.
fn progress_text(kind: &cleveragents_engine::domain::event::EventKind) -> Option<String> {
    use cleveragents_engine::domain::event::EventKind as K;
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
    .then(|| crate::event_text::summary(kind))
}

/// The live area's form of a live engine event.
fn live_msg(event: LiveEvent) -> Msg {
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
        LiveKind::StepOutput { step, line, .. } => LiveUpdate::Output { step, line },
    };
    Msg::Live {
        plan_id: event.plan.to_string(),
        update,
    }
}

/// The status line for an operation that ended: done, waiting for an answer, errored,
/// interrupted, or failed with the engine's message.
fn finished(what: &str, result: Result<Outcome, ApiError>) -> Msg {
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

/// The impact of a correction as the preview shows it, computed by the same engine functions
/// as `plan correct --dry-run` (spec section 13): a revert's affected decisions, steps, child
/// plans and files, and why it would be refused; an append changes nothing that exists.
fn correction_preview(
    engine: &Engine,
    store: &Store,
    sandboxes: &Sandboxes,
    decision_id: &str,
    mode: view::CorrectionMode,
) -> Result<view::CorrectionPreview, String> {
    let id: Id = decision_id
        .parse()
        .map_err(|_| format!("{decision_id} is not a decision id"))?;
    let d = store
        .decision(&id)
        .map_err(|e| e.to_string())?
        .ok_or_else(|| format!("decision {decision_id} no longer exists"))?;
    let plan = store
        .plan(&d.plan_id)
        .map_err(|e| e.to_string())?
        .ok_or_else(|| format!("plan {} no longer exists", d.plan_id))?;
    if mode == view::CorrectionMode::Append {
        // The child runs with the parent's execution actor, refused as `plan correct --mode
        // append --dry-run` refuses it when it cannot take guidance.
        let lc = engine.lifecycle().map_err(|e| e.to_string())?;
        return Ok(view::CorrectionPreview {
            refused: cleveragents_engine::correction::append::child_execution_actor(
                &lc, &plan, None,
            )
            .err(),
            ..view::CorrectionPreview::default()
        });
    }
    let imp = impact::impact(store, Some(sandboxes), &id).map_err(|e| e.to_string())?;
    let ids = |v: &[Id]| v.iter().map(Id::to_string).collect::<Vec<_>>();
    Ok(view::CorrectionPreview {
        decisions: imp
            .decisions
            .iter()
            .map(|r| view::DecisionRef {
                decision_id: r.decision_id.to_string(),
                decision_type: r.decision_type.as_str().to_string(),
                chosen: r.chosen_option.clone(),
            })
            .collect(),
        steps_rerun: ids(&imp.steps_rerun),
        steps_replayed: ids(&imp.steps_replayed),
        steps_may_rerun: ids(&imp.steps_may_rerun),
        child_plans: ids(&imp.child_plans),
        files: imp.files.clone(),
        estimated_model_calls: Some(imp.estimated_model_calls),
        refused: cleveragents_engine::correction::revert::check_revertable(&plan, &d)
            .err()
            .map(|e| e.to_string()),
    })
}

/// Reads a plan's decision tree and computes its sandbox diff on its own thread and store
/// connection, newest request first, so the frame loop never waits on the database or the
/// sandbox lock (STYLE.md: nothing slow on the draw path).
#[derive(Debug)]
struct DiffWorker {
    requests: std::sync::mpsc::Sender<String>,
    results: std::sync::mpsc::Receiver<Msg>,
    in_flight: usize,
}

impl DiffWorker {
    fn spawn(db: std::path::PathBuf, sandboxes: Sandboxes) -> Self {
        let (req_tx, req_rx) = std::sync::mpsc::channel::<String>();
        let (res_tx, res_rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let store = match Store::open_read_only(&db).or_else(|_| Store::open(&db)) {
                Ok(s) => s,
                Err(e) => {
                    let _ = res_tx.send(Msg::Error {
                        title: "Cannot read diffs".into(),
                        detail: e.to_string(),
                    });
                    return;
                }
            };
            while let Ok(mut plan_id) = req_rx.recv() {
                let mut skipped = 0;
                while let Ok(newer) = req_rx.try_recv() {
                    plan_id = newer;
                    skipped += 1;
                }
                // The tree first (a quick read), then the diff (which may wait on the
                // sandbox lock while a step runs).
                let nodes = decision_tree(&store, &plan_id);
                if res_tx
                    .send(Msg::TreeUpdated {
                        plan_id: plan_id.clone(),
                        nodes,
                    })
                    .is_err()
                {
                    return;
                }
                let diff = diff_view(&store, &sandboxes, &plan_id);
                // One answer per request, so the bridge can count what is in flight; the
                // skipped ones answer with nothing.
                for _ in 0..skipped {
                    let _ = res_tx.send(Msg::Activity(Vec::new()));
                }
                if res_tx.send(Msg::DiffUpdated { plan_id, diff }).is_err() {
                    return;
                }
            }
        });
        Self {
            requests: req_tx,
            results: res_rx,
            in_flight: 0,
        }
    }

    fn request(&mut self, plan_id: &str) {
        if self.requests.send(plan_id.to_owned()).is_ok() {
            self.in_flight += 1;
        }
    }

    fn ready(&mut self) -> Vec<Msg> {
        let mut out = Vec::new();
        for msg in self.results.try_iter() {
            // Each request ends with its diff (or a placeholder when a newer one replaced it).
            if matches!(
                msg,
                Msg::Activity(_) | Msg::DiffUpdated { .. } | Msg::Error { .. }
            ) {
                self.in_flight = self.in_flight.saturating_sub(1);
            }
            match msg {
                Msg::Activity(_) => {}
                // The worker could not open the store and stopped: nothing more will come.
                Msg::Error { .. } => {
                    self.in_flight = 0;
                    out.push(msg);
                }
                msg => out.push(msg),
            }
        }
        out
    }
}

/// The plan's changes across its sandboxes, as the diff pane shows them (empty before
/// Execute has created a sandbox).
fn diff_view(store: &Store, sandboxes: &Sandboxes, plan_id: &str) -> view::DiffView {
    let Ok(id) = plan_id.parse() else {
        return view::DiffView::default();
    };
    let Ok(active) = sandboxes.active(store, &id) else {
        return view::DiffView::default();
    };
    // While the changes can be reviewed: the review's items with their marks.
    if !active.is_empty()
        && let Some(review) = plan_review(store, sandboxes, &id)
    {
        return review_view(&review);
    }
    let request = DiffRequest {
        path: None,
        hunks: true,
    };
    let mut files = Vec::new();
    for sb in &active {
        let Ok(diffs) =
            cleveragents_engine::sandbox::attribution::attributed_diff(store, sb, &request)
        else {
            continue;
        };
        files.extend(diffs.iter().map(diff_file));
    }
    if !active.is_empty() {
        return view::DiffView {
            files,
            applied: None,
        };
    }
    // Applied (or not started): what Apply wrote, from the stored records.
    let applied = cleveragents_engine::sandbox::applied::applied_changes(store, &id, &request)
        .unwrap_or_default();
    if applied.is_empty() {
        return view::DiffView::default();
    }
    let commits: Vec<String> = applied
        .iter()
        .filter_map(|a| a.commit.as_deref().map(|c| c[..c.len().min(12)].to_owned()))
        .collect();
    view::DiffView {
        files: applied
            .iter()
            .flat_map(|a| a.files.iter().map(diff_file))
            .collect(),
        applied: Some(if commits.is_empty() {
            "applied".to_owned()
        } else {
            format!("applied in {}", commits.join(", "))
        }),
    }
}

/// The review of a plan (`docs/review.md`), as `plan review` computes it; `None` when it
/// cannot be read (the plain diff is shown then).
fn plan_review(store: &Store, sandboxes: &Sandboxes, id: &Id) -> Option<review::Review> {
    let plan = store.plan(id).ok()??;
    let trees = reviewed_trees_in(store, id).ok()?;
    review::load(store, sandboxes, &plan, &trees).ok()
}

/// A review as the diff pane shows it: every file with its hunks, each hunk (or the whole
/// file without hunks) with its id, mark and reason.
pub fn review_view(review: &review::Review) -> view::DiffView {
    let item = |i: &review::Item| view::ReviewItem {
        id: i.id.clone(),
        mark: match i.mark {
            review::Mark::Pending => view::ReviewMark::Pending,
            review::Mark::Accepted => view::ReviewMark::Accepted,
            review::Mark::Rejected => view::ReviewMark::Rejected,
        },
        reason: i.reason.clone(),
    };
    let files = review
        .files
        .iter()
        .map(|f| {
            let mut file = diff_file(&f.diff);
            if f.diff.hunks.is_empty() {
                file.review = f.items.first().map(item);
            } else {
                for (h, i) in file.hunks.iter_mut().zip(&f.items) {
                    h.review = Some(item(i));
                }
            }
            file
        })
        .collect();
    view::DiffView {
        files,
        applied: None,
    }
}

fn diff_file(f: &diff::FileDiff) -> view::DiffFile {
    view::DiffFile {
        path: f.path.clone(),
        added: usize::try_from(f.additions).unwrap_or(usize::MAX),
        removed: usize::try_from(f.deletions).unwrap_or(usize::MAX),
        status: f.status.letter().to_owned(),
        review: None,
        hunks: f
            .hunks
            .iter()
            .map(|h| view::DiffHunk {
                old_start: h.old_start,
                old_lines: h.old_lines,
                new_start: h.new_start,
                new_lines: h.new_lines,
                lines: h
                    .lines
                    .iter()
                    .map(|l| view::DiffLine {
                        kind: match l.kind {
                            diff::LineKind::Context => view::DiffLineKind::Context,
                            diff::LineKind::Added => view::DiffLineKind::Added,
                            diff::LineKind::Removed => view::DiffLineKind::Removed,
                        },
                        text: l.text.clone(),
                    })
                    .collect(),
                decision_ids: h.decision_ids.clone(),
                review: None,
            })
            .collect(),
    }
}

/// The decision tree of a plan as the tree pane shows it: the tree `plan tree
/// --show-superseded` prints (the same engine function, [`tree::load`]), with each child plan
/// a node under the decision that spawned it, or under its parent plan's root decision when no
/// decision links it.
fn decision_tree(store: &Store, plan_id: &str) -> Vec<view::DecisionNode> {
    let Ok(id) = plan_id.parse() else {
        return Vec::new();
    };
    match tree::load(store, &id, true) {
        Ok(t) => t.roots.iter().map(tree_node).collect(),
        Err(_) => Vec::new(),
    }
}

/// One node of the engine's tree in the tree pane's terms. A child plan node reads
/// `plan: NAME → PHASE/STATE ⇢ plan ID`.
pub fn tree_node(n: &tree::Node) -> view::DecisionNode {
    let is_plan = n.kind == "plan";
    view::DecisionNode {
        decision_id: n.id.to_string(),
        decision_type: n
            .decision_type
            .map_or_else(|| n.kind.to_string(), |t| t.as_str().to_string()),
        summary: n.question.clone().unwrap_or_else(|| n.label.clone()),
        chosen: if is_plan {
            n.status.clone().unwrap_or_default()
        } else {
            n.label.clone()
        },
        confidence: n.confidence_score.map(|c| c as f32),
        superseded: n.superseded_by.is_some(),
        children: n.children.iter().map(tree_node).collect(),
        child_plan_id: is_plan.then(|| n.id.to_string()),
    }
}

/// Why a decision was taken, and everything downstream of it, from the same engine functions
/// `plan explain` uses (the decision record and [`impact::impact`]): the downstream decisions
/// (the plan's own first, in sequence order, then those of its child plans), and the child
/// plans reached.
///
/// # Errors
/// A message for an unknown decision, a database or impact failure.
pub fn explanation(
    store: &Store,
    sandboxes: &Sandboxes,
    decision_id: &str,
) -> Result<view::Explanation, String> {
    let id: Id = decision_id
        .parse()
        .map_err(|_| format!("{decision_id} is not a decision id"))?;
    let d = store
        .decision(&id)
        .map_err(|e| e.to_string())?
        .ok_or_else(|| format!("decision {decision_id} no longer exists"))?;
    let imp = impact::impact(store, Some(sandboxes), &id).map_err(|e| e.to_string())?;
    Ok(view::Explanation {
        decision_id: d.decision_id.to_string(),
        plan_id: d.plan_id.to_string(),
        decision_type: d.decision_type.as_str().to_string(),
        question: d.question.clone(),
        chosen: d.chosen_option.clone(),
        alternatives: d.alternatives_considered.clone(),
        rationale: d.rationale.clone(),
        confidence: d.confidence_score.map(|c| c as f32),
        superseded_by: d.superseded_by.map(|i| i.to_string()),
        impact: imp
            .decisions
            .iter()
            .skip(1)
            .map(|r| view::DecisionRef {
                decision_id: r.decision_id.to_string(),
                decision_type: r.decision_type.as_str().to_string(),
                chosen: r.chosen_option.clone(),
            })
            .collect(),
        impact_child_plans: imp.child_plans.iter().map(Id::to_string).collect(),
        impact_steps: imp.steps_rerun.len(),
        impact_files: imp.files.clone(),
        impact_level: imp.level().to_string(),
    })
}

impl Bridge {
    /// A bridge over an open store. It reads and shows; operations need
    /// [`Bridge::with_engine`].
    pub fn new(store: Store, sandboxes: Sandboxes) -> Self {
        let diffs = DiffWorker::spawn(store.path().to_path_buf(), sandboxes.clone());
        let (results_tx, results) = mpsc::channel();
        Self {
            store,
            sandboxes,
            data_version: None,
            selected: None,
            engine: None,
            global_profile: None,
            interrupt: Arc::new(Interrupt::default()),
            diffs,
            jobs: Vec::new(),
            results_tx,
            results,
            live: live::subscribe(),
            reported_activity: Vec::new(),
        }
    }

    /// Lets the bridge run operations (answers and keyboard actions) in this process, on
    /// worker threads, through `engine`; `global_profile` is the configured automation profile
    /// new plans get unless their action or project names one.
    pub fn with_engine(mut self, engine: Engine, global_profile: Option<String>) -> Self {
        if let Ok(mut tx) = self.interrupt.progress.lock() {
            *tx = Some(self.results_tx.clone());
        }
        let observer: Arc<dyn Observer> = self.interrupt.clone();
        self.engine = Some(engine.with_observer(observer));
        self.global_profile = global_profile;
        self
    }

    /// Whether background work (a diff, an operation) is under way, so the frame loop should
    /// look for its result soon.
    pub fn is_busy(&self) -> bool {
        self.diffs.in_flight > 0 || !self.jobs.is_empty()
    }

    /// Runs `job` on a worker thread with the engine; its message arrives through
    /// [`Bridge::background`].
    fn spawn(
        &mut self,
        what: String,
        job: impl FnOnce(&Engine) -> Msg + Send + 'static,
    ) -> Vec<Msg> {
        let Some(engine) = self.engine.clone() else {
            return vec![not_yet("running operations from this TUI session")];
        };
        let tx = self.results_tx.clone();
        let spawned = std::thread::Builder::new()
            .name("agents-tui-op".into())
            .spawn(move || {
                let _ = tx.send(job(&engine));
            });
        match spawned {
            Ok(handle) => {
                self.jobs.push(Job { what, handle });
                self.activity()
            }
            Err(e) => vec![Msg::Error {
                title: format!("Could not run {what}"),
                detail: e.to_string(),
            }],
        }
    }

    /// Runs one engine operation for a [`Cmd`] on a worker thread.
    fn run_op(
        &mut self,
        what: String,
        op: impl FnOnce(&Engine) -> Result<Op, ApiError> + Send + 'static,
    ) -> Vec<Msg> {
        let label = what.clone();
        self.spawn(what, move |engine| {
            finished(&label, op(engine).and_then(|op| engine.run(op)))
        })
    }

    fn activity(&mut self) -> Vec<Msg> {
        let now: Vec<String> = self.jobs.iter().map(|j| j.what.clone()).collect();
        if now == self.reported_activity {
            return Vec::new();
        }
        self.reported_activity = now.clone();
        vec![Msg::Activity(now)]
    }

    /// Results of background work: diffs computed, live events of the plans driven here,
    /// operations that ended.
    pub fn background(&mut self) -> Vec<Msg> {
        let mut msgs = self.diffs.ready();
        msgs.extend(self.live.try_iter().map(live_msg));
        msgs.extend(self.results.try_iter());
        self.jobs.retain(|j| !j.handle.is_finished());
        // A job's message is sent before its thread ends: one sent in between arrives now.
        msgs.extend(self.results.try_iter());
        msgs.extend(self.activity());
        msgs
    }

    /// Stops the operations this TUI runs the way Ctrl-C does in a terminal (a driven plan is
    /// left queued with reason `interrupted`, resumable), and waits up to `patience` for them
    /// to end.
    pub fn shutdown(&mut self, patience: Duration) {
        self.interrupt.quit.store(true, Ordering::SeqCst);
        let deadline = Instant::now() + patience;
        while self.jobs.iter().any(|j| !j.handle.is_finished()) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
        self.jobs.retain(|j| !j.handle.is_finished());
    }

    /// Answers an approval: the operation a user would run headlessly.
    fn answer(&mut self, cmd: Cmd) -> Vec<Msg> {
        let approval_id = match &cmd {
            Cmd::Approve { approval_id }
            | Cmd::Reject { approval_id, .. }
            | Cmd::Choose { approval_id, .. }
            | Cmd::Guidance { approval_id, .. } => approval_id.clone(),
            _ => return Vec::new(),
        };
        if self.engine.is_none() {
            return vec![not_yet("answering approvals from this TUI session")];
        }
        let approval = match self.store.approval(&approval_id) {
            Ok(Some(a)) => a,
            _ => {
                return vec![Msg::Error {
                    title: "Approval not found".into(),
                    detail: format!("{approval_id} was answered or withdrawn elsewhere."),
                }];
            }
        };
        let plan = approval.plan_id;
        let shown = approval_id.clone();
        let (verb, op) = match cmd {
            Cmd::Approve { .. } if approval.kind == ApprovalKind::PhaseGate => {
                match approval.context["gate"].as_str() {
                    Some("apply") => (
                        "apply",
                        Op::Apply {
                            plan,
                            no_commit: false,
                            selection: Default::default(),
                        },
                    ),
                    _ => ("execute", Op::Execute { plan }),
                }
            }
            Cmd::Approve { .. } => (
                "decide",
                Op::Decide {
                    approval: approval_id,
                    answer: Answer::Option(1),
                },
            ),
            Cmd::Reject { reason, .. } => (
                "reject",
                Op::Reject {
                    approval: approval_id,
                    reason,
                },
            ),
            Cmd::Choose { option, .. } => {
                let Some(n) = approval.options.iter().position(|o| *o == option) else {
                    return vec![Msg::Error {
                        title: "Unknown option".into(),
                        detail: option,
                    }];
                };
                (
                    "decide",
                    Op::Decide {
                        approval: approval_id,
                        answer: Answer::Option(n + 1),
                    },
                )
            }
            Cmd::Guidance { text, .. } => (
                "decide",
                Op::Decide {
                    approval: approval_id,
                    answer: Answer::Guidance(text),
                },
            ),
            _ => return Vec::new(),
        };
        // As the command a user would type: decide and reject take the approval.
        let what = match verb {
            "decide" | "reject" => format!("plan {verb} {shown}"),
            _ => format!("plan {verb} {}", short(&plan.to_string())),
        };
        self.run_op(what, move |_| Ok(op))
    }

    /// Why a decision was taken, and everything downstream of it (see [`explanation`]).
    ///
    /// # Errors
    /// A message for an unknown decision or a database failure.
    pub fn explanation(&self, decision_id: &str) -> Result<view::Explanation, String> {
        explanation(&self.store, &self.sandboxes, decision_id)
    }

    /// The plan's checkpoints that a rollback can go to (not discarded), oldest first.
    fn checkpoints(&self, plan_id: &str) -> Result<Vec<view::CheckpointItem>, String> {
        let id: Id = plan_id
            .parse()
            .map_err(|_| format!("{plan_id} is not a plan id"))?;
        let records = self.store.checkpoints(&id).map_err(|e| e.to_string())?;
        Ok(records
            .into_iter()
            .filter(|cp| cp.discarded_at.is_none())
            .map(|cp| view::CheckpointItem {
                checkpoint_id: cp.checkpoint_id.to_string(),
                seq: cp.seq,
                label: cp.label.clone(),
                step: cp.step.clone(),
                files_changed: cp.files_changed,
                taken: cp.created_at.strftime("%Y-%m-%d %H:%M:%S").to_string(),
            })
            .collect())
    }

    /// The actions that can be used (state `available`) and every project, by name.
    fn use_choices(&self) -> Result<view::UseChoices, String> {
        let actions = self.store.actions().map_err(|e| e.to_string())?;
        let projects = self.store.projects().map_err(|e| e.to_string())?;
        let available: Vec<_> = actions
            .into_iter()
            .filter(|a| a.state == ActionState::Available)
            .collect();
        let arguments = available
            .iter()
            .filter(|a| !a.arguments.is_empty())
            .map(|a| {
                let fields = a
                    .arguments
                    .iter()
                    .map(|arg| view::ArgumentField {
                        name: arg.name.clone(),
                        required: arg.required,
                        default: arg.default.as_ref().map(|v| match v {
                            serde_json::Value::String(s) => s.clone(),
                            other => other.to_string(),
                        }),
                        description: arg.description.clone(),
                    })
                    .collect();
                (a.name.clone(), fields)
            })
            .collect();
        Ok(view::UseChoices {
            actions: available.into_iter().map(|a| a.name).collect(),
            projects: projects.into_iter().map(|p| p.name).collect(),
            arguments,
        })
    }

    /// Asks the worker for the plan's tree and diff (they arrive through
    /// [`Bridge::background`]).
    fn plan_views(&mut self, plan_id: &str) -> Vec<Msg> {
        self.diffs.request(plan_id);
        Vec::new()
    }

    /// The messages that bring the UI up to date, if the database changed since the last call
    /// (always on the first call). The selected plan's diff is requested from the diff worker
    /// and arrives through [`Bridge::background`].
    ///
    /// # Errors
    /// [`StoreError`] when the database cannot be read.
    pub fn refresh(&mut self) -> Result<Vec<Msg>, StoreError> {
        let version = self.store.data_version()?;
        if self.data_version == Some(version) {
            return Ok(Vec::new());
        }
        self.data_version = Some(version);
        let now = jiff::Timestamp::now();
        let rows = self
            .store
            .plans()?
            .iter()
            .map(|p| plan_row(p, now))
            .collect();
        let approvals = self
            .store
            .pending_approvals(None)?
            .iter()
            .map(approval_item)
            .collect();
        let mut msgs = vec![Msg::PlansUpdated(rows), Msg::ApprovalsUpdated(approvals)];
        if let Some(selected) = self.selected.clone() {
            msgs.extend(self.plan_views(&selected));
        }
        Ok(msgs)
    }

    /// Carries out one UI command and returns the messages that answer it now (operations
    /// run on worker threads answer later, through [`Bridge::background`]).
    pub fn handle(&mut self, cmd: Cmd) -> Vec<Msg> {
        match cmd {
            Cmd::SelectPlan(plan_id) => {
                let msgs = self.plan_views(&plan_id);
                self.selected = Some(plan_id);
                msgs
            }
            Cmd::Quit => Vec::new(),
            Cmd::ExplainDecision { decision_id, .. } => match self.explanation(&decision_id) {
                Ok(e) => vec![Msg::Explanation(e)],
                Err(detail) => vec![Msg::Error {
                    title: "Cannot explain this decision".into(),
                    detail,
                }],
            },
            Cmd::ListCheckpoints { plan_id } => match self.checkpoints(&plan_id) {
                Ok(items) => vec![Msg::Checkpoints { plan_id, items }],
                Err(detail) => vec![Msg::Error {
                    title: "Cannot list checkpoints".into(),
                    detail,
                }],
            },
            Cmd::ListUseChoices => match self.use_choices() {
                Ok(choices) => vec![Msg::UseChoices(choices)],
                Err(detail) => vec![Msg::Error {
                    title: "Cannot list actions and projects".into(),
                    detail,
                }],
            },
            Cmd::Approve { .. }
            | Cmd::Reject { .. }
            | Cmd::Choose { .. }
            | Cmd::Guidance { .. } => self.answer(cmd),
            Cmd::PreviewCorrection {
                decision_id,
                mode,
                guidance: _,
            } => {
                let what = format!("plan correct --dry-run {}", short(&decision_id));
                self.spawn(what, move |engine| {
                    let result = engine.store().map_err(|e| e.to_string()).and_then(|store| {
                        correction_preview(engine, &store, &engine.sandboxes(), &decision_id, mode)
                    });
                    Msg::CorrectionPreview {
                        decision_id,
                        result,
                    }
                })
            }
            cmd => self.operation(cmd),
        }
    }

    /// The commands that change a plan: each one engine operation on a worker thread.
    fn operation(&mut self, cmd: Cmd) -> Vec<Msg> {
        match cmd {
            Cmd::Execute { plan_id } => {
                let what = format!("plan execute {}", short(&plan_id));
                self.run_op(what, move |e| {
                    Ok(Op::Execute {
                        plan: e.resolve_plan(&plan_id)?,
                    })
                })
            }
            Cmd::Apply { plan_id } => {
                let what = format!("plan apply {}", short(&plan_id));
                self.run_op(what, move |e| {
                    Ok(Op::Apply {
                        plan: e.resolve_plan(&plan_id)?,
                        no_commit: false,
                        selection: Default::default(),
                    })
                })
            }
            Cmd::Cancel { plan_id } => {
                let what = format!("plan cancel {}", short(&plan_id));
                self.run_op(what, move |e| {
                    Ok(Op::Cancel {
                        plan: e.resolve_plan(&plan_id)?,
                        reason: None,
                        wait: CANCEL_WAIT,
                    })
                })
            }
            Cmd::Rollback {
                plan_id,
                checkpoint_id,
            } => {
                let what = format!("plan rollback {} {checkpoint_id}", short(&plan_id));
                self.run_op(what, move |e| {
                    let plan = e.resolve_plan(&plan_id)?;
                    let checkpoint = e.resolve_checkpoint(&plan, &checkpoint_id)?;
                    Ok(Op::Rollback { plan, checkpoint })
                })
            }
            Cmd::Prompt { plan_id, text } => {
                let what = format!("plan prompt {}", short(&plan_id));
                self.run_op(what, move |e| {
                    Ok(Op::Prompt {
                        plan: e.resolve_plan(&plan_id)?,
                        text,
                    })
                })
            }
            Cmd::Use {
                action,
                project,
                args,
            } => {
                let what = format!("plan use {action} {project}");
                let request = Request {
                    action,
                    projects: vec![project],
                    args: args
                        .into_iter()
                        .map(|(name, value)| format!("{name}={value}"))
                        .collect(),
                    global_profile: self.global_profile.clone(),
                    ..Request::default()
                };
                self.run_op(what, move |_| {
                    Ok(Op::Use(Box::new(UseRequest {
                        request,
                        max_cost_usd: None,
                        max_tokens: None,
                    })))
                })
            }
            Cmd::Correct {
                decision_id,
                mode,
                guidance,
            } => {
                let what = format!("plan correct {}", short(&decision_id));
                self.run_op(what, move |e| {
                    let decision = e.store()?.resolve_decision_id(&decision_id)??;
                    Ok(Op::Correct(Box::new(Correction {
                        decision,
                        mode: match mode {
                            view::CorrectionMode::Revert => CorrectMode::Revert,
                            view::CorrectionMode::Append => CorrectMode::Append {
                                execution_actor: None,
                            },
                        },
                        guidance,
                        max_cost_usd: None,
                        max_tokens: None,
                    })))
                })
            }
            Cmd::Review {
                plan_id,
                item_ids,
                mark,
                reason,
            } => {
                let what = format!("plan review {}", short(&plan_id));
                self.spawn(what, move |engine| {
                    let request = |e: &Engine| {
                        Ok::<_, ApiError>(Op::Review(Box::new(ReviewRequest {
                            plan: e.resolve_plan(&plan_id)?,
                            targets: item_ids,
                            mark: match mark {
                                view::ReviewMark::Pending => review::Mark::Pending,
                                view::ReviewMark::Accepted => review::Mark::Accepted,
                                view::ReviewMark::Rejected => review::Mark::Rejected,
                            },
                            reason,
                        })))
                    };
                    // The engine's review answers with the diff as it now is.
                    match request(engine).and_then(|op| engine.run(op)) {
                        Ok(Outcome::Reviewed(r)) => Msg::DiffUpdated {
                            plan_id,
                            diff: review_view(&r.review),
                        },
                        Ok(other) => Msg::Error {
                            title: "Could not mark the review".into(),
                            detail: format!("unexpected answer `{}`", other.name()),
                        },
                        Err(e) => Msg::Error {
                            title: "Could not mark the review".into(),
                            detail: e.to_string(),
                        },
                    }
                })
            }
            _ => Vec::new(),
        }
    }
}

/// How long cancelling waits for another process's driver of the plan to stop.
const CANCEL_WAIT: Duration = Duration::from_secs(10);

fn short(id: &str) -> &str {
    view::short_id(id)
}

fn not_yet(what: &str) -> Msg {
    Msg::Error {
        title: "Not yet supported".to_string(),
        detail: format!("{what} is not yet supported in this version."),
    }
}

/// Why the TUI stopped abnormally.
#[derive(Debug, thiserror::Error)]
pub enum TuiError {
    /// The terminal could not be set up, drawn or read.
    #[error("terminal error: {0}")]
    Terminal(#[from] std::io::Error),
    /// The database could not be read.
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// How long quitting waits for the operations this TUI runs to stop.
pub const QUIT_PATIENCE: Duration = Duration::from_secs(5);

/// Runs the full-screen TUI until the user quits. The terminal is restored on return, on error
/// and on panic (ratatui's panic hook restores it before the panic message prints; mouse
/// capture is turned off first). `engine` (with the configured automation profile) lets the
/// TUI run operations; without it the TUI only shows.
///
/// # Errors
/// [`TuiError`] for terminal or database failures.
pub fn run(
    store: Store,
    sandboxes: Sandboxes,
    engine: Option<(Engine, Option<String>)>,
    theme: &Theme,
    keymap: Keymap,
    options: LaunchOptions,
) -> Result<(), TuiError> {
    use ratatui::crossterm::event::{DisableMouseCapture, EnableMouseCapture};
    let mut terminal = ratatui::try_init()?;
    let previous = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let _ = ratatui::crossterm::execute!(std::io::stdout(), DisableMouseCapture);
        previous(info);
    }));
    let _ = ratatui::crossterm::execute!(std::io::stdout(), EnableMouseCapture);
    let bridge = match engine {
        Some((engine, profile)) => Bridge::new(store, sandboxes).with_engine(engine, profile),
        None => Bridge::new(store, sandboxes),
    };
    let result = event_loop(&mut terminal, bridge, theme, keymap, options);
    let _ = ratatui::crossterm::execute!(std::io::stdout(), DisableMouseCapture);
    ratatui::restore();
    result
}

/// How soon the loop looks again while background work is under way.
const BUSY_POLL: Duration = Duration::from_millis(40);

fn event_loop(
    terminal: &mut ratatui::DefaultTerminal,
    mut bridge: Bridge,
    theme: &Theme,
    keymap: Keymap,
    options: LaunchOptions,
) -> Result<(), TuiError> {
    let mut app = App::with_keymap(keymap);
    let highlighter = cleveragents_ui::highlight::Worker::spawn();
    let mut highlight_until: Option<Instant> = None;
    let size = terminal.size()?;
    let mut pending: Vec<Msg> = vec![Msg::Resize {
        width: size.width,
        height: size.height,
    }];
    if let Some(pane) = options.focus {
        pending.push(Msg::Focus(pane));
    }
    if let Some(id) = options.plan_id {
        pending.push(Msg::SelectPlan(id));
    }
    let mut next_poll = Instant::now();
    let mut dirty = true;
    loop {
        if Instant::now() >= next_poll {
            pending.extend(bridge.refresh()?);
            next_poll = Instant::now() + POLL_INTERVAL;
        }
        pending.extend(bridge.background());
        let highlighted: Vec<Msg> = highlighter
            .ready()
            .into_iter()
            .map(Msg::Highlighted)
            .collect();
        if !highlighted.is_empty() {
            highlight_until = None;
        }
        pending.extend(highlighted);
        dirty |= !pending.is_empty();
        // Apply every message, and every message the resulting commands produce.
        while !pending.is_empty() {
            for msg in std::mem::take(&mut pending) {
                for cmd in app.update(msg) {
                    if cmd == Cmd::Quit {
                        bridge.shutdown(QUIT_PATIENCE);
                        return Ok(());
                    }
                    pending.extend(bridge.handle(cmd));
                }
            }
        }
        if let Some(request) = app.take_highlight_request(theme.syntax()) {
            highlighter.request(request);
            highlight_until = Some(Instant::now() + Duration::from_secs(2));
        }
        // Draw only when something changed: an idle TUI does no work between polls.
        if dirty {
            terminal.draw(|frame| {
                let area = frame.area();
                cleveragents_ui::render(&app, theme, area, frame.buffer_mut());
            })?;
            dirty = false;
        }
        let mut wait = next_poll.saturating_duration_since(Instant::now());
        let highlighting = highlight_until.is_some_and(|t| Instant::now() < t);
        if bridge.is_busy() || highlighting {
            wait = wait.min(BUSY_POLL);
        }
        if event::poll(wait)? {
            match event::read()? {
                Event::Key(key) => pending.extend(Key::from_crossterm(key).map(Msg::Key)),
                Event::Mouse(mouse) => pending.extend(Mouse::from_crossterm(mouse).map(Msg::Mouse)),
                Event::Resize(width, height) => pending.push(Msg::Resize { width, height }),
                _ => {}
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use cleveragents_engine::domain::decision::Decision;

    #[test]
    fn plans_become_rows_with_phase_state_and_elapsed_time() {
        let created = jiff::Timestamp::from_second(1_000).unwrap();
        let mut plan = Plan::new("local/fmt", "fmt", created);
        plan.project_links.push(
            cleveragents_engine::domain::plan::ProjectLink::new("local/api", None, false).unwrap(),
        );
        let row = plan_row(&plan, jiff::Timestamp::from_second(1_075).unwrap());
        assert_eq!(row.plan_id, plan.plan_id.to_string());
        assert_eq!(
            (row.action.as_str(), row.project.as_str()),
            ("local/fmt", "local/api")
        );
        assert_eq!(
            (row.phase, row.state),
            (view::Phase::Strategize, view::ProcessingState::Queued)
        );
        assert_eq!(row.elapsed_ms, 75_000);
        assert_eq!(row.cost_usd, None);
    }

    #[test]
    fn refresh_sends_plans_once_and_again_after_another_process_writes() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("db");
        let mut bridge = Bridge::new(
            Store::open(&path).unwrap(),
            Sandboxes::at(dir.path().join("sandboxes")),
        );
        let first = bridge.refresh().unwrap();
        assert!(matches!(&first[0], Msg::PlansUpdated(rows) if rows.is_empty()));
        assert!(bridge.refresh().unwrap().is_empty(), "nothing changed");
        let mut other = Store::open(&path).unwrap();
        other
            .insert_plan(&Plan::new("local/a", "a", jiff::Timestamp::now()))
            .unwrap();
        let again = bridge.refresh().unwrap();
        assert!(
            matches!(&again[0], Msg::PlansUpdated(rows) if rows.len() == 1),
            "{again:?}"
        );
    }

    #[test]
    fn pending_approvals_reach_the_queue() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("db");
        let mut store = Store::open(&path).unwrap();
        let plan = Plan::new("local/a", "a", jiff::Timestamp::now());
        store.insert_plan(&plan).unwrap();
        let apr = Approval::new(
            plan.plan_id,
            ApprovalKind::PhaseGate,
            "Move to apply",
            jiff::Timestamp::now(),
        );
        store.insert_approval(&apr).unwrap();
        let mut bridge = Bridge::new(
            Store::open(&path).unwrap(),
            Sandboxes::at(dir.path().join("sandboxes")),
        );
        let msgs = bridge.refresh().unwrap();
        let Msg::ApprovalsUpdated(items) = &msgs[1] else {
            panic!("{msgs:?}")
        };
        assert_eq!(items.len(), 1);
        assert_eq!(
            (items[0].kind, items[0].summary.as_str()),
            (view::ApprovalKind::PhaseGate, "Move to apply")
        );
    }

    #[test]
    fn selecting_a_plan_sends_its_decision_tree_nested_by_parent() {
        use cleveragents_engine::domain::decision::DecisionType;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("db");
        let mut store = Store::open(&path).unwrap();
        let plan = Plan::new("local/a", "a", jiff::Timestamp::now());
        store.insert_plan(&plan).unwrap();
        let root = Decision::new(
            plan.plan_id,
            DecisionType::PromptDefinition,
            "Write notes",
            jiff::Timestamp::now(),
        );
        let mut step = Decision::new(
            plan.plan_id,
            DecisionType::ImplementationChoice,
            "NOTES.md",
            jiff::Timestamp::now(),
        );
        step.parent_decision_id = Some(root.decision_id);
        step.question = Some("Where do the notes go?".into());
        step.confidence_score = Some(0.5);
        store.insert_decision(&root).unwrap();
        store.insert_decision(&step).unwrap();
        let mut bridge = Bridge::new(
            Store::open(&path).unwrap(),
            Sandboxes::at(dir.path().join("sandboxes")),
        );
        assert_eq!(bridge.handle(Cmd::SelectPlan(plan.plan_id.to_string())), []);
        let (nodes, diff) = wait_for_views(&mut bridge);
        assert_eq!(nodes.len(), 1);
        assert_eq!(nodes[0].decision_type, "prompt_definition");
        assert_eq!(nodes[0].children.len(), 1);
        let child = &nodes[0].children[0];
        assert_eq!(
            (
                child.summary.as_str(),
                child.chosen.as_str(),
                child.confidence
            ),
            ("Where do the notes go?", "NOTES.md", Some(0.5))
        );
        assert!(diff.files.is_empty(), "no sandbox yet, no changes");
        assert!(!bridge.is_busy());
    }

    /// The selected plan's tree and diff, as the worker sends them.
    fn wait_for_views(bridge: &mut Bridge) -> (Vec<view::DecisionNode>, view::DiffView) {
        let deadline = Instant::now() + Duration::from_secs(20);
        let (mut tree, mut diff) = (None, None);
        loop {
            for msg in bridge.background() {
                match msg {
                    Msg::TreeUpdated { nodes, .. } => tree = Some(nodes),
                    Msg::DiffUpdated { diff: d, .. } => diff = Some(d),
                    _ => {}
                }
            }
            if let (Some(_), Some(_)) = (&tree, &diff) {
                return (tree.unwrap_or_default(), diff.unwrap_or_default());
            }
            assert!(
                Instant::now() < deadline,
                "no tree and diff from the worker"
            );
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    struct Fixture {
        _dir: tempfile::TempDir,
        store: Store,
        bridge: Bridge,
        plan: Plan,
    }

    fn fixture() -> Fixture {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("db");
        let mut store = Store::open(&path).unwrap();
        let plan = Plan::new("local/a", "a", jiff::Timestamp::now());
        store.insert_plan(&plan).unwrap();
        let bridge = Bridge::new(
            Store::open(&path).unwrap(),
            Sandboxes::at(dir.path().join("sandboxes")),
        );
        Fixture {
            _dir: dir,
            store,
            bridge,
            plan,
        }
    }

    fn decision(
        store: &mut Store,
        plan: &Plan,
        kind: cleveragents_engine::domain::decision::DecisionType,
        chosen: &str,
        parent: Option<&Decision>,
    ) -> Decision {
        let mut d = Decision::new(plan.plan_id, kind, chosen, jiff::Timestamp::now());
        d.parent_decision_id = parent.map(|p| p.decision_id);
        store.insert_decision(&d).unwrap();
        d
    }

    #[test]
    fn the_explanation_lists_what_the_decision_chose_and_everything_downstream() {
        use cleveragents_engine::domain::decision::DecisionType as T;
        let mut f = fixture();
        let mut root = Decision::new(
            f.plan.plan_id,
            T::ImplementationChoice,
            "sqlx",
            jiff::Timestamp::now(),
        );
        root.question = Some("Which database library?".into());
        root.alternatives_considered = vec!["diesel".into(), "rusqlite".into()];
        root.rationale = Some("async and compile-time checked".into());
        root.confidence_score = Some(0.75);
        f.store.insert_decision(&root).unwrap();
        let a = decision(
            &mut f.store,
            &f.plan,
            T::ImplementationChoice,
            "pool of 5",
            Some(&root),
        );
        let b = decision(
            &mut f.store,
            &f.plan,
            T::ImplementationChoice,
            "migrations dir",
            Some(&a),
        );
        let unrelated = decision(
            &mut f.store,
            &f.plan,
            T::ImplementationChoice,
            "README",
            None,
        );
        f.store
            .add_decision_dependency(
                &root.decision_id,
                &a.decision_id,
                "decision",
                &a.decision_id.to_string(),
            )
            .unwrap();
        f.store
            .add_decision_dependency(
                &a.decision_id,
                &b.decision_id,
                "decision",
                &b.decision_id.to_string(),
            )
            .unwrap();
        // A child plan spawned downstream of `a`, with its root decision.
        let mut child = Plan::new("local/a", "child", jiff::Timestamp::now());
        child.parent_plan_id = Some(f.plan.plan_id);
        child.root_plan_id = Some(f.plan.plan_id);
        f.store.insert_plan(&child).unwrap();
        let child_root = decision(
            &mut f.store,
            &child,
            T::PromptDefinition,
            "child goal",
            None,
        );
        f.store
            .add_decision_dependency(
                &a.decision_id,
                &child_root.decision_id,
                "plan",
                &child.plan_id.to_string(),
            )
            .unwrap();

        let msgs = f.bridge.handle(Cmd::ExplainDecision {
            plan_id: f.plan.plan_id.to_string(),
            decision_id: root.decision_id.to_string(),
        });
        let [Msg::Explanation(e)] = msgs.as_slice() else {
            panic!("{msgs:?}")
        };
        assert_eq!(e.question.as_deref(), Some("Which database library?"));
        assert_eq!(e.alternatives, ["diesel", "rusqlite"]);
        assert_eq!(
            e.rationale.as_deref(),
            Some("async and compile-time checked")
        );
        assert_eq!(e.confidence, Some(0.75));
        let impact: Vec<&str> = e.impact.iter().map(|d| d.chosen.as_str()).collect();
        assert_eq!(impact[0], "pool of 5", "nearest first");
        let mut further = impact[1..].to_vec();
        further.sort_unstable();
        assert_eq!(further, ["child goal", "migrations dir"]);
        assert!(!impact.contains(&unrelated.chosen_option.as_str()));
        assert_eq!(e.impact_child_plans, [child.plan_id.to_string()]);

        let unknown = f.bridge.handle(Cmd::ExplainDecision {
            plan_id: f.plan.plan_id.to_string(),
            decision_id: Id::generate().to_string(),
        });
        assert!(
            matches!(&unknown[..], [Msg::Error { detail, .. }] if detail.contains("no longer exists"))
        );
    }

    #[test]
    fn child_plans_are_nested_under_their_spawning_decision() {
        use cleveragents_engine::domain::decision::DecisionType as T;
        let mut f = fixture();
        let root = decision(&mut f.store, &f.plan, T::PromptDefinition, "goal", None);
        let spawn = decision(
            &mut f.store,
            &f.plan,
            T::SubplanSpawn,
            "spawn docs plan",
            Some(&root),
        );
        let mut child = Plan::new("local/a", "child", jiff::Timestamp::now());
        child.parent_plan_id = Some(f.plan.plan_id);
        child.root_plan_id = Some(f.plan.plan_id);
        f.store.insert_plan(&child).unwrap();
        let child_root = decision(
            &mut f.store,
            &child,
            T::PromptDefinition,
            "write the docs",
            None,
        );
        decision(
            &mut f.store,
            &child,
            T::ImplementationChoice,
            "docs/guide.md",
            Some(&child_root),
        );
        f.store
            .add_decision_dependency(
                &spawn.decision_id,
                &child_root.decision_id,
                "plan",
                &child.plan_id.to_string(),
            )
            .unwrap();

        // A child plan no decision links (spawned before links were recorded): under the
        // parent plan's root decision, not dropped.
        let mut unlinked = Plan::new("local/a", "unlinked", jiff::Timestamp::now());
        unlinked.parent_plan_id = Some(f.plan.plan_id);
        unlinked.root_plan_id = Some(f.plan.plan_id);
        f.store.insert_plan(&unlinked).unwrap();
        decision(&mut f.store, &unlinked, T::PromptDefinition, "lint", None);

        f.bridge.handle(Cmd::SelectPlan(f.plan.plan_id.to_string()));
        let (nodes, _) = wait_for_views(&mut f.bridge);
        let spawn_node = &nodes[0].children[0];
        assert_eq!(spawn_node.decision_type, "subplan_spawn");
        assert_eq!(spawn_node.children.len(), 1);
        let plan_node = &spawn_node.children[0];
        assert_eq!(plan_node.decision_type, "plan");
        assert_eq!(plan_node.child_plan_id, Some(child.plan_id.to_string()));
        assert_eq!(plan_node.summary, "child");
        assert_eq!(plan_node.children[0].chosen, "write the docs");
        assert_eq!(plan_node.children[0].children[0].chosen, "docs/guide.md");
        let unlinked_node = nodes[0]
            .children
            .iter()
            .find(|n| n.child_plan_id == Some(unlinked.plan_id.to_string()))
            .expect("the unlinked child plan is shown");
        assert_eq!(unlinked_node.children[0].chosen, "lint");
    }

    #[test]
    fn the_use_form_offers_available_actions_and_every_project() {
        let mut f = fixture();
        let msgs = f.bridge.handle(Cmd::ListUseChoices);
        assert_eq!(msgs, [Msg::UseChoices(view::UseChoices::default())]);
    }

    #[test]
    fn a_plan_without_a_sandbox_has_no_checkpoints() {
        let mut f = fixture();
        let msgs = f.bridge.handle(Cmd::ListCheckpoints {
            plan_id: f.plan.plan_id.to_string(),
        });
        assert_eq!(
            msgs,
            [Msg::Checkpoints {
                plan_id: f.plan.plan_id.to_string(),
                items: vec![]
            }]
        );
    }

    #[test]
    fn commands_that_need_the_lifecycle_say_so() {
        let dir = tempfile::tempdir().unwrap();
        let mut bridge = Bridge::new(
            Store::open(&dir.path().join("db")).unwrap(),
            Sandboxes::at(dir.path().join("sandboxes")),
        );
        let msgs = bridge.handle(Cmd::Approve {
            approval_id: "x".into(),
        });
        assert!(matches!(&msgs[0], Msg::Error { title, .. } if title == "Not yet supported"));
        let msgs = bridge.handle(Cmd::Execute {
            plan_id: "x".into(),
        });
        assert!(matches!(&msgs[0], Msg::Error { title, .. } if title == "Not yet supported"));
    }

    #[test]
    fn live_events_of_plans_driven_here_become_live_area_messages() {
        let dir = tempfile::tempdir().unwrap();
        let mut bridge = Bridge::new(
            Store::open(&dir.path().join("db")).unwrap(),
            Sandboxes::at(dir.path().join("sandboxes")),
        );
        let plan = Id::generate();
        live::publish(
            plan,
            LiveKind::TextDelta {
                actor: "openai/m".into(),
                turn: 1,
                text: "Hello".into(),
            },
        );
        let msgs = bridge.background();
        assert!(
            msgs.contains(&Msg::Live {
                plan_id: plan.to_string(),
                update: LiveUpdate::Text {
                    text: "Hello".into()
                }
            }),
            "{msgs:?}"
        );
    }

    #[test]
    fn operations_run_in_this_process_and_report_their_end() {
        let dir = tempfile::tempdir().unwrap();
        let paths =
            cleveragents_engine::Paths::at(dir.path().join("data"), dir.path().join("c.toml"));
        std::fs::create_dir_all(&paths.data_dir).unwrap();
        let store = Store::open(&paths.database()).unwrap();
        let engine = Engine::new(paths.clone(), cleveragents_engine::api::Settings::default());
        let mut bridge = Bridge::new(store, Sandboxes::new(&paths)).with_engine(engine, None);
        let msgs = bridge.handle(Cmd::Execute {
            plan_id: "01JDQ4V6B3G9X2K7M5N8P0R1ST".into(),
        });
        assert!(
            matches!(&msgs[..], [Msg::Activity(a)] if a.len() == 1),
            "{msgs:?}"
        );
        let deadline = Instant::now() + Duration::from_secs(20);
        let end = loop {
            let got: Vec<Msg> = bridge.background();
            if let Some(m) = got.into_iter().find(|m| matches!(m, Msg::Finished { .. })) {
                break m;
            }
            assert!(Instant::now() < deadline, "the operation never ended");
            std::thread::sleep(Duration::from_millis(10));
        };
        let Msg::Finished { ok, text } = end else {
            unreachable!()
        };
        assert!(!ok);
        assert!(text.starts_with("plan execute 01JDQ4V6 failed:"), "{text}");
        assert!(!bridge.is_busy());
    }
}
