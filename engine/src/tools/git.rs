//! Git inspection tools (spec section 18 `git_operations`): `git_status`, `git_diff` and
//! `git_log`, bound to `git-checkout` resources only. Status and diff compare the sandbox's
//! current state with the plan's base commit (what the plan changed); the log is the base
//! commit's history, read from the user's objects through the sandbox's alternates.

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};

use super::{Builtin, Capability, Tool, ToolContext, ToolError, ToolGroup};
use crate::sandbox::checkpoint::snapshot;
use crate::sandbox::diff::{self, DiffRequest};

fn failed(e: impl std::fmt::Display) -> ToolError {
    ToolError::Failed(e.to_string())
}

fn changes(
    ctx: &ToolContext<'_>,
    path: Option<String>,
    hunks: bool,
) -> Result<(String, Vec<diff::FileDiff>), ToolError> {
    let repo = ctx.sandbox.repo().map_err(failed)?;
    let base = ctx.sandbox.base_commit().map_err(failed)?;
    let base_tree = repo
        .find_commit(base)
        .and_then(|c| c.tree())
        .map_err(failed)?
        .id();
    let now = snapshot(&repo).map_err(failed)?;
    let files = diff::trees(
        &repo,
        Some(base_tree),
        Some(now),
        &DiffRequest { path, hunks },
    )
    .map_err(failed)?;
    Ok((base.to_string(), files))
}

/// Arguments of `git_status` (none).
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct NoArgs {}

fn git_status(ctx: &mut ToolContext<'_>, _: NoArgs) -> Result<Value, ToolError> {
    let (base, files) = changes(ctx, None, false)?;
    let entries: Vec<Value> = files
        .iter()
        .map(|f| json!({"status": f.status, "code": f.status.letter(), "path": f.path, "old_path": f.old_path}))
        .collect();
    Ok(json!({"base_commit": base, "clean": entries.is_empty(), "files": entries}))
}

/// Arguments of `git_diff`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct GitDiff {
    /// Only this file or directory (relative to the resource root).
    #[serde(default)]
    pub path: Option<String>,
}

fn git_diff(ctx: &mut ToolContext<'_>, a: GitDiff) -> Result<Value, ToolError> {
    let path = a
        .path
        .as_deref()
        .map(|p| ctx.fs.check(p, true))
        .transpose()?
        .filter(|p| !p.is_root())
        .map(|p| p.as_str().to_string());
    let (base, files) = changes(ctx, path, true)?;
    let stats = diff::stats(&files);
    Ok(json!({"base_commit": base, "stats": stats, "diff": diff::unified(&files)}))
}

/// Arguments of `git_log`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct GitLog {
    /// Number of commits (default 10).
    #[serde(default = "ten")]
    #[schemars(range(min = 1, max = 1000))]
    pub count: usize,
}

fn ten() -> usize {
    10
}

fn git_log(ctx: &mut ToolContext<'_>, a: GitLog) -> Result<Value, ToolError> {
    let repo = ctx.sandbox.repo().map_err(failed)?;
    let base = ctx.sandbox.base_commit().map_err(failed)?;
    let mut walk = repo.revwalk().map_err(failed)?;
    walk.push(base).map_err(failed)?;
    walk.set_sorting(git2::Sort::TOPOLOGICAL | git2::Sort::TIME)
        .map_err(failed)?;
    let mut commits = Vec::new();
    for oid in walk.take(a.count) {
        let Ok(oid) = oid else { break };
        let Ok(c) = repo.find_commit(oid) else { break };
        let when = jiff::Timestamp::from_second(c.time().seconds())
            .map(|t| t.to_string())
            .unwrap_or_default();
        commits.push(json!({
            "id": oid.to_string(),
            "short_id": oid.to_string()[..10].to_string(),
            "author": c.author().name().unwrap_or(""),
            "email": c.author().email().unwrap_or(""),
            "time": when,
            "summary": c.summary().ok().flatten().unwrap_or(""),
        }));
    }
    Ok(json!({"base_commit": base.to_string(), "commits": commits}))
}

/// The git tools.
pub fn tools() -> Vec<Box<dyn Tool>> {
    use ToolGroup::GitOperations as G;
    vec![
        Box::new(Builtin::<NoArgs>::new(
            "git_status",
            "Files the plan has added, modified, deleted or renamed since its base commit",
            G,
            Capability::read_only,
            &[],
            git_status,
        )),
        Box::new(Builtin::<GitDiff>::new(
            "git_diff",
            "Unified diff of the plan's changes since its base commit",
            G,
            Capability::read_only,
            &["path"],
            git_diff,
        )),
        Box::new(Builtin::<GitLog>::new(
            "git_log",
            "History of the plan's base commit",
            G,
            Capability::read_only,
            &[],
            git_log,
        )),
    ]
}
