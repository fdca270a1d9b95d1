//! A plan's sandbox as the plan sees it, through `agents plan shell`, the way a person looks
//! at or edits it. A sandbox that shares its base's checkout has its work tree only inside
//! `agents` (docs/sandbox.md, "Shared checkouts"): its `work/` path is an empty directory
//! from the test process, so tests never read it there.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Output;

use super::Env;

/// Runs `script` with `sh -c` in the work tree of `plan`'s sandbox (of `resource` when the
/// plan has several), `$1`.. being `args`: the process's output.
pub fn sh(env: &Env, plan: &str, resource: Option<&str>, script: &str, args: &[&str]) -> Output {
    let mut all = vec!["--format", "json", "plan", "shell", plan];
    if let Some(r) = resource {
        all.extend(["--resource", r]);
    }
    all.extend(["--", "sh", "-c", script, "sh"]);
    all.extend_from_slice(args);
    // A sandbox is opened on this machine only, even when the suite runs through a server.
    env.local_command(&all).output().expect("the binary runs")
}

/// [`sh`], which must succeed.
pub fn sh_ok(env: &Env, plan: &str, script: &str, args: &[&str]) {
    let out = sh(env, plan, None, script, args);
    assert!(out.status.success(), "{}", described(&out));
}

/// The file `path` in `plan`'s sandbox, `None` when it is not there. Fails the test when the
/// plan has no sandbox to open.
pub fn read(env: &Env, plan: &str, path: &str) -> Option<String> {
    read_of(env, plan, None, path).unwrap_or_else(|e| panic!("{e}"))
}

/// [`read`] in the sandbox of `resource` (any, when `None`); an error when no sandbox could be
/// opened (none made yet, released after Apply, removed).
pub fn read_of(
    env: &Env,
    plan: &str,
    resource: Option<&str>,
    path: &str,
) -> Result<Option<String>, String> {
    read_bytes(env, plan, resource, path)
        .map(|b| b.map(|b| String::from_utf8(b).expect("the file is UTF-8")))
}

/// The bytes of `path` in the sandbox, copied out by `plan shell` into this environment's
/// directory.
fn read_bytes(
    env: &Env,
    plan: &str,
    resource: Option<&str>,
    path: &str,
) -> Result<Option<Vec<u8>>, String> {
    let out_dir = tempfile::tempdir_in(env.root()).expect("a scratch directory");
    let copy = out_dir.path().join("file");
    let script = r#"if [ -e "$1" ]; then cp -- "$1" "$2"; else : > "$2.absent"; fi"#;
    let out = sh(
        env,
        plan,
        resource,
        script,
        &[path, &copy.display().to_string()],
    );
    if !out.status.success() {
        return Err(format!("`plan shell {plan}` failed: {}", described(&out)));
    }
    if absent(&copy) {
        return Ok(None);
    }
    Ok(Some(std::fs::read(&copy).expect("the copied file")))
}

fn absent(copy: &Path) -> bool {
    copy.with_file_name("file.absent").exists()
}

/// A copy of `plan`'s sandbox work tree, `.git` included, made by `plan shell`: the
/// directory holding it.
pub fn copy_out(env: &Env, plan: &str) -> tempfile::TempDir {
    let copy = tempfile::tempdir_in(env.root()).expect("a scratch directory");
    sh_ok(
        env,
        plan,
        r#"cp -a . "$1""#,
        &[&copy.path().display().to_string()],
    );
    copy
}

/// Every file of `plan`'s sandbox (path relative to its work tree -> bytes), `.git`
/// included when present.
pub fn files(env: &Env, plan: &str) -> BTreeMap<String, Vec<u8>> {
    files_under(copy_out(env, plan).path())
}

/// Every file under `dir` (path relative to it -> bytes).
pub fn files_under(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    let mut out = BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
            } else {
                let rel = p.strip_prefix(dir).unwrap().display().to_string();
                out.insert(rel, std::fs::read(&p).unwrap());
            }
        }
    }
    out
}

/// Writes `content` to `path` in `plan`'s sandbox, by hand.
pub fn write(env: &Env, plan: &str, path: &str, content: &str) {
    sh_ok(env, plan, r#"printf %s "$2" > "$1""#, &[path, content]);
}

fn described(out: &Output) -> String {
    format!(
        "exit {:?}\nstdout: {}\nstderr: {}",
        out.status.code(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}
