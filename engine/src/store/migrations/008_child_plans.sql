-- Child plans: which spawn decision of which parent started each child, where
-- its sandboxes branched from the parent's, and how it ended (run, failed, merged back).
CREATE TABLE child_plans (
    child_plan_id      TEXT PRIMARY KEY NOT NULL REFERENCES plans(plan_id) ON DELETE CASCADE,
    parent_plan_id     TEXT NOT NULL REFERENCES plans(plan_id) ON DELETE CASCADE,
    spawn_decision_id  TEXT NOT NULL REFERENCES decisions(decision_id) ON DELETE CASCADE,
    parallel_group     TEXT,
    position           INTEGER NOT NULL,
    -- JSON object: resource name -> {"commit": hex, "tree": hex} of the parent's sandbox at the spawn.
    bases              TEXT NOT NULL DEFAULT '{}',
    status             TEXT NOT NULL CHECK (status IN ('pending', 'running', 'succeeded', 'failed', 'cancelled', 'merged', 'conflict')),
    detail             TEXT,
    created_at         TEXT NOT NULL,
    finished_at        TEXT
) STRICT;
CREATE INDEX child_plans_by_parent ON child_plans(parent_plan_id, position);
CREATE INDEX child_plans_by_spawn ON child_plans(spawn_decision_id);

-- A merge-back conflict asks a human to recover: approvals gain the kind `error_recovery`.
-- SQLite cannot change a CHECK constraint, so the table is rebuilt (nothing references it).
CREATE TABLE approvals_new (
    approval_id    TEXT PRIMARY KEY NOT NULL,
    plan_id        TEXT NOT NULL REFERENCES plans(plan_id) ON DELETE CASCADE,
    kind           TEXT NOT NULL CHECK (kind IN ('phase_gate', 'decision', 'child_spawn', 'transient_failure', 'errored', 'error_recovery')),
    status         TEXT NOT NULL CHECK (status IN ('pending', 'approved', 'rejected', 'answered', 'withdrawn')),
    summary        TEXT NOT NULL,
    context        TEXT NOT NULL DEFAULT '{}',
    options        TEXT NOT NULL DEFAULT '[]',
    answer_command TEXT NOT NULL,
    answer         TEXT,
    created_at     TEXT NOT NULL,
    resolved_at    TEXT
) STRICT;
INSERT INTO approvals_new SELECT approval_id, plan_id, kind, status, summary, context, options, answer_command, answer, created_at, resolved_at FROM approvals;
DROP TABLE approvals;
ALTER TABLE approvals_new RENAME TO approvals;
CREATE INDEX approvals_pending ON approvals(status, plan_id);
