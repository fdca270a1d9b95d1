//! The real binary in a real terminal (tmux): launch, live updates from another process, quit.

use std::path::Path;
use std::time::{Duration, Instant};

use cleveragents_engine::domain::plan::Plan;
use cleveragents_engine::store::Store;

use crate::support::{Env, Tmux, git_out, shell_quote};

#[test]
fn the_tui_shows_plans_follows_other_processes_and_quits_on_q() {
    let env = Env::new();
    let db = env.data_dir.join("cleveragents.db");
    let mut store = Store::open(&db).unwrap();
    let first = Plan::new("local/format-code", "fmt", jiff::Timestamp::now());
    store.insert_plan(&first).unwrap();

    let exit_file = env.root().join("exit-code");
    let command = tui_command(&env, "", &exit_file);
    let tmux = Tmux::new("tui");
    tmux.open(120, 40, &command);

    let screen = tmux.wait_for("the first plan", |s| s.contains(&first.plan_id.short()));
    assert!(screen.contains("local/format-code"), "{screen}");
    assert!(screen.contains("Plans"), "{screen}");

    // Another process creates a plan: the TUI shows it without any key press.
    let second = Plan::new("local/add-license", "lic", jiff::Timestamp::now());
    store.insert_plan(&second).unwrap();
    tmux.wait_for("the second plan", |s| {
        s.contains(&second.plan_id.short()) && s.contains("local/add-license")
    });

    tmux.keys(&["q"]);
    assert_eq!(tmux.exit_code(&exit_file, Duration::from_secs(10)), "0");
    let _ = tmux.alive();
}

#[test]
fn the_tui_refuses_to_start_without_a_terminal() {
    let env = Env::new();
    let (doc, code) = env.json(&["tui"]);
    assert_eq!(code, 1);
    assert!(
        doc["error"]["message"]
            .as_str()
            .unwrap()
            .contains("needs a terminal")
    );
}

#[test]
fn agents_alone_prints_help_when_not_in_a_terminal() {
    let env = Env::new();
    let out = env.run(&[]);
    assert_eq!(out.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&out.stdout).contains("Usage:"));
}

#[test]
fn approving_the_apply_gate_in_the_tui_applies_the_plan() {
    let s = crate::cli::lifecycle::setup();
    let (doc, code, id) = crate::cli::lifecycle::use_plan(&s, "trusted");
    assert_eq!(code, 3, "trusted waits at the apply gate: {doc:#}");
    let env = &s.env;
    let command = env.terminal_command("tui --focus approvals");
    let tmux = Tmux::new("approve");
    tmux.open(140, 45, &command);
    tmux.wait_for("the pending gate", |sc| sc.contains("1 pending"));
    tmux.keys(&["a"]);
    std::thread::sleep(Duration::from_millis(300));
    tmux.keys(&["y"]);
    tmux.wait_for("the plan applied", |sc| {
        sc.contains("applied") && sc.contains("0 pending")
    });
    // The diff pane keeps showing what the plan changed, from the applied commit.
    tmux.wait_for("the applied diff", |sc| {
        sc.contains("Diff · applied in ") && sc.contains("NOTES.md")
    });
    let message = git_out(&s.repo, &["log", "--format=%B", "-1"]);
    assert!(message.contains(&format!("Plan-Id: {id}")), "{message}");
    tmux.keys(&["q"]);
}

/// An action whose second step takes long enough to resize the terminal around it.
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
    run: sleep 8; printf 'More\n' >> NOTES.md
"#;

/// The TUI with `args` in `env`, its exit code written to `exit`.
fn tui_command(env: &Env, args: &str, exit: &Path) -> String {
    tui_command_with(env, "", args, exit)
}

/// [`tui_command`] with more variables, `vars` (`NAME=value ...`).
fn tui_command_with(env: &Env, vars: &str, args: &str, exit: &Path) -> String {
    format!(
        "{}; echo $? > {}",
        env.terminal_command_with(vars, &format!("tui {args}")),
        shell_quote(exit)
    )
}

#[test]
fn executing_from_the_keyboard_and_resizing_repeatedly_while_the_plan_runs_keeps_the_screen_whole()
{
    let s = crate::cli::lifecycle::setup_with(SLOW_ACTION);
    let (doc, code, id) = crate::cli::lifecycle::use_plan(&s, "supervised");
    assert_eq!(code, 3, "supervised waits at the execute gate: {doc:#}");
    let short = &id[..8];
    let exit = s.env.root().join("exit-code");
    let tmux = Tmux::new("resize");
    let command = tui_command(&s.env, &format!("--plan {id}"), &exit);
    tmux.open(120, 40, &command);
    tmux.wait_for("the plan", |sc| sc.contains(short));
    // `e` on the plans pane runs `plan execute` in the TUI's process; the status bar says so.
    tmux.keys(&["e"]);
    tmux.wait_for("the plan running", |sc| {
        sc.contains("processing") && sc.contains(&format!("plan execute {short}"))
    });
    // Quitting while a command started here runs asks first.
    tmux.keys(&["q"]);
    tmux.wait_for("the quit question", |sc| sc.contains("Quit?"));
    tmux.keys(&["n"]);
    tmux.wait_for("the question gone", |sc| !sc.contains("Quit?"));

    for (w, h) in [
        (80, 24),
        (200, 60),
        (60, 20),
        (30, 8),
        (130, 45),
        (41, 13),
        (90, 28),
        (100, 30),
    ] {
        let (w, h) = (w.to_string(), h.to_string());
        let out = tmux.cmd(&["resize-window", "-t", "s", "-x", &w, "-y", &h]);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        std::thread::sleep(Duration::from_millis(120));
    }
    // After the last resize (100x30) the screen is whole: the plans pane's top border spans
    // exactly 100 columns, 30 rows are drawn, the status bar is on the last one. A capture can
    // land in the middle of a redraw, so wait for the last row too, not only the first.
    let screen = tmux.wait_up_to("the redraw at 100x30", Duration::from_secs(5), |sc| {
        let lines: Vec<&str> = sc.lines().collect();
        lines.len() == 30 && lines[0].chars().count() == 100 && lines[29].contains("help")
    });
    assert!(tmux.alive(), "the TUI is still running");
    assert!(!screen.contains("panicked"), "{screen}");
    let lines: Vec<&str> = screen.lines().collect();
    assert_eq!(lines.len(), 30, "{screen}");
    let top = lines[0];
    assert!(
        top.starts_with("┏ 1 Plans") || top.starts_with("┌ 1 Plans"),
        "{screen}"
    );
    assert!(top.ends_with('┓') || top.ends_with('┐'), "{screen}");
    assert!(lines.iter().all(|l| l.chars().count() <= 100), "{screen}");
    assert!(lines[29].contains("help"), "status bar last: {screen}");
    assert!(screen.contains(short), "{screen}");

    // The plan reaches the apply gate; the operation has ended, so q quits at once.
    // The operation's end is reported once its result arrived; its thread may end a frame
    // later, so give the next frame time to drop it from the running list.
    tmux.wait_up_to("the apply gate", Duration::from_secs(60), |sc| {
        sc.contains("1 pending") && sc.contains("waiting for you") && !sc.contains("processing")
    });
    std::thread::sleep(Duration::from_millis(600));
    tmux.keys(&["q"]);
    assert_eq!(tmux.exit_code(&exit, Duration::from_secs(15)), "0");
    let (doc, _) = s.env.json(&["plan", "status", &id]);
    assert_eq!(doc["data"]["phase"], "execute", "{doc:#}");
}

#[test]
fn correcting_a_decision_shows_the_dry_run_result_in_the_editor() {
    let s = crate::cli::lifecycle::setup();
    let (doc, code, id) = crate::cli::lifecycle::use_plan(&s, "supervised");
    assert_eq!(code, 3, "{doc:#}");
    let exit = s.env.root().join("exit-code");
    let tmux = Tmux::new("correct");
    let command = tui_command(&s.env, &format!("--plan {id} --focus tree"), &exit);
    tmux.open(120, 40, &command);
    tmux.wait_for("the decision tree", |sc| sc.contains("prompt_definition"));
    // Enter explains the selected decision from the store.
    tmux.keys(&["Enter"]);
    tmux.wait_for("the explanation", |sc| {
        sc.contains("Why prompt_definition") && sc.contains("Impact of a correction")
    });
    // (Wait after Esc: a key right behind it would arrive as Alt-key.)
    tmux.keys(&["Escape"]);
    tmux.wait_for("the explanation closed", |sc| {
        !sc.contains("Why prompt_definition")
    });
    tmux.keys(&["c"]);
    tmux.wait_for("the editor", |sc| {
        sc.contains("Guidance") && sc.contains("revert")
    });
    tmux.keys(&["-l", "Mention the date"]);
    tmux.keys(&["Enter"]);
    tmux.keys(&["-l", "in the title"]);
    tmux.keys(&["Tab"]);
    tmux.wait_for("two lines and append", |sc| {
        sc.contains("Mention the date") && sc.contains("in the title") && sc.contains("● append")
    });
    tmux.keys(&["C-s"]);
    // The offline script executor cannot carry free-text guidance: the dry run refuses the
    // append as `plan correct --mode append --dry-run` does, and offers no confirm.
    let screen = tmux.wait_up_to("the dry-run result", Duration::from_secs(20), |sc| {
        sc.contains("This correction would be refused")
    });
    assert!(
        screen.contains("never free-text") && !screen.contains("y/Enter correct"),
        "{screen}"
    );
    tmux.keys(&["Escape"]);
    tmux.wait_for("the editor closed", |sc| !sc.contains("Correct decision"));
    tmux.keys(&["q"]);
    assert_eq!(tmux.exit_code(&exit, Duration::from_secs(15)), "0");
}

#[test]
fn reviewing_the_diff_then_applying_from_the_plans_pane_commits_the_plan() {
    let s = crate::cli::lifecycle::setup();
    let (doc, code, id) = crate::cli::lifecycle::use_plan(&s, "trusted");
    assert_eq!(code, 3, "trusted waits at the apply gate: {doc:#}");
    let exit = s.env.root().join("exit-code");
    let tmux = Tmux::new("apply");
    let command = tui_command(&s.env, &format!("--plan {id}"), &exit);
    tmux.open(120, 40, &command);
    tmux.wait_for("the plan's diff", |sc| sc.contains("NOTES.md"));
    // A shows the diff zoomed for review; nothing is applied yet.
    tmux.keys(&["A"]);
    let review = tmux.wait_for("the review", |sc| sc.contains("REVIEW BEFORE APPLY"));
    assert!(review.contains("+Release 1.2"), "{review}");
    tmux.keys(&["n"]);
    tmux.keys(&["A"]);
    tmux.wait_for("the confirm", |sc| sc.contains("Apply?"));
    tmux.keys(&["y"]);
    tmux.wait_up_to("the plan applied", Duration::from_secs(60), |sc| {
        sc.contains("applied") && sc.contains("done.")
    });
    let message = git_out(&s.repo, &["log", "--format=%B", "-1"]);
    assert!(message.contains(&format!("Plan-Id: {id}")), "{message}");
    tmux.keys(&["q"]);
    assert_eq!(tmux.exit_code(&exit, Duration::from_secs(15)), "0");
}

#[test]
fn a_keymap_file_rebinds_keys_and_a_bad_one_is_refused_naming_the_entry() {
    let env = Env::new();
    let dir = env.config_path.parent().unwrap().to_path_buf();
    std::fs::create_dir_all(&dir).unwrap();
    let keys = dir.join("keys.toml");
    std::fs::write(&keys, "[diff]\nnext_hunks = [\"n\"]\n").unwrap();
    let exit = env.root().join("exit-code");
    let tmux = Tmux::new("keymap");
    // Keep the pane open after the TUI exits so its message can be read.
    let command = format!("{}; sleep 30", tui_command(&env, "", &exit));
    tmux.open(120, 40, &command);
    assert_eq!(tmux.exit_code(&exit, Duration::from_secs(15)), "1");
    let screen = tmux.screen();
    assert!(screen.contains("keys.toml is invalid"), "{screen}");
    assert!(screen.contains("\"next_hunks\" in [diff]"), "{screen}");
    drop(tmux);

    // A valid file: q no longer quits, ctrl-q does; `?` lists the new key.
    std::fs::write(&keys, "[global]\nquit = [\"ctrl-q\"]\n").unwrap();
    std::fs::remove_file(&exit).unwrap();
    let tmux = Tmux::new("keymap2");
    let command = tui_command(&env, "", &exit);
    tmux.open(120, 40, &command);
    tmux.wait_for("the TUI", |sc| sc.contains("1 Plans"));
    tmux.keys(&["q"]);
    tmux.keys(&["?"]);
    tmux.wait_for("the keys", |sc| {
        sc.contains("Ctrl-q") && sc.contains("quit")
    });
    assert!(!exit.exists(), "q did not quit");
    tmux.keys(&["Escape"]);
    tmux.wait_for("help closed", |sc| !sc.contains("Everywhere"));
    tmux.keys(&["C-q"]);
    assert_eq!(tmux.exit_code(&exit, Duration::from_secs(15)), "0");
}

#[test]
fn the_use_form_asks_for_the_actions_arguments_and_creates_the_plan_with_them() {
    let s = crate::cli::lifecycle::setup();
    let exit = s.env.root().join("exit");
    let tmux = Tmux::new("use-args");
    let command = tui_command(&s.env, "", &exit);
    tmux.open(120, 40, &command);
    tmux.wait_for("the empty list", |sc| sc.contains("No plans yet"));
    tmux.keys(&["u"]);
    tmux.wait_for("the form with the argument", |sc| {
        sc.contains("Use an action on a project") && sc.contains("version*")
    });
    // Enter without the required argument is refused in the form.
    tmux.keys(&["Enter"]);
    tmux.wait_for("the refusal", |sc| sc.contains("`version` is required"));
    tmux.keys(&["-l", "3.4-rc1"]);
    tmux.keys(&["Enter"]);
    tmux.wait_up_to("the new plan", Duration::from_secs(20), |sc| {
        sc.contains("local/notes") && !sc.contains("Use an action on a project")
    });
    tmux.keys(&["q"]);
    let deadline = Instant::now() + Duration::from_secs(20);
    let plan = loop {
        let (list, _) = s.env.json(&["plan", "list"]);
        if let Some(p) = list["data"]["plans"].as_array().and_then(|a| a.first()) {
            break p.clone();
        }
        assert!(Instant::now() < deadline, "no plan: {list:#}");
        std::thread::sleep(Duration::from_millis(200));
    };
    let (status, _) = s
        .env
        .json(&["plan", "status", plan["plan_id"].as_str().unwrap()]);
    assert_eq!(
        status["data"]["definition_of_done"], "NOTES.md names version 3.4-rc1",
        "{status:#}"
    );
}

/// One step from the definition of done, for a model execution actor.
const MODEL_STEP: &str = "name: local/notes\ndescription: Write release notes\ndefinition-of-done: NOTES.md names the release\nstrategy-actor: builtin/checklist-strategist\nexecution-actor: builtin/script-executor\narguments:\n  - name: version\n    type: string\n    required: true\n";

/// The commands (`comm`) of the processes whose parent is `pid`.
fn children_of(pid: &str) -> Vec<String> {
    let out = std::process::Command::new("ps")
        .args(["--ppid", pid, "-o", "comm="])
        .output()
        .expect("ps runs");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| l.trim().to_owned())
        .filter(|l| !l.is_empty())
        .collect()
}

#[test]
fn the_live_area_streams_the_models_text_and_tool_calls_while_the_step_runs_in_process() {
    use crate::support::provider_server::{ProviderServer, Turn};
    // The model writes a file, then streams text (one `a` every 50 ms) without ever ending
    // its reply: the step is still running whenever the screen is read.
    let server = ProviderServer::start(vec![
        Turn::tools(
            "Drafting first.",
            &[(
                "write_file",
                r#"{"path": "DRAFT.md", "content": "draft\n"}"#,
            )],
            (20, 5),
        ),
        Turn::Drip {
            every: Duration::from_millis(50),
            tokens: true,
        },
    ]);
    let s = crate::cli::lifecycle::setup_with(MODEL_STEP);
    crate::cli::lifecycle::scripted_env(&s, &server, "openai");
    let (doc, code) = crate::support::run_keyed(
        &s.env,
        &[
            "plan",
            "use",
            "--execution-actor",
            "scripted/m",
            "--automation-profile",
            "supervised",
            "local/notes",
            "app",
            "--arg",
            "version=1.2",
        ],
    );
    assert_eq!(code, 3, "supervised waits at the execute gate: {doc:#}");
    let id = doc["data"]["plan_id"].as_str().unwrap().to_owned();
    let short = &id[..8];
    let exit = s.env.root().join("exit-code");
    let tmux = Tmux::new("live");
    let command = tui_command_with(
        &s.env,
        "SCRIPTED_API_KEY=sk-test",
        &format!("--plan {id}"),
        &exit,
    );
    tmux.open(140, 45, &command);
    tmux.wait_for("the plan", |sc| sc.contains(short));
    tmux.keys(&["e"]);
    let screen = tmux.wait_up_to(
        "the streamed text in the live area",
        Duration::from_secs(60),
        |sc| sc.contains("Live · plan") && sc.contains("aaaaaaaaaa"),
    );
    assert!(screen.contains("⚙ write_file"), "{screen}");
    assert!(
        screen.contains("DRAFT.md"),
        "the call's arguments: {screen}"
    );
    assert!(screen.contains("✓ write_file"), "{screen}");
    assert!(screen.contains("Drafting first."), "{screen}");
    // The step has not ended: the plan still processes its Execute.
    let (status, _) = s.env.json(&["plan", "status", &id]);
    assert_eq!(
        (
            status["data"]["phase"].as_str(),
            status["data"]["state"].as_str()
        ),
        (Some("execute"), Some("processing")),
        "{status:#}"
    );
    // The text keeps coming while the screen is watched.
    let before = screen.matches('a').count();
    tmux.wait_up_to("more streamed text", Duration::from_secs(10), |sc| {
        sc.matches('a').count() > before
    });
    // The TUI runs the plan itself: the shell's child is the TUI, and the TUI has no child
    // `agents` process.
    let shell = String::from_utf8_lossy(
        &tmux
            .cmd(&["display", "-p", "-t", "s", "#{pane_pid}"])
            .stdout,
    )
    .trim()
    .to_owned();
    let tui_pid = String::from_utf8_lossy(
        &std::process::Command::new("pgrep")
            .args(["-P", &shell, "agents"])
            .output()
            .unwrap()
            .stdout,
    )
    .trim()
    .to_owned();
    assert!(
        !tui_pid.is_empty(),
        "the TUI runs under the pane's shell {shell}"
    );
    let kids = children_of(&tui_pid);
    assert!(
        !kids.iter().any(|k| k == "agents"),
        "no child agents process of the TUI: {kids:?}"
    );
    // Quitting while the plan runs here asks, then interrupts it like Ctrl-C: queued,
    // resumable.
    tmux.keys(&["q"]);
    tmux.wait_for("the quit question", |sc| sc.contains("Quit?"));
    tmux.keys(&["y"]);
    assert_eq!(tmux.exit_code(&exit, Duration::from_secs(15)), "0");
    let (status, _) = s.env.json(&["plan", "status", &id]);
    assert_eq!(
        (
            status["data"]["phase"].as_str(),
            status["data"]["state"].as_str()
        ),
        (Some("execute"), Some("queued")),
        "interrupted, resumable: {status:#}"
    );
}

/// The marks of `plan review PLAN`, as another process reads them: `(path, old_start, mark)`.
fn review_marks(env: &Env, plan: &str) -> Vec<(String, u64, String)> {
    let (doc, code) = env.json(&["plan", "review", plan]);
    assert_eq!(code, 0, "{doc:#}");
    let mut out = Vec::new();
    for f in doc["data"]["files"].as_array().unwrap() {
        for i in f["items"].as_array().unwrap() {
            out.push((
                f["path"].as_str().unwrap().to_owned(),
                i["old_start"].as_u64().unwrap(),
                i["mark"].as_str().unwrap().to_owned(),
            ));
        }
    }
    out
}

#[test]
fn reviewing_hunk_by_hunk_in_the_tui_applies_exactly_the_accepted_part() {
    use crate::cli::apply::{plan_at_apply_gate, repo_with};
    let env = Env::new();
    let a: String = (1..=20).map(|i| format!("a{i}\n")).collect();
    let b: String = (1..=5).map(|i| format!("b{i}\n")).collect();
    let repo = repo_with(env.root(), "repo", &[("a.txt", &a), ("b.txt", &b)]);
    let plan = plan_at_apply_gate(
        &env,
        &[&repo],
        &[
            "sed -i 's/^a1$/A1/; s/^a20$/A20/' a.txt && sed -i 's/^b3$/B3/' b.txt && printf 'new\\n' > c.txt",
        ],
    );
    let exit = env.root().join("exit-code");
    let tmux = Tmux::new("review");
    let command = tui_command(&env, &format!("--plan {plan}"), &exit);
    tmux.open(140, 45, &command);
    tmux.wait_for("the diff with its marks", |sc| {
        sc.contains("c.txt") && sc.contains("·4 pending")
    });
    // A: the diff zoomed for review, the file list beside it.
    tmux.keys(&["A"]);
    // The file list is waited for as a whole: a capture may catch the frame half drawn.
    tmux.wait_for("the review with its three files", |sc| {
        sc.contains("REVIEW BEFORE APPLY")
            && sc.contains("M a.txt")
            && sc.contains("M b.txt")
            && sc.contains("A c.txt")
    });
    // Space accepts a.txt's first hunk and moves to its second; x rejects that one.
    tmux.keys(&["Space"]);
    tmux.wait_for("one accepted", |sc| sc.contains("✓1 ✗0 ·3 pending"));
    tmux.keys(&["x"]);
    tmux.wait_for("the reason prompt", |sc| sc.contains("Why (optional"));
    tmux.keys(&["-l", "keep a20"]);
    tmux.keys(&["Enter"]);
    tmux.wait_for("one rejected", |sc| {
        sc.contains("✓1 ✗1 ·2 pending") && sc.contains("rejected: keep a20")
    });
    // ] goes to b.txt; a accepts the rest of it and moves to c.txt, which x rejects.
    tmux.keys(&["]"]);
    tmux.keys(&["a"]);
    tmux.wait_for("b.txt accepted", |sc| sc.contains("✓2 ✗1 ·1 pending"));
    tmux.keys(&["x"]);
    tmux.wait_for("the reason prompt", |sc| sc.contains("Why (optional"));
    tmux.keys(&["Enter"]);
    tmux.wait_for("c.txt rejected", |sc| sc.contains("✓2 ✗2 ·0 pending"));
    // Another process sees the marks.
    let deadline = Instant::now() + Duration::from_secs(20);
    let want = vec![
        ("a.txt".to_owned(), 1, "accepted".to_owned()),
        ("a.txt".to_owned(), 17, "rejected".to_owned()),
        ("b.txt".to_owned(), 1, "accepted".to_owned()),
        ("c.txt".to_owned(), 0, "rejected".to_owned()),
    ];
    loop {
        let marks = review_marks(&env, &plan);
        if marks == want {
            break;
        }
        assert!(Instant::now() < deadline, "marks stored: {marks:?}");
        std::thread::sleep(Duration::from_millis(200));
    }
    // Apply: the confirmation names only the accepted part.
    tmux.keys(&["A"]);
    let confirm = tmux.wait_for("the confirm", |sc| sc.contains("y/Enter yes"));
    assert!(
        confirm.contains("Apply only the accepted part")
            && confirm.contains("M a.txt (1/2)")
            && confirm.contains("M b.txt (1/1)")
            && !confirm.contains("c.txt (")
            && confirm.contains("2 rejected, 0 pending"),
        "{confirm}"
    );
    tmux.keys(&["y"]);
    tmux.wait_up_to("the plan applied", Duration::from_secs(60), |sc| {
        sc.contains("applied") && sc.contains("done.")
    });
    let show = |what: &str| {
        let o = std::process::Command::new("git")
            .arg("-C")
            .arg(&repo)
            .args(["show", what])
            .output()
            .unwrap();
        (
            String::from_utf8_lossy(&o.stdout).into_owned(),
            o.status.success(),
        )
    };
    assert_eq!(show("HEAD:a.txt").0, a.replacen("a1\n", "A1\n", 1));
    assert_eq!(show("HEAD:b.txt").0, b.replace("b3\n", "B3\n"));
    assert!(!show("HEAD:c.txt").1, "the rejected file is not committed");
    let message = show("-s").0;
    assert!(
        message.contains("Left out") && message.contains("keep a20"),
        "{message}"
    );
    tmux.keys(&["q"]);
    assert_eq!(tmux.exit_code(&exit, Duration::from_secs(15)), "0");
}

#[test]
fn the_tui_says_a_rejected_gate_and_its_use_form_makes_a_plan_under_the_chosen_profile_and_selects_it()
 {
    let s = crate::cli::lifecycle::setup();
    let (doc, code, first) = crate::cli::lifecycle::use_plan(&s, "trusted");
    assert_eq!(code, 3, "trusted waits at the apply gate: {doc:#}");
    let apr = doc["data"]["approval"]["approval_id"]
        .as_str()
        .unwrap()
        .to_string();
    let env = &s.env;
    let (doc, code) = env.json(&["plan", "reject", &apr, "--reason", "not now"]);
    assert_eq!(code, 0, "{doc:#}");
    let tmux = Tmux::new("useform");
    tmux.open(140, 45, &env.terminal_command("tui"));
    // `plan status` says "its gate was rejected": the plans list does not say `complete`.
    let screen = tmux.wait_for("the rejected plan", |sc| sc.contains(&first[..8]));
    let row = screen.lines().find(|l| l.contains(&first[..8])).unwrap();
    assert!(
        row.contains("gate rejected") && !row.contains("complete"),
        "{row}"
    );
    // The use form: actions, projects, then the profile (the default to start with).
    tmux.keys(&["u"]);
    tmux.wait_for("the use form", |sc| sc.contains("Profile ‹ default ›"));
    tmux.keys(&["Tab", "Tab"]);
    for _ in 0..8 {
        if tmux.screen().contains("‹ supervised ›") {
            break;
        }
        tmux.keys(&["Right"]);
        std::thread::sleep(Duration::from_millis(300));
    }
    tmux.wait_for("supervised chosen", |sc| sc.contains("‹ supervised ›"));
    tmux.keys(&["Tab", "-l", "2.0"]);
    tmux.keys(&["Enter"]);
    // The plan is created; the TUI selects it (plans pane and the tree's title).
    let deadline = Instant::now() + Duration::from_secs(60);
    let made = loop {
        let (list, _) = env.json(&["plan", "list"]);
        let ids: Vec<String> = list["data"]["plans"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| p["plan_id"].as_str().unwrap().to_string())
            .filter(|id| *id != first)
            .collect();
        if let [id] = &ids[..] {
            break id.clone();
        }
        assert!(Instant::now() < deadline, "no plan was made: {list:#}");
        std::thread::sleep(Duration::from_millis(200));
    };
    tmux.wait_for("the new plan selected", |sc| {
        sc.contains(&format!("» {}", &made[..8]))
            && sc.contains(&format!("Decisions · plan {}", &made[..8]))
    });
    let (status, _) = env.json(&["plan", "status", &made]);
    assert_eq!(
        status["data"]["automation_profile"], "supervised",
        "{status:#}"
    );
    tmux.keys(&["q"]);
}
