//! Sandbox benchmark: on a generated repository of 20,000 files, compares
//! - sandbox creation with `git worktree add` of the same commit,
//! - a checkpoint after a 100-file change with `git add -A && git commit` of the same change,
//! - `agents plan diff` with `git diff` of the same change against the same base,
//!
//! and prints each ratio (ours / git, median of several runs) with PASS when it is at most
//! 1.0x, then a breakdown of `plan diff` (snapshot, tree diff with hunks, JSON). With
//! `BENCH_DETAIL=1` it also times libgit2's own index-to-work-tree diff for comparison.
//! Run with `scripts/bench-sandbox.sh` (release build); CI never runs it. Other processes on
//! the machine move the absolute figures a lot; the ratios come from interleaved runs.

// A benchmark program reports on stdout; that is its whole output.
#![allow(clippy::print_stdout)]

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use cleveragents_engine::domain::plan::Plan;
use cleveragents_engine::paths::Paths;
use cleveragents_engine::sandbox::checkpoint::{self, CheckpointRequest};
use cleveragents_engine::sandbox::{SandboxTarget, Sandboxes, TargetKind};
use cleveragents_engine::store::Store;

const FILES: usize = 20_000;
const PER_DIR: usize = 100;
const CHANGED: usize = 100;
const RUNS: usize = 5;

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

fn content(i: usize, version: u32) -> String {
    let mut s = format!("// file {i}, version {version}\n");
    for line in 0..30 {
        s.push_str(&format!("fn f_{i}_{line}() -> u64 {{ {} }}\n", i * line));
    }
    s
}

fn file_path(root: &Path, i: usize) -> PathBuf {
    root.join(format!("d{:03}/f{:05}.rs", i / PER_DIR, i))
}

fn change(root: &Path, version: u32) {
    for i in (0..FILES).step_by(FILES / CHANGED).take(CHANGED) {
        fs::write(file_path(root, i), content(i, version)).unwrap();
    }
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn time<T>(f: impl FnOnce() -> T) -> (Duration, T) {
    let start = Instant::now();
    let out = f();
    (start.elapsed(), out)
}

fn report(name: &str, ours: Duration, theirs: Duration, baseline: &str) -> bool {
    report_against(name, ours, theirs, baseline, 1.0)
}

/// One line: ours, the baseline, the ratio and PASS when it is at most `target`.
fn report_against(
    name: &str,
    ours: Duration,
    theirs: Duration,
    baseline: &str,
    target: f64,
) -> bool {
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    line(name, ms(ours), ms(theirs), "ms", baseline, target)
}

fn line(name: &str, ours: f64, theirs: f64, unit: &str, baseline: &str, target: f64) -> bool {
    let ratio = ours / theirs;
    let verdict = if ratio <= target { "PASS" } else { "MISS" };
    println!(
        "{name:<34} ours {ours:>8.1} {unit}   {baseline:<26} {theirs:>8.1} {unit}   ratio {ratio:>5.2}x  {verdict} (<= {target:.1}x)"
    );
    ratio <= target
}

/// Disk used by the files under `dir` (allocated blocks), in KiB, as `du -x` counts it: a
/// mount point is not entered (a sandbox that shares its base's checkout has the overlay
/// mounted at its work tree; what it adds on disk is its upper directory).
fn disk_kib(dir: &Path) -> f64 {
    use std::os::unix::fs::MetadataExt;
    let device = fs::metadata(dir).map(|m| m.dev()).unwrap_or_default();
    let mut total = 0u64;
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in fs::read_dir(&d).into_iter().flatten().flatten() {
            let Ok(m) = e.metadata() else { continue };
            if m.dev() != device {
                continue;
            }
            total += m.blocks() * 512;
            if m.is_dir() {
                stack.push(e.path());
            }
        }
    }
    total as f64 / 1024.0
}

fn main() {
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    // As `agents` does, first and single-threaded: sandboxes at one base share a checkout
    // unless CLEVERAGENTS_SANDBOX_OVERLAY=0 (the `agents plan diff` runs below inherit it).
    let overlay = cleveragents_engine::sandbox::overlay::SWITCH;
    let mode = cleveragents_engine::sandbox::overlay::enter_own_namespace(
        cleveragents_engine::sandbox::overlay::wanted(std::env::var_os(overlay).as_deref()),
    );
    println!("sandbox checkouts: {}", mode.describe());
    let tmp = tempfile::tempdir().unwrap();
    let repo = tmp.path().join("repo");
    println!(
        "generating a repository of {FILES} files in {} ...",
        repo.display()
    );
    for i in 0..FILES {
        let p = file_path(&repo, i);
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

    let data = tmp.path().join("data");
    let paths = Paths::at(&data, tmp.path().join("config.toml"));
    let mut store = Store::open(&paths.database()).unwrap();
    let sandboxes = Sandboxes::new(&paths);

    // 1. Creation.
    let mut ours = Vec::new();
    let mut theirs = Vec::new();
    let mut plan_id = None;
    let mut disk = None;
    for run in 0..RUNS {
        let wt = tmp.path().join(format!("wt{run}"));
        let (t, _) = time(|| {
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
            )
        });
        theirs.push(t);
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
                        base_commit: head.clone(),
                    },
                    read_only: false,
                },
            )
            .unwrap();
        let (t, sb) = time(|| {
            sandboxes
                .ensure(&mut store, &plan.plan_id, "local/repo")
                .unwrap()
        });
        ours.push(t);
        assert!(file_path(&sb.layout.work_dir, FILES - 1).exists());
        if run == 1 {
            // What one more plan at a base already sandboxed costs on disk, against the
            // checkout `git worktree add` writes.
            disk = Some((disk_kib(&sb.record.root_dir), disk_kib(&wt)));
        }
        plan_id = Some(plan.plan_id);
    }
    let mut all_pass = report(
        "sandbox creation",
        median(ours.clone()),
        median(theirs.clone()),
        "git worktree add",
    );
    // The first plan at a base against the first `git worktree add`; every later plan at the
    // same base against the median `git worktree add`.
    all_pass &= report_against(
        "  first plan at a base",
        ours[0],
        theirs[0],
        "git worktree add --detach",
        1.2,
    );
    all_pass &= report_against(
        "  another plan, same base",
        median(ours[1..].to_vec()),
        median(theirs.clone()),
        "git worktree add --detach",
        0.2,
    );
    if let Some((sandbox, checkout)) = disk {
        all_pass &= line(
            "  disk per additional plan",
            sandbox,
            checkout,
            "KiB",
            "the checkout",
            0.1,
        );
    }

    // 2. Checkpoint after a 100-file change (each run changes the same 100 files again).
    let plan_id = plan_id.unwrap();
    let sb = sandboxes
        .existing(&store, &plan_id, "local/repo")
        .unwrap()
        .unwrap();
    let wt = tmp.path().join(format!("wt{}", RUNS - 1));
    checkpoint::create(
        &mut store,
        &sandboxes,
        &plan_id,
        &CheckpointRequest {
            label: "warm".into(),
            ..Default::default()
        },
    )
    .unwrap();
    git(&wt, &["status", "-s"]);
    let mut ours = Vec::new();
    let mut theirs = Vec::new();
    for run in 0..RUNS {
        // Let file times move past the index's, so neither side pays for racy entries.
        std::thread::sleep(Duration::from_millis(1100));
        change(&sb.layout.work_dir, run as u32 + 1);
        change(&wt, run as u32 + 1);
        std::thread::sleep(Duration::from_millis(1100));
        let (t, cp) = time(|| {
            checkpoint::create(
                &mut store,
                &sandboxes,
                &plan_id,
                &CheckpointRequest {
                    label: "bench".into(),
                    ..Default::default()
                },
            )
            .unwrap()
        });
        assert_eq!(cp.unwrap().files_changed, CHANGED as u64);
        ours.push(t);
        let (t, _) = time(|| {
            git(&wt, &["add", "-A"]);
            git(&wt, &["commit", "-q", "-m", "bench"]);
        });
        theirs.push(t);
    }
    all_pass &= report(
        "checkpoint after 100-file change",
        median(ours),
        median(theirs),
        "git add -A && git commit",
    );

    // 3. `plan diff` against `git diff` of the same change from the same base.
    std::thread::sleep(Duration::from_millis(1100));
    change(&sb.layout.work_dir, 99);
    change(&wt, 99);
    std::thread::sleep(Duration::from_millis(1100));
    drop(store);
    let agents = env!("CARGO_BIN_EXE_agents");
    let mut ours = Vec::new();
    let mut theirs = Vec::new();
    for _ in 0..RUNS {
        let (t, out) = time(|| {
            Command::new(agents)
                .args(["--data-dir", data.to_str().unwrap(), "--config-path"])
                .arg(tmp.path().join("config.toml"))
                .args(["--format", "json", "plan", "diff", &plan_id.to_string()])
                .output()
                .unwrap()
        });
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stdout)
        );
        ours.push(t);
        let (t, out) = time(|| {
            Command::new("git")
                .args(["diff", &head])
                .current_dir(&wt)
                .env("GIT_CONFIG_NOSYSTEM", "1")
                .output()
                .unwrap()
        });
        assert!(out.status.success());
        theirs.push(t);
    }
    all_pass &= report(
        "plan diff (100 files vs base)",
        median(ours),
        median(theirs),
        "git diff <base>",
    );

    // Where the time goes (library calls, no process start-up).
    let repo2 = sb.repo().unwrap();
    let (t_snap, tree) = time(|| checkpoint::snapshot(&repo2).unwrap());
    let base_tree = repo2
        .find_commit(sb.base_commit().unwrap())
        .unwrap()
        .tree_id();
    let (t_diff, files) = time(|| {
        cleveragents_engine::sandbox::diff::trees(
            &repo2,
            Some(base_tree),
            Some(tree),
            &cleveragents_engine::sandbox::diff::DiffRequest {
                path: None,
                hunks: true,
            },
        )
        .unwrap()
    });
    let (t_json, _) = time(|| serde_json::to_string(&files).unwrap().len());
    println!(
        "breakdown: snapshot {:.1} ms, tree diff + hunks {:.1} ms ({} files), json {:.1} ms",
        t_snap.as_secs_f64() * 1000.0,
        t_diff.as_secs_f64() * 1000.0,
        files.len(),
        t_json.as_secs_f64() * 1000.0
    );
    if std::env::var("BENCH_DETAIL").is_ok() {
        let mut o = git2::DiffOptions::new();
        o.ignore_submodules(true);
        let idx = repo2.index().unwrap();
        let (t1, _) = time(|| {
            repo2
                .diff_index_to_workdir(Some(&idx), Some(&mut o))
                .unwrap()
                .deltas()
                .len()
        });
        let mut o = git2::DiffOptions::new();
        o.ignore_submodules(true)
            .include_untracked(true)
            .recurse_untracked_dirs(true);
        let (t2, _) = time(|| {
            repo2
                .diff_index_to_workdir(Some(&idx), Some(&mut o))
                .unwrap()
                .deltas()
                .len()
        });
        let mut idx2 = repo2.index().unwrap();
        let (t3, _) = time(|| idx2.write_tree().unwrap());
        let (t4, _) = time(|| repo2.index().unwrap().len());
        println!(
            "detail (libgit2 for comparison): index->workdir {:.1} ms, with untracked {:.1} ms, write_tree {:.1} ms, index load {:.1} ms",
            t1.as_secs_f64() * 1000.0,
            t2.as_secs_f64() * 1000.0,
            t3.as_secs_f64() * 1000.0,
            t4.as_secs_f64() * 1000.0
        );
    }
    let layout = cleveragents_engine::sandbox::Layout::at(&tmp.path().join("probe"));
    fs::create_dir_all(&layout.work_dir).unwrap();
    let (t_create, _) =
        time(|| cleveragents_engine::sandbox::git_sandbox::create(&layout, &repo, &head).unwrap());
    println!(
        "breakdown: git_sandbox::create {:.1} ms",
        t_create.as_secs_f64() * 1000.0
    );
    println!(
        "{}",
        if all_pass {
            "all PASS"
        } else {
            "some MISS (see the closing note for why)"
        }
    );
}
