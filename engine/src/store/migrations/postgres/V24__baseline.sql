-- The store's schema on PostgreSQL at version 24: the schema the SQLite migrations 001-024
-- build, written once for PostgreSQL (spec section 21). Later versions add a file here beside
-- each new SQLite migration, with the same number.
--
-- SQLite's types map as INTEGER -> BIGINT and REAL -> DOUBLE PRECISION; tables read in the
-- order their rows were inserted carry the `rowid` SQLite gives every table.

CREATE TABLE plans (
    plan_id                    TEXT PRIMARY KEY NOT NULL,
    name                       TEXT NOT NULL,
    action_name                TEXT NOT NULL,
    phase                      TEXT NOT NULL CHECK (phase IN ('strategize', 'execute', 'apply', 'applied')),
    state                      TEXT NOT NULL CHECK (state IN ('queued', 'processing', 'errored', 'complete', 'cancelled')),
    attempt                    BIGINT NOT NULL DEFAULT 1 CHECK (attempt >= 1),
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
    root_plan_id               TEXT REFERENCES plans(plan_id) ON DELETE RESTRICT,
    cancel_requested BIGINT NOT NULL DEFAULT 0, cancel_reason TEXT, state_reason TEXT, kind TEXT NOT NULL DEFAULT 'plan' CHECK (kind IN ('plan', 'actor_run')));

CREATE INDEX plans_by_state ON plans(state);

CREATE INDEX plans_by_parent ON plans(parent_plan_id);

CREATE TABLE resources (
    rowid BIGINT GENERATED ALWAYS AS IDENTITY,
    resource_id  TEXT PRIMARY KEY NOT NULL,
    name         TEXT NOT NULL UNIQUE,
    type_name    TEXT NOT NULL,
    description  TEXT,
    properties   TEXT NOT NULL DEFAULT '{}',
    owner_id     TEXT REFERENCES resources(resource_id) ON DELETE CASCADE,
    created_at   TEXT NOT NULL,
    updated_at   TEXT NOT NULL
);

CREATE INDEX resources_by_owner ON resources(owner_id);

CREATE INDEX resources_by_type ON resources(type_name);

CREATE TABLE resource_links (
    parent_id   TEXT NOT NULL REFERENCES resources(resource_id) ON DELETE CASCADE,
    child_id    TEXT NOT NULL REFERENCES resources(resource_id) ON DELETE CASCADE,
    auto        BIGINT NOT NULL CHECK (auto IN (0, 1)),
    position    BIGINT NOT NULL DEFAULT 0,
    created_at  TEXT NOT NULL,
    PRIMARY KEY (parent_id, child_id),
    CHECK (parent_id != child_id)
);

CREATE INDEX resource_links_by_child ON resource_links(child_id);

CREATE TABLE projects (
    project_id          TEXT PRIMARY KEY NOT NULL,
    name                TEXT NOT NULL UNIQUE,
    description         TEXT,
    invariant_actor     TEXT,
    automation_profile  TEXT,
    created_at          TEXT NOT NULL,
    updated_at          TEXT NOT NULL
);

CREATE TABLE project_resources (
    project_id   TEXT NOT NULL REFERENCES projects(project_id) ON DELETE CASCADE,
    resource_id  TEXT NOT NULL REFERENCES resources(resource_id) ON DELETE RESTRICT,
    alias        TEXT,
    read_only    BIGINT NOT NULL DEFAULT 0 CHECK (read_only IN (0, 1)),
    position     BIGINT NOT NULL,
    created_at   TEXT NOT NULL,
    PRIMARY KEY (project_id, resource_id),
    UNIQUE (project_id, alias)
);

CREATE INDEX project_resources_by_resource ON project_resources(resource_id);

CREATE TABLE project_validations (
    rowid BIGINT GENERATED ALWAYS AS IDENTITY,
    validation_id  TEXT PRIMARY KEY NOT NULL,
    project_id     TEXT NOT NULL REFERENCES projects(project_id) ON DELETE CASCADE,
    command        TEXT NOT NULL,
    description    TEXT,
    required       BIGINT NOT NULL CHECK (required IN (0, 1)),
    timeout_secs   BIGINT NOT NULL CHECK (timeout_secs > 0),
    resource_id    TEXT REFERENCES resources(resource_id) ON DELETE RESTRICT,
    created_at     TEXT NOT NULL,
    network BIGINT NOT NULL DEFAULT 0);

CREATE INDEX project_validations_by_project ON project_validations(project_id);

CREATE TABLE actors (
    actor_id     TEXT PRIMARY KEY NOT NULL,
    name         TEXT NOT NULL UNIQUE,
    actor_type   TEXT NOT NULL CHECK (actor_type IN ('llm', 'graph')),
    model        TEXT,
    description  TEXT,
    unsafe       BIGINT NOT NULL DEFAULT 0 CHECK (unsafe IN (0, 1)),
    definition   TEXT NOT NULL,
    config_path  TEXT,
    config_hash  TEXT,
    created_at   TEXT NOT NULL,
    updated_at   TEXT NOT NULL
);

CREATE TABLE actions (
    action_id           TEXT PRIMARY KEY NOT NULL,
    name                TEXT NOT NULL UNIQUE,
    state               TEXT NOT NULL CHECK (state IN ('draft', 'available', 'archived')),
    description         TEXT,
    long_description    TEXT,
    definition_of_done  TEXT NOT NULL,
    strategy_actor      TEXT NOT NULL,
    execution_actor     TEXT NOT NULL,
    estimation_actor    TEXT,
    invariant_actor     TEXT,
    automation_profile  TEXT,
    reusable            BIGINT NOT NULL CHECK (reusable IN (0, 1)),
    read_only           BIGINT NOT NULL CHECK (read_only IN (0, 1)),
    arguments           TEXT NOT NULL DEFAULT '[]',
    script              TEXT,
    sandbox             TEXT,
    config_path         TEXT,
    created_at          TEXT NOT NULL,
    updated_at          TEXT NOT NULL,
    archived_at         TEXT,
    version BIGINT NOT NULL DEFAULT 1, deleted_at TEXT);

CREATE TABLE invariants (
    rowid BIGINT GENERATED ALWAYS AS IDENTITY,
    invariant_id  TEXT PRIMARY KEY NOT NULL,
    text          TEXT NOT NULL,
    normalized    TEXT NOT NULL,
    key           TEXT,
    scope         TEXT NOT NULL CHECK (scope IN ('global', 'project', 'action', 'plan')),
    project_id    TEXT REFERENCES projects(project_id) ON DELETE CASCADE,
    action_id     TEXT REFERENCES actions(action_id) ON DELETE CASCADE,
    plan_id       TEXT REFERENCES plans(plan_id) ON DELETE CASCADE,
    created_at    TEXT NOT NULL,
    CHECK (
        (scope = 'global' AND project_id IS NULL AND action_id IS NULL AND plan_id IS NULL) OR
        (scope = 'project' AND project_id IS NOT NULL AND action_id IS NULL AND plan_id IS NULL) OR
        (scope = 'action' AND project_id IS NULL AND action_id IS NOT NULL) OR
        (scope = 'plan' AND project_id IS NULL AND action_id IS NULL AND plan_id IS NOT NULL)
    )
);

CREATE INDEX invariants_by_project ON invariants(project_id);

CREATE INDEX invariants_by_action ON invariants(action_id);

CREATE INDEX invariants_by_plan ON invariants(plan_id);

CREATE TABLE automation_profiles (
    profile_id   TEXT PRIMARY KEY NOT NULL,
    name         TEXT NOT NULL UNIQUE,
    description  TEXT,
    flags        TEXT NOT NULL,
    config_path  TEXT,
    created_at   TEXT NOT NULL,
    updated_at   TEXT NOT NULL
);

CREATE TABLE plan_projects (
    plan_id     TEXT NOT NULL REFERENCES plans(plan_id) ON DELETE CASCADE,
    project_id  TEXT NOT NULL REFERENCES projects(project_id) ON DELETE CASCADE,
    position    BIGINT NOT NULL,
    PRIMARY KEY (plan_id, project_id)
);

CREATE INDEX plan_projects_by_project ON plan_projects(project_id);

CREATE TABLE plan_origins (
    plan_id         TEXT PRIMARY KEY NOT NULL REFERENCES plans(plan_id) ON DELETE CASCADE,
    action_id       TEXT NOT NULL REFERENCES actions(action_id) ON DELETE RESTRICT,
    profile_source  TEXT NOT NULL,
    read_only       BIGINT NOT NULL CHECK (read_only IN (0, 1)),
    script          TEXT,
    sandbox         TEXT,
    action_version BIGINT);

CREATE TABLE sandbox_targets (
    rowid BIGINT GENERATED ALWAYS AS IDENTITY,
    plan_id        TEXT NOT NULL REFERENCES plans(plan_id) ON DELETE CASCADE,
    resource_name  TEXT NOT NULL,
    alias          TEXT,
    kind           TEXT NOT NULL CHECK (kind IN ('git_checkout', 'directory')),
    source_path    TEXT NOT NULL,
    base_commit    TEXT,
    read_only      BIGINT NOT NULL DEFAULT 0 CHECK (read_only IN (0, 1)),
    created_at     TEXT NOT NULL,
    PRIMARY KEY (plan_id, resource_name),
    CHECK ((kind = 'git_checkout') = (base_commit IS NOT NULL))
);

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
);

CREATE INDEX sandboxes_by_plan ON sandboxes(plan_id);

CREATE TABLE checkpoints (
    checkpoint_id  TEXT PRIMARY KEY NOT NULL,
    plan_id        TEXT NOT NULL REFERENCES plans(plan_id) ON DELETE CASCADE,
    seq            BIGINT NOT NULL CHECK (seq >= 1),
    step           TEXT,
    decision_id    TEXT,
    label          TEXT NOT NULL,
    files_changed  BIGINT NOT NULL DEFAULT 0,
    tool_call_seq  BIGINT NOT NULL DEFAULT 0,
    created_at     TEXT NOT NULL,
    discarded_at   TEXT,
    UNIQUE (plan_id, seq)
);

CREATE TABLE checkpoint_states (
    checkpoint_id  TEXT NOT NULL REFERENCES checkpoints(checkpoint_id) ON DELETE CASCADE,
    sandbox_id     TEXT NOT NULL REFERENCES sandboxes(sandbox_id) ON DELETE CASCADE,
    commit_oid     TEXT NOT NULL,
    tree_oid       TEXT NOT NULL,
    PRIMARY KEY (checkpoint_id, sandbox_id)
);

CREATE TABLE tool_calls (
    call_id            TEXT PRIMARY KEY NOT NULL,
    plan_id            TEXT NOT NULL REFERENCES plans(plan_id) ON DELETE CASCADE,
    seq                BIGINT NOT NULL CHECK (seq >= 1),
    tool               TEXT NOT NULL,
    parent_skill       TEXT,
    resource_name      TEXT,
    arguments          TEXT NOT NULL,
    outcome            TEXT NOT NULL CHECK (outcome IN ('ok', 'failed', 'denied', 'invalid')),
    error_code         TEXT,
    error_message      TEXT,
    result_summary     TEXT,
    resources_touched  TEXT NOT NULL DEFAULT '[]',
    duration_ms        BIGINT NOT NULL DEFAULT 0,
    started_at         TEXT NOT NULL,
    discarded_at       TEXT,
    UNIQUE (plan_id, seq)
);

CREATE TABLE changes (
    rowid BIGINT GENERATED ALWAYS AS IDENTITY,
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
    old_size       BIGINT,
    new_size       BIGINT,
    created_at     TEXT NOT NULL,
    discarded_at   TEXT
);

CREATE INDEX changes_by_plan ON changes(plan_id);

CREATE TABLE model_calls (
    call_id        TEXT PRIMARY KEY NOT NULL,
    run_id         TEXT NOT NULL,
    plan_id        TEXT REFERENCES plans(plan_id) ON DELETE CASCADE,
    decision_id    TEXT,
    actor          TEXT NOT NULL,
    provider       TEXT NOT NULL,
    model          TEXT NOT NULL,
    turn           BIGINT NOT NULL CHECK (turn >= 1),
    attempts       BIGINT NOT NULL CHECK (attempts >= 1),
    input_tokens   BIGINT NOT NULL DEFAULT 0 CHECK (input_tokens >= 0),
    output_tokens  BIGINT NOT NULL DEFAULT 0 CHECK (output_tokens >= 0),
    usage_reported BIGINT NOT NULL CHECK (usage_reported IN (0, 1)),
    cost_usd       DOUBLE PRECISION CHECK (cost_usd IS NULL OR cost_usd >= 0),
    outcome        TEXT NOT NULL CHECK (outcome IN ('ok', 'error')),
    error_kind     TEXT,
    error_message  TEXT,
    started_at     TEXT NOT NULL,
    duration_ms    BIGINT NOT NULL CHECK (duration_ms >= 0),
    cache_read_tokens BIGINT NOT NULL DEFAULT 0 CHECK (cache_read_tokens >= 0), cache_write_tokens BIGINT NOT NULL DEFAULT 0 CHECK (cache_write_tokens >= 0), stop_reason TEXT, retry BIGINT NOT NULL DEFAULT 0 CHECK (retry IN (0, 1)));

CREATE INDEX model_calls_by_plan ON model_calls(plan_id, decision_id);

CREATE INDEX model_calls_by_run ON model_calls(run_id);

CREATE TABLE events (
    seq        BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
    ts         TEXT NOT NULL,
    plan_id    TEXT REFERENCES plans(plan_id) ON DELETE CASCADE,
    type       TEXT NOT NULL,
    data       TEXT NOT NULL DEFAULT '{}'
);

CREATE INDEX events_by_plan ON events(plan_id, seq);

CREATE TABLE plan_leases (
    plan_id      TEXT PRIMARY KEY NOT NULL REFERENCES plans(plan_id) ON DELETE CASCADE,
    pid          BIGINT NOT NULL,
    host         TEXT NOT NULL,
    kind         TEXT NOT NULL,
    acquired_at  TEXT NOT NULL,
    heartbeat_at TEXT NOT NULL,
    started BIGINT);

CREATE TABLE decisions (
    decision_id             TEXT PRIMARY KEY NOT NULL,
    plan_id                 TEXT NOT NULL REFERENCES plans(plan_id) ON DELETE CASCADE,
    parent_decision_id      TEXT REFERENCES decisions(decision_id),
    sequence_number         BIGINT NOT NULL,
    attempt                 BIGINT NOT NULL DEFAULT 1,
    decision_type           TEXT NOT NULL,
    question                TEXT,
    chosen_option           TEXT NOT NULL,
    alternatives_considered TEXT NOT NULL DEFAULT '[]',
    confidence_score        DOUBLE PRECISION CHECK (confidence_score IS NULL OR (confidence_score >= 0 AND confidence_score <= 1)),
    rationale               TEXT,
    actor_reasoning         TEXT,
    context_snapshot        TEXT NOT NULL DEFAULT '{}',
    step                    TEXT,
    is_correction           BIGINT NOT NULL DEFAULT 0,
    corrects_decision_id    TEXT REFERENCES decisions(decision_id),
    correction_reason       TEXT,
    superseded_by           TEXT REFERENCES decisions(decision_id),
    created_at              TEXT NOT NULL,
    UNIQUE (plan_id, sequence_number)
);

CREATE INDEX decisions_by_parent ON decisions(parent_decision_id);

CREATE TABLE decision_dependencies (
    upstream_decision_id   TEXT NOT NULL REFERENCES decisions(decision_id) ON DELETE CASCADE,
    downstream_decision_id TEXT NOT NULL,
    dependency_type        TEXT NOT NULL CHECK (dependency_type IN ('decision', 'plan', 'artifact', 'step', 'checkpoint')),
    downstream_ref         TEXT NOT NULL,
    PRIMARY KEY (upstream_decision_id, downstream_decision_id, downstream_ref)
);

CREATE TABLE correction_attempts (
    attempt_id                TEXT PRIMARY KEY NOT NULL,
    plan_id                   TEXT NOT NULL REFERENCES plans(plan_id) ON DELETE CASCADE,
    original_decision_id      TEXT NOT NULL REFERENCES decisions(decision_id),
    new_decision_id           TEXT REFERENCES decisions(decision_id),
    original_subtree_snapshot TEXT,
    correction_reason         TEXT,
    status                    TEXT NOT NULL CHECK (status IN ('pending', 'executing', 'completed', 'failed')),
    created_at                TEXT NOT NULL,
    completed_at              TEXT,
    mode TEXT NOT NULL DEFAULT 'revert'
    CHECK (mode IN ('revert', 'append')), plan_attempt BIGINT, result TEXT);

CREATE TABLE plan_bases (
    plan_id        TEXT NOT NULL REFERENCES plans(plan_id) ON DELETE CASCADE,
    resource_name  TEXT NOT NULL,
    project_name   TEXT NOT NULL,
    alias          TEXT,
    kind           TEXT NOT NULL CHECK (kind IN ('git_checkout', 'directory')),
    path           TEXT NOT NULL,
    base_commit    TEXT,
    branch         TEXT,
    read_only      BIGINT NOT NULL CHECK (read_only IN (0, 1)),
    position       BIGINT NOT NULL,
    PRIMARY KEY (plan_id, resource_name)
);

CREATE TABLE plan_steps (
    plan_id            TEXT NOT NULL REFERENCES plans(plan_id) ON DELETE CASCADE,
    decision_id        TEXT NOT NULL REFERENCES decisions(decision_id) ON DELETE CASCADE,
    position           BIGINT NOT NULL,
    status             TEXT NOT NULL CHECK (status IN ('pending', 'running', 'done', 'failed')),
    runs               BIGINT NOT NULL DEFAULT 0,
    start_checkpoints  TEXT NOT NULL DEFAULT '{}',
    end_checkpoints    TEXT NOT NULL DEFAULT '{}',
    output             TEXT,
    error              TEXT,
    started_at         TEXT,
    finished_at        TEXT, replay TEXT,
    PRIMARY KEY (plan_id, decision_id)
);

CREATE INDEX plan_steps_in_order ON plan_steps(plan_id, position);

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
);

CREATE INDEX apply_journals_by_plan ON apply_journals(plan_id, status);

CREATE INDEX correction_attempts_by_plan ON correction_attempts(plan_id, created_at);

CREATE INDEX decision_dependencies_by_downstream ON decision_dependencies(downstream_decision_id);

CREATE INDEX plans_by_root ON plans(root_plan_id);

CREATE TABLE child_plans (
    child_plan_id      TEXT PRIMARY KEY NOT NULL REFERENCES plans(plan_id) ON DELETE CASCADE,
    parent_plan_id     TEXT NOT NULL REFERENCES plans(plan_id) ON DELETE CASCADE,
    spawn_decision_id  TEXT NOT NULL REFERENCES decisions(decision_id) ON DELETE CASCADE,
    parallel_group     TEXT,
    position           BIGINT NOT NULL,
    -- JSON object: resource name -> {"commit": hex, "tree": hex} of the parent's sandbox at the spawn.
    bases              TEXT NOT NULL DEFAULT '{}',
    status             TEXT NOT NULL CHECK (status IN ('pending', 'running', 'succeeded', 'failed', 'cancelled', 'merged', 'conflict')),
    detail             TEXT,
    created_at         TEXT NOT NULL,
    finished_at        TEXT
);

CREATE INDEX child_plans_by_parent ON child_plans(parent_plan_id, position);

CREATE INDEX child_plans_by_spawn ON child_plans(spawn_decision_id);

CREATE TABLE plan_budgets (
    plan_id      TEXT PRIMARY KEY NOT NULL REFERENCES plans(plan_id) ON DELETE CASCADE,
    max_cost_usd DOUBLE PRECISION CHECK (max_cost_usd IS NULL OR max_cost_usd >= 0),
    max_tokens   BIGINT CHECK (max_tokens IS NULL OR max_tokens >= 0),
    source       TEXT NOT NULL,
    updated_at   TEXT NOT NULL
);

CREATE TABLE registered_tools (
    name         TEXT PRIMARY KEY,
    source       TEXT NOT NULL,
    definition   TEXT NOT NULL,
    config_path  TEXT,
    config_hash  TEXT,
    created_at   TEXT NOT NULL,
    updated_at   TEXT NOT NULL
);

CREATE TABLE custom_skills (
    name         TEXT PRIMARY KEY,
    definition   TEXT NOT NULL,
    config_path  TEXT,
    config_hash  TEXT,
    created_at   TEXT NOT NULL,
    updated_at   TEXT NOT NULL
);

CREATE TABLE project_context_policies (
    project_id  TEXT NOT NULL REFERENCES projects(project_id) ON DELETE CASCADE,
    view        TEXT NOT NULL CHECK (view IN ('strategize', 'execute', 'apply', 'default')),
    policy      TEXT NOT NULL,
    updated_at  TEXT NOT NULL,
    PRIMARY KEY (project_id, view)
);

CREATE TABLE plan_context_policies (
    plan_id     TEXT PRIMARY KEY NOT NULL REFERENCES plans(plan_id) ON DELETE CASCADE,
    policies    TEXT NOT NULL,
    frozen_at   TEXT NOT NULL
);

CREATE TABLE review_marks (
    plan_id     TEXT NOT NULL REFERENCES plans(plan_id) ON DELETE CASCADE,
    attempt     BIGINT NOT NULL,
    item_id     TEXT NOT NULL,
    resource    TEXT NOT NULL,
    path        TEXT NOT NULL,
    mark        TEXT NOT NULL CHECK (mark IN ('pending', 'accepted', 'rejected')),
    reason      TEXT,
    updated_at  TEXT NOT NULL,
    PRIMARY KEY (plan_id, attempt, item_id)
);

CREATE TABLE sessions (
    session_id        TEXT PRIMARY KEY,
    name              TEXT,
    actor             TEXT NOT NULL,
    automation_profile TEXT NOT NULL,
    max_history       BIGINT NOT NULL CHECK (max_history > 0),
    summary           TEXT,
    summarized_turns  BIGINT NOT NULL DEFAULT 0,
    imported_from     TEXT,
    created_at        TEXT NOT NULL,
    updated_at        TEXT NOT NULL
);

CREATE UNIQUE INDEX sessions_name ON sessions(name) WHERE name IS NOT NULL;

CREATE TABLE session_messages (
    session_id    TEXT NOT NULL REFERENCES sessions(session_id) ON DELETE CASCADE,
    seq           BIGINT NOT NULL,
    turn          BIGINT NOT NULL,
    role          TEXT NOT NULL CHECK (role IN ('user', 'assistant')),
    content       TEXT NOT NULL,
    actor         TEXT,
    commands      TEXT NOT NULL DEFAULT '[]',
    input_tokens  BIGINT NOT NULL DEFAULT 0,
    output_tokens BIGINT NOT NULL DEFAULT 0,
    cost_usd      DOUBLE PRECISION,
    tool_calls    BIGINT NOT NULL DEFAULT 0,
    created_at    TEXT NOT NULL,
    PRIMARY KEY (session_id, seq)
);

CREATE TABLE session_plans (
    session_id TEXT NOT NULL REFERENCES sessions(session_id) ON DELETE CASCADE,
    plan_id    TEXT NOT NULL,
    turn       BIGINT NOT NULL,
    created_at TEXT NOT NULL,
    PRIMARY KEY (session_id, plan_id)
);

CREATE TABLE resource_types (
    name         TEXT PRIMARY KEY NOT NULL,
    definition   TEXT NOT NULL,
    config_path  TEXT,
    created_at   TEXT NOT NULL,
    updated_at   TEXT NOT NULL
);

CREATE TABLE actor_contexts (
    name          TEXT PRIMARY KEY,
    actor         TEXT,
    imported_from TEXT,
    created_at    TEXT NOT NULL,
    updated_at    TEXT NOT NULL
);

CREATE TABLE actor_context_items (
    context_name TEXT NOT NULL REFERENCES actor_contexts(name) ON DELETE CASCADE ON UPDATE CASCADE,
    seq          BIGINT NOT NULL,
    kind         TEXT NOT NULL CHECK (kind IN ('message', 'file')),
    role         TEXT,
    path         TEXT,
    content      TEXT NOT NULL,
    actor        TEXT,
    run_id       TEXT,
    added_at     TEXT NOT NULL,
    PRIMARY KEY (context_name, seq)
);

CREATE TABLE approvals (
    approval_id    TEXT PRIMARY KEY NOT NULL,
    plan_id        TEXT NOT NULL REFERENCES plans(plan_id) ON DELETE CASCADE,
    kind           TEXT NOT NULL CHECK (kind IN ('phase_gate', 'decision', 'child_spawn', 'transient_failure', 'errored', 'error_recovery', 'budget', 'tool_approval', 'invariant_violation')),
    status         TEXT NOT NULL CHECK (status IN ('pending', 'approved', 'rejected', 'answered', 'withdrawn')),
    summary        TEXT NOT NULL,
    context        TEXT NOT NULL DEFAULT '{}',
    options        TEXT NOT NULL DEFAULT '[]',
    answer_command TEXT NOT NULL,
    answer         TEXT,
    created_at     TEXT NOT NULL,
    resolved_at    TEXT
);

CREATE INDEX approvals_pending ON approvals(status, plan_id);

CREATE TABLE actor_pauses (
    rowid BIGINT GENERATED ALWAYS AS IDENTITY,
    approval_id  TEXT PRIMARY KEY NOT NULL REFERENCES approvals(approval_id) ON DELETE CASCADE,
    plan_id      TEXT NOT NULL REFERENCES plans(plan_id) ON DELETE CASCADE,
    decision_id  TEXT NOT NULL,
    call_id      TEXT NOT NULL,
    transcript   TEXT NOT NULL,
    created_at   TEXT NOT NULL,
    resumed_at   TEXT
);

CREATE INDEX actor_pauses_by_step ON actor_pauses(plan_id, decision_id);

CREATE INDEX decision_dependencies_plan_links
    ON decision_dependencies(upstream_decision_id, downstream_ref)
    WHERE dependency_type = 'plan';

CREATE TABLE step_journal (
    plan_id     TEXT NOT NULL REFERENCES plans(plan_id) ON DELETE CASCADE,
    decision_id TEXT NOT NULL,
    seq         BIGINT NOT NULL CHECK (seq >= 1),
    kind        TEXT NOT NULL CHECK (kind IN
                    ('start', 'model_started', 'model', 'note', 'tool_started', 'tool', 'resumed')),
    entry       TEXT NOT NULL,
    created_at  TEXT NOT NULL,
    PRIMARY KEY (plan_id, decision_id, seq)
);

CREATE TABLE server_tokens (
    token_id     TEXT PRIMARY KEY,
    name         TEXT NOT NULL,
    secret_hash  TEXT NOT NULL UNIQUE,
    created_at   TEXT NOT NULL,
    last_used_at TEXT,
    revoked_at   TEXT
);

CREATE UNIQUE INDEX server_tokens_active_name ON server_tokens(name) WHERE revoked_at IS NULL;
