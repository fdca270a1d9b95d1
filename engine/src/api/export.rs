//! [`super::Op::Export`]: a plan's sandbox as a branch of the user's repository or as a patch
//! file (spec section 11), recorded on the plan as a `plan_exported` event.

use std::path::PathBuf;

use serde::Serialize;

use super::{ApiError, Engine};
use crate::domain::Id;
use crate::domain::event::{EventKind, PlanExported};
use crate::lifecycle::RunError;
use crate::review::partial::{self, ApplyRequest, LeftOut, Selection};
use crate::sandbox::export::{self, ExportOutcome};
use crate::sandbox::{Sandbox, plan_commit_message};

/// The note an exported branch's commit carries (Apply's commits say "Applied by ...").
const EXPORT_NOTE: &str =
    "Exported by CleverAgents with `plan export --branch` (not applied; git hooks were not run).";

/// Where [`super::Op::Export`] writes.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize, schemars::JsonSchema)]
pub enum ExportTarget {
    /// A new branch of the user's repository, by name.
    Branch(String),
    /// A patch file (an absolute path).
    Patch(PathBuf),
}

/// What [`super::Op::Export`] exports, and where.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize, schemars::JsonSchema)]
pub struct ExportRequest {
    /// The plan.
    pub plan: Id,
    /// The resource whose sandbox to export; may be left out when the plan has one sandbox.
    pub resource: Option<String>,
    /// The branch or the patch file.
    pub target: ExportTarget,
    /// Replace an existing branch or file.
    pub force: bool,
    /// Export a change that holds the value of a secret (`--allow-secrets`); refused otherwise.
    pub allow_secrets: bool,
}

/// What [`super::Op::Export`] did.
#[derive(Debug, Clone, Serialize, serde::Deserialize, schemars::JsonSchema)]
pub struct Exported {
    /// What was written.
    #[serde(flatten)]
    pub outcome: ExportOutcome,
    /// The review items left out, as Apply would leave them out (rejected, or not accepted
    /// while something is marked); empty when nothing is marked and the whole sandbox went.
    pub left_out: Vec<LeftOut>,
    /// The user's repository a branch was created in (`None` for a patch).
    #[serde(skip)]
    pub repository: Option<PathBuf>,
}

/// Why a plan's sandbox cannot be chosen (for export, or to open it).
#[derive(Debug, Clone, thiserror::Error)]
pub enum ExportError {
    /// The plan has no sandbox yet.
    #[error("the plan has no sandbox yet: no step has used a resource")]
    NoSandbox,
    /// No sandbox of the plan answers to the resource name given.
    #[error("the plan has no sandbox for `{name}`")]
    NoSandboxFor {
        /// The name given.
        name: String,
        /// The resources the plan has sandboxes for.
        available: Vec<String>,
    },
    /// The plan has several sandboxes and no resource was named.
    #[error("the plan has several sandboxes")]
    SeveralSandboxes {
        /// The resources the plan has sandboxes for.
        available: Vec<String>,
    },
}

/// Exports the chosen sandbox under its lock and records the `plan_exported` event.
pub(super) fn export(engine: &Engine, req: &ExportRequest) -> Result<Exported, ApiError> {
    // Expired and orphaned sandboxes go first, as for every read of a plan's sandboxes.
    let (mut store, plan) = super::plan_diff::open_swept(engine, &req.plan.to_string())?;
    let active = engine.sandboxes().active(&store, &plan.plan_id)?;
    let sb = choose(&active, req.resource.as_deref())?;
    let (tree, left_out) = reviewed_part(engine, &store, &plan, sb)?;
    let _lock = sb.lock()?;
    if !req.allow_secrets {
        refuse_secrets(sb, tree)?;
    }
    let message = plan_commit_message(&plan, EXPORT_NOTE);
    let remote = crate::sandbox::remote::url_of(&store, &sb.target.resource_name)?;
    let outcome = match &req.target {
        ExportTarget::Branch(b) => match &remote {
            Some(url) => to_remote_branch(sb, tree, url, b, &message, req.force)?,
            None => export::to_branch(sb, tree, b, &message, req.force)?,
        },
        ExportTarget::Patch(file) => export::to_patch(sb, tree, file, req.force)?,
    };
    let event = EventKind::PlanExported(PlanExported {
        resource: outcome.resource_name.clone(),
        branch: outcome.branch.clone(),
        patch: outcome.patch.as_ref().map(|p| p.display().to_string()),
        base_commit: outcome.base_commit.clone(),
        files_changed: outcome.files_changed,
    });
    store.record_event(&plan.plan_id, &event)?;
    let repository = outcome.branch.as_ref().map(|_| match &remote {
        Some(url) => PathBuf::from(url),
        None => sb.target.kind.source_path().to_path_buf(),
    });
    Ok(Exported {
        outcome,
        left_out,
        repository,
    })
}

/// A repository by URL: the branch is made in the engine's clone of it and created in the
/// repository itself (spec section 21).
fn to_remote_branch(
    sb: &Sandbox,
    tree: Option<git2::Oid>,
    url: &str,
    branch: &str,
    message: &str,
    force: bool,
) -> Result<ExportOutcome, ApiError> {
    let clone = sb.target.kind.source_path().to_path_buf();
    let refuse = |m: String| ApiError::from(crate::sandbox::SandboxError::InvalidTarget(m));
    // Checked before the commit is made, and the push replaces only what was seen here.
    let existing = crate::sandbox::remote::branch_to_replace(url, branch, force).map_err(refuse)?;
    crate::sandbox::remote::forget_branch(&clone, branch);
    let outcome = export::to_branch(sb, tree, branch, message, true)?;
    let commit = outcome.commit.clone().unwrap_or_default();
    crate::sandbox::remote::push(&clone, url, branch, &commit, existing.as_deref())
        .map_err(refuse)?;
    crate::sandbox::remote::forget_branch(&clone, branch);
    Ok(outcome)
}

/// Refuses an export of `tree` (the work tree when `None`) that holds the value of a secret,
/// as Apply does (docs/sandbox.md "Secrets in a change"). The caller holds the sandbox lock.
fn refuse_secrets(sb: &Sandbox, tree: Option<git2::Oid>) -> Result<(), ApiError> {
    let repo = sb.repo()?;
    let base = repo
        .find_commit(sb.base_commit()?)
        .map_err(crate::sandbox::SandboxError::git("reading the base commit"))?
        .tree_id();
    let tree = match tree {
        Some(t) => t,
        None => crate::sandbox::checkpoint::snapshot(&repo)?,
    };
    let found = crate::redact::find_in_diff(&repo, base, tree)
        .map_err(crate::sandbox::SandboxError::git("reading the change"))?;
    match found {
        Some((path, var)) => Err(RunError::Invalid(format!(
            "{path} in {} contains the value of {var}; remove the key from the file (or correct the step that wrote it) and export again, or export it as it is with `plan export --allow-secrets`",
            sb.record.resource_name
        ))
        .into()),
        None => Ok(()),
    }
}

/// What Apply would write of `sb` (docs/review.md): `None` (the whole sandbox) while no review
/// item is marked, otherwise the accepted part's tree and the items it leaves out.
fn reviewed_part(
    engine: &Engine,
    store: &crate::store::Store,
    plan: &crate::domain::Plan,
    sb: &Sandbox,
) -> Result<(Option<git2::Oid>, Vec<LeftOut>), ApiError> {
    let trees = crate::lifecycle::trees::reviewed_trees_in(store, &plan.plan_id)?;
    let review = crate::review::load(store, &engine.sandboxes(), plan, &trees)?;
    if !review.any_marked() {
        return Ok((None, Vec::new()));
    }
    let resource = &sb.record.resource_name;
    let repo = sb.repo()?;
    let base = repo
        .find_commit(sb.base_commit()?)
        .map_err(crate::sandbox::SandboxError::git("reading the base commit"))?
        .tree_id();
    let reviewed = match trees.get(resource) {
        Some(t) => *t,
        None => crate::sandbox::merge::current_tree(sb)?,
    };
    let selection = Selection::new(&ApplyRequest::default())?;
    let part = partial::build(&repo, resource, base, reviewed, &review, &selection)?;
    Ok((Some(part.tree), part.left_out))
}

/// The one sandbox `resource` names, or the plan's only sandbox.
pub(super) fn choose<'a>(
    active: &'a [Sandbox],
    resource: Option<&str>,
) -> Result<&'a Sandbox, ExportError> {
    let available = || {
        active
            .iter()
            .map(|s| s.target.resource_name.clone())
            .collect()
    };
    let found: Vec<&Sandbox> = match resource {
        None => active.iter().collect(),
        Some(name) => active
            .iter()
            .filter(|s| s.target.answers_to(name))
            .collect(),
    };
    match (found.as_slice(), resource) {
        ([one], _) => Ok(one),
        ([], None) => Err(ExportError::NoSandbox),
        ([], Some(name)) => Err(ExportError::NoSandboxFor {
            name: name.to_string(),
            available: available(),
        }),
        (_, _) => Err(ExportError::SeveralSandboxes {
            available: available(),
        }),
    }
}
