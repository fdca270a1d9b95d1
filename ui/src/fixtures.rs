//! Fixture view models shared by the tests, snapshots and the render benchmark (not part of
//! the API).
#![allow(missing_docs)]

use crate::model::{
    ApprovalItem, ApprovalKind, ArgumentField, CheckpointItem, CorrectionPreview, DecisionNode,
    DecisionRef, DiffFile, DiffHunk, DiffLine, DiffLineKind, DiffView, Explanation, Phase, PlanRow,
    ProcessingState, ReviewItem, ReviewMark, ReviewerMark, UseChoices,
};
use crate::msg::Msg;

pub const PLAN_A: &str = "01JDQ4V6B3G9X2K7M5N8P0R1ST";
pub const PLAN_B: &str = "01JDQ5A2C8H4Y6Z1W3E5F7G9HJ";
pub const PLAN_C: &str = "01JDQ6B3D9J5Z7A2X4F6G8H0KM";
pub const PLAN_D: &str = "01JDQ7C4E0K6A8B3Y5G7H9J1MN";

fn plan(
    id: &str,
    action: &str,
    project: &str,
    phase: Phase,
    state: ProcessingState,
    elapsed_ms: u64,
    cost_usd: Option<f64>,
) -> PlanRow {
    PlanRow {
        plan_id: id.to_owned(),
        action: action.to_owned(),
        project: project.to_owned(),
        phase,
        state,
        elapsed_ms,
        cost_usd,
        gate_rejected: false,
    }
}

pub fn plans() -> Vec<PlanRow> {
    vec![
        plan(
            PLAN_A,
            "refactor-auth",
            "webshop",
            Phase::Execute,
            ProcessingState::Processing,
            754_000,
            Some(0.4213),
        ),
        plan(
            PLAN_B,
            "add-search",
            "docs-site",
            Phase::Strategize,
            ProcessingState::Queued,
            65_000,
            Some(0.05),
        ),
        plan(
            PLAN_C,
            "fix-flaky-tests",
            "webshop",
            Phase::Apply,
            ProcessingState::Errored,
            3_723_000,
            Some(1.5),
        ),
        plan(
            PLAN_D,
            "bump-deps",
            "infra",
            Phase::Applied,
            ProcessingState::Complete,
            42_000,
            None,
        ),
    ]
}

fn decision(
    id: &str,
    kind: &str,
    summary: &str,
    chosen: &str,
    confidence: Option<f32>,
    children: Vec<DecisionNode>,
) -> DecisionNode {
    DecisionNode {
        decision_id: id.to_owned(),
        decision_type: kind.to_owned(),
        summary: summary.to_owned(),
        chosen: chosen.to_owned(),
        confidence,
        superseded: false,
        children,
        child_plan_id: None,
    }
}

/// D1 [D2, D3 [D5], D4 (superseded)], D6 (spawned PLAN_C).
pub fn decisions() -> Vec<DecisionNode> {
    let mut d4 = decision(
        "D4",
        "tool_choice",
        "HTTP client",
        "reqwest",
        Some(0.55),
        vec![],
    );
    d4.superseded = true;
    let mut d6 = decision(
        "D6",
        "child_spawn",
        "Sessions table migration",
        "spawn a child plan",
        None,
        vec![],
    );
    d6.child_plan_id = Some(PLAN_C.to_owned());
    vec![
        decision(
            "D1",
            "approach",
            "Restructure auth",
            "extract a session service",
            Some(0.82),
            vec![
                decision(
                    "D2",
                    "tool_choice",
                    "Test runner",
                    "cargo nextest",
                    Some(0.9),
                    vec![],
                ),
                decision(
                    "D3",
                    "file_plan",
                    "Files to touch",
                    "src/auth/*.rs",
                    None,
                    vec![decision(
                        "D5",
                        "naming",
                        "New service name",
                        "SessionStore",
                        Some(0.64),
                        vec![],
                    )],
                ),
                d4,
            ],
        ),
        d6,
    ]
}

fn lines(spec: &[(&str, &str)]) -> Vec<DiffLine> {
    spec.iter()
        .map(|(marker, text)| DiffLine {
            kind: match *marker {
                "+" => DiffLineKind::Added,
                "-" => DiffLineKind::Removed,
                _ => DiffLineKind::Context,
            },
            text: (*text).to_owned(),
        })
        .collect()
}

pub fn diff() -> DiffView {
    DiffView {
        applied: None,
        files: vec![
            DiffFile {
                path: "src/auth/session.rs".to_owned(),
                added: 5,
                removed: 2,
                hunks: vec![
                    DiffHunk {
                        old_start: 10,
                        old_lines: 4,
                        new_start: 10,
                        new_lines: 5,
                        lines: lines(&[
                            (" ", "use crate::db::Pool;"),
                            ("-", "pub struct Sessions {"),
                            ("+", "pub struct SessionStore {"),
                            ("+", "    ttl: Duration,"),
                            (" ", "    pool: Pool,"),
                            (" ", "}"),
                        ]),
                        decision_ids: vec!["D1".to_owned(), "D5".to_owned()],
                        review: None,
                    },
                    DiffHunk {
                        old_start: 40,
                        old_lines: 3,
                        new_start: 41,
                        new_lines: 4,
                        lines: lines(&[
                            (" ", "impl SessionStore {"),
                            ("-", "    fn get(&self, id: &str) -> Option<Session> {"),
                            ("+", "    pub fn get(&self, id: &str) -> Option<Session> {"),
                            ("+", "        self.expire_old();"),
                            ("+", "\tself.lookup(id)"),
                        ]),
                        decision_ids: vec!["D3".to_owned()],
                        review: None,
                    },
                ],
                status: "M".to_owned(),
                review: None,
            },
            DiffFile {
                path: "src/auth/mod.rs".to_owned(),
                added: 1,
                removed: 1,
                hunks: vec![DiffHunk {
                    old_start: 1,
                    old_lines: 2,
                    new_start: 1,
                    new_lines: 2,
                    lines: lines(&[
                        ("-", "mod sessions;"),
                        ("+", "mod session;"),
                        (" ", "mod token;"),
                    ]),
                    decision_ids: vec![],
                    review: None,
                }],
                status: "M".to_owned(),
                review: None,
            },
        ],
    }
}

/// [`diff`] under review, with a third file without hunks: the first hunk accepted, the
/// second rejected with a reason, the rest pending.
pub fn reviewed_diff() -> DiffView {
    let mut diff = diff();
    let item = |id: &str, mark, reason: Option<&str>| {
        Some(ReviewItem {
            id: id.to_owned(),
            mark,
            reason: reason.map(str::to_owned),
            // The local user's own marks, which the pane does not name.
            marks: (mark != ReviewMark::Pending)
                .then(|| ReviewerMark {
                    reviewer: None,
                    mark,
                    reason: reason.map(str::to_owned),
                })
                .into_iter()
                .collect(),
        })
    };
    diff.files[0].hunks[0].review = item("a1b2c3d4e5f6", ReviewMark::Accepted, None);
    diff.files[0].hunks[1].review = item(
        "0f9e8d7c6b5a",
        ReviewMark::Rejected,
        Some("keep get private"),
    );
    diff.files[1].hunks[0].review = item("11aa22bb33cc", ReviewMark::Pending, None);
    diff.files.push(DiffFile {
        path: "assets/logo.png".to_owned(),
        added: 0,
        removed: 0,
        hunks: Vec::new(),
        status: "A".to_owned(),
        review: item("99ff88ee77dd", ReviewMark::Pending, None),
    });
    diff
}

/// [`reviewed_diff`] as two of a server's users marked it: alice accepted the first hunk and
/// bob only saw it; bob rejected the second with a reason alice accepted it with none; both
/// saw the third; nobody marked the file without hunks.
pub fn diff_reviewed_by_two() -> DiffView {
    let mut diff = reviewed_diff();
    let by = |who: &str, mark, reason: Option<&str>| ReviewerMark {
        reviewer: Some(who.to_owned()),
        mark,
        reason: reason.map(str::to_owned),
    };
    let set = |item: &mut Option<ReviewItem>, mark, marks: Vec<ReviewerMark>| {
        if let Some(i) = item.as_mut() {
            i.mark = mark;
            i.marks = marks;
        }
    };
    set(
        &mut diff.files[0].hunks[0].review,
        ReviewMark::Accepted,
        vec![
            by("alice", ReviewMark::Accepted, None),
            by("bob", ReviewMark::Reviewed, None),
        ],
    );
    set(
        &mut diff.files[0].hunks[1].review,
        ReviewMark::Rejected,
        vec![
            by("alice", ReviewMark::Accepted, None),
            by("bob", ReviewMark::Rejected, Some("keep get private")),
        ],
    );
    set(
        &mut diff.files[1].hunks[0].review,
        ReviewMark::Reviewed,
        vec![
            by("alice", ReviewMark::Reviewed, None),
            by("bob", ReviewMark::Reviewed, None),
        ],
    );
    diff
}

pub fn approvals() -> Vec<ApprovalItem> {
    vec![
        ApprovalItem {
            approval_id: "A1".to_owned(),
            plan_id: PLAN_A.to_owned(),
            kind: ApprovalKind::PhaseGate,
            summary: "Move to apply: 2 files changed, checks passed".to_owned(),
            options: vec![],
        },
        ApprovalItem {
            approval_id: "A2".to_owned(),
            plan_id: PLAN_B.to_owned(),
            kind: ApprovalKind::DecisionChoice,
            summary: "Search backend for the docs".to_owned(),
            options: vec!["replace the old search".to_owned(), "keep both".to_owned()],
        },
        ApprovalItem {
            approval_id: "A3".to_owned(),
            plan_id: PLAN_C.to_owned(),
            kind: ApprovalKind::TransientFailure,
            summary: "Provider timed out after 3 retries".to_owned(),
            options: vec!["retry".to_owned(), "cancel".to_owned()],
        },
    ]
}

/// Everything the engine would send at start-up, with PLAN_A selected.
pub fn load_all() -> Vec<Msg> {
    vec![
        Msg::PlansUpdated(plans()),
        Msg::TreeUpdated {
            plan_id: PLAN_A.to_owned(),
            nodes: decisions(),
        },
        Msg::DiffUpdated {
            plan_id: PLAN_A.to_owned(),
            diff: diff(),
        },
        Msg::ApprovalsUpdated(approvals()),
    ]
}

pub fn explanation(id: &str) -> Explanation {
    Explanation {
        decision_id: id.to_owned(),
        plan_id: PLAN_A.to_owned(),
        decision_type: "tool_choice".to_owned(),
        question: Some("Which test runner should the refactor use?".to_owned()),
        chosen: "cargo nextest".to_owned(),
        alternatives: vec!["cargo test".to_owned(), "a custom script".to_owned()],
        rationale: Some(
            "nextest runs the auth suite in parallel and isolates the flaky session tests."
                .to_owned(),
        ),
        confidence: Some(0.9),
        superseded_by: None,
        impact: vec![
            DecisionRef {
                decision_id: "D3".to_owned(),
                decision_type: "file_plan".to_owned(),
                chosen: "src/auth/*.rs".to_owned(),
            },
            DecisionRef {
                decision_id: "D5".to_owned(),
                decision_type: "naming".to_owned(),
                chosen: "SessionStore".to_owned(),
            },
        ],
        impact_child_plans: vec![PLAN_C.to_owned()],
        impact_steps: 2,
        impact_files: vec![
            "src/auth/session.rs".to_owned(),
            "src/auth/store.rs".to_owned(),
        ],
        impact_level: "medium".to_owned(),
    }
}

pub fn preview() -> CorrectionPreview {
    CorrectionPreview {
        decisions: explanation("D2").impact,
        steps_rerun: vec!["D3".to_owned(), "D5".to_owned()],
        steps_replayed: vec![],
        steps_may_rerun: vec!["D6".to_owned()],
        child_plans: vec![PLAN_C.to_owned()],
        files: vec![
            "src/auth/session.rs".to_owned(),
            "src/auth/mod.rs".to_owned(),
        ],
        estimated_model_calls: Some(4),
        refused: None,
    }
}

pub fn checkpoints() -> Vec<CheckpointItem> {
    (1..=3)
        .map(|seq| CheckpointItem {
            checkpoint_id: format!("cp_0000000{seq}"),
            seq,
            label: if seq == 3 { "end" } else { "start" }.to_owned(),
            step: Some(format!("step {seq}: edit session store")),
            files_changed: u64::from(seq) * 2,
            taken: format!("2026-01-02 10:0{seq}:00"),
        })
        .collect()
}

pub fn use_choices() -> UseChoices {
    UseChoices {
        actions: vec![
            "local/refactor-auth".to_owned(),
            "local/add-search".to_owned(),
        ],
        projects: vec![
            "local/webshop".to_owned(),
            "local/docs-site".to_owned(),
            "local/infra".to_owned(),
        ],
        arguments: [(
            "local/add-search".to_owned(),
            vec![
                ArgumentField {
                    name: "engine".to_owned(),
                    required: true,
                    default: None,
                    description: Some("Search engine to use".to_owned()),
                },
                ArgumentField {
                    name: "limit".to_owned(),
                    required: false,
                    default: Some("20".to_owned()),
                    description: None,
                },
            ],
        )]
        .into_iter()
        .collect(),
        profiles: [
            "manual",
            "supervised",
            "trusted",
            "full-auto",
            "local/careful",
        ]
        .map(str::to_owned)
        .into(),
        configured_profile: None,
    }
}

/// A tree of `n` decisions: roots of 10 children each, every child with 9 grandchildren.
pub fn big_tree(n: usize) -> Vec<DecisionNode> {
    let mut made = 0;
    let mut roots = Vec::new();
    let mut next = |kind: &str| {
        made += 1;
        decision(
            &format!("D{made:05}"),
            kind,
            &format!("question number {made} about the refactor"),
            &format!("option {}", made % 7),
            Some(0.5),
            vec![],
        )
    };
    let mut count = 0;
    while count < n {
        let mut root = next("approach");
        count += 1;
        for _ in 0..10 {
            if count >= n {
                break;
            }
            let mut child = next("implementation_choice");
            count += 1;
            for _ in 0..9 {
                if count >= n {
                    break;
                }
                child.children.push(next("naming"));
                count += 1;
            }
            root.children.push(child);
        }
        roots.push(root);
    }
    roots
}

/// A diff of about `lines` lines of Rust over 50 files, hunks of 20 lines.
pub fn big_diff(lines: usize) -> DiffView {
    let files = 50;
    let per_file = lines / files;
    DiffView {
        applied: None,
        files: (0..files)
            .map(|f| {
                let hunks: Vec<DiffHunk> = (0..per_file / 20)
                    .map(|h| DiffHunk {
                        old_start: u32::try_from(h * 30 + 1).unwrap_or(u32::MAX),
                        old_lines: 16,
                        new_start: u32::try_from(h * 30 + 1).unwrap_or(u32::MAX),
                        new_lines: 16,
                        lines: (0..20)
                            .map(|i| DiffLine {
                                kind: match i % 5 {
                                    1 => DiffLineKind::Removed,
                                    2 => DiffLineKind::Added,
                                    _ => DiffLineKind::Context,
                                },
                                text: format!("    let value_{i} = compute({h}, {i}) * {f};"),
                            })
                            .collect(),
                        decision_ids: vec![format!("D{h:05}")],
                        review: None,
                    })
                    .collect();
                DiffFile {
                    path: format!("src/module_{f}.rs"),
                    added: hunks.len() * 4,
                    removed: hunks.len() * 4,
                    hunks,
                    status: "M".to_owned(),
                    review: None,
                }
            })
            .collect(),
    }
}
