-- Plans (spec sections 08 and 27). Structured fields that are read whole are JSON text.
CREATE TABLE plans (
    plan_id                    TEXT PRIMARY KEY NOT NULL,
    name                       TEXT NOT NULL,
    action_name                TEXT NOT NULL,
    phase                      TEXT NOT NULL CHECK (phase IN ('strategize', 'execute', 'apply', 'applied')),
    state                      TEXT NOT NULL CHECK (state IN ('queued', 'processing', 'errored', 'complete', 'cancelled')),
    attempt                    INTEGER NOT NULL DEFAULT 1 CHECK (attempt >= 1),
    description                TEXT,
    definition_of_done         TEXT,
    project_links              TEXT NOT NULL DEFAULT '[]',
    automation_profile         TEXT,
    automation_level           TEXT NOT NULL DEFAULT 'manual',
    effective_profile_snapshot TEXT,
    strategy_actor             TEXT,
    execution_actor            TEXT,
    estimation_actor           TEXT,
    invariant_actor            TEXT,
    arguments                  TEXT NOT NULL DEFAULT '{}',
    invariants                 TEXT NOT NULL DEFAULT '[]',
    changeset_id               TEXT,
    sandbox_refs               TEXT NOT NULL DEFAULT '[]',
    validation_summary         TEXT,
    decision_root_id           TEXT,
    error_code                 TEXT,
    error_message              TEXT,
    tags                       TEXT NOT NULL DEFAULT '[]',
    created_at                 TEXT NOT NULL,
    updated_at                 TEXT NOT NULL,
    started_at                 TEXT,
    completed_at               TEXT,
    parent_plan_id             TEXT REFERENCES plans(plan_id) ON DELETE RESTRICT,
    root_plan_id               TEXT REFERENCES plans(plan_id) ON DELETE RESTRICT
) STRICT;

CREATE INDEX plans_by_state ON plans(state);
CREATE INDEX plans_by_parent ON plans(parent_plan_id);
