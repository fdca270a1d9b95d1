//! Every kind's payload writes the bytes the event log has always stored (the expected `data`
//! is each emitter's former `json!` object, in its key order), reads back as the same typed
//! event, and rows of an older shape still read.

use jiff::Timestamp;
use serde_json::{Value, json};

use super::state::{ChildSpawnAnswered, Correction, DecisionRecorded, Rollback, Transition};
use super::*;
use crate::domain::approval::{ApprovalKind, ApprovalStatus};
use crate::domain::budget::PlanBudget;
use crate::domain::lifecycle::{Phase, ProcessingState};
use crate::domain::next::Next;

const ID: &str = "01JD0000000000000000000000";

fn event(kind: EventKind) -> EngineEvent {
    EngineEvent {
        seq: 7,
        ts: Timestamp::UNIX_EPOCH,
        plan_id: Some(ID.parse().unwrap()),
        kind,
        caused_by: None,
    }
}

/// The stored row of `type` with `data` (the JSON text of the former `json!` object).
fn row(event_type: &str, data: &str) -> String {
    format!(
        r#"{{"seq":7,"ts":"1970-01-01T00:00:00Z","plan_id":"{ID}","type":"{event_type}","data":{data}}}"#
    )
}

fn transition(phase: Phase, state: ProcessingState) -> Transition {
    Transition::at(phase, state)
}

type Case = (EventKind, &'static str, String);

fn sc(s: StateChanged) -> EventKind {
    EventKind::StateChanged(s)
}

fn t(t: Transition) -> EventKind {
    sc(StateChanged::Transition(t))
}

fn step(s: ExecuteStep) -> EventKind {
    EventKind::ExecuteStep(s)
}

/// Each kind (and each shape of one), with the `data` its emitter wrote, in kind order.
fn cases() -> Vec<Case> {
    [
        plan_and_strategize(),
        execute(),
        apply_approvals_and_plan(),
        state_changed_shapes(),
        state_changed_transitions(),
        children_and_invariants(),
        exports_reviews_sandboxes_and_registries(),
    ]
    .concat()
}

fn plan_and_strategize() -> Vec<Case> {
    vec![
        (
            EventKind::PlanCreated(PlanCreated {
                action: "local/fix".into(),
                projects: vec!["app".into()],
                automation_profile: None,
                bases: json!([{"resource_name": "app", "kind": "git_checkout"}]),
                parent_plan_id: None,
            }),
            "plan_created",
            r#"{"action":"local/fix","projects":["app"],"automation_profile":null,"bases":[{"resource_name":"app","kind":"git_checkout"}],"parent_plan_id":null}"#.into(),
        ),
        (
            EventKind::StrategizeStarted(StrategizeStarted {
                attempt: 1,
                actor: "builtin/checklist".into(),
            }),
            "strategize_started",
            r#"{"attempt":1,"actor":"builtin/checklist"}"#.into(),
        ),
        (
            EventKind::StrategizeDecisions(StrategizeDecisions {
                count: 2,
                decision_root_id: ID.into(),
                decisions: vec![DecisionSummary {
                    decision_id: ID.into(),
                    decision_type: "action_selection".into(),
                    chosen_option: "fix it".into(),
                    executable: true,
                }],
            }),
            "strategize_decisions",
            format!(
                r#"{{"count":2,"decision_root_id":"{ID}","decisions":[{{"decision_id":"{ID}","decision_type":"action_selection","chosen_option":"fix it","executable":true}}]}}"#
            ),
        ),
        (
            EventKind::StrategizeComplete(StrategizeComplete {
                decisions: 3,
                decision_root_id: Some(ID.into()),
            }),
            "strategize_complete",
            format!(r#"{{"decisions":3,"decision_root_id":"{ID}"}}"#),
        ),
        (
            EventKind::EstimateRecorded(EstimateRecorded {
                estimate: json!({"cost_usd": 0.25, "warning": null}),
            }),
            "estimate_recorded",
            r#"{"estimate":{"cost_usd":0.25,"warning":null}}"#.into(),
        ),
        (
            EventKind::ExecuteStarted(ExecuteStarted {
                attempt: 1,
                actor: "builtin/script-executor".into(),
                steps: 2,
                resumed: Value::Null,
                sandbox: "required by the profile".into(),
            }),
            "execute_started",
            r#"{"attempt":1,"actor":"builtin/script-executor","steps":2,"resumed":null,"sandbox":"required by the profile"}"#.into(),
        ),
    ]
}

fn execute() -> Vec<Case> {
    vec![
        (
            step(ExecuteStep {
                position: Some(1),
                decision_id: Some(ID.into()),
                run: Some(1),
                checkpoint: Some(None),
                resumed_after: Some(None),
                ..ExecuteStep::new("step 1", "started")
            }),
            "execute_step",
            format!(
                r#"{{"step":"step 1","position":1,"decision_id":"{ID}","status":"started","run":1,"checkpoint":null,"resumed_after":null}}"#
            ),
        ),
        (
            step(ExecuteStep {
                position: Some(1),
                decision_id: Some(ID.into()),
                checkpoint: Some(Some("cp_1".into())),
                output: Some(json!({"stdout": "ok"})),
                ..ExecuteStep::new("step 1", "done")
            }),
            "execute_step",
            format!(
                r#"{{"step":"step 1","position":1,"decision_id":"{ID}","status":"done","checkpoint":"cp_1","output":{{"stdout":"ok"}}}}"#
            ),
        ),
        (
            step(ExecuteStep {
                position: Some(1),
                decision_id: Some(ID.into()),
                output: Some(Value::Null),
                error: Some("boom".into()),
                ..ExecuteStep::new("step 1", "failed")
            }),
            "execute_step",
            format!(
                r#"{{"step":"step 1","position":1,"decision_id":"{ID}","status":"failed","error":"boom","output":null}}"#
            ),
        ),
        (
            step(ExecuteStep {
                position: Some(2),
                decision_id: Some(ID.into()),
                error: Some("boom".into()),
                rolled_back: Some(json!({"to": "cp_1"})),
                why: Some("auto_checkpoint_restore".into()),
                ..ExecuteStep::new("step 2", "retrying")
            }),
            "execute_step",
            format!(
                r#"{{"step":"step 2","position":2,"decision_id":"{ID}","status":"retrying","error":"boom","rolled_back":{{"to":"cp_1"}},"why":"auto_checkpoint_restore"}}"#
            ),
        ),
        (
            step(ExecuteStep {
                position: Some(2),
                decision_id: Some(ID.into()),
                replay: Some(json!({"conflict": ["a.rs"]})),
                why: Some("the step re-runs".into()),
                ..ExecuteStep::new("step 2", "replay_conflict")
            }),
            "execute_step",
            format!(
                r#"{{"step":"step 2","position":2,"decision_id":"{ID}","status":"replay_conflict","replay":{{"conflict":["a.rs"]}},"why":"the step re-runs"}}"#
            ),
        ),
        (
            step(ExecuteStep {
                validations: Some(json!([])),
                ..ExecuteStep::new("validations", "done")
            }),
            "execute_step",
            r#"{"step":"validations","status":"done","validations":[]}"#.into(),
        ),
        (
            step(ExecuteStep {
                decision_id: Some(ID.into()),
                checkpoint: Some(None),
                why: Some("auto_validation_fix".into()),
                ..ExecuteStep::new("validation fix: make", "started")
            }),
            "execute_step",
            format!(
                r#"{{"step":"validation fix: make","decision_id":"{ID}","status":"started","checkpoint":null,"why":"auto_validation_fix"}}"#
            ),
        ),
        (
            step(ExecuteStep {
                position: Some(3),
                decision_id: Some(ID.into()),
                approvals: Some(vec!["apr_1".into()]),
                ..ExecuteStep::new("step 3", "awaiting_approval")
            }),
            "execute_step",
            format!(
                r#"{{"step":"step 3","position":3,"decision_id":"{ID}","status":"awaiting_approval","approvals":["apr_1"]}}"#
            ),
        ),
        (
            EventKind::ExecuteComplete(ExecuteComplete {
                steps: 2,
                tool_calls: 5,
                sandboxes: vec!["app".into()],
                checkpoint: None,
            }),
            "execute_complete",
            r#"{"steps":2,"tool_calls":5,"sandboxes":["app"],"checkpoint":null}"#.into(),
        ),
    ]
}

fn apply_approvals_and_plan() -> Vec<Case> {
    vec![
        (
            EventKind::ApplyStarted(ApplyStarted {
                attempt: 1,
                no_commit: false,
            }),
            "apply_started",
            r#"{"attempt":1,"no_commit":false}"#.into(),
        ),
        (
            EventKind::ApplyComplete(ApplyComplete {
                resources: json!([{"resource": "app"}]),
                files: 1,
                additions: 2,
                deletions: 0,
                validations: json!([]),
                duration_ms: 12,
                cost_usd: None,
                tokens: 0,
                committed: true,
                git_hooks: "not run".into(),
                trees: [("app".to_string(), json!("abc"))].into_iter().collect(),
                left_out: json!([]),
                remainder: None,
            }),
            "apply_complete",
            r#"{"resources":[{"resource":"app"}],"files":1,"additions":2,"deletions":0,"validations":[],"duration_ms":12,"cost_usd":null,"tokens":0,"committed":true,"git_hooks":"not run","trees":{"app":"abc"},"left_out":[],"remainder":null}"#.into(),
        ),
        (
            EventKind::ApprovalRequested(ApprovalRequested {
                approval_id: "apr_1".into(),
                kind: ApprovalKind::Errored,
                summary: "execute errored: boom".into(),
                options: vec!["retry".into(), "cancel".into()],
                answer_command: AnswerStep::Step(Next::ExecutePlan {
                    plan: "01J00000000000000000000000".parse().unwrap(),
                }),
            }),
            "approval_requested",
            r#"{"approval_id":"apr_1","kind":"errored","summary":"execute errored: boom","options":["retry","cancel"],"answer_command":{"command":"execute_plan","plan":"01J00000000000000000000000"}}"#.into(),
        ),
        (
            EventKind::ApprovalResolved(ApprovalResolved {
                approval_id: "apr_1".into(),
                status: ApprovalStatus::Answered,
                answer: json!({"option": 2}),
            }),
            "approval_resolved",
            r#"{"approval_id":"apr_1","status":"answered","answer":{"option":2}}"#.into(),
        ),
        (
            EventKind::PlanErrored(PlanErrored {
                phase: Phase::Execute,
                state: ProcessingState::Errored,
                code: "STEP_FAILED".into(),
                message: "boom".into(),
                details: json!({"step": 1}),
                approval_id: "apr_1".into(),
            }),
            "plan_errored",
            r#"{"phase":"execute","state":"errored","code":"STEP_FAILED","message":"boom","details":{"step":1},"approval_id":"apr_1"}"#.into(),
        ),
        (
            EventKind::PlanCancelled(PlanCancelled {
                phase: Phase::Strategize,
                reason: "cancelled by the user".into(),
                project_deleted: None,
            }),
            "plan_cancelled",
            r#"{"phase":"strategize","reason":"cancelled by the user"}"#.into(),
        ),
        (
            EventKind::PlanCancelled(PlanCancelled {
                phase: Phase::Execute,
                reason: "project app was deleted with --force".into(),
                project_deleted: Some("app".into()),
            }),
            "plan_cancelled",
            r#"{"phase":"execute","reason":"project app was deleted with --force","project_deleted":"app"}"#.into(),
        ),
        (
            EventKind::PlanInterrupted(PlanInterrupted {
                phase: Phase::Execute,
                state: ProcessingState::Queued,
                reason: "interrupted".into(),
                previous_owner: Some(Some(LeaseOwner {
                    pid: 42,
                    host: "h".into(),
                    kind: "execute".into(),
                })),
                by: None,
                handover: false,
            }),
            "plan_interrupted",
            r#"{"phase":"execute","state":"queued","reason":"interrupted","previous_owner":{"pid":42,"host":"h","kind":"execute"}}"#.into(),
        ),
        (
            EventKind::PlanInterrupted(PlanInterrupted {
                phase: Phase::Execute,
                state: ProcessingState::Queued,
                reason: "interrupted".into(),
                previous_owner: Some(None),
                by: None,
                handover: false,
            }),
            "plan_interrupted",
            r#"{"phase":"execute","state":"queued","reason":"interrupted","previous_owner":null}"#.into(),
        ),
        (
            EventKind::PlanInterrupted(PlanInterrupted {
                phase: Phase::Strategize,
                state: ProcessingState::Queued,
                reason: "interrupted".into(),
                previous_owner: None,
                by: Some("user (Ctrl-C)".into()),
                handover: false,
            }),
            "plan_interrupted",
            r#"{"phase":"strategize","state":"queued","reason":"interrupted","by":"user (Ctrl-C)"}"#.into(),
        ),
    ]
}

fn state_changed_shapes() -> Vec<Case> {
    vec![
        (
            sc(StateChanged::Correction(Correction {
                reason: "correction".into(),
                mode: "revert".into(),
                attempt_id: ID.into(),
                attempt: Some(2),
                child_plan_id: None,
                corrects: ID.into(),
                new_decision_id: Some(ID.into()),
                superseded: Some(1),
                new_decisions: Some(2),
                steps_rerun: Some(vec![ID.into()]),
                steps_replayed: Some(vec![]),
                phase: Some(Phase::Execute),
                state: Some(ProcessingState::Queued),
            })),
            "state_changed",
            format!(
                r#"{{"reason":"correction","mode":"revert","attempt_id":"{ID}","attempt":2,"corrects":"{ID}","new_decision_id":"{ID}","superseded":1,"new_decisions":2,"steps_rerun":["{ID}"],"steps_replayed":[],"phase":"execute","state":"queued"}}"#
            ),
        ),
        (
            sc(StateChanged::Correction(Correction {
                reason: "correction".into(),
                mode: "append".into(),
                attempt_id: ID.into(),
                attempt: None,
                child_plan_id: Some(ID.into()),
                corrects: ID.into(),
                new_decision_id: None,
                superseded: None,
                new_decisions: None,
                steps_rerun: None,
                steps_replayed: None,
                phase: None,
                state: None,
            })),
            "state_changed",
            format!(
                r#"{{"reason":"correction","mode":"append","attempt_id":"{ID}","child_plan_id":"{ID}","corrects":"{ID}"}}"#
            ),
        ),
        (
            sc(StateChanged::Rollback(Rollback {
                reason: "rollback".into(),
                checkpoint_id: "cp_1".into(),
                phase: Phase::Execute,
                state: ProcessingState::Queued,
                steps_to_run_again: 2,
                withdrawn_approvals: vec!["apr_1".into()],
            })),
            "state_changed",
            r#"{"reason":"rollback","checkpoint_id":"cp_1","phase":"execute","state":"queued","steps_to_run_again":2,"withdrawn_approvals":["apr_1"]}"#.into(),
        ),
        (
            sc(StateChanged::ChildSpawnAnswered(ChildSpawnAnswered {
                phase: Phase::Execute,
                state: ProcessingState::Queued,
                approval_id: "apr_1".into(),
                child_spawn: "skip".into(),
                reason: Some("not now".into()),
            })),
            "state_changed",
            r#"{"phase":"execute","state":"queued","approval_id":"apr_1","child_spawn":"skip","reason":"not now"}"#.into(),
        ),
        (
            sc(StateChanged::DecisionRecorded(DecisionRecorded {
                decision_id: ID.into(),
                decision_type: "subplan_spawn".into(),
                by: "create_subplan".into(),
            })),
            "state_changed",
            format!(
                r#"{{"decision_id":"{ID}","decision_type":"subplan_spawn","by":"create_subplan"}}"#
            ),
        ),
        (
            t(Transition {
                approval_id: Some("apr_1".into()),
                invariant_violation: Some("accepted".into()),
                invariant_id: Some(json!("inv_1")),
                ..transition(Phase::Execute, ProcessingState::Queued)
            }),
            "state_changed",
            r#"{"phase":"execute","state":"queued","approval_id":"apr_1","invariant_violation":"accepted","invariant_id":"inv_1"}"#.into(),
        ),
        (
            t(Transition {
                approval_id: Some("apr_1".into()),
                tool_approval: Some(json!("approve")),
                tool: Some("shell".into()),
                ..transition(Phase::Execute, ProcessingState::Processing)
            }),
            "state_changed",
            r#"{"phase":"execute","state":"processing","approval_id":"apr_1","tool_approval":"approve","tool":"shell"}"#.into(),
        ),
    ]
}

fn state_changed_transitions() -> Vec<Case> {
    vec![
        (
            t(Transition {
                guidance: Some("use tabs".into()),
                ..transition(Phase::Strategize, ProcessingState::Errored)
            }),
            "state_changed",
            r#"{"phase":"strategize","state":"errored","guidance":"use tabs"}"#.into(),
        ),
        (
            t(Transition {
                reason: Some("gate_rejected".into()),
                approval_id: Some("apr_1".into()),
                ..transition(Phase::Execute, ProcessingState::Complete)
            }),
            "state_changed",
            r#"{"phase":"execute","state":"complete","reason":"gate_rejected","approval_id":"apr_1"}"#.into(),
        ),
        (
            t(Transition {
                decision_id: Some(ID.into()),
                chosen_option: Some("b".into()),
                ..transition(Phase::Strategize, ProcessingState::Queued)
            }),
            "state_changed",
            format!(
                r#"{{"phase":"strategize","state":"queued","decision_id":"{ID}","chosen_option":"b"}}"#
            ),
        ),
        (
            t(Transition {
                reason: Some("redecide".into()),
                guidance: Some("use tabs".into()),
                ..transition(Phase::Strategize, ProcessingState::Queued)
            }),
            "state_changed",
            r#"{"phase":"strategize","state":"queued","reason":"redecide","guidance":"use tabs"}"#.into(),
        ),
        (
            t(Transition {
                approval_id: Some("apr_1".into()),
                budget: Some(PlanBudget {
                    max_cost_usd: Some(2.5),
                    max_tokens: None,
                }),
                ..transition(Phase::Execute, ProcessingState::Errored)
            }),
            "state_changed",
            r#"{"phase":"execute","state":"errored","approval_id":"apr_1","budget":{"max_cost_usd":2.5,"max_tokens":null}}"#.into(),
        ),
        (
            t(Transition {
                reason: Some("awaiting_decision".into()),
                step: Some("step 1".into()),
                approvals: Some(vec!["apr_1".into()]),
                ..transition(Phase::Execute, ProcessingState::Queued)
            }),
            "state_changed",
            r#"{"phase":"execute","state":"queued","reason":"awaiting_decision","step":"step 1","approvals":["apr_1"]}"#.into(),
        ),
        (
            t(Transition {
                reason: Some("strategy_revision_limit".into()),
                revisions: Some(2),
                limit: Some(2),
                decision_id: Some(ID.into()),
                ..transition(Phase::Execute, ProcessingState::Errored)
            }),
            "state_changed",
            format!(
                r#"{{"phase":"execute","state":"errored","reason":"strategy_revision_limit","revisions":2,"limit":2,"decision_id":"{ID}"}}"#
            ),
        ),
        (
            t(Transition {
                reason: Some("strategy_revision".into()),
                revision: Some(1),
                limit: Some(2),
                decision_id: Some(ID.into()),
                error_code: Some("STEP_FAILED".into()),
                error: Some("boom".into()),
                ..transition(Phase::Execute, ProcessingState::Errored)
            }),
            "state_changed",
            format!(
                r#"{{"phase":"execute","state":"errored","reason":"strategy_revision","revision":1,"limit":2,"decision_id":"{ID}","error_code":"STEP_FAILED","error":"boom"}}"#
            ),
        ),
    ]
}

fn children_and_invariants() -> Vec<Case> {
    vec![
        (
            EventKind::ChildSpawned(ChildSpawned {
                child_plan_id: ID.into(),
                action: "local/sub".into(),
                spawn_decision_id: ID.into(),
                parallel_group: None,
                position: Some(1),
                branched_from: Some(None),
                ..ChildSpawned::default()
            }),
            "child_spawned",
            format!(
                r#"{{"child_plan_id":"{ID}","action":"local/sub","spawn_decision_id":"{ID}","parallel_group":null,"position":1,"branched_from":null}}"#
            ),
        ),
        (
            EventKind::ChildSpawned(ChildSpawned {
                child_plan_id: ID.into(),
                action: "local/sub".into(),
                spawn_decision_id: ID.into(),
                parallel_group: Some("g".into()),
                reused: Some(true),
                why: Some("it completed earlier".into()),
                ..ChildSpawned::default()
            }),
            "child_spawned",
            format!(
                r#"{{"child_plan_id":"{ID}","action":"local/sub","spawn_decision_id":"{ID}","parallel_group":"g","reused":true,"why":"it completed earlier"}}"#
            ),
        ),
        (
            EventKind::ChildStarted(ChildStarted {
                child_plan_id: ID.into(),
                action: "local/sub".into(),
            }),
            "child_started",
            format!(r#"{{"child_plan_id":"{ID}","action":"local/sub"}}"#),
        ),
        (
            EventKind::ChildFinished(ChildFinished {
                child_plan_id: ID.into(),
                action: "local/sub".into(),
                status: "failed".into(),
                detail: json!({"code": "X", "message": "m"}),
            }),
            "child_finished",
            format!(
                r#"{{"child_plan_id":"{ID}","action":"local/sub","status":"failed","detail":{{"code":"X","message":"m"}}}}"#
            ),
        ),
        (
            EventKind::ChildMerged(ChildMerged {
                child_plan_id: ID.into(),
                outcome: "conflict".into(),
                resource: Some("app".into()),
                paths: Some(vec!["a.rs".into()]),
                resources: None,
            }),
            "child_merged",
            format!(
                r#"{{"child_plan_id":"{ID}","outcome":"conflict","resource":"app","paths":["a.rs"]}}"#
            ),
        ),
        (
            EventKind::ChildMerged(ChildMerged {
                child_plan_id: ID.into(),
                outcome: "merged".into(),
                resource: None,
                paths: None,
                resources: Some([("app".to_string(), json!("fast_forward"))].into_iter().collect()),
            }),
            "child_merged",
            format!(
                r#"{{"child_plan_id":"{ID}","outcome":"merged","resources":{{"app":"fast_forward"}}}}"#
            ),
        ),
        (
            EventKind::InvariantChecked(InvariantChecked {
                at: "step".into(),
                step: "step 1".into(),
                decision_id: Some(ID.into()),
                checked: vec![CheckedInvariant {
                    invariant_id: "inv_1".into(),
                    text: "paths unchanged: docs/**".into(),
                    check: "paths".into(),
                    held: true,
                    evidence: json!({"changed": []}),
                }],
                not_checked: vec![UncheckedInvariant {
                    invariant_id: "inv_2".into(),
                    text: "be nice".into(),
                    why: "nothing changed".into(),
                }],
            }),
            "invariant_checked",
            format!(
                r#"{{"at":"step","step":"step 1","decision_id":"{ID}","checked":[{{"invariant_id":"inv_1","text":"paths unchanged: docs/**","check":"paths","held":true,"evidence":{{"changed":[]}}}}],"not_checked":[{{"invariant_id":"inv_2","text":"be nice","why":"nothing changed"}}]}}"#
            ),
        ),
        (
            EventKind::InvariantViolated(InvariantViolated {
                at: "apply".into(),
                step: "before apply".into(),
                decision_id: None,
                violations: vec![Violation {
                    approval_id: "apr_1".into(),
                    invariant_id: json!("inv_1"),
                    invariant: json!("paths unchanged: docs/**"),
                    check: json!("paths"),
                    evidence: json!({"changed": ["docs/a.md"]}),
                }],
            }),
            "invariant_violated",
            r#"{"at":"apply","step":"before apply","decision_id":null,"violations":[{"approval_id":"apr_1","invariant_id":"inv_1","invariant":"paths unchanged: docs/**","check":"paths","evidence":{"changed":["docs/a.md"]}}]}"#.into(),
        ),
    ]
}

fn exports_reviews_sandboxes_and_registries() -> Vec<Case> {
    vec![
        (
            EventKind::PlanExported(PlanExported {
                resource: "local/app".into(),
                branch: Some("try-it".into()),
                patch: None,
                base_commit: "abc123".into(),
                files_changed: 3,
            }),
            "plan_exported",
            r#"{"resource":"local/app","branch":"try-it","patch":null,"base_commit":"abc123","files_changed":3}"#.into(),
        ),
        (
            EventKind::ReviewMarked(ReviewMarked {
                mark: "rejected".into(),
                items: vec!["1234abcd".into()],
                reason: Some("too broad".into()),
            }),
            "review_marked",
            r#"{"mark":"rejected","items":["1234abcd"],"reason":"too broad"}"#.into(),
        ),
        (
            EventKind::SandboxCleaned(SandboxCleaned {
                sandbox_id: ID.into(),
                resource: "local/app".into(),
                action: "removed".into(),
                reason: "plan cancelled".into(),
            }),
            "sandbox_cleaned",
            format!(r#"{{"sandbox_id":"{ID}","resource":"local/app","action":"removed","reason":"plan cancelled"}}"#),
        ),
        (
            EventKind::RegistryChanged(RegistryChanged {
                registry: "project".into(),
                name: "local/app".into(),
                change: "removed".into(),
            }),
            "registry_changed",
            r#"{"registry":"project","name":"local/app","change":"removed"}"#.into(),
        ),
    ]
}

#[test]
fn every_kind_writes_the_stored_bytes_and_reads_back_typed() {
    let cases = cases();
    let mut types: Vec<EventType> = cases.iter().map(|(k, _, _)| k.event_type()).collect();
    types.dedup();
    assert_eq!(types, EventType::ALL, "a case per kind, in order");
    for (kind, event_type, data) in cases {
        assert_eq!(kind.event_type().as_str(), event_type);
        assert_eq!(kind.data().to_string(), data, "{event_type}: stored data");
        let expected = row(event_type, &data);
        let streamed = event(kind.clone());
        assert_eq!(serde_json::to_string(&streamed).unwrap(), expected);
        let parsed: EngineEvent = serde_json::from_str(&expected).unwrap();
        assert_eq!(parsed, streamed, "{event_type}: read back typed");
        let stored =
            EventKind::from_stored(kind.event_type(), serde_json::from_str(&data).unwrap());
        assert_eq!(stored, kind, "{event_type}: read from a row");
    }
}

#[test]
fn a_rejected_decision_stores_its_reason_in_place_of_redecide() {
    let kind = EventKind::StateChanged(StateChanged::Transition(Transition {
        reason: Some("too slow".into()),
        ..Transition::at(Phase::Strategize, ProcessingState::Queued)
    }));
    assert_eq!(
        kind.data().to_string(),
        r#"{"phase":"strategize","state":"queued","reason":"too slow"}"#
    );
}

#[test]
fn older_rows_read_with_defaults_or_raw_and_write_back_unchanged() {
    // A missing field defaults; an unknown one is ignored.
    let old = EventKind::from_stored(
        EventType::ExecuteComplete,
        json!({"steps": 1, "renamed_later": true}),
    );
    assert_eq!(
        old,
        EventKind::ExecuteComplete(ExecuteComplete {
            steps: 1,
            ..ExecuteComplete::default()
        })
    );
    // A field of another type, or a missing required one, keeps the row as stored.
    for (event_type, data) in [
        (EventType::ExecuteStep, json!({"step": 1})),
        (EventType::PlanErrored, json!({"code": "X"})),
        (EventType::StrategizeStarted, json!("not an object")),
    ] {
        let kind = EventKind::from_stored(event_type, data.clone());
        assert_eq!(
            kind,
            EventKind::Raw(RawEvent {
                event_type,
                data: data.clone()
            })
        );
        assert_eq!(kind.event_type(), event_type);
        assert_eq!(kind.data(), data);
        let streamed = serde_json::to_string(&event(kind)).unwrap();
        assert_eq!(streamed, row(event_type.as_str(), &data.to_string()));
    }
    // An approval recorded before steps were typed keeps its command text.
    let text = json!({"approval_id": "apr_1", "kind": "errored", "summary": "s",
        "options": [], "answer_command": "agents plan execute X"});
    let kind = EventKind::from_stored(EventType::ApprovalRequested, text.clone());
    assert!(matches!(&kind, EventKind::ApprovalRequested(p)
        if p.answer_command == AnswerStep::Command("agents plan execute X".into())));
    assert_eq!(kind.data(), text);
    // A `state_changed` of a shape no emitter writes any more still reads as a transition.
    let odd = EventKind::from_stored(
        EventType::StateChanged,
        json!({"phase": "execute", "state": "queued", "gone": 1}),
    );
    assert_eq!(
        odd,
        EventKind::StateChanged(StateChanged::Transition(Transition::at(
            Phase::Execute,
            ProcessingState::Queued
        )))
    );
}

#[test]
fn the_step_an_event_is_about() {
    let step = EventKind::ExecuteStep(ExecuteStep::new("step 1", "started"));
    assert_eq!(step.step(), Some("step 1"));
    let raw = EventKind::from_stored(
        EventType::ExecuteStep,
        json!({"step": "s", "position": "x"}),
    );
    assert_eq!(raw.step(), Some("s"));
    let none = EventKind::ApplyStarted(ApplyStarted::default());
    assert_eq!(none.step(), None);
}
