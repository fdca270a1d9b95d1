//! The TUI's engine in its own process (spec section 20), driven through the bridge as the
//! TUI drives it: a script step's output lines and the plan's progress reach the live area as
//! the step runs, and a correction's dry run refuses what `plan correct` refuses.

use std::time::{Duration, Instant};

use cleveragents::tui::{Bridge, Connection};
use cleveragents_engine::api::{Engine, Settings};
use cleveragents_engine::paths::Paths;
use cleveragents_engine::store::Store;
use cleveragents_ui::model::LiveUpdate;
use cleveragents_ui::{Cmd, Msg};

use super::lifecycle::{setup_with, use_plan};

/// One step that prints a line, then waits for `go` to appear in the work tree.
const WAITING_ACTION: &str = r#"name: local/notes
description: Count while waiting for {{ version }}
definition-of-done: the step ended
strategy-actor: builtin/checklist-strategist
execution-actor: builtin/script-executor
arguments:
  - name: version
    type: string
    required: true
script:
  - name: count
    run: printf 'tick 1\n'; while [ ! -e go ]; do sleep 0.05; done; printf 'tick 2\n'
"#;

/// Collects the bridge's messages until `until` holds for one, at most 120 s.
fn collect(bridge: &mut Bridge, seen: &mut Vec<Msg>, what: &str, until: impl Fn(&Msg) -> bool) {
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let got = bridge.background();
        let done = got.iter().any(&until);
        seen.extend(got);
        if done {
            return;
        }
        assert!(Instant::now() < deadline, "never saw {what}: {seen:#?}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// A step's output line of plan `plan` (other tests of this process may drive plans too).
fn output<'m>(m: &'m Msg, plan: &str) -> Option<&'m str> {
    match m {
        Msg::Live {
            plan_id,
            update: LiveUpdate::Output { line, .. },
        } if plan_id == plan => Some(line),
        _ => None,
    }
}

#[test]
fn a_script_steps_output_reaches_the_live_area_while_the_step_runs() {
    let s = setup_with(WAITING_ACTION);
    let (doc, code, id) = use_plan(&s, "supervised");
    assert_eq!(code, 3, "supervised stops before Execute: {doc:#}");
    let paths = Paths::at(s.env.data_dir.clone(), s.env.config_path.clone());
    let engine = Engine::new(paths.clone(), Settings::default());
    let mut bridge = Bridge::new(Connection::in_process(engine, true), None).unwrap();
    bridge.handle(Cmd::Execute {
        plan_id: id.clone(),
    });
    let mut seen = Vec::new();
    collect(&mut bridge, &mut seen, "the first line", |m| {
        output(m, &id) == Some("tick 1")
    });
    assert!(
        !seen.iter().any(|m| matches!(m, Msg::Finished { .. })),
        "the step is still waiting for `go`"
    );
    let progress: Vec<&str> = seen
        .iter()
        .filter_map(|m| match m {
            Msg::Live {
                plan_id,
                update: LiveUpdate::Progress { text },
            } if *plan_id == id => Some(text.as_str()),
            _ => None,
        })
        .collect();
    assert!(
        progress.iter().any(|t| t.starts_with("Execute started")),
        "the area follows the plan from its first event: {progress:?}"
    );
    let work = {
        let st = Store::open(&paths.database()).unwrap();
        st.sandboxes_of_plan(&id.parse().unwrap()).unwrap()[0]
            .layout()
            .work_dir
    };
    std::fs::write(work.join("go"), "").unwrap();
    collect(&mut bridge, &mut seen, "the end of the run", |m| {
        matches!(m, Msg::Finished { .. })
    });
    let lines: Vec<&str> = seen.iter().filter_map(|m| output(m, &id)).collect();
    assert_eq!(lines, ["tick 1", "tick 2"], "each line once, in order");
}

#[test]
fn the_tuis_append_dry_run_is_refused_as_plan_correct_refuses_it() {
    use cleveragents_ui::model::CorrectionMode;
    let s = setup_with(WAITING_ACTION);
    let (_, _, id) = use_plan(&s, "supervised");
    let paths = Paths::at(s.env.data_dir.clone(), s.env.config_path.clone());
    let decision = {
        let st = Store::open(&paths.database()).unwrap();
        st.decisions(&id.parse().unwrap())
            .unwrap()
            .into_iter()
            .find(|d| d.step.is_some())
            .expect("a step decision")
            .decision_id
            .to_string()
    };
    let (doc, code) = s.env.json(&[
        "plan",
        "correct",
        "--mode",
        "append",
        "-g",
        "x",
        "--dry-run",
        &decision,
    ]);
    assert_eq!(code, 1, "{doc:#}");
    let cli = doc["error"]["message"].as_str().unwrap().to_string();
    let engine = Engine::new(paths.clone(), Settings::default());
    let mut bridge = Bridge::new(Connection::in_process(engine, true), None).unwrap();
    bridge.handle(Cmd::PreviewCorrection {
        decision_id: decision.clone(),
        mode: CorrectionMode::Append,
        guidance: "x".into(),
    });
    let mut seen = Vec::new();
    collect(&mut bridge, &mut seen, "the preview", |m| {
        matches!(m, Msg::CorrectionPreview { .. })
    });
    let refused = seen.iter().find_map(|m| match m {
        Msg::CorrectionPreview { result, .. } => Some(result.clone().unwrap().refused),
        _ => None,
    });
    let refused = refused.flatten().expect("the TUI's dry run refuses it");
    assert!(
        refused.contains("never free-text guidance") && cli.contains("never free-text guidance"),
        "TUI: {refused}\nCLI: {cli}"
    );
}

#[test]
fn after_a_partial_apply_the_diff_pane_shows_the_commit_and_what_was_left_out() {
    use super::apply::{plan_at_apply_gate, repo_with};
    let env = crate::support::Env::new();
    // The engine runs in this process, which cannot see a shared checkout's tree.
    env.use_full_checkouts();
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
    let head = crate::support::git_out(&repo, &["rev-parse", "HEAD"]);
    let paths = Paths::at(env.data_dir.clone(), env.config_path.clone());
    let engine = Engine::new(paths, Settings::default());
    let mut bridge = Bridge::new(Connection::in_process(engine, true), None).unwrap();
    bridge.handle(Cmd::SelectPlan(plan.clone()));
    let mut seen = Vec::new();
    collect(
        &mut bridge,
        &mut seen,
        "the plan's diff",
        |m| matches!(m, Msg::DiffUpdated { plan_id, .. } if *plan_id == plan),
    );
    let diff = seen
        .iter()
        .rev()
        .find_map(|m| match m {
            Msg::DiffUpdated { plan_id, diff } if *plan_id == plan => Some(diff),
            _ => None,
        })
        .unwrap();
    let files: Vec<&str> = diff.files.iter().map(|f| f.path.as_str()).collect();
    assert_eq!(files, ["a.txt"], "what the commit wrote: {diff:#?}");
    let title = diff.applied.clone().unwrap_or_default();
    assert!(
        title.contains(&format!("applied in {}", &head.trim()[..12])),
        "{title}"
    );
    assert!(title.contains("left out: b.txt"), "{title}");
}

/// The screen the TUI draws from everything `bridge` sent so far, `width` x `height`, as text.
fn screen_of(app: &cleveragents_ui::App, width: u16, height: u16) -> String {
    let area = ratatui::layout::Rect::new(0, 0, width, height);
    let mut buf = ratatui::buffer::Buffer::empty(area);
    cleveragents_ui::render(app, &cleveragents_ui::Theme::default(), area, &mut buf);
    (0..height)
        .map(|y| {
            (0..width)
                .map(|x| buf[(x, y)].symbol().to_string())
                .collect::<String>()
        })
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn a_plan_whose_apply_gate_was_rejected_is_not_shown_as_complete_but_as_plan_status_words_it() {
    let s = super::lifecycle::setup();
    let (doc, code, id) = use_plan(&s, "trusted");
    assert_eq!(code, 3, "trusted waits at the apply gate: {doc:#}");
    let apr = doc["data"]["approval"]["approval_id"]
        .as_str()
        .unwrap()
        .to_string();
    let (doc, code) = s.env.json(&["plan", "reject", &apr, "--reason", "not now"]);
    assert_eq!(code, 0, "{doc:#}");
    let status = crate::support::stdout(&s.env.run(&["--format", "plain", "plan", "status", &id]));
    assert!(status.contains("its gate was rejected"), "{status}");

    let paths = Paths::at(s.env.data_dir.clone(), s.env.config_path.clone());
    let engine = Engine::new(paths, Settings::default());
    let mut bridge = Bridge::new(Connection::in_process(engine, true), None).unwrap();
    let mut app = cleveragents_ui::App::new();
    for msg in bridge.refresh().unwrap() {
        app.update(msg);
    }
    let screen = screen_of(&app, 120, 40);
    let row = screen
        .lines()
        .find(|l| l.contains(&id[..8]))
        .unwrap_or_else(|| panic!("the plan is listed:\n{screen}"));
    assert!(
        row.contains("gate rejected") && !row.contains("complete"),
        "the row says what `plan status` says, not `complete`: {row}"
    );
}

/// Applies `msgs` to the UI and carries out every command it answers with on the bridge, and
/// every message those answer with, until nothing is left.
fn pump(app: &mut cleveragents_ui::App, bridge: &mut Bridge, msgs: Vec<Msg>) {
    let mut pending = msgs;
    while !pending.is_empty() {
        for msg in std::mem::take(&mut pending) {
            for cmd in app.update(msg) {
                pending.extend(bridge.handle(cmd));
            }
        }
    }
}

/// Runs the TUI's loop (refresh, background work) until `until` holds for the UI, at most
/// 120 s.
fn settle(
    app: &mut cleveragents_ui::App,
    bridge: &mut Bridge,
    what: &str,
    until: impl Fn(&cleveragents_ui::App) -> bool,
) {
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let mut msgs = bridge.refresh().unwrap();
        msgs.extend(bridge.background());
        pump(app, bridge, msgs);
        if until(app) {
            return;
        }
        assert!(Instant::now() < deadline, "never saw {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn keys(app: &mut cleveragents_ui::App, bridge: &mut Bridge, keys: &[cleveragents_ui::Key]) {
    pump(app, bridge, keys.iter().map(|k| Msg::Key(*k)).collect());
}

#[test]
fn the_use_form_creates_the_plan_under_the_profile_chosen_as_plan_use_does_and_selects_it() {
    use cleveragents_ui::Key;
    use cleveragents_ui::overlay::{Overlay, UseForm};
    let s = super::lifecycle::setup();
    let (_, code, first) = use_plan(&s, "manual");
    assert_eq!(code, 3, "manual waits at the strategize gate");
    let paths = Paths::at(s.env.data_dir.clone(), s.env.config_path.clone());
    let engine = Engine::new(paths, Settings::default());
    let mut bridge = Bridge::new(Connection::in_process(engine, true), None).unwrap();
    let mut app = cleveragents_ui::App::new();
    settle(&mut app, &mut bridge, "the first plan selected", |a| {
        a.plans().selected_id() == Some(first.as_str())
    });
    keys(&mut app, &mut bridge, &[Key::Char('u')]);
    let form = |app: &cleveragents_ui::App| -> UseForm {
        match app.overlays().last() {
            Some(Overlay::Use(form)) => form.clone(),
            other => panic!("the use form is open: {other:?}"),
        }
    };
    // The registered profiles, as `automation-profile list` lists them; the default first.
    let (list, _) = s.env.json(&["automation-profile", "list"]);
    let names: Vec<String> = list["data"]["profiles"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["name"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(form(&app).profiles, names);
    assert_eq!(form(&app).chosen_profile(), None);
    // Actions, projects, then the profile: `supervised`.
    keys(&mut app, &mut bridge, &[Key::Tab, Key::Tab]);
    for _ in 0..names.len() {
        if form(&app).chosen_profile() == Some("supervised") {
            break;
        }
        keys(&mut app, &mut bridge, &[Key::Right]);
    }
    assert_eq!(form(&app).chosen_profile(), Some("supervised"));
    keys(&mut app, &mut bridge, &[Key::Tab]);
    keys(
        &mut app,
        &mut bridge,
        &"2.0".chars().map(Key::Char).collect::<Vec<_>>(),
    );
    keys(&mut app, &mut bridge, &[Key::Enter]);
    assert!(app.overlays().is_empty(), "{:?}", app.overlays());
    settle(&mut app, &mut bridge, "the new plan selected", |a| {
        a.plans().selected_id().is_some_and(|id| id != first)
    });
    let made = app.plans().selected_id().unwrap().to_string();
    let (status, _) = s.env.json(&["plan", "status", &made]);
    assert_eq!(
        status["data"]["automation_profile"], "supervised",
        "{status:#}"
    );
    assert_eq!(status["data"]["arguments"]["version"], "2.0", "{status:#}");
    // The tree pane follows the new plan.
    settle(&mut app, &mut bridge, "the new plan's tree", |a| {
        a.tree().plan_id() == Some(made.as_str())
    });
}
