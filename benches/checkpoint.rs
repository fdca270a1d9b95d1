//! Checkpoint benchmark (docs/sandbox.md, "Checkpoints that cost what changed"): on a
//! generated repository of 20,000 files, in one run,
//! - the checkpoint at the end of a step that changed 1 file, then 100 files, through the file
//!   tools, against `git add -A && git commit` after the same change in a worktree of the same
//!   repository (target: at most 1.0x);
//! - the same for a shell step (a `run:` step or `shell_execute`): the step's checkpoints and
//!   the trees the shell tool takes before and after the command, whose writes nobody notes
//!   (target: at most 1.0x);
//! - 40 tool calls of a step (reads, file writes and shell commands) with the internal
//!   checkpoint Execute takes after every call that may write, against the same calls without
//!   them (target: at most 1.2x). The model's time is left out, which only makes the ratio
//!   larger than a real step's.
//!
//! Prints one line per row, `ROW<TAB>measurement<TAB>ours<TAB>baseline<TAB>ratio<TAB>verdict`,
//! and a few breakdown lines. Run with `scripts/bench-checkpoint.sh` (release build); CI never
//! runs it. The ratios come from interleaved runs, so other load moves both sides.

// A benchmark program reports on stdout; that is its whole output.
#![allow(clippy::print_stdout)]

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use cleveragents_engine::domain::id::Id;
use cleveragents_engine::domain::lifecycle::Phase;
use cleveragents_engine::domain::plan::Plan;
use cleveragents_engine::paths::Paths;
use cleveragents_engine::sandbox::checkpoint::{self, CheckpointRequest};
use cleveragents_engine::sandbox::{SandboxTarget, Sandboxes, TargetKind};
use cleveragents_engine::store::Store;
use cleveragents_engine::tools::runner::{CallRequest, Policy, ToolRunner};
use serde_json::{Value, json};

const FILES: usize = 20_000;
const PER_DIR: usize = 100;
const RUNS: usize = 5;
const STEP_CALLS: usize = 40;

fn git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .args(["-c", "gc.auto=0", "-c", "maintenance.auto=false"])
        .args(args)
        .current_dir(dir)
        .env("GIT_AUTHOR_NAME", "bench")
        .env("GIT_AUTHOR_EMAIL", "bench@example.com")
        .env("GIT_COMMITTER_NAME", "bench")
        .env("GIT_COMMITTER_EMAIL", "bench@example.com")
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("HOME", dir)
        .output()
        .expect("git runs");
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

fn content(i: usize, version: usize) -> String {
    let mut s = format!("// file {i}, version {version}\n");
    for line in 0..30 {
        s.push_str(&format!("fn f_{i}_{line}() -> u64 {{ {} }}\n", i * line));
    }
    s
}

fn rel(i: usize) -> String {
    format!("d{:03}/f{:05}.rs", i / PER_DIR, i)
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

fn row(name: &str, ours: Duration, base: Duration, baseline: &str, target: f64) {
    let ratio = ours.as_secs_f64() / base.as_secs_f64();
    let verdict = if ratio <= target { "PASS" } else { "MISS" };
    println!(
        "ROW\t{name}\t{:.1} ms\t{baseline} {:.1} ms\t{ratio:.2}x\t{verdict} (<= {target:.1}x)",
        ms(ours),
        ms(base)
    );
}

/// A plan with a sandbox of the generated repository, in Execute.
struct Bench {
    store: Store,
    sandboxes: Sandboxes,
    plan: Plan,
    work: PathBuf,
}

impl Bench {
    fn new(paths: &Paths, repo: &Path, head: &str) -> Self {
        let mut store = Store::open(&paths.database()).unwrap();
        let sandboxes = Sandboxes::new(paths);
        let mut plan = Plan::new("local/bench", "bench", jiff::Timestamp::now());
        plan.status.phase = Phase::Execute;
        store.insert_plan(&plan).unwrap();
        sandboxes
            .register_target(
                &mut store,
                &SandboxTarget {
                    plan_id: plan.plan_id,
                    resource_name: "local/repo".into(),
                    alias: None,
                    kind: TargetKind::GitCheckout {
                        repo: repo.to_path_buf(),
                        base_commit: head.to_string(),
                    },
                    read_only: false,
                },
            )
            .unwrap();
        let sb = sandboxes
            .ensure(&mut store, &plan.plan_id, "local/repo")
            .unwrap();
        let work = sb.work_dir().to_path_buf();
        Self {
            store,
            sandboxes,
            plan,
            work,
        }
    }

    fn id(&self) -> Id {
        self.plan.plan_id
    }

    fn call(&mut self, tool: &str, arguments: Value) {
        let plan_id = self.id();
        let policy = Policy::for_plan(&self.plan);
        let r = ToolRunner::new(&mut self.store, &self.sandboxes)
            .call(
                &plan_id,
                &policy,
                CallRequest {
                    tool: tool.into(),
                    arguments,
                    parent_skill: None,
                    resource: None,
                },
            )
            .unwrap();
        if let Err(e) = r.result {
            panic!("{tool}: {e}");
        }
    }

    /// The checkpoint at a step's end, as Execute takes it.
    fn step_checkpoint(&mut self) -> u64 {
        let plan_id = self.id();
        checkpoint::create(
            &mut self.store,
            &self.sandboxes,
            &plan_id,
            &CheckpointRequest {
                label: "end".into(),
                written_only: true,
                ..Default::default()
            },
        )
        .unwrap()
        .unwrap()
        .files_changed
    }

    /// The internal checkpoint the step's journal takes after a call that may write.
    fn call_checkpoint(&self) {
        checkpoint::trees(&self.store, &self.sandboxes, &self.plan.plan_id, true).unwrap();
    }
}

/// The files a change of `n` files touches, spread over the repository.
fn changed(n: usize) -> impl Iterator<Item = usize> {
    (0..FILES).step_by(FILES / n).take(n)
}

fn main() {
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let repo = tmp.path().join("repo");
    println!("generating a repository of {FILES} files ...");
    for i in 0..FILES {
        let p = repo.join(rel(i));
        if i % PER_DIR == 0 {
            fs::create_dir_all(p.parent().unwrap()).unwrap();
        }
        fs::write(p, content(i, 0)).unwrap();
    }
    git(&repo, &["init", "-q", "-b", "main"]);
    git(&repo, &["add", "-A"]);
    git(&repo, &["commit", "-q", "-m", "generated"]);
    git(&repo, &["gc", "-q"]);
    let head = git(&repo, &["rev-parse", "HEAD"]).trim().to_string();
    let paths = Paths::at(tmp.path().join("data"), tmp.path().join("config.toml"));

    // 1. A step's checkpoint after a change of 1 and of 100 files.
    let wt = tmp.path().join("wt");
    git(
        &repo,
        &[
            "worktree",
            "add",
            "-q",
            "--detach",
            wt.to_str().unwrap(),
            &head,
        ],
    );
    git(&wt, &["status", "-s"]);
    let mut b = Bench::new(&paths, &repo, &head);
    b.step_checkpoint();
    let mut version = 0;
    for n in [1, 100] {
        let mut ours = Vec::new();
        let mut theirs = Vec::new();
        for _ in 0..RUNS {
            version += 1;
            // Let file times move past the indexes', so neither side pays for racy entries.
            std::thread::sleep(Duration::from_millis(1100));
            for i in changed(n) {
                b.call(
                    "write_file",
                    json!({"path": rel(i), "content": content(i, version)}),
                );
                fs::write(wt.join(rel(i)), content(i, version)).unwrap();
            }
            std::thread::sleep(Duration::from_millis(1100));
            let t = Instant::now();
            let files = b.step_checkpoint();
            ours.push(t.elapsed());
            assert_eq!(files, n as u64);
            let t = Instant::now();
            git(&wt, &["add", "-A"]);
            git(&wt, &["commit", "-q", "-m", "bench"]);
            theirs.push(t.elapsed());
        }
        row(
            &format!("checkpoint of a step that changed {n} file(s), {FILES} files"),
            median(ours),
            median(theirs),
            "git add -A && git commit",
            1.0,
        );
    }
    // A `run:` step (a shell command) that changed 1 and 100 files: the step's start
    // checkpoint, the tree the shell tool takes before the command and after it (to report its
    // changes and capture what it wrote, which nobody noted), and the step's end checkpoint.
    // The command's own work (writing the files) is not timed, nor on git's side. Each run
    // also times the same with a full scan before the command (what the shell tool did
    // before it looked only at the paths written since the last snapshot), for comparison.
    for n in [1, 100] {
        let mut ours = Vec::new();
        let mut full_before = Vec::new();
        let mut theirs = Vec::new();
        for run in 0..2 * RUNS {
            version += 1;
            std::thread::sleep(Duration::from_millis(1100));
            let sb = b.sandboxes.active(&b.store, &b.id()).unwrap().remove(0);
            let repo = sb.repo().unwrap();
            let t = Instant::now();
            b.step_checkpoint();
            if run % 2 == 0 {
                checkpoint::before_command(&repo).unwrap();
            } else {
                checkpoint::snapshot(&repo).unwrap();
                cleveragents_engine::sandbox::written::forget(&sb.layout.git_dir);
            }
            let mut took = t.elapsed();
            for i in changed(n) {
                fs::write(b.work.join(rel(i)), content(i, version)).unwrap();
                fs::write(wt.join(rel(i)), content(i, version)).unwrap();
            }
            let t = Instant::now();
            checkpoint::after_command(&repo, false).unwrap();
            let files = b.step_checkpoint();
            took += t.elapsed();
            assert_eq!(files, n as u64);
            if run % 2 == 0 {
                ours.push(took);
            } else {
                full_before.push(took);
            }
            let t = Instant::now();
            git(&wt, &["add", "-A"]);
            git(&wt, &["commit", "-q", "-m", "bench"]);
            theirs.push(t.elapsed());
        }
        let base = median(theirs);
        row(
            &format!("checkpoint of a shell step that changed {n} file(s), {FILES} files"),
            median(ours),
            base,
            "git add -A && git commit",
            1.0,
        );
        row(
            "  the same, full scan before the command (old)",
            median(full_before),
            base,
            "git add -A && git commit",
            1.0,
        );
    }
    // The same checkpoint when the written set is unknown (the full scan).
    let mut full = Vec::new();
    for _ in 0..RUNS {
        version += 1;
        for i in changed(100) {
            fs::write(b.work.join(rel(i)), content(i, version)).unwrap();
        }
        let sb = b.sandboxes.active(&b.store, &b.id()).unwrap().remove(0);
        cleveragents_engine::sandbox::written::forget(&sb.layout.git_dir);
        let t = Instant::now();
        b.step_checkpoint();
        full.push(t.elapsed());
    }
    println!(
        "breakdown: the same 100-file checkpoint with the written set unknown (full scan) {:.1} ms",
        ms(median(full))
    );

    // 2. 40 calls of a step, with and without a checkpoint after each call that may write.
    // Every fifth call reads, every fifth runs a shell command, the rest write files.
    let mut with = Bench::new(&paths, &repo, &head);
    let mut without = Bench::new(&paths, &repo, &head);
    with.step_checkpoint();
    without.step_checkpoint();
    let step = |b: &mut Bench, round: usize, checkpoints: bool| {
        let t = Instant::now();
        for k in 0..STEP_CALLS {
            let i = (k * 487 + round * 13) % FILES;
            match k % 5 {
                0 => b.call("read_file", json!({"path": rel(i)})),
                4 => b.call(
                    "shell_execute",
                    json!({"command": format!("echo 'round {round}' >> {}", rel(i))}),
                ),
                _ => b.call(
                    "write_file",
                    json!({"path": rel(i), "content": content(i, round * 100 + k)}),
                ),
            }
            if checkpoints && k % 5 != 0 {
                b.call_checkpoint();
            }
        }
        t.elapsed()
    };
    let mut ours = Vec::new();
    let mut theirs = Vec::new();
    for round in 1..=RUNS {
        theirs.push(step(&mut without, round, false));
        ours.push(step(&mut with, round, true));
    }
    row(
        &format!("{STEP_CALLS} tool calls of a step, {FILES} files, per-call checkpoints"),
        median(ours),
        median(theirs),
        "the same calls without them",
        1.2,
    );
    // Where a per-call checkpoint's time goes: after a file tool, and after a command.
    let mut after_file = Vec::new();
    let mut after_shell = Vec::new();
    for k in 0..RUNS {
        with.call(
            "write_file",
            json!({"path": rel(k), "content": content(k, 9000 + k)}),
        );
        let t = Instant::now();
        with.call_checkpoint();
        after_file.push(t.elapsed());
        with.call(
            "shell_execute",
            json!({"command": format!("echo more >> {}", rel(k))}),
        );
        let t = Instant::now();
        with.call_checkpoint();
        after_shell.push(t.elapsed());
    }
    println!(
        "breakdown: one per-call checkpoint after write_file {:.1} ms, after shell_execute {:.1} ms",
        ms(median(after_file)),
        ms(median(after_shell))
    );
}
