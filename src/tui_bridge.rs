//! The bridge between the engine and the TUI (`cleveragents-ui`): engine state becomes
//! [`Msg`]s, the UI's [`Cmd`]s become engine operations, and this module owns the terminal.
//!
//! The UI crate never sees SQLite, git or HTTP; everything it shows passes through the view
//! models built here. Other processes (headless commands in other terminals) change the same
//! database; the bridge notices through SQLite's `data_version` and sends fresh view models.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use cleveragents_ui::model::{self as view, PlanRow};
use cleveragents_ui::{App, Cmd, Key, Keymap, Mouse, Msg, Pane, Theme};
use ratatui::crossterm::event::{self, Event};

use crate::engine::domain::action::ActionState;
use crate::engine::domain::approval::{Approval, ApprovalKind};
use crate::engine::domain::decision::Decision;
use crate::engine::domain::id::Id;
use crate::engine::domain::lifecycle::{Phase, ProcessingState};
use crate::engine::domain::plan::Plan;
use crate::engine::sandbox::Sandboxes;
use crate::engine::sandbox::diff::{self, DiffRequest};
use crate::engine::store::{Store, StoreError};

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
        },
        summary: approval.summary.clone(),
        options: approval.options.clone(),
    }
}

/// Engine-side state of a TUI session: the store, what was last sent, the diff worker and
/// the commands it started.
#[derive(Debug)]
pub struct Bridge {
    store: Store,
    data_version: Option<i64>,
    selected: Option<String>,
    answers: Option<AnswerRunner>,
    diffs: DiffWorker,
    running: Vec<Running>,
    reported_activity: Vec<String>,
}

/// Runs the headless command behind a [`Cmd`] (`plan execute`, `plan apply --yes`, `plan
/// cancel`, `plan rollback --yes`, `plan prompt`, `plan use`, `plan correct`, `plan decide`,
/// `plan reject`) as a child process of the same binary, so that the plan is driven outside
/// the TUI's frame loop; the TUI follows its progress through the database and reads the
/// command's json envelope when it ends.
#[derive(Debug, Clone)]
pub struct AnswerRunner {
    /// The `agents` binary.
    pub exe: std::path::PathBuf,
    /// Global options to repeat (`--data-dir`, `--config-path`).
    pub globals: Vec<String>,
    /// File that receives the commands' output.
    pub log: std::path::PathBuf,
}

/// What a child command's result is for.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Purpose {
    /// An action: its end is reported in the status line.
    Action,
    /// A correction dry run: its envelope answers [`Cmd::PreviewCorrection`].
    Preview { decision_id: String },
}

/// A command started by this TUI that has not been reaped yet.
#[derive(Debug)]
struct Running {
    what: String,
    args: Vec<String>,
    purpose: Purpose,
    child: std::process::Child,
    stdout: Option<std::thread::JoinHandle<String>>,
    stderr: Option<std::thread::JoinHandle<String>>,
}

fn read_all(
    pipe: Option<impl std::io::Read + Send + 'static>,
) -> Option<std::thread::JoinHandle<String>> {
    pipe.map(|mut p| {
        std::thread::spawn(move || {
            let mut text = String::new();
            let _ = p.read_to_string(&mut text);
            text
        })
    })
}

impl AnswerRunner {
    fn spawn(&self, args: &[String], what: String, purpose: Purpose) -> Result<Running, String> {
        use std::process::Stdio;
        let mut child = std::process::Command::new(&self.exe)
            .args(&self.globals)
            .args(["--format", "json"])
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| format!("cannot start {}: {e}", self.exe.display()))?;
        let stdout = read_all(child.stdout.take());
        let stderr = read_all(child.stderr.take());
        Ok(Running {
            what,
            args: args.to_vec(),
            purpose,
            child,
            stdout,
            stderr,
        })
    }

    fn log(&self, run: &Running, code: Option<i32>, out: &str, err: &str) {
        use std::io::Write;
        if let Some(dir) = self.log.parent() {
            let _ = std::fs::create_dir_all(dir);
        }
        if let Ok(mut f) = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.log)
        {
            let _ = writeln!(
                f,
                "$ agents {} -> exit {}\n{out}{err}",
                shell_words::join(&run.args),
                code.map_or_else(|| "signal".to_owned(), |c| c.to_string())
            );
        }
    }
}

/// The message of a failed command's json envelope (`CODE: message`, its detail and its
/// suggestions), or its standard error when it printed no envelope.
pub fn envelope_error(stdout: &str, stderr: &str, code: Option<i32>) -> String {
    if let Ok(doc) = serde_json::from_str::<serde_json::Value>(stdout.trim()) {
        let e = &doc["error"];
        if let Some(message) = e["message"].as_str() {
            let mut text = match e["code"].as_str() {
                Some(c) => format!("{c}: {message}"),
                None => message.to_owned(),
            };
            if let Some(detail) = e["detail"].as_str().filter(|d| !d.is_empty()) {
                text.push('\n');
                text.push_str(detail.trim_end());
            }
            for s in e["suggestions"].as_array().into_iter().flatten() {
                if let Some(s) = s.as_str() {
                    text.push_str(&format!("\nhint: {s}"));
                }
            }
            return text;
        }
    }
    let err = stderr.trim();
    if err.is_empty() {
        format!(
            "the command exited with {}",
            code.map_or_else(|| "a signal".to_owned(), |c| format!("code {c}"))
        )
    } else {
        err.lines().take(8).collect::<Vec<_>>().join("\n")
    }
}

/// The impact in a `plan correct --dry-run --format json` envelope (interfaces file:
/// `data.affected`).
///
/// # Errors
/// A message when the document does not have that shape.
pub fn correction_preview(stdout: &str) -> Result<view::CorrectionPreview, String> {
    let doc: serde_json::Value = serde_json::from_str(stdout.trim())
        .map_err(|e| format!("the dry run printed no json envelope: {e}"))?;
    let affected = &doc["data"]["affected"];
    if !affected.is_object() {
        return Err("the dry run's envelope has no data.affected".to_owned());
    }
    let strings = |key: &str| -> Vec<String> {
        affected[key]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|v| v.as_str().map(str::to_owned))
            .collect()
    };
    let text = |v: &serde_json::Value| v.as_str().unwrap_or_default().to_owned();
    Ok(view::CorrectionPreview {
        decisions: affected["decisions"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|d| view::DecisionRef {
                decision_id: text(&d["decision_id"]),
                decision_type: text(&d["decision_type"]),
                chosen: text(&d["chosen_option"]),
            })
            .collect(),
        steps_rerun: strings("steps_rerun"),
        steps_replayed: strings("steps_replayed"),
        steps_may_rerun: strings("steps_may_rerun"),
        child_plans: strings("child_plans"),
        files: strings("files"),
        estimated_model_calls: affected["estimated_model_calls"].as_u64(),
        refused: doc["data"]["refused"].as_str().map(str::to_owned),
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
    let request = DiffRequest {
        path: None,
        hunks: true,
    };
    let mut files = Vec::new();
    for sb in &active {
        let Ok(diffs) = crate::engine::sandbox::attribution::attributed_diff(store, sb, &request)
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
    let applied =
        crate::engine::sandbox::applied::applied_changes(store, &id, &request).unwrap_or_default();
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

fn diff_file(f: &diff::FileDiff) -> view::DiffFile {
    view::DiffFile {
        path: f.path.clone(),
        added: usize::try_from(f.additions).unwrap_or(usize::MAX),
        removed: usize::try_from(f.deletions).unwrap_or(usize::MAX),
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
            })
            .collect(),
    }
}

/// The decision tree of a plan: roots (no parent) in sequence order, each with its children
/// nested by `parent_decision_id`, and each spawning decision with the tree of the child plan
/// it spawned (interfaces: `plan` dependencies) nested under it.
fn decision_tree(store: &Store, plan_id: &str) -> Vec<view::DecisionNode> {
    let Ok(id) = plan_id.parse() else {
        return Vec::new();
    };
    tree_of(store, &id, &mut std::collections::HashSet::new(), 0)
}

fn tree_of(
    store: &Store,
    plan: &Id,
    seen: &mut std::collections::HashSet<Id>,
    depth: usize,
) -> Vec<view::DecisionNode> {
    if depth > MAX_CHILD_DEPTH || !seen.insert(*plan) {
        return Vec::new();
    }
    let Ok(decisions) = store.decisions(plan) else {
        return Vec::new();
    };
    let mut spawned: HashMap<Id, Vec<String>> = HashMap::new();
    for (decision, child) in store.child_plan_links(plan).unwrap_or_default() {
        spawned.entry(decision).or_default().push(child);
    }
    let mut children: HashMap<Option<Id>, Vec<&Decision>> = HashMap::new();
    for d in &decisions {
        children.entry(d.parent_decision_id).or_default().push(d);
    }
    // Decisions whose parent is not in this plan are roots too (nothing is dropped).
    let ids: std::collections::HashSet<Id> = decisions.iter().map(|d| d.decision_id).collect();
    let roots: Vec<&Decision> = decisions
        .iter()
        .filter(|d| d.parent_decision_id.is_none_or(|p| !ids.contains(&p)))
        .collect();
    struct Ctx<'a> {
        store: &'a Store,
        children: HashMap<Option<Id>, Vec<&'a Decision>>,
        spawned: HashMap<Id, Vec<String>>,
    }
    fn node(
        ctx: &Ctx<'_>,
        d: &Decision,
        seen: &mut std::collections::HashSet<Id>,
        depth: usize,
    ) -> view::DecisionNode {
        let mut kids: Vec<view::DecisionNode> = ctx
            .children
            .get(&Some(d.decision_id))
            .into_iter()
            .flatten()
            .map(|c| node(ctx, c, seen, depth))
            .collect();
        let child_plans = ctx.spawned.get(&d.decision_id).cloned().unwrap_or_default();
        for child in &child_plans {
            if let Ok(child_id) = child.parse::<Id>() {
                kids.extend(tree_of(ctx.store, &child_id, seen, depth + 1));
            }
        }
        view::DecisionNode {
            decision_id: d.decision_id.to_string(),
            decision_type: d.decision_type.as_str().to_string(),
            summary: d
                .question
                .clone()
                .unwrap_or_else(|| d.chosen_option.clone()),
            chosen: d.chosen_option.clone(),
            confidence: d.confidence_score.map(|c| c as f32),
            superseded: d.superseded_by.is_some(),
            children: kids,
            child_plan_id: child_plans.first().cloned(),
        }
    }
    let ctx = Ctx {
        store,
        children,
        spawned,
    };
    roots
        .into_iter()
        .map(|d| node(&ctx, d, seen, depth))
        .collect()
}

/// How deep child plans nest in the tree before the bridge stops following them.
const MAX_CHILD_DEPTH: usize = 8;

impl Bridge {
    /// A bridge over an open store.
    pub fn new(store: Store, sandboxes: Sandboxes) -> Self {
        let diffs = DiffWorker::spawn(store.path().to_path_buf(), sandboxes);
        Self {
            store,
            data_version: None,
            selected: None,
            answers: None,
            diffs,
            running: Vec::new(),
            reported_activity: Vec::new(),
        }
    }

    /// Lets the bridge run commands (answers and keyboard actions) as child processes.
    pub fn with_answers(mut self, runner: AnswerRunner) -> Self {
        self.answers = Some(runner);
        self
    }

    /// Whether background work (a diff, a command) is under way, so the frame loop should
    /// look for its result soon.
    pub fn is_busy(&self) -> bool {
        self.diffs.in_flight > 0 || !self.running.is_empty()
    }

    /// Runs one headless command for a [`Cmd`].
    fn run(&mut self, args: Vec<String>, what: String, purpose: Purpose) -> Vec<Msg> {
        let Some(runner) = self.answers.clone() else {
            return vec![not_yet("running commands from this TUI session")];
        };
        match runner.spawn(&args, what.clone(), purpose.clone()) {
            Ok(run) => {
                self.running.push(run);
                self.activity()
            }
            Err(detail) => match purpose {
                Purpose::Preview { decision_id } => vec![Msg::CorrectionPreview {
                    decision_id,
                    result: Err(detail),
                }],
                Purpose::Action => vec![Msg::Error {
                    title: format!("Could not run {what}"),
                    detail,
                }],
            },
        }
    }

    fn activity(&mut self) -> Vec<Msg> {
        let now: Vec<String> = self.running.iter().map(|r| r.what.clone()).collect();
        if now == self.reported_activity {
            return Vec::new();
        }
        self.reported_activity = now.clone();
        vec![Msg::Activity(now)]
    }

    /// Results of background work: diffs computed, commands that ended.
    pub fn background(&mut self) -> Vec<Msg> {
        let mut msgs = self.diffs.ready();
        let mut i = 0;
        while i < self.running.len() {
            let status = match self.running[i].child.try_wait() {
                Ok(Some(status)) => status,
                Ok(None) => {
                    i += 1;
                    continue;
                }
                Err(_) => {
                    // Cannot be waited for: forget it rather than spin on it.
                    self.running.remove(i);
                    continue;
                }
            };
            let mut run = self.running.remove(i);
            let out = run
                .stdout
                .take()
                .and_then(|h| h.join().ok())
                .unwrap_or_default();
            let err = run
                .stderr
                .take()
                .and_then(|h| h.join().ok())
                .unwrap_or_default();
            let code = status.code();
            if let Some(runner) = &self.answers {
                runner.log(&run, code, &out, &err);
            }
            let ok = matches!(code, Some(0 | 3));
            msgs.push(match run.purpose {
                Purpose::Preview { decision_id } => Msg::CorrectionPreview {
                    decision_id,
                    result: if code == Some(0) {
                        correction_preview(&out)
                    } else {
                        Err(envelope_error(&out, &err, code))
                    },
                },
                Purpose::Action if ok => Msg::Finished {
                    ok: true,
                    text: if code == Some(3) {
                        format!("{}: waiting for you (see Approvals).", run.what)
                    } else {
                        format!("{}: done.", run.what)
                    },
                },
                Purpose::Action => Msg::Finished {
                    ok: false,
                    text: format!(
                        "{} failed: {}",
                        run.what,
                        envelope_error(&out, &err, code).replace('\n', " · ")
                    ),
                },
            });
        }
        msgs.extend(self.activity());
        msgs
    }

    /// Stops the commands this TUI started, cooperatively (SIGINT, as Ctrl-C in a terminal
    /// would: a driven plan is left queued with reason `interrupted`), and waits up to
    /// `patience` for them to end.
    pub fn shutdown(&mut self, patience: Duration) {
        for run in &self.running {
            let pid = rustix::process::Pid::from_child(&run.child);
            let _ = rustix::process::kill_process(pid, rustix::process::Signal::INT);
        }
        let deadline = Instant::now() + patience;
        while !self.running.is_empty() && Instant::now() < deadline {
            self.running
                .retain_mut(|r| matches!(r.child.try_wait(), Ok(None)));
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Answers an approval: the same command a user would run headlessly.
    fn answer(&mut self, cmd: Cmd) -> Vec<Msg> {
        let approval_id = match &cmd {
            Cmd::Approve { approval_id }
            | Cmd::Reject { approval_id, .. }
            | Cmd::Choose { approval_id, .. }
            | Cmd::Guidance { approval_id, .. } => approval_id.clone(),
            _ => return Vec::new(),
        };
        if self.answers.is_none() {
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
        let s = |v: &str| v.to_string();
        let plan = approval.plan_id.to_string();
        let args: Vec<String> = match cmd {
            Cmd::Approve { .. } if approval.kind == ApprovalKind::PhaseGate => {
                match approval.context["gate"].as_str() {
                    Some("apply") => vec![s("plan"), s("apply"), s("--yes"), plan.clone()],
                    _ => vec![s("plan"), s("execute"), plan.clone()],
                }
            }
            Cmd::Approve { .. } => vec![s("plan"), s("decide"), approval_id, s("--option"), s("1")],
            Cmd::Reject { reason, .. } => {
                vec![s("plan"), s("reject"), approval_id, s("--reason"), reason]
            }
            Cmd::Choose { option, .. } => {
                let Some(n) = approval.options.iter().position(|o| *o == option) else {
                    return vec![Msg::Error {
                        title: "Unknown option".into(),
                        detail: option,
                    }];
                };
                vec![
                    s("plan"),
                    s("decide"),
                    approval_id,
                    s("--option"),
                    (n + 1).to_string(),
                ]
            }
            Cmd::Guidance { text, .. } => {
                vec![s("plan"), s("decide"), approval_id, s("--guidance"), text]
            }
            _ => return Vec::new(),
        };
        let what = format!("plan {} {}", args[1], short(&plan));
        self.run(args, what, Purpose::Action)
    }

    /// Why a decision was taken, and everything downstream of it: the decisions reached
    /// through `decision_dependencies` (of any type, across child plans), nearest first.
    ///
    /// # Errors
    /// A message for an unknown decision or a database failure.
    pub fn explanation(&self, decision_id: &str) -> Result<view::Explanation, String> {
        let id: Id = decision_id
            .parse()
            .map_err(|_| format!("{decision_id} is not a decision id"))?;
        let d = self
            .store
            .decision(&id)
            .map_err(|e| e.to_string())?
            .ok_or_else(|| format!("decision {decision_id} no longer exists"))?;
        let mut impact = Vec::new();
        let mut child_plans: Vec<String> = Vec::new();
        let mut seen = std::collections::HashSet::from([id]);
        let mut queue = std::collections::VecDeque::from([id]);
        while let Some(up) = queue.pop_front() {
            for link in self
                .store
                .downstream_links(&up)
                .map_err(|e| e.to_string())?
            {
                if link.dependency_type == "plan" && !child_plans.contains(&link.downstream_ref) {
                    child_plans.push(link.downstream_ref.clone());
                }
                if seen.insert(link.downstream) {
                    queue.push_back(link.downstream);
                    if let Ok(Some(down)) = self.store.decision(&link.downstream) {
                        impact.push(view::DecisionRef {
                            decision_id: down.decision_id.to_string(),
                            decision_type: down.decision_type.as_str().to_string(),
                            chosen: down.chosen_option.clone(),
                        });
                    }
                }
            }
        }
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
            impact,
            impact_child_plans: child_plans,
        })
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

    /// Carries out one UI command and returns the messages that answer it now (commands run
    /// as child processes answer later, through [`Bridge::background`]).
    pub fn handle(&mut self, cmd: Cmd) -> Vec<Msg> {
        let s = |v: &str| v.to_owned();
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
            Cmd::Execute { plan_id } => {
                let what = format!("plan execute {}", short(&plan_id));
                self.run(
                    vec![s("plan"), s("execute"), plan_id],
                    what,
                    Purpose::Action,
                )
            }
            Cmd::Apply { plan_id } => {
                let what = format!("plan apply {}", short(&plan_id));
                self.run(
                    vec![s("plan"), s("apply"), s("--yes"), plan_id],
                    what,
                    Purpose::Action,
                )
            }
            Cmd::Cancel { plan_id } => {
                let what = format!("plan cancel {}", short(&plan_id));
                self.run(vec![s("plan"), s("cancel"), plan_id], what, Purpose::Action)
            }
            Cmd::Rollback {
                plan_id,
                checkpoint_id,
            } => {
                let what = format!("plan rollback {} {checkpoint_id}", short(&plan_id));
                self.run(
                    vec![s("plan"), s("rollback"), s("--yes"), plan_id, checkpoint_id],
                    what,
                    Purpose::Action,
                )
            }
            Cmd::Prompt { plan_id, text } => {
                let what = format!("plan prompt {}", short(&plan_id));
                self.run(
                    vec![s("plan"), s("prompt"), plan_id, text],
                    what,
                    Purpose::Action,
                )
            }
            Cmd::Use {
                action,
                project,
                args,
            } => {
                let what = format!("plan use {action} {project}");
                let mut argv = vec![s("plan"), s("use"), action, project];
                // One argv word per value: nothing passes through a shell.
                for (name, value) in args {
                    argv.push(s("--arg"));
                    argv.push(format!("{name}={value}"));
                }
                self.run(argv, what, Purpose::Action)
            }
            Cmd::PreviewCorrection {
                decision_id,
                mode,
                guidance,
            } => {
                let what = format!("plan correct --dry-run {decision_id}");
                self.run(
                    correct_args(&decision_id, mode, &guidance, "--dry-run"),
                    what,
                    Purpose::Preview { decision_id },
                )
            }
            Cmd::Correct {
                decision_id,
                mode,
                guidance,
            } => {
                let what = format!("plan correct {decision_id}");
                self.run(
                    correct_args(&decision_id, mode, &guidance, "--yes"),
                    what,
                    Purpose::Action,
                )
            }
        }
    }
}

/// `plan correct --mode MODE --guidance TEXT FLAG DECISION` (interfaces file).
fn correct_args(
    decision_id: &str,
    mode: view::CorrectionMode,
    guidance: &str,
    flag: &str,
) -> Vec<String> {
    [
        "plan",
        "correct",
        "--mode",
        mode.as_str(),
        "--guidance",
        guidance,
        flag,
        decision_id,
    ]
    .map(str::to_owned)
    .to_vec()
}

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

/// How long quitting waits for the commands this TUI started to stop.
pub const QUIT_PATIENCE: Duration = Duration::from_secs(5);

/// Runs the full-screen TUI until the user quits. The terminal is restored on return, on error
/// and on panic (ratatui's panic hook restores it before the panic message prints; mouse
/// capture is turned off first).
///
/// # Errors
/// [`TuiError`] for terminal or database failures.
pub fn run(
    store: Store,
    sandboxes: Sandboxes,
    answers: Option<AnswerRunner>,
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
    let bridge = match answers {
        Some(a) => Bridge::new(store, sandboxes).with_answers(a),
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

    #[test]
    fn plans_become_rows_with_phase_state_and_elapsed_time() {
        let created = jiff::Timestamp::from_second(1_000).unwrap();
        let mut plan = Plan::new("local/fmt", "fmt", created);
        plan.project_links
            .push(crate::engine::domain::plan::ProjectLink::new("local/api", None, false).unwrap());
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
            "agents plan apply X",
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
        use crate::engine::domain::decision::{Decision, DecisionType};
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
        kind: crate::engine::domain::decision::DecisionType,
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
        use crate::engine::domain::decision::DecisionType as T;
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
        use crate::engine::domain::decision::DecisionType as T;
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

        f.bridge.handle(Cmd::SelectPlan(f.plan.plan_id.to_string()));
        let (nodes, _) = wait_for_views(&mut f.bridge);
        let spawn_node = &nodes[0].children[0];
        assert_eq!(spawn_node.decision_type, "subplan_spawn");
        assert_eq!(spawn_node.child_plan_id, Some(child.plan_id.to_string()));
        assert_eq!(spawn_node.children.len(), 1);
        assert_eq!(spawn_node.children[0].chosen, "write the docs");
        assert_eq!(spawn_node.children[0].children[0].chosen, "docs/guide.md");
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
    fn failed_envelopes_become_one_readable_message() {
        let out = r#"{"status":"error","error":{"code":"USAGE","message":"unrecognized subcommand 'correct'","detail":"Usage: agents plan <COMMAND>","suggestions":["agents --help"]}}"#;
        assert_eq!(
            envelope_error(out, "", Some(2)),
            "USAGE: unrecognized subcommand 'correct'\nUsage: agents plan <COMMAND>\nhint: agents --help"
        );
        assert_eq!(envelope_error("", "boom\n", Some(1)), "boom");
        assert_eq!(
            envelope_error("", "", Some(1)),
            "the command exited with code 1"
        );
    }

    #[test]
    fn the_dry_run_envelope_becomes_a_preview() {
        let out = r#"{"status":"ok","data":{"decision_id":"D","plan_id":"P","mode":"revert","affected":{
            "decisions":[{"decision_id":"D2","decision_type":"implementation_choice","chosen_option":"x"}],
            "steps_rerun":["D2"],"steps_replayed":[],"steps_may_rerun":["D3"],"child_plans":[],
            "files":["a.rs"],"estimated_model_calls":3}}}"#;
        let preview = correction_preview(out).unwrap();
        assert_eq!(preview.decisions[0].chosen, "x");
        assert_eq!(preview.steps_rerun, ["D2"]);
        assert_eq!(preview.steps_may_rerun, ["D3"]);
        assert_eq!(preview.files, ["a.rs"]);
        assert_eq!(preview.estimated_model_calls, Some(3));
        assert_eq!(preview.refused, None);
        let refused = out.replace(
            r#""mode":"revert","#,
            r#""mode":"revert","refused":"the plan is applied","#,
        );
        assert_eq!(
            correction_preview(&refused).unwrap().refused.as_deref(),
            Some("the plan is applied")
        );
        assert!(correction_preview(r#"{"data":{}}"#).is_err());
        assert!(correction_preview("not json").is_err());
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
}
