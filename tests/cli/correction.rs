//! Corrections through the real binary on real git repositories: correcting a
//! decision re-runs only it and what depends on it, replays the recorded work of the other
//! later steps without any model or tool call, keeps the unaffected decisions' ids and
//! changes, and leaves the old attempt viewable; `--dry-run` changes nothing.

use std::collections::BTreeMap;

use cleveragents_engine::domain::Id;
use cleveragents_engine::domain::decision::Decision;
use cleveragents_engine::store::Store;
use serde_json::{Value, json};

use super::lifecycle::{Setup, setup_with};
use crate::support::provider_server::{ProviderServer, Turn};
use crate::support::{Env, sandbox};

/// Eight script steps writing their own files. `s6` depends on `s5` (it copies `e.txt`);
/// `s7` and `s8` come after `s5` but do not depend on it. `s5` writes a fresh nonce, so a
/// re-run is visible in the bytes.
pub const EIGHT_STEPS: &str = r#"name: local/notes
description: Eight independent-ish steps for {{ version }}
definition-of-done: eight files exist
strategy-actor: builtin/checklist-strategist
execution-actor: builtin/script-executor
arguments:
  - name: version
    type: string
    required: true
script:
  - name: s1
    run: printf 'one\n' > a.txt
  - name: s2
    depends-on: [s1]
    run: printf 'two\n' > b.txt
  - name: s3
    depends-on: [s1]
    run: printf 'three\n' > c.txt
  - name: s4
    depends-on: [s1]
    run: printf 'four\n' > d.txt
  - name: s5
    depends-on: [s1]
    run: date +%s%N > e.txt
  - name: s6
    depends-on: [s5]
    run: cat e.txt > f.txt && printf 'six\n' >> f.txt
  - name: s7
    depends-on: [s4]
    run: printf 'seven\n' > g.txt
  - name: s8
    depends-on: [s2]
    run: printf 'eight\n' >> a.txt
"#;

pub fn store(env: &Env) -> Store {
    crate::support::open_store(env)
}

fn plan_id(doc: &Value) -> String {
    doc["data"]["plan_id"]
        .as_str()
        .unwrap_or_else(|| panic!("no plan id: {doc:#}"))
        .to_string()
}

/// The current executable decisions by their key (`s1`.. or `d1`..).
pub fn by_key(st: &Store, plan: &Id) -> BTreeMap<String, Decision> {
    st.decisions(plan)
        .unwrap()
        .into_iter()
        .filter(|d| d.is_current() && d.step.is_some())
        .map(|d| (d.context_snapshot["key"].as_str().unwrap().to_string(), d))
        .collect()
}

/// Tool calls made by the last run of each step, by decision id: the difference of its end
/// and start checkpoints' tool-call sequence numbers.
pub fn tool_calls_per_step(st: &Store, plan: &Id) -> BTreeMap<Id, u64> {
    // No start checkpoint: the step began before any sandbox existed (no tool call yet).
    let seq = |m: &serde_json::Map<String, Value>| match m.get("checkpoint") {
        Some(id) => {
            let id = id.as_str().unwrap().parse().unwrap();
            st.checkpoint(&id).unwrap().unwrap().tool_call_seq
        }
        None => 0,
    };
    st.plan_steps(plan)
        .unwrap()
        .into_iter()
        .map(|s| {
            (
                s.decision_id,
                seq(&s.end_checkpoints) - seq(&s.start_checkpoints),
            )
        })
        .collect()
}

fn sandbox_bytes(env: &Env) -> BTreeMap<String, Vec<u8>> {
    sandbox::files_under(&env.data_dir.join("sandboxes"))
}

pub(crate) fn offline_plan() -> (Setup, String, Id) {
    offline_plan_in(setup_with(EIGHT_STEPS))
}

/// [`offline_plan`] in the setup `s` (of [`EIGHT_STEPS`]).
fn offline_plan_in(s: Setup) -> (Setup, String, Id) {
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
    assert_eq!(
        doc["data"]["approval"]["context"]["gate"], "apply",
        "{doc:#}"
    );
    let id = plan_id(&doc);
    let pid = id.parse().unwrap();
    (s, id, pid)
}

#[test]
fn a_dry_run_lists_the_affected_work_and_changes_nothing() {
    let (s, _id, pid) = offline_plan();
    let st = store(&s.env);
    let keys = by_key(&st, &pid);
    let s5 = keys["s5"].decision_id.to_string();
    drop(st);
    let (db_before, sb_before) = (
        crate::support::database_state(&s.env),
        sandbox_bytes(&s.env),
    );
    let (doc, code) = s.env.json(&[
        "plan",
        "correct",
        "--mode",
        "revert",
        "-g",
        "use a fixed value",
        "--dry-run",
        &s5,
    ]);
    assert_eq!(code, 0, "{doc:#}");
    let a = &doc["data"]["affected"];
    let ids = |v: &Value| -> Vec<String> {
        v.as_array()
            .unwrap()
            .iter()
            .map(|x| x.as_str().unwrap().to_string())
            .collect()
    };
    let key_of = |id: &str| {
        keys.iter()
            .find(|(_, d)| d.decision_id.to_string() == id)
            .map(|(k, _)| k.clone())
            .unwrap()
    };
    let decisions: Vec<String> = a["decisions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| key_of(d["decision_id"].as_str().unwrap()))
        .collect();
    assert_eq!(decisions, ["s5", "s6"]);
    let rerun: Vec<String> = ids(&a["steps_rerun"]).iter().map(|i| key_of(i)).collect();
    let replayed: Vec<String> = ids(&a["steps_replayed"])
        .iter()
        .map(|i| key_of(i))
        .collect();
    assert_eq!(rerun, ["s5", "s6"]);
    assert_eq!(replayed, ["s7", "s8"]);
    assert_eq!(
        a["steps_may_rerun"],
        json!([]),
        "s7 and s8 touch other files"
    );
    assert_eq!(a["files"], json!(["e.txt", "f.txt"]));
    assert_eq!(a["child_plans"], json!([]));
    assert_eq!(
        a["estimated_model_calls"], 0,
        "offline actors make no model call"
    );
    assert_eq!(
        crate::support::database_state(&s.env),
        db_before,
        "the database is byte-identical"
    );
    assert_eq!(
        sandbox_bytes(&s.env),
        sb_before,
        "the sandbox is byte-identical"
    );
    // Without --yes and without a terminal: exit 3, nothing changed either.
    let (doc, code) = s
        .env
        .json(&["plan", "correct", "--mode", "revert", "-g", "x", &s5]);
    assert_eq!(code, 3, "{doc:#}");
    assert_eq!(doc["error"]["code"], "NEEDS_APPROVAL");
    assert_eq!(crate::support::database_state(&s.env), db_before);
    assert_eq!(sandbox_bytes(&s.env), sb_before);
}

#[test]
fn correcting_step_5_of_a_script_reruns_only_it_and_its_dependant_and_replays_the_rest() {
    let (s, id, pid) = offline_plan();
    let st = store(&s.env);
    let before = by_key(&st, &pid);
    let files_before = sandbox::files(&s.env, &id);
    let calls_before = st.tool_calls(&pid).unwrap().len();
    assert_eq!(calls_before, 8, "one shell call per script step");
    drop(st);
    let s5 = before["s5"].decision_id.to_string();
    let (doc, code) = s.env.json(&[
        "plan",
        "correct",
        "--mode",
        "revert",
        "-g",
        "take the value again",
        "--yes",
        &s5,
    ]);
    assert_eq!(code, 0, "{doc:#}");
    assert_eq!(doc["data"]["stopped"]["stopped"], "gate", "{doc:#}");
    assert_eq!(doc["data"]["attempt"], 2);
    let attempt_id = doc["data"]["attempt_id"].as_str().unwrap().to_string();

    let st = store(&s.env);
    let after = by_key(&st, &pid);
    // Unaffected decisions keep their ids; s5 and s6 are replaced by correcting decisions.
    for k in ["s1", "s2", "s3", "s4", "s7", "s8"] {
        assert_eq!(
            after[k].decision_id, before[k].decision_id,
            "{k} keeps its id"
        );
    }
    for k in ["s5", "s6"] {
        let (old, new) = (&before[k], &after[k]);
        assert_ne!(old.decision_id, new.decision_id, "{k} is re-decided");
        assert!(new.is_correction);
        assert_eq!(new.corrects_decision_id, Some(before["s5"].decision_id));
        assert_eq!(
            new.correction_reason.as_deref(),
            Some("take the value again")
        );
        assert_eq!(new.attempt, 2);
        let old_now = st.decision(&old.decision_id).unwrap().unwrap();
        assert_eq!(
            old_now.superseded_by,
            Some(new.decision_id),
            "{k} superseded"
        );
    }
    // Tool calls: exactly one per re-run step, none for the replayed ones.
    assert_eq!(st.tool_calls(&pid).unwrap().len(), calls_before + 2);
    let per_step = tool_calls_per_step(&st, &pid);
    for k in ["s5", "s6"] {
        assert_eq!(per_step[&after[k].decision_id], 1, "{k} re-ran");
    }
    for k in ["s7", "s8"] {
        assert_eq!(
            per_step[&after[k].decision_id], 0,
            "{k} was replayed, not re-run"
        );
    }
    let steps = st.plan_steps(&pid).unwrap();
    let output = |k: &str| -> Value {
        let s = steps
            .iter()
            .find(|s| s.decision_id == after[k].decision_id)
            .unwrap();
        serde_json::from_str(s.output.as_deref().unwrap()).unwrap()
    };
    assert_eq!(output("s7")["replayed"]["replay"], "merged");
    assert_eq!(output("s8")["replayed"]["replay"], "merged");
    // The files: e.txt has a new value and f.txt follows it; every other file is
    // byte-identical (a.txt includes s8's replayed append).
    let files_after = sandbox::files(&s.env, &id);
    assert_ne!(files_after["e.txt"], files_before["e.txt"], "s5 re-ran");
    let mut expected_f = files_after["e.txt"].clone();
    expected_f.extend_from_slice(b"six\n");
    assert_eq!(
        files_after["f.txt"], expected_f,
        "s6 re-ran on the new e.txt"
    );
    for f in [
        "a.txt",
        "b.txt",
        "c.txt",
        "d.txt",
        "g.txt",
        "README",
        "src/lib.rs",
    ] {
        assert_eq!(files_after[f], files_before[f], "{f} unchanged");
    }
    assert_eq!(files_after["a.txt"], b"one\neight\n");
    // The correction attempt is recorded and completed.
    let attempts = st.correction_attempts(&pid).unwrap();
    assert_eq!(attempts.len(), 1);
    assert_eq!(attempts[0].attempt_id.to_string(), attempt_id);
    assert_eq!(attempts[0].status.as_str(), "completed");
    assert_eq!(attempts[0].plan_attempt, Some(2));
    drop(st);
    // The final diff has the corrected and the unaffected later work.
    let (doc, code) = s.env.json(&["plan", "diff", &id]);
    assert_eq!(code, 0, "{doc:#}");
    let mut paths: Vec<&str> = doc["data"]["resources"][0]["files"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["path"].as_str().unwrap())
        .collect();
    paths.sort();
    assert_eq!(
        paths,
        [
            "a.txt", "b.txt", "c.txt", "d.txt", "e.txt", "f.txt", "g.txt"
        ]
    );
    // The old attempt stays viewable: before and after, differing only in e.txt and f.txt.
    let (doc, code) = s
        .env
        .json(&["plan", "diff", "--correction", &attempt_id, &id]);
    assert_eq!(code, 0, "{doc:#}");
    let r = &doc["data"]["resources"][0];
    let changed: Vec<&str> = r["changes"]["files"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["path"].as_str().unwrap())
        .collect();
    assert_eq!(changed, ["e.txt", "f.txt"]);
    assert_eq!(r["before"]["stats"]["files_changed"], 7);
    let old_e = String::from_utf8(files_before["e.txt"].clone()).unwrap();
    let hunk_text = r["changes"]["files"][0]["hunks"].to_string();
    assert!(
        hunk_text.contains(old_e.trim()),
        "the old value is shown: {hunk_text}"
    );
    // The plan is back at the apply gate and applies as one commit.
    let (doc, code) = s.env.json(&["plan", "apply", "--yes", &id]);
    assert_eq!(code, 0, "{doc:#}");
    assert_eq!(std::fs::read(s.repo.join("f.txt")).unwrap(), expected_f);
    // An applied plan refuses a revert and suggests append.
    let (doc, code) = s.env.json(&[
        "plan", "correct", "--mode", "revert", "-g", "again", "--yes", &s5,
    ]);
    assert_eq!(code, 1, "{doc:#}");
    assert_eq!(doc["error"]["code"], "CONFLICT");
    let hint = doc["error"]["suggestions"].to_string();
    assert!(hint.contains("--mode append"), "{hint}");
}

/// An action without a script: the strategy and the work come from the scripted model.
pub(crate) const MODEL_ACTION: &str = "name: local/notes\ndescription: Write eight files\ndefinition-of-done: eight files exist\nstrategy-actor: builtin/checklist-strategist\nexecution-actor: builtin/script-executor\narguments:\n  - name: version\n    type: string\n    required: true\n";

pub(crate) fn decision(key: &str, file: &str, depends: &[&str]) -> String {
    json!({
        "key": key,
        "decision_type": "implementation_choice",
        "question": format!("What goes into {file}?"),
        "chosen_option": format!("write {file}"),
        "confidence_score": 0.9,
        "rationale": "one file per step",
        "depends_on": depends,
        "step": {"instructions": format!("Write {file}")},
    })
    .to_string()
}

pub(crate) fn write_turns(path: &str, content: &str) -> Vec<Turn> {
    vec![
        Turn::tools(
            "",
            &[(
                "write_file",
                &json!({"path": path, "content": content}).to_string(),
            )],
            (10, 5),
        ),
        Turn::text("done", (10, 2)),
    ]
}

pub(crate) fn scripted_config(env: &Env, server: &ProviderServer) {
    std::fs::create_dir_all(env.config_path.parent().unwrap()).unwrap();
    std::fs::write(
        &env.config_path,
        format!(
            "[providers.scripted]\nkind = \"openai\"\nbase_url = \"{}\"\napi_key_env = \"SCRIPTED_API_KEY\"\n",
            server.openai_base()
        ),
    )
    .unwrap();
}

pub(crate) fn keyed(env: &Env, args: &[&str]) -> (Value, i32) {
    let mut all = vec!["--format", "json"];
    all.extend_from_slice(args);
    let out = env
        .command(&all)
        .env("SCRIPTED_API_KEY", "sk-test")
        .output()
        .unwrap();
    let doc: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("not JSON ({e}): {}", String::from_utf8_lossy(&out.stdout)));
    (doc, out.status.code().unwrap())
}

/// Model calls per decision id (all of the plan's calls).
fn model_calls(st: &Store, plan: &Id) -> BTreeMap<String, u64> {
    st.usage_by_decision(plan)
        .unwrap()
        .into_iter()
        .map(|(d, u)| (d.unwrap_or_else(|| "(none)".into()), u.calls))
        .collect()
}

#[test]
fn with_a_scripted_model_correcting_decision_5_reruns_only_it_and_its_dependant() {
    let plan_files = [
        ("d1", "a.txt", "one\n", vec![]),
        ("d2", "b.txt", "two\n", vec!["d1"]),
        ("d3", "c.txt", "three\n", vec!["d1"]),
        ("d4", "d.txt", "four\n", vec!["d1"]),
        ("d5", "e.txt", "five\n", vec!["d1"]),
        ("d6", "f.txt", "six uses five\n", vec!["d5"]),
        ("d7", "g.txt", "seven\n", vec!["d4"]),
        ("d8", "a.txt", "one\neight\n", vec!["d2"]),
    ];
    let records: Vec<String> = plan_files
        .iter()
        .map(|(k, f, _, deps)| decision(k, f, deps))
        .collect();
    let calls: Vec<(&str, &str)> = records
        .iter()
        .map(|r| ("record_decision", r.as_str()))
        .collect();
    let mut script = vec![
        Turn::tools("", &calls, (100, 50)),
        Turn::tools(
            "",
            &[("finish_strategy", r#"{"summary":"eight files"}"#)],
            (10, 5),
        ),
    ];
    for (_, f, c, _) in &plan_files {
        script.extend(write_turns(f, c));
    }
    // The correction: the strategist re-decides d5 and d6, the executor re-runs both.
    let new5 = decision("d5", "e.txt", &["d1"]).replace("write e.txt", "write e.txt in capitals");
    let new6 = decision("d6", "f.txt", &["d5"]);
    script.push(Turn::tools(
        "",
        &[("record_decision", &new5), ("record_decision", &new6)],
        (80, 40),
    ));
    script.push(Turn::tools(
        "",
        &[("finish_strategy", r#"{"summary":"fixed"}"#)],
        (10, 5),
    ));
    script.extend(write_turns("e.txt", "FIVE\n"));
    script.extend(write_turns("f.txt", "six uses FIVE\n"));
    let server = ProviderServer::start(script);
    let s = setup_with(MODEL_ACTION);
    scripted_config(&s.env, &server);
    let (doc, code) = keyed(
        &s.env,
        &[
            "plan",
            "use",
            "--strategy-actor",
            "scripted/m",
            "--execution-actor",
            "scripted/m",
            "--automation-profile",
            "trusted",
            "local/notes",
            "app",
            "--arg",
            "version=1",
        ],
    );
    assert_eq!(code, 3, "{doc:#}");
    assert_eq!(
        doc["data"]["approval"]["context"]["gate"], "apply",
        "{doc:#}"
    );
    let id = plan_id(&doc);
    let pid: Id = id.parse().unwrap();
    assert_eq!(
        server.requests().len(),
        18,
        "2 strategist + 8 x 2 executor turns"
    );
    let st = store(&s.env);
    let before = by_key(&st, &pid);
    assert_eq!(before.len(), 8, "eight executable decisions");
    let files_before = sandbox::files(&s.env, &id);
    let calls_before = model_calls(&st, &pid);
    let tools_before = st.tool_calls(&pid).unwrap().len();
    let changes_before: BTreeMap<String, Vec<u8>> = files_before.clone();
    drop(st);

    let d5 = before["d5"].decision_id.to_string();
    let (doc, code) = keyed(
        &s.env,
        &[
            "plan",
            "correct",
            "--mode",
            "revert",
            "-g",
            "write it in capitals",
            "--yes",
            &d5,
        ],
    );
    assert_eq!(code, 0, "{doc:#}");
    assert_eq!(server.remaining(), 0, "every scripted turn was used");
    let requests = server.requests();
    assert_eq!(
        requests.len(),
        24,
        "2 strategist + 2 x 2 executor turns for the correction"
    );
    // The strategist saw the preserved decisions, the invariants and the guidance.
    let redecide = requests[18].body.to_string();
    for needle in [
        "Preserved decisions",
        "d7",
        "Keep the public API stable",
        "write it in capitals",
    ] {
        assert!(
            redecide.contains(needle),
            "re-decide prompt lacks {needle}: {redecide}"
        );
    }
    assert!(
        requests[20]
            .body
            .to_string()
            .contains("write it in capitals"),
        "the executor of the corrected step sees the guidance"
    );

    let st = store(&s.env);
    let after = by_key(&st, &pid);
    let calls_after = model_calls(&st, &pid);
    for k in ["d1", "d2", "d3", "d4", "d7", "d8"] {
        let id = before[k].decision_id;
        assert_eq!(after[k].decision_id, id, "{k} keeps its id");
        assert_eq!(
            calls_after.get(&id.to_string()),
            calls_before.get(&id.to_string()),
            "{k}: no model request after the correction"
        );
    }
    for k in ["d5", "d6"] {
        assert_ne!(after[k].decision_id, before[k].decision_id);
        assert_eq!(
            calls_after[&after[k].decision_id.to_string()],
            2,
            "{k} re-ran: 2 turns"
        );
        assert!(after[k].is_correction);
    }
    assert_eq!(after["d5"].chosen_option, "write e.txt in capitals");
    assert_eq!(st.tool_calls(&pid).unwrap().len(), tools_before + 2);
    let per_step = tool_calls_per_step(&st, &pid);
    for k in ["d7", "d8"] {
        assert_eq!(
            per_step[&after[k].decision_id], 0,
            "{k} replayed without a tool call"
        );
    }
    for k in ["d5", "d6"] {
        assert_eq!(
            per_step[&after[k].decision_id], 1,
            "{k} re-ran with one tool call"
        );
    }
    let files_after = sandbox::files(&s.env, &id);
    assert_eq!(files_after["e.txt"], b"FIVE\n");
    assert_eq!(files_after["f.txt"], b"six uses FIVE\n");
    for f in ["a.txt", "b.txt", "c.txt", "d.txt", "g.txt"] {
        assert_eq!(
            files_after[f], changes_before[f],
            "{f}: the unaffected change is identical"
        );
    }
    let attempt_id = st.correction_attempts(&pid).unwrap()[0]
        .attempt_id
        .to_string();
    drop(st);
    let (doc, code) = s.env.json(&["plan", "diff", &id]);
    assert_eq!(code, 0, "{doc:#}");
    let diff = doc["data"].to_string();
    assert!(
        diff.contains("FIVE") && diff.contains("seven") && diff.contains("eight"),
        "{diff}"
    );
    let (doc, code) = s
        .env
        .json(&["plan", "diff", "--correction", &attempt_id, &id]);
    assert_eq!(code, 0, "{doc:#}");
    let r = &doc["data"]["resources"][0];
    let before_text = r["before"].to_string();
    assert!(
        before_text.contains("five") && !before_text.contains("FIVE"),
        "the old attempt: {before_text}"
    );
    let changed: Vec<&str> = r["changes"]["files"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["path"].as_str().unwrap())
        .collect();
    assert_eq!(changed, ["e.txt", "f.txt"]);
}

fn snap(name: &str, env: &Env, args: &[&str]) {
    let out = env.run(args);
    let text = super::snapshots::output_text(&out);
    let mut settings = super::snapshots::settings(env, args);
    let ulid = regex::Regex::new(r"[0-9A-HJKMNP-TV-Z]{26}").unwrap();
    settings.set_description(
        ulid.replace_all(&format!("agents {}", args.join(" ")), "[ID]")
            .to_string(),
    );
    settings.add_filter(r"[0-9A-HJKMNP-TV-Z]{26}", "[ID]");
    // A short id is the shortest unique prefix: longer than 12 when two decisions were made
    // in the same millisecond.
    settings.add_filter(r"\b[0-9A-HJKMNP-TV-Z]{8,25}\b", "[SHORT]");
    settings.add_filter(r"cp_[0-9A-Za-z]+", "cp_[ID]");
    settings.add_filter(r"\b[0-9a-f]{40}\b", "[OID]");
    settings.bind(|| insta::assert_snapshot!(name, text));
}

#[test]
fn tree_explain_and_dry_run_as_users_see_them() {
    let s = super::lifecycle::setup();
    let (doc, code, id) = super::lifecycle::use_plan(&s, "trusted");
    assert_eq!(code, 3, "{doc:#}");
    let st = store(&s.env);
    let keys = by_key(&st, &id.parse().unwrap());
    let extend = keys["extend"].decision_id.to_string();
    drop(st);
    for format in ["plain", "json"] {
        snap(
            &format!("plan_tree_{format}"),
            &s.env,
            &["--format", format, "plan", "tree", &id],
        );
        snap(
            &format!("plan_explain_{format}"),
            &s.env,
            &["--format", format, "plan", "explain", &extend],
        );
        snap(
            &format!("plan_correct_dry_run_{format}"),
            &s.env,
            &[
                "--format",
                format,
                "plan",
                "correct",
                "--mode",
                "revert",
                "-g",
                "append two lines",
                "--dry-run",
                &extend,
            ],
        );
    }
}

/// `conflicting` is declared independent of `stamp` but appends to the file `stamp` writes.
const CONFLICTING: &str = r#"name: local/notes
description: A replay that conflicts for {{ version }}
definition-of-done: x.txt exists
strategy-actor: builtin/checklist-strategist
execution-actor: builtin/script-executor
arguments:
  - name: version
    type: string
    required: true
script:
  - name: stamp
    run: date +%s%N > x.txt
  - name: other
    depends-on: []
    run: printf 'other\n' > y.txt
  - name: conflicting
    depends-on: []
    run: printf 'tail\n' >> x.txt
"#;

fn use_trusted(s: &Setup) -> (String, Id) {
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
    assert_eq!(code, 3, "{doc:#}");
    let id = plan_id(&doc);
    let pid = id.parse().unwrap();
    (id, pid)
}

#[test]
fn a_replay_that_conflicts_with_the_corrected_work_makes_that_step_rerun() {
    let s = setup_with(CONFLICTING);
    let (id, pid) = use_trusted(&s);
    let st = store(&s.env);
    let before = by_key(&st, &pid);
    let stamp = before["stamp"].decision_id.to_string();
    drop(st);
    let (doc, code) = s.env.json(&[
        "plan",
        "correct",
        "--mode",
        "revert",
        "-g",
        "again",
        "--dry-run",
        &stamp,
    ]);
    assert_eq!(code, 0, "{doc:#}");
    let conflicting = before["conflicting"].decision_id.to_string();
    assert_eq!(
        doc["data"]["affected"]["steps_may_rerun"],
        json!([conflicting])
    );
    assert_eq!(
        doc["data"]["affected"]["steps_replayed"],
        json!([before["other"].decision_id.to_string(), conflicting])
    );
    let (doc, code) = s.env.json(&[
        "plan", "correct", "--mode", "revert", "-g", "again", "--yes", &stamp,
    ]);
    assert_eq!(code, 0, "{doc:#}");
    assert_eq!(
        doc["data"]["result"]["steps_replayed"],
        json!([before["other"].decision_id.to_string()])
    );
    assert!(
        doc["data"]["result"]["replay_conflicts"][&conflicting]["paths"]
            .to_string()
            .contains("x.txt"),
        "{doc:#}"
    );
    let st = store(&s.env);
    let per_step = tool_calls_per_step(&st, &pid);
    assert_eq!(
        per_step[&before["conflicting"].decision_id], 1,
        "re-ran after the conflict"
    );
    assert_eq!(per_step[&before["other"].decision_id], 0, "replayed");
    let x = sandbox::read(&s.env, &id, "x.txt").unwrap();
    let lines: Vec<&str> = x.lines().collect();
    assert_eq!(lines.len(), 2, "{x}");
    assert_eq!(lines[1], "tail");
}

#[test]
fn correcting_the_root_prompt_redoes_everything_and_an_invariant_can_be_removed() {
    let (s, id, pid) = offline_plan();
    let st = store(&s.env);
    let root = st.plan(&pid).unwrap().unwrap().decision_root_id.unwrap();
    let calls = st.tool_calls(&pid).unwrap().len();
    drop(st);
    let (doc, code) = s.env.json(&[
        "plan",
        "correct",
        "--mode",
        "revert",
        "-g",
        "all files in docs/",
        "--yes",
        &root.to_string(),
    ]);
    assert_eq!(code, 0, "{doc:#}");
    assert_eq!(doc["data"]["result"]["steps_replayed"], json!([]));
    assert_eq!(
        doc["data"]["result"]["steps_rerun"]
            .as_array()
            .unwrap()
            .len(),
        8
    );
    let st = store(&s.env);
    assert_eq!(
        st.tool_calls(&pid).unwrap().len(),
        calls + 8,
        "every step re-ran"
    );
    let plan = st.plan(&pid).unwrap().unwrap();
    let new_root = st
        .decision(&plan.decision_root_id.unwrap())
        .unwrap()
        .unwrap();
    assert_ne!(new_root.decision_id, root);
    assert!(
        new_root
            .chosen_option
            .ends_with("Correction: all files in docs/")
    );
    let inv = st
        .decisions(&pid)
        .unwrap()
        .into_iter()
        .find(|d| d.is_current() && d.decision_type.as_str() == "invariant_enforced")
        .unwrap();
    assert_eq!(inv.parent_decision_id, Some(new_root.decision_id));
    drop(st);
    // Correcting the invariant stops enforcing it for this plan.
    let (doc, code) = s.env.json(&[
        "plan",
        "correct",
        "--mode",
        "revert",
        "-g",
        "not for this plan",
        "--yes",
        &inv.decision_id.to_string(),
    ]);
    assert_eq!(code, 0, "{doc:#}");
    assert_eq!(doc["data"]["attempt"], 3);
    let (doc, code) = s.env.json(&["plan", "tree", &id]);
    assert_eq!(code, 0, "{doc:#}");
    assert_eq!(doc["data"]["summary"]["invariants"], 0);
    assert!(
        doc["data"]
            .to_string()
            .contains("Do not enforce the invariant"),
        "{doc:#}"
    );
    let (doc, _) = s.env.json(&["plan", "tree", "--show-superseded", &id]);
    assert!(
        doc["data"]["summary"]["superseded"].as_u64().unwrap() >= 10,
        "{doc:#}"
    );
    assert!(
        doc["data"]
            .to_string()
            .contains("Keep the public API stable")
    );
}

#[test]
fn append_keeps_history_and_adds_a_child_plan_linked_under_the_corrected_decision() {
    use crate::support::provider_server::{ProviderServer, Turn};
    let (s, id, pid) = offline_plan();
    let (doc, code) = s.env.json(&["plan", "apply", "--yes", &id]);
    assert_eq!(code, 0, "{doc:#}");
    let st = store(&s.env);
    let before = by_key(&st, &pid);
    let s5 = before["s5"].decision_id.to_string();
    drop(st);
    // The guidance is carried out by a model execution actor (the offline one cannot).
    let server = ProviderServer::start(vec![
        Turn::tools(
            "",
            &[("write_file", r#"{"path":"h.txt","content":"h\n"}"#)],
            (10, 5),
        ),
        Turn::text("Wrote h.txt.", (10, 5)),
    ]);
    std::fs::create_dir_all(s.env.config_path.parent().unwrap()).unwrap();
    std::fs::write(
        &s.env.config_path,
        format!(
            "[providers.scripted]\nkind = \"openai\"\nbase_url = \"{}\"\napi_key_env = \"SCRIPTED_API_KEY\"\n",
            server.openai_base()
        ),
    )
    .unwrap();
    let out = s
        .env
        .command(&[
            "--format",
            "json",
            "plan",
            "correct",
            "--mode",
            "append",
            "-g",
            "also write h.txt",
            "--execution-actor",
            "scripted/m",
            "--yes",
            &s5,
        ])
        .env("SCRIPTED_API_KEY", "sk-test")
        .output()
        .unwrap();
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(out.status.code(), Some(0), "{doc:#}");
    let child = doc["data"]["child_plan_id"].as_str().unwrap().to_string();
    let root = doc["data"]["new_decision_id"].as_str().unwrap().to_string();
    assert!(
        !doc["messages"].to_string().contains("errored"),
        "the child ran: {doc:#}"
    );
    assert_eq!(server.remaining(), 0, "{doc:#}");
    let st = store(&s.env);
    let cid: Id = child.parse().unwrap();
    let c = st.plan(&cid).unwrap().unwrap();
    assert_eq!(c.parent_plan_id, Some(pid));
    assert_eq!(c.root_plan_id, Some(pid));
    // History is intact: nothing of the parent is superseded.
    assert_eq!(by_key(&st, &pid).len(), 8);
    assert!(
        st.decision(&before["s5"].decision_id)
            .unwrap()
            .unwrap()
            .is_current()
    );
    // The child's Strategize kept the root its parent gave it.
    let croot = st.decision(&root.parse().unwrap()).unwrap().unwrap();
    assert!(croot.is_current() && croot.is_correction);
    assert_eq!(croot.corrects_decision_id, Some(before["s5"].decision_id));
    assert_eq!(c.decision_root_id, Some(croot.decision_id));
    // Based on the project as it is now: the applied commit.
    let head = String::from_utf8(
        std::process::Command::new("git")
            .args(["rev-parse", "HEAD"])
            .current_dir(&s.repo)
            .output()
            .unwrap()
            .stdout,
    )
    .unwrap();
    assert_eq!(
        st.plan_bases(&cid).unwrap()[0].base_commit.as_deref(),
        Some(head.trim())
    );
    drop(st);
    // The tree shows the child under s5, and s5's impact now reaches it.
    let (doc, code) = s.env.json(&["plan", "tree", &id]);
    assert_eq!(code, 0, "{doc:#}");
    let root_node = &doc["data"]["children"][0];
    let s5_node = root_node["children"]
        .as_array()
        .unwrap()
        .iter()
        .find(|n| n["id"] == s5.as_str())
        .unwrap();
    assert_eq!(s5_node["children"][0]["kind"], "plan");
    assert_eq!(s5_node["children"][0]["id"], child.as_str());
    let (doc, code) = s.env.json(&["plan", "explain", &s5]);
    assert_eq!(code, 0, "{doc:#}");
    assert_eq!(doc["data"]["impact"]["child_plans"], json!([child]));
}

#[test]
fn append_with_the_offline_executor_is_refused_by_the_dry_run_and_the_real_run_alike() {
    let (s, id, pid) = offline_plan();
    let (doc, code) = s.env.json(&["plan", "apply", "--yes", &id]);
    assert_eq!(code, 0, "{doc:#}");
    let st = store(&s.env);
    let s5 = by_key(&st, &pid)["s5"].decision_id.to_string();
    let plans_before = st.plans().unwrap().len();
    drop(st);
    for dry in [true, false] {
        let mut args = vec![
            "plan",
            "correct",
            "--mode",
            "append",
            "-g",
            "also write h.txt",
        ];
        args.push(if dry { "--dry-run" } else { "--yes" });
        args.push(&s5);
        let (doc, code) = s.env.json(&args);
        assert_ne!(code, 0, "dry run {dry}: {doc:#}");
        assert_eq!(
            doc["error"]["code"], "NOT_SUPPORTED",
            "dry run {dry}: {doc:#}"
        );
        let text = doc["error"].to_string();
        assert!(text.contains("--execution-actor"), "{text}");
        assert!(
            text.contains("actor list"),
            "a hint that runs as printed: {text}"
        );
        assert!(
            !text.contains("--mode revert"),
            "an applied plan cannot be reverted, so revert is not offered: {text}"
        );
    }
    assert_eq!(
        store(&s.env).plans().unwrap().len(),
        plans_before,
        "no child plan was created"
    );
    // An execution actor that does not resolve is refused the same way, before anything runs.
    let (doc, code) = s.env.json(&[
        "plan",
        "correct",
        "--mode",
        "append",
        "-g",
        "x",
        "--execution-actor",
        "nosuch/model",
        "--dry-run",
        &s5,
    ]);
    assert_ne!(code, 0, "{doc:#}");
    assert!(doc["error"].to_string().contains("nosuch/model"), "{doc:#}");
}

#[test]
fn correcting_before_execute_redecides_and_the_new_decision_is_what_runs() {
    let s = super::lifecycle::setup();
    let (doc, code, id) = super::lifecycle::use_plan(&s, "manual");
    assert_eq!(code, 3, "waits at the strategize gate: {doc:#}");
    let (doc, code) = s.env.json(&["plan", "execute", &id]);
    assert_eq!(code, 3, "stops at the execute gate: {doc:#}");
    let pid: Id = id.parse().unwrap();
    let st = store(&s.env);
    let before = by_key(&st, &pid);
    let extend = before["extend"].decision_id.to_string();
    drop(st);
    let (doc, code) = s.env.json(&[
        "plan",
        "correct",
        "--mode",
        "revert",
        "-g",
        "two lines",
        "--yes",
        &extend,
    ]);
    assert_eq!(code, 0, "{doc:#}");
    assert_eq!(doc["data"]["attempt"], 2);
    assert_eq!(
        (doc["data"]["phase"].as_str(), doc["data"]["state"].as_str()),
        (Some("strategize"), Some("complete"))
    );
    assert_eq!(
        doc["data"]["stopped"]["approval"]["context"]["gate"], "execute",
        "{doc:#}"
    );
    assert_eq!(doc["data"]["attempt_status"], "completed");
    let (doc, code) = s.env.json(&["plan", "execute", &id]);
    assert_eq!(code, 3, "runs Execute, stops at the apply gate: {doc:#}");
    let st = store(&s.env);
    let after = by_key(&st, &pid);
    let steps: Vec<Id> = st
        .plan_steps(&pid)
        .unwrap()
        .iter()
        .map(|s| s.decision_id)
        .collect();
    assert_eq!(
        steps,
        [
            after["write"].decision_id,
            after["extend"].decision_id,
            after["readme"].decision_id
        ]
    );
    assert_ne!(after["extend"].decision_id, before["extend"].decision_id);
    assert_eq!(after["write"].decision_id, before["write"].decision_id);
}

/// The ids a user reads in `plan tree` and in `plan status`'s Steps table: decisions made in the
/// same second share their first 8 characters, so each is printed as its shortest unique prefix
/// and every printed id names exactly that decision again (`plan explain SHORT`).
#[test]
fn tree_and_status_print_short_ids_that_can_be_typed_back() {
    let (s, id, _pid) = offline_plan();
    let out = s.env.run(&["--format", "plain", "plan", "tree", &id]);
    let text = crate::support::stdout(&out);
    let token = regex::Regex::new(r#"[)"] ([0-9A-HJKMNP-TV-Z]{8,26})$"#).unwrap();
    let shorts: Vec<String> = text
        .lines()
        .filter_map(|l| token.captures(l.trim_end()))
        .map(|c| c[1].to_string())
        .collect();
    assert_eq!(
        shorts.len(),
        10,
        "root, an invariant and eight steps: {text}"
    );
    let mut unique = shorts.clone();
    unique.sort();
    unique.dedup();
    assert_eq!(unique.len(), shorts.len(), "distinct ids: {text}");
    for short in &shorts {
        let (doc, code) = s.env.json(&["plan", "explain", short]);
        assert_eq!(code, 0, "`plan explain {short}` resolves: {doc:#}");
        assert!(
            doc["data"]["decision_id"]
                .as_str()
                .unwrap()
                .starts_with(short.as_str())
        );
    }

    let out = s.env.run(&["--format", "plain", "plan", "status", &id]);
    let text = crate::support::stdout(&out);
    let rows: Vec<&str> = text
        .lines()
        .skip_while(|l| !l.starts_with("Steps"))
        .skip(3)
        .take_while(|l| !l.trim().is_empty())
        .map(|l| l.split_whitespace().nth(2).unwrap())
        .collect();
    assert_eq!(rows.len(), 8, "{text}");
    for short in &rows {
        let (doc, code) = s.env.json(&["plan", "explain", short]);
        assert_eq!(
            code, 0,
            "`plan explain {short}` from the Steps table: {doc:#}"
        );
    }
}

/// `plan explain`'s summary names the decision by a prefix that names it alone: decisions
/// made within a second share their first eight characters.
#[test]
fn plan_explain_summary_names_the_decision_by_a_unique_prefix() {
    let (s, id, _pid) = offline_plan();
    let (tree, _) = s.env.json(&["plan", "tree", &id]);
    let text = tree.to_string();
    let ids: Vec<String> = regex::Regex::new(r#""kind":"decision","id":"([0-9A-Z]{26})""#)
        .unwrap()
        .captures_iter(&text)
        .map(|c| c[1].to_string())
        .collect();
    assert!(ids.len() >= 2, "{tree:#}");
    let summary = regex::Regex::new(r"Decision ([0-9A-Z]+):").unwrap();
    for full in &ids {
        let (doc, code) = s.env.json(&["plan", "explain", full]);
        assert_eq!(code, 0, "{doc:#}");
        let status = doc["messages"].to_string();
        let short = summary
            .captures(&status)
            .unwrap_or_else(|| panic!("{doc:#}"))[1]
            .to_string();
        let (again, code) = s.env.json(&["plan", "explain", &short]);
        assert_eq!(
            code, 0,
            "`plan explain {short}` from the summary: {again:#}"
        );
        assert_eq!(again["data"]["decision_id"], full.as_str());
    }
}

/// After correcting an `invariant_enforced` decision the plan's effective invariants (what
/// `invariant list --plan --effective` shows) no longer include it, and a later correction of
/// the root keeps it removed instead of silently dropping the record of the removal.
#[test]
fn an_invariant_removed_by_a_correction_is_not_listed_as_effective_and_stays_removed() {
    let (s, id, pid) = offline_plan();
    let current = |kind: &str| {
        let st = store(&s.env);
        st.decisions(&pid)
            .unwrap()
            .into_iter()
            .filter(|d| d.is_current() && d.decision_type.as_str() == kind)
            .collect::<Vec<_>>()
    };
    let inv = current("invariant_enforced").remove(0);
    let text = inv.chosen_option.clone();
    let (doc, code) = s
        .env
        .json(&["invariant", "list", "--plan", &id, "--effective"]);
    assert_eq!(code, 0, "{doc:#}");
    assert!(doc["data"]["effective"].to_string().contains(&text));

    let (doc, code) = s.env.json(&[
        "plan",
        "correct",
        "--mode",
        "revert",
        "-g",
        "not for this plan",
        "--yes",
        &inv.decision_id.to_string(),
    ]);
    assert_eq!(code, 0, "{doc:#}");
    let listed = |s: &Setup| {
        let (doc, code) = s
            .env
            .json(&["invariant", "list", "--plan", &id, "--effective"]);
        assert_eq!(code, 0, "{doc:#}");
        doc
    };
    let doc = listed(&s);
    assert!(
        !doc["data"]["effective"].to_string().contains(&text),
        "removed: {doc:#}"
    );
    assert_eq!(
        doc["data"]["removed_by_correction"]
            .as_array()
            .unwrap()
            .len(),
        1,
        "{doc:#}"
    );
    let out = s.env.run(&[
        "--format",
        "plain",
        "invariant",
        "list",
        "--plan",
        &id,
        "--effective",
    ]);
    assert!(
        crate::support::stdout(&out).contains("Removed By Correction: 1"),
        "{}",
        crate::support::stdout(&out)
    );

    let root = store(&s.env)
        .plan(&pid)
        .unwrap()
        .unwrap()
        .decision_root_id
        .unwrap();
    let (doc, code) = s.env.json(&[
        "plan",
        "correct",
        "--mode",
        "revert",
        "-g",
        "start over",
        "--yes",
        &root.to_string(),
    ]);
    assert_eq!(code, 0, "{doc:#}");
    assert!(current("invariant_enforced").is_empty());
    let removal = current("user_intervention");
    assert_eq!(removal.len(), 1, "the removal is carried into attempt 3");
    assert_eq!(removal[0].attempt, 3);
    let doc = listed(&s);
    assert!(
        !doc["data"]["effective"].to_string().contains(&text),
        "still removed: {doc:#}"
    );
}

/// A correction's attempt id is what `plan diff --correction` takes; after the `plan correct`
/// output is gone, `plan status` lists the plan's corrections with it, and a wrong attempt id
/// points there.
#[test]
fn plan_status_lists_corrections_so_their_diff_can_be_found_again() {
    let (s, id, pid) = offline_plan();
    let s5 = by_key(&store(&s.env), &pid)["s5"].decision_id.to_string();
    let (doc, code) = s.env.json(&[
        "plan",
        "correct",
        "--mode",
        "revert",
        "-g",
        "a new nonce",
        "--yes",
        &s5,
    ]);
    assert_eq!(code, 0, "{doc:#}");
    let attempt = doc["data"]["attempt_id"].as_str().unwrap().to_string();

    let (doc, code) = s.env.json(&["plan", "status", &id]);
    assert_eq!(code, 0, "{doc:#}");
    let listed = doc["data"]["corrections"].as_array().unwrap();
    assert_eq!(listed.len(), 1, "{doc:#}");
    assert_eq!(listed[0]["attempt_id"], attempt.as_str());
    assert_eq!(listed[0]["original_decision_id"], s5.as_str());
    assert_eq!(listed[0]["mode"], "revert");
    assert_eq!(listed[0]["attempt"], 2);
    let out = s.env.run(&["--format", "plain", "plan", "status", &id]);
    let text = crate::support::stdout(&out);
    let row = text
        .lines()
        .skip_while(|l| !l.starts_with("Corrections"))
        .nth(3)
        .unwrap_or_else(|| panic!("a Corrections table: {text}"));
    let short = row.split_whitespace().next().unwrap();
    assert!(attempt.starts_with(short), "{row}");
    let (doc, code) = s.env.json(&["plan", "diff", "--correction", short, &id]);
    assert_eq!(code, 0, "the printed id works: {doc:#}");
    for format in ["plain", "json"] {
        super::children::snapshot(
            &format!("plan_status_with_a_correction_{format}"),
            &s.env,
            &["--format", format, "plan", "status", &id],
        );
    }

    let (doc, code) = s.env.json(&["plan", "diff", "--correction", &s5, &id]);
    assert_eq!(code, 1, "{doc:#}");
    assert_eq!(doc["error"]["code"], "NOT_FOUND", "{doc:#}");
    assert!(
        doc.to_string().contains(&format!("plan status {id}")),
        "the hint names plan status: {doc:#}"
    );
}

/// `plan explain` of a superseded decision does not suggest correcting it (that is refused):
/// it points to the decision that replaced it.
#[test]
fn explaining_a_superseded_decision_suggests_its_replacement_not_a_refused_correction() {
    let (s, _id, pid) = offline_plan();
    let s5 = by_key(&store(&s.env), &pid)["s5"].decision_id.to_string();
    let (doc, code) = s.env.json(&[
        "plan", "correct", "--mode", "revert", "-g", "again", "--yes", &s5,
    ]);
    assert_eq!(code, 0, "{doc:#}");
    let new = doc["data"]["new_decision_id"].as_str().unwrap().to_string();
    let out = s.env.run(&["--format", "plain", "plan", "explain", &s5]);
    let text = crate::support::stdout(&out);
    let next: Vec<&str> = text
        .lines()
        .skip_while(|l| !l.starts_with("Next Steps"))
        .skip(1)
        .take_while(|l| !l.trim().is_empty())
        .collect();
    assert_eq!(next.len(), 1, "{text}");
    assert!(next[0].ends_with(&format!("plan explain {new}")), "{text}");
    let (doc, code) = s.env.json(&["plan", "explain", &new]);
    assert_eq!(code, 0, "{doc:#}");
}

/// A dry run of a revert that would be refused ends as refused, as the revert would: a
/// non-zero exit with the refusal's code, no OK, and what fits instead as the hints.
#[test]
fn a_dry_run_revert_that_would_be_refused_ends_refused_and_does_not_suggest_running_it() {
    let (s, id, pid) = offline_plan();
    let (doc, code) = s.env.json(&["plan", "apply", "--yes", &id]);
    assert_eq!(code, 0, "{doc:#}");
    let s5 = by_key(&store(&s.env), &pid)["s5"].decision_id.to_string();
    let out = s.env.run(&[
        "--format",
        "plain",
        "plan",
        "correct",
        "--mode",
        "revert",
        "-g",
        "again",
        "--dry-run",
        &s5,
    ]);
    let text = format!(
        "{}{}",
        crate::support::stdout(&out),
        String::from_utf8_lossy(&out.stderr)
    );
    assert_ne!(
        out.status.code(),
        Some(0),
        "a refused dry run fails: {text}"
    );
    assert!(text.contains("a revert would be refused"), "{text}");
    assert!(!text.contains("[OK]"), "{text}");
    assert!(
        !text.contains("--mode revert -g again --yes"),
        "the refused revert is not offered: {text}"
    );
    assert!(
        text.contains("--mode append --execution-actor <actor>") && text.contains("actor list"),
        "what fits instead (the offline executor cannot carry guidance): {text}"
    );
    let (doc, code) = s.env.json(&[
        "plan",
        "correct",
        "--mode",
        "revert",
        "-g",
        "again",
        "--dry-run",
        &s5,
    ]);
    assert_ne!(code, 0, "{doc:#}");
    assert_eq!(doc["status"], "error", "{doc:#}");
    assert_eq!(doc["error"]["code"], "CONFLICT", "{doc:#}");
    assert!(
        doc["data"]["refused"].is_string(),
        "the preview is the data: {doc:#}"
    );
    assert!(!doc.to_string().contains("--yes"), "{doc:#}");
}

/// The ids and kinds of a `plan tree` json node list, nested (`kind:type` for decisions).
fn json_shape(nodes: &Value) -> Vec<(String, String, String, Vec<Value>)> {
    nodes
        .as_array()
        .unwrap()
        .iter()
        .map(|n| {
            let kind = n["decision_type"]
                .as_str()
                .unwrap_or_else(|| n["kind"].as_str().unwrap())
                .to_string();
            (
                n["id"].as_str().unwrap().to_string(),
                kind,
                n["label"].as_str().unwrap().to_string(),
                n["children"].as_array().unwrap().clone(),
            )
        })
        .collect()
}

fn same_tree(json: &Value, tui: &[cleveragents_ui::model::DecisionNode], path: &str) {
    let shape = json_shape(json);
    let ids: Vec<&str> = shape.iter().map(|s| s.0.as_str()).collect();
    let tui_ids: Vec<&str> = tui.iter().map(|n| n.decision_id.as_str()).collect();
    assert_eq!(tui_ids, ids, "children of {path}");
    for ((id, kind, label, children), node) in shape.iter().zip(tui) {
        assert_eq!(&node.decision_type, kind, "{id}");
        if kind == "plan" {
            assert_eq!(node.child_plan_id.as_deref(), Some(id.as_str()));
            assert_eq!(&node.summary, label);
        } else {
            assert_eq!(&node.chosen, label, "{id}");
        }
        same_tree(&Value::Array(children.clone()), &node.children, id);
    }
}

#[test]
fn the_tuis_tree_and_explanations_are_what_plan_tree_and_plan_explain_print() {
    use cleveragents::tui::{Bridge, Connection};
    use cleveragents_engine::domain::decision::DecisionType;
    use cleveragents_engine::domain::plan::Plan;
    use cleveragents_ui::{Cmd, Msg};
    // The engine below runs in this process, which cannot see a shared checkout's tree.
    let s = setup_with(EIGHT_STEPS);
    s.env.use_full_checkouts();
    let (s, id, pid) = corrected_offline_plan_in(s);
    // Children: one spawned by a decision (linked), one no decision links.
    let mut st = store(&s.env);
    let current = by_key(&st, &pid);
    let spawner = current["s2"].clone();
    let mut family = Vec::new();
    for name in ["linked", "unlinked"] {
        let mut child = Plan::new("local/notes", name, jiff::Timestamp::now());
        child.parent_plan_id = Some(pid);
        child.root_plan_id = Some(pid);
        st.insert_plan(&child).unwrap();
        let mut root = Decision::new(
            child.plan_id,
            DecisionType::PromptDefinition,
            format!("{name} goal"),
            jiff::Timestamp::now(),
        );
        root.question = Some(format!("what does {name} do?"));
        st.insert_decision(&root).unwrap();
        let mut step = Decision::new(
            child.plan_id,
            DecisionType::ImplementationChoice,
            format!("{name} step"),
            jiff::Timestamp::now(),
        );
        step.parent_decision_id = Some(root.decision_id);
        st.insert_decision(&step).unwrap();
        if name == "linked" {
            st.add_decision_dependency(
                &spawner.decision_id,
                &root.decision_id,
                "plan",
                &child.plan_id.to_string(),
            )
            .unwrap();
        }
        family.push(child.plan_id);
    }
    drop(st);

    let (tree, code) = s.env.json(&["plan", "tree", "--show-superseded", &id]);
    assert_eq!(code, 0, "{tree:#}");
    assert_eq!(tree["data"]["summary"]["child_plans"], 2, "{tree:#}");
    assert!(tree["data"]["summary"]["superseded"].as_u64().unwrap() > 0);
    let mut engine = cleveragents_engine::api::Engine::new(
        cleveragents_engine::paths::Paths::at(s.env.data_dir.clone(), s.env.config_path.clone()),
        cleveragents_engine::api::Settings::default(),
    );
    // Where this environment's server keeps its records, when that is PostgreSQL.
    if let Some(url) = crate::support::server::known_database(&s.env) {
        engine = engine.with_database(cleveragents_engine::api::DatabaseLocation::Postgres(url));
    }
    let mut bridge = Bridge::new(Connection::in_process(engine, false), None).unwrap();
    bridge.handle(Cmd::SelectPlan(id.clone()));
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    let nodes = loop {
        let got = bridge.background().into_iter().find_map(|m| match m {
            Msg::TreeUpdated { nodes, .. } => Some(nodes),
            _ => None,
        });
        if let Some(nodes) = got {
            break nodes;
        }
        assert!(std::time::Instant::now() < deadline, "no tree");
        std::thread::sleep(std::time::Duration::from_millis(20));
    };
    same_tree(&tree["data"]["children"], &nodes, "the plan");

    // Every decision of the family: the explanation's downstream decisions and child plans
    // are `plan explain`'s.
    let st = store(&s.env);
    let mut decisions: Vec<Decision> = st.decisions(&pid).unwrap();
    for child in &family {
        decisions.extend(st.decisions(child).unwrap());
    }
    drop(st);
    assert!(decisions.iter().any(|d| d.superseded_by.is_some()));
    for d in &decisions {
        let did = d.decision_id.to_string();
        let (doc, code) = s.env.json(&["plan", "explain", &did]);
        assert_eq!(code, 0, "{doc:#}");
        let e = bridge.explanation(&did).unwrap();
        let impact: Vec<String> = e.impact.iter().map(|r| r.decision_id.clone()).collect();
        let cli: Vec<String> = doc["data"]["impact"]["decisions"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_str().unwrap().to_string())
            .collect();
        assert_eq!(impact, cli, "downstream of {did}");
        assert_eq!(
            json!(e.impact_child_plans),
            doc["data"]["impact"]["child_plans"],
            "child plans of {did}"
        );
        assert_eq!(e.chosen, doc["data"]["chosen_option"].as_str().unwrap());
        assert_eq!(
            e.superseded_by.as_deref(),
            doc["data"]["superseded_by"].as_str()
        );
    }
}

/// Every decision id `plan tree` prints after a correction is taken back by `plan explain`,
/// although superseded decisions and the new attempt's share its first characters.
#[test]
fn every_id_plan_tree_prints_after_a_correction_names_one_decision() {
    let (s, id, _) = corrected_offline_plan();
    let out = s.env.run(&["--format", "plain", "plan", "tree", &id]);
    let text = crate::support::stdout(&out);
    let ids = regex::Regex::new(r"\b01[0-9A-HJKMNP-TV-Z]{6,24}\b").unwrap();
    let printed: Vec<&str> = ids.find_iter(&text).map(|m| m.as_str()).collect();
    assert!(printed.len() > 3, "{text}");
    for short in printed.iter().filter(|p| !id.starts_with(**p)) {
        let (doc, code) = s.env.json(&["plan", "explain", short]);
        assert_eq!(
            code, 0,
            "`plan explain {short}` from the tree:\n{text}\n{doc:#}"
        );
    }
}

/// [`offline_plan`] with its step `s5` corrected (revert, guidance "again"): `s5` and what
/// depends on it superseded and decided again.
fn corrected_offline_plan() -> (Setup, String, Id) {
    corrected_offline_plan_in(setup_with(EIGHT_STEPS))
}

/// [`corrected_offline_plan`] in the setup `s` (of [`EIGHT_STEPS`]).
fn corrected_offline_plan_in(s: Setup) -> (Setup, String, Id) {
    let (s, id, pid) = offline_plan_in(s);
    let st = store(&s.env);
    let s5 = by_key(&st, &pid)["s5"].decision_id.to_string();
    drop(st);
    let (doc, code) = s.env.json(&[
        "plan", "correct", "--mode", "revert", "-g", "again", "--yes", &s5,
    ]);
    assert_eq!(code, 0, "{doc:#}");
    (s, id, pid)
}

#[test]
fn a_revert_whose_actors_cannot_act_on_guidance_warns_and_does_not_claim_a_correction() {
    let (s, _id, pid) = offline_plan();
    let s5 = by_key(&store(&s.env), &pid)["s5"].decision_id.to_string();
    let dry = s.env.run(&[
        "--format",
        "plain",
        "plan",
        "correct",
        "--mode",
        "revert",
        "-g",
        "use tabs",
        "--dry-run",
        &s5,
    ]);
    let text = crate::support::stdout(&dry);
    assert!(
        text.contains("cannot act on guidance") && text.contains("builtin/script-executor"),
        "the dry run warns: {text}"
    );
    let run = s.env.run(&[
        "--format", "plain", "plan", "correct", "--mode", "revert", "-g", "use tabs", "--yes", &s5,
    ]);
    let text = crate::support::stdout(&run);
    assert!(run.status.success(), "{text}");
    assert!(text.contains("cannot act on guidance"), "{text}");
    assert!(
        !text.contains("Corrected:") && text.contains("Re-ran without the guidance"),
        "{text}"
    );
}

/// The labels of the tree's decision nodes, depth first, as `plan tree` lists them.
fn tree_labels(nodes: &Value, out: &mut Vec<String>) {
    for n in nodes.as_array().into_iter().flatten() {
        if n["kind"] == "decision" {
            out.push(n["label"].as_str().unwrap_or_default().to_string());
        }
        tree_labels(&n["children"], out);
    }
}

/// A plan of three model-decided steps (`d1`, `d2`, `d3`, each writing one file), at the
/// apply gate, with a correction of `d2` scripted after it: the re-decide (one turn recording
/// the replacement, one finishing the strategy) and the re-run of `d2`.
fn three_model_steps_with_a_scripted_correction() -> (Setup, ProviderServer, String, Id) {
    let steps = [
        ("d1", "a.txt", "one\n"),
        ("d2", "b.txt", "two\n"),
        ("d3", "c.txt", "three\n"),
    ];
    let records: Vec<String> = steps.iter().map(|(k, f, _)| decision(k, f, &[])).collect();
    let calls: Vec<(&str, &str)> = records
        .iter()
        .map(|r| ("record_decision", r.as_str()))
        .collect();
    let mut script = vec![
        Turn::tools("", &calls, (100, 50)),
        Turn::tools(
            "",
            &[("finish_strategy", r#"{"summary":"three files"}"#)],
            (10, 5),
        ),
    ];
    for (_, f, c) in &steps {
        script.extend(write_turns(f, c));
    }
    let new2 = decision("d2", "b.txt", &[]).replace("write b.txt", "write b.txt in capitals");
    script.push(Turn::tools("", &[("record_decision", &new2)], (80, 40)));
    script.push(Turn::tools(
        "",
        &[("finish_strategy", r#"{"summary":"fixed"}"#)],
        (10, 5),
    ));
    script.extend(write_turns("b.txt", "TWO\n"));
    let server = ProviderServer::start(script);
    let s = setup_with(MODEL_ACTION);
    scripted_config(&s.env, &server);
    let (doc, code) = keyed(
        &s.env,
        &[
            "plan",
            "use",
            "--strategy-actor",
            "scripted/m",
            "--execution-actor",
            "scripted/m",
            "--automation-profile",
            "trusted",
            "local/notes",
            "app",
            "--arg",
            "version=1",
        ],
    );
    assert_eq!(code, 3, "stops at the apply gate: {doc:#}");
    let id = plan_id(&doc);
    let pid: Id = id.parse().unwrap();
    (s, server, id, pid)
}

#[test]
fn a_correction_dry_run_estimates_exactly_the_model_calls_the_correction_then_makes() {
    let (s, server, _id, pid) = three_model_steps_with_a_scripted_correction();
    let d2 = by_key(&store(&s.env), &pid)["d2"].decision_id.to_string();
    let correct = |extra: &str| {
        keyed(
            &s.env,
            &[
                "plan", "correct", "--mode", "revert", "-g", "capitals", extra, &d2,
            ],
        )
    };
    let (dry, code) = correct("--dry-run");
    assert_eq!(code, 0, "{dry:#}");
    let estimated = dry["data"]["affected"]["estimated_model_calls"]
        .as_u64()
        .unwrap_or_else(|| panic!("no estimate: {dry:#}"));
    let before = server.requests().len();
    let (doc, code) = correct("--yes");
    assert_eq!(code, 0, "{doc:#}");
    let made = (server.requests().len() - before) as u64;
    assert_eq!(server.remaining(), 0, "every scripted turn was used");
    assert_eq!(
        estimated, made,
        "the dry run's estimate is the number of requests the model server received"
    );
}

#[test]
fn a_corrected_decision_keeps_its_place_in_the_tree() {
    let (s, _server, id, pid) = three_model_steps_with_a_scripted_correction();
    let d2 = by_key(&store(&s.env), &pid)["d2"].decision_id.to_string();
    let (doc, code) = keyed(
        &s.env,
        &[
            "plan", "correct", "--mode", "revert", "-g", "capitals", "--yes", &d2,
        ],
    );
    assert_eq!(code, 0, "{doc:#}");
    let (tree, code) = s.env.json(&["plan", "tree", &id]);
    assert_eq!(code, 0, "{tree:#}");
    let mut labels = Vec::new();
    tree_labels(&tree["data"]["children"], &mut labels);
    let steps: Vec<&str> = labels
        .iter()
        .map(String::as_str)
        .filter(|l| l.starts_with("write "))
        .collect();
    assert_eq!(
        steps,
        ["write a.txt", "write b.txt in capitals", "write c.txt"],
        "the replacement stands where the decision it corrects stood: {labels:?}"
    );
    // With the superseded decisions shown, the old one stands just before its replacement.
    let (tree, _) = s.env.json(&["plan", "tree", "--show-superseded", &id]);
    let mut labels = Vec::new();
    tree_labels(&tree["data"]["children"], &mut labels);
    let steps: Vec<&str> = labels
        .iter()
        .map(String::as_str)
        .filter(|l| l.starts_with("write "))
        .collect();
    assert_eq!(
        steps,
        [
            "write a.txt",
            "write b.txt",
            "write b.txt in capitals",
            "write c.txt"
        ],
        "{labels:?}"
    );
}

/// An append whose child's model execution actor cannot run now (its provider's API key is
/// not set) is refused by the dry run as by the real run, before anything is written: the
/// child would only error with `ACTOR_UNAVAILABLE`.
#[test]
fn an_append_whose_execution_actor_is_unavailable_is_refused_by_the_dry_run_and_the_real_run() {
    let (s, _id, pid) = offline_plan();
    let s5 = by_key(&store(&s.env), &pid)["s5"].decision_id.to_string();
    let plans_before = store(&s.env).plans().unwrap().len();
    for last in ["--dry-run", "--yes"] {
        let (doc, code) = s.env.json(&[
            "plan",
            "correct",
            "--mode",
            "append",
            "-g",
            "also update the changelog",
            "--execution-actor",
            "anthropic/claude-sonnet-4-5",
            last,
            &s5,
        ]);
        assert_ne!(code, 0, "{last}: {doc:#}");
        assert_eq!(doc["status"], "error", "{last}: {doc:#}");
        assert_eq!(doc["error"]["code"], "ENVIRONMENT", "{last}: {doc:#}");
        assert!(
            doc["error"]["message"]
                .as_str()
                .unwrap()
                .contains("ANTHROPIC_API_KEY"),
            "{last}: says what to set: {doc:#}"
        );
    }
    assert_eq!(
        store(&s.env).plans().unwrap().len(),
        plans_before,
        "no child plan was created"
    );
}

/// A real append whose child plan errors fails (`PLAN_ERRORED`, non-zero exit) with the
/// child's recovery hints: the guidance was not carried out.
#[test]
fn an_append_whose_child_plan_errors_exits_non_zero() {
    let (s, _id, pid) = offline_plan();
    let server = ProviderServer::start(vec![Turn::status(400, "the model refuses")]);
    scripted_config(&s.env, &server);
    let s5 = by_key(&store(&s.env), &pid)["s5"].decision_id.to_string();
    let (doc, code) = keyed(
        &s.env,
        &[
            "plan",
            "correct",
            "--mode",
            "append",
            "-g",
            "also update the changelog",
            "--execution-actor",
            "scripted/m",
            "--yes",
            &s5,
        ],
    );
    assert_ne!(code, 0, "{doc:#}");
    assert_eq!(doc["error"]["code"], "PLAN_ERRORED", "{doc:#}");
    let child = doc["data"]["child_plan_id"].as_str().unwrap();
    assert!(
        doc["error"]["message"].as_str().unwrap().contains(child),
        "names the child plan: {doc:#}"
    );
}

/// Applying a parent whose appended correction child errored warns that the child's work is
/// not part of the apply and points to the child's status.
#[test]
fn applying_a_parent_whose_appended_correction_errored_warns_about_the_child() {
    let (s, id, pid) = offline_plan();
    let server = ProviderServer::start(vec![Turn::status(400, "the model refuses")]);
    scripted_config(&s.env, &server);
    let s5 = by_key(&store(&s.env), &pid)["s5"].decision_id.to_string();
    let (doc, _) = keyed(
        &s.env,
        &[
            "plan",
            "correct",
            "--mode",
            "append",
            "-g",
            "also update the changelog",
            "--execution-actor",
            "scripted/m",
            "--yes",
            &s5,
        ],
    );
    let child = doc["data"]["child_plan_id"].as_str().unwrap().to_string();
    let out = s
        .env
        .run(&["--format", "plain", "plan", "apply", "--yes", &id]);
    let text = crate::support::stdout(&out);
    assert_eq!(out.status.code(), Some(0), "{text}");
    assert!(
        text.contains(&format!("child plan {child}")) && text.contains("not part of this apply"),
        "warns about the errored child: {text}"
    );
    assert!(
        text.contains(&format!("plan status {child}")),
        "suggests the child's status: {text}"
    );
}
