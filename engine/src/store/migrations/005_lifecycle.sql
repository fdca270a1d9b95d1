-- Lifecycle infrastructure (spec sections 08, 11, 27; lifecycle issue): events, ownership
-- leases, approvals, decision records.

-- Every state change inserts one event in the same transaction. Other processes follow the
-- table by watching PRAGMA data_version and reading rows with a higher seq.
CREATE TABLE events (
    seq        INTEGER PRIMARY KEY AUTOINCREMENT,
    ts         TEXT NOT NULL,
    plan_id    TEXT REFERENCES plans(plan_id) ON DELETE CASCADE,
    type       TEXT NOT NULL,
    data       TEXT NOT NULL DEFAULT '{}'
) STRICT;
CREATE INDEX events_by_plan ON events(plan_id, seq);

-- The process driving a plan. One row per plan at most.
CREATE TABLE plan_leases (
    plan_id      TEXT PRIMARY KEY NOT NULL REFERENCES plans(plan_id) ON DELETE CASCADE,
    pid          INTEGER NOT NULL,
    host         TEXT NOT NULL,
    kind         TEXT NOT NULL,
    acquired_at  TEXT NOT NULL,
    heartbeat_at TEXT NOT NULL
) STRICT;

ALTER TABLE plans ADD COLUMN cancel_requested INTEGER NOT NULL DEFAULT 0;
ALTER TABLE plans ADD COLUMN cancel_reason TEXT;
ALTER TABLE plans ADD COLUMN state_reason TEXT;

-- Everything a human must act on is a row, never an in-memory prompt.
CREATE TABLE approvals (
    approval_id    TEXT PRIMARY KEY NOT NULL,
    plan_id        TEXT NOT NULL REFERENCES plans(plan_id) ON DELETE CASCADE,
    kind           TEXT NOT NULL CHECK (kind IN ('phase_gate', 'decision', 'child_spawn', 'transient_failure', 'errored')),
    status         TEXT NOT NULL CHECK (status IN ('pending', 'approved', 'rejected', 'answered', 'withdrawn')),
    summary        TEXT NOT NULL,
    context        TEXT NOT NULL DEFAULT '{}',
    options        TEXT NOT NULL DEFAULT '[]',
    answer_command TEXT NOT NULL,
    answer         TEXT,
    created_at     TEXT NOT NULL,
    resolved_at    TEXT
) STRICT;
CREATE INDEX approvals_pending ON approvals(status, plan_id);

-- Decision records (spec section 08, "Decision-tree SQL").
CREATE TABLE decisions (
    decision_id             TEXT PRIMARY KEY NOT NULL,
    plan_id                 TEXT NOT NULL REFERENCES plans(plan_id) ON DELETE CASCADE,
    parent_decision_id      TEXT REFERENCES decisions(decision_id),
    sequence_number         INTEGER NOT NULL,
    attempt                 INTEGER NOT NULL DEFAULT 1,
    decision_type           TEXT NOT NULL,
    question                TEXT,
    chosen_option           TEXT NOT NULL,
    alternatives_considered TEXT NOT NULL DEFAULT '[]',
    confidence_score        REAL CHECK (confidence_score IS NULL OR (confidence_score >= 0 AND confidence_score <= 1)),
    rationale               TEXT,
    actor_reasoning         TEXT,
    context_snapshot        TEXT NOT NULL DEFAULT '{}',
    step                    TEXT,
    is_correction           INTEGER NOT NULL DEFAULT 0,
    corrects_decision_id    TEXT REFERENCES decisions(decision_id),
    correction_reason       TEXT,
    superseded_by           TEXT REFERENCES decisions(decision_id),
    created_at              TEXT NOT NULL,
    UNIQUE (plan_id, sequence_number)
) STRICT;
CREATE INDEX decisions_by_parent ON decisions(parent_decision_id);

CREATE TABLE decision_dependencies (
    upstream_decision_id   TEXT NOT NULL REFERENCES decisions(decision_id) ON DELETE CASCADE,
    downstream_decision_id TEXT NOT NULL,
    dependency_type        TEXT NOT NULL CHECK (dependency_type IN ('decision', 'plan', 'artifact', 'step', 'checkpoint')),
    downstream_ref         TEXT NOT NULL,
    PRIMARY KEY (upstream_decision_id, downstream_decision_id, downstream_ref)
) STRICT;

CREATE TABLE correction_attempts (
    attempt_id                TEXT PRIMARY KEY NOT NULL,
    plan_id                   TEXT NOT NULL REFERENCES plans(plan_id) ON DELETE CASCADE,
    original_decision_id      TEXT NOT NULL REFERENCES decisions(decision_id),
    new_decision_id           TEXT REFERENCES decisions(decision_id),
    original_subtree_snapshot TEXT,
    correction_reason         TEXT,
    status                    TEXT NOT NULL CHECK (status IN ('pending', 'executing', 'completed', 'failed')),
    created_at                TEXT NOT NULL,
    completed_at              TEXT
) STRICT;
