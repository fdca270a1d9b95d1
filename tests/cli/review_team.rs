//! Several reviewers at once (`docs/review.md`, spec section 21): through a server, each
//! human's marks are their own rows, so two reviewers marking the same 50 hunks at the same
//! time lose nothing and every mark names its reviewer; an item someone rejected is not
//! applied whoever accepted it; `reviewed` is no verdict; and `apply.require_all_hunks_marked`
//! refuses an Apply, changing nothing, while any hunk has no mark from anyone.

use std::collections::BTreeMap;
use std::process::Command;

use serde_json::Value;

use super::apply::repo_with;
use crate::support::server::Server;
use crate::support::{Env, git_out};

/// Lines of the file the plan changes: every tenth line changes, 10 lines apart, so each
/// change is a hunk of its own (50 hunks).
const LINES: usize = 500;
const HUNKS: usize = LINES / 10;

fn base_text() -> String {
    (1..=LINES).map(|i| format!("line {i}\n")).collect()
}

/// The text with the changes of the lines `changed` made (`line 10` becomes `LINE 10`).
fn text_with(changed: &[usize]) -> String {
    (1..=LINES)
        .map(|i| {
            if changed.contains(&i) {
                format!("LINE {i}\n")
            } else {
                format!("line {i}\n")
            }
        })
        .collect()
}

/// A server with the organization `acme`: `ann` owns it, `bob` maintains it; a project
/// `acme/web` on a repository holding `big.txt`; the action `acme/shout` upper-cases every
/// tenth line of it. Tokens of ann and bob, in that order.
struct Reviewers {
    server: Server,
    admin: Env,
    tokens: [String; 2],
}

const SHOUT: &str = "name: acme/shout\ndefinition-of-done: every tenth line is upper case\nstrategy-actor: builtin/checklist-strategist\nexecution-actor: builtin/script-executor\nscript:\n  - name: shout\n    run: sed -i 's/^line \\([0-9]*0\\)$/LINE \\1/' big.txt\n";

impl Reviewers {
    fn new() -> Self {
        let server = Server::start(Env::new());
        let admin = Env::new();
        let tokens: [String; 2] = server
            .organization(&admin, "acme", &[("owner", "ann"), ("maintainer", "bob")])
            .try_into()
            .unwrap();
        let ok = |args: &[&str]| {
            let (doc, code) = server.client_json(&admin, args);
            assert_eq!(code, 0, "{args:?}: {doc:#}");
            doc
        };
        let repo = repo_with(server.env.root(), "web", &[("big.txt", &base_text())]);
        ok(&[
            "resource",
            "add",
            "git-checkout",
            "acme/web-repo",
            "--path",
            repo.to_str().unwrap(),
        ]);
        ok(&["project", "create", "acme/web"]);
        ok(&["project", "link-resource", "acme/web", "acme/web-repo"]);
        let action = admin.root().join("shout.yaml");
        std::fs::write(&action, SHOUT).unwrap();
        ok(&[
            "action",
            "create",
            "--available",
            "--config",
            action.to_str().unwrap(),
        ]);
        Self {
            server,
            admin,
            tokens,
        }
    }

    fn repo(&self) -> std::path::PathBuf {
        self.server.env.root().join("web")
    }

    /// The command `args` as reviewer `who` (0: ann, 1: bob), in `format`.
    fn command(&self, who: usize, format: &str, args: &[&str]) -> Command {
        let mut cmd = self
            .server
            .client(&self.admin, &[&["--format", format], args].concat());
        cmd.env("AGENTS_TOKEN", &self.tokens[who]);
        cmd
    }

    /// Runs `args` as reviewer `who`: the JSON document and the exit code.
    fn run_as(&self, who: usize, args: &[&str]) -> (Value, i32) {
        let out = self.command(who, "json", args).output().unwrap();
        let doc = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
            panic!(
                "{args:?}: not JSON ({e}): {}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            )
        });
        (doc, out.status.code().unwrap_or(-1))
    }

    fn ok_as(&self, who: usize, args: &[&str]) -> Value {
        let (doc, code) = self.run_as(who, args);
        assert_eq!(code, 0, "{args:?}: {doc:#}");
        doc
    }

    /// ann's plan of `acme/shout` on `acme/web`, at its apply gate.
    fn plan(&self) -> String {
        self.plan_under("trusted")
    }

    /// ann's plan of `acme/shout` on `acme/web` under `profile`, which stops at its apply
    /// gate.
    fn plan_under(&self, profile: &str) -> String {
        let (doc, code) = self.run_as(
            0,
            &[
                "plan",
                "use",
                "acme/shout",
                "acme/web",
                "--automation-profile",
                profile,
            ],
        );
        assert_eq!(code, 3, "stops at the apply gate: {doc:#}");
        doc["data"]["plan_id"].as_str().unwrap().to_string()
    }

    fn set_policy(&self, yaml: &str) {
        let file = self.admin.root().join("policy.yaml");
        std::fs::write(&file, yaml).unwrap();
        let (doc, code) = self.server.client_json(
            &self.admin,
            &[
                "server",
                "policy",
                "set",
                "acme",
                "--config",
                file.to_str().unwrap(),
            ],
        );
        assert_eq!(code, 0, "{doc:#}");
    }
}

/// One item of `plan review`: its id, the changed line (the hunk's first added line's
/// number), its verdict, and its marks as `(reviewer, mark, reason)`.
#[derive(Debug, Clone)]
struct Item {
    id: String,
    line: usize,
    verdict: String,
    marks: Vec<(String, String, Option<String>)>,
}

fn items(doc: &Value) -> Vec<Item> {
    let mut out = Vec::new();
    for f in doc["data"]["files"].as_array().unwrap() {
        for i in f["items"].as_array().unwrap() {
            // Three context lines lead each hunk: the changed line is the fourth.
            let line = i["new_start"].as_u64().unwrap() as usize + 3;
            out.push(Item {
                id: i["id"].as_str().unwrap().to_string(),
                line,
                verdict: i["mark"].as_str().unwrap().to_string(),
                marks: i["marks"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|m| {
                        (
                            m["reviewer"].as_str().unwrap_or("").to_string(),
                            m["mark"].as_str().unwrap().to_string(),
                            m["reason"].as_str().map(str::to_string),
                        )
                    })
                    .collect(),
            });
        }
    }
    out
}

/// Each reviewer marks every item with their mark at the same time, in batches of 5 items
/// per process, each reviewer's processes one after another on a thread of its own.
fn mark_all_at_once(r: &Reviewers, plan: &str, ids: &[String], marks: [&str; 2]) {
    std::thread::scope(|s| {
        for (who, flag) in marks.iter().enumerate() {
            s.spawn(move || {
                for batch in ids.chunks(5) {
                    let mut args = vec!["plan", "review", plan, flag];
                    args.extend(batch.iter().map(String::as_str));
                    let (doc, code) = r.run_as(who, &args);
                    assert_eq!(code, 0, "{args:?}: {doc:#}");
                }
            });
        }
    });
}

#[test]
fn two_reviewers_marking_the_same_50_hunks_at_once_keep_all_100_marks_each_attributed() {
    let r = Reviewers::new();
    let plan = r.plan();
    let before = items(&r.ok_as(0, &["plan", "review", &plan]));
    assert_eq!(before.len(), HUNKS, "{before:#?}");
    assert!(
        before
            .iter()
            .all(|i| i.verdict == "pending" && i.marks.is_empty())
    );
    let ids: Vec<String> = before.iter().map(|i| i.id.clone()).collect();

    mark_all_at_once(&r, &plan, &ids, ["--accept", "--reviewed"]);

    let doc = r.ok_as(1, &["plan", "review", &plan]);
    let after = items(&doc);
    let stored: usize = after.iter().map(|i| i.marks.len()).sum();
    assert_eq!(stored, 2 * HUNKS, "every mark of both reviewers is kept");
    for i in &after {
        assert_eq!(
            i.marks,
            [
                ("ann".to_string(), "accepted".to_string(), None),
                ("bob".to_string(), "reviewed".to_string(), None)
            ],
            "{}",
            i.id
        );
        assert_eq!(i.verdict, "accepted", "`reviewed` is no verdict");
    }
    assert_eq!(
        doc["data"]["counts"]["accepted"], HUNKS,
        "{:#}",
        doc["data"]["counts"]
    );
    assert_eq!(doc["data"]["counts"]["pending"], 0);
}

#[test]
fn a_hunk_one_reviewer_rejects_is_left_out_whoever_accepted_it_and_apply_writes_exactly_the_rest() {
    let r = Reviewers::new();
    let plan = r.plan();
    let all = items(&r.ok_as(0, &["plan", "review", &plan]));
    let ids: Vec<String> = all.iter().map(|i| i.id.clone()).collect();
    mark_all_at_once(&r, &plan, &ids, ["--accept", "--reviewed"]);
    // bob objects to three hunks, then to a fourth he changes his mind about.
    let objected: Vec<&Item> = [3, 17, 42].iter().map(|n| &all[*n]).collect();
    let mut args = vec!["plan", "review", plan.as_str(), "--reject"];
    args.extend(objected.iter().map(|i| i.id.as_str()));
    args.extend(["--reason", "keep these lower case"]);
    r.ok_as(1, &args);
    r.ok_as(1, &["plan", "review", &plan, "--reject", &all[5].id]);
    let doc = r.ok_as(1, &["plan", "review", &plan, "--reviewed", &all[5].id]);
    let now = items(&doc);
    let verdicts: BTreeMap<usize, &str> =
        now.iter().map(|i| (i.line, i.verdict.as_str())).collect();
    for i in &now {
        let rejected = objected.iter().any(|o| o.id == i.id);
        assert_eq!(
            verdicts[&i.line],
            if rejected { "rejected" } else { "accepted" },
            "line {}: {:?}",
            i.line,
            i.marks
        );
        if rejected {
            assert_eq!(
                i.marks,
                [
                    ("ann".to_string(), "accepted".to_string(), None),
                    (
                        "bob".to_string(),
                        "rejected".to_string(),
                        Some("keep these lower case".to_string())
                    )
                ]
            );
        }
    }
    assert_eq!(doc["data"]["counts"]["rejected"], 3);
    assert_eq!(doc["data"]["counts"]["accepted"], HUNKS - 3);

    // Every output format names who marked what.
    for format in ["rich", "color", "table", "plain", "json", "yaml"] {
        let out = r
            .command(0, format, &["plan", "review", &plan])
            .output()
            .unwrap();
        assert!(out.status.success(), "{format}");
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(
            text.contains("ann") && text.contains("bob") && text.contains("keep these lower case"),
            "{format}: {text}"
        );
    }
    let out = r
        .command(0, "plain", &["plan", "review", &plan])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("ann accepted; bob rejected: keep these lower case"),
        "{text}"
    );

    let (doc, code) = r.run_as(0, &["plan", "apply", "--yes", &plan]);
    assert_eq!(code, 0, "{doc:#}");
    let kept: Vec<usize> = now
        .iter()
        .filter(|i| i.verdict == "accepted")
        .map(|i| i.line)
        .collect();
    assert_eq!(kept.len(), HUNKS - 3);
    let committed = git_out(&r.repo(), &["show", "HEAD:big.txt"]);
    assert_eq!(committed, text_with(&kept), "exactly the accepted hunks");
    let message = git_out(&r.repo(), &["log", "-1", "--format=%B"]);
    assert!(
        message.contains("Reviewed-by: ann") && message.contains("Reviewed-by: bob"),
        "{message}"
    );
    assert!(message.contains("keep these lower case"), "{message}");
}

#[test]
fn require_all_hunks_marked_refuses_apply_changing_nothing_until_every_hunk_has_a_mark() {
    let r = Reviewers::new();
    r.set_policy("apply:\n  require_all_hunks_marked: true\n");
    let plan = r.plan();
    let all = items(&r.ok_as(0, &["plan", "review", &plan]));
    // ann accepts all but the last two; bob marks one of those two reviewed.
    let mut args = vec!["plan", "review", plan.as_str(), "--accept"];
    args.extend(all[..HUNKS - 2].iter().map(|i| i.id.as_str()));
    r.ok_as(0, &args);
    r.ok_as(
        1,
        &["plan", "review", &plan, "--reviewed", &all[HUNKS - 2].id],
    );

    let head = git_out(&r.repo(), &["rev-parse", "HEAD"]);
    let status_before = r.ok_as(0, &["plan", "status", &plan])["data"].clone();
    let (doc, code) = r.run_as(0, &["plan", "apply", "--yes", &plan]);
    assert_eq!(code, 4, "{doc:#}");
    assert_eq!(doc["error"]["code"], "POLICY_DENIED", "{doc:#}");
    assert_eq!(
        doc["data"]["key"], "apply.require_all_hunks_marked",
        "{doc:#}"
    );
    let message = doc["error"]["message"].as_str().unwrap();
    assert!(
        message.contains(&format!("1 of {HUNKS} items has no review mark"))
            && message.contains(&format!("agents plan review {plan}")),
        "{message}"
    );
    assert_eq!(git_out(&r.repo(), &["rev-parse", "HEAD"]), head);
    let status_after = r.ok_as(0, &["plan", "status", &plan])["data"].clone();
    assert_eq!(
        (
            &status_after["phase"],
            &status_after["state"],
            &status_after["attribution"]
        ),
        (
            &status_before["phase"],
            &status_before["state"],
            &status_before["attribution"]
        ),
        "a refused Apply records nothing"
    );

    // The last hunk marked (bob saw it): Apply goes ahead, writing the accepted hunks only.
    r.ok_as(
        1,
        &["plan", "review", &plan, "--reviewed", &all[HUNKS - 1].id],
    );
    let (doc, code) = r.run_as(0, &["plan", "apply", "--yes", &plan]);
    assert_eq!(code, 0, "{doc:#}");
    let accepted: Vec<usize> = all[..HUNKS - 2].iter().map(|i| i.line).collect();
    assert_eq!(
        git_out(&r.repo(), &["show", "HEAD:big.txt"]),
        text_with(&accepted),
        "items only marked reviewed are not accepted once anything is"
    );
}

#[test]
fn marks_only_reviewed_are_no_verdict_and_apply_writes_everything() {
    let r = Reviewers::new();
    let plan = r.plan();
    let all = items(&r.ok_as(0, &["plan", "review", &plan]));
    let doc = r.ok_as(1, &["plan", "review", &plan, "--reviewed", "big.txt"]);
    assert_eq!(
        doc["data"]["counts"]["reviewed"], HUNKS,
        "{:#}",
        doc["data"]["counts"]
    );
    let (doc, code) = r.run_as(0, &["plan", "apply", "--yes", &plan]);
    assert_eq!(code, 0, "{doc:#}");
    let every: Vec<usize> = all.iter().map(|i| i.line).collect();
    assert_eq!(
        git_out(&r.repo(), &["show", "HEAD:big.txt"]),
        text_with(&every)
    );
}

#[test]
fn under_require_all_hunks_marked_a_plan_whose_profile_applies_on_its_own_waits_for_its_reviewers()
{
    let r = Reviewers::new();
    r.set_policy("apply:\n  require_all_hunks_marked: true\n");
    let head = git_out(&r.repo(), &["rev-parse", "HEAD"]);
    // `full-auto` applies without a human, but nobody has marked a hunk yet.
    let plan = r.plan_under("full-auto");
    assert_eq!(
        git_out(&r.repo(), &["rev-parse", "HEAD"]),
        head,
        "nothing applied"
    );
    let doc = r.ok_as(1, &["plan", "review", &plan, "--accept", "big.txt"]);
    assert_eq!(doc["data"]["counts"]["accepted"], HUNKS);
    let (doc, code) = r.run_as(0, &["plan", "apply", "--yes", &plan]);
    assert_eq!(code, 0, "{doc:#}");
    let every: Vec<usize> = (1..=HUNKS).map(|n| n * 10).collect();
    assert_eq!(
        git_out(&r.repo(), &["show", "HEAD:big.txt"]),
        text_with(&every)
    );
}

#[test]
fn under_min_approvals_a_plan_whose_profile_applies_on_its_own_waits_for_its_approvers() {
    let r = Reviewers::new();
    r.set_policy("apply:\n  min_approvals: 1\n");
    let head = git_out(&r.repo(), &["rev-parse", "HEAD"]);
    // `full-auto` applies without a human, but nobody has approved the Apply.
    let plan = r.plan_under("full-auto");
    assert_eq!(
        git_out(&r.repo(), &["rev-parse", "HEAD"]),
        head,
        "nothing applied"
    );
    // bob, who did not make the plan, approves: that is the one approval asked for.
    let (doc, code) = r.run_as(1, &["plan", "apply", "--yes", &plan]);
    assert_eq!(code, 0, "{doc:#}");
    let log = git_out(&r.repo(), &["log", "-1", "--format=%B"]);
    assert!(log.contains("Approved-by: bob"), "{log}");
}

#[test]
fn a_reviewer_in_the_browser_and_one_on_the_command_line_marking_50_hunks_at_once_keep_all_100_marks()
 {
    let r = Reviewers::new();
    let plan = r.plan();
    let ids: Vec<String> = items(&r.ok_as(0, &["plan", "review", &plan]))
        .iter()
        .map(|i| i.id.clone())
        .collect();
    assert_eq!(ids.len(), HUNKS);
    std::thread::scope(|s| {
        // bob rejects every hunk from the command line, five per process...
        s.spawn(|| {
            for batch in ids.chunks(5) {
                let mut args = vec!["plan", "review", plan.as_str(), "--reject"];
                args.extend(batch.iter().map(String::as_str));
                let (doc, code) = r.run_as(1, &args);
                assert_eq!(code, 0, "{args:?}: {doc:#}");
            }
        });
        // ...while ann accepts every hunk on the plan's web page.
        let browser = crate::support::browser::Browser::start(1280, 800);
        browser.goto(&format!("{}/login", r.server.url));
        browser.fill("#token", &r.tokens[0]);
        browser.click("form[action='/login'] button[type=submit]");
        browser.goto(&format!("{}/plans/{plan}", r.server.url));
        for id in &ids {
            // The click posts the mark and loads the page again: wait for the new document.
            browser.js("window.stale = true; return null");
            browser.click(&format!("#hunk-{id} button.accept"));
            browser.wait_for(
                "return !window.stale && document.readyState === 'complete' ? true : null",
            );
        }
    });
    let after = items(&r.ok_as(0, &["plan", "review", &plan]));
    let stored: usize = after.iter().map(|i| i.marks.len()).sum();
    assert_eq!(stored, 2 * HUNKS, "every mark of both reviewers is kept");
    for i in &after {
        let mut marks = i.marks.clone();
        marks.sort();
        assert_eq!(
            marks,
            [
                ("ann".to_string(), "accepted".to_string(), None),
                ("bob".to_string(), "rejected".to_string(), None)
            ],
            "{}",
            i.id
        );
        assert_eq!(i.verdict, "rejected", "a rejection wins: {}", i.id);
    }
}
