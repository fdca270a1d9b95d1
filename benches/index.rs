//! Code index benchmark (spec section 24 "Performance"), on a generated repository of
//! 20,000 files (and, with `BENCH_REAL_REPO=/path/to/checkout`, on that checkout too):
//! - full index: at most 30 s;
//! - incremental update after one file changes, until the new text is searchable: at most
//!   200 ms;
//! - `search_code` query, median: at most 0.1x `grep -rn` of the same term over the tree;
//! - index size: at most 30 % of the source size.
//!
//! Prints one line per measurement: `name | ours | baseline | ratio | PASS/MISS (target)`.
//! Release build; CI never runs it (`scripts/bench-index.sh`).

// A benchmark program reports on stdout; that is its whole output.
#![allow(clippy::print_stdout)]

use std::fs;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use cleveragents_engine::index::build;
use cleveragents_engine::index::view::{SearchQuery, View};
use cleveragents_engine::index::{Policy, Source};

const FILES: usize = 20_000;
const QUERIES: usize = 21;

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

#[allow(clippy::too_many_arguments)]
fn line(
    name: &str,
    ours: f64,
    unit: &str,
    theirs: f64,
    baseline: &str,
    ratio: f64,
    pass: bool,
    target: &str,
) {
    println!(
        "{name} | {ours:.3} {unit} | {theirs:.3} {unit} ({baseline}) | {ratio:.3}x | {} ({target})",
        if pass { "PASS" } else { "MISS" }
    );
}

fn grep(root: &Path, term: &str) -> Duration {
    let t = Instant::now();
    let out = Command::new("grep")
        .args(["-rn", "--exclude-dir=.git", term, "."])
        .current_dir(root)
        .output()
        .expect("grep runs");
    let d = t.elapsed();
    assert!(!out.stdout.is_empty(), "grep finds {term}");
    d
}

fn run(label: &str, repo: &Path, change: &str, terms: &[String]) {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("index");
    let policy = Policy::default();
    let report = build::build(&dir, label, repo, Source::Git, &policy, &|_, _| {}).unwrap();
    let full = Duration::from_millis(report.duration_ms);
    line(
        &format!("{label}: full index ({} files)", report.files),
        full.as_secs_f64(),
        "s",
        30.0,
        "target",
        full.as_secs_f64() / 30.0,
        full <= Duration::from_secs(30),
        "<= 30 s",
    );

    let view = View::open(&dir, None, &policy).unwrap();
    let mut ours = Vec::new();
    let mut theirs = Vec::new();
    for i in 0..QUERIES {
        let term = &terms[i % terms.len()];
        let q = SearchQuery {
            query: term.clone(),
            limit: 10,
            ..Default::default()
        };
        let t = Instant::now();
        let hits = view.search(&q).unwrap();
        ours.push(t.elapsed());
        assert!(!hits.is_empty(), "search finds {term}");
        theirs.push(grep(repo, term));
    }
    let (o, g) = (median(ours), median(theirs));
    let ratio = o.as_secs_f64() / g.as_secs_f64();
    line(
        &format!("{label}: search_code median"),
        o.as_secs_f64() * 1e3,
        "ms",
        g.as_secs_f64() * 1e3,
        "grep -rn",
        ratio,
        ratio <= 0.1,
        "<= 0.1x",
    );

    // Incremental: one file changes; measured until the new word is found.
    let mut times = Vec::new();
    for k in 0..5 {
        let marker = format!("freshlyaddedmarker{k}");
        let path = repo.join(change);
        let mut text = fs::read_to_string(&path).unwrap();
        text.push_str(&format!("\n// {marker}\n"));
        let t = Instant::now();
        fs::write(&path, text).unwrap();
        build::update(&dir, &policy).unwrap();
        let hits = view
            .search(&SearchQuery {
                query: marker.clone(),
                limit: 1,
                ..Default::default()
            })
            .unwrap();
        times.push(t.elapsed());
        assert_eq!(hits.len(), 1, "{marker} is searchable");
    }
    let inc = median(times);
    line(
        &format!("{label}: incremental update, change to searchable"),
        inc.as_secs_f64() * 1e3,
        "ms",
        200.0,
        "target",
        inc.as_secs_f64() * 1e3 / 200.0,
        inc <= Duration::from_millis(200),
        "<= 200 ms",
    );

    let size = cleveragents_engine::index::store::size_of(&dir);
    let ratio = size as f64 / report.source_bytes.max(1) as f64;
    line(
        &format!("{label}: index size"),
        size as f64 / 1048576.0,
        "MiB",
        report.source_bytes as f64 / 1048576.0,
        "source",
        ratio,
        ratio <= 0.3,
        "<= 30 %",
    );
}

fn main() {
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let repo = tmp.path().join("repo");
    cleveragents_engine::index::synthetic::write_tree(&repo, FILES).unwrap();
    git(&repo, &["init", "-q", "-b", "main"]);
    git(&repo, &["add", "-A"]);
    git(&repo, &["commit", "-q", "-m", "generated"]);
    let terms: Vec<String> = ["invoice", "Helper", "socket", "widget", "retry"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    run("generated", &repo, "pkg000/m00001.rs", &terms);

    if let Ok(real) = std::env::var("BENCH_REAL_REPO") {
        let real = Path::new(&real);
        let terms: Vec<String> = std::env::var("BENCH_REAL_TERMS")
            .unwrap_or_else(|_| "fn,struct,impl,error".into())
            .split(',')
            .map(str::to_string)
            .collect();
        let change = std::env::var("BENCH_REAL_FILE").unwrap_or_else(|_| "README.md".into());
        run("real", real, &change, &terms);
        // Put the changed file back.
        git(real, &["checkout", "--", &change]);
    }
}
