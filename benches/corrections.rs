//! Correction scale benchmark: a synthetic decision tree of about 100,000
//! decisions across 1,000 child plans in a real SQLite file (the schema the binary creates),
//! linked as the lifecycle and the agreed child-plan rows link them. Times
//! - computing a correction's affected set: of the root prompt (everything, the worst case)
//!   and of one spawn decision (its child plan, the usual case),
//! - loading `plan tree` of the root plan (every decision of the family),
//! - rendering that tree to JSON,
//!
//! each as the median of several runs with PASS when it is at most 200 ms, then hands the
//! same operations to criterion for its statistics. Run with
//! `cargo bench --bench corrections` (release build); CI never runs it.
//!
//! With `BENCH_TREE_DATA_DIR=DIR` the tree is built in `DIR/cleveragents.db` and kept, the
//! line `plan: ID` names the root plan, and criterion is skipped: `scripts/perf.sh` then times
//! `agents --data-dir DIR plan tree ID` itself.

// A benchmark program reports on stdout; that is its whole output.
#![allow(clippy::print_stdout)]

use std::time::{Duration, Instant};

use cleveragents_engine::correction::{impact, tree};
use cleveragents_engine::domain::Id;
use cleveragents_engine::domain::plan::Plan;
use cleveragents_engine::store::Store;
use criterion::Criterion;
use rusqlite::params;

const CHILDREN: usize = 1_000;
/// Per child plan: its root, two invariants and the steps.
const STEPS_PER_CHILD: usize = 96;
const RUNS: usize = 7;
const TARGET: Duration = Duration::from_millis(200);

struct Synthetic {
    _dir: Option<tempfile::TempDir>,
    store: Store,
    plan: Id,
    root: Id,
    spawn: Id,
    decisions: usize,
}

fn build() -> Synthetic {
    let (dir, root_dir) = match std::env::var_os("BENCH_TREE_DATA_DIR") {
        Some(kept) => (None, std::path::PathBuf::from(kept)),
        None => {
            let d = tempfile::tempdir().expect("temp dir");
            let p = d.path().to_path_buf();
            (Some(d), p)
        }
    };
    std::fs::create_dir_all(&root_dir).expect("data dir");
    let db = root_dir.join("cleveragents.db");
    let store = Store::open(&db).expect("store");
    let now = jiff::Timestamp::now().to_string();
    let mut conn = rusqlite::Connection::open(&db).expect("connection");
    let tx = conn.transaction().expect("transaction");
    let mut n = 0usize;
    {
        let mut plan_stmt = tx
            .prepare(
                "INSERT INTO plans (plan_id, name, action_name, phase, state, created_at, updated_at, parent_plan_id, root_plan_id) \
                 VALUES (?1, ?2, 'local/bench', 'execute', 'complete', ?3, ?3, ?4, ?5)",
            )
            .expect("prepare");
        let mut dec = tx
            .prepare(
                "INSERT INTO decisions (decision_id, plan_id, parent_decision_id, sequence_number, decision_type, question, chosen_option, step, created_at) \
                 VALUES (?1, ?2, ?3, ?4, ?5, 'Which?', ?6, ?7, ?8)",
            )
            .expect("prepare");
        let mut dep = tx
            .prepare("INSERT INTO decision_dependencies VALUES (?1, ?2, ?3, ?4)")
            .expect("prepare");
        let mut decision =
            |plan: &Id, parent: Option<&Id>, seq: usize, kind: &str, text: String, step: bool| {
                let id = Id::generate();
                dec.execute(params![
                    id.to_string(),
                    plan.to_string(),
                    parent.map(Id::to_string),
                    seq as i64,
                    kind,
                    text,
                    step.then_some(r#"{"instructions":"do it","expected_outputs":[]}"#),
                    now
                ])
                .expect("decision");
                n += 1;
                id
            };
        let mut depend = |up: &Id, down: &Id, kind: &str, r: String| {
            dep.execute(params![up.to_string(), down.to_string(), kind, r])
                .expect("dependency");
        };
        let top = Plan::new("local/bench", "bench", jiff::Timestamp::now());
        plan_stmt
            .execute(params![
                top.plan_id.to_string(),
                "bench",
                now,
                None::<String>,
                None::<String>
            ])
            .expect("plan");
        let p = top.plan_id;
        let root = decision(
            &p,
            None,
            1,
            "prompt_definition",
            "the whole job".into(),
            false,
        );
        let invs: Vec<Id> = (0..2)
            .map(|i| {
                decision(
                    &p,
                    Some(&root),
                    2 + i,
                    "invariant_enforced",
                    format!("invariant {i}"),
                    false,
                )
            })
            .collect();
        for inv in &invs {
            depend(&root, inv, "decision", inv.to_string());
        }
        let mut first_spawn = None;
        for c in 0..CHILDREN {
            let spawn = decision(
                &p,
                Some(&root),
                4 + c,
                "subplan_spawn",
                format!("part {c}"),
                true,
            );
            first_spawn.get_or_insert(spawn);
            depend(&root, &spawn, "decision", spawn.to_string());
            for inv in &invs {
                depend(inv, &spawn, "decision", spawn.to_string());
            }
            let child = Id::generate();
            plan_stmt
                .execute(params![
                    child.to_string(),
                    format!("part {c}"),
                    now,
                    p.to_string(),
                    p.to_string()
                ])
                .expect("child plan");
            let croot = decision(
                &child,
                None,
                1,
                "prompt_definition",
                format!("do part {c}"),
                false,
            );
            depend(&spawn, &croot, "plan", child.to_string());
            let cinvs: Vec<Id> = (0..2)
                .map(|i| {
                    decision(
                        &child,
                        Some(&croot),
                        2 + i,
                        "invariant_enforced",
                        format!("invariant {i}"),
                        false,
                    )
                })
                .collect();
            for inv in &cinvs {
                depend(&croot, inv, "decision", inv.to_string());
            }
            let mut prev: Option<Id> = None;
            for s in 0..STEPS_PER_CHILD {
                let step = decision(
                    &child,
                    Some(&croot),
                    4 + s,
                    "implementation_choice",
                    format!("step {s} of part {c}"),
                    true,
                );
                depend(&croot, &step, "decision", step.to_string());
                for inv in &cinvs {
                    depend(inv, &step, "decision", step.to_string());
                }
                if let Some(pr) = prev {
                    depend(&pr, &step, "decision", step.to_string());
                }
                prev = Some(step);
            }
        }
        // Keep the ids for the measurements.
        tx.execute(
            "CREATE TEMP TABLE bench_ids (root TEXT, spawn TEXT, plan TEXT)",
            [],
        )
        .expect("temp");
        tx.execute(
            "INSERT INTO bench_ids VALUES (?1, ?2, ?3)",
            params![
                root.to_string(),
                first_spawn.unwrap().to_string(),
                p.to_string()
            ],
        )
        .expect("ids");
    }
    let (root, spawn, plan): (String, String, String) = tx
        .query_row("SELECT root, spawn, plan FROM bench_ids", [], |r| {
            Ok((r.get(0)?, r.get(1)?, r.get(2)?))
        })
        .expect("ids");
    tx.commit().expect("commit");
    conn.execute_batch("ANALYZE").expect("analyze");
    Synthetic {
        _dir: dir,
        store,
        plan: plan.parse().expect("id"),
        root: root.parse().expect("id"),
        spawn: spawn.parse().expect("id"),
        decisions: n,
    }
}

fn median(mut f: impl FnMut() -> usize) -> (Duration, usize) {
    let mut times = Vec::new();
    let mut size = 0;
    for _ in 0..RUNS {
        let t = Instant::now();
        size = f();
        times.push(t.elapsed());
    }
    times.sort();
    (times[RUNS / 2], size)
}

fn report(what: &str, (t, size): (Duration, usize)) {
    let verdict = if t <= TARGET { "PASS" } else { "MISS" };
    println!(
        "{what:<48} {:>8.1} ms  ({size} items)  {verdict} (target {} ms)",
        t.as_secs_f64() * 1000.0,
        TARGET.as_millis()
    );
}

fn main() {
    let started = Instant::now();
    let s = build();
    println!(
        "synthetic tree: {} decisions across {CHILDREN} child plans, built in {:.1} s",
        s.decisions,
        started.elapsed().as_secs_f64()
    );
    let root = s.store.decision(&s.root).expect("root").expect("root");
    let spawn = s.store.decision(&s.spawn).expect("spawn").expect("spawn");
    report(
        "affected set of the root prompt (everything)",
        median(|| {
            impact::affected_decisions(&s.store, &root)
                .expect("affected")
                .len()
        }),
    );
    report(
        "affected set of one spawn decision",
        median(|| {
            impact::affected_decisions(&s.store, &spawn)
                .expect("affected")
                .len()
        }),
    );
    report(
        "full impact of one spawn decision",
        median(|| {
            impact::impact(&s.store, None, &s.spawn)
                .expect("impact")
                .decisions
                .len()
        }),
    );
    report(
        "load plan tree (whole family)",
        median(|| {
            tree::load(&s.store, &s.plan, false)
                .expect("tree")
                .summary
                .nodes
        }),
    );
    let t = tree::load(&s.store, &s.plan, false).expect("tree");
    report(
        "render plan tree to json",
        median(|| serde_json::to_string(&t.roots).expect("json").len()),
    );
    if std::env::var_os("BENCH_TREE_DATA_DIR").is_some() {
        println!("plan: {}", s.plan);
        return;
    }

    let mut c = Criterion::default()
        .sample_size(10)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(3))
        .configure_from_args();
    c.bench_function("affected_set_root", |b| {
        b.iter(|| {
            impact::affected_decisions(&s.store, &root)
                .expect("affected")
                .len()
        })
    });
    c.bench_function("affected_set_spawn", |b| {
        b.iter(|| {
            impact::affected_decisions(&s.store, &spawn)
                .expect("affected")
                .len()
        })
    });
    c.bench_function("plan_tree_load", |b| {
        b.iter(|| {
            tree::load(&s.store, &s.plan, false)
                .expect("tree")
                .summary
                .nodes
        })
    });
    c.bench_function("plan_tree_json", |b| {
        b.iter(|| serde_json::to_string(&t.roots).expect("json").len())
    });
    c.final_summary();
}
