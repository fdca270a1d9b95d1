//! Engine benchmark, on a generated repository of 20,000 files in a plan's
//! sandbox:
//! - engine overhead per tool call: `get_file_info` through the tool runner (validation,
//!   policy, binding, the call log in SQLite) against `std::fs::metadata` of the same file;
//! - `search_files` through the tool runner against `grep -rn` of the same pattern.
//!
//! Prints one line per measurement: `name | ours | baseline | ratio | PASS/MISS (target)`,
//! which `scripts/perf.sh` collects into its table. Release build; CI never runs it.

// A benchmark program reports on stdout; that is its whole output.
#![allow(clippy::print_stdout)]

use std::fs;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use cleveragents_engine::domain::plan::Plan;
use cleveragents_engine::paths::Paths;
use cleveragents_engine::sandbox::{SandboxTarget, Sandboxes, TargetKind};
use cleveragents_engine::store::Store;
use cleveragents_engine::tools::runner::{CallRequest, Policy, ToolRunner};
use serde_json::json;

const FILES: usize = 20_000;
const CALLS: usize = 300;
/// Target: at most this much engine time per tool call.
const OVERHEAD_TARGET: Duration = Duration::from_millis(5);
/// Target: `search_files` at most this many times `grep -rn`.
const SEARCH_TARGET: f64 = 2.0;

fn git(dir: &Path, args: &[&str]) {
    let out = Command::new("git")
        .args([
            "-c",
            "gc.auto=0",
            "-c",
            "user.name=b",
            "-c",
            "user.email=b@b.invalid",
        ])
        .args(args)
        .current_dir(dir)
        .output()
        .expect("git runs");
    assert!(out.status.success(), "git {args:?}");
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn line(name: &str, ours: Duration, theirs: Duration, pass: bool, target: &str, baseline: &str) {
    println!(
        "{name} | {:.3} ms | {:.3} ms ({baseline}) | {:.2}x | {} ({target})",
        ours.as_secs_f64() * 1e3,
        theirs.as_secs_f64() * 1e3,
        ours.as_secs_f64() / theirs.as_secs_f64().max(1e-9),
        if pass { "PASS" } else { "MISS" },
    );
}

fn main() {
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let repo = tmp.path().join("repo");
    for i in 0..FILES {
        let p = repo.join(format!("d{:03}/f{i:05}.rs", i / 100));
        if i % 100 == 0 {
            fs::create_dir_all(p.parent().unwrap()).unwrap();
        }
        let mut s = format!("// file {i}\n");
        for l in 0..30 {
            s.push_str(&format!("fn f_{i}_{l}() -> u64 {{ {} }}\n", i * l));
        }
        fs::write(p, s).unwrap();
    }
    git(&repo, &["init", "-q", "-b", "main"]);
    git(&repo, &["add", "-A"]);
    git(&repo, &["commit", "-q", "-m", "generated"]);
    let head = String::from_utf8(
        Command::new("git")
            .args(["rev-parse", "HEAD"])
            .current_dir(&repo)
            .output()
            .unwrap()
            .stdout,
    )
    .unwrap()
    .trim()
    .to_string();

    let paths = Paths::at(tmp.path().join("data"), tmp.path().join("config.toml"));
    let mut store = Store::open(&paths.database()).unwrap();
    let sandboxes = Sandboxes::new(&paths);
    let plan = Plan::new("local/bench", "bench", jiff::Timestamp::now());
    store.insert_plan(&plan).unwrap();
    sandboxes
        .register_target(
            &mut store,
            &SandboxTarget {
                plan_id: plan.plan_id,
                resource_name: "local/repo".into(),
                alias: None,
                kind: TargetKind::GitCheckout {
                    repo: repo.clone(),
                    base_commit: head,
                },
                read_only: false,
            },
        )
        .unwrap();
    let sb = sandboxes
        .ensure(&mut store, &plan.plan_id, "local/repo")
        .unwrap();
    let work = sb.layout.work_dir.clone();
    let policy = Policy::for_plan(&plan);
    let mut runner = ToolRunner::new(&mut store, &sandboxes);
    let mut call = |tool: &str, args: serde_json::Value| {
        let r = runner
            .call(
                &plan.plan_id,
                &policy,
                CallRequest {
                    tool: tool.into(),
                    arguments: args,
                    parent_skill: None,
                    resource: None,
                },
            )
            .unwrap();
        assert!(r.result.is_ok(), "{tool}: {:?}", r.result);
        r
    };

    // 1. Overhead per call: warm up, then interleave runner calls and direct calls.
    call("get_file_info", json!({"path": "d000/f00001.rs"}));
    let mut ours = Vec::new();
    let mut theirs = Vec::new();
    for i in 0..CALLS {
        let rel = format!("d{:03}/f{:05}.rs", (i * 61 % FILES) / 100, i * 61 % FILES);
        let t = Instant::now();
        call("get_file_info", json!({"path": rel}));
        ours.push(t.elapsed());
        let t = Instant::now();
        let m = fs::metadata(work.join(&rel)).unwrap();
        std::hint::black_box(m.len());
        theirs.push(t.elapsed());
    }
    let (o, b) = (median(ours), median(theirs));
    line(
        "engine overhead per tool call",
        o,
        b,
        o.saturating_sub(b) <= OVERHEAD_TARGET,
        &format!("<= {} ms over the direct call", OVERHEAD_TARGET.as_millis()),
        "std::fs::metadata",
    );

    // 2. search_files against grep -rn, same pattern, same tree (5 interleaved runs).
    let mut ours = Vec::new();
    let mut theirs = Vec::new();
    for _ in 0..5 {
        let t = Instant::now();
        let r = call(
            "search_files",
            json!({"content_pattern": "fn f_19999_29\\(", "max_results": 10}),
        );
        ours.push(t.elapsed());
        let found = r.result.as_ref().unwrap().to_string();
        assert!(found.contains("f19999.rs"), "{found}");
        let t = Instant::now();
        let out = Command::new("grep")
            .args(["-rn", "--exclude-dir=.git", "fn f_19999_29("])
            .arg(&work)
            .output()
            .unwrap();
        theirs.push(t.elapsed());
        assert!(String::from_utf8_lossy(&out.stdout).contains("f19999.rs"));
    }
    let (o, b) = (median(ours), median(theirs));
    let ratio = o.as_secs_f64() / b.as_secs_f64();
    line(
        "search_files (20,000 files)",
        o,
        b,
        ratio <= SEARCH_TARGET,
        &format!("<= {SEARCH_TARGET:.1}x"),
        "grep -rn",
    );
}
