//! The TUI's bridge in process (spec section 20): what it reads through the engine's API
//! (plans, approvals, the tree, explanations, checkpoints, the use form's choices) and how it
//! answers commands, on a real database written as another process would write it.

use std::path::Path;
use std::time::{Duration, Instant};

use cleveragents::tui::{Bridge, Connection};
use cleveragents_engine::api::{Engine, Settings};
use cleveragents_engine::domain::approval::{Approval, ApprovalKind};
use cleveragents_engine::domain::decision::Decision;
use cleveragents_engine::domain::id::Id;
use cleveragents_engine::domain::plan::Plan;
use cleveragents_engine::events::live::{self, LiveKind};
use cleveragents_engine::paths::Paths;
use cleveragents_engine::store::Store;
use cleveragents_ui::model::{self as view, LiveUpdate};
use cleveragents_ui::{Cmd, Msg};

/// A bridge on an in-process engine over `dir/data`; `operations` false leaves it read-only
/// (as an unusable config file does).
fn bridge_on(dir: &Path, operations: bool) -> Bridge {
    let paths = Paths::at(dir.join("data"), dir.join("config.toml"));
    std::fs::create_dir_all(&paths.data_dir).unwrap();
    let engine = Engine::new(paths, Settings::default());
    Bridge::new(Connection::in_process(engine, operations), None).unwrap()
}

#[test]
fn refresh_sends_plans_once_and_again_after_another_process_writes() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("data").join("cleveragents.db");
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    let mut bridge = bridge_on(dir.path(), true);
    let first = bridge.refresh().unwrap();
    assert!(matches!(&first[0], Msg::PlansUpdated(rows) if rows.is_empty()));
    assert!(bridge.refresh().unwrap().is_empty(), "nothing changed");
    let mut other = Store::open(&path).unwrap();
    other
        .insert_plan(&Plan::new("local/a", "a", jiff::Timestamp::now()))
        .unwrap();
    let again = bridge.refresh().unwrap();
    assert!(
        matches!(&again[0], Msg::PlansUpdated(rows) if rows.len() == 1),
        "{again:?}"
    );
}

#[test]
fn pending_approvals_reach_the_queue() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("data").join("cleveragents.db");
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    let mut store = Store::open(&path).unwrap();
    let plan = Plan::new("local/a", "a", jiff::Timestamp::now());
    store.insert_plan(&plan).unwrap();
    let apr = Approval::new(
        plan.plan_id,
        ApprovalKind::PhaseGate,
        "Move to apply",
        jiff::Timestamp::now(),
    );
    store.insert_approval(&apr).unwrap();
    let mut bridge = bridge_on(dir.path(), true);
    let msgs = bridge.refresh().unwrap();
    let Msg::ApprovalsUpdated(items) = &msgs[1] else {
        panic!("{msgs:?}")
    };
    assert_eq!(items.len(), 1);
    assert_eq!(
        (items[0].kind, items[0].summary.as_str()),
        (view::ApprovalKind::PhaseGate, "Move to apply")
    );
}

#[test]
fn selecting_a_plan_sends_its_decision_tree_nested_by_parent() {
    use cleveragents_engine::domain::decision::DecisionType;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("data").join("cleveragents.db");
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    let mut store = Store::open(&path).unwrap();
    let plan = Plan::new("local/a", "a", jiff::Timestamp::now());
    store.insert_plan(&plan).unwrap();
    let root = Decision::new(
        plan.plan_id,
        DecisionType::PromptDefinition,
        "Write notes",
        jiff::Timestamp::now(),
    );
    let mut step = Decision::new(
        plan.plan_id,
        DecisionType::ImplementationChoice,
        "NOTES.md",
        jiff::Timestamp::now(),
    );
    step.parent_decision_id = Some(root.decision_id);
    step.question = Some("Where do the notes go?".into());
    step.confidence_score = Some(0.5);
    store.insert_decision(&root).unwrap();
    store.insert_decision(&step).unwrap();
    let mut bridge = bridge_on(dir.path(), true);
    assert_eq!(bridge.handle(Cmd::SelectPlan(plan.plan_id.to_string())), []);
    let (nodes, diff) = wait_for_views(&mut bridge);
    assert_eq!(nodes.len(), 1);
    assert_eq!(nodes[0].decision_type, "prompt_definition");
    assert_eq!(nodes[0].children.len(), 1);
    let child = &nodes[0].children[0];
    assert_eq!(
        (
            child.summary.as_str(),
            child.chosen.as_str(),
            child.confidence
        ),
        ("Where do the notes go?", "NOTES.md", Some(0.5))
    );
    assert!(diff.files.is_empty(), "no sandbox yet, no changes");
    assert!(!bridge.is_busy());
}

/// The selected plan's tree and diff, as the worker sends them.
fn wait_for_views(bridge: &mut Bridge) -> (Vec<view::DecisionNode>, view::DiffView) {
    let deadline = Instant::now() + Duration::from_secs(20);
    let (mut tree, mut diff) = (None, None);
    loop {
        for msg in bridge.background() {
            match msg {
                Msg::TreeUpdated { nodes, .. } => tree = Some(nodes),
                Msg::DiffUpdated { diff: d, .. } => diff = Some(d),
                _ => {}
            }
        }
        if let (Some(_), Some(_)) = (&tree, &diff) {
            return (tree.unwrap_or_default(), diff.unwrap_or_default());
        }
        assert!(
            Instant::now() < deadline,
            "no tree and diff from the worker"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

struct Fixture {
    _dir: tempfile::TempDir,
    store: Store,
    bridge: Bridge,
    plan: Plan,
}

fn fixture() -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("data").join("cleveragents.db");
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    let mut store = Store::open(&path).unwrap();
    let plan = Plan::new("local/a", "a", jiff::Timestamp::now());
    store.insert_plan(&plan).unwrap();
    let bridge = bridge_on(dir.path(), true);
    Fixture {
        _dir: dir,
        store,
        bridge,
        plan,
    }
}

fn decision(
    store: &mut Store,
    plan: &Plan,
    kind: cleveragents_engine::domain::decision::DecisionType,
    chosen: &str,
    parent: Option<&Decision>,
) -> Decision {
    let mut d = Decision::new(plan.plan_id, kind, chosen, jiff::Timestamp::now());
    d.parent_decision_id = parent.map(|p| p.decision_id);
    store.insert_decision(&d).unwrap();
    d
}

#[test]
fn the_explanation_lists_what_the_decision_chose_and_everything_downstream() {
    use cleveragents_engine::domain::decision::DecisionType as T;
    let mut f = fixture();
    let mut root = Decision::new(
        f.plan.plan_id,
        T::ImplementationChoice,
        "sqlx",
        jiff::Timestamp::now(),
    );
    root.question = Some("Which database library?".into());
    root.alternatives_considered = vec!["diesel".into(), "rusqlite".into()];
    root.rationale = Some("async and compile-time checked".into());
    root.confidence_score = Some(0.75);
    f.store.insert_decision(&root).unwrap();
    let a = decision(
        &mut f.store,
        &f.plan,
        T::ImplementationChoice,
        "pool of 5",
        Some(&root),
    );
    let b = decision(
        &mut f.store,
        &f.plan,
        T::ImplementationChoice,
        "migrations dir",
        Some(&a),
    );
    let unrelated = decision(
        &mut f.store,
        &f.plan,
        T::ImplementationChoice,
        "README",
        None,
    );
    f.store
        .add_decision_dependency(
            &root.decision_id,
            &a.decision_id,
            "decision",
            &a.decision_id.to_string(),
        )
        .unwrap();
    f.store
        .add_decision_dependency(
            &a.decision_id,
            &b.decision_id,
            "decision",
            &b.decision_id.to_string(),
        )
        .unwrap();
    // A child plan spawned downstream of `a`, with its root decision.
    let mut child = Plan::new("local/a", "child", jiff::Timestamp::now());
    child.parent_plan_id = Some(f.plan.plan_id);
    child.root_plan_id = Some(f.plan.plan_id);
    f.store.insert_plan(&child).unwrap();
    let child_root = decision(
        &mut f.store,
        &child,
        T::PromptDefinition,
        "child goal",
        None,
    );
    f.store
        .add_decision_dependency(
            &a.decision_id,
            &child_root.decision_id,
            "plan",
            &child.plan_id.to_string(),
        )
        .unwrap();

    let msgs = f.bridge.handle(Cmd::ExplainDecision {
        plan_id: f.plan.plan_id.to_string(),
        decision_id: root.decision_id.to_string(),
    });
    let [Msg::Explanation(e)] = msgs.as_slice() else {
        panic!("{msgs:?}")
    };
    assert_eq!(e.question.as_deref(), Some("Which database library?"));
    assert_eq!(e.alternatives, ["diesel", "rusqlite"]);
    assert_eq!(
        e.rationale.as_deref(),
        Some("async and compile-time checked")
    );
    assert_eq!(e.confidence, Some(0.75));
    let impact: Vec<&str> = e.impact.iter().map(|d| d.chosen.as_str()).collect();
    assert_eq!(impact[0], "pool of 5", "nearest first");
    let mut further = impact[1..].to_vec();
    further.sort_unstable();
    assert_eq!(further, ["child goal", "migrations dir"]);
    assert!(!impact.contains(&unrelated.chosen_option.as_str()));
    assert_eq!(e.impact_child_plans, [child.plan_id.to_string()]);

    let missing = Id::generate().to_string();
    let unknown = f.bridge.handle(Cmd::ExplainDecision {
        plan_id: f.plan.plan_id.to_string(),
        decision_id: missing.clone(),
    });
    assert!(
        matches!(&unknown[..], [Msg::Error { detail, .. }] if detail.contains("no decision") && detail.contains(&missing)),
        "{unknown:?}"
    );
}

#[test]
fn child_plans_are_nested_under_their_spawning_decision() {
    use cleveragents_engine::domain::decision::DecisionType as T;
    let mut f = fixture();
    let root = decision(&mut f.store, &f.plan, T::PromptDefinition, "goal", None);
    let spawn = decision(
        &mut f.store,
        &f.plan,
        T::SubplanSpawn,
        "spawn docs plan",
        Some(&root),
    );
    let mut child = Plan::new("local/a", "child", jiff::Timestamp::now());
    child.parent_plan_id = Some(f.plan.plan_id);
    child.root_plan_id = Some(f.plan.plan_id);
    f.store.insert_plan(&child).unwrap();
    let child_root = decision(
        &mut f.store,
        &child,
        T::PromptDefinition,
        "write the docs",
        None,
    );
    decision(
        &mut f.store,
        &child,
        T::ImplementationChoice,
        "docs/guide.md",
        Some(&child_root),
    );
    f.store
        .add_decision_dependency(
            &spawn.decision_id,
            &child_root.decision_id,
            "plan",
            &child.plan_id.to_string(),
        )
        .unwrap();

    // A child plan no decision links (spawned before links were recorded): under the
    // parent plan's root decision, not dropped.
    let mut unlinked = Plan::new("local/a", "unlinked", jiff::Timestamp::now());
    unlinked.parent_plan_id = Some(f.plan.plan_id);
    unlinked.root_plan_id = Some(f.plan.plan_id);
    f.store.insert_plan(&unlinked).unwrap();
    decision(&mut f.store, &unlinked, T::PromptDefinition, "lint", None);

    f.bridge.handle(Cmd::SelectPlan(f.plan.plan_id.to_string()));
    let (nodes, _) = wait_for_views(&mut f.bridge);
    let spawn_node = &nodes[0].children[0];
    assert_eq!(spawn_node.decision_type, "subplan_spawn");
    assert_eq!(spawn_node.children.len(), 1);
    let plan_node = &spawn_node.children[0];
    assert_eq!(plan_node.decision_type, "plan");
    assert_eq!(plan_node.child_plan_id, Some(child.plan_id.to_string()));
    assert_eq!(plan_node.summary, "child");
    assert_eq!(plan_node.children[0].chosen, "write the docs");
    assert_eq!(plan_node.children[0].children[0].chosen, "docs/guide.md");
    let unlinked_node = nodes[0]
        .children
        .iter()
        .find(|n| n.child_plan_id == Some(unlinked.plan_id.to_string()))
        .expect("the unlinked child plan is shown");
    assert_eq!(unlinked_node.children[0].chosen, "lint");
}

#[test]
fn the_use_form_offers_available_actions_every_project_and_the_registered_profiles() {
    let mut f = fixture();
    let msgs = f.bridge.handle(Cmd::ListUseChoices);
    let [Msg::UseChoices(choices)] = msgs.as_slice() else {
        panic!("{msgs:?}")
    };
    assert!(choices.actions.is_empty() && choices.projects.is_empty());
    // The built-in profiles are registered from the start; none is configured here.
    for builtin in ["manual", "supervised", "trusted"] {
        assert!(choices.profiles.iter().any(|p| p == builtin), "{choices:?}");
    }
    assert_eq!(choices.configured_profile, None);
}

#[test]
fn a_plan_without_a_sandbox_has_no_checkpoints() {
    let mut f = fixture();
    let msgs = f.bridge.handle(Cmd::ListCheckpoints {
        plan_id: f.plan.plan_id.to_string(),
    });
    assert_eq!(
        msgs,
        [Msg::Checkpoints {
            plan_id: f.plan.plan_id.to_string(),
            items: vec![]
        }]
    );
}

#[test]
fn commands_that_need_the_lifecycle_say_so() {
    let dir = tempfile::tempdir().unwrap();
    let mut bridge = bridge_on(dir.path(), false);
    let msgs = bridge.handle(Cmd::Approve {
        approval_id: "x".into(),
    });
    assert!(matches!(&msgs[0], Msg::Error { title, .. } if title == "Not yet supported"));
    let msgs = bridge.handle(Cmd::Execute {
        plan_id: "x".into(),
    });
    assert!(matches!(&msgs[0], Msg::Error { title, .. } if title == "Not yet supported"));
}

#[test]
fn live_events_of_the_engine_become_live_area_messages() {
    let dir = tempfile::tempdir().unwrap();
    let mut bridge = bridge_on(dir.path(), false);
    let plan = Id::generate();
    let wanted = Msg::Live {
        plan_id: plan.to_string(),
        update: LiveUpdate::Text {
            text: "Hello".into(),
        },
    };
    // The feed subscribes on its own thread: publish until it listens.
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        live::publish(
            plan,
            LiveKind::TextDelta {
                actor: "openai/m".into(),
                turn: 1,
                text: "Hello".into(),
            },
        );
        std::thread::sleep(Duration::from_millis(100));
        if bridge.background().contains(&wanted) {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "the live area never got the text"
        );
    }
}

#[test]
fn operations_run_in_this_process_and_report_their_end() {
    let dir = tempfile::tempdir().unwrap();
    let mut bridge = bridge_on(dir.path(), true);
    let msgs = bridge.handle(Cmd::Execute {
        plan_id: "01JDQ4V6B3G9X2K7M5N8P0R1ST".into(),
    });
    assert!(
        matches!(&msgs[..], [Msg::Activity(a)] if a.len() == 1),
        "{msgs:?}"
    );
    let deadline = Instant::now() + Duration::from_secs(20);
    let end = loop {
        let got: Vec<Msg> = bridge.background();
        if let Some(m) = got.into_iter().find(|m| matches!(m, Msg::Finished { .. })) {
            break m;
        }
        assert!(Instant::now() < deadline, "the operation never ended");
        std::thread::sleep(Duration::from_millis(10));
    };
    let Msg::Finished { ok, text } = end else {
        unreachable!()
    };
    assert!(!ok);
    assert!(text.starts_with("plan execute 01JDQ4V6 failed:"), "{text}");
    assert!(!bridge.is_busy());
}
