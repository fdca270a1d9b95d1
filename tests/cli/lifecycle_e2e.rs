//! End to end on temp git repositories with the offline actors: the gates of each automation
//! profile, one commit with the expected content and trailers, the user's unrelated edits
//! surviving; every apply refusal leaving the repository byte-identical and the plan
//! recoverable; `kill -9` during Execute and resume; cancellation from a second process.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::lifecycle::{SCRIPT_ACTION, Setup, setup, setup_with, use_plan};
use crate::support::{git, git_out};

/// Everything a refusal must leave alone: HEAD, refs, index, working tree files, and the
/// object database.
fn repo_bytes(dir: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).unwrap() {
            let p = entry.unwrap().path();
            let meta = std::fs::symlink_metadata(&p).unwrap();
            if meta.is_dir() {
                stack.push(p);
            } else if !p.ends_with(".git/index.lock") {
                out.push((p.clone(), std::fs::read(&p).unwrap_or_default()));
            }
        }
    }
    out.sort();
    out
}

/// The user's unrelated edits: an untracked file, an unstaged change, a staged change.
fn user_edits(repo: &Path) {
    std::fs::write(repo.join("scratch.txt"), "mine\n").unwrap();
    std::fs::write(repo.join("src/lib.rs"), "pub fn f() {}\n// wip\n").unwrap();
    std::fs::write(repo.join("docs/guide.md"), "# Guide\nstaged\n").unwrap();
    git(repo, &["add", "docs/guide.md"]);
}

fn assert_user_edits_survive(repo: &Path) {
    assert_eq!(
        std::fs::read_to_string(repo.join("scratch.txt")).unwrap(),
        "mine\n"
    );
    assert_eq!(
        std::fs::read_to_string(repo.join("src/lib.rs")).unwrap(),
        "pub fn f() {}\n// wip\n"
    );
    assert_eq!(
        git_out(repo, &["diff", "--cached", "--name-only"]),
        "docs/guide.md\n"
    );
    assert_eq!(git_out(repo, &["diff", "--name-only"]), "src/lib.rs\n");
}

fn run(s: &Setup, args: &[&str]) -> (Value, i32) {
    s.env.json(args)
}

fn gate(doc: &Value) -> &str {
    doc["data"]["approval"]["context"]["gate"]
        .as_str()
        .unwrap_or("")
}

#[test]
fn every_profile_stops_exactly_at_its_gates_and_applies_one_commit() {
    for profile in ["manual", "supervised", "trusted", "full-auto"] {
        let s = setup();
        let before = git_out(&s.repo, &["rev-parse", "HEAD"]).trim().to_string();
        user_edits(&s.repo);
        let (doc, code, id) = use_plan(&s, profile);
        let mut trail = vec![(code, gate(&doc).to_string())];
        if profile == "manual" {
            let (doc, code) = run(&s, &["plan", "execute", &id]);
            trail.push((code, gate(&doc).to_string()));
        }
        if matches!(profile, "manual" | "supervised") {
            let (doc, code) = run(&s, &["plan", "execute", &id]);
            trail.push((code, gate(&doc).to_string()));
            // Execute is complete: another `plan execute` has nothing to do.
            let (doc, code) = run(&s, &["plan", "execute", &id]);
            assert_eq!(code, 0, "{doc:#}");
            assert!(
                doc["data"]["next"]
                    .as_str()
                    .unwrap()
                    .ends_with(&format!("plan apply {id}"))
            );
        }
        if profile != "full-auto" {
            // No terminal and no --yes: exit 3, nothing applied.
            let (doc, code) = run(&s, &["plan", "apply", &id]);
            assert_eq!(code, 3, "{doc:#}");
            assert_eq!(doc["data"]["files"], 2, "{doc:#}");
            let (doc, code) = run(&s, &["plan", "apply", "--yes", &id]);
            assert_eq!(code, 0, "{profile}: {doc:#}");
            trail.push((code, "applied".into()));
        } else {
            trail.push((code, doc["data"]["phase"].as_str().unwrap().to_string()));
        }
        let expected: Vec<(i32, String)> = match profile {
            "manual" => vec![
                (3, "strategize"),
                (3, "execute"),
                (3, "apply"),
                (0, "applied"),
            ],
            "supervised" => vec![(3, "execute"), (3, "apply"), (0, "applied")],
            "trusted" => vec![(3, "apply"), (0, "applied")],
            _ => vec![(0, ""), (0, "applied")],
        }
        .into_iter()
        .map(|(c, g)| (c, g.to_string()))
        .collect();
        assert_eq!(trail, expected, "{profile}");
        let (status, _) = run(&s, &["plan", "status", &id]);
        assert_eq!(
            (&status["data"]["phase"], &status["data"]["state"]),
            (&json!("applied"), &json!("complete"))
        );
        // Exactly one new non-merge commit on main whose parent is the old tip.
        let log = git_out(
            &s.repo,
            &["log", "--format=%H %P", &format!("{before}..HEAD")],
        );
        let commits: Vec<&str> = log.lines().collect();
        assert_eq!(commits.len(), 1, "{profile}: {log}");
        let parents: Vec<&str> = commits[0].split(' ').skip(1).collect();
        assert_eq!(parents, [before.as_str()], "{profile}");
        let message = git_out(&s.repo, &["log", "-1", "--format=%B"]);
        assert!(message.contains(&format!("Plan-Id: {id}\n")), "{message}");
        assert!(message.contains("Action: local/notes\n"), "{message}");
        assert_eq!(
            git_out(&s.repo, &["show", "HEAD:NOTES.md"]),
            "Release 1.2\nMore\n"
        );
        assert_eq!(
            git_out(&s.repo, &["show", "HEAD:README"]),
            "demo\nsee NOTES.md\n"
        );
        assert_eq!(
            git_out(&s.repo, &["show", "--name-only", "--format=", "HEAD"]),
            "NOTES.md\nREADME\n"
        );
        assert_eq!(
            std::fs::read_to_string(s.repo.join("NOTES.md")).unwrap(),
            "Release 1.2\nMore\n"
        );
        assert_user_edits_survive(&s.repo);
        assert_eq!(
            git_out(&s.repo, &["rev-parse", "--abbrev-ref", "HEAD"]),
            "main\n"
        );
    }
}

/// A plan executed to (execute, complete) under `trusted` (exit 3 at the apply gate).
fn executed(action: &str) -> (Setup, String) {
    let s = setup_with(action);
    let (doc, code, id) = use_plan(&s, "trusted");
    assert_eq!((code, gate(&doc)), (3, "apply"), "{doc:#}");
    (s, id)
}

fn assert_refused(s: &Setup, id: &str, what: &str) -> Value {
    let before = repo_bytes(&s.repo);
    let (doc, code) = run(s, &["plan", "apply", "--yes", id]);
    assert_eq!(code, 1, "{what}: {doc:#}");
    assert_eq!(doc["error"]["code"], "PLAN_ERRORED", "{what}");
    assert!(
        repo_bytes(&s.repo) == before,
        "{what}: the repository changed"
    );
    let (status, _) = run(s, &["plan", "status", id]);
    assert_eq!(
        (&status["data"]["phase"], &status["data"]["state"]),
        (&json!("apply"), &json!("errored")),
        "{what}"
    );
    let sandboxes = s.env.data_dir.join("sandboxes").join(id);
    assert!(sandboxes.exists(), "{what}: the sandbox is kept");
    doc
}

#[test]
fn apply_refuses_a_user_edit_of_a_changed_file_and_recovers_once_it_is_committed() {
    let (s, id) = executed(SCRIPT_ACTION);
    std::fs::write(s.repo.join("README"), "demo\nmy edit\n").unwrap();
    let doc = assert_refused(&s, &id, "uncommitted edit");
    assert!(
        doc["error"]["message"]
            .as_str()
            .unwrap()
            .contains("README has uncommitted changes"),
        "{doc:#}"
    );
    // Undo the edit: the plan is recoverable with the same command.
    git(&s.repo, &["checkout", "--", "README"]);
    let (doc, code) = run(&s, &["plan", "apply", "--yes", &id]);
    assert_eq!(code, 0, "{doc:#}");
    assert_eq!(
        git_out(&s.repo, &["show", "HEAD:README"]),
        "demo\nsee NOTES.md\n"
    );
}

#[test]
fn apply_refuses_a_merge_conflict_and_merges_unrelated_commits() {
    let (s, id) = executed(SCRIPT_ACTION);
    std::fs::write(s.repo.join("README"), "demo\nupstream\n").unwrap();
    git(&s.repo, &["commit", "-qam", "upstream change"]);
    let doc = assert_refused(&s, &id, "merge conflict");
    assert!(
        doc["error"]["message"]
            .as_str()
            .unwrap()
            .contains("conflict"),
        "{doc:#}"
    );

    // An unrelated commit on the branch is merged three-way; the new commit's parent is it.
    let (s, id) = executed(SCRIPT_ACTION);
    std::fs::write(s.repo.join("docs/other.md"), "other\n").unwrap();
    git(&s.repo, &["add", "docs/other.md"]);
    git(&s.repo, &["commit", "-qm", "unrelated"]);
    let tip = git_out(&s.repo, &["rev-parse", "HEAD"]);
    let (doc, code) = run(&s, &["plan", "apply", "--yes", &id]);
    assert_eq!(code, 0, "{doc:#}");
    assert_eq!(git_out(&s.repo, &["rev-parse", "HEAD^"]), tip);
    assert_eq!(git_out(&s.repo, &["show", "HEAD:docs/other.md"]), "other\n");
    assert_eq!(
        git_out(&s.repo, &["show", "HEAD:NOTES.md"]),
        "Release 1.2\nMore\n"
    );
}

#[test]
fn apply_refuses_when_the_branch_was_renamed_or_head_detached() {
    let (s, id) = executed(SCRIPT_ACTION);
    git(&s.repo, &["branch", "-m", "main", "trunk"]);
    let doc = assert_refused(&s, &id, "renamed branch");
    assert!(
        doc["error"]["message"]
            .as_str()
            .unwrap()
            .contains("branch trunk"),
        "{doc:#}"
    );
    git(&s.repo, &["branch", "-m", "trunk", "main"]);
    git(&s.repo, &["checkout", "-q", "--detach"]);
    let doc = assert_refused(&s, &id, "detached HEAD");
    assert!(
        doc["error"]["message"]
            .as_str()
            .unwrap()
            .contains("detached"),
        "{doc:#}"
    );
    git(&s.repo, &["checkout", "-q", "main"]);
    let (doc, code) = run(&s, &["plan", "apply", "--yes", &id]);
    assert_eq!(code, 0, "{doc:#}");
}

#[test]
fn apply_refuses_when_a_required_validation_fails_on_the_merged_tree() {
    // The validation passes in the sandbox, but fails once a file the user committed meanwhile
    // is merged in: Apply re-runs it on the merged tree.
    let (s, id) = executed(SCRIPT_ACTION);
    let (doc, code) = run(
        &s,
        &[
            "project",
            "validation",
            "add",
            "--timeout",
            "30",
            "app",
            "test ! -f BLOCKER",
        ],
    );
    assert_eq!(code, 0, "{doc:#}");
    std::fs::write(s.repo.join("BLOCKER"), "x\n").unwrap();
    git(&s.repo, &["add", "BLOCKER"]);
    git(&s.repo, &["commit", "-qm", "blocker"]);
    let doc = assert_refused(&s, &id, "validation");
    assert!(
        doc["error"]["message"]
            .as_str()
            .unwrap()
            .contains("test ! -f BLOCKER"),
        "{doc:#}"
    );
    let (status, _) = run(&s, &["plan", "status", &id]);
    let v = &status["data"]["validation_summary"]["apply"][0];
    assert_eq!(
        (&v["passed"], &v["required"]),
        (&json!(false), &json!(true)),
        "{status:#}"
    );
}

#[test]
fn apply_without_confirmation_changes_nothing() {
    let (s, id) = executed(SCRIPT_ACTION);
    let before = repo_bytes(&s.repo);
    // No terminal: exit 3 naming the command.
    let (doc, code) = run(&s, &["plan", "apply", &id]);
    assert_eq!(code, 3, "{doc:#}");
    assert!(
        doc["error"]["suggestions"][0]
            .as_str()
            .unwrap()
            .contains("plan apply --yes")
    );
    // A terminal where the user answers "n": declined, exit 1, nothing changed.
    let cmd = s
        .env
        .command(&["plan", "apply", &id])
        .get_program()
        .to_string_lossy()
        .into_owned();
    let line = format!(
        "{} --data-dir {} --config-path {} plan apply {id}",
        cmd,
        s.env.data_dir.display(),
        s.env.config_path.display()
    );
    let mut child = Command::new("script")
        .args(["-qec", &line, "/dev/null"])
        .env("HOME", s.env.root())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(1500));
    {
        use std::io::Write;
        let stdin = child.stdin.as_mut().unwrap();
        stdin.write_all(b"n\n").unwrap();
    }
    let out = child.wait_with_output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("Apply changes for plan"), "{text}");
    assert!(text.contains("declined"), "{text}");
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(repo_bytes(&s.repo) == before);
    let (status, _) = run(&s, &["plan", "status", &id]);
    assert_eq!(
        (&status["data"]["phase"], &status["data"]["state"]),
        (&json!("execute"), &json!("complete"))
    );
}

const SLOW_ACTION: &str = r#"name: local/notes
description: Write release notes for {{ version }}
definition-of-done: NOTES.md names version {{ version }}
strategy-actor: builtin/checklist-strategist
execution-actor: builtin/script-executor
arguments:
  - name: version
    type: string
    required: true
script:
  - name: write
    run: printf 'Release %s\n' {{ version }} > NOTES.md
  - name: slow
    run: printf 'partial\n' >> NOTES.md; sleep 8; printf 'More\n' >> NOTES.md
  - name: readme
    run: printf 'see NOTES.md\n' >> README
"#;

fn plan_json(s: &Setup, id: &str) -> Value {
    run(s, &["plan", "status", id]).0
}

fn wait_for(what: &str, limit: Duration, mut pred: impl FnMut() -> bool) {
    let deadline = Instant::now() + limit;
    while !pred() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn kill_9_during_execute_then_resume_gives_the_same_result_as_an_uninterrupted_run() {
    // The uninterrupted run.
    let (clean, clean_id) = executed(SLOW_ACTION);
    let (doc, code) = run(&clean, &["plan", "apply", "--yes", &clean_id]);
    assert_eq!(code, 0, "{doc:#}");
    let clean_tree = git_out(&clean.repo, &["rev-parse", "HEAD^{tree}"]);

    let s = setup_with(SLOW_ACTION);
    let (_, _, id) = use_plan(&s, "supervised");
    let mut driver = s
        .env
        .command(&["--format", "json", "plan", "execute", &id])
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    wait_for("the slow step to start", Duration::from_secs(60), || {
        plan_json(&s, &id)["data"]["steps"][1]["status"] == "running"
    });
    std::thread::sleep(Duration::from_millis(300));
    driver.kill().unwrap(); // SIGKILL
    driver.wait().unwrap();
    let status = plan_json(&s, &id);
    assert_eq!(status["data"]["state"], "queued", "{status:#}");
    assert_eq!(status["data"]["state_reason"], "interrupted");
    assert!(
        status["messages"][0]["text"]
            .as_str()
            .unwrap()
            .contains("interrupted")
    );
    let (doc, code) = run(&s, &["plan", "execute", &id]);
    assert_eq!((code, gate(&doc)), (3, "apply"), "{doc:#}");
    let steps = &plan_json(&s, &id)["data"]["steps"];
    assert_eq!(
        steps[1]["runs"], 2,
        "the slow step ran again from its start"
    );
    // The command the dead driver left running was killed: nothing appends later.
    std::thread::sleep(Duration::from_secs(9));
    let (doc, code) = run(&s, &["plan", "apply", "--yes", &id]);
    assert_eq!(code, 0, "{doc:#}");
    assert_eq!(
        git_out(&s.repo, &["show", "HEAD:NOTES.md"]),
        "Release 1.2\npartial\nMore\n"
    );
    assert_eq!(git_out(&s.repo, &["rev-parse", "HEAD^{tree}"]), clean_tree);
}

const WAIT_ACTION: &str = r#"name: local/notes
description: Wait
definition-of-done: waited
strategy-actor: builtin/checklist-strategist
execution-actor: builtin/script-executor
arguments:
  - name: version
    type: string
    required: true
script:
  - name: wait
    run: sleep 30
"#;

#[test]
fn a_second_process_gets_conflict_and_plan_cancel_stops_the_driver_within_2_seconds() {
    let s = setup_with(WAIT_ACTION);
    let (_, _, id) = use_plan(&s, "supervised");
    let driver = s
        .env
        .command(&["--format", "json", "plan", "execute", &id])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    wait_for("the step to start", Duration::from_secs(60), || {
        plan_json(&s, &id)["data"]["steps"][0]["status"] == "running"
    });
    let (doc, code) = run(&s, &["plan", "execute", &id]);
    assert_eq!(
        (code, doc["error"]["code"].as_str()),
        (1, Some("CONFLICT")),
        "{doc:#}"
    );
    assert!(
        doc["error"]["message"]
            .as_str()
            .unwrap()
            .contains(&format!("plan is being run by pid {}", driver.id())),
        "{doc:#}"
    );
    // Measure from the moment the request is in the database (not from when the `plan cancel`
    // process starts, which a loaded machine can delay) to the moment the driver has recorded
    // the cancellation.
    let db = crate::support::db_file(&s.env);
    let plan_id: cleveragents_engine::domain::id::Id = id.parse().unwrap();
    let watcher = std::thread::spawn(move || {
        let store = cleveragents_engine::store::Store::open(&db).unwrap();
        let deadline = Instant::now() + Duration::from_secs(60);
        let mut requested = None;
        loop {
            assert!(
                Instant::now() < deadline,
                "the cancellation was never recorded"
            );
            if requested.is_none()
                && cleveragents_engine::lease::cancel_requested(&store, &plan_id).unwrap()
            {
                requested = Some(Instant::now());
            }
            let state = store.plan(&plan_id).unwrap().unwrap().state();
            if state == cleveragents_engine::domain::lifecycle::ProcessingState::Cancelled {
                // Requested and recorded between two polls: within 10 ms.
                return requested.map_or(Duration::ZERO, |at| at.elapsed());
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    });
    let (doc, code) = run(&s, &["plan", "cancel", "-r", "too slow", &id]);
    assert_eq!(code, 0, "{doc:#}");
    assert_eq!(doc["data"]["plan"]["state"], "cancelled");
    let took = watcher.join().unwrap();
    assert!(
        took < Duration::from_secs(2),
        "recorded {took:?} after the request"
    );
    let out = driver.wait_with_output().unwrap();
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(doc["error"]["code"], "CANCELLED", "{doc:#}");
    assert_eq!(out.status.code(), Some(1));
    let events = cleveragents_engine::events::after(
        &cleveragents_engine::store::Store::open(&crate::support::db_file(&s.env)).unwrap(),
        0,
        Some(&id.parse().unwrap()),
        100,
    )
    .unwrap();
    let last = events.last().unwrap();
    let cleveragents_engine::events::EventKind::PlanCancelled(cancelled) = &last.kind else {
        panic!("not plan_cancelled: {last:?}");
    };
    assert_eq!(cancelled.reason, "too slow");
    // The command's process group was killed and reaped: no running-<pid> marker is left.
    let plan_dir = s.env.data_dir.join("sandboxes").join(&id);
    let markers: Vec<_> = std::fs::read_dir(&plan_dir)
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with("running-"))
        .collect();
    assert!(markers.is_empty(), "{markers:?}");
}

#[test]
fn a_directory_resource_is_applied_file_by_file_after_checking_its_base_content() {
    let env = crate::support::Env::new();
    let dir = env.root().join("site");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("README"), "demo\n").unwrap();
    let ok = |args: &[&str]| {
        let (doc, code) = env.json(args);
        assert_eq!(code, 0, "{args:?}: {doc:#}");
        doc
    };
    ok(&[
        "resource",
        "add",
        "fs-directory",
        "local/site",
        "--path",
        dir.to_str().unwrap(),
    ]);
    ok(&["project", "create", "--resource", "local/site", "app"]);
    let file = env.root().join("action.yaml");
    std::fs::write(&file, SCRIPT_ACTION).unwrap();
    ok(&[
        "action",
        "create",
        "--available",
        "--config",
        file.to_str().unwrap(),
    ]);
    let use_it = || {
        let (doc, code) = env.json(&[
            "plan",
            "use",
            "local/notes",
            "app",
            "--arg",
            "version=1.2",
            "--automation-profile",
            "trusted",
        ]);
        assert_eq!(code, 3, "{doc:#}");
        doc["data"]["plan_id"].as_str().unwrap().to_string()
    };
    // The real README changed meanwhile: refused, nothing written.
    let first = use_it();
    std::fs::write(dir.join("README"), "demo\nedited\n").unwrap();
    let (doc, code) = env.json(&["plan", "apply", "--yes", &first]);
    assert_eq!(
        (code, doc["error"]["code"].as_str()),
        (1, Some("PLAN_ERRORED")),
        "{doc:#}"
    );
    assert!(!dir.join("NOTES.md").exists());
    assert_eq!(
        std::fs::read_to_string(dir.join("README")).unwrap(),
        "demo\nedited\n"
    );
    // A plan made on the current content applies.
    let second = use_it();
    let (doc, code) = env.json(&["plan", "apply", "--yes", &second]);
    assert_eq!(code, 0, "{doc:#}");
    assert_eq!(
        std::fs::read_to_string(dir.join("NOTES.md")).unwrap(),
        "Release 1.2\nMore\n"
    );
    assert_eq!(
        std::fs::read_to_string(dir.join("README")).unwrap(),
        "demo\nedited\nsee NOTES.md\n"
    );
    assert_eq!(
        doc["data"]["apply_summary"]["resources"][0]["commit"],
        Value::Null
    );
}
