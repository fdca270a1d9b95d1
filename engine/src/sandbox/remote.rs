//! Repositories by URL (spec section 21, "where a plan runs"): a `git` resource is worked on
//! in a clone the engine keeps on its own host, `DATA_DIR/remotes/RESOURCE_ID`, brought to the
//! tip of the repository's branch at `plan use`; the clone is then a checkout like any other
//! for Strategize, Execute and Apply. Apply's commit lands on the branch in the repository
//! itself, only while the branch still points at the plan's base (compare and swap), and
//! `plan export --branch` creates its branch there.
//!
//! Git runs as the `git` program, so every transport and credential helper the host's git
//! knows works; it never prompts (`GIT_TERMINAL_PROMPT=0`).

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::domain::resource::Resource;
use crate::store::{Store, StoreError};

/// Where a `git` resource's clone lives.
pub fn clone_dir(data_dir: &Path, resource: &Resource) -> PathBuf {
    crate::paths::Paths::at(data_dir, PathBuf::new())
        .remote_clone(&resource.resource_id.to_string())
}

/// The URL of `resource_name` when it is a repository by URL (a `git` resource).
///
/// # Errors
/// The database failed.
pub fn url_of(store: &Store, resource_name: &str) -> Result<Option<String>, StoreError> {
    Ok(store
        .resource_by_name(resource_name)?
        .filter(|r| r.handler_type() == "git")
        .and_then(|r| r.prop("url").map(str::to_string)))
}

fn git(dir: Option<&Path>, args: &[&str]) -> Result<String, String> {
    let mut cmd = Command::new("git");
    if let Some(dir) = dir {
        cmd.arg("-C").arg(dir);
    }
    let out = cmd
        .args(args)
        .env("GIT_TERMINAL_PROMPT", "0")
        .output()
        .map_err(|e| format!("cannot run git: {e}"))?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
    } else {
        Err(format!(
            "git {} failed: {}",
            args.first().copied().unwrap_or_default(),
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

/// Brings `resource`'s clone to the tip of the repository's default branch (cloning it the
/// first time): the clone's path, the tip's commit and the branch.
///
/// # Errors
/// What git said when the repository cannot be reached or has no commit.
pub fn prepare(data_dir: &Path, resource: &Resource) -> Result<(PathBuf, String, String), String> {
    let url = resource
        .prop("url")
        .ok_or_else(|| format!("resource {} has no url", resource.name))?;
    let dir = clone_dir(data_dir, resource);
    if !dir.join(".git").is_dir() {
        let parent = dir.parent().unwrap_or(data_dir);
        std::fs::create_dir_all(parent)
            .map_err(|e| format!("cannot create {}: {e}", parent.display()))?;
        let _ = std::fs::remove_dir_all(&dir);
        let target = dir.to_string_lossy().into_owned();
        git(None, &["clone", "--quiet", "--no-tags", url, &target])?;
    } else {
        git(Some(&dir), &["remote", "set-url", "origin", url])?;
        git(Some(&dir), &["fetch", "--quiet", "--prune", "origin"])?;
        git(Some(&dir), &["remote", "set-head", "origin", "--auto"])?;
    }
    let branch = git(Some(&dir), &["symbolic-ref", "--short", "refs/remotes/origin/HEAD"])
        .map_err(|_| format!("{url} has no default branch (is it empty?)"))?;
    let branch = branch
        .strip_prefix("origin/")
        .unwrap_or(&branch)
        .to_string();
    let upstream = format!("origin/{branch}");
    git(Some(&dir), &["checkout", "--quiet", "-B", &branch, &upstream])?;
    git(Some(&dir), &["reset", "--quiet", "--hard", &upstream])?;
    let tip = git(Some(&dir), &["rev-parse", "HEAD"])?;
    Ok((dir, tip, branch))
}

/// The branch the repository at `url` has checked out as its HEAD (its default branch).
///
/// # Errors
/// What git said when the repository cannot be reached or has no default branch.
pub fn default_branch(url: &str) -> Result<String, String> {
    let listed = git(None, &["ls-remote", "--symref", url, "HEAD"])?;
    listed
        .lines()
        .find_map(|l| l.strip_prefix("ref: refs/heads/"))
        .and_then(|l| l.split_whitespace().next())
        .map(str::to_string)
        .ok_or_else(|| "it has no default branch (is it empty?)".to_string())
}

/// The commit `branch` points at in the repository at `url` (`None`: no such branch).
///
/// # Errors
/// What git said when the repository cannot be reached.
pub fn tip(url: &str, branch: &str) -> Result<Option<String>, String> {
    let listed = git(
        None,
        &["ls-remote", "--heads", url, &format!("refs/heads/{branch}")],
    )?;
    Ok(listed
        .split_whitespace()
        .next()
        .filter(|s| !s.is_empty())
        .map(str::to_string))
}

/// Refuses, naming the new tip, when `branch` of `url` no longer points at `base`.
///
/// # Errors
/// The sentence to show: the branch moved, is gone, or the repository cannot be reached.
pub fn check_unmoved(name: &str, url: &str, branch: &str, base: &str) -> Result<(), String> {
    match tip(url, branch) {
        Ok(Some(t)) if t == base => Ok(()),
        Ok(Some(t)) => Err(format!(
            "{name}: branch {branch} of {url} moved to {t} since the plan's base {base}; nothing was applied. Make a new plan from the new tip, or `plan export --branch NAME` to land this change on a branch of its own"
        )),
        Ok(None) => Err(format!(
            "{name}: branch {branch} no longer exists in {url}; nothing was applied"
        )),
        Err(e) => Err(format!("{name}: cannot reach {url}: {e}; nothing was applied")),
    }
}

/// Sets `branch` of `url` to `commit`, only while it still points at `expected` (`None`: the
/// branch must not exist yet).
///
/// # Errors
/// What git said: the branch moved meanwhile, or the push failed.
pub fn push(
    clone: &Path,
    url: &str,
    branch: &str,
    commit: &str,
    expected: Option<&str>,
) -> Result<(), String> {
    let refname = format!("refs/heads/{branch}");
    let lease = format!("--force-with-lease={refname}:{}", expected.unwrap_or(""));
    let spec = format!("{commit}:{refname}");
    git(Some(clone), &["push", "--quiet", "--no-verify", &lease, url, &spec]).map(|_| ())
}

/// The commit `branch` of `url` points at now, for the lease of a push that replaces it
/// (`None`: it does not exist); an existing branch is refused unless `force`.
///
/// # Errors
/// The sentence to show: the branch exists, or the repository cannot be reached.
pub fn branch_to_replace(url: &str, branch: &str, force: bool) -> Result<Option<String>, String> {
    let existing = tip(url, branch)?;
    if existing.is_some() && !force {
        return Err(format!(
            "branch `{branch}` already exists in {url}; choose another name or pass --force"
        ));
    }
    Ok(existing)
}

/// Deletes `branch` from the engine's clone, where an earlier export left it: the repository
/// by URL, not the clone, says whether the branch exists.
pub fn forget_branch(clone: &Path, branch: &str) {
    let _ = git(Some(clone), &["branch", "--quiet", "-D", branch]);
}
