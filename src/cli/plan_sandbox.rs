//! `agents plan diff|artifacts|checkpoints|rollback|export|cleanup|shell` (spec sections 06
//! and 11):
//! the sandbox side of plans. `plan use|list|status` live in `plan.rs`.

use std::path::PathBuf;

use clap::Subcommand;
use serde_json::json;

use super::confirm::confirm;
use super::{CliError, Context};
use crate::output::{Cell, Column, Element, Level, Payload, Report, Tone};
use cleveragents_engine::api;

/// `agents plan ...` (sandbox commands).
#[derive(Debug, Subcommand)]
pub enum PlanSandboxCommand {
    /// Show a plan's changes against its base, per file with hunks
    Diff {
        /// Plan id or unique prefix
        #[arg(required_unless_present = "correction")]
        plan: Option<String>,
        /// Show a correction attempt's before and after instead (attempt id or prefix)
        #[arg(long, value_name = "ATTEMPT", conflicts_with_all = ["resource", "path", "stat"])]
        correction: Option<String>,
        /// Only this resource
        #[arg(long, value_name = "NAME")]
        resource: Option<String>,
        /// Only files at or under this path
        #[arg(long, value_name = "PATH")]
        path: Option<String>,
        /// Files and line counts only, no hunks
        #[arg(long)]
        stat: bool,
        /// After a partial Apply: the sandbox's whole change, what was left out included,
        /// instead of what the commit wrote
        #[arg(long, conflicts_with = "correction")]
        remainder: bool,
    },
    /// List what a plan produced: changed files and the tool calls that changed them
    Artifacts {
        /// Plan id or unique prefix
        plan: String,
    },
    /// List a plan's checkpoints
    Checkpoints {
        /// Plan id or unique prefix
        plan: String,
        /// Include checkpoints discarded by a rollback
        #[arg(long)]
        all: bool,
    },
    /// Restore a plan's sandboxes to a checkpoint; later work is marked discarded
    Rollback {
        /// Do not ask for confirmation
        #[arg(short, long)]
        yes: bool,
        /// Plan id or unique prefix
        plan: String,
        /// Checkpoint id (cp_...), unique prefix, or sequence number (1, the `base` checkpoint, is the state before step 1)
        checkpoint: String,
    },
    /// Take a plan's work into your repository as a branch, or into a patch file
    #[command(group(
        clap::ArgGroup::new("target")
            .required(true)
            .multiple(false)
            .args(["branch", "patch"])
    ))]
    Export {
        /// Plan id or unique prefix
        plan: String,
        /// Create this branch in the resource's repository
        #[arg(long, value_name = "NAME")]
        branch: Option<String>,
        /// Write a git patch to this file
        #[arg(long, value_name = "FILE")]
        patch: Option<PathBuf>,
        /// Only this resource (required when the plan has several)
        #[arg(long, value_name = "NAME")]
        resource: Option<String>,
        /// Replace an existing branch or file
        #[arg(long)]
        force: bool,
        /// Export the change even where it holds the value of a secret (an environment
        /// variable named *_KEY, *_TOKEN, *_SECRET or *_PASSWORD); refused otherwise
        #[arg(long)]
        allow_secrets: bool,
    },
    /// Open your shell (or run a command) in a plan's sandbox: what you change there is the
    /// plan's, seen by its next checkpoint and diff (at the apply gate, Apply refuses a
    /// sandbox changed after review)
    Shell {
        /// Plan id or unique prefix
        plan: String,
        /// Only this resource (required when the plan has several)
        #[arg(long, value_name = "NAME")]
        resource: Option<String>,
        /// The command to run instead of your shell ($SHELL), after `--`
        #[arg(last = true, value_name = "COMMAND")]
        command: Vec<String>,
    },
    /// Remove sandboxes of cancelled and errored plans, release those of applied plans
    Cleanup {
        /// Do not ask for confirmation
        #[arg(short, long)]
        yes: bool,
    },
}

impl PlanSandboxCommand {
    /// The subcommand name.
    pub fn name(&self) -> &'static str {
        match self {
            PlanSandboxCommand::Diff { .. } => "diff",
            PlanSandboxCommand::Artifacts { .. } => "artifacts",
            PlanSandboxCommand::Checkpoints { .. } => "checkpoints",
            PlanSandboxCommand::Rollback { .. } => "rollback",
            PlanSandboxCommand::Export { .. } => "export",
            PlanSandboxCommand::Cleanup { .. } => "cleanup",
            PlanSandboxCommand::Shell { .. } => "shell",
        }
    }
}

impl PlanSandboxCommand {
    /// Whether the subcommand reaches the engine only through the API's client, so that it
    /// can run against a server (`--server`).
    pub fn served_remotely(&self) -> bool {
        match self {
            PlanSandboxCommand::Diff { .. }
            | PlanSandboxCommand::Checkpoints { .. }
            | PlanSandboxCommand::Rollback { .. }
            | PlanSandboxCommand::Artifacts { .. }
            | PlanSandboxCommand::Export { .. }
            | PlanSandboxCommand::Cleanup { .. } => true,
            // The work tree is on this machine, mounted by this process.
            PlanSandboxCommand::Shell { .. } => false,
        }
    }
}

/// Runs a sandbox plan subcommand.
///
/// # Errors
/// `NOT_FOUND`, `AMBIGUOUS`, `INVALID_INPUT`, `CONFLICT`, `NEEDS_APPROVAL`, git and I/O errors.
pub fn run(command: PlanSandboxCommand, ctx: &Context) -> Result<Report, CliError> {
    match command {
        PlanSandboxCommand::Diff {
            plan,
            correction: Some(attempt),
            ..
        } => super::plan_correct::correction_diff(ctx, &attempt, plan.as_deref()),
        PlanSandboxCommand::Diff {
            plan,
            resource,
            path,
            stat,
            remainder,
            correction: None,
        } => plan_diff(
            ctx,
            plan.as_deref().unwrap_or_default(),
            resource.as_deref(),
            path,
            (stat, remainder),
        ),
        PlanSandboxCommand::Artifacts { plan } => artifacts(ctx, &plan),
        PlanSandboxCommand::Checkpoints { plan, all } => checkpoints(ctx, &plan, all),
        PlanSandboxCommand::Rollback {
            yes,
            plan,
            checkpoint,
        } => rollback(ctx, &plan, &checkpoint, yes),
        PlanSandboxCommand::Export {
            plan,
            branch,
            patch,
            resource,
            force,
            allow_secrets,
        } => export_cmd(
            ctx,
            &plan,
            (branch, patch),
            resource.as_deref(),
            force,
            allow_secrets,
        ),
        PlanSandboxCommand::Cleanup { yes } => cleanup(ctx, yes),
        PlanSandboxCommand::Shell {
            plan,
            resource,
            command,
        } => shell(ctx, &plan, resource.as_deref(), &command),
    }
}

/// One row of the Changed Files table.
fn file_row(f: &api::FileDiff, resource_name: &str) -> Vec<Cell> {
    let path = match &f.old_path {
        Some(old) => format!("{old} -> {}", f.path),
        None => f.path.clone(),
    };
    let tone = match f.status {
        api::FileStatus::Added => Tone::Good,
        api::FileStatus::Deleted => Tone::Bad,
        _ => Tone::Warn,
    };
    vec![
        Cell::new(f.status.letter(), tone),
        Cell::from(path),
        Cell::from(if f.binary {
            "bin".to_string()
        } else {
            format!("+{}", f.additions)
        }),
        Cell::from(if f.binary {
            String::new()
        } else {
            format!("-{}", f.deletions)
        }),
        Cell::new(resource_name.to_string(), Tone::Dim),
    ]
}

fn plan_diff(
    ctx: &Context,
    plan: &str,
    resource: Option<&str>,
    path: Option<String>,
    (stat, remainder): (bool, bool),
) -> Result<Report, CliError> {
    // The human formats draw only the table and the text diff, which show neither decisions
    // nor review ids; the structured ones carry them in the data.
    let structured = ctx.format.is_structured();
    let view = ctx.client()?.plan_diff(api::DiffQuery {
        plan: plan.to_string(),
        resource: resource.map(str::to_string),
        path,
        hunks: !stat,
        remainder,
        marks: structured,
        // json prints each file's JSON text as the engine (or the server) wrote it, on the
        // threads that diffed the files; yaml is written from the typed files.
        encoded: ctx.format == crate::output::Format::Json,
        // The human formats show each file's unified text, made where the file was diffed.
        unified: !structured,
    })?;
    match view {
        api::DiffView::Applied(applied) => applied_diff(ctx, applied, resource, (!stat, remainder)),
        api::DiffView::Sandboxes(sandboxes) => sandboxes_diff(ctx, sandboxes, resource),
    }
}

/// `NOT_FOUND` when `resource` was asked for and nothing answers to it among `names`.
fn no_such_resource(
    resource: Option<&str>,
    found: bool,
    (message, listed): (&str, &str),
    names: &[String],
) -> Result<(), CliError> {
    match resource {
        Some(name) if !found => Err(CliError::new("NOT_FOUND", format!("{message} `{name}`"))
            .hint(format!("{listed}: {}", names.join(", ")))),
        _ => Ok(()),
    }
}

/// `plan diff` of the plan's live sandboxes.
fn sandboxes_diff(
    ctx: &Context,
    view: api::SandboxesDiff,
    resource: Option<&str>,
) -> Result<Report, CliError> {
    no_such_resource(
        resource,
        !view.resources.is_empty(),
        ("the plan has no sandbox for", "sandboxes"),
        &view.names,
    )?;
    let structured = ctx.format.is_structured();
    let mut text = String::new();
    let mut rows = Vec::new();
    let mut warnings = Vec::new();
    let mut stats = api::DiffStats::default();
    for r in &view.resources {
        stats += r.stats;
        for s in &r.secrets {
            warnings.extend(secret_flags(&s.path, &s.lines));
        }
        for (i, f) in r.files.iter().enumerate() {
            warnings.extend(secret_flags(&f.path, &f.secrets));
            if !structured {
                rows.push(file_row(f, &r.resource_name));
                match r.texts.get(i) {
                    Some(t) => text.push_str(t),
                    None => text.push_str(&api::unified_diff(std::slice::from_ref(f))),
                }
            }
        }
    }
    let status = if view.names.is_empty() && view.released {
        "The plan's sandboxes were released or removed; their work trees are gone".to_string()
    } else if view.names.is_empty() {
        "The plan has no sandbox yet: nothing has changed".to_string()
    } else {
        format!(
            "{} file(s) changed, +{} -{}",
            stats.files_changed, stats.additions, stats.deletions
        )
    };
    let data = DiffData {
        plan_id: view.plan_id.to_string(),
        stats,
        resources: if structured {
            view.resources.into_iter().map(ResourceData).collect()
        } else {
            Vec::new()
        },
    };
    let mut report = Report::ok("plan diff", serde_json::Value::Null, status);
    for w in warnings {
        report = report.message(Level::Warn, w);
    }
    if structured {
        report.payload = Some(Payload::new(data));
    } else {
        report.data = serde_json::to_value(&data)
            .map_err(|e| CliError::new("INTERNAL", format!("serializing the diff: {e}")))?;
    }
    Ok(diff_report(report, rows, text))
}

/// What `plan diff` says of each line of file `path` that holds a secret's value (shown
/// `[redacted]`, written as it is): Apply and export refuse it unless allowed
/// (docs/sandbox.md).
fn secret_flags(path: &str, secrets: &[api::SecretLine]) -> Vec<String> {
    secrets
        .iter()
        .map(|s| {
            let at = s
                .line
                .map_or_else(|| path.to_string(), |l| format!("{path}:{l}"));
            format!(
                "{at} contains the value of {}; `plan apply` and `plan export` refuse it unless given --allow-secrets",
                s.variable
            )
        })
        .collect()
}

/// `plan diff`'s data: `{plan_id, stats, resources: [{resource_name, strategy, base_commit,
/// stats, files}]}` (resources only in the structured formats).
#[derive(serde::Serialize)]
struct DiffData {
    plan_id: String,
    stats: api::DiffStats,
    resources: Vec<ResourceData>,
}

/// One resource of [`DiffData`]: `{resource_name, strategy, base_commit, stats, files}`, the
/// files typed or, when the engine encoded them ([`api::DiffQuery::encoded`]), their JSON text
/// as it came (re-indented by the json writer, so the bytes are those of the typed files).
struct ResourceData(api::ResourceDiff);

impl serde::Serialize for ResourceData {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeStruct as _;
        let r = &self.0;
        let mut s = serializer.serialize_struct("ResourceDiff", 5)?;
        s.serialize_field("resource_name", &r.resource_name)?;
        s.serialize_field("strategy", &r.strategy)?;
        s.serialize_field("base_commit", &r.base_commit)?;
        s.serialize_field("stats", &r.stats)?;
        if r.files_json.is_empty() {
            s.serialize_field("files", &r.files)?;
        } else {
            s.serialize_field("files", &r.files_json)?;
        }
        s.end()
    }
}

/// The Changed Files table and, when there is any, the unified diff `text`.
fn diff_report(report: Report, rows: Vec<Vec<Cell>>, text: String) -> Report {
    let report = report.with(Element::Table {
        title: "Changed Files".into(),
        columns: vec![
            Column::left("St"),
            Column::left("Path"),
            Column::right("Added"),
            Column::right("Removed"),
            Column::left("Resource"),
        ],
        rows,
        empty: "No changes.".into(),
    });
    if !text.is_empty() {
        report.with(Element::List {
            title: "Diff".into(),
            items: vec![text],
        })
    } else {
        report
    }
}

/// The short form of a commit id (12 hex digits).
fn short_commit(c: &str) -> &str {
    &c[..c.len().min(12)]
}

/// `plan diff` of an applied plan: what Apply wrote, from stored records (the applied
/// commit, else the sandbox's history, else the journal), marked applied with its commits.
fn applied_diff(
    ctx: &Context,
    view: api::AppliedDiff,
    resource: Option<&str>,
    (hunks, remainder): (bool, bool),
) -> Result<Report, CliError> {
    no_such_resource(
        resource,
        !view.resources.is_empty(),
        ("the plan applied nothing to", "resources it applied to"),
        &view.names,
    )?;
    let chosen = &view.resources;
    let mut rows = Vec::new();
    let mut all_files = Vec::new();
    let mut resources = Vec::new();
    for a in chosen {
        rows.extend(a.files.iter().map(|f| file_row(f, &a.resource_name)));
        resources.push(json!({
            "resource_name": a.resource_name,
            "applied": true,
            "commit": a.commit,
            "source": a.source,
            "stats": api::diff_stats(&a.files),
            "files": a.files,
        }));
        all_files.extend(a.files.iter().cloned());
    }
    let stats = api::diff_stats(&all_files);
    let commits: Vec<String> = chosen
        .iter()
        .filter_map(|a| {
            a.commit
                .as_deref()
                .map(|c| format!("{} on {}", short_commit(c), a.resource_name))
        })
        .collect();
    let left_out = view.left_out;
    let plan = view.plan_id;
    let data = json!({
        "plan_id": plan.to_string(),
        "applied": true,
        "stats": stats,
        "resources": resources,
        "left_out": left_out,
    });
    let status = format!(
        "Applied{}: {} file(s) changed, +{} -{}",
        if commits.is_empty() {
            String::new()
        } else {
            format!(" in commit {}", commits.join(", "))
        },
        stats.files_changed,
        stats.additions,
        stats.deletions
    );
    let mut report = Report::ok("plan diff", data, status);
    if let Some(items) = left_out.as_array().filter(|l| !l.is_empty()) {
        let names: Vec<String> = items
            .iter()
            .map(|l| {
                let path = l["path"].as_str().unwrap_or_default();
                match l["why"].as_str() {
                    Some(why) => format!("{path} ({why})"),
                    None => path.to_string(),
                }
            })
            .collect();
        report = report.message(
            Level::Warn,
            if view.sandbox_released {
                format!(
                    "Apply left out {}; the remainder is gone: the plan's sandbox was released (plan cleanup)",
                    names.join(", ")
                )
            } else {
                format!(
                    "Apply left out {}; what it left in the sandbox: {}",
                    names.join(", "),
                    ctx.suggest(&format!("plan diff --remainder {plan}"))
                )
            },
        );
    } else if remainder && view.sandbox_released {
        report = report.message(
            Level::Warn,
            "the remainder is gone: the plan's sandbox was released (plan cleanup); shown is what Apply committed",
        );
    }
    if chosen
        .iter()
        .any(|a| a.source == api::AppliedSource::Journal)
    {
        report = report.message(
            Level::Info,
            "some files are listed from the apply journal only: their sandbox history is gone, so there are no line counts or hunks",
        );
    }
    let text = if hunks {
        api::unified_diff(&all_files)
    } else {
        String::new()
    };
    Ok(diff_report(report, rows, text))
}

fn artifacts(ctx: &Context, plan: &str) -> Result<Report, CliError> {
    let view = ctx.client()?.artifacts(plan)?;
    let applied = view.applied;
    let commits: Vec<String> = view
        .commits
        .iter()
        .map(|c| format!("{} on {}", short_commit(&c.commit), c.resource_name))
        .collect();
    let mut rows = Vec::new();
    let mut files: Vec<serde_json::Value> = Vec::new();
    for a in &view.files {
        let f = &a.file;
        rows.push(vec![
            Cell::new(f.status.letter(), Tone::Normal),
            Cell::from(f.path.clone()),
            Cell::from(
                f.new_size
                    .map(|s| s.to_string())
                    .unwrap_or_else(|| "-".into()),
            ),
            Cell::from(
                a.tool_calls
                    .iter()
                    .map(|s| format!("#{s}"))
                    .collect::<Vec<_>>()
                    .join(" "),
            ),
            Cell::new(a.resource_name.clone(), Tone::Dim),
        ]);
        files.push(json!({
            "resource_name": a.resource_name,
            "path": f.path, "old_path": f.old_path, "status": f.status,
            "binary": f.binary, "size": f.new_size, "tool_calls": a.tool_calls,
        }));
    }
    let n = files.len();
    let left_out: Vec<String> = view
        .left_out
        .as_array()
        .into_iter()
        .flatten()
        .map(|l| {
            let field = |k: &str| l[k].as_str().unwrap_or_default().to_string();
            format!("{} {} ({})", field("path"), field("what"), field("why"))
        })
        .collect();
    let data = json!({
        "plan_id": view.plan_id.to_string(),
        "applied": applied,
        "commits": commits,
        "files": files,
        "left_out": view.left_out,
        "changes": view.changes,
        "tool_calls": view.tool_calls,
    });
    let status = match (applied, commits.is_empty()) {
        (true, false) => format!(
            "{n} changed file(s), applied in commit {}",
            commits.join(", ")
        ),
        (true, true) => format!("{n} changed file(s), applied"),
        _ => format!("{n} changed file(s)"),
    };
    let mut report = Report::ok("plan artifacts", data, status).with(Element::Table {
        title: "Artifacts".into(),
        columns: vec![
            Column::left("St"),
            Column::left("Path"),
            Column::right("Size"),
            Column::left("Tool Calls"),
            Column::left("Resource"),
        ],
        rows,
        empty: "No files changed.".into(),
    });
    if !left_out.is_empty() {
        report = report
            .message(
                Level::Warn,
                format!(
                    "Apply left out {} item(s); while the plan's sandbox is kept, {} shows them",
                    left_out.len(),
                    ctx.suggest(&format!("plan diff --remainder {}", view.plan_id))
                ),
            )
            .with(Element::List {
                title: "Left Out".into(),
                items: left_out,
            });
    }
    Ok(report)
}

fn checkpoints(ctx: &Context, plan: &str, all: bool) -> Result<Report, CliError> {
    let api::CheckpointsView {
        plan_id,
        checkpoints: list,
    } = ctx.client()?.checkpoints(plan, all)?;
    let rows = list
        .iter()
        .map(|c| {
            let mut row = vec![
                Cell::new(c.checkpoint_id.to_string(), Tone::Id),
                Cell::from(c.seq.to_string()),
                Cell::from(c.step.clone().unwrap_or_else(|| "-".into())),
                Cell::from(c.label.clone()),
                Cell::from(c.decision_id.clone().unwrap_or_else(|| "-".into())),
                Cell::from(c.created_at.strftime("%Y-%m-%d %H:%M:%S").to_string()),
                Cell::from(c.files_changed.to_string()),
            ];
            // Only `--all` lists discarded checkpoints, so only it needs the column.
            if all {
                row.push(Cell::new(
                    if c.discarded_at.is_some() {
                        "discarded"
                    } else {
                        "kept"
                    },
                    Tone::Dim,
                ));
            }
            row
        })
        .collect();
    let n = list.len();
    let data = json!({"plan_id": plan_id.to_string(), "checkpoints": list});
    let mut columns = vec![
        Column::left("ID"),
        Column::right("#"),
        Column::left("Step"),
        Column::left("Label"),
        Column::left("Decision"),
        Column::left("Time"),
        Column::right("Files"),
    ];
    if all {
        columns.push(Column::left("State"));
    }
    Ok(
        Report::ok("plan checkpoints", data, format!("{n} checkpoint(s)")).with(Element::Table {
            title: "Checkpoints".into(),
            columns,
            rows,
            empty: "No checkpoints yet.".into(),
        }),
    )
}

fn rollback(ctx: &Context, plan: &str, cp: &str, yes: bool) -> Result<Report, CliError> {
    let client = ctx.client()?;
    let plan_id = client.resolve_plan(plan)?;
    let cp_id = client
        .checkpoint(&plan_id.to_string(), cp)
        .map_err(|e| CliError::from(e).hint(ctx.suggest(&format!("plan checkpoints {plan_id}"))))?
        .checkpoint_id;
    let question = format!("Roll plan {plan_id} back to {cp_id}, discarding later work?");
    let answer_with = ctx.suggest(&format!("plan rollback --yes {plan_id} {cp_id}"));
    confirm(&question, yes, &ctx.terminal, &answer_with)?;
    let rolled = match client.run(api::Op::Rollback {
        plan: plan_id,
        checkpoint: cp_id.clone(),
    })? {
        api::Outcome::RolledBack(r) => *r,
        other => return Err(super::plan::run::unexpected(&other)),
    };
    let outcome = &rolled.outcome;
    let steps_reset = rolled.steps_to_run_again;
    let data = json!({
        "plan_id": plan_id.to_string(),
        "checkpoint_id": outcome.checkpoint.checkpoint_id,
        "resources": outcome.resources,
        "discarded_checkpoints": outcome.discarded_checkpoints,
        "discarded_tool_calls": outcome.discarded_tool_calls,
        "steps_to_run_again": steps_reset,
        "withdrawn_approvals": rolled.withdrawn_approvals,
        "phase": outcome.status.phase,
        "state": outcome.status.state,
    });
    Ok(
        Report::ok("plan rollback", data, format!("Rolled back to {cp_id}"))
            .with(Element::panel(
                "Rollback",
                [
                    ("Plan", Cell::new(plan_id.to_string(), Tone::Id)),
                    ("Checkpoint", Cell::new(cp_id.to_string(), Tone::Id)),
                    ("Resources", outcome.resources.join(", ").into()),
                    (
                        "Discarded Checkpoints",
                        outcome.discarded_checkpoints.to_string().into(),
                    ),
                    (
                        "Discarded Tool Calls",
                        outcome.discarded_tool_calls.to_string().into(),
                    ),
                    (
                        "Plan Status",
                        format!("{} / {}", outcome.status.phase, outcome.status.state).into(),
                    ),
                    (
                        "Withdrawn Approvals",
                        if rolled.withdrawn_approvals.is_empty() {
                            "none".into()
                        } else {
                            rolled.withdrawn_approvals.join(", ").into()
                        },
                    ),
                ],
            ))
            .with(Element::List {
                title: "Next Steps".into(),
                items: rollback_next(ctx, plan_id, &outcome.status),
            }),
    )
}

/// What follows a rollback: a plan back at execute/queued runs the discarded steps again
/// with `plan execute`; the sandbox as it now is shows with `plan diff`.
fn rollback_next(
    ctx: &Context,
    plan: cleveragents_engine::domain::Id,
    status: &cleveragents_engine::domain::PlanStatus,
) -> Vec<String> {
    use cleveragents_engine::domain::{Phase, ProcessingState};
    let mut next = Vec::new();
    if status.phase == Phase::Execute && status.state == ProcessingState::Queued {
        next.push(ctx.suggest(&format!("plan execute {plan}")));
    }
    next.push(ctx.suggest(&format!("plan diff {plan}")));
    next
}

fn export_cmd(
    ctx: &Context,
    plan: &str,
    (branch, patch): (Option<String>, Option<PathBuf>),
    resource: Option<&str>,
    force: bool,
    allow_secrets: bool,
) -> Result<Report, CliError> {
    let client = ctx.client()?;
    let plan = client.resolve_plan(plan)?;
    if let Some(b) = &branch {
        super::refuse_placeholder("--branch", b)?;
    }
    let target = match (branch, patch) {
        (Some(b), _) => api::ExportTarget::Branch(b),
        (None, Some(file)) => api::ExportTarget::Patch(std::path::absolute(&file).unwrap_or(file)),
        (None, None) => {
            return Err(CliError::invalid_input(
                "give --branch <branch> or --patch <file>",
            ));
        }
    };
    let request = api::ExportRequest {
        plan,
        resource: resource.map(str::to_string),
        target,
        force,
        allow_secrets,
    };
    let exported = match client.run(api::Op::Export(Box::new(request)))? {
        api::Outcome::Exported(e) => *e,
        other => return Err(super::plan::run::unexpected(&other)),
    };
    let outcome = &exported.outcome;
    let target = outcome
        .branch
        .clone()
        .map(|b| format!("branch {b}"))
        .or_else(|| outcome.patch.as_ref().map(|p| p.display().to_string()))
        .unwrap_or_default();
    let mut report = Report::ok(
        "plan export",
        &exported,
        format!("Exported {} file(s) to {target}", outcome.files_changed),
    )
    .with(Element::panel(
        "Export",
        [
            ("Resource", outcome.resource_name.clone()),
            ("Target", target.clone()),
            ("Base", outcome.base_commit.clone()),
            ("Files", outcome.files_changed.to_string()),
        ],
    ));
    if !exported.left_out.is_empty() {
        report = report
            .message(
                Level::Info,
                format!(
                    "the review marks items: exported what Apply would write, leaving out {} item(s)",
                    exported.left_out.len()
                ),
            )
            .with(Element::List {
                title: "Left Out".into(),
                items: exported
                    .left_out
                    .iter()
                    .map(|l| format!("{} {} ({})", l.path, l.what, l.why))
                    .collect(),
            });
    }
    if let (Some(b), Some(repo)) = (&outcome.branch, &exported.repository) {
        let repo = repo.display().to_string();
        let repo = shell_words::quote(&repo).into_owned();
        report = report.message(
            Level::Info,
            format!(
                "review it with: git -C {repo} log -p {}",
                shell_words::quote(b)
            ),
        );
    }
    Ok(report)
}

fn cleanup(ctx: &Context, yes: bool) -> Result<Report, CliError> {
    // The database is opened (and created when missing) before asking, as the cleanup will.
    let client = ctx.client()?;
    client.last_seq()?;
    confirm(
        "Remove the sandboxes of cancelled and errored plans and release those of applied plans?",
        yes,
        &ctx.terminal,
        &ctx.suggest("plan cleanup --yes"),
    )?;
    let report = match client.run(api::Op::Cleanup)? {
        api::Outcome::CleanedUp(r) => *r,
        other => return Err(super::plan::run::unexpected(&other)),
    };
    let rows = report
        .sandboxes
        .iter()
        .map(|c| {
            vec![
                Cell::new(c.plan_id.short(), Tone::Id),
                Cell::from(c.resource_name.clone()),
                Cell::from(c.action.as_str()),
                Cell::from(c.reason.clone()),
            ]
        })
        .collect();
    let n = report.sandboxes.len() + report.orphans.len();
    let mut out = Report::ok(
        "plan cleanup",
        &report,
        format!("{n} sandbox(es) cleaned up"),
    )
    .with(Element::Table {
        title: "Sandboxes".into(),
        columns: vec![
            Column::left("Plan"),
            Column::left("Resource"),
            Column::left("Action"),
            Column::left("Reason"),
        ],
        rows,
        empty: "Nothing to clean up.".into(),
    });
    if !report.orphans.is_empty() {
        out = out.with(Element::List {
            title: "Orphaned Directories Removed".into(),
            items: report.orphans.clone(),
        });
    }
    Ok(out)
}

/// `plan shell`: runs `command` (or the user's shell) in the chosen sandbox's work tree, with
/// the sandbox held open (mounted, when it shares its base's checkout) until it exits. In the
/// structured formats the command's output goes to stderr, so stdout holds the report alone.
fn shell(
    ctx: &Context,
    plan: &str,
    resource: Option<&str>,
    command: &[String],
) -> Result<Report, CliError> {
    let open = ctx.registry_engine().open_sandbox(plan, resource)?;
    let (program, args) = match command.split_first() {
        Some((program, args)) => (program.clone(), args),
        None => (
            super::env_var("SHELL").unwrap_or_else(|| "/bin/sh".into()),
            &[][..],
        ),
    };
    let mut child = std::process::Command::new(&program);
    // git run in the shell reads the sandbox's own repository, as a step's does.
    child
        .args(args)
        .current_dir(open.work_dir())
        .env("GIT_DIR", open.git_dir())
        .env("GIT_WORK_TREE", open.work_dir());
    if ctx.format.is_structured() {
        child.stdout(std::io::stderr());
    }
    let status = child.status().map_err(|e| {
        CliError::new("INVALID_INPUT", format!("cannot run `{program}`: {e}"))
            .hint("name a program on the PATH after `--`, or set SHELL")
    })?;
    let code = status.code().unwrap_or(-1);
    let data = json!({
        "resource": open.resource,
        "work_dir": open.work_dir(),
        "shared_checkout": open.shared,
        "upper_dir": open.upper_dir(),
        "exit_code": code,
    });
    drop(open);
    if !command.is_empty() && code != 0 {
        return Err(CliError::new(
            "TOOL_FAILED",
            format!("`{program}` exited with status {code} in the sandbox"),
        ));
    }
    Ok(Report::ok(
        "plan shell",
        &data,
        format!("`{program}` exited with status {code}"),
    ))
}
