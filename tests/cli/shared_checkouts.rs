//! Sandboxes at one base share one checkout through an overlay mounted in the `agents`
//! process's own mount namespace (docs/sandbox.md, "Shared checkouts"), on unless
//! `CLEVERAGENTS_SANDBOX_OVERLAY=0` (these tests say which they want). The test process is outside that namespace: it sees the
//! shared checkout, each sandbox's upper directory and an empty mount point, never the
//! merged tree, so what a plan sees is read through the binary.

use std::fs;
use std::os::unix::fs::FileTypeExt;
use std::path::{Path, PathBuf};

use cleveragents_engine::domain::lifecycle::Phase;
use cleveragents_engine::store::Store;
use serde_json::{Value, json};

use super::sandbox::{plan_in, script_project, user_repo};
use crate::support::{Env, git, git_out};

const SWITCH: &str = "CLEVERAGENTS_SANDBOX_OVERLAY";

/// Runs the binary on this machine with shared checkouts asked for, `--format json`.
fn run(env: &Env, args: &[&str]) -> (Value, i32) {
    run_as(env, None, args)
}

/// [`run`] as the user `uid` (and its group), when given.
fn run_as(env: &Env, uid: Option<u32>, args: &[&str]) -> (Value, i32) {
    use std::os::unix::process::CommandExt;
    let mut cmd = env.local_command(&with_json(args));
    cmd.env(SWITCH, "1");
    if let Some(uid) = uid {
        // Dropping root's privileges also drops its supplementary groups.
        cmd.uid(uid).gid(uid);
    }
    json_of(cmd)
}

/// [`run`] with shared checkouts turned off: a full checkout per sandbox.
fn run_full(env: &Env, args: &[&str]) -> (Value, i32) {
    let mut cmd = env.local_command(&with_json(args));
    cmd.env(SWITCH, "0");
    json_of(cmd)
}

fn with_json<'a>(args: &[&'a str]) -> Vec<&'a str> {
    let mut all = vec!["--format", "json"];
    all.extend_from_slice(args);
    all
}

fn json_of(mut cmd: std::process::Command) -> (Value, i32) {
    let out = cmd.output().unwrap();
    let doc = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "stdout is not JSON ({e}): {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    });
    (doc, out.status.code().unwrap_or(-1))
}

type Run = fn(&Env, &[&str]) -> (Value, i32);

/// `plan shell PLAN -- sh -c SCRIPT`.
fn shell_args<'a>(plan: &'a str, script: &'a str) -> [&'a str; 7] {
    ["plan", "shell", plan, "--", "sh", "-c", script]
}

fn tool(env: &Env, plan: &str, repo: &Path, name: &str, args: Value) -> Value {
    tool_with(run, env, plan, repo, name, args)
}

fn tool_with(run: Run, env: &Env, plan: &str, repo: &Path, name: &str, args: Value) -> Value {
    let target = repo.to_str().unwrap();
    let args = args.to_string();
    let (doc, code) = run(
        env,
        &[
            "tool",
            "run",
            name,
            "--plan",
            plan,
            "--target-path",
            target,
            "--args",
            &args,
        ],
    );
    assert_eq!(code, 0, "{name}: {doc:#}");
    doc["data"].clone()
}

fn read(env: &Env, plan: &str, repo: &Path, path: &str) -> String {
    let data = tool(env, plan, repo, "read_file", json!({ "path": path }));
    data["result"]["content"]
        .as_str()
        .unwrap_or_else(|| panic!("{data:#}"))
        .to_string()
}

fn sandbox_root(env: &Env, plan: &str) -> PathBuf {
    let store = Store::open(&env.data_dir.join("cleveragents.db")).unwrap();
    let records = store.sandboxes_of_plan(&plan.parse().unwrap()).unwrap();
    assert_eq!(records.len(), 1);
    records[0].root_dir.clone()
}

fn bases(env: &Env) -> Vec<PathBuf> {
    let dir = env.data_dir.join("sandboxes/bases");
    let mut out: Vec<PathBuf> = fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path())
        // `.removing` holds removed bases while they are deleted.
        .filter(|p| p.is_dir() && !p.file_name().unwrap().to_string_lossy().starts_with('.'))
        .collect();
    out.sort();
    out
}

/// Every file (not directory) under `dir`, relative, leaving out the private repository.
fn files_under(dir: &Path) -> Vec<String> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in fs::read_dir(&d).unwrap().flatten() {
            let rel = e.path().strip_prefix(dir).unwrap().display().to_string();
            if e.file_type().unwrap().is_dir() {
                if rel != "git" {
                    stack.push(e.path());
                }
            } else {
                out.push(rel);
            }
        }
    }
    out.sort();
    out
}

fn diff_files(env: &Env, plan: &str) -> Vec<(String, String)> {
    diff_of(run, env, plan)
        .iter()
        .map(|f| {
            (
                f["path"].as_str().unwrap().to_string(),
                f["status"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

/// The changed files `plan diff` reports, as JSON.
fn diff_of(run: Run, env: &Env, plan: &str) -> Vec<Value> {
    let (doc, code) = run(env, &["plan", "diff", plan]);
    assert_eq!(code, 0, "{doc:#}");
    doc["data"]["resources"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|r| r["files"].as_array().unwrap().iter().cloned())
        .collect()
}

#[test]
fn a_second_plan_at_the_same_base_writes_no_second_copy_of_the_files() {
    let env = Env::new();
    let repo = user_repo(env.root());
    let (first, second) = (plan_in(&env, Phase::Execute), plan_in(&env, Phase::Execute));
    assert_eq!(read(&env, &first, &repo, "a.txt"), "alpha\n");
    assert_eq!(read(&env, &second, &repo, "src/lib.rs").lines().count(), 3);

    let shared = bases(&env);
    assert_eq!(shared.len(), 1, "one checkout for the base: {shared:?}");
    assert_eq!(
        fs::read_to_string(shared[0].join("work/a.txt")).unwrap(),
        "alpha\n"
    );
    for plan in [&first, &second] {
        // Nothing of the checkout is in the sandbox itself: its base, its lock, and an upper
        // directory that holds nothing yet.
        let root = sandbox_root(&env, plan);
        assert_eq!(files_under(&root), ["base", "lock"], "{}", root.display());
    }
    let (doc, code) = run(&env, &["diagnostics"]);
    assert_eq!(code, 0, "{doc:#}");
    assert!(
        doc.to_string()
            .contains("share a checkout through an overlay"),
        "{doc:#}"
    );
}

#[test]
fn an_edit_in_one_plans_sandbox_is_seen_by_neither_another_plan_nor_the_shared_base() {
    let env = Env::new();
    let repo = user_repo(env.root());
    let (first, second) = (plan_in(&env, Phase::Execute), plan_in(&env, Phase::Execute));
    let edit = json!({"path": "a.txt", "content": "changed\n"});
    tool(&env, &first, &repo, "write_file", edit);
    tool(&env, &first, &repo, "delete_file", json!({"path": "b.txt"}));
    assert_eq!(read(&env, &first, &repo, "a.txt"), "changed\n");
    assert_eq!(read(&env, &second, &repo, "a.txt"), "alpha\n");
    assert_eq!(read(&env, &second, &repo, "b.txt"), "bravo\n");
    let base = &bases(&env)[0];
    assert_eq!(
        fs::read_to_string(base.join("work/a.txt")).unwrap(),
        "alpha\n"
    );
    assert!(base.join("work/b.txt").is_file());

    // The first plan's upper directory holds exactly what it wrote: the new a.txt and the
    // whiteout (a 0/0 character device) that hides b.txt.
    let upper = sandbox_root(&env, &first).join("upper");
    assert_eq!(
        fs::read_to_string(upper.join("a.txt")).unwrap(),
        "changed\n"
    );
    let whiteout = fs::symlink_metadata(upper.join("b.txt")).unwrap();
    assert!(whiteout.file_type().is_char_device());
    assert_eq!(
        diff_files(&env, &first),
        [
            ("a.txt".into(), "modified".into()),
            ("b.txt".into(), "deleted".into())
        ]
    );
    assert_eq!(diff_files(&env, &second), []);
}

#[test]
fn a_fresh_shared_sandbox_shows_no_change_and_keeps_the_bases_index_as_it_is() {
    let env = Env::new();
    let repo = user_repo(env.root());
    let plan = plan_in(&env, Phase::Execute);
    tool(&env, &plan, &repo, "list_directory", json!({"path": "."}));
    let index = sandbox_root(&env, &plan).join("git/index");
    let copied = fs::read(&index).unwrap();
    assert_eq!(copied, fs::read(bases(&env)[0].join("git/index")).unwrap());
    // Through the overlay every file reports the stat data the base's index recorded, so
    // the comparison finds nothing to hash and nothing to write back.
    assert_eq!(diff_files(&env, &plan), []);
    assert_eq!(fs::read(&index).unwrap(), copied, "the index was rewritten");
}

#[test]
fn a_shell_command_sees_and_writes_the_merged_tree() {
    let env = Env::new();
    let repo = user_repo(env.root());
    let plan = plan_in(&env, Phase::Execute);
    let command = "cat a.txt > copy.txt && echo more >> docs/readme.md && mv src lib && ls";
    let shell = tool(
        &env,
        &plan,
        &repo,
        "shell_execute",
        json!({ "command": command }),
    );
    assert_eq!(shell["result"]["exit_code"], 0, "{shell:#}");
    assert!(
        shell["result"]["stdout"]
            .as_str()
            .unwrap()
            .contains("tracked.txt"),
        "{shell:#}"
    );
    assert_eq!(read(&env, &plan, &repo, "copy.txt"), "alpha\n");
    assert_eq!(
        read(&env, &plan, &repo, "lib/lib.rs"),
        "pub fn answer() -> u32 {\n    41\n}\n"
    );
    let mut files = diff_files(&env, &plan);
    files.sort();
    assert_eq!(
        files,
        [
            ("copy.txt".into(), "added".into()),
            ("docs/readme.md".into(), "modified".into()),
            ("lib/lib.rs".into(), "renamed".into()),
        ]
    );
    let upper = sandbox_root(&env, &plan).join("upper");
    assert_eq!(
        fs::read_to_string(upper.join("copy.txt")).unwrap(),
        "alpha\n"
    );
    assert!(!bases(&env)[0].join("work/copy.txt").exists());
}

#[test]
fn apply_of_a_shared_sandbox_commits_exactly_its_change_and_cleanup_then_removes_the_base() {
    let env = Env::new();
    let repo = user_repo(env.root());
    git(&repo, &["checkout", "-q", "--", "."]);
    fs::remove_file(repo.join("untracked.txt")).unwrap();
    let before = git_out(&repo, &["rev-parse", "HEAD"]).trim().to_string();
    script_project(
        &env,
        &repo,
        "\"echo added >> a.txt; echo new > new.txt; rm b.txt\"",
    );
    let (doc, code) = run(
        &env,
        &[
            "plan",
            "use",
            "local/step",
            "app",
            "--automation-profile",
            "trusted",
        ],
    );
    assert_eq!(code, 3, "{doc:#}");
    let id = doc["data"]["plan_id"].as_str().unwrap().to_string();
    assert_eq!(bases(&env).len(), 1);
    let (doc, code) = run(&env, &["plan", "apply", "--yes", &id]);
    assert_eq!(code, 0, "{doc:#}");

    let changed = git_out(&repo, &["diff", "--name-status", &before, "HEAD"]);
    assert_eq!(changed.trim(), "M\ta.txt\nD\tb.txt\nA\tnew.txt");
    assert_eq!(
        fs::read_to_string(repo.join("a.txt")).unwrap(),
        "alpha\nadded\n"
    );
    assert_eq!(git_out(&repo, &["status", "--porcelain"]).trim(), "");

    // The applied plan's sandbox no longer names the base, so cleanup takes it away at once
    // and deletes it in the background.
    let (doc, code) = run(&env, &["plan", "cleanup", "--yes"]);
    assert_eq!(code, 0, "{doc:#}");
    assert_eq!(bases(&env), Vec::<PathBuf>::new(), "{doc:#}");
    let trash = env.data_dir.join("sandboxes/bases/.removing");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while fs::read_dir(&trash).is_ok_and(|mut d| d.next().is_some()) {
        assert!(
            std::time::Instant::now() < deadline,
            "the removed base is still being deleted"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}

#[test]
fn an_unprivileged_agents_shares_checkouts_inside_a_user_namespace_of_its_own() {
    let env = Env::new();
    let repo = user_repo(env.root());
    let plan = plan_in(&env, Phase::Execute);
    // Under root (the CI), the commands run as `nobody`, owning the data and the repository.
    let me = {
        use std::os::unix::fs::MetadataExt;
        fs::metadata("/proc/self").unwrap().uid()
    };
    let uid = (me == 0).then_some(65534);
    if let Some(uid) = uid {
        use std::os::unix::fs::PermissionsExt;
        let owner = format!("{uid}:{uid}");
        let chown = std::process::Command::new("chown")
            .args(["-R", &owner])
            .arg(env.root())
            .status()
            .unwrap();
        assert!(chown.success());
        fs::set_permissions(env.root(), fs::Permissions::from_mode(0o755)).unwrap();
    }
    let (doc, code) = run_as(&env, uid, &["diagnostics"]);
    assert_eq!(code, 0, "{doc:#}");
    assert!(
        doc.to_string()
            .contains("(user and mount namespace of its own)"),
        "{doc:#}"
    );
    let target = repo.to_str().unwrap();
    let tool = |name: &str, args: Value| {
        let args = args.to_string();
        let cmd = [
            "tool",
            "run",
            name,
            "--plan",
            &plan,
            "--target-path",
            target,
            "--args",
            &args,
        ];
        let (doc, code) = run_as(&env, uid, &cmd);
        assert_eq!(code, 0, "{name}: {doc:#}");
        doc["data"].clone()
    };
    tool(
        "write_file",
        json!({"path": "a.txt", "content": "changed\n"}),
    );
    let shell = tool(
        "shell_execute",
        json!({"command": "cat a.txt; echo x >> b.txt; id -u"}),
    );
    let stdout = shell["result"]["stdout"].as_str().unwrap().to_string();
    // The namespace maps the user to itself: a step runs as the same uid.
    let expected_uid = uid.unwrap_or(me);
    assert_eq!(stdout, format!("changed\n{expected_uid}\n"), "{shell:#}");
    let upper = sandbox_root(&env, &plan).join("upper");
    assert_eq!(
        fs::read_to_string(upper.join("a.txt")).unwrap(),
        "changed\n"
    );
    assert_eq!(
        fs::read_to_string(upper.join("b.txt")).unwrap(),
        "bravo\nx\n"
    );
    assert_eq!(
        fs::read_to_string(bases(&env)[0].join("work/a.txt")).unwrap(),
        "alpha\n"
    );
    let (doc, code) = run_as(&env, uid, &["plan", "diff", &plan]);
    assert_eq!(code, 0, "{doc:#}");
    let files: Vec<&str> = doc["data"]["resources"][0]["files"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["path"].as_str().unwrap())
        .collect();
    assert_eq!(files, ["a.txt", "b.txt"], "{doc:#}");
}

#[test]
fn a_shared_checkout_removed_by_hand_is_built_again_under_the_plans_changes() {
    let env = Env::new();
    let repo = user_repo(env.root());
    let plan = plan_in(&env, Phase::Execute);
    let edit = json!({"path": "a.txt", "content": "changed\n"});
    tool(&env, &plan, &repo, "write_file", edit);
    fs::remove_dir_all(&bases(&env)[0]).unwrap();
    assert_eq!(read(&env, &plan, &repo, "a.txt"), "changed\n");
    assert_eq!(read(&env, &plan, &repo, "b.txt"), "bravo\n");
    assert_eq!(
        diff_files(&env, &plan),
        [("a.txt".into(), "modified".into())]
    );
}

/// Runs `command` in a shared sandbox and in a full checkout of the same repository; asserts
/// that `plan diff` reports the same changes for both, and returns whether the shared
/// sandbox's index is still the byte copy of its base's (its snapshots read the upper
/// directory and leave the index alone).
fn same_diff_as_a_full_checkout(command: &str) -> bool {
    let env = Env::new();
    let repo = user_repo(env.root());
    let (shared, full) = (plan_in(&env, Phase::Execute), plan_in(&env, Phase::Execute));
    for (run, plan) in [(run as Run, &shared), (run_full as Run, &full)] {
        let args = json!({ "command": command });
        let shell = tool_with(run, &env, plan, &repo, "shell_execute", args);
        assert_eq!(shell["result"]["exit_code"], 0, "{shell:#}");
    }
    let (ours, theirs) = (diff_of(run, &env, &shared), diff_of(run_full, &env, &full));
    assert!(!theirs.is_empty());
    assert_eq!(ours, theirs);
    let index = sandbox_root(&env, &shared).join("git/index");
    fs::read(index).unwrap() == fs::read(bases(&env)[0].join("git/index")).unwrap()
}

#[test]
fn a_shared_sandbox_reads_its_changes_from_its_upper_directory_as_a_full_scan_sees_them() {
    // Modified, removed, a removed directory, new files in a new directory, an ignored new
    // file, a mode change, a link, and a file rewritten with its own content.
    let command = "echo more >> a.txt && rm b.txt && rm -r docs && mkdir -p new/deep \
                   && echo n > new/deep/n.txt && echo log > new/x.log && chmod +x tracked.txt \
                   && ln -s a.txt link && cat src/lib.rs > lib.tmp && mv lib.tmp src/lib.rs";
    assert!(
        same_diff_as_a_full_checkout(command),
        "the index was rewritten: the snapshot scanned the work tree"
    );
}

#[test]
fn a_directory_made_again_after_its_removal_hides_the_bases_files_beneath_it() {
    // The overlay marks the new `src` opaque: the base's `src/lib.rs` is gone although no
    // whiteout names it.
    let command = "rm -r src && mkdir -p src/deeper && echo other > src/other.rs \
                   && rm -r docs && mkdir docs && echo new > docs/new.md";
    assert!(
        same_diff_as_a_full_checkout(command),
        "the index was rewritten: the snapshot scanned the work tree"
    );
}

#[test]
fn a_file_of_the_base_that_became_a_directory_is_seen_exactly() {
    let command = "rm a.txt && mkdir a.txt && echo inner > a.txt/inner.txt";
    same_diff_as_a_full_checkout(command);
}

#[test]
fn an_edit_by_hand_through_plan_shell_lands_in_the_plans_sandbox_and_nowhere_else() {
    let env = Env::new();
    let repo = user_repo(env.root());
    let (plan, other) = (plan_in(&env, Phase::Execute), plan_in(&env, Phase::Execute));
    read(&env, &plan, &repo, "a.txt");
    read(&env, &other, &repo, "a.txt");
    let edit = "echo by hand >> a.txt && pwd";
    let (doc, code) = run(&env, &shell_args(&plan, edit));
    assert_eq!(code, 0, "{doc:#}");
    assert_eq!(doc["data"]["shared_checkout"], true, "{doc:#}");
    let root = sandbox_root(&env, &plan);
    assert_eq!(doc["data"]["work_dir"], root.join("work").to_str().unwrap());

    assert_eq!(read(&env, &plan, &repo, "a.txt"), "alpha\nby hand\n");
    assert_eq!(
        diff_files(&env, &plan),
        [("a.txt".into(), "modified".into())]
    );
    assert_eq!(
        fs::read_to_string(root.join("upper/a.txt")).unwrap(),
        "alpha\nby hand\n"
    );
    assert_eq!(read(&env, &other, &repo, "a.txt"), "alpha\n");
    let base = &bases(&env)[0];
    assert_eq!(
        fs::read_to_string(base.join("work/a.txt")).unwrap(),
        "alpha\n"
    );

    // git in the shell reads the sandbox's own repository: the plan's changes against its
    // base, a file written by a tool (and checkpointed) as well as the hand edit.
    tool(
        &env,
        &plan,
        &repo,
        "write_file",
        json!({"path": "tool.txt", "content": "by a tool\n"}),
    );
    let status = env.root().join("status.txt");
    let git_status = format!("git status --porcelain > {}", status.display());
    let (doc, code) = run(&env, &shell_args(&plan, &git_status));
    assert_eq!(code, 0, "{doc:#}");
    assert_eq!(
        fs::read_to_string(&status).unwrap(),
        " M a.txt\n?? tool.txt\n"
    );

    // A command that fails says so, with its status.
    let (doc, code) = run(&env, &shell_args(&plan, "exit 4"));
    assert_ne!(code, 0, "{doc:#}");
    assert!(doc.to_string().contains("status 4"), "{doc:#}");
}

#[test]
fn plan_shell_runs_in_a_full_checkouts_work_tree_too() {
    let env = Env::new();
    let repo = user_repo(env.root());
    let plan = plan_in(&env, Phase::Execute);
    tool_with(
        run_full,
        &env,
        &plan,
        &repo,
        "list_directory",
        json!({"path": "."}),
    );
    let (doc, code) = run_full(&env, &shell_args(&plan, "echo by hand > hand.txt"));
    assert_eq!(code, 0, "{doc:#}");
    assert_eq!(doc["data"]["shared_checkout"], false, "{doc:#}");
    let work = sandbox_root(&env, &plan).join("work");
    assert_eq!(
        fs::read_to_string(work.join("hand.txt")).unwrap(),
        "by hand\n"
    );
    assert_eq!(diff_of(run_full, &env, &plan)[0]["path"], "hand.txt");
}

#[test]
fn another_process_mounting_the_same_sandbox_does_not_break_the_writes_of_one_that_holds_it() {
    let env = Env::new();
    let repo = user_repo(env.root());
    let plan = plan_in(&env, Phase::Execute);
    read(&env, &plan, &repo, "a.txt");
    // The shell holds the sandbox mounted while `plan diff` mounts and unmounts it too; then
    // the shell rewrites a file of the base, which the overlay copies up through its work
    // directory.
    let started = std::time::Instant::now();
    let mut shell = env.local_command(&shell_args(&plan, "sleep 2 && echo more >> a.txt"));
    let shell = shell.env(SWITCH, "1").output_in_background();
    while started.elapsed() < std::time::Duration::from_millis(500) {
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    assert_eq!(diff_files(&env, &plan), []);
    assert!(
        started.elapsed() < std::time::Duration::from_secs(2),
        "too slow to overlap"
    );
    let out = shell.join().unwrap().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(read(&env, &plan, &repo, "a.txt"), "alpha\nmore\n");
}

/// A command's output, collected on another thread.
trait InBackground {
    fn output_in_background(
        &mut self,
    ) -> std::thread::JoinHandle<std::io::Result<std::process::Output>>;
}

impl InBackground for std::process::Command {
    fn output_in_background(
        &mut self,
    ) -> std::thread::JoinHandle<std::io::Result<std::process::Output>> {
        let child = self
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn();
        std::thread::spawn(move || child?.wait_with_output())
    }
}

#[test]
fn plan_shell_of_a_plan_whose_sandbox_was_removed_says_so() {
    let env = Env::new();
    let repo = user_repo(env.root());
    let plan = plan_in(&env, Phase::Execute);
    tool(&env, &plan, &repo, "list_directory", json!({"path": "."}));
    let (doc, code) = run(&env, &["plan", "cancel", "--yes", &plan]);
    assert_eq!(code, 0, "{doc:#}");
    let (doc, code) = run(&env, &["plan", "cleanup", "--yes"]);
    assert_eq!(code, 0, "{doc:#}");
    let (doc, code) = run(&env, &["plan", "shell", &plan, "--", "true"]);
    assert_ne!(code, 0, "{doc:#}");
    let message = doc["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("were released (after Apply) or removed"),
        "{doc:#}"
    );
}

#[test]
fn a_diff_after_a_diff_sees_an_edit_that_kept_the_files_size() {
    // A snapshot remembers its upper directory's entries; an entry written since, even to
    // the same size within the same second, is read again.
    let env = Env::new();
    let repo = user_repo(env.root());
    let plan = plan_in(&env, Phase::Execute);
    let edit = json!({"path": "a.txt", "content": "changed\n"});
    tool(&env, &plan, &repo, "write_file", edit);
    let added = |files: &[Value]| -> Vec<String> {
        files[0]["hunks"][0]["lines"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|l| l["kind"] == "added")
            .map(|l| l["text"].as_str().unwrap().to_string())
            .collect()
    };
    assert_eq!(added(&diff_of(run, &env, &plan)), ["changed"]);
    assert_eq!(added(&diff_of(run, &env, &plan)), ["changed"]);
    assert!(
        sandbox_root(&env, &plan)
            .join("git/snapshot-cache.json")
            .is_file()
    );
    let (doc, code) = run(&env, &shell_args(&plan, "printf 'chanGed\\n' > a.txt"));
    assert_eq!(code, 0, "{doc:#}");
    assert_eq!(added(&diff_of(run, &env, &plan)), ["chanGed"]);
}
