//! Whether a checkout writes blobs byte for byte as they are stored: no attributes file
//! anywhere git reads one, `core.autocrlf` not `true`, links and file modes kept, no
//! submodule among the files. Apply then writes (and checks) files straight from their blobs
//! instead of through git's filters ([`super::staging`], [`super::clean`]).

use std::fs;
use std::path::PathBuf;

use git2::{FileMode, Oid, Repository};

use super::RunError;

fn git_err(what: &str) -> impl Fn(git2::Error) -> RunError + '_ {
    move |e| RunError::Sandbox(format!("{what}: {}", e.message()))
}

/// Whether a checkout would write each of `writes` byte for byte as stored, with its mode:
/// no `.gitattributes` in `tree`, no `info/attributes` in the repository, no user or system
/// attributes file, `core.autocrlf` not `true`, `core.symlinks` and `core.filemode` not off,
/// and no submodule among the files.
pub(super) fn checkout_writes_blobs_as_stored(
    user: &Repository,
    tree: &git2::Tree<'_>,
    writes: &[(&str, Oid, i32)],
) -> Result<bool, RunError> {
    if writes
        .iter()
        .any(|(_, _, mode)| *mode == i32::from(FileMode::Commit))
    {
        return Ok(false);
    }
    let config = user.config().map_err(git_err("reading the git config"))?;
    let off = |key: &str| config.get_bool(key).is_ok_and(|on| !on);
    let autocrlf = config
        .get_string("core.autocrlf")
        .is_ok_and(|v| !matches!(v.to_ascii_lowercase().as_str(), "false" | "input"));
    if autocrlf || off("core.symlinks") || off("core.filemode") {
        return Ok(false);
    }
    if attributes_files(user, &config)
        .iter()
        .any(|f| fs::symlink_metadata(f).is_ok())
    {
        return Ok(false);
    }
    Ok(!holds_attributes_file(tree)?)
}

/// The attributes files git reads besides those in the tree: the repository's
/// `info/attributes` (its common directory's too), the user's (`core.attributesFile`, else
/// the XDG default) and the system's.
fn attributes_files(user: &Repository, config: &git2::Config) -> Vec<PathBuf> {
    // A linked work tree reads the `info/attributes` of the repository it shares.
    let mut files = vec![
        user.path().join("info/attributes"),
        user.commondir().join("info/attributes"),
        PathBuf::from("/etc/gitattributes"),
    ];
    match config.get_path("core.attributesFile") {
        Ok(path) => files.push(path),
        Err(_) => {
            let xdg = std::env::var_os("XDG_CONFIG_HOME")
                .filter(|v| !v.is_empty())
                .map(PathBuf::from)
                .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".config")));
            if let Some(dir) = xdg {
                files.push(dir.join("git/attributes"));
            }
        }
    }
    files
}

/// Whether any directory of `tree` holds a `.gitattributes` entry.
fn holds_attributes_file(tree: &git2::Tree<'_>) -> Result<bool, RunError> {
    let mut found = false;
    tree.walk(git2::TreeWalkMode::PreOrder, |_, entry| {
        if entry.name_bytes() == b".gitattributes" {
            found = true;
            return git2::TreeWalkResult::Abort;
        }
        git2::TreeWalkResult::Ok
    })
    .or_else(|e| {
        if found {
            Ok(())
        } else {
            Err(e)
        }
    })
    .map_err(git_err("listing the new tree"))?;
    Ok(found)
}
