//! What a plan tells its user on real repositories: step output in `plan logs` and `plan
//! status`, recovery hints that work as printed, the diff after apply, multi-project run
//! steps; each test named after the behaviour that broke.

use std::fs;

use serde_json::Value;

use super::lifecycle::{Setup, setup_with};
use crate::support::{Env, git_out};

fn check<'a>(diagnostics: &'a Value, name: &str) -> &'a Value {
    diagnostics["data"]["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == name)
        .unwrap_or_else(|| panic!("no check {name}: {diagnostics:#}"))
}

#[test]
fn a_log_file_that_cannot_be_opened_turns_file_logging_off_with_a_warning_instead_of_a_panic() {
    let env = Env::new();
    // A directory where the log file goes cannot be opened for appending, even by root (for
    // whom a read-only data directory is still writable).
    fs::create_dir_all(env.data_dir.join("logs/agents.log")).unwrap();
    for args in [
        &["diagnostics"][..],
        &["info"],
        &["plan", "list"],
        &["action", "list"],
    ] {
        let out = env
            .command(&["--format", "json"])
            .args(args)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!stderr.contains("panicked"), "{args:?}: {stderr}");
        assert_ne!(out.status.code(), Some(101), "{args:?}: {stderr}");
        assert!(
            stderr.contains("logging to a file is off") && stderr.contains("agents.log"),
            "{args:?} warns once on stderr: {stderr}"
        );
        let doc: Value = serde_json::from_slice(&out.stdout).expect("stdout stays JSON");
        assert!(doc["status"].is_string(), "{doc:#}");
    }
    let (doc, _) = env.json(&["diagnostics"]);
    let log = check(&doc, "Log file");
    assert_eq!(log["status"], "warn", "{log:#}");
    assert!(
        log["details"]
            .as_str()
            .unwrap()
            .contains("without a log file"),
        "{log:#}"
    );
    assert!(
        log["fix"].as_str().unwrap().contains("--data-dir"),
        "{log:#}"
    );
}

#[test]
fn diagnostics_reports_a_writable_log_file_as_ok() {
    let env = Env::new();
    let (doc, _) = env.json(&["diagnostics"]);
    assert_eq!(check(&doc, "Log file")["status"], "ok", "{doc:#}");
    assert!(env.data_dir.join("logs/agents.log").is_file());
}

/// An action whose second step prints to both streams and fails.
const FAILING_ACTION: &str = r#"name: local/notes
definition-of-done: NOTES.md exists and the check passes
strategy-actor: builtin/checklist-strategist
execution-actor: builtin/script-executor
script:
  - name: write
    run: printf 'Release\n' > NOTES.md; seq 1 12
  - name: check
    run: "echo checking NOTES.md; echo 'NOTES.md - missing version' >&2; exit 3"
"#;

/// An action that writes NOTES.md and succeeds.
const WRITING_ACTION: &str = r#"name: local/notes
definition-of-done: NOTES.md exists
strategy-actor: builtin/checklist-strategist
execution-actor: builtin/script-executor
script:
  - name: write
    run: printf 'Release\n' > NOTES.md
"#;

/// A plan of `action` under full-auto on a fresh project; `dirty` leaves an uncommitted
/// NOTES.md in the checkout first, so that Apply refuses. Returns the setup, the plan id and
/// the `plan use` envelope.
fn failed_plan(action: &str, dirty: bool) -> (Setup, String, Value) {
    let s = setup_with(action);
    if dirty {
        fs::write(s.repo.join("NOTES.md"), "mine\n").unwrap();
    }
    let (doc, code) = s.env.json(&[
        "plan",
        "use",
        "local/notes",
        "app",
        "--automation-profile",
        "full-auto",
    ]);
    assert_eq!(
        (code, doc["error"]["code"].as_str()),
        (1, Some("PLAN_ERRORED")),
        "{doc:#}"
    );
    let id = doc["data"]["plan_id"].as_str().unwrap().to_string();
    (s, id, doc)
}

/// Every recovery hint a failure prints, as printed: the error's suggestions, and the lists
/// of `plan status` and `plan errors` in JSON and in plain text.
fn printed_hints(s: &Setup, id: &str, use_doc: &Value) -> Vec<String> {
    let strings = |v: &Value| -> Vec<String> {
        v.as_array()
            .unwrap_or_else(|| panic!("not a list: {v:#}"))
            .iter()
            .map(|h| h.as_str().unwrap().to_string())
            .collect()
    };
    let mut hints = strings(&use_doc["error"]["suggestions"]);
    let (status, _) = s.env.json(&["plan", "status", id]);
    hints.extend(strings(&status["data"]["recovery_hints"]));
    let (errors, _) = s.env.json(&["plan", "errors", id]);
    hints.extend(strings(&errors["data"]["suggestions"]));
    for (args, title) in [
        (["plan", "status"], "Recovery"),
        (["plan", "errors"], "Recovery Suggestions"),
    ] {
        let out = s.env.run(&["--format", "plain", args[0], args[1], id]);
        let text = String::from_utf8(out.stdout).unwrap();
        let listed: Vec<String> = text
            .lines()
            .skip_while(|l| *l != title)
            .skip(1)
            .take_while(|l| !l.trim().is_empty())
            .map(|l| l.trim().to_string())
            .collect();
        assert!(!listed.is_empty(), "{title} in:\n{text}");
        hints.extend(listed);
    }
    let mut unique = Vec::new();
    for h in hints {
        if !unique.contains(&h) {
            unique.push(h);
        }
    }
    unique
}

/// The command of a hint line (`what: agents ...` or `agents ...`).
fn command_of(hint: &str) -> &str {
    match hint.find("agents ") {
        Some(i) => &hint[i..],
        None => panic!("a hint without a command: {hint}"),
    }
}

/// Runs a printed command exactly as a user pastes it: no --data-dir or --config-path but the
/// ones it carries, HOME in the temp root (so a command without them finds nothing).
fn run_printed(s: &Setup, command: &str) -> (i32, Value) {
    let words = shell_words::split(command).unwrap();
    assert_eq!(words[0], "agents", "{command}");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_agents"))
        .args(&words[1..])
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap())
        .env("HOME", s.env.root())
        .env("AGENTS_FORMAT", "json")
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "`{command}` printed no JSON ({e}): {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    });
    (out.status.code().unwrap(), doc)
}

/// A command is accepted when it ran: it succeeded, asks a human (exit 3), or ran the plan
/// again and the plan failed again. A refusal (wrong state, unknown plan, bad usage) is not.
fn accepted(code: i32, doc: &Value) -> bool {
    code == 0 || code == 3 || (code == 1 && doc["error"]["code"] == "PLAN_ERRORED")
}

fn every_hint_runs_as_printed(action: &str, dirty: bool, phase: &str) {
    let (s, id, doc) = failed_plan(action, dirty);
    assert_eq!(doc["data"]["phase"], phase, "{doc:#}");
    let hints = printed_hints(&s, &id, &doc);
    let data_dir = s.env.data_dir.display().to_string();
    for h in &hints {
        let cmd = command_of(h);
        assert!(
            cmd.contains(&format!("--data-dir {data_dir}")) && cmd.contains("--config-path"),
            "`{h}` repeats --data-dir and --config-path"
        );
    }
    // Each command runs on a fresh copy of the same failure (a cancel ends the plan).
    let commands: Vec<String> = hints.iter().map(|h| command_of(h).to_string()).collect();
    for (i, cmd) in commands.iter().enumerate() {
        let (s, id2, doc) = failed_plan(action, dirty);
        let again: Vec<String> = printed_hints(&s, &id2, &doc)
            .iter()
            .map(|h| command_of(h).to_string())
            .collect();
        let mine = again
            .iter()
            .find(|c| {
                c.replace(&id2, "ID")
                    .replace(&s.env.root().display().to_string(), "ROOT")
                    == cmd
                        .replace(&id, "ID")
                        .replace(&data_dir.replace("/data", ""), "ROOT")
            })
            .unwrap_or_else(|| panic!("hint {i} `{cmd}` not printed again: {again:#?}"));
        // A template runs once the user puts a value in place of its placeholder.
        let filled = mine.replace("<guidance>", "'write the file again'");
        let (code, out) = run_printed(&s, &filled);
        assert!(
            accepted(code, &out),
            "`{mine}` was refused (exit {code}): {out:#}"
        );
    }
}

/// `plan prompt`'s template, typed as printed with its `<guidance>` placeholder, is refused and
/// records nothing.
#[test]
fn the_plan_prompt_template_typed_with_its_placeholder_is_refused() {
    let (s, id, _doc) = failed_plan(FAILING_ACTION, false);
    let template = format!(
        "agents --data-dir {} --config-path {} plan prompt {id} <guidance>",
        shell_words::quote(&s.env.data_dir.display().to_string()),
        shell_words::quote(&s.env.config_path.display().to_string()),
    );
    let (code, out) = run_printed(&s, &template);
    assert_eq!(
        (code, out["error"]["code"].as_str()),
        (1, Some("INVALID_INPUT")),
        "{out:#}"
    );
    assert!(out["error"].to_string().contains("placeholder"), "{out:#}");
    let st = crate::cli::correction::store(&s.env);
    let pid = id.parse().unwrap();
    assert!(
        st.decisions(&pid)
            .unwrap()
            .iter()
            .all(|d| !format!("{d:?}").contains("<guidance>")),
        "no guidance was recorded"
    );
}

/// A plan whose strategist and executor are both offline built-ins cannot act on guidance:
/// its recovery hints do not offer `plan prompt`, and `plan prompt` itself warns, as `plan
/// correct` does, that the re-run repeats the same work.
#[test]
fn a_plan_of_offline_built_in_actors_is_not_offered_plan_prompt_and_prompting_it_warns() {
    let (s, id, doc) = failed_plan(FAILING_ACTION, false);
    let hints = printed_hints(&s, &id, &doc);
    assert!(
        hints.iter().all(|h| !h.contains("plan prompt")),
        "{hints:#?}"
    );
    // The re-run fails again (the script is as it was): the error says why.
    let (doc, code) = s
        .env
        .json(&["plan", "prompt", &id, "write the version too"]);
    assert_eq!(code, 1, "{doc:#}");
    assert!(
        doc["error"]["detail"]
            .as_str()
            .unwrap()
            .contains("cannot act on guidance"),
        "{doc:#}"
    );
}

/// A step whose script is many lines long, failing at its end.
const LONG_SCRIPT_ACTION: &str = r#"name: local/notes
definition-of-done: the build passes
strategy-actor: builtin/checklist-strategist
execution-actor: builtin/script-executor
script:
  - name: build
    run: |
      echo preparing the build of every package in the workspace, one after another
      echo compiling the first package with all of its features and optimisations enabled
      echo compiling the second package with all of its features and optimisations enabled
      echo 'error: the linker was not found' >&2
      exit 4
"#;

#[test]
fn a_failed_step_is_named_by_its_name_with_the_reason_first_not_by_its_whole_script() {
    let (s, id, doc) = failed_plan(LONG_SCRIPT_ACTION, false);
    let message = doc["error"]["message"].as_str().unwrap().to_string();
    let (status, _) = s.env.json(&["plan", "status", &id]);
    let (approvals, _) = s.env.json(&["plan", "approvals", &id]);
    let status_error = status["data"]["error_message"]
        .as_str()
        .unwrap()
        .to_string();
    let mut texts = vec![message, status_error];
    texts.extend(
        approvals["data"]["approvals"]
            .as_array()
            .unwrap()
            .iter()
            .map(|a| a["summary"].as_str().unwrap().to_string()),
    );
    for text in &texts {
        assert!(
            !text.contains("compiling the second package"),
            "the script is not pasted: {text}"
        );
    }
    let message = &texts[0];
    let reason = "step build exited with status 4: error: the linker was not found";
    assert!(message.contains(reason), "reason first: {message}");
    assert!(!message.contains('\n'), "{message}");
    assert!(
        message.len() < 300,
        "{} characters: {message}",
        message.len()
    );
}

#[test]
fn every_recovery_hint_of_a_failed_step_is_a_command_that_works_as_printed() {
    every_hint_runs_as_printed(FAILING_ACTION, false, "execute");
}

#[test]
fn every_recovery_hint_of_a_refused_apply_is_a_command_that_works_as_printed() {
    every_hint_runs_as_printed(WRITING_ACTION, true, "apply");
}

#[test]
fn a_refused_apply_never_suggests_plan_execute_or_plan_prompt() {
    let (s, id, doc) = failed_plan(WRITING_ACTION, true);
    for h in printed_hints(&s, &id, &doc) {
        assert!(
            !h.contains("plan execute") && !h.contains("plan prompt"),
            "{h}"
        );
    }
}

#[test]
fn a_failed_steps_output_is_offered_by_plan_logs_not_plan_errors() {
    let (s, id, doc) = failed_plan(FAILING_ACTION, false);
    let hints = printed_hints(&s, &id, &doc);
    let output_hint = hints
        .iter()
        .find(|h| h.contains("output"))
        .unwrap_or_else(|| panic!("{hints:#?}"));
    assert!(
        output_hint.contains(&format!("plan logs {id}")),
        "{output_hint}"
    );
    let (code, out) = run_printed(&s, command_of(output_hint));
    assert_eq!(code, 0, "{out:#}");
    assert!(
        out["data"]["steps"]
            .to_string()
            .contains("NOTES.md - missing version"),
        "the step's stderr: {out:#}"
    );
}

#[test]
fn plan_status_shows_the_tail_of_each_steps_output_in_human_formats() {
    let (s, id, _) = failed_plan(FAILING_ACTION, false);
    let out = s.env.run(&["--format", "plain", "plan", "status", &id]);
    let text = String::from_utf8(out.stdout).unwrap();
    let section = |title: &str| -> Vec<String> {
        text.lines()
            .skip_while(|l| !l.starts_with(title))
            .skip(1)
            .take_while(|l| !l.trim().is_empty())
            .map(|l| l.trim().to_string())
            .collect()
    };
    let write = section("Output of Step 1 (write, done)");
    assert_eq!(
        write[..7],
        [
            "stdout:",
            "... (7 earlier lines)",
            "8",
            "9",
            "10",
            "11",
            "12"
        ],
        "{text}"
    );
    let check = section("Output of Step 2 (check, failed)");
    assert_eq!(
        check[..4],
        [
            "stdout:",
            "checking NOTES.md",
            "stderr:",
            "NOTES.md - missing version"
        ],
        "{text}"
    );
    assert!(
        check[4].starts_with("all of it: agents --data-dir")
            && check[4].ends_with(&format!("plan logs {id} check")),
        "{text}"
    );
}

#[test]
fn plan_logs_shows_a_steps_whole_output_and_names_the_steps_of_an_unknown_one() {
    let (s, id, _) = failed_plan(FAILING_ACTION, false);
    let (doc, code) = s.env.json(&["plan", "logs", &id, "write"]);
    assert_eq!(code, 0, "{doc:#}");
    let steps = doc["data"]["steps"].as_array().unwrap();
    assert_eq!(steps.len(), 1);
    let expected: String = (1..=12).map(|n| format!("{n}\n")).collect();
    assert_eq!(steps[0]["stdout"], expected.as_str());
    assert_eq!(steps[0]["exit_code"], 0);
    let (by_number, _) = s.env.json(&["plan", "logs", &id, "2"]);
    assert_eq!(by_number["data"]["steps"][0]["name"], "check");
    assert_eq!(by_number["data"]["steps"][0]["exit_code"], 3);
    let (doc, code) = s.env.json(&["plan", "logs", &id, "deploy"]);
    assert_eq!(
        (code, doc["error"]["code"].as_str()),
        (1, Some("NOT_FOUND"))
    );
    assert_eq!(doc["error"]["detail"], "its steps: 1 (write), 2 (check)");
}

#[test]
fn plan_logs_keeps_output_longer_than_an_event_carries() {
    let long = "name: local/notes\ndefinition-of-done: it prints\nstrategy-actor: builtin/checklist-strategist\nexecution-actor: builtin/script-executor\nscript:\n  - name: print\n    run: seq 1 3000; exit 1\n";
    let (s, id, _) = failed_plan(long, false);
    let (doc, _) = s.env.json(&["plan", "logs", &id, "print"]);
    let stdout = doc["data"]["steps"][0]["stdout"].as_str().unwrap();
    assert!(stdout.len() > 4000, "{}", stdout.len());
    assert!(stdout.starts_with("1\n2\n") && stdout.ends_with("2999\n3000\n"));
}

#[test]
fn plan_logs_in_all_six_formats() {
    let (s, id, _) = failed_plan(FAILING_ACTION, false);
    for format in ["plain", "color", "table", "rich", "json", "yaml"] {
        let args = ["--format", format, "plan", "logs", &id];
        let out = s.env.run(&args);
        let text = crate::cli::snapshots::output_text(&out);
        let mut settings =
            crate::cli::snapshots::settings(&s.env, &["--format", format, "plan", "logs", "PLAN"]);
        settings.add_filter(r"\b[0-9A-HJKMNP-TV-Z]{26}\b", "[ULID]");
        settings.add_filter(r"duration_ms: \d+", "duration_ms: [MS]");
        settings.bind(|| insta::assert_snapshot!(format!("plan_logs_{format}"), text));
    }
}

#[test]
fn a_first_step_that_fails_under_full_auto_is_retried_once_then_errors_instead_of_a_state_conflict()
{
    let one = "name: local/notes\ndefinition-of-done: it prints\nstrategy-actor: builtin/checklist-strategist\nexecution-actor: builtin/script-executor\nscript:\n  - name: print\n    run: echo nope; exit 1\n";
    let (s, id, doc) = failed_plan(one, false);
    assert_eq!(doc["data"]["error_code"], "STEP_FAILED", "{doc:#}");
    let (logs, _) = s.env.json(&["plan", "logs", &id]);
    assert_eq!(logs["data"]["steps"][0]["runs"], 2, "{logs:#}");
}

#[test]
fn quickstart_on_a_dirty_checkout_warns_that_uncommitted_edits_are_invisible_to_the_plan() {
    let env = Env::new();
    let repo = crate::support::git_repo(env.root(), "work");
    fs::write(repo.join("README"), "demo, edited and not committed\n").unwrap();
    fs::write(repo.join("scratch.txt"), "work in progress\n").unwrap();
    let out = env.run(&[
        "--format",
        "plain",
        "quickstart",
        "--headless",
        "--example",
        "license-header",
        repo.to_str().unwrap(),
    ]);
    let text = String::from_utf8(out.stdout).unwrap();
    assert_eq!(out.status.code(), Some(3), "{text}");
    assert!(
        text.lines().any(|l| l.starts_with("[WARN]")
            && l.contains("uncommitted files are not visible to this plan")),
        "{text}"
    );
    let (doc, _) = env.json(&[
        "quickstart",
        "--headless",
        "--example",
        "license-header",
        repo.to_str().unwrap(),
    ]);
    let warned = doc["messages"]
        .as_array()
        .unwrap()
        .iter()
        .any(|m| m["level"] == "warn" && m["text"].as_str().unwrap().contains("uncommitted"));
    assert!(warned, "{doc:#}");
}

/// An action whose one step writes seven files.
const SEVEN_FILES: &str = r#"name: local/notes
definition-of-done: seven notes exist
strategy-actor: builtin/checklist-strategist
execution-actor: builtin/script-executor
script:
  - name: write
    run: for n in 1 2 3 4 5 6 7; do printf 'note %s\n' $n > note$n.md; done
"#;

fn applied_plan(s: &Setup) -> String {
    let (doc, code) = s.env.json(&[
        "plan",
        "use",
        "local/notes",
        "app",
        "--automation-profile",
        "full-auto",
    ]);
    assert_eq!(code, 0, "{doc:#}");
    assert_eq!(doc["data"]["phase"], "applied", "{doc:#}");
    doc["data"]["plan_id"].as_str().unwrap().to_string()
}

fn head_commit(repo: &std::path::Path) -> String {
    git_out(repo, &["rev-parse", "HEAD"]).trim().to_string()
}

#[test]
fn after_apply_plan_diff_still_shows_what_the_plan_changed_marked_applied_with_its_commit() {
    let s = setup_with(SEVEN_FILES);
    let id = applied_plan(&s);
    let commit = head_commit(&s.repo);
    let (doc, code) = s.env.json(&["plan", "diff", &id]);
    assert_eq!(code, 0, "{doc:#}");
    assert_eq!(doc["data"]["applied"], true, "{doc:#}");
    assert_eq!(doc["data"]["stats"]["files_changed"], 7, "{doc:#}");
    assert_eq!(doc["data"]["stats"]["additions"], 7, "{doc:#}");
    let res = &doc["data"]["resources"][0];
    assert_eq!(
        (res["commit"].as_str(), res["source"].as_str()),
        (Some(commit.as_str()), Some("applied_commit"))
    );
    let hunk = res["files"][0]["hunks"][0]["lines"][0]["text"].as_str();
    assert_eq!(hunk, Some("note 1"), "{res:#}");
    let status = doc["messages"].as_array().unwrap().last().unwrap()["text"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        status.starts_with(&format!(
            "Applied in commit {} on local/repo: 7 file(s) changed, +7 -0",
            &commit[..12]
        )),
        "{status}"
    );
    let plain = String::from_utf8(
        s.env
            .run(&["--format", "plain", "plan", "diff", &id])
            .stdout,
    )
    .unwrap();
    assert!(!plain.contains("No changes"), "{plain}");
    assert!(plain.contains("+note 7"), "{plain}");

    let (doc, code) = s.env.json(&["plan", "artifacts", &id]);
    assert_eq!(code, 0, "{doc:#}");
    assert_eq!(doc["data"]["files"].as_array().unwrap().len(), 7, "{doc:#}");
    assert_eq!(doc["data"]["applied"], true);
    let status = doc["messages"].as_array().unwrap().last().unwrap()["text"]
        .as_str()
        .unwrap()
        .to_string();
    assert_eq!(
        status,
        format!(
            "7 changed file(s), applied in commit {} on local/repo",
            &commit[..12]
        )
    );
    let (stat, _) = s
        .env
        .json(&["plan", "diff", &id, "--stat", "--path", "note3.md"]);
    assert_eq!(stat["data"]["stats"]["files_changed"], 1, "{stat:#}");
    assert!(
        stat["data"]["resources"][0]["files"][0]["hunks"]
            .as_array()
            .unwrap()
            .is_empty()
    );
}

#[test]
fn after_apply_to_a_directory_plan_diff_shows_the_changes_from_the_sandbox_history() {
    let env = Env::new();
    let dir = env.root().join("site");
    fs::create_dir_all(&dir).unwrap();
    fs::write(dir.join("index.html"), "<h1>hi</h1>\n").unwrap();
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
    fs::write(&file, SEVEN_FILES).unwrap();
    ok(&[
        "action",
        "create",
        "--available",
        "--config",
        file.to_str().unwrap(),
    ]);
    let doc = ok(&[
        "plan",
        "use",
        "local/notes",
        "app",
        "--automation-profile",
        "full-auto",
    ]);
    assert_eq!(doc["data"]["phase"], "applied", "{doc:#}");
    let id = doc["data"]["plan_id"].as_str().unwrap();
    assert!(dir.join("note7.md").is_file());
    let (doc, _) = env.json(&["plan", "diff", id]);
    assert_eq!(doc["data"]["applied"], true, "{doc:#}");
    assert_eq!(doc["data"]["stats"]["files_changed"], 7, "{doc:#}");
    assert_eq!(
        doc["data"]["resources"][0]["source"], "sandbox_history",
        "{doc:#}"
    );
    assert_eq!(doc["data"]["resources"][0]["commit"], Value::Null);
}

/// Two projects, each with its own checkout (`local/repo` in `app`, `local/site` in `web`),
/// and `action` registered.
fn two_projects(action: &str) -> (Setup, std::path::PathBuf) {
    let s = setup_with(action);
    let site = crate::support::git_repo(s.env.root(), "site");
    for args in [
        &[
            "resource",
            "add",
            "git-checkout",
            "local/site",
            "--path",
            site.to_str().unwrap(),
        ][..],
        &["project", "create", "--resource", "local/site", "web"],
    ] {
        let (doc, code) = s.env.json(args);
        assert_eq!(code, 0, "{doc:#}");
    }
    (s, site)
}

#[test]
fn a_multi_project_plan_runs_run_steps_on_the_resource_each_step_names() {
    let action = r#"name: local/notes
definition-of-done: both projects have notes
strategy-actor: builtin/checklist-strategist
execution-actor: builtin/script-executor
script:
  - name: api
    resource: repo
    run: printf 'api\n' > NOTES.md
  - name: web
    resource: local/site
    run: printf 'web\n' > NOTES.md
  - name: docs
    tool: write_file
    args:
      path: path://local/site/docs/notes.md
      content: "site docs\n"
"#;
    let (s, site) = two_projects(action);
    let (doc, code) = s.env.json(&[
        "plan",
        "use",
        "local/notes",
        "app",
        "web",
        "--automation-profile",
        "full-auto",
    ]);
    assert_eq!(code, 0, "{doc:#}");
    assert_eq!(doc["data"]["phase"], "applied", "{doc:#}");
    assert_eq!(
        fs::read_to_string(s.repo.join("NOTES.md")).unwrap(),
        "api\n"
    );
    assert_eq!(fs::read_to_string(site.join("NOTES.md")).unwrap(), "web\n");
    assert_eq!(
        fs::read_to_string(site.join("docs/notes.md")).unwrap(),
        "site docs\n"
    );
}

#[test]
fn a_multi_project_run_step_without_a_resource_is_refused_at_plan_use_with_a_hint_that_works() {
    let action = "name: local/notes\ndefinition-of-done: notes\nstrategy-actor: builtin/checklist-strategist\nexecution-actor: builtin/script-executor\nscript:\n  - name: write\n    run: printf 'x\\n' > NOTES.md\n";
    let (s, _) = two_projects(action);
    let use_it = || {
        s.env.json(&[
            "plan",
            "use",
            "local/notes",
            "app",
            "web",
            "--automation-profile",
            "full-auto",
        ])
    };
    let (doc, code) = use_it();
    assert_eq!(
        (code, doc["error"]["code"].as_str()),
        (1, Some("INVALID_INPUT")),
        "refused before the plan runs: {doc:#}"
    );
    let message = doc["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("`write`") && message.contains("local/repo, local/site"),
        "{message}"
    );
    let hints = doc["error"]["suggestions"].to_string();
    assert!(
        hints.contains("`resource: repo`") && hints.contains("path://local/repo/..."),
        "{hints}"
    );
    let (list, _) = s.env.json(&["plan", "list"]);
    assert_eq!(
        list["data"]["plans"],
        serde_json::json!([]),
        "nothing saved"
    );
    // The hint works: with `resource: repo` on the step, the plan runs and applies.
    let fixed = action
        .replace("local/notes", "local/fixed")
        .replace("    run:", "    resource: repo\n    run:");
    let file = s.env.root().join("fixed.yaml");
    fs::write(&file, fixed).unwrap();
    let (doc, code) = s.env.json(&[
        "action",
        "create",
        "--available",
        "--config",
        file.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{doc:#}");
    let (doc, code) = s.env.json(&[
        "plan",
        "use",
        "local/fixed",
        "app",
        "web",
        "--automation-profile",
        "full-auto",
    ]);
    assert_eq!(code, 0, "{doc:#}");
}

#[test]
fn a_spawn_step_with_a_resource_is_refused_at_action_create() {
    let env = Env::new();
    let file = env.root().join("action.yaml");
    fs::write(
        &file,
        "name: local/parent\ndefinition-of-done: children ran\nstrategy-actor: builtin/checklist-strategist\nexecution-actor: builtin/script-executor\nscript:\n  - name: child\n    resource: repo\n    spawn:\n      action: local/child\n",
    )
    .unwrap();
    let (doc, code) = env.json(&["action", "create", "--config", file.to_str().unwrap()]);
    assert_eq!(
        (code, doc["error"]["code"].as_str()),
        (1, Some("INVALID_INPUT")),
        "{doc:#}"
    );
    assert!(
        doc["error"]["message"]
            .as_str()
            .unwrap()
            .contains("script[0].resource"),
        "{doc:#}"
    );
}

/// A step that looks a host name up, in a sandbox without network (the default).
const OFFLINE_LOOKUP_ACTION: &str = r#"name: local/notes
definition-of-done: the package index is reachable
strategy-actor: builtin/checklist-strategist
execution-actor: builtin/script-executor
script:
  - name: fetch
    run: python3 -c "import socket; socket.getaddrinfo('example.com', 443)"
"#;

#[test]
fn a_step_failing_for_lack_of_network_points_to_the_actions_network_setting() {
    let (_s, _id, doc) = failed_plan(OFFLINE_LOOKUP_ACTION, false);
    let message = doc["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("step fetch exited with status 1"),
        "{message}"
    );
    assert!(
        message.contains("no network") && message.contains("sandbox: network: true"),
        "{message}"
    );
}

/// `diagnostics` tries to connect to a keyless (local) provider's `base_url`: one where nothing
/// listens is a warning naming the address, one that listens is OK.
#[test]
fn diagnostics_warns_when_nothing_listens_at_a_local_providers_base_url() {
    let env = Env::new();
    let listening = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let up = listening.local_addr().unwrap().port();
    let down = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    fs::create_dir_all(env.config_path.parent().unwrap()).unwrap();
    fs::write(
        &env.config_path,
        format!(
            "[providers.down]\nkind = \"openai\"\nbase_url = \"http://127.0.0.1:{down}/v1\"\n\n[providers.up]\nkind = \"openai\"\nbase_url = \"http://127.0.0.1:{up}/v1\"\n"
        ),
    )
    .unwrap();
    let (doc, _) = env.json(&["diagnostics"]);
    let down_check = check(&doc, "Provider down");
    assert_eq!(down_check["status"], "warn", "{down_check:#}");
    assert!(
        down_check["details"]
            .as_str()
            .unwrap()
            .contains(&format!("127.0.0.1:{down}")),
        "{down_check:#}"
    );
    let up_check = check(&doc, "Provider up");
    assert_eq!(up_check["status"], "ok", "{up_check:#}");
    drop(listening);
}
