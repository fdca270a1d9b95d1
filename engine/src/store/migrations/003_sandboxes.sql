-- Sandboxes, checkpoints, tool calls and changes (spec sections 11, 18 and 23).
-- Only `plans` is referenced, so this migration does not depend on the registries' tables.

-- What a plan may sandbox: one row per (plan, resource), written when the plan is created
-- (`plan use`) or by the developer flag `tool run --target-path`. The sandbox itself is
-- created lazily from this row on first access.
CREATE TABLE sandbox_targets (
    plan_id        TEXT NOT NULL REFERENCES plans(plan_id) ON DELETE CASCADE,
    resource_name  TEXT NOT NULL,
    alias          TEXT,
    kind           TEXT NOT NULL CHECK (kind IN ('git_checkout', 'directory')),
    source_path    TEXT NOT NULL,
    base_commit    TEXT,
    read_only      INTEGER NOT NULL DEFAULT 0 CHECK (read_only IN (0, 1)),
    created_at     TEXT NOT NULL,
    PRIMARY KEY (plan_id, resource_name),
    CHECK ((kind = 'git_checkout') = (base_commit IS NOT NULL))
) STRICT;

-- One sandbox per (plan, resource). `state`: creating (directory may be partial), active,
-- released (work tree removed after apply; refs kept until retention ends), removed.
CREATE TABLE sandboxes (
    sandbox_id     TEXT PRIMARY KEY NOT NULL,
    plan_id        TEXT NOT NULL,
    resource_name  TEXT NOT NULL,
    strategy       TEXT NOT NULL CHECK (strategy IN ('git_worktree', 'copy_on_write')),
    state          TEXT NOT NULL CHECK (state IN ('creating', 'active', 'released', 'removed')),
    root_dir       TEXT NOT NULL,
    base_commit    TEXT,
    created_at     TEXT NOT NULL,
    released_at    TEXT,
    removed_at     TEXT,
    UNIQUE (plan_id, resource_name),
    FOREIGN KEY (plan_id, resource_name)
        REFERENCES sandbox_targets(plan_id, resource_name) ON DELETE CASCADE
) STRICT;

CREATE INDEX sandboxes_by_plan ON sandboxes(plan_id);

-- A plan-wide checkpoint: the state of every sandbox of the plan at one moment.
CREATE TABLE checkpoints (
    checkpoint_id  TEXT PRIMARY KEY NOT NULL,
    plan_id        TEXT NOT NULL REFERENCES plans(plan_id) ON DELETE CASCADE,
    seq            INTEGER NOT NULL CHECK (seq >= 1),
    step           TEXT,
    decision_id    TEXT,
    label          TEXT NOT NULL,
    files_changed  INTEGER NOT NULL DEFAULT 0,
    tool_call_seq  INTEGER NOT NULL DEFAULT 0,
    created_at     TEXT NOT NULL,
    discarded_at   TEXT,
    UNIQUE (plan_id, seq)
) STRICT;

-- The commit (in the sandbox's private repository) that holds one sandbox's state at a
-- checkpoint.
CREATE TABLE checkpoint_states (
    checkpoint_id  TEXT NOT NULL REFERENCES checkpoints(checkpoint_id) ON DELETE CASCADE,
    sandbox_id     TEXT NOT NULL REFERENCES sandboxes(sandbox_id) ON DELETE CASCADE,
    commit_oid     TEXT NOT NULL,
    tree_oid       TEXT NOT NULL,
    PRIMARY KEY (checkpoint_id, sandbox_id)
) STRICT;

-- The execution log: every tool call, allowed or not.
CREATE TABLE tool_calls (
    call_id            TEXT PRIMARY KEY NOT NULL,
    plan_id            TEXT NOT NULL REFERENCES plans(plan_id) ON DELETE CASCADE,
    seq                INTEGER NOT NULL CHECK (seq >= 1),
    tool               TEXT NOT NULL,
    parent_skill       TEXT,
    resource_name      TEXT,
    arguments          TEXT NOT NULL,
    outcome            TEXT NOT NULL CHECK (outcome IN ('ok', 'failed', 'denied', 'invalid')),
    error_code         TEXT,
    error_message      TEXT,
    result_summary     TEXT,
    resources_touched  TEXT NOT NULL DEFAULT '[]',
    duration_ms        INTEGER NOT NULL DEFAULT 0,
    started_at         TEXT NOT NULL,
    discarded_at       TEXT,
    UNIQUE (plan_id, seq)
) STRICT;

-- What each mutating call changed, with content hashes (SHA-256, hex) and sizes in bytes.
CREATE TABLE changes (
    change_id      TEXT PRIMARY KEY NOT NULL,
    plan_id        TEXT NOT NULL REFERENCES plans(plan_id) ON DELETE CASCADE,
    call_id        TEXT NOT NULL REFERENCES tool_calls(call_id) ON DELETE CASCADE,
    resource_name  TEXT NOT NULL,
    operation      TEXT NOT NULL CHECK (operation IN
                       ('create', 'modify', 'delete', 'rename', 'create_dir', 'delete_dir')),
    path           TEXT NOT NULL,
    old_path       TEXT,
    old_hash       TEXT,
    new_hash       TEXT,
    old_size       INTEGER,
    new_size       INTEGER,
    created_at     TEXT NOT NULL,
    discarded_at   TEXT
) STRICT;

CREATE INDEX changes_by_plan ON changes(plan_id);
