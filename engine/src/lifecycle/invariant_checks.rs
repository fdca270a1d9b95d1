//! Enforced invariants (spec section 12, prevention; spec 27 for the approval): after each
//! Execute step and once more before Apply writes anything, the plan's effective invariants
//! (its current `invariant_enforced` decisions) are checked against the changes.
//!
//! - `paths-unchanged: GLOB[, GLOB...]`: no path the step changed (before Apply: the whole
//!   changeset against the base) may match a glob.
//! - `command: CMD`: the command must exit 0, run with `/bin/sh -c` on a checkout of the
//!   changed tree, confined like the Apply validations (writes only beneath that checkout and
//!   a temporary directory, no network), within [`COMMAND_TIMEOUT_SECS`]. Not run after a
//!   step that changed nothing.
//! - Free text: judged by the invariant actor when the plan, a project or the configuration
//!   names one (the same lookup as reconciliation): one model run with one tool,
//!   `report_invariant_check`, given the step's diff (at most [`DIFF_LIMIT`] bytes) and the
//!   texts. Without an invariant actor free text is not machine-checked; the
//!   `invariant_checked` event and `plan status` say so.
//!
//! A violation stops the plan under every profile with one `invariant_violation` approval per
//! violated invariant (the invariant, the check, the evidence, the step): accept once (the plan
//! continues; the acceptance is recorded and a later check of the same attempt does not raise
//! it again), correct the step's decision with `plan correct`, or cancel.

use std::collections::BTreeSet;
use std::sync::Mutex;
use std::time::Duration;

use git2::{Oid, Repository};
use jiff::Timestamp;
use serde_json::{Value, json};

use super::ended::Ended;
use super::state::{self, commit};
use super::{Lifecycle, RunError, model};
use crate::actors::messages::ToolSpec;
use crate::actors::prompts::Role;
use crate::actors::runtime::{ToolHost, ToolOutcome};
use crate::domain::approval::{Approval, ApprovalKind, ApprovalStatus};
use crate::domain::decision::DecisionType;
use crate::domain::event::{
    CheckedInvariant, InvariantChecked, InvariantViolated, UncheckedInvariant, Violation,
};
use crate::domain::sandbox::CheckpointId;
use crate::domain::{CorrectionMode, Id, Next, Plan, ProcessingState};
use crate::events::EventKind;
use crate::registry::invariants::{self, MachineForm};
use crate::sandbox::checkpoint::snapshot;
use crate::sandbox::{Sandbox, Sandboxes};
use crate::store::lifecycle_run::PlanStep;
use crate::store::{Store, approvals};

/// Seconds a `command:` invariant may run.
pub const COMMAND_TIMEOUT_SECS: u64 = 300;

/// Bytes of diff the invariant actor gets (the rest is cut, and it is told so).
pub const DIFF_LIMIT: usize = 32 * 1024;

/// Lines of a failing command's output kept as evidence.
const OUTPUT_TAIL_LINES: usize = 20;

/// One effective invariant of a plan.
#[derive(Debug, Clone)]
pub struct Effective {
    /// `inv_...` (empty for a row that lost its reference).
    pub invariant_id: String,
    /// The text as enforced.
    pub text: String,
}

/// The plan's effective invariants: its current `invariant_enforced` decisions (a correction
/// that stops enforcing one supersedes its decision).
///
/// # Errors
/// Store errors.
pub fn effective(store: &Store, plan_id: &Id) -> Result<Vec<Effective>, RunError> {
    Ok(store
        .decisions(plan_id)?
        .into_iter()
        .filter(|d| d.is_current() && d.decision_type == DecisionType::InvariantEnforced)
        .map(|d| Effective {
            invariant_id: d.context_snapshot["references"][0]
                .as_str()
                .unwrap_or_default()
                .to_string(),
            text: d.chosen_option,
        })
        .collect())
}

/// How a plan's invariants are checked: counts by form and the invariant actor, if any.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize, schemars::JsonSchema)]
pub struct Coverage {
    /// `paths-unchanged:` invariants.
    pub paths_unchanged: usize,
    /// `command:` invariants.
    pub command: usize,
    /// Free-text invariants.
    pub free_text: usize,
    /// The invariant actor that judges free text (`None`: free text is not machine-checked).
    pub invariant_actor: Option<String>,
}

/// The plan's coverage, for `plan status`.
///
/// # Errors
/// Store errors.
pub fn coverage(
    store: &Store,
    providers: &[crate::config::Provider],
    plan_id: &Id,
) -> Result<Coverage, RunError> {
    let mut c = Coverage {
        paths_unchanged: 0,
        command: 0,
        free_text: 0,
        invariant_actor: None,
    };
    for inv in effective(store, plan_id)? {
        match invariants::machine_form(&inv.text) {
            Ok(MachineForm::PathsUnchanged { .. }) => c.paths_unchanged += 1,
            Ok(MachineForm::Command(_)) => c.command += 1,
            _ => c.free_text += 1,
        }
    }
    if c.free_text > 0 {
        c.invariant_actor = invariants::effective(store, providers, &plan_id.to_string(), None)
            .ok()
            .and_then(|(_, _, choice)| choice)
            .map(|ch| ch.actor);
    }
    Ok(c)
}

/// One resource's change under check.
struct Changed {
    resource: String,
    sandbox: Sandbox,
    old: Oid,
    new: Oid,
    paths: Vec<String>,
}

/// Where a check runs.
enum At<'a> {
    Step { step: &'a PlanStep, label: &'a str },
    Apply,
}

impl At<'_> {
    fn name(&self) -> &'static str {
        match self {
            At::Step { .. } => "step",
            At::Apply => "apply",
        }
    }

    fn label(&self) -> String {
        match self {
            At::Step { label, .. } => (*label).to_string(),
            At::Apply => "before apply".into(),
        }
    }
}

/// A check's result.
struct Judged {
    invariant: Effective,
    check: &'static str,
    held: bool,
    evidence: Value,
    /// One line for the summary.
    brief: String,
}

fn checkpoint_trees(store: &Store, cp: Option<&Value>) -> Result<Vec<(Id, Oid)>, RunError> {
    let Some(id) = cp
        .and_then(Value::as_str)
        .and_then(|s| s.parse::<CheckpointId>().ok())
    else {
        return Ok(Vec::new());
    };
    let Some(record) = store.checkpoint(&id)? else {
        return Ok(Vec::new());
    };
    Ok(record
        .states
        .iter()
        .filter_map(|s| Some((s.sandbox_id, Oid::from_str(&s.tree_oid).ok()?)))
        .collect())
}

fn base_tree(sb: &Sandbox) -> Result<Oid, RunError> {
    let repo = sb.repo()?;
    let commit = repo
        .find_commit(sb.base_commit()?)
        .map_err(|e| RunError::Sandbox(e.message().to_string()))?;
    Ok(commit.tree_id())
}

fn current_tree(sb: &Sandbox) -> Result<Oid, RunError> {
    let _lock = sb.lock()?;
    Ok(snapshot(&sb.repo()?)?)
}

/// The changes under check: a step's (start to end checkpoint), or the whole changeset (base
/// to the reviewed tree, else the sandbox as it is).
fn changes(
    engine: &Lifecycle,
    plan: &Plan,
    sbs: &Sandboxes,
    at: &At<'_>,
) -> Result<Vec<Changed>, RunError> {
    let (start, end) = match at {
        At::Step { step, .. } => (
            checkpoint_trees(engine.store(), step.start_checkpoints.get("checkpoint"))?,
            checkpoint_trees(engine.store(), step.end_checkpoints.get("checkpoint"))?,
        ),
        At::Apply => (Vec::new(), Vec::new()),
    };
    let reviewed = super::trees::reviewed_trees(engine, &plan.plan_id)?;
    let mut out = Vec::new();
    for sb in sbs.active(engine.store(), &plan.plan_id)? {
        let find = |v: &[(Id, Oid)]| {
            v.iter()
                .find(|(id, _)| *id == sb.record.sandbox_id)
                .map(|(_, t)| *t)
        };
        let (old, new) = match at {
            At::Step { .. } => {
                let Some(new) = find(&end) else { continue };
                let old = match find(&start) {
                    Some(t) => t,
                    None => base_tree(&sb)?,
                };
                (old, new)
            }
            At::Apply => {
                let new = match reviewed.get(&sb.record.resource_name) {
                    Some(t) => *t,
                    None => current_tree(&sb)?,
                };
                (base_tree(&sb)?, new)
            }
        };
        let paths = if old == new {
            Vec::new()
        } else {
            let repo = sb.repo()?;
            super::apply::decide::tree_changes(&repo, old, new)?
                .into_iter()
                .map(|c| c.path)
                .collect::<BTreeSet<_>>()
                .into_iter()
                .collect()
        };
        out.push(Changed {
            resource: sb.record.resource_name.clone(),
            sandbox: sb,
            old,
            new,
            paths,
        });
    }
    Ok(out)
}

fn check_paths(
    inv: &Effective,
    globs: &[String],
    set: &globset::GlobSet,
    ch: &[Changed],
) -> Judged {
    let hits: Vec<Value> = ch
        .iter()
        .flat_map(|c| {
            c.paths
                .iter()
                .filter(|p| set.is_match(p.as_str()))
                .map(|p| json!({"resource": c.resource, "path": p}))
        })
        .collect();
    let names: Vec<&str> = hits.iter().filter_map(|h| h["path"].as_str()).collect();
    Judged {
        invariant: inv.clone(),
        check: "paths-unchanged",
        held: hits.is_empty(),
        brief: format!("changed {}", names.join(", ")),
        evidence: json!({"globs": globs, "paths": names, "changed": hits}),
    }
}

fn check_command(
    engine: &Lifecycle,
    plan: &Plan,
    sbs: &Sandboxes,
    inv: &Effective,
    command: &str,
    ch: &[Changed],
) -> Result<Judged, RunError> {
    let root = sbs.plan_dir(&plan.plan_id).join("invariant-check");
    let tmp = root.join("tmp");
    let mut runs = Vec::new();
    let mut failed = None;
    for c in ch {
        engine
            .observer()
            .progress(&format!("Checking invariant `{command}` on {}", c.resource));
        let dir = root.join(c.resource.replace(['/', ':'], "_"));
        super::trees::materialize(&c.sandbox.repo()?, c.new, &dir)?;
        std::fs::create_dir_all(&tmp).map_err(|e| RunError::Sandbox(e.to_string()))?;
        let r = super::validations::run_command(
            command,
            &dir,
            &tmp,
            false,
            Duration::from_secs(COMMAND_TIMEOUT_SECS),
        );
        let run = match r {
            Ok(r) => {
                let exit = r["exit_code"].as_i64();
                let timed_out = r["timed_out"] == json!(true);
                let output = format!(
                    "{}{}",
                    r["stdout"].as_str().unwrap_or_default(),
                    r["stderr"].as_str().unwrap_or_default()
                );
                let result = if timed_out {
                    format!("timed out after {COMMAND_TIMEOUT_SECS} s")
                } else {
                    match exit {
                        Some(0) => "passed".to_string(),
                        Some(n) => format!("exit {n}"),
                        None => "killed by a signal".to_string(),
                    }
                };
                json!({"resource": c.resource, "passed": exit == Some(0) && !timed_out, "result": result, "exit_code": exit, "output_tail": super::validations::tail(&output, OUTPUT_TAIL_LINES)})
            }
            Err(e) => {
                json!({"resource": c.resource, "passed": false, "result": format!("could not run: {e}"), "exit_code": null, "output_tail": ""})
            }
        };
        if run["passed"] != json!(true) && failed.is_none() {
            failed = Some(run.clone());
        }
        runs.push(run);
    }
    let _ = std::fs::remove_dir_all(&root);
    Ok(Judged {
        invariant: inv.clone(),
        check: "command",
        held: failed.is_none(),
        brief: failed
            .as_ref()
            .map(|f| {
                let tail = f["output_tail"].as_str().unwrap_or_default();
                let last = tail.lines().last().unwrap_or_default();
                format!(
                    "`{command}`: {}{}",
                    f["result"].as_str().unwrap_or_default(),
                    if last.is_empty() {
                        String::new()
                    } else {
                        format!(": {last}")
                    }
                )
            })
            .unwrap_or_default(),
        evidence: json!({"command": command, "timeout_secs": COMMAND_TIMEOUT_SECS, "runs": runs}),
    })
}

/// The unified diff of the changes, cut at [`DIFF_LIMIT`] bytes.
fn diff_text(ch: &[Changed]) -> String {
    let mut out = String::new();
    for c in ch.iter().filter(|c| !c.paths.is_empty()) {
        let Ok(repo) = c.sandbox.repo() else { continue };
        let _ = write_diff(&repo, c, &mut out);
        if out.len() > DIFF_LIMIT {
            break;
        }
    }
    if out.len() > DIFF_LIMIT {
        let mut end = DIFF_LIMIT;
        while !out.is_char_boundary(end) {
            end -= 1;
        }
        let total = out.len();
        out.truncate(end);
        out.push_str(&format!(
            "\n… (diff cut at {DIFF_LIMIT} of {total} bytes)\n"
        ));
    }
    out
}

fn write_diff(repo: &Repository, c: &Changed, out: &mut String) -> Result<(), git2::Error> {
    let old = repo.find_tree(c.old)?;
    let new = repo.find_tree(c.new)?;
    let diff = repo.diff_tree_to_tree(Some(&old), Some(&new), None)?;
    out.push_str(&format!("# resource {}\n", c.resource));
    diff.print(git2::DiffFormat::Patch, |_, _, line| {
        if matches!(line.origin(), '+' | '-' | ' ') {
            out.push(line.origin());
        }
        out.push_str(&String::from_utf8_lossy(line.content()));
        out.len() <= DIFF_LIMIT
    })
    .or_else(|e| {
        if e.code() == git2::ErrorCode::User {
            Ok(())
        } else {
            Err(e)
        }
    })
}

/// The invariant actor's one tool: a verdict per free-text invariant.
struct CheckTools {
    ids: Vec<String>,
    verdicts: Mutex<Vec<(String, bool, String)>>,
}

fn report_tool() -> ToolSpec {
    ToolSpec {
        name: "report_invariant_check".into(),
        description: "Report whether one invariant held for the change, with the evidence (files, lines, reasoning). Call it once per invariant.".into(),
        input_schema: json!({
            "type": "object",
            "additionalProperties": false,
            "properties": {
                "invariant_id": {"type": "string"},
                "held": {"type": "boolean"},
                "evidence": {"type": "string", "description": "Why: the files and lines that show it."}
            },
            "required": ["invariant_id", "held", "evidence"]
        }),
    }
}

/// Validates one `report_invariant_check` call against the ids asked about and those
/// already reported.
fn parse_verdict(
    ids: &[String],
    done: &[(String, bool, String)],
    args: &Value,
) -> Result<(String, bool, String), String> {
    let id = args["invariant_id"]
        .as_str()
        .ok_or("`invariant_id` is missing")?;
    if !ids.iter().any(|i| i == id) {
        return Err(format!(
            "`{id}` is not one of the invariants to check: {}",
            ids.join(", ")
        ));
    }
    if done.iter().any(|(d, _, _)| d == id) {
        return Err(format!(
            "`{id}` was already reported; report each invariant once"
        ));
    }
    let held = args["held"]
        .as_bool()
        .ok_or("`held` must be true or false")?;
    let evidence = args["evidence"].as_str().unwrap_or_default().trim();
    if evidence.is_empty() {
        return Err("`evidence` is empty; say which files or lines show it".into());
    }
    Ok((id.to_string(), held, evidence.to_string()))
}

impl ToolHost for CheckTools {
    fn specs(&self) -> Vec<ToolSpec> {
        vec![report_tool()]
    }

    async fn call(&self, name: &str, args: Value) -> ToolOutcome {
        if name != "report_invariant_check" {
            return ToolOutcome::error(format!(
                "`{name}` is not available; answer with report_invariant_check"
            ));
        }
        let Ok(mut done) = self.verdicts.lock() else {
            return ToolOutcome::error("internal error: verdicts unavailable");
        };
        match parse_verdict(&self.ids, &done, &args) {
            Ok(v) => {
                done.push(v);
                let left: Vec<&String> = self
                    .ids
                    .iter()
                    .filter(|i| !done.iter().any(|(d, _, _)| d == *i))
                    .collect();
                if left.is_empty() {
                    ToolOutcome::finish("every invariant is reported")
                } else {
                    ToolOutcome::ok(format!(
                        "recorded; still to report: {}",
                        left.iter()
                            .map(|s| s.as_str())
                            .collect::<Vec<_>>()
                            .join(", ")
                    ))
                }
            }
            Err(m) => ToolOutcome::error(format!("report_invariant_check: {m}")),
        }
    }
}

/// Judges the free-text invariants with the invariant actor. Any that it could not judge are
/// results that did not hold, with the reason as evidence (the plan never goes on with a
/// configured check that did not happen).
fn check_free_text(
    engine: &mut Lifecycle,
    plan: &Plan,
    actor_ref: &(String, String),
    free: &[Effective],
    ch: &[Changed],
    at: &At<'_>,
) -> Vec<Judged> {
    let (actor_name, from) = actor_ref;
    let unjudged = |why: String| -> Vec<Judged> {
        free.iter()
            .map(|inv| Judged {
                invariant: inv.clone(),
                check: "invariant_actor",
                held: false,
                brief: format!("not judged: {why}"),
                evidence: json!({"invariant_actor": actor_name, "from": from, "judged": false, "why": why}),
            })
            .collect()
    };
    let actor = match model::resolve(engine, plan, actor_name, Role::InvariantChecker) {
        Ok(a) => a,
        Err(m) => return unjudged(format!("the invariant actor {actor_name} cannot run: {m}")),
    };
    let ids: Vec<String> = free.iter().map(|i| i.invariant_id.clone()).collect();
    let tools = CheckTools {
        ids,
        verdicts: Mutex::new(Vec::new()),
    };
    let context = json!({
        "description": plan.description,
        "where": at.label(),
        "invariants": free.iter().map(|i| json!({"invariant_id": i.invariant_id, "text": i.text})).collect::<Vec<_>>(),
        "paths": ch.iter().flat_map(|c| c.paths.iter().map(move |p| format!("{}: {p}", c.resource))).collect::<Vec<_>>(),
        "diff": diff_text(ch),
    });
    let prompt = format!(
        "Check these {} invariants against the change and answer with report_invariant_check, once per invariant.",
        free.len()
    );
    let decision = match at {
        At::Step { step, .. } => Some(step.decision_id),
        At::Apply => None,
    };
    let run = model::run(
        engine,
        &plan.plan_id,
        decision.as_ref(),
        &actor,
        model::Input {
            context,
            prompt,
            history: Vec::new(),
            ..model::Input::default()
        },
        &tools,
    );
    let verdicts = tools.verdicts.into_inner().unwrap_or_default();
    let stop = match &run {
        Ok(r) => r.stop.describe(),
        Err(m) => m.clone(),
    };
    free.iter()
        .map(|inv| match verdicts.iter().find(|(id, _, _)| *id == inv.invariant_id) {
            Some((_, held, evidence)) => Judged {
                invariant: inv.clone(),
                check: "invariant_actor",
                held: *held,
                brief: evidence.clone(),
                evidence: json!({"invariant_actor": actor_name, "from": from, "judged": true, "evidence": evidence}),
            },
            None => Judged {
                invariant: inv.clone(),
                check: "invariant_actor",
                held: false,
                brief: format!("not judged: the invariant actor {actor_name} did not report it ({stop})"),
                evidence: json!({"invariant_actor": actor_name, "from": from, "judged": false, "why": format!("the invariant actor did not report it: {stop}")}),
            },
        })
        .collect()
}

/// Approvals of the plan's current attempt accepted once: `(invariant id, evidence)`.
fn accepted(store: &Store, plan: &Plan) -> Result<Vec<(String, Value)>, RunError> {
    Ok(store
        .approvals_of(&plan.plan_id)?
        .into_iter()
        .filter(|a| {
            a.kind == ApprovalKind::InvariantViolation
                && a.status == ApprovalStatus::Approved
                && a.context["attempt"] == json!(plan.status.attempt)
        })
        .map(|a| {
            (
                a.context["invariant_id"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string(),
                a.context["evidence"].clone(),
            )
        })
        .collect())
}

/// Drops from `judged` what an acceptance in this attempt already covers: for paths, the
/// paths accepted; for a command or free text, the invariant.
fn without_accepted(mut j: Judged, accepted: &[(String, Value)]) -> Judged {
    if j.held {
        return j;
    }
    let mine: Vec<&Value> = accepted
        .iter()
        .filter(|(id, _)| *id == j.invariant.invariant_id)
        .map(|(_, e)| e)
        .collect();
    if mine.is_empty() {
        return j;
    }
    if j.check != "paths-unchanged" {
        j.held = true;
        j.evidence["accepted_earlier"] = json!(true);
        return j;
    }
    let ok: BTreeSet<&str> = mine
        .iter()
        .flat_map(|e| e["paths"].as_array().into_iter().flatten())
        .filter_map(Value::as_str)
        .collect();
    let left: Vec<Value> = j.evidence["paths"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|p| p.as_str().is_some_and(|p| !ok.contains(p)))
        .cloned()
        .collect();
    if left.is_empty() {
        j.held = true;
        j.evidence["accepted_earlier"] = json!(true);
    } else {
        j.brief = format!(
            "changed {}",
            left.iter()
                .filter_map(Value::as_str)
                .collect::<Vec<_>>()
                .join(", ")
        );
        j.evidence["paths"] = json!(left);
    }
    j
}

/// An invariant not machine-checked, and why.
fn unchecked(inv: &Effective, why: &str) -> UncheckedInvariant {
    UncheckedInvariant {
        invariant_id: inv.invariant_id.clone(),
        text: inv.text.clone(),
        why: why.to_owned(),
    }
}

/// Runs every check at `at`. Returns the results and the invariants not machine-checked.
fn judge(
    engine: &mut Lifecycle,
    plan: &Plan,
    sbs: &Sandboxes,
    at: &At<'_>,
    invs: &[Effective],
) -> Result<(Vec<Judged>, Vec<UncheckedInvariant>), RunError> {
    let ch = changes(engine, plan, sbs, at)?;
    let any_change = ch.iter().any(|c| !c.paths.is_empty());
    let mut judged = Vec::new();
    let mut not_checked = Vec::new();
    let mut free = Vec::new();
    for inv in invs {
        match invariants::machine_form(&inv.text) {
            Ok(MachineForm::PathsUnchanged { globs, set }) => {
                judged.push(check_paths(inv, &globs, &set, &ch));
            }
            Ok(MachineForm::Command(cmd)) if any_change => {
                judged.push(check_command(engine, plan, sbs, inv, &cmd, &ch)?);
            }
            Ok(MachineForm::Command(_)) => not_checked.push(unchecked(inv, "nothing changed")),
            // Rows stored before their form was checked at add time.
            Err(m) => not_checked.push(unchecked(inv, &format!("not a valid machine form: {m}"))),
            Ok(MachineForm::FreeText) => free.push(inv.clone()),
        }
    }
    if !free.is_empty() {
        let choice = invariants::effective(
            engine.store(),
            engine.providers(),
            &plan.plan_id.to_string(),
            None,
        )
        .ok()
        .and_then(|(_, _, c)| c);
        match choice {
            Some(c) if any_change => {
                judged.extend(check_free_text(engine, plan, &(c.actor, c.from), &free, &ch, at));
            }
            Some(_) => not_checked.extend(free.iter().map(|i| unchecked(i, "nothing changed"))),
            None => not_checked.extend(free.iter().map(|i| unchecked(i, "free text, and no invariant actor is configured (plan, project or `invariant-actor`)"))),
        }
    }
    Ok((judged, not_checked))
}

/// The approval for one violation.
fn violation_approval(plan: &Plan, at: &At<'_>, j: &Judged) -> Approval {
    let where_ = at.label();
    let mut a = Approval::new(
        plan.plan_id,
        ApprovalKind::InvariantViolation,
        format!(
            "invariant violated ({where_}): {} — {}",
            j.invariant.text, j.brief
        ),
        Timestamp::now(),
    );
    let step_decision = match at {
        At::Step { step, .. } => Some(step.decision_id.to_string()),
        At::Apply => None,
    };
    a.context = json!({
        "invariant_id": j.invariant.invariant_id,
        "invariant": j.invariant.text,
        "check": j.check,
        "evidence": j.evidence,
        "at": at.name(),
        "step": where_,
        "step_decision_id": step_decision,
        "phase": plan.phase(),
        "attempt": plan.status.attempt,
    });
    // The commands for `correct` and `cancel` are the face's to write (`correct_step`, and
    // `plan decide APR --option cancel`); the CLI adds them to the context it prints.
    // A correction re-runs the step with guidance; the offline script executor runs the
    // action's script as written, so correcting would loop to the same violation.
    a.options = if plan.execution_actor.as_deref() == Some(crate::registry::actors::SCRIPT_EXECUTOR) {
        a.context["correct_unavailable"] = json!(format!(
            "the plan's execution actor {} cannot act on guidance; fix the step with `plan correct --mode append --execution-actor PROVIDER/MODEL`",
            crate::registry::actors::SCRIPT_EXECUTOR
        ));
        vec!["accept".into(), "cancel".into()]
    } else {
        vec!["accept".into(), "correct".into(), "cancel".into()]
    };
    a
}

/// Checks and records: the `invariant_checked` event always; on violations their approvals
/// and `invariant_violated` events, the plan at `queued` (reason `invariant_violation`) when
/// `queue`. Returns the approvals raised.
fn check_and_record(
    engine: &mut Lifecycle,
    plan: &mut Plan,
    sbs: &Sandboxes,
    at: &At<'_>,
    queue: bool,
) -> Result<Vec<Approval>, RunError> {
    let invs = effective(engine.store(), &plan.plan_id)?;
    if invs.is_empty() {
        return Ok(Vec::new());
    }
    let (judged, not_checked) = judge(engine, plan, sbs, at, &invs)?;
    let ok = accepted(engine.store(), plan)?;
    let judged: Vec<Judged> = judged
        .into_iter()
        .map(|j| without_accepted(j, &ok))
        .collect();
    let step_id = match at {
        At::Step { step, .. } => Some(step.decision_id.to_string()),
        At::Apply => None,
    };
    let event = EventKind::InvariantChecked(InvariantChecked {
        at: at.name().into(),
        step: at.label(),
        decision_id: step_id.clone(),
        checked: judged
            .iter()
            .map(|j| CheckedInvariant {
                invariant_id: j.invariant.invariant_id.clone(),
                text: j.invariant.text.clone(),
                check: j.check.into(),
                held: j.held,
                evidence: j.evidence.clone(),
            })
            .collect(),
        not_checked,
    });
    let raised: Vec<Approval> = judged
        .iter()
        .filter(|j| !j.held)
        .map(|j| violation_approval(plan, at, j))
        .collect();
    let plan_id = plan.plan_id;
    commit(engine.store_mut(), plan, event, |_| Ok(()))?;
    if raised.is_empty() {
        engine.flush(&plan_id)?;
        return Ok(raised);
    }
    if queue {
        state::set_state(plan, ProcessingState::Queued)?;
    }
    let snapshot = plan.clone();
    let rows = raised.clone();
    commit(
        engine.store_mut(),
        plan,
        EventKind::InvariantViolated(InvariantViolated {
            at: at.name().into(),
            step: at.label(),
            decision_id: step_id,
            violations: raised
                .iter()
                .map(|a| Violation {
                    approval_id: a.approval_id.clone(),
                    invariant_id: a.context["invariant_id"].clone(),
                    invariant: a.context["invariant"].clone(),
                    check: a.context["check"].clone(),
                    evidence: a.context["evidence"].clone(),
                })
                .collect(),
        }),
        |tx| {
            for a in &rows {
                approvals::insert_in(tx, a)?;
            }
            if queue {
                state::reason(tx, &snapshot, Some("invariant_violation"))?;
            }
            Ok(())
        },
    )?;
    engine.flush(&plan_id)?;
    Ok(raised)
}

/// After a step finished (its end checkpoint recorded): checks the plan's invariants against
/// what the step changed. `Some` when a violation stops the plan (at execute/queued).
///
/// # Errors
/// Store and sandbox errors.
pub(crate) fn after_step(
    engine: &mut Lifecycle,
    plan: &mut Plan,
    sbs: &Sandboxes,
    step: &PlanStep,
    label: &str,
) -> Result<Option<Ended>, RunError> {
    let raised = check_and_record(engine, plan, sbs, &At::Step { step, label }, true)?;
    Ok((!raised.is_empty()).then_some(Ended::Awaiting(raised)))
}

/// Before Apply writes anything: checks the plan's invariants against the whole changeset.
/// Returns the pending violations (those raised now, or raised before and not yet answered);
/// empty when Apply may go on. The plan's state is left as it is.
///
/// # Errors
/// Store and sandbox errors.
pub(crate) fn before_apply(
    engine: &mut Lifecycle,
    plan: &mut Plan,
    sbs: &Sandboxes,
) -> Result<Vec<Approval>, RunError> {
    let pending: Vec<Approval> = pending_violations(engine.store(), &plan.plan_id)?;
    if !pending.is_empty() {
        return Ok(pending);
    }
    check_and_record(engine, plan, sbs, &At::Apply, false)
}

/// The plan's unanswered `invariant_violation` approvals.
///
/// # Errors
/// Store errors.
pub fn pending_violations(store: &Store, plan_id: &Id) -> Result<Vec<Approval>, RunError> {
    Ok(store
        .pending_approvals(Some(plan_id))?
        .into_iter()
        .filter(|a| a.kind == ApprovalKind::InvariantViolation)
        .collect())
}

/// The correction that answers a violation with `correct`: revert the decision of the step
/// where it was found, or (found before Apply, where no one step is to blame) one of the
/// plan's decisions, picked from its tree.
pub fn correct_step(approval: &Approval) -> Next {
    let mode = CorrectionMode::Revert;
    match approval.context["step_decision_id"]
        .as_str()
        .and_then(|d| d.parse::<Id>().ok())
    {
        Some(decision) => Next::Correct { mode, decision },
        None => Next::CorrectInPlan {
            mode,
            plan: approval.plan_id,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn verdicts_must_name_a_known_invariant_once_with_evidence() {
        let ids = vec!["inv_a".to_string(), "inv_b".to_string()];
        let ok = parse_verdict(
            &ids,
            &[],
            &json!({"invariant_id": "inv_a", "held": false, "evidence": "src/api.rs renames `get`"}),
        )
        .unwrap();
        assert_eq!(
            ok,
            ("inv_a".into(), false, "src/api.rs renames `get`".into())
        );
        let e = parse_verdict(
            &ids,
            &[],
            &json!({"invariant_id": "inv_x", "held": true, "evidence": "x"}),
        )
        .unwrap_err();
        assert!(e.contains("not one of the invariants"), "{e}");
        let e = parse_verdict(
            &ids,
            std::slice::from_ref(&ok),
            &json!({"invariant_id": "inv_a", "held": true, "evidence": "x"}),
        )
        .unwrap_err();
        assert!(e.contains("already reported"), "{e}");
        let e = parse_verdict(
            &ids,
            &[],
            &json!({"invariant_id": "inv_b", "held": "yes", "evidence": "x"}),
        )
        .unwrap_err();
        assert!(e.contains("true or false"), "{e}");
        let e = parse_verdict(
            &ids,
            &[],
            &json!({"invariant_id": "inv_b", "held": true, "evidence": " "}),
        )
        .unwrap_err();
        assert!(e.contains("evidence"), "{e}");
    }

    #[test]
    fn an_acceptance_covers_only_the_paths_it_accepted() {
        let inv = Effective {
            invariant_id: "inv_a".into(),
            text: "paths-unchanged: m/**".into(),
        };
        let j = || Judged {
            invariant: inv.clone(),
            check: "paths-unchanged",
            held: false,
            evidence: json!({"paths": ["m/1.sql", "m/2.sql"]}),
            brief: String::new(),
        };
        let partly = without_accepted(j(), &[("inv_a".into(), json!({"paths": ["m/1.sql"]}))]);
        assert!(!partly.held);
        assert_eq!(partly.evidence["paths"], json!(["m/2.sql"]));
        assert_eq!(partly.brief, "changed m/2.sql");
        let all = without_accepted(
            j(),
            &[("inv_a".into(), json!({"paths": ["m/1.sql", "m/2.sql"]}))],
        );
        assert!(all.held);
        let other = without_accepted(j(), &[("inv_b".into(), json!({"paths": ["m/1.sql"]}))]);
        assert!(!other.held);
    }
}
