-- Running plans (lifecycle issue): what each target resource looked like at `plan use`, the
-- progress of Execute step by step, and the apply journal that makes Apply crash-safe.

-- The base of every target resource, recorded at `plan use` (Strategize reads it, Execute
-- sandboxes from it, Apply merges against it). `branch` is the branch checked out at `plan use`
-- (NULL for a detached HEAD or a directory).
CREATE TABLE plan_bases (
    plan_id        TEXT NOT NULL REFERENCES plans(plan_id) ON DELETE CASCADE,
    resource_name  TEXT NOT NULL,
    project_name   TEXT NOT NULL,
    alias          TEXT,
    kind           TEXT NOT NULL CHECK (kind IN ('git_checkout', 'directory')),
    path           TEXT NOT NULL,
    base_commit    TEXT,
    branch         TEXT,
    read_only      INTEGER NOT NULL CHECK (read_only IN (0, 1)),
    position       INTEGER NOT NULL,
    PRIMARY KEY (plan_id, resource_name)
) STRICT;

-- One row per executable decision of the current attempt, in execution order. A step that is
-- `running` when its driver vanished is rolled back to `start_checkpoints` and run again.
CREATE TABLE plan_steps (
    plan_id            TEXT NOT NULL REFERENCES plans(plan_id) ON DELETE CASCADE,
    decision_id        TEXT NOT NULL REFERENCES decisions(decision_id) ON DELETE CASCADE,
    position           INTEGER NOT NULL,
    status             TEXT NOT NULL CHECK (status IN ('pending', 'running', 'done', 'failed')),
    runs               INTEGER NOT NULL DEFAULT 0,
    start_checkpoints  TEXT NOT NULL DEFAULT '{}',
    end_checkpoints    TEXT NOT NULL DEFAULT '{}',
    output             TEXT,
    error              TEXT,
    started_at         TEXT,
    finished_at        TEXT,
    PRIMARY KEY (plan_id, decision_id)
) STRICT;
CREATE INDEX plan_steps_in_order ON plan_steps(plan_id, position);

-- Written before Apply changes the first byte of a resource; completed after the last.
-- `entries` is a JSON array of {path, base_sha256, new_sha256} (NULL hash: file absent).
CREATE TABLE apply_journals (
    journal_id     TEXT PRIMARY KEY NOT NULL,
    plan_id        TEXT NOT NULL REFERENCES plans(plan_id) ON DELETE CASCADE,
    resource_name  TEXT NOT NULL,
    kind           TEXT NOT NULL CHECK (kind IN ('git_checkout', 'directory')),
    path           TEXT NOT NULL,
    status         TEXT NOT NULL CHECK (status IN ('pending', 'complete', 'stopped')),
    entries        TEXT NOT NULL DEFAULT '[]',
    commit_id      TEXT,
    created_at     TEXT NOT NULL,
    completed_at   TEXT
) STRICT;
CREATE INDEX apply_journals_by_plan ON apply_journals(plan_id, status);
