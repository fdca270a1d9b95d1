//! Graph actors (spec sections 16 and 17) through the real binary: a three-node graph (llm ->
//! tool -> llm, with a conditional edge back) executes a plan's step against the scripted
//! model server, its tool node's call is recorded like the model's own, `actor run` walks the
//! same graph, a cycle without a step limit is refused naming it, and `actor show` draws the
//! graph in every format.

use serde_json::Value;

use super::lifecycle::{scripted_env, setup_with};
use crate::support::kill::{chat_requests, kill_when};
use crate::support::provider_server::{ProviderServer, Turn};
use crate::support::{Env, db_file, run_keyed};

/// One step whose definition of done the checklist strategist turns into a step.
const ONE_STEP: &str = "name: local/notes\ndescription: Write release notes\ndefinition-of-done: NOTES.md names the release\nstrategy-actor: builtin/checklist-strategist\nexecution-actor: builtin/script-executor\narguments:\n  - name: version\n    type: string\n    required: true\n";

/// draft (llm) -> check (tool read_file) -> review (llm) -> draft when the review says REVISE,
/// else end.
const GRAPH: &str = r#"name: local/writer-loop
type: graph
description: Drafts, reads back, reviews; revises on request
graph:
  entry: draft
  limits: { max-steps: 8 }
  nodes:
    - name: draft
      type: llm
      model: scripted/m
      skills: [file_operations]
      limits: { max-turns: 4 }
    - name: check
      type: tool
      tool: read_file
      args: { path: NOTES.md }
    - name: review
      type: llm
      model: scripted/m
      system-prompt: You review release notes. Answer LGTM or REVISE with what to change.
      prompt: "Review this file:\n{{ state.last.json.content }}\nDraft said: {{ state.nodes.draft.output }}"
  edges:
    - { source: start, target: draft }
    - { source: draft, target: check }
    - { source: check, target: review }
    - { source: review, target: draft, when: { contains: REVISE } }
    - { source: review, target: end }
"#;

fn add_graph(env: &Env, yaml: &str) -> (Value, i32) {
    let file = env.root().join("graph.yaml");
    std::fs::write(&file, yaml).unwrap();
    run_keyed(env, &["actor", "add", "--config", file.to_str().unwrap()])
}

fn script() -> Vec<Turn> {
    vec![
        // draft, first pass: writes the file, then says so.
        Turn::tools(
            "",
            &[(
                "write_file",
                r#"{"path": "NOTES.md", "content": "Release 1.2\n"}"#,
            )],
            (20, 5),
        ),
        Turn::text("Drafted NOTES.md", (21, 5)),
        // review, first pass: asks for a revision.
        Turn::text("REVISE: add the date", (30, 6)),
        // draft, second pass.
        Turn::tools(
            "",
            &[(
                "write_file",
                r#"{"path": "NOTES.md", "content": "Release 1.2 (2026-12-01)\n"}"#,
            )],
            (40, 7),
        ),
        Turn::text("Added the date", (41, 7)),
        // review, second pass: done.
        Turn::text("LGTM", (50, 8)),
    ]
}

#[test]
fn a_graph_actor_executes_a_plan_step_and_its_tool_node_call_is_recorded() {
    let server = ProviderServer::start(script());
    let s = setup_with(ONE_STEP);
    scripted_env(&s, &server, "openai");
    let (doc, code) = add_graph(&s.env, GRAPH);
    assert_eq!(code, 0, "{doc:#}");
    let (doc, code) = run_keyed(
        &s.env,
        &[
            "plan",
            "use",
            "--execution-actor",
            "local/writer-loop",
            "--automation-profile",
            "trusted",
            "local/notes",
            "app",
            "--arg",
            "version=1.2",
        ],
    );
    // Under trusted the plan runs to the apply gate.
    assert_eq!(code, 3, "{doc:#}");
    assert_eq!(doc["status"], "needs_approval", "{doc:#}");
    let id = doc["data"]["plan_id"].as_str().unwrap().to_string();
    let requests = server.requests();
    assert_eq!(requests.len(), 6, "every scripted turn was used");
    // The review node's prompt is its template over the state: the tool node's output (the
    // file read back) and the draft node's answer.
    let review = requests[2].body["messages"].to_string();
    assert!(
        review.contains("Review this file:\\nRelease 1.2\\n"),
        "{review}"
    );
    assert!(review.contains("Draft said: Drafted NOTES.md"), "{review}");
    assert!(review.contains("You review release notes"), "{review}");
    // The edge back: the second draft pass gets the review as its prompt.
    let again = requests[3].body["messages"].to_string();
    assert!(again.contains("REVISE: add the date"), "{again}");
    // The draft node is offered only its skill's tools; the review node has none of
    // file_operations' siblings either, since the run's tools are the executor's.
    let draft_tools: Vec<String> = requests[0].body["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["function"]["name"].as_str().unwrap().to_string())
        .collect();
    assert!(
        draft_tools.contains(&"write_file".to_string()),
        "{draft_tools:?}"
    );
    assert!(
        !draft_tools.contains(&"shell_execute".to_string()),
        "{draft_tools:?}"
    );

    // The tool node's calls sit in the plan's tool log with the model's own calls.
    let store = cleveragents_engine::store::Store::open(&db_file(&s.env)).unwrap();
    let calls = store.tool_calls(&id.parse().unwrap()).unwrap();
    let names: Vec<(&str, String)> = calls
        .iter()
        .map(|c| (c.tool.as_str(), c.arguments.to_string()))
        .collect();
    assert_eq!(
        names.iter().map(|(t, _)| *t).collect::<Vec<_>>(),
        ["write_file", "read_file", "write_file", "read_file"],
        "{names:?}"
    );
    assert_eq!(names[1].1, r#"{"path":"NOTES.md"}"#);
    let (diff, _) = run_keyed(&s.env, &["plan", "diff", "--stat", &id]);
    assert_eq!(
        diff["data"]["resources"][0]["files"][0]["path"], "NOTES.md",
        "{diff:#}"
    );
    // Every model call of every node is accounted to the plan.
    let db = rusqlite::Connection::open(db_file(&s.env)).unwrap();
    let accounted: i64 = db
        .query_row(
            "SELECT COUNT(*) FROM model_calls WHERE plan_id = ?1",
            [&id],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(accounted, 6);
}

#[test]
fn actor_run_walks_the_graph_and_stops_at_the_step_limit_when_the_review_never_passes() {
    let mut turns = vec![
        Turn::text("first draft", (1, 1)),
        Turn::text("REVISE: shorter", (1, 1)),
        Turn::text("second draft", (1, 1)),
        Turn::text("REVISE: shorter still", (1, 1)),
    ];
    turns.push(Turn::text("unused", (1, 1)));
    let server = ProviderServer::start(turns);
    let s = setup_with(ONE_STEP);
    scripted_env(&s, &server, "openai");
    let tight = GRAPH
        .replace("max-steps: 8", "max-steps: 5")
        .replace(
            "tool: read_file\n      args: { path: NOTES.md }",
            "tool: list_directory\n      args: { path: \".\" }",
        )
        .replace("{{ state.last.json.content }}", "{{ state.last.output }}");
    let (doc, code) = add_graph(&s.env, &tight);
    assert_eq!(code, 0, "{doc:#}");
    let (doc, code) = run_keyed(
        &s.env,
        &["actor", "run", "local/writer-loop", "Notes for 1.2"],
    );
    assert_eq!(code, 0, "{doc:#}");
    let data = &doc["data"];
    // draft, check, review, draft, check: five steps, then the limit.
    assert_eq!(data["stop"]["reason"], "step_limit", "{doc:#}");
    assert_eq!(data["turns"], 3);
    assert_eq!(server.requests().len(), 3);
    assert_eq!(
        server.requests()[0].body["messages"][0]["content"]
            .as_str()
            .unwrap_or(""),
        "Notes for 1.2",
        "the first node's prompt is the input"
    );
    let tools: Vec<&str> = data["tool_calls"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    assert_eq!(tools, ["list_directory", "list_directory"]);
    assert!(
        doc["messages"].to_string().contains("step limit"),
        "the report warns: {doc:#}"
    );
}

#[test]
fn a_cycle_without_a_step_limit_is_refused_naming_the_cycle_and_nothing_is_saved() {
    let s = setup_with(ONE_STEP);
    let server = ProviderServer::start(vec![]);
    scripted_env(&s, &server, "openai");
    let (doc, code) = add_graph(&s.env, &GRAPH.replace("  limits: { max-steps: 8 }\n", ""));
    assert_ne!(code, 0, "{doc:#}");
    let text = doc.to_string();
    assert!(text.contains("draft -> check -> review -> draft"), "{text}");
    assert!(text.contains("max-steps"), "{text}");
    assert!(text.contains("graph.yaml:"), "the file and line: {text}");
    let (list, _) = run_keyed(&s.env, &["actor", "list", "^local/"]);
    assert_eq!(list["data"]["actors"], serde_json::json!([]), "{list:#}");
    // A tool node naming an unknown tool is refused at its field.
    let (doc, code) = add_graph(
        &s.env,
        &GRAPH.replace("tool: read_file", "tool: local/missing"),
    );
    assert_ne!(code, 0);
    assert!(doc.to_string().contains("graph.nodes[1].tool"), "{doc:#}");
}

#[test]
fn actor_show_draws_the_graph_in_every_format() {
    let s = setup_with(ONE_STEP);
    let server = ProviderServer::start(vec![]);
    scripted_env(&s, &server, "openai");
    let (doc, code) = add_graph(&s.env, GRAPH);
    assert_eq!(code, 0, "{doc:#}");
    for format in ["rich", "color", "table", "plain", "json", "yaml"] {
        let args = ["--format", format, "actor", "show", "local/writer-loop"];
        let out = s.env.run(&args);
        assert_eq!(out.status.code(), Some(0));
        let text = super::snapshots::output_text(&out);
        if format == "plain" {
            for needed in [
                "draft",
                "tool read_file",
                "contains \"REVISE\"",
                "draft -> check -> review -> draft",
            ] {
                assert!(text.contains(needed), "{needed}: {text}");
            }
        }
        let mut settings = super::snapshots::settings(&s.env, &args);
        settings.add_filter(
            r"\d{4}-\d{2}-\d{2}[ T]\d{2}:\d{2}(:\d{2}(\.\d+)?Z?)?",
            "[TIME]",
        );
        settings.add_filter(r"\b[0-9A-HJKMNP-TV-Z]{26}\b", "[ULID]");
        settings.add_filter(r"\b[0-9a-f]{16}\b", "[HASH]");
        settings.add_filter(r"\b[0-9a-f]{8}\b", "[HASH]");
        settings.add_filter(r"duration_ms: \d+", "duration_ms: [MS]");
        settings.bind(|| insta::assert_snapshot!(format!("actor_show_graph_{format}"), text));
    }
}

/// survey (tool read_file, read-only) -> planner (llm): the planner records the decision.
const STRATEGIST: &str = r#"name: local/surveyor
type: graph
graph:
  nodes:
    - name: survey
      type: tool
      tool: read_file
      args: { path: src/lib.rs }
    - name: planner
      type: llm
      model: scripted/m
      prompt: "Plan: {{ description }}\nThe code: {{ state.last.json.content }}"
  edges:
    - { source: survey, target: planner }
    - { source: survey, target: end, when: { error: true } }
"#;

#[test]
fn a_graph_strategist_reads_with_a_tool_node_and_its_llm_node_records_the_decisions() {
    let decision = r#"{"key": "notes", "decision_type": "implementation_choice", "question": "Where do the notes go?", "chosen_option": "NOTES.md", "confidence_score": 0.9, "rationale": "the convention", "step": {"instructions": "write NOTES.md naming release 1.2"}}"#;
    let server = ProviderServer::start(vec![
        Turn::tools("", &[("record_decision", decision)], (10, 5)),
        Turn::tools(
            "",
            &[("finish_strategy", r#"{"summary": "one step"}"#)],
            (10, 5),
        ),
        Turn::tools(
            "",
            &[(
                "write_file",
                r#"{"path": "NOTES.md", "content": "Release 1.2\n"}"#,
            )],
            (20, 5),
        ),
        Turn::text("Wrote NOTES.md.", (20, 5)),
    ]);
    let s = setup_with(ONE_STEP);
    scripted_env(&s, &server, "openai");
    // The edge order matters: the error edge comes second, so it is never taken here.
    let (doc, code) = add_graph(&s.env, STRATEGIST);
    assert_eq!(code, 0, "{doc:#}");
    let (doc, code) = run_keyed(
        &s.env,
        &[
            "plan",
            "use",
            "--strategy-actor",
            "local/surveyor",
            "--execution-actor",
            "scripted/m",
            "--automation-profile",
            "trusted",
            "local/notes",
            "app",
            "--arg",
            "version=1.2",
        ],
    );
    assert_eq!(code, 3, "{doc:#}");
    assert_eq!(
        doc["data"]["approval"]["context"]["gate"], "apply",
        "{doc:#}"
    );
    let first = server.requests()[0].body.clone();
    let prompt = first["messages"].to_string();
    assert!(prompt.contains("Plan: Write release notes"), "{prompt}");
    assert!(prompt.contains("The code: pub fn f() {}"), "{prompt}");
    // The planner node, without a system prompt of its own, gets the strategist's role
    // prompt and tools, and only read-only ones.
    let tools = first["tools"].to_string();
    assert!(
        tools.contains("record_decision") && tools.contains("finish_strategy"),
        "{tools}"
    );
    assert!(!tools.contains("write_file"), "{tools}");
    let id = doc["data"]["plan_id"].as_str().unwrap();
    let (status, _) = run_keyed(&s.env, &["plan", "status", id]);
    // The recorded decision became the one step, which the executor carried out.
    assert_eq!(status["data"]["steps"][0]["name"], "notes", "{status:#}");
    assert_eq!(status["data"]["steps"][0]["status"], "done", "{status:#}");
    assert_eq!(status["data"]["usage"]["calls"], 4, "{status:#}");
}

/// The writer loop's model, answering by node: the draft node writes NOTES.md (dated on the
/// second pass, whose prompt is the review's REVISE) and says so; the review node asks for
/// the date once. The first request of the second draft pass stalls once (`stalled` is set).
fn writer_model(stalled: std::sync::Arc<std::sync::atomic::AtomicBool>) -> ProviderServer {
    use std::sync::atomic::Ordering;
    ProviderServer::responding(move |body| {
        let text = body["messages"].to_string();
        let results = body["messages"]
            .as_array()
            .map(|m| m.iter().filter(|m| m["role"] == "tool").count())
            .unwrap_or(0);
        if text.contains("You review release notes") {
            return if text.contains("(2026") {
                Turn::text("LGTM", (50, 8))
            } else {
                Turn::text("REVISE: add the date", (30, 6))
            };
        }
        let second = text.contains("REVISE");
        if second && results == 0 && !stalled.swap(true, Ordering::SeqCst) {
            return Turn::Stall;
        }
        match (second, results) {
            (false, 0) => Turn::tools(
                "",
                &[(
                    "write_file",
                    r#"{"path": "NOTES.md", "content": "Release 1.2\n"}"#,
                )],
                (20, 5),
            ),
            (true, 0) => Turn::tools(
                "",
                &[(
                    "write_file",
                    r#"{"path": "NOTES.md", "content": "Release 1.2 (2026-12-01)\n"}"#,
                )],
                (40, 7),
            ),
            (false, _) => Turn::text("Drafted NOTES.md", (21, 5)),
            (true, _) => Turn::text("Added the date", (41, 7)),
        }
    })
}

/// A plan of `local/notes` whose execution actor is the graph `yaml`, waiting at its
/// execute gate (`supervised`).
fn graph_plan(server: &ProviderServer, yaml: &str) -> (super::lifecycle::Setup, String) {
    let s = setup_with(ONE_STEP);
    scripted_env(&s, server, "openai");
    let (doc, code) = add_graph(&s.env, yaml);
    assert_eq!(code, 0, "{doc:#}");
    let name = yaml
        .lines()
        .next()
        .and_then(|l| l.strip_prefix("name: "))
        .unwrap();
    let (doc, code) = run_keyed(
        &s.env,
        &[
            "plan",
            "use",
            "--execution-actor",
            name,
            "--automation-profile",
            "supervised",
            "local/notes",
            "app",
            "--arg",
            "version=1.2",
        ],
    );
    assert_eq!(code, 3, "waits at the execute gate: {doc:#}");
    let id = doc["data"]["plan_id"].as_str().unwrap().to_string();
    (s, id)
}

/// The file `path` in the plan's sandbox (empty before it exists).
fn sandbox_file(s: &super::lifecycle::Setup, plan: &str, path: &str) -> String {
    crate::support::sandbox::read_of(&s.env, plan, None, path)
        .ok()
        .flatten()
        .unwrap_or_default()
}

#[test]
fn a_graph_actors_step_killed_in_a_model_node_resumes_at_that_node_and_call() {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};
    if crate::support::through_server::in_process_only(
        "it kills the process that drives the plan; through a server that is the server",
    ) {
        return;
    }
    // Uninterrupted, for comparison: six model calls.
    let server = writer_model(Arc::new(AtomicBool::new(true)));
    let (s, id) = graph_plan(&server, GRAPH);
    let (doc, code) = run_keyed(&s.env, &["plan", "execute", &id]);
    assert_eq!(code, 3, "waits at the apply gate: {doc:#}");
    let uninterrupted = chat_requests(&server);
    assert_eq!(uninterrupted, 6);
    let notes = sandbox_file(&s, &id, "NOTES.md");
    assert_eq!(notes, "Release 1.2 (2026-12-01)\n");

    // Killed while the second draft pass's first call is in flight: the draft (two calls),
    // check and review nodes are done.
    let stalled = Arc::new(AtomicBool::new(false));
    let server = writer_model(Arc::clone(&stalled));
    let (s, id) = graph_plan(&server, GRAPH);
    kill_when(&s.env, &["plan", "execute", &id], &|| {
        stalled.load(Ordering::SeqCst)
    });
    assert_eq!(chat_requests(&server), 4);
    let (doc, code) = run_keyed(&s.env, &["plan", "execute", &id]);
    assert_eq!(code, 3, "the resumed step reaches the apply gate: {doc:#}");
    assert!(
        chat_requests(&server) <= uninterrupted + 1,
        "{} model calls, {uninterrupted} uninterrupted: finished nodes were run again",
        chat_requests(&server)
    );
    assert_eq!(
        chat_requests(&server),
        4 + 3,
        "the call in flight, then the rest"
    );
    assert_eq!(sandbox_file(&s, &id, "NOTES.md"), notes);
    let (status, _) = run_keyed(&s.env, &["plan", "status", &id]);
    assert_eq!(
        status["data"]["usage"]["calls"], 7,
        "six answered and the one in flight, each once: {status:#}"
    );
    assert_eq!(
        status["data"]["usage"]["interrupted_calls"], 1,
        "{status:#}"
    );
    assert_eq!(
        status["data"]["resumed"]["text"], "resumed at call 4 of step 1",
        "{status:#}"
    );
}

/// draft (llm) -> stamp (tool: appends a line to calls.log, then waits for `GATE` when it
/// exists as a path) -> review (llm).
const STAMPED: &str = r#"name: local/stamped
type: graph
graph:
  entry: draft
  nodes:
    - name: draft
      type: llm
      model: scripted/m
    - name: stamp
      type: tool
      tool: shell_execute
      args: { command: "printf 'stamped\\n' >> calls.log; while [ -e GATE ] && [ ! -e GATE/go ]; do sleep 0.05; done" }
    - name: review
      type: llm
      model: scripted/m
      system-prompt: You review release notes. Answer LGTM or REVISE.
  edges:
    - { source: draft, target: stamp }
    - { source: stamp, target: review }
    - { source: review, target: end }
"#;

/// The stamped graph's model: the draft node writes NOTES.md and answers, the review node
/// answers LGTM (its first call stalls once when `stall_review`; `stalled` is set then).
fn stamped_model(
    stall_review: bool,
    stalled: std::sync::Arc<std::sync::atomic::AtomicBool>,
) -> ProviderServer {
    use std::sync::atomic::Ordering;
    ProviderServer::responding(move |body| {
        let text = body["messages"].to_string();
        if text.contains("You review release notes") {
            if stall_review && !stalled.swap(true, Ordering::SeqCst) {
                return Turn::Stall;
            }
            return Turn::text("LGTM", (50, 8));
        }
        if text.contains("\"tool\"") {
            Turn::text("Drafted NOTES.md", (21, 5))
        } else {
            Turn::tools(
                "",
                &[(
                    "write_file",
                    r#"{"path": "NOTES.md", "content": "Release 1.2\n"}"#,
                )],
                (20, 5),
            )
        }
    })
}

#[test]
fn a_graph_actors_finished_tool_node_is_not_run_again_and_one_in_flight_is_re_issued_once() {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};
    if crate::support::through_server::in_process_only(
        "it kills the process that drives the plan; through a server that is the server",
    ) {
        return;
    }
    // Killed while the review node's call is in flight, after the tool node stamped.
    let stalled = Arc::new(AtomicBool::new(false));
    let server = stamped_model(true, Arc::clone(&stalled));
    let (s, id) = graph_plan(&server, STAMPED);
    kill_when(&s.env, &["plan", "execute", &id], &|| {
        stalled.load(Ordering::SeqCst)
    });
    assert_eq!(
        chat_requests(&server),
        3,
        "draft (two calls) and the review in flight"
    );
    assert_eq!(sandbox_file(&s, &id, "calls.log"), "stamped\n");
    let (doc, code) = run_keyed(&s.env, &["plan", "execute", &id]);
    assert_eq!(code, 3, "the resumed step reaches the apply gate: {doc:#}");
    assert_eq!(
        chat_requests(&server),
        3 + 1,
        "only the review's call again"
    );
    assert_eq!(
        sandbox_file(&s, &id, "calls.log"),
        "stamped\n",
        "the finished tool node did not run again"
    );
    assert_eq!(sandbox_file(&s, &id, "NOTES.md"), "Release 1.2\n");

    // Killed while the tool node itself runs: its line appended, it waits at the gate.
    let gate = tempfile::tempdir().unwrap();
    std::fs::create_dir(gate.path().join("gate")).unwrap();
    let gated = STAMPED.replace("GATE", &gate.path().join("gate").display().to_string());
    let server = stamped_model(false, Arc::new(AtomicBool::new(false)));
    let (s, id) = graph_plan(&server, &gated);
    kill_when(&s.env, &["plan", "execute", &id], &|| {
        sandbox_file(&s, &id, "calls.log") == "stamped\n"
    });
    assert_eq!(chat_requests(&server), 2, "the draft's two calls");
    std::fs::write(gate.path().join("gate").join("go"), b"").unwrap();
    let (doc, code) = run_keyed(&s.env, &["plan", "execute", &id]);
    assert_eq!(code, 3, "{doc:#}");
    assert_eq!(chat_requests(&server), 3, "no model call made again");
    assert_eq!(
        sandbox_file(&s, &id, "calls.log"),
        "stamped\n",
        "the partial effect of the tool node in flight was undone before it ran again"
    );
    assert_eq!(
        sandbox_file(&s, &id, "NOTES.md"),
        "Release 1.2\n",
        "restored to the checkpoint after the draft node, whose work stays"
    );
}
