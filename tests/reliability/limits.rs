//! Resource limits through the real binary on real repositories: a step printing 50 MB, a
//! command that never ends, binary and non-UTF-8 files, a large file in the repository. Each
//! ends with a clear outcome, and the `agents` process's peak memory stays bounded.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::support::{Env, db_file, git, git_repo, plan_id};

/// Peak resident memory allowed for the `agents` process, in KiB.
const PEAK_KIB: u64 = 200 * 1024;

struct Setup {
    env: Env,
    repo: PathBuf,
}

fn setup(action: &str, prepare: impl FnOnce(&Path)) -> Setup {
    let env = Env::new();
    let repo = git_repo(env.root(), "repo");
    prepare(&repo);
    git(&repo, &["add", "-A"]);
    git(&repo, &["commit", "-qm", "fixtures", "--allow-empty"]);
    for args in [
        vec![
            "resource",
            "add",
            "git-checkout",
            "local/repo",
            "--path",
            repo.to_str().unwrap(),
        ],
        vec!["project", "create", "--resource", "local/repo", "app"],
    ] {
        let (doc, code) = env.json(&args);
        assert_eq!(code, 0, "{doc:#}");
    }
    let file = env.root().join("action.yaml");
    std::fs::write(&file, action).unwrap();
    let (doc, code) = env.json(&[
        "action",
        "create",
        "--available",
        "--config",
        file.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{doc:#}");
    Setup { env, repo }
}

/// Runs `agents --format json ARGS`, polling its peak resident memory (VmHWM) until it exits.
fn run_measured(env: &Env, args: &[&str]) -> (Value, i32, u64, Duration) {
    let mut all = vec!["--format", "json"];
    all.extend_from_slice(args);
    let started = Instant::now();
    let mut child = env
        .command(&all)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let status_file = format!("/proc/{}/status", child.id());
    let mut peak = 0;
    let stdout = child.stdout.take().unwrap();
    let reader = std::thread::spawn(move || {
        let mut s = String::new();
        std::io::Read::read_to_string(&mut { stdout }, &mut s).unwrap();
        s
    });
    while child.try_wait().unwrap().is_none() {
        if let Ok(text) = std::fs::read_to_string(&status_file) {
            let hwm = text
                .lines()
                .find_map(|l| l.strip_prefix("VmHWM:"))
                .and_then(|v| v.trim().trim_end_matches(" kB").trim().parse().ok())
                .unwrap_or(0);
            peak = peak.max(hwm);
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let code = child.wait().unwrap().code().unwrap();
    let out = reader.join().unwrap();
    let doc = serde_json::from_str(&out).unwrap_or_else(|e| panic!("not JSON ({e}): {out}"));
    (doc, code, peak, started.elapsed())
}

fn tool_calls(env: &Env, plan: &str) -> Vec<(String, String, Option<String>, Option<String>)> {
    let conn = rusqlite::Connection::open(db_file(env)).unwrap();
    let mut stmt = conn
        .prepare("SELECT tool, outcome, error_message, result_summary FROM tool_calls WHERE plan_id = ?1 ORDER BY seq")
        .unwrap();
    stmt.query_map([plan], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)))
        .unwrap()
        .map(Result::unwrap)
        .collect()
}

/// `plan use ACTION app --automation-profile trusted`, measured: the answer, the exit code,
/// the peak memory (KiB), the time it took and the plan's id.
fn use_measured(s: &Setup, action: &str) -> (Value, i32, u64, Duration, String) {
    let (doc, code, peak, took) = run_measured(
        &s.env,
        &[
            "plan",
            "use",
            action,
            "app",
            "--automation-profile",
            "trusted",
        ],
    );
    let id = plan_id(&doc);
    (doc, code, peak, took, id)
}

#[test]
fn a_step_printing_50_mb_is_capped_and_memory_stays_bounded() {
    let s = setup(
        "name: local/loud\ndefinition-of-done: done\nstrategy-actor: builtin/checklist-strategist\nexecution-actor: builtin/script-executor\nscript:\n  - name: loud\n    run: \"head -c 52428800 /dev/zero | tr '\\\\0' x; echo finished > out.txt\"\n",
        |_| {},
    );
    let (doc, code, peak, _, id) = use_measured(&s, "local/loud");
    assert_eq!(code, 3, "reaches the apply gate: {doc:#}");
    assert!(peak > 0 && peak < PEAK_KIB, "peak {peak} KiB");
    let calls = tool_calls(&s.env, &id);
    assert_eq!(calls.len(), 1, "{calls:?}");
    assert_eq!(calls[0].1, "ok");
    let db_size = std::fs::metadata(db_file(&s.env)).unwrap().len();
    assert!(
        db_size < 5 * 1024 * 1024,
        "the output is capped, not stored: {db_size} bytes"
    );
    let (diff, _) = s.env.json(&["plan", "diff", &id]);
    assert_eq!(diff["data"]["stats"]["files_changed"], 1, "{diff:#}");
}

#[test]
fn a_command_that_never_ends_is_killed_at_its_timeout_with_a_clear_error() {
    let s = setup(
        "name: local/hang\ndefinition-of-done: done\nstrategy-actor: builtin/checklist-strategist\nexecution-actor: builtin/script-executor\nscript:\n  - name: hang\n    tool: shell_execute\n    args: {command: \"sleep 600 & sleep 600\", timeout_secs: 2}\n",
        |_| {},
    );
    let (doc, code, _, took, id) = use_measured(&s, "local/hang");
    assert!(took < Duration::from_secs(60), "took {took:?}");
    assert_eq!(code, 1, "{doc:#}");
    let text = doc["error"].to_string();
    assert!(
        text.contains("timed out") || text.contains("timeout"),
        "names the timeout: {text}"
    );
    assert!(
        text.contains("sleep 600 & sleep 600"),
        "names the command: {text}"
    );
    let calls = tool_calls(&s.env, &id);
    let summary: Value = serde_json::from_str(calls.last().unwrap().3.as_deref().unwrap()).unwrap();
    assert_eq!(summary["timed_out"], true, "{calls:?}");
    assert_eq!(summary["signal"], 9);
    let (status, _) = s.env.json(&["plan", "status", &id]);
    assert_eq!(status["data"]["state"], "errored", "{status:#}");
    // No process of the group survives.
    let out = Command::new("pgrep").args(["-f", "sleep 600"]).output();
    if let Ok(out) = out {
        let own: Vec<String> = String::from_utf8_lossy(&out.stdout)
            .lines()
            .map(str::to_string)
            .collect();
        for pid in own {
            let cwd = std::fs::read_link(format!("/proc/{pid}/cwd")).unwrap_or_default();
            assert!(
                !cwd.starts_with(s.env.root()),
                "sleep {pid} survived in {}",
                cwd.display()
            );
        }
    }
}

#[test]
fn binary_and_non_utf8_files_round_trip_through_diff_and_apply() {
    let s = setup(
        "name: local/bytes\ndefinition-of-done: done\nstrategy-actor: builtin/checklist-strategist\nexecution-actor: builtin/script-executor\nscript:\n  - name: bytes\n    run: \"printf '\\\\377\\\\376\\\\000\\\\001bin' > new.bin; printf 'caf\\\\351 cr\\\\350me\\\\n' > latin1.txt; printf 'x' >> logo.png; cp logo.png copy.png\"\n",
        |repo| {
            let logo: Vec<u8> = (0..=255u8).cycle().take(10_000).collect();
            std::fs::write(repo.join("logo.png"), logo).unwrap();
        },
    );
    let (doc, code, _, _, id) = use_measured(&s, "local/bytes");
    assert_eq!(code, 3, "{doc:#}");
    let (diff, code) = s.env.json(&["plan", "diff", &id]);
    assert_eq!(code, 0, "{diff:#}");
    let files = diff["data"]["resources"][0]["files"].as_array().unwrap();
    let binary = |p: &str| {
        files
            .iter()
            .find(|f| f["path"] == p)
            .unwrap_or_else(|| panic!("{p}: {diff:#}"))["binary"]
            .clone()
    };
    assert_eq!(binary("new.bin"), true);
    assert_eq!(binary("logo.png"), true);
    assert_eq!(binary("copy.png"), true);
    let plain = s.env.run(&["--format", "plain", "plan", "diff", &id]);
    assert!(plain.status.success());
    let (doc, code) = s.env.json(&["plan", "apply", "--yes", &id]);
    assert_eq!(code, 0, "{doc:#}");
    assert_eq!(
        std::fs::read(s.repo.join("new.bin")).unwrap(),
        b"\xff\xfe\x00\x01bin"
    );
    assert_eq!(
        std::fs::read(s.repo.join("latin1.txt")).unwrap(),
        b"caf\xe9 cr\xe8me\n"
    );
    let mut logo: Vec<u8> = (0..=255u8).cycle().take(10_000).collect();
    logo.push(b'x');
    assert_eq!(std::fs::read(s.repo.join("logo.png")).unwrap(), logo);
    assert_eq!(std::fs::read(s.repo.join("copy.png")).unwrap(), logo);
}

#[test]
fn a_large_file_in_the_repository_keeps_memory_bounded_and_is_left_alone() {
    const SIZE: usize = 64 * 1024 * 1024;
    let s = setup(
        "name: local/small\ndefinition-of-done: done\nstrategy-actor: builtin/checklist-strategist\nexecution-actor: builtin/script-executor\nscript:\n  - name: note\n    run: \"echo note > NOTE.md; wc -c big.dat > size.txt\"\n",
        |repo| {
            let big: Vec<u8> = (0..SIZE).map(|i| (i % 251) as u8).collect();
            std::fs::write(repo.join("big.dat"), big).unwrap();
        },
    );
    let (doc, code, peak, _, id) = use_measured(&s, "local/small");
    assert_eq!(code, 3, "{doc:#}");
    assert!(peak < PEAK_KIB, "peak {peak} KiB with a {SIZE}-byte file");
    let (diff, _, peak, _) = run_measured(&s.env, &["plan", "diff", &id]);
    assert_eq!(diff["data"]["stats"]["files_changed"], 2, "{diff:#}");
    assert!(peak < PEAK_KIB, "diff peak {peak} KiB");
    let (doc, code) = s.env.json(&["plan", "apply", "--yes", &id]);
    assert_eq!(code, 0, "{doc:#}");
    assert_eq!(
        std::fs::read_to_string(s.repo.join("size.txt")).unwrap(),
        format!("{SIZE} big.dat\n")
    );
    assert_eq!(
        std::fs::metadata(s.repo.join("big.dat")).unwrap().len(),
        SIZE as u64
    );
}
