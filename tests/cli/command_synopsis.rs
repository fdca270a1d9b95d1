//! Commands of spec 05 written the way its synopsis writes them: global options after a custom
//! resource type's name, custom types in `resource add --help`, `actor add --type agent`,
//! `invariant list --effective REGEX`, unambiguous decision ids in `plan review`, the
//! follow-ups of `plan apply` on a finished plan, and the apply prompt on a terminal.

use std::fs;

use serde_json::Value;

use super::apply::{plan_at_apply_gate, repo_with};
use crate::support::{Env, Tmux, ok, stdout};

const NOTES: &str = r#"cleveragents:
  version: "3.0"
resource_type:
  name: local/notes
  description: "A folder of notes"
  physical_or_virtual: physical
  user_addable: true
  handler: FilesystemHandler
  cli_arguments:
    - name: root
      type: path
      required: true
      maps_to: path
      description: "The notes folder"
"#;

/// Registers `local/notes` and returns a directory for one of its resources.
fn notes_type(env: &Env) -> std::path::PathBuf {
    let file = env.root().join("notes.yaml");
    fs::write(&file, NOTES).unwrap();
    ok(
        env,
        &[
            "resource",
            "type",
            "add",
            "--config",
            file.to_str().unwrap(),
        ],
    );
    let dir = env.root().join("notes");
    fs::create_dir_all(&dir).unwrap();
    dir
}

#[test]
fn global_options_after_a_custom_types_name_are_parsed_as_global_options() {
    let env = Env::new();
    let dir = notes_type(&env);
    let root = dir.to_str().unwrap();
    // `--format json` after the type's name, as after a built-in type's.
    let out = env.run(&[
        "resource",
        "add",
        "local/notes",
        "--format",
        "json",
        "--root",
        root,
        "local/n1",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", stdout(&out));
    let doc: Value = serde_json::from_slice(&out.stdout).expect("stdout is the json envelope");
    assert_eq!(doc["status"], "ok", "{doc:#}");
    assert_eq!(doc["data"]["resource"]["name"], "local/n1", "{doc:#}");
    // `--format=yaml` and `-v` at the end, with --update.
    let out = env.run(&[
        "resource",
        "add",
        "local/notes",
        "local/n1",
        "--root",
        root,
        "--update",
        "-v",
        "--format=yaml",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", stdout(&out));
    let doc: Value = serde_yaml::from_slice(&out.stdout).expect("stdout is the yaml envelope");
    assert_eq!(doc["status"], "ok", "{doc:#?}");
    // A usage error of the type's own arguments is still an envelope in the format asked for.
    let out = env.run(&[
        "resource",
        "add",
        "local/notes",
        "local/n2",
        "--format",
        "json",
    ]);
    assert_eq!(out.status.code(), Some(2), "{}", stdout(&out));
    let doc: Value = serde_json::from_slice(&out.stdout).expect("stdout is the json envelope");
    assert_eq!(doc["error"]["code"], "USAGE", "{doc:#}");
    assert!(
        doc["error"].to_string().contains("--root <PATH>"),
        "names the missing argument: {doc:#}"
    );
}

#[test]
fn resource_add_help_lists_custom_types_and_reads_nothing_it_would_create() {
    let env = Env::new();
    // No data directory yet: help works and creates none.
    let out = env.run(&["resource", "add", "--help"]);
    assert_eq!(out.status.code(), Some(0));
    assert!(stdout(&out).contains("fs-directory"), "{}", stdout(&out));
    assert!(!env.data_dir.exists(), "help created the data directory");

    notes_type(&env);
    let out = env.run(&["resource", "add", "--help"]);
    assert_eq!(out.status.code(), Some(0));
    let help = stdout(&out);
    let line = help
        .lines()
        .find(|l| l.trim_start().starts_with("local/notes"))
        .unwrap_or_else(|| panic!("local/notes is not listed:\n{help}"));
    assert!(line.contains("A folder of notes"), "{line}");
    assert!(help.contains("git-checkout"), "{help}");
    // `-h` too, and the type's own help lists its arguments.
    let out = env.run(&["resource", "add", "-h"]);
    assert!(stdout(&out).contains("local/notes"), "{}", stdout(&out));
    let out = env.run(&["resource", "add", "local/notes", "--help"]);
    assert_eq!(out.status.code(), Some(0));
    assert!(stdout(&out).contains("--root <PATH>"), "{}", stdout(&out));
    // Adding one still goes through the type's arguments.
    let dir = env.root().join("notes");
    ok(
        &env,
        &[
            "resource",
            "add",
            "local/notes",
            "local/n1",
            "--root",
            dir.to_str().unwrap(),
        ],
    );
}

#[test]
fn actor_add_takes_agent_for_an_llm_actor_in_the_flag_and_the_file() {
    let env = Env::new();
    let file = env.root().join("reviewer.yaml");
    fs::write(
        &file,
        "name: local/reviewer\ntype: agent\nmodel: openai/gpt-4o-mini\nsystem_prompt: Review code.\n",
    )
    .unwrap();
    let doc = ok(&env, &["actor", "add", "--config", file.to_str().unwrap()]);
    assert_eq!(doc["data"]["actor"]["type"], "llm", "{doc:#}");
    let doc = ok(
        &env,
        &[
            "actor",
            "add",
            "--config",
            file.to_str().unwrap(),
            "--type",
            "agent",
            "--update",
        ],
    );
    assert_eq!(doc["data"]["actor"]["type"], "llm", "{doc:#}");
    let (doc, code) = env.json(&[
        "actor",
        "add",
        "--config",
        file.to_str().unwrap(),
        "--type",
        "robot",
        "--update",
    ]);
    assert_eq!(code, 2, "{doc:#}");
    assert_eq!(doc["error"]["code"], "USAGE", "{doc:#}");
}

#[test]
fn plan_review_prints_decision_ids_that_name_one_decision_and_apply_on_a_finished_plan_says_what_fits()
 {
    let env = Env::new();
    let repo = repo_with(env.root(), "repo", &[("README.md", "hello\n")]);
    // Five steps strategized in one go: their decision ids share the millisecond prefix.
    let steps: Vec<String> = (0..5).map(|i| format!("echo {i} > f{i}.txt")).collect();
    let steps: Vec<&str> = steps.iter().map(String::as_str).collect();
    let plan = plan_at_apply_gate(&env, &[&repo], &steps);

    let doc = ok(&env, &["plan", "review", &plan]);
    let plain = stdout(&env.run(&["--format", "plain", "plan", "review", &plan]));
    let mut seen = 0;
    for file in doc["data"]["files"].as_array().unwrap() {
        for item in file["items"].as_array().unwrap() {
            for full in item["decision_ids"].as_array().unwrap() {
                let full = full.as_str().unwrap();
                let shown = plain
                    .split_whitespace()
                    .find(|w| w.len() >= 8 && full.starts_with(*w))
                    .unwrap_or_else(|| panic!("{full} is not shown:\n{plain}"));
                let (explained, code) = env.json(&["plan", "explain", shown]);
                assert_eq!(
                    code, 0,
                    "printed id {shown} does not name one decision: {explained:#}"
                );
                assert_eq!(explained["data"]["decision_id"], full, "{explained:#}");
                seen += 1;
            }
        }
    }
    assert_eq!(seen, 5, "one decision per file:\n{plain}");

    ok(&env, &["plan", "apply", "--yes", &plan]);
    for extra in [&["--discard-rest"][..], &[][..]] {
        let mut args = vec!["plan", "apply"];
        args.extend_from_slice(extra);
        args.push(&plan);
        let (doc, code) = env.json(&args);
        assert_ne!(code, 0, "{doc:#}");
        assert_eq!(doc["error"]["code"], "CONFLICT", "{doc:#}");
        assert!(
            doc["error"]["message"]
                .as_str()
                .unwrap()
                .contains("already applied"),
            "{doc:#}"
        );
        let hints: Vec<&str> = doc["error"]["suggestions"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s.as_str().unwrap())
            .collect();
        assert!(
            hints.iter().all(|h| !h.contains("plan execute")),
            "an applied plan is not executed again: {hints:?}"
        );
        assert!(hints.iter().any(|h| h.contains("plan status")), "{hints:?}");
        assert_eq!(
            hints.iter().any(|h| h.contains("plan cleanup")),
            !extra.is_empty(),
            "--discard-rest points at what discards: {hints:?}"
        );
    }
}

#[test]
fn a_cancelled_plan_is_not_offered_plan_execute_by_plan_apply() {
    let env = Env::new();
    let repo = repo_with(env.root(), "repo", &[("README.md", "hello\n")]);
    let plan = plan_at_apply_gate(&env, &[&repo], &["echo x > x.txt"]);
    ok(&env, &["plan", "cancel", &plan]);
    let (doc, code) = env.json(&["plan", "apply", "--yes", &plan]);
    assert_ne!(code, 0, "{doc:#}");
    assert_eq!(doc["error"]["code"], "CONFLICT", "{doc:#}");
    assert!(
        doc["error"]["message"]
            .as_str()
            .unwrap()
            .contains("cancelled"),
        "{doc:#}"
    );
    let hints = doc["error"]["suggestions"].to_string();
    assert!(!hints.contains("plan execute"), "{hints}");
}

#[test]
fn the_apply_question_stays_on_screen_until_answered() {
    let env = Env::new();
    let repo = repo_with(env.root(), "repo", &[("README.md", "hello\n")]);
    let plan = plan_at_apply_gate(&env, &[&repo], &["echo x > x.txt"]);
    let command = env.terminal_command(&format!("plan apply {plan}; echo exit=$?; sleep 30"));
    let tmux = Tmux::new("apply-prompt");
    tmux.open(150, 30, &command);
    let question = format!("Apply changes for plan {}", plan);
    tmux.wait_for("the question", |s| {
        s.contains(&question) && s.contains("[y/N]")
    });
    // A spinner left running redraws its line every 80 ms, over the question.
    for _ in 0..5 {
        std::thread::sleep(std::time::Duration::from_millis(200));
        let screen = tmux.screen();
        assert!(
            screen.contains(&question) && screen.contains("[y/N]"),
            "the question was drawn over:\n{screen}"
        );
        assert!(
            !screen.contains("Applying plan"),
            "a spinner is drawn:\n{screen}"
        );
    }
    tmux.keys(&["n", "Enter"]);
    let screen = tmux.wait_for("the answer", |s| s.contains("exit="));
    assert!(screen.contains("exit=1"), "declining exits 1:\n{screen}");
    assert!(screen.contains("declined"), "{screen}");
}

#[test]
fn invariant_list_effective_takes_a_regex() {
    let env = Env::new();
    let repo = repo_with(env.root(), "repo", &[("README.md", "hello\n")]);
    let plan = plan_at_apply_gate(&env, &[&repo], &["echo x > x.txt"]);
    ok(&env, &["invariant", "add", "--global", "Never force push"]);
    ok(
        &env,
        &["invariant", "add", "--plan", &plan, "Keep the API stable"],
    );
    let all = ok(&env, &["invariant", "list", "--plan", &plan, "--effective"]);
    assert_eq!(
        all["data"]["effective"].as_array().unwrap().len(),
        2,
        "{all:#}"
    );
    let doc = ok(
        &env,
        &["invariant", "list", "--plan", &plan, "--effective", "API"],
    );
    let texts: Vec<&str> = doc["data"]["effective"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["text"].as_str().unwrap())
        .collect();
    assert_eq!(texts, ["Keep the API stable"], "{doc:#}");
    let (doc, code) = env.json(&["invariant", "list", "--plan", &plan, "--effective", "("]);
    assert_ne!(code, 0, "{doc:#}");
    assert_eq!(doc["error"]["code"], "INVALID_INPUT", "{doc:#}");
}
