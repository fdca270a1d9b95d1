//! Review hunk by hunk (`docs/review.md`): marks per hunk and file, stable ids across
//! processes, and a partial Apply that commits exactly the accepted hunks.

use std::process::Command;

use super::apply::{plan_at_apply_gate, repo_with};
use crate::support::{Env, git_out};

fn show(repo: &std::path::Path, what: &str) -> (String, bool) {
    let o = Command::new("git")
        .args(["show", what])
        .current_dir(repo)
        .output()
        .unwrap();
    (
        String::from_utf8_lossy(&o.stdout).into_owned(),
        o.status.success(),
    )
}

fn lines(prefix: &str) -> String {
    (1..=20).map(|i| format!("{prefix}{i}\n")).collect()
}

/// `(id, path, old_start)` of every item of `plan review`.
fn items(env: &Env, plan: &str) -> Vec<(String, String, u64, String)> {
    let (doc, code) = env.json(&["plan", "review", plan]);
    assert_eq!(code, 0, "{doc:#}");
    let mut out = Vec::new();
    for f in doc["data"]["files"].as_array().unwrap() {
        for i in f["items"].as_array().unwrap() {
            out.push((
                i["id"].as_str().unwrap().to_string(),
                f["path"].as_str().unwrap().to_string(),
                i["old_start"].as_u64().unwrap(),
                i["mark"].as_str().unwrap().to_string(),
            ));
        }
    }
    out
}

#[test]
fn a_partial_apply_commits_exactly_the_accepted_hunks_and_lists_what_was_left_out() {
    let env = Env::new();
    let (a, b) = (lines("a"), lines("b"));
    let repo = repo_with(env.root(), "repo", &[("a.txt", &a), ("b.txt", &b)]);
    let plan = plan_at_apply_gate(
        &env,
        &[&repo],
        &[
            "sed -i 's/^a1$/A1/; s/^a20$/A20/' a.txt && sed -i 's/^b1$/B1/; s/^b20$/B20/' b.txt && printf 'new\\n' > c.txt",
        ],
    );
    let first = items(&env, &plan);
    assert_eq!(first.len(), 5, "3 files, 5 hunks: {first:?}");
    assert!(first.iter().all(|i| i.3 == "pending"));
    // Another process computes the same ids.
    assert_eq!(items(&env, &plan), first, "ids are stable across processes");
    let a_last = first
        .iter()
        .find(|i| i.1 == "a.txt" && i.2 > 1)
        .unwrap()
        .0
        .clone();
    let a_first = first
        .iter()
        .find(|i| i.1 == "a.txt" && i.2 <= 1)
        .unwrap()
        .0
        .clone();
    let (doc, code) = env.json(&[
        "plan", "review", &plan, "--reject", &a_last, "c.txt", "--reason", "not now",
    ]);
    assert_eq!(code, 0, "{doc:#}");
    let (doc, code) = env.json(&["plan", "review", &plan, "--accept", &a_first[..6], "b.txt"]);
    assert_eq!(code, 0, "{doc:#}");
    assert_eq!(doc["data"]["counts"]["accepted"], 3, "{doc:#}");
    assert_eq!(doc["data"]["counts"]["rejected"], 2, "{doc:#}");
    let (doc, code) = env.json(&["plan", "review", &plan, "--accept", "nosuchhunk"]);
    assert_ne!(code, 0, "{doc:#}");
    // Export takes what Apply would write: the rejected file and hunk stay out of it.
    let (doc, code) = env.json(&["plan", "export", &plan, "--branch", "reviewed"]);
    assert_eq!(code, 0, "{doc:#}");
    assert_eq!(
        doc["data"]["left_out"].as_array().unwrap().len(),
        2,
        "{doc:#}"
    );
    assert!(
        !show(&repo, "reviewed:c.txt").1,
        "the rejected file is not exported"
    );
    let patch = env.root().join("reviewed.patch");
    let (doc, code) = env.json(&["plan", "export", &plan, "--patch", patch.to_str().unwrap()]);
    assert_eq!(code, 0, "{doc:#}");
    let text = std::fs::read_to_string(&patch).unwrap();
    assert!(text.contains("a.txt") && !text.contains("c.txt"), "{text}");
    let (doc, code) = env.json(&["plan", "apply", "--yes", &plan]);
    assert_eq!(code, 0, "{doc:#}");
    let tree = |rev: &str| {
        git_out(&repo, &["rev-parse", &format!("{rev}^{{tree}}")])
            .trim()
            .to_string()
    };
    assert_eq!(
        tree("reviewed"),
        tree("HEAD"),
        "the exported branch holds exactly the tree Apply committed"
    );
    assert_eq!(show(&repo, "HEAD:a.txt").0, a.replacen("a1\n", "A1\n", 1));
    assert_eq!(
        show(&repo, "HEAD:b.txt").0,
        b.replacen("b1\n", "B1\n", 1).replace("b20\n", "B20\n")
    );
    assert!(
        !show(&repo, "HEAD:c.txt").1,
        "the rejected file is not committed"
    );
    let message = show(&repo, "-s").0;
    assert!(message.contains("Left out"), "{message}");
    assert!(
        message.contains("c.txt whole file") || message.contains("c.txt @@"),
        "{message}"
    );
    assert!(message.contains("not now"), "{message}");
    // The plan is applied: its review is closed.
    let (doc, code) = env.json(&["plan", "review", &plan, "--accept", "c.txt"]);
    assert_eq!(
        (code, doc["error"]["code"].as_str()),
        (1, Some("CONFLICT")),
        "{doc:#}"
    );
}

#[test]
fn one_target_given_two_marks_is_refused_naming_it() {
    let env = Env::new();
    let repo = repo_with(env.root(), "repo", &[("a.txt", "a\n")]);
    let plan = plan_at_apply_gate(&env, &[&repo], &["printf 'b\\n' > a.txt"]);
    let (doc, code) = env.json(&[
        "plan", "review", &plan, "--accept", "a.txt", "--reject", "a.txt",
    ]);
    assert_eq!(
        (code, doc["error"]["code"].as_str()),
        (1, Some("INVALID_INPUT")),
        "{doc:#}"
    );
    assert!(
        doc["error"]["message"]
            .as_str()
            .unwrap()
            .contains("a.txt is given to both --accept and --reject"),
        "{doc:#}"
    );
    let (doc, _) = env.json(&["plan", "review", &plan]);
    assert_eq!(
        doc["data"]["counts"]["pending"], 1,
        "nothing was marked: {doc:#}"
    );
}

/// Every review id `plan diff --format json` prints, in order: hunk ids, and the item id of a
/// file without hunks.
fn diff_ids(env: &Env, plan: &str) -> Vec<String> {
    let (doc, code) = env.json(&["plan", "diff", plan]);
    assert_eq!(code, 0, "{doc:#}");
    let mut out = Vec::new();
    for r in doc["data"]["resources"].as_array().unwrap() {
        for f in r["files"].as_array().unwrap() {
            let hunks = f["hunks"].as_array().unwrap();
            if hunks.is_empty() {
                out.push(f["item_id"].as_str().expect("a file's item id").to_string());
            }
            for h in hunks {
                out.push(h["id"].as_str().expect("a hunk id").to_string());
            }
        }
    }
    out
}

#[test]
fn plan_diff_carries_the_ids_plan_review_marks_and_they_do_not_change_between_calls() {
    let env = Env::new();
    let (a, b) = (lines("a"), lines("b"));
    let repo = repo_with(env.root(), "repo", &[("a.txt", &a), ("b.bin", "x\0y")]);
    let plan = plan_at_apply_gate(
        &env,
        &[&repo],
        &["sed -i 's/^a1$/A1/; s/^a20$/A20/' a.txt && printf 'z\\0w' > b.bin && chmod +x b.bin"],
    );
    let first = diff_ids(&env, &plan);
    assert_eq!(first.len(), 3, "two hunks and a binary file: {first:?}");
    assert!(
        first
            .iter()
            .all(|i| i.len() == 12 && i.chars().all(|c| c.is_ascii_hexdigit()))
    );
    // Each call is a new process.
    assert_eq!(diff_ids(&env, &plan), first);
    assert_eq!(diff_ids(&env, &plan), first);
    let reviewed: Vec<String> = items(&env, &plan).into_iter().map(|i| i.0).collect();
    assert_eq!(reviewed, first, "plan review names the same items");
    // The decisions that produced each hunk are there too.
    let (doc, _) = env.json(&["plan", "diff", &plan]);
    let hunk = &doc["data"]["resources"][0]["files"][0]["hunks"][0];
    assert!(
        !hunk["decision_ids"].as_array().unwrap().is_empty(),
        "{hunk:#}"
    );
    // A mark does not change an id.
    let (doc, code) = env.json(&["plan", "review", &plan, "--reject", &first[0]]);
    assert_eq!(code, 0, "{doc:#}");
    assert_eq!(diff_ids(&env, &plan), first);
    drop(b);
}

#[test]
fn required_validations_run_on_the_accepted_part_not_on_the_sandbox() {
    let env = Env::new();
    let a = lines("a");
    let repo = repo_with(env.root(), "repo", &[("a.txt", &a)]);
    let plan = plan_at_apply_gate(
        &env,
        &[&repo],
        &["sed -i 's/^a1$/A1/' a.txt && printf 'new\\n' > c.txt"],
    );
    // Passes only on a tree without c.txt.
    let (doc, code) = env.json(&[
        "project",
        "validation",
        "add",
        "--timeout",
        "30",
        "app",
        "test ! -f c.txt",
    ]);
    assert_eq!(code, 0, "{doc:#}");
    let (doc, code) = env.json(&["plan", "review", &plan, "--accept", "a.txt", "c.txt"]);
    assert_eq!(code, 0, "{doc:#}");
    let (doc, code) = env.json(&["plan", "apply", "--yes", &plan]);
    assert_ne!(code, 0, "c.txt accepted: the validation fails: {doc:#}");
    assert!(
        doc["error"]["message"]
            .as_str()
            .unwrap_or_default()
            .contains("test ! -f c.txt"),
        "{doc:#}"
    );
    assert!(!show(&repo, "HEAD:c.txt").1, "nothing was applied");
    let (doc, code) = env.json(&[
        "plan",
        "review",
        &plan,
        "--reject",
        "c.txt",
        "--reason",
        "not in this change",
    ]);
    assert_eq!(code, 0, "{doc:#}");
    // The confirmation names only the accepted part and what is left out.
    let (doc, code) = env.json(&["plan", "apply", &plan]);
    assert_eq!(doc["error"]["code"], "NEEDS_APPROVAL", "{doc:#}");
    assert_eq!(code, 3, "{doc:#}");
    let changes = doc["data"]["changes"].as_array().unwrap();
    assert_eq!(changes.len(), 1, "{doc:#}");
    assert_eq!(changes[0]["path"], "a.txt", "{doc:#}");
    assert_eq!(doc["data"]["left_out"][0]["path"], "c.txt", "{doc:#}");
    assert_eq!(
        doc["data"]["left_out"][0]["reason"], "not in this change",
        "{doc:#}"
    );
    let (doc, code) = env.json(&["plan", "apply", "--yes", &plan]);
    assert_eq!(code, 0, "c.txt rejected: the validation passes: {doc:#}");
    assert_eq!(show(&repo, "HEAD:a.txt").0, a.replacen("a1\n", "A1\n", 1));
    assert!(!show(&repo, "HEAD:c.txt").1);
    let (status, _) = env.json(&["plan", "status", &plan]);
    let v = &status["data"]["validation_summary"]["apply"][0];
    assert_eq!(v["passed"], true, "{status:#}");
    assert_eq!(v["command"], "test ! -f c.txt", "{status:#}");
}

#[test]
fn a_rejected_hunk_corrected_through_its_decision_comes_back_pending_and_other_marks_stay() {
    use super::correction::{EIGHT_STEPS, by_key, store};
    let s = super::lifecycle::setup_with(EIGHT_STEPS);
    let (doc, code) = s.env.json(&[
        "plan",
        "use",
        "local/notes",
        "app",
        "--arg",
        "version=1",
        "--automation-profile",
        "trusted",
    ]);
    assert_eq!(code, 3, "stops at the apply gate: {doc:#}");
    let plan = doc["data"]["plan_id"].as_str().unwrap().to_string();
    let before = items(&s.env, &plan);
    let id_of = |items: &[(String, String, u64, String)], path: &str| {
        items
            .iter()
            .find(|i| i.1 == path)
            .unwrap_or_else(|| panic!("{path} in {items:?}"))
            .0
            .clone()
    };
    let (e_id, f_id) = (id_of(&before, "e.txt"), id_of(&before, "f.txt"));
    let reason = "write a fixed value, not the time";
    let (doc, code) = s.env.json(&[
        "plan", "review", &plan, "--reject", &e_id, "--reason", reason,
    ]);
    assert_eq!(code, 0, "{doc:#}");
    let others: Vec<String> = before
        .iter()
        .filter(|i| i.0 != e_id)
        .map(|i| i.0.clone())
        .collect();
    let mut accept = vec!["plan", "review", plan.as_str(), "--accept"];
    accept.extend(others.iter().map(String::as_str));
    let (doc, code) = s.env.json(&accept);
    assert_eq!(code, 0, "{doc:#}");
    // The rejected hunk names the decision that produced it: s5's.
    let e = doc["data"]["files"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["path"] == "e.txt")
        .unwrap()["items"][0]
        .clone();
    let pid = plan.parse().unwrap();
    let s5 = by_key(&store(&s.env), &pid)["s5"].decision_id.to_string();
    assert_eq!(e["decision_ids"], serde_json::json!([s5]), "{e:#}");
    assert_eq!(e["reason"], reason);
    // Correct it with the rejection's reason as guidance: s5 and s6 (which copies e.txt)
    // run again.
    let (doc, code) = s.env.json(&[
        "plan", "correct", "--mode", "revert", "-g", reason, "--yes", &s5,
    ]);
    assert_eq!(code, 0, "{doc:#}");
    let after = items(&s.env, &plan);
    assert_eq!(after.len(), before.len(), "{after:?}");
    for (id, path, _, mark) in &after {
        match path.as_str() {
            "e.txt" | "f.txt" => {
                assert_eq!(mark, "pending", "{path} was redone: {after:?}");
                assert_ne!(*id, e_id);
                assert_ne!(*id, f_id);
            }
            _ => {
                assert!(others.contains(id), "{path} keeps its id");
                assert_eq!(mark, "accepted", "{path} keeps its mark: {after:?}");
            }
        }
    }
    let (doc, _) = s.env.json(&["plan", "review", &plan]);
    assert_eq!(doc["data"]["attempt"], 2, "{doc:#}");
    assert_eq!(doc["data"]["counts"]["pending"], 2, "{doc:#}");
    assert_eq!(doc["data"]["counts"]["rejected"], 0, "{doc:#}");
}

#[test]
fn a_reason_given_with_both_accept_and_reject_belongs_to_the_rejection() {
    let env = Env::new();
    let a = lines("a");
    let repo = repo_with(env.root(), "repo", &[("a.txt", &a)]);
    let plan = plan_at_apply_gate(&env, &[&repo], &["sed -i 's/^a1$/A1/; s/^a20$/A20/' a.txt"]);
    let first = items(&env, &plan);
    assert_eq!(first.len(), 2, "{first:?}");
    let (doc, code) = env.json(&[
        "plan",
        "review",
        &plan,
        "--accept",
        &first[0].0,
        "--reject",
        &first[1].0,
        "--reason",
        "keep 20",
    ]);
    assert_eq!(code, 0, "{doc:#}");
    let reasons: Vec<(String, serde_json::Value)> = doc["data"]["files"][0]["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| (i["mark"].as_str().unwrap().to_string(), i["reason"].clone()))
        .collect();
    assert_eq!(
        reasons,
        [
            ("accepted".to_string(), serde_json::Value::Null),
            ("rejected".to_string(), serde_json::json!("keep 20"))
        ],
        "{doc:#}"
    );
}

#[test]
fn a_directory_or_a_glob_marks_every_changed_file_it_names() {
    let env = Env::new();
    let repo = repo_with(
        env.root(),
        "repo",
        &[
            ("src/lib.rs", "a\n"),
            ("tests/one.rs", "a\n"),
            ("tests/two.rs", "a\n"),
        ],
    );
    let plan = plan_at_apply_gate(
        &env,
        &[&repo],
        &["for f in src/lib.rs tests/one.rs tests/two.rs; do printf 'b\\n' > $f; done"],
    );
    let (doc, code) = env.json(&["plan", "review", &plan, "--reject", "tests"]);
    assert_eq!(code, 0, "{doc:#}");
    let (doc, code) = env.json(&["plan", "review", &plan, "--accept", "src/*.rs"]);
    assert_eq!(code, 0, "{doc:#}");
    let marks: Vec<(String, String)> = items(&env, &plan)
        .into_iter()
        .map(|(_, path, _, mark)| (path, mark))
        .collect();
    assert_eq!(
        marks,
        [
            ("src/lib.rs".to_string(), "accepted".to_string()),
            ("tests/one.rs".to_string(), "rejected".to_string()),
            ("tests/two.rs".to_string(), "rejected".to_string()),
        ]
    );
}

#[test]
fn a_path_directory_or_glob_that_names_no_changed_file_is_refused_naming_it() {
    let env = Env::new();
    let repo = repo_with(
        env.root(),
        "repo",
        &[("src/lib.rs", "a\n"), ("tests/one.rs", "a\n")],
    );
    let plan = plan_at_apply_gate(
        &env,
        &[&repo],
        &["printf 'b\\n' > src/lib.rs; printf 'b\\n' > tests/one.rs"],
    );
    for target in ["docs/", "docs/**", "*.md"] {
        let (doc, code) = env.json(&["plan", "review", &plan, "--reject", target]);
        assert_ne!(code, 0, "{target}: {doc:#}");
        assert_eq!(doc["error"]["code"], "NOT_FOUND", "{doc:#}");
        assert!(
            doc["error"]["message"].as_str().unwrap().contains(target),
            "the error names {target}: {doc:#}"
        );
    }
    let (doc, code) = env.json(&["plan", "review", &plan, "--reject", "tests/**"]);
    assert_eq!(code, 0, "{doc:#}");
    let marks: Vec<(String, String)> = items(&env, &plan)
        .into_iter()
        .map(|(_, path, _, mark)| (path, mark))
        .collect();
    assert_eq!(
        marks,
        [
            ("src/lib.rs".to_string(), "pending".to_string()),
            ("tests/one.rs".to_string(), "rejected".to_string()),
        ]
    );
}

/// Old and new text of one file where diff algorithms disagree on the line counts: 1,500
/// lines drawn from ten common code lines, then 500 random insertions, deletions and
/// replacements (a fixed xorshift sequence). Git's own Myers with its heuristics counts
/// `+270 -281` here; other Myers implementations count `+271 -282`.
fn hard_change() -> (String, String) {
    let pool = [
        "{",
        "}",
        "",
        "  return x;",
        "  x += 1;",
        "if (a) {",
        "} else {",
        "foo();",
        "bar();",
        "// c",
    ];
    let mut seed: u64 = 13u64.wrapping_mul(0x9e37_79b9_7f4a_7c15);
    let mut next = move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    let old: Vec<&str> = (0..1500)
        .map(|_| pool[(next() % pool.len() as u64) as usize])
        .collect();
    let mut new = old.clone();
    for _ in 0..500 {
        let i = (next() % new.len() as u64) as usize;
        match next() % 3 {
            0 => {
                new.remove(i);
            }
            1 => new.insert(i, pool[(next() % pool.len() as u64) as usize]),
            _ => new[i] = pool[(next() % pool.len() as u64) as usize],
        }
    }
    (old.join("\n") + "\n", new.join("\n") + "\n")
}

/// `git diff --numstat` of a change: (added, removed) of its one file.
fn git_numstat(dir: &std::path::Path, args: &[&str]) -> (u64, u64) {
    let mut all = vec![
        "-c",
        "diff.algorithm=default",
        "-c",
        "diff.indentHeuristic=true",
    ];
    all.extend_from_slice(args);
    all.push("--numstat");
    let out = git_out(dir, &all);
    let mut f = out.split_whitespace();
    (
        f.next().unwrap().parse().unwrap(),
        f.next().unwrap().parse().unwrap(),
    )
}

#[test]
fn line_counts_are_the_ones_git_reports_for_the_same_change() {
    let env = Env::new();
    let (old, new) = hard_change();
    let repo = repo_with(env.root(), "repo", &[("code.c", &old), ("next.c", &new)]);
    // What git itself counts for this change, in a copy of the repository.
    let copy = env.root().join("copy");
    git_out(
        env.root(),
        &[
            "clone",
            "-q",
            repo.to_str().unwrap(),
            copy.to_str().unwrap(),
        ],
    );
    std::fs::write(copy.join("code.c"), &new).unwrap();
    let by_git = git_numstat(&copy, &["diff"]);
    assert_eq!(by_git, (270, 281), "the change this test is built on");

    let plan = plan_at_apply_gate(&env, &[&repo], &["cp next.c code.c"]);
    let (doc, code) = env.json(&["plan", "diff", &plan]);
    assert_eq!(code, 0, "{doc:#}");
    let file = &doc["data"]["resources"][0]["files"][0];
    assert_eq!(file["path"], "code.c");
    let counted = |f: &serde_json::Value| {
        (
            f["additions"].as_u64().unwrap(),
            f["deletions"].as_u64().unwrap(),
        )
    };
    assert_eq!(counted(file), by_git, "plan diff counts as git diff does");
    let hunk_lines = |kind: &str| {
        file["hunks"]
            .as_array()
            .unwrap()
            .iter()
            .flat_map(|h| h["lines"].as_array().unwrap())
            .filter(|l| l["kind"] == kind)
            .count() as u64
    };
    assert_eq!(
        (hunk_lines("added"), hunk_lines("removed")),
        by_git,
        "the hunks shown are the ones counted"
    );

    let (doc, code) = env.json(&["plan", "apply", "--yes", &plan]);
    assert_eq!(code, 0, "{doc:#}");
    let applied = &doc["data"]["apply_summary"]["resources"][0];
    assert_eq!(
        counted(applied),
        git_numstat(&repo, &["diff", "HEAD~1", "HEAD"]),
        "Apply's summary counts as git does for its commit: {doc:#}"
    );
}
