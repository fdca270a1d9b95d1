//! Apply is all or nothing and applies exactly what was reviewed (spec section 13,
//! `docs/apply.md`): each refusal or failure leaves the user's repository byte for byte as it
//! was (every file, mode and symbolic link, `.git/index`, HEAD, every ref, packed-refs, no lock
//! or journal left), and once the cause is gone `plan apply` applies exactly once.

use std::collections::BTreeMap;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::support::{Env, git, git_out, stdout};

/// Everything of a repository a user could see change.
#[derive(Debug, PartialEq, Eq)]
pub struct RepoState {
    files: BTreeMap<String, (String, u32, Vec<u8>)>,
    git: BTreeMap<String, Vec<u8>>,
    git_top: Vec<String>,
    refs: String,
}

fn walk(
    root: &Path,
    dir: &Path,
    skip_git: bool,
    out: &mut BTreeMap<String, (String, u32, Vec<u8>)>,
) {
    let mut entries: Vec<_> = std::fs::read_dir(dir).unwrap().flatten().collect();
    entries.sort_by_key(|e| e.file_name());
    for e in entries {
        let p = e.path();
        let rel = p.strip_prefix(root).unwrap().to_string_lossy().into_owned();
        if skip_git && rel == ".git" {
            continue;
        }
        let m = std::fs::symlink_metadata(&p).unwrap();
        if m.file_type().is_symlink() {
            let t = std::fs::read_link(&p).unwrap();
            out.insert(
                rel,
                ("link".into(), 0, t.into_os_string().into_encoded_bytes()),
            );
        } else if m.is_dir() {
            out.insert(rel, ("dir".into(), m.mode() & 0o7777, Vec::new()));
            walk(root, &p, skip_git, out);
        } else {
            out.insert(
                rel,
                ("file".into(), m.mode() & 0o7777, std::fs::read(&p).unwrap()),
            );
        }
    }
}

impl RepoState {
    /// Captures `repo` (a non-bare checkout with `.git` inside).
    pub fn capture(repo: &Path) -> Self {
        let mut files = BTreeMap::new();
        walk(repo, repo, true, &mut files);
        let g = repo.join(".git");
        let mut git = BTreeMap::new();
        for name in ["index", "HEAD", "packed-refs"] {
            if let Ok(b) = std::fs::read(g.join(name)) {
                git.insert(name.to_string(), b);
            }
        }
        let mut refs = BTreeMap::new();
        walk(&g, &g.join("refs"), false, &mut refs);
        for (k, v) in refs {
            git.insert(k, v.2);
        }
        let mut git_top: Vec<String> = std::fs::read_dir(&g)
            .unwrap()
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        git_top.sort();
        let out = Command::new("git")
            .args(["for-each-ref", "--format=%(refname) %(objectname)"])
            .current_dir(repo)
            .output()
            .unwrap();
        Self {
            files,
            git,
            git_top,
            refs: String::from_utf8_lossy(&out.stdout).into_owned(),
        }
    }
}

/// Asserts two states are equal, naming the first difference.
pub fn assert_same(before: &RepoState, after: &RepoState) {
    for (k, v) in &before.files {
        assert_eq!(after.files.get(k), Some(v), "work tree entry {k} differs");
    }
    for k in after.files.keys() {
        assert!(before.files.contains_key(k), "work tree entry {k} appeared");
    }
    assert_eq!(
        before.git, after.git,
        ".git index/HEAD/refs/packed-refs differ"
    );
    assert_eq!(before.git_top, after.git_top, "entries of .git differ");
    assert_eq!(before.refs, after.refs, "refs differ");
}

/// A repository with the given files committed on `main`.
pub fn repo_with(parent: &Path, name: &str, files: &[(&str, &str)]) -> PathBuf {
    let dir = parent.join(name);
    std::fs::create_dir_all(&dir).unwrap();
    git(&dir, &["init", "-q"]);
    for (p, c) in files {
        let at = dir.join(p);
        std::fs::create_dir_all(at.parent().unwrap()).unwrap();
        std::fs::write(at, c).unwrap();
    }
    git(&dir, &["add", "-A"]);
    git(&dir, &["commit", "-q", "-m", "base"]);
    dir
}

/// Registers `repos` as one project `app`, creates an action running `steps` (shell) and
/// starts a plan under `trusted`: it stops at the apply gate. Returns the plan id.
pub fn plan_at_apply_gate(env: &Env, repos: &[&Path], steps: &[&str]) -> String {
    let doc = use_to_apply_gate(env, repos, steps);
    doc["data"]["plan_id"].as_str().unwrap().to_string()
}

/// As [`plan_at_apply_gate`], returning what `plan use` printed (json).
pub fn use_to_apply_gate(env: &Env, repos: &[&Path], steps: &[&str]) -> serde_json::Value {
    let (doc, code) = use_action(env, repos, steps);
    assert_eq!(code, 3, "stops at the apply gate: {doc:#}");
    doc
}

/// Registers `repos` as project `app`, creates the action running `steps` and runs `plan use`
/// under `trusted`: what it printed (json) and its exit code.
pub fn use_action(env: &Env, repos: &[&Path], steps: &[&str]) -> (serde_json::Value, i32) {
    let mut project = vec!["project", "create"];
    let names: Vec<String> = (0..repos.len()).map(|i| format!("local/r{i}")).collect();
    for (i, r) in repos.iter().enumerate() {
        let (doc, code) = env.json(&[
            "resource",
            "add",
            "git-checkout",
            &names[i],
            "--path",
            r.to_str().unwrap(),
        ]);
        assert_eq!(code, 0, "{doc:#}");
    }
    for n in &names {
        project.extend(["--resource", n.as_str()]);
    }
    project.push("app");
    let (doc, code) = env.json(&project);
    assert_eq!(code, 0, "{doc:#}");
    script_action(env, steps);
    use_script_action(env, "app")
}

/// Creates the action `local/change`, whose executor runs `steps` (shell commands; `@RESOURCE:
/// COMMAND` runs COMMAND in that resource of a project of several) without a model.
pub fn script_action(env: &Env, steps: &[&str]) {
    let mut yaml = String::from(
        "name: local/change\ndefinition-of-done: the change is made\nstrategy-actor: builtin/checklist-strategist\nexecution-actor: builtin/script-executor\nscript:\n",
    );
    for (i, s) in steps.iter().enumerate() {
        match s.strip_prefix('@').and_then(|r| r.split_once(": ")) {
            Some((resource, cmd)) => yaml.push_str(&format!(
                "  - name: s{i}\n    tool: shell_execute\n    args: {}\n",
                serde_json::json!({"command": cmd, "cwd": format!("path://{}/", resource.rsplit('/').next().unwrap())})
            )),
            None => yaml.push_str(&format!("  - name: s{i}\n    run: {}\n", serde_json::json!(s))),
        }
    }
    let file = env.root().join("action.yaml");
    std::fs::write(&file, yaml).unwrap();
    let (doc, code) = env.json(&[
        "action",
        "create",
        "--available",
        "--config",
        file.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{doc:#}");
}

/// `plan use local/change PROJECT` under `trusted`: what it printed (json) and its exit code.
pub fn use_script_action(env: &Env, project: &str) -> (serde_json::Value, i32) {
    env.json(&[
        "plan",
        "use",
        "local/change",
        project,
        "--automation-profile",
        "trusted",
    ])
}

/// `plan apply --yes`, expected to be refused or to fail: returns the error message.
fn apply_fails(env: &Env, plan: &str) -> String {
    let (doc, code) = env.json(&["plan", "apply", "--yes", plan]);
    assert_ne!(code, 0, "apply must not succeed: {doc:#}");
    let (st, _) = env.json(&["plan", "status", plan]);
    assert_eq!(
        (st["data"]["phase"].as_str(), st["data"]["state"].as_str()),
        (Some("apply"), Some("errored")),
        "{st:#}"
    );
    doc["error"]["message"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

/// `plan apply --yes` succeeds with exactly one new commit on `before`, and a clean status.
fn applies_once(env: &Env, plan: &str, repo: &Path, before: &str) {
    let (doc, code) = env.json(&["plan", "apply", "--yes", plan]);
    assert_eq!(code, 0, "{doc:#}");
    assert_eq!(
        git_out(repo, &["rev-list", "--count", &format!("{before}..HEAD")]).trim(),
        "1"
    );
    assert_eq!(git_out(repo, &["rev-parse", "HEAD~1"]).trim(), before);
    assert_eq!(
        git_out(repo, &["status", "--porcelain"]),
        "",
        "clean after apply"
    );
    let (doc, code) = env.json(&["plan", "apply", "--yes", plan]);
    assert_ne!(code, 0, "a second apply is refused: {doc:#}");
    assert_eq!(
        git_out(repo, &["rev-list", "--count", &format!("{before}..HEAD")]).trim(),
        "1"
    );
}

fn head(repo: &Path) -> String {
    git_out(repo, &["rev-parse", "HEAD"]).trim().to_string()
}

#[test]
fn a_stale_index_lock_refuses_apply_and_leaves_the_repository_byte_identical() {
    let env = Env::new();
    let repo = repo_with(env.root(), "repo", &[("a.txt", "one\n")]);
    let plan = plan_at_apply_gate(&env, &[&repo], &["echo two > a.txt && echo new > b.txt"]);
    std::fs::write(repo.join(".git/index.lock"), b"").unwrap();
    let before = RepoState::capture(&repo);
    let message = apply_fails(&env, &plan);
    assert!(message.contains("index.lock"), "{message}");
    assert!(message.contains("if no git process runs"), "{message}");
    assert_same(&before, &RepoState::capture(&repo));
    std::fs::remove_file(repo.join(".git/index.lock")).unwrap();
    let base = head(&repo);
    applies_once(&env, &plan, &repo, &base);
    assert_eq!(
        std::fs::read_to_string(repo.join("a.txt")).unwrap(),
        "two\n"
    );
    assert_eq!(
        std::fs::read_to_string(repo.join("b.txt")).unwrap(),
        "new\n"
    );
}

#[test]
fn an_untracked_symlink_on_a_path_prefix_is_refused_and_nothing_is_written_through_it() {
    let env = Env::new();
    let repo = repo_with(env.root(), "repo", &[("a.txt", "one\n")]);
    let plan = plan_at_apply_gate(
        &env,
        &[&repo],
        &["mkdir -p vendor/lib && echo x > vendor/lib/x.txt"],
    );
    let elsewhere = env.root().join("elsewhere");
    std::fs::create_dir_all(&elsewhere).unwrap();
    std::os::unix::fs::symlink(&elsewhere, repo.join("vendor")).unwrap();
    std::fs::write(repo.join(".git/info/exclude"), "vendor\n").unwrap();
    let before = RepoState::capture(&repo);
    let message = apply_fails(&env, &plan);
    assert!(message.contains("vendor is a symbolic link"), "{message}");
    assert_same(&before, &RepoState::capture(&repo));
    assert_eq!(
        std::fs::read_dir(&elsewhere).unwrap().count(),
        0,
        "nothing outside the repository"
    );
    std::fs::remove_file(repo.join("vendor")).unwrap();
    let base = head(&repo);
    applies_once(&env, &plan, &repo, &base);
    assert_eq!(
        std::fs::read_to_string(repo.join("vendor/lib/x.txt")).unwrap(),
        "x\n"
    );
}

#[test]
fn an_uncommitted_chmod_on_a_changed_file_is_refused_not_dropped() {
    let env = Env::new();
    let repo = repo_with(env.root(), "repo", &[("run.sh", "echo one\n")]);
    let plan = plan_at_apply_gate(&env, &[&repo], &["echo 'echo two' > run.sh"]);
    std::fs::set_permissions(repo.join("run.sh"), std::fs::Permissions::from_mode(0o755)).unwrap();
    let before = RepoState::capture(&repo);
    let message = apply_fails(&env, &plan);
    assert!(
        message.contains("run.sh has uncommitted changes"),
        "{message}"
    );
    assert_same(&before, &RepoState::capture(&repo));
    git(&repo, &["commit", "-q", "-am", "make it executable"]);
    let base = head(&repo);
    applies_once(&env, &plan, &repo, &base);
    let mode = std::fs::metadata(repo.join("run.sh")).unwrap().mode();
    assert_eq!(
        mode & 0o111,
        0o111,
        "the user's committed mode is kept by the merge"
    );
}

#[test]
fn a_repository_with_crlf_line_endings_applies_when_git_status_is_clean() {
    for (name, setup) in [("eol", "attributes"), ("autocrlf", "config")] {
        let env = Env::new();
        let dir = env.root().join(name);
        std::fs::create_dir_all(&dir).unwrap();
        git(&dir, &["init", "-q"]);
        if setup == "attributes" {
            std::fs::write(dir.join(".gitattributes"), "*.txt text eol=crlf\n").unwrap();
        } else {
            git(&dir, &["config", "core.autocrlf", "true"]);
        }
        std::fs::write(dir.join("a.txt"), "one\r\ntwo\r\n").unwrap();
        git(&dir, &["add", "-A"]);
        git(&dir, &["commit", "-q", "-m", "base"]);
        // A fresh checkout, as a user has it.
        std::fs::remove_file(dir.join("a.txt")).unwrap();
        git(&dir, &["checkout", "--", "a.txt"]);
        assert_eq!(
            git_out(&dir, &["status", "--porcelain"]),
            "",
            "{name}: clean before"
        );
        let plan = plan_at_apply_gate(
            &env,
            &[&dir],
            &["printf 'one\\r\\ntwo\\r\\nthree\\r\\n' > a.txt"],
        );
        let base = head(&dir);
        applies_once(&env, &plan, &dir, &base);
        assert_eq!(
            git_out(&dir, &["show", "HEAD:a.txt"]),
            "one\ntwo\nthree\n",
            "{name}: committed as git would"
        );
        assert_eq!(
            std::fs::read(dir.join("a.txt")).unwrap(),
            b"one\r\ntwo\r\nthree\r\n",
            "{name}: the work tree has what a checkout writes"
        );
    }
}

#[test]
fn ident_and_safecrlf_still_clean_the_files_that_need_it() {
    // `ident` collapses `$Id: ...$` when git stores a file; content without `$Id` or a
    // carriage return is stored as it is without going through the filters.
    let env = Env::new();
    let dir = env.root().join("ident");
    std::fs::create_dir_all(&dir).unwrap();
    git(&dir, &["init", "-q"]);
    std::fs::write(dir.join(".gitattributes"), "*.txt ident\n").unwrap();
    std::fs::write(dir.join("a.txt"), "one\n").unwrap();
    git(&dir, &["add", "-A"]);
    git(&dir, &["commit", "-q", "-m", "base"]);
    let plan = plan_at_apply_gate(
        &env,
        &[&dir],
        &["printf 'one $Id: stale $\\n' > a.txt && printf 'plain\\n' > b.txt"],
    );
    let base = head(&dir);
    applies_once(&env, &plan, &dir, &base);
    assert_eq!(git_out(&dir, &["show", "HEAD:a.txt"]), "one $Id$\n");
    assert_eq!(git_out(&dir, &["show", "HEAD:b.txt"]), "plain\n");
    let fsck = Command::new("git")
        .args(["fsck", "--strict"])
        .current_dir(&dir)
        .output()
        .unwrap();
    assert!(
        fsck.status.success(),
        "the objects Apply brought in are sound: {}",
        String::from_utf8_lossy(&fsck.stderr)
    );

    // `core.safecrlf` refuses a file without carriage returns that `core.autocrlf` would
    // check out with them: still refused, nothing written.
    let env = Env::new();
    let dir = env.root().join("safecrlf");
    std::fs::create_dir_all(&dir).unwrap();
    git(&dir, &["init", "-q"]);
    std::fs::write(dir.join("a.txt"), "one\n").unwrap();
    git(&dir, &["add", "-A"]);
    git(&dir, &["commit", "-q", "-m", "base"]);
    let plan = plan_at_apply_gate(&env, &[&dir], &["printf 'two\\n' > b.txt"]);
    git(&dir, &["config", "core.autocrlf", "true"]);
    git(&dir, &["config", "core.safecrlf", "true"]);
    let base = head(&dir);
    let message = apply_fails(&env, &plan);
    assert!(
        message.contains("b.txt") || message.contains("CRLF"),
        "{message}"
    );
    assert_eq!(head(&dir), base);
    assert!(!dir.join("b.txt").exists());
}

#[test]
fn a_file_that_becomes_a_directory_and_back_applies_exactly() {
    let env = Env::new();
    let repo = repo_with(
        env.root(),
        "repo",
        &[("a", "file\n"), ("d/x.txt", "x\n"), ("d/y/z.txt", "z\n")],
    );
    let plan = plan_at_apply_gate(
        &env,
        &[&repo],
        &["rm a && mkdir a && echo inner > a/inner.txt && rm -r d && echo now-a-file > d"],
    );
    let base = head(&repo);
    applies_once(&env, &plan, &repo, &base);
    assert_eq!(
        std::fs::read_to_string(repo.join("a/inner.txt")).unwrap(),
        "inner\n"
    );
    assert_eq!(
        std::fs::read_to_string(repo.join("d")).unwrap(),
        "now-a-file\n"
    );
}

#[test]
fn a_directory_that_becomes_a_file_with_an_untracked_file_in_it_is_refused() {
    let env = Env::new();
    let repo = repo_with(env.root(), "repo", &[("d/x.txt", "x\n")]);
    let plan = plan_at_apply_gate(&env, &[&repo], &["rm -r d && echo now-a-file > d"]);
    std::fs::write(repo.join("d/notes.txt"), "mine\n").unwrap();
    let before = RepoState::capture(&repo);
    let message = apply_fails(&env, &plan);
    assert!(message.contains("d/notes.txt"), "{message}");
    assert_same(&before, &RepoState::capture(&repo));
    std::fs::remove_file(repo.join("d/notes.txt")).unwrap();
    let base = head(&repo);
    applies_once(&env, &plan, &repo, &base);
}

#[test]
fn apply_commits_the_reviewed_tree_and_refuses_when_the_sandbox_changed_after_review() {
    let env = Env::new();
    let repo = repo_with(env.root(), "repo", &[("a.txt", "one\n")]);
    let plan = plan_at_apply_gate(&env, &[&repo], &["echo reviewed > a.txt"]);
    // A process that outlived its step writes after the review.
    crate::support::sandbox::write(&env, &plan, "a.txt", "reviewed\nunreviewed line\n");
    let before = RepoState::capture(&repo);
    let message = apply_fails(&env, &plan);
    assert!(
        message.contains("changed after the changes were reviewed"),
        "{message}"
    );
    assert!(message.contains("a.txt"), "{message}");
    assert_same(&before, &RepoState::capture(&repo));
    // Restore the reviewed state: the last checkpoint.
    let (doc, code) = env.json(&["plan", "checkpoints", &plan]);
    assert_eq!(code, 0, "{doc:#}");
    let last = doc["data"]["checkpoints"]
        .as_array()
        .unwrap()
        .last()
        .unwrap()["checkpoint_id"]
        .as_str()
        .unwrap()
        .to_string();
    let (doc, code) = env.json(&["plan", "rollback", "--yes", &plan, &last]);
    assert_eq!(code, 0, "{doc:#}");
    let (doc, code) = env.json(&["plan", "execute", &plan]);
    assert_eq!(code, 3, "back at the apply gate: {doc:#}");
    let base = head(&repo);
    let (doc, code) = env.json(&["plan", "apply", "--yes", &plan]);
    assert_eq!(code, 0, "{doc:#}");
    assert_eq!(
        git_out(&repo, &["show", "HEAD:a.txt"]),
        "reviewed\n",
        "exactly the reviewed tree"
    );
    assert_eq!(git_out(&repo, &["rev-parse", "HEAD~1"]).trim(), base);
}

#[test]
fn export_refuses_a_branch_checked_out_in_any_work_tree_even_with_force() {
    let env = Env::new();
    let repo = repo_with(env.root(), "repo", &[("a.txt", "one\n")]);
    git(&repo, &["branch", "side"]);
    git(&repo, &["worktree", "add", "-q", "../linked", "side"]);
    let plan = plan_at_apply_gate(&env, &[&repo], &["echo two > a.txt"]);
    for branch in ["main", "side"] {
        let before = RepoState::capture(&repo);
        let (doc, code) = env.json(&["plan", "export", &plan, "--branch", branch, "--force"]);
        assert_ne!(code, 0, "{branch}: {doc:#}");
        let message = doc["error"]["message"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        assert!(message.contains("is checked out"), "{branch}: {message}");
        assert_same(&before, &RepoState::capture(&repo));
    }
    git(&repo, &["branch", "other"]);
    let (doc, code) = env.json(&["plan", "export", &plan, "--branch", "other", "--force"]);
    assert_eq!(
        code, 0,
        "--force replaces a branch nobody has checked out: {doc:#}"
    );
}

/// Whether this process may mount a tmpfs (root in CI); prints why a test is skipped.
#[allow(clippy::print_stderr)] // a skipped check must say so in the test output
fn tmpfs(at: &Path, size: &str) -> bool {
    std::fs::create_dir_all(at).unwrap();
    let ok = Command::new("mount")
        .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
        .arg(at)
        .output()
        .is_ok_and(|o| o.status.success());
    if !ok {
        eprintln!(
            "SKIPPED: mounting a tmpfs is not permitted here (needs root); the full-disk case is not checked"
        );
    }
    ok
}

struct Unmount(PathBuf);
impl Drop for Unmount {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(&self.0).status();
    }
}

#[test]
fn a_full_disk_refuses_apply_before_writing_and_the_repository_stays_byte_identical() {
    let env = Env::new();
    let mnt = env.root().join("small");
    if !tmpfs(&mnt, "5m") {
        return;
    }
    let _u = Unmount(mnt.clone());
    let repo = repo_with(&mnt, "repo", &[("a.txt", "one\n")]);
    let plan = plan_at_apply_gate(
        &env,
        &[&repo],
        &["head -c 6000000 /dev/urandom > big.bin && echo two > a.txt"],
    );
    let before = RepoState::capture(&repo);
    let message = apply_fails(&env, &plan);
    assert!(message.contains("free"), "{message}");
    assert_same(&before, &RepoState::capture(&repo));
    let status = Command::new("mount")
        .args(["-o", "remount,size=64m"])
        .arg(&mnt)
        .status()
        .unwrap();
    assert!(status.success());
    let base = head(&repo);
    applies_once(&env, &plan, &repo, &base);
}

#[test]
fn two_repositories_apply_all_or_nothing_when_the_second_cannot_be_written() {
    let env = Env::new();
    let mnt = env.root().join("small");
    if !tmpfs(&mnt, "5m") {
        return;
    }
    let _u = Unmount(mnt.clone());
    let first = repo_with(env.root(), "first", &[("a.txt", "one\n")]);
    let second = repo_with(&mnt, "second", &[("b.txt", "one\n")]);
    let plan = plan_at_apply_gate(
        &env,
        &[&first, &second],
        &[
            "@local/r0: echo two > a.txt",
            "@local/r1: head -c 6000000 /dev/urandom > big.bin",
        ],
    );
    let (b1, b2) = (RepoState::capture(&first), RepoState::capture(&second));
    let message = apply_fails(&env, &plan);
    assert!(
        message.contains("local/r1"),
        "names the resource: {message}"
    );
    assert_same(&b1, &RepoState::capture(&first));
    assert_same(&b2, &RepoState::capture(&second));
    let status = Command::new("mount")
        .args(["-o", "remount,size=64m"])
        .arg(&mnt)
        .status()
        .unwrap();
    assert!(status.success());
    let (h1, h2) = (head(&first), head(&second));
    let (doc, code) = env.json(&["plan", "apply", "--yes", &plan]);
    assert_eq!(code, 0, "{doc:#}");
    for (repo, h) in [(&first, h1), (&second, h2)] {
        assert_eq!(git_out(repo, &["rev-parse", "HEAD~1"]).trim(), h);
        assert_eq!(git_out(repo, &["status", "--porcelain"]), "");
    }
}

#[test]
fn a_failure_in_the_second_repository_rolls_the_committed_first_back() {
    let env = Env::new();
    let first = repo_with(env.root(), "first", &[("a.txt", "one\n")]);
    let second = repo_with(env.root(), "second", &[("b.txt", "one\n")]);
    let plan = plan_at_apply_gate(
        &env,
        &[&first, &second],
        &["@local/r0: echo two > a.txt", "@local/r1: echo two > b.txt"],
    );
    let (b1, b2) = (RepoState::capture(&first), RepoState::capture(&second));
    // The second resource's write fails after its work tree is written (as an I/O error
    // would), when the first one is already committed.
    let o = env
        .command(&["--format", "json", "plan", "apply", "--yes", &plan])
        .env("CLEVERAGENTS_APPLY_FAULT", "local/r1:after-files")
        .output()
        .unwrap();
    let doc: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let code = o.status.code().unwrap();
    assert_ne!(code, 0, "{doc:#}");
    let message = doc["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("rolled back too"), "{message}");
    assert_same(&b1, &RepoState::capture(&first));
    assert_same(&b2, &RepoState::capture(&second));
    let (h1, h2) = (head(&first), head(&second));
    let (doc, code) = env.json(&["plan", "apply", "--yes", &plan]);
    assert_eq!(code, 0, "{doc:#}");
    for (repo, h) in [(&first, h1), (&second, h2)] {
        assert_eq!(git_out(repo, &["rev-parse", "HEAD~1"]).trim(), h);
        assert_eq!(git_out(repo, &["status", "--porcelain"]), "");
    }
}

/// The CI size of `scripts/reliability.sh`'s apply-kill: an Apply of `files` files killed with
/// SIGKILL at `points` moments, then `plan cancel` (odd runs) or `plan apply`; every run ends
/// exactly at the old tree or exactly at the new commit.
fn kill_runs(files: usize, points: usize) {
    let env = Env::new();
    let repo = repo_with(env.root(), "repo", &[("README", "base\n")]);
    let step = format!(
        "mkdir -p f && for i in $(seq 1 {files}); do echo $i > f/$i.txt; done && echo changed > README"
    );
    let mut exact = 0;
    for k in 0..points {
        let plan = plan_at_apply_gate_again(&env, &repo, &step, k);
        let before = RepoState::capture(&repo);
        let base = head(&repo);
        let mut child = env
            .command(&["plan", "apply", "--yes", &plan])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        std::thread::sleep(std::time::Duration::from_millis(20 + 40 * k as u64));
        let _ = child.kill();
        let _ = child.wait();
        let cancel = k % 2 == 1;
        if cancel {
            let (doc, code) = env.json(&["plan", "cancel", &plan]);
            let applied = doc["error"]["message"]
                .as_str()
                .unwrap_or_default()
                .contains("final");
            assert!(code == 0 || applied, "{doc:#}");
        } else {
            let (doc, code) = env.json(&["plan", "apply", "--yes", &plan]);
            let done = doc["error"]["code"] == "CONFLICT";
            assert!(code == 0 || done, "{doc:#}");
        }
        let now = RepoState::capture(&repo);
        let moved = head(&repo) != base;
        if !moved {
            assert_same(&before, &now);
            exact += 1;
        } else {
            assert_eq!(
                git_out(&repo, &["rev-parse", "HEAD~1"]).trim(),
                base,
                "run {k}"
            );
            assert_eq!(
                git_out(&repo, &["status", "--porcelain"]),
                "",
                "run {k}: exactly the new commit"
            );
            assert!(!repo.join(".git/cleveragents-apply").exists());
            assert!(!repo.join(".git/index.lock").exists());
            exact += 1;
            // Back to the old tree for the next run.
            git(&repo, &["reset", "-q", "--hard", &base]);
            git(&repo, &["clean", "-qfdx"]);
        }
    }
    assert_eq!(exact, points);
}

fn plan_at_apply_gate_again(env: &Env, repo: &Path, step: &str, k: usize) -> String {
    if k == 0 {
        return plan_at_apply_gate(env, &[repo], &[step]);
    }
    let (doc, code) = env.json(&[
        "plan",
        "use",
        "local/change",
        "app",
        "--automation-profile",
        "trusted",
    ]);
    assert_eq!(code, 3, "{doc:#}");
    doc["data"]["plan_id"].as_str().unwrap().to_string()
}

#[test]
fn an_apply_killed_at_any_point_ends_at_the_old_tree_or_the_new_commit() {
    kill_runs(600, 6);
}

/// Runs `plan apply --yes` with a fault injected (see `CLEVERAGENTS_APPLY_FAULT`).
fn apply_with_fault(env: &Env, plan: &str, fault: &str) -> (serde_json::Value, Option<i32>) {
    let o = env
        .command(&["--format", "json", "plan", "apply", "--yes", plan])
        .env("CLEVERAGENTS_APPLY_FAULT", fault)
        .output()
        .unwrap();
    let doc = serde_json::from_slice(&o.stdout).unwrap_or(serde_json::Value::Null);
    (doc, o.status.code())
}

#[test]
fn an_apply_killed_mid_write_is_rolled_back_by_plan_cancel_and_status_names_the_command() {
    for finish_with in ["cancel", "apply"] {
        let env = Env::new();
        let repo = repo_with(
            env.root(),
            "repo",
            &[("a.txt", "one\n"), ("d/b.txt", "b\n")],
        );
        let plan = plan_at_apply_gate(
            &env,
            &[&repo],
            &["echo two > a.txt && rm d/b.txt && echo c > c.txt"],
        );
        let before = RepoState::capture(&repo);
        let base = head(&repo);
        // Dies after writing the work tree, holding git's index lock.
        let (_, code) = apply_with_fault(&env, &plan, "local/r0:abort-after-files");
        assert_eq!(code, None, "killed by a signal");
        assert!(
            repo.join(".git/index.lock").exists(),
            "the crash left the lock"
        );
        assert_eq!(
            std::fs::read_to_string(repo.join("a.txt")).unwrap(),
            "two\n",
            "half written"
        );
        let (st, _) = env.json(&["plan", "status", &plan]);
        assert_eq!(st["data"]["apply_journal_pending"], true, "{st:#}");
        let text = st.to_string();
        assert!(text.contains(&format!("plan apply {plan}")), "{text}");
        assert!(text.contains(&format!("plan cancel {plan}")), "{text}");
        assert!(!text.contains(&format!("plan execute {plan}")), "{text}");
        if finish_with == "cancel" {
            let (doc, code) = env.json(&["plan", "cancel", &plan]);
            assert_eq!(code, 0, "{doc:#}");
            assert_same(&before, &RepoState::capture(&repo));
        } else {
            applies_once(&env, &plan, &repo, &base);
            assert!(!repo.join("d").exists());
            assert_eq!(std::fs::read_to_string(repo.join("c.txt")).unwrap(), "c\n");
        }
    }
}

/// An Apply killed after its commit point but before it removed its journal directory leaves
/// that directory in the user's `.git`; the next command on the plan removes it.
#[test]
fn a_journal_left_by_an_apply_killed_after_its_commit_point_is_removed_by_the_next_command() {
    let env = Env::new();
    let repo = repo_with(env.root(), "repo", &[("README", "base\n")]);
    let plan = plan_at_apply_gate(&env, &[&repo], &["echo changed > README"]);
    let (doc, code) = env.json(&["plan", "apply", "--yes", &plan]);
    assert_eq!(code, 0, "{doc:#}");
    // The state such a kill leaves: the journal complete in the database, its directory kept.
    let journal: String = rusqlite::Connection::open(crate::support::db_file(&env))
        .unwrap()
        .query_row(
            "SELECT journal_id FROM apply_journals WHERE plan_id = ?1 AND status = 'complete'",
            [&plan],
            |r| r.get(0),
        )
        .unwrap();
    let left = repo.join(".git/cleveragents-apply").join(&journal);
    std::fs::create_dir_all(left.join("old")).unwrap();
    std::fs::write(left.join("old/README"), "base\n").unwrap();
    // Any command the engine runs on the plan recovers it first (here a cancel, refused since
    // the plan is applied).
    let (doc, code) = env.json(&["plan", "cancel", &plan]);
    assert_eq!(
        (code, doc["error"]["code"].as_str()),
        (1, Some("CONFLICT")),
        "{doc:#}"
    );
    assert!(!left.exists(), "the journal directory is removed");
    assert!(!repo.join(".git/cleveragents-apply").exists());
    assert_eq!(git_out(&repo, &["status", "--porcelain"]), "");
}

#[test]
fn the_apply_summary_counts_a_moved_file_once_as_plan_diff_does() {
    let env = Env::new();
    let moved = "one\ntwo\nthree\nfour\nfive\n";
    let repo = repo_with(
        env.root(),
        "repo",
        &[("old/name.txt", moved), ("keep.txt", "a\nb\n")],
    );
    let plan = plan_at_apply_gate(
        &env,
        &[&repo],
        &["mkdir new && mv old/name.txt new/name.txt && echo c >> keep.txt"],
    );
    let (diff, code) = env.json(&["plan", "diff", &plan]);
    assert_eq!(code, 0, "{diff:#}");
    let stats = &diff["data"]["stats"];
    assert_eq!(
        (
            stats["files_changed"].as_u64(),
            stats["additions"].as_u64(),
            stats["deletions"].as_u64()
        ),
        (Some(2), Some(1), Some(0)),
        "a rename and a one-line edit: {diff:#}"
    );
    let (doc, code) = env.json(&["plan", "apply", "--yes", &plan]);
    assert_eq!(code, 0, "{doc:#}");
    let summary = &doc["data"]["apply_summary"];
    assert_eq!(
        (
            summary["files"].as_u64(),
            summary["additions"].as_u64(),
            summary["deletions"].as_u64()
        ),
        (Some(2), Some(1), Some(0)),
        "the summary counts what plan diff counted: {doc:#}"
    );
    let (events, _) = env.json(&["plan", "events", &plan, "--type", "apply_complete"]);
    let text = events.to_string();
    assert!(
        text.contains(r#""files":2,"additions":1,"deletions":0"#),
        "the apply_complete event counts the same: {events:#}"
    );
    assert_eq!(
        std::fs::read_to_string(repo.join("new/name.txt")).unwrap(),
        moved
    );
}

const KEY: &str = "sk-live-0123456789abcdef";

/// `agents --format json ARGS` with `OPENAI_API_KEY` set to [`KEY`].
fn with_key(env: &Env, args: &[&str]) -> (serde_json::Value, i32) {
    let mut all = vec!["--format", "json"];
    all.extend_from_slice(args);
    let out = env
        .command(&all)
        .env("OPENAI_API_KEY", KEY)
        .output()
        .unwrap();
    let doc = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("not JSON ({e}): {}", String::from_utf8_lossy(&out.stdout)));
    (doc, out.status.code().unwrap())
}

#[test]
fn a_key_in_the_change_is_flagged_in_the_diff_and_refused_by_apply_and_export_unless_allowed() {
    let env = Env::new();
    let repo = repo_with(env.root(), "repo", &[("a.txt", "one\n")]);
    let plan = plan_at_apply_gate(
        &env,
        &[&repo],
        &[&format!(
            "echo ok >> a.txt && printf 'name = x\\ntoken = {KEY}\\n' > settings.txt"
        )],
    );
    // The diff shows `[redacted]` and says, at the line, which key's value it hides.
    let (diff, code) = with_key(&env, &["plan", "diff", &plan]);
    assert_eq!(code, 0, "{diff:#}");
    assert!(!diff.to_string().contains(KEY), "{diff:#}");
    let files = diff["data"]["resources"][0]["files"].as_array().unwrap();
    let settings = files.iter().find(|f| f["path"] == "settings.txt").unwrap();
    assert_eq!(
        settings["secrets"],
        serde_json::json!([{"line": 2, "variable": "OPENAI_API_KEY"}]),
        "{settings:#}"
    );
    let a = files.iter().find(|f| f["path"] == "a.txt").unwrap();
    assert!(a.get("secrets").is_none(), "{a:#}");
    let human = env
        .command(&["plan", "diff", &plan])
        .env("OPENAI_API_KEY", KEY)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&human.stdout);
    assert!(
        text.contains("settings.txt:2 contains the value of OPENAI_API_KEY"),
        "{text}"
    );
    // Export refuses, writing nothing.
    let patch = env.root().join("change.patch");
    let (doc, code) = with_key(
        &env,
        &["plan", "export", &plan, "--patch", patch.to_str().unwrap()],
    );
    assert_ne!(code, 0, "{doc:#}");
    let message = doc["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("settings.txt") && message.contains("OPENAI_API_KEY"),
        "{doc:#}"
    );
    assert!(doc.to_string().contains("--allow-secrets"), "{doc:#}");
    assert!(!patch.exists());
    // Apply refuses, changing nothing.
    let before = RepoState::capture(&repo);
    let (doc, code) = with_key(&env, &["plan", "apply", "--yes", &plan]);
    assert_ne!(code, 0, "{doc:#}");
    let message = doc["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("settings.txt") && message.contains("OPENAI_API_KEY"),
        "{doc:#}"
    );
    assert!(doc.to_string().contains("--allow-secrets"), "{doc:#}");
    assert_same(&before, &RepoState::capture(&repo));
    // Allowed explicitly, both write the key.
    let (doc, code) = with_key(
        &env,
        &[
            "plan",
            "export",
            &plan,
            "--patch",
            patch.to_str().unwrap(),
            "--allow-secrets",
        ],
    );
    assert_eq!(code, 0, "{doc:#}");
    assert!(std::fs::read_to_string(&patch).unwrap().contains(KEY));
    let (doc, code) = with_key(&env, &["plan", "apply", "--yes", "--allow-secrets", &plan]);
    assert_eq!(code, 0, "{doc:#}");
    assert!(git_out(&repo, &["show", "HEAD:settings.txt"]).contains(KEY));
}

#[test]
fn after_a_partial_apply_plan_diff_shows_the_commit_and_what_was_left_out() {
    let env = Env::new();
    let repo = repo_with(
        env.root(),
        "repo",
        &[("a.txt", "one\n"), ("b.txt", "two\n")],
    );
    let plan = plan_at_apply_gate(
        &env,
        &[&repo],
        &["echo more >> a.txt && echo more >> b.txt"],
    );
    let (doc, code) = env.json(&["plan", "apply", "--yes", "--exclude", "b.txt", &plan]);
    assert_eq!(code, 0, "{doc:#}");
    let head = head(&repo);
    let (diff, code) = env.json(&["plan", "diff", &plan]);
    assert_eq!(code, 0, "{diff:#}");
    let files: Vec<&str> = diff["data"]["resources"][0]["files"]
        .as_array()
        .unwrap_or_else(|| panic!("{diff:#}"))
        .iter()
        .map(|f| f["path"].as_str().unwrap())
        .collect();
    assert_eq!(files, ["a.txt"], "what the commit wrote: {diff:#}");
    assert_eq!(
        diff["data"]["resources"][0]["commit"],
        head.as_str(),
        "{diff:#}"
    );
    assert_eq!(diff["data"]["left_out"][0]["path"], "b.txt", "{diff:#}");
    // The remainder kept in the sandbox stays reachable.
    let (rest, code) = env.json(&["plan", "diff", "--remainder", &plan]);
    assert_eq!(code, 0, "{rest:#}");
    assert!(rest.to_string().contains("b.txt"), "{rest:#}");
}

/// Once `plan cleanup` released the sandbox, the remainder a partial Apply left there is
/// gone: `plan diff --remainder` says so (and shows the commit), and nothing suggests
/// `--remainder` any more.
#[test]
fn after_cleanup_plan_diff_remainder_says_the_remainder_is_gone_and_stops_suggesting_it() {
    let env = Env::new();
    let repo = repo_with(
        env.root(),
        "repo",
        &[("a.txt", "one\n"), ("b.txt", "two\n")],
    );
    let plan = plan_at_apply_gate(
        &env,
        &[&repo],
        &["echo more >> a.txt && echo more >> b.txt"],
    );
    let (doc, code) = env.json(&["plan", "apply", "--yes", "--exclude", "b.txt", &plan]);
    assert_eq!(code, 0, "{doc:#}");
    let (doc, code) = env.json(&["plan", "cleanup", "--yes"]);
    assert_eq!(code, 0, "{doc:#}");
    for args in [
        &["plan", "diff", "--remainder", &plan][..],
        &["plan", "diff", &plan][..],
    ] {
        let mut all = vec!["--format", "plain"];
        all.extend_from_slice(args);
        let out = env.run(&all);
        let text = crate::support::stdout(&out);
        assert_eq!(out.status.code(), Some(0), "{args:?}: {text}");
        assert!(
            !text.contains("--remainder"),
            "{args:?}: does not suggest --remainder: {text}"
        );
        assert!(
            text.contains("sandbox was released"),
            "{args:?}: says why the remainder is gone: {text}"
        );
    }
}

#[test]
fn after_a_partial_apply_plan_artifacts_lists_what_the_commit_wrote_and_what_was_left_out() {
    let env = Env::new();
    let repo = repo_with(
        env.root(),
        "repo",
        &[("a.txt", "one\n"), ("b.txt", "two\n")],
    );
    let plan = plan_at_apply_gate(
        &env,
        &[&repo],
        &["echo more >> a.txt && echo more >> b.txt"],
    );
    let (doc, code) = env.json(&["plan", "apply", "--yes", "--exclude", "b.txt", &plan]);
    assert_eq!(code, 0, "{doc:#}");
    let head = head(&repo);
    let (made, code) = env.json(&["plan", "artifacts", &plan]);
    assert_eq!(code, 0, "{made:#}");
    let files: Vec<&str> = made["data"]["files"]
        .as_array()
        .unwrap_or_else(|| panic!("{made:#}"))
        .iter()
        .map(|f| f["path"].as_str().unwrap())
        .collect();
    assert_eq!(files, ["a.txt"], "what the commit wrote: {made:#}");
    assert_eq!(made["data"]["applied"], true, "{made:#}");
    let commits = made["data"]["commits"].to_string();
    assert!(commits.contains(&head[..12]), "names the commit: {made:#}");
    assert_eq!(made["data"]["left_out"][0]["path"], "b.txt", "{made:#}");
    let out = env.run(&["--format", "plain", "plan", "artifacts", &plan]);
    let text = stdout(&out);
    assert!(out.status.success(), "{text}");
    assert!(
        text.contains("Left Out") && text.contains("b.txt"),
        "{text}"
    );
}

#[test]
fn plan_use_says_how_much_changed_when_its_plan_reaches_the_apply_gate() {
    let env = Env::new();
    let repo = repo_with(env.root(), "repo", &[("a.txt", "one\ntwo\n")]);
    let doc = use_to_apply_gate(
        &env,
        &[&repo],
        &["printf 'one\\nTWO\\nthree\\n' > a.txt && printf 'new\\n' > b.txt"],
    );
    assert_eq!(
        doc["data"]["changes"],
        serde_json::json!({"files_changed": 2, "additions": 3, "deletions": 1}),
        "{doc:#}"
    );
    let message = doc["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("2 file(s) changed, +3 -1"),
        "the gate's message says how much changed: {message}"
    );
}

#[test]
fn a_plan_of_several_resources_whose_script_steps_name_none_is_refused_at_plan_use() {
    let env = Env::new();
    let one = repo_with(env.root(), "one", &[("a.txt", "a\n")]);
    let two = repo_with(env.root(), "two", &[("b.txt", "b\n")]);
    let (doc, code) = use_action(
        &env,
        &[&one, &two],
        &[
            "printf x > a.txt",
            "@local/r1: printf y > b.txt",
            "printf z > c.txt",
        ],
    );
    assert!(
        code != 0 && code != 3,
        "refused before any plan exists: {doc:#}"
    );
    assert_eq!(doc["error"]["code"], "INVALID_INPUT", "{doc:#}");
    let message = doc["error"]["message"].as_str().unwrap();
    for needle in ["s0", "s2", "local/r0", "local/r1"] {
        assert!(message.contains(needle), "names {needle}: {message}");
    }
    assert!(!message.contains("s1"), "s1 names its resource: {message}");
    let hints = doc["error"]["suggestions"].to_string();
    assert!(hints.contains("resource:"), "the fix is named: {doc:#}");
    let (list, _) = env.json(&["plan", "list"]);
    assert_eq!(list["data"]["plans"], serde_json::json!([]), "{list:#}");
}

#[test]
fn plan_rollback_can_return_to_the_base_through_the_checkpoint_before_step_one() {
    let env = Env::new();
    let repo = repo_with(env.root(), "repo", &[("a.txt", "one\n")]);
    let before = RepoState::capture(&repo);
    let plan = plan_at_apply_gate(
        &env,
        &[&repo],
        &["printf 'two\\n' > a.txt", "printf 'new\\n' > b.txt"],
    );
    let (doc, code) = env.json(&["plan", "checkpoints", &plan]);
    assert_eq!(code, 0, "{doc:#}");
    let cps = doc["data"]["checkpoints"].as_array().unwrap().clone();
    assert_eq!(
        cps[0]["label"], "base",
        "the first checkpoint is the base: {doc:#}"
    );
    assert_eq!(cps[0]["seq"], 1, "{doc:#}");
    assert_eq!(cps[0]["files_changed"], 0, "{doc:#}");

    let (doc, code) = env.json(&["plan", "rollback", "--yes", &plan, "1"]);
    assert_eq!(code, 0, "{doc:#}");
    assert_eq!(
        (doc["data"]["phase"].as_str(), doc["data"]["state"].as_str()),
        (Some("execute"), Some("queued")),
        "{doc:#}"
    );
    assert_eq!(doc["data"]["steps_to_run_again"], 2, "{doc:#}");
    let (diff, code) = env.json(&["plan", "diff", &plan]);
    assert_eq!(code, 0, "{diff:#}");
    assert_eq!(
        diff["data"]["stats"]["files_changed"], 0,
        "the sandbox holds the base again: {diff:#}"
    );
    assert_same(&before, &RepoState::capture(&repo));

    // The steps run again from the base and the plan reaches the gate with the same change.
    let (doc, code) = env.json(&["plan", "execute", &plan]);
    assert_eq!(code, 3, "{doc:#}");
    let (diff, _) = env.json(&["plan", "diff", &plan]);
    assert_eq!(diff["data"]["stats"]["files_changed"], 2, "{diff:#}");
}

/// An errored Apply whose sandbox `plan cleanup` then removed has nothing left to commit: a
/// later `plan apply` says the sandbox is gone and leaves the plan errored and the repository
/// as it was, never "applied" with no commit.
#[test]
fn apply_after_cleanup_removed_an_errored_plans_sandbox_is_refused_and_commits_nothing() {
    let env = Env::new();
    let repo = repo_with(env.root(), "repo", &[("a.txt", "one\n")]);
    let plan = plan_at_apply_gate(&env, &[&repo], &["echo two > a.txt"]);
    std::fs::write(repo.join(".git/index.lock"), b"").unwrap();
    apply_fails(&env, &plan);
    std::fs::remove_file(repo.join(".git/index.lock")).unwrap();
    let (doc, code) = env.json(&["plan", "cleanup", "--yes"]);
    assert_eq!(code, 0, "{doc:#}");
    let before = RepoState::capture(&repo);
    let message = apply_fails(&env, &plan);
    assert!(message.contains("was removed"), "{message}");
    assert_same(&before, &RepoState::capture(&repo));
}
