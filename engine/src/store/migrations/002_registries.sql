-- Registries (spec sections 09, 12, 14, 16, 23, 27): resources and their DAG,
-- projects with linked resources and validations, actors, actions, invariants, custom
-- automation profiles, and the links from plans to projects and to their action.

-- Resources (spec 23). `owner_id` is the registered resource whose discovery created this row
-- (NULL for resources a user registered); removing the owner removes what it discovered.
CREATE TABLE resources (
    resource_id  TEXT PRIMARY KEY NOT NULL,
    name         TEXT NOT NULL UNIQUE,
    type_name    TEXT NOT NULL,
    description  TEXT,
    properties   TEXT NOT NULL DEFAULT '{}',
    owner_id     TEXT REFERENCES resources(resource_id) ON DELETE CASCADE,
    created_at   TEXT NOT NULL,
    updated_at   TEXT NOT NULL
) STRICT;
CREATE INDEX resources_by_owner ON resources(owner_id);
CREATE INDEX resources_by_type ON resources(type_name);

-- Parent/child edges of the resource DAG; `auto` edges came from discovery and cannot be
-- unlinked by hand. Cycles are refused by the registry before insert.
CREATE TABLE resource_links (
    parent_id   TEXT NOT NULL REFERENCES resources(resource_id) ON DELETE CASCADE,
    child_id    TEXT NOT NULL REFERENCES resources(resource_id) ON DELETE CASCADE,
    auto        INTEGER NOT NULL CHECK (auto IN (0, 1)),
    position    INTEGER NOT NULL DEFAULT 0,
    created_at  TEXT NOT NULL,
    PRIMARY KEY (parent_id, child_id),
    CHECK (parent_id != child_id)
) STRICT;
CREATE INDEX resource_links_by_child ON resource_links(child_id);

-- Projects (spec 14). `automation_profile` is set by
-- `agents config set automation-profile --project P NAME` (NULL: inherits global).
CREATE TABLE projects (
    project_id          TEXT PRIMARY KEY NOT NULL,
    name                TEXT NOT NULL UNIQUE,
    description         TEXT,
    invariant_actor     TEXT,
    automation_profile  TEXT,
    created_at          TEXT NOT NULL,
    updated_at          TEXT NOT NULL
) STRICT;

CREATE TABLE project_resources (
    project_id   TEXT NOT NULL REFERENCES projects(project_id) ON DELETE CASCADE,
    resource_id  TEXT NOT NULL REFERENCES resources(resource_id) ON DELETE RESTRICT,
    alias        TEXT,
    read_only    INTEGER NOT NULL DEFAULT 0 CHECK (read_only IN (0, 1)),
    position     INTEGER NOT NULL,
    created_at   TEXT NOT NULL,
    PRIMARY KEY (project_id, resource_id),
    UNIQUE (project_id, alias)
) STRICT;
CREATE INDEX project_resources_by_resource ON project_resources(resource_id);

CREATE TABLE project_validations (
    validation_id  TEXT PRIMARY KEY NOT NULL,
    project_id     TEXT NOT NULL REFERENCES projects(project_id) ON DELETE CASCADE,
    command        TEXT NOT NULL,
    description    TEXT,
    required       INTEGER NOT NULL CHECK (required IN (0, 1)),
    timeout_secs   INTEGER NOT NULL CHECK (timeout_secs > 0),
    resource_id    TEXT REFERENCES resources(resource_id) ON DELETE RESTRICT,
    created_at     TEXT NOT NULL
) STRICT;
CREATE INDEX project_validations_by_project ON project_validations(project_id);

-- Custom actors (spec 16). `definition` is the validated YAML as JSON.
CREATE TABLE actors (
    actor_id     TEXT PRIMARY KEY NOT NULL,
    name         TEXT NOT NULL UNIQUE,
    actor_type   TEXT NOT NULL CHECK (actor_type IN ('llm', 'graph')),
    model        TEXT,
    description  TEXT,
    unsafe       INTEGER NOT NULL DEFAULT 0 CHECK (unsafe IN (0, 1)),
    definition   TEXT NOT NULL,
    config_path  TEXT,
    config_hash  TEXT,
    created_at   TEXT NOT NULL,
    updated_at   TEXT NOT NULL
) STRICT;

-- Actions (spec 09). Structured fields are JSON text.
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
    reusable            INTEGER NOT NULL CHECK (reusable IN (0, 1)),
    read_only           INTEGER NOT NULL CHECK (read_only IN (0, 1)),
    arguments           TEXT NOT NULL DEFAULT '[]',
    script              TEXT,
    sandbox             TEXT,
    config_path         TEXT,
    created_at          TEXT NOT NULL,
    updated_at          TEXT NOT NULL,
    archived_at         TEXT
) STRICT;

-- Invariants (spec 12). Definition rows: global (no target), project, action (action_id,
-- plan_id NULL), plan (plan_id). Rows an action carried into a plan at `plan use` have
-- scope 'action' with both action_id and plan_id set. `normalized` is the text used to drop
-- duplicates; `key` marks explicit conflicts.
CREATE TABLE invariants (
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
) STRICT;
CREATE INDEX invariants_by_project ON invariants(project_id);
CREATE INDEX invariants_by_action ON invariants(action_id);
CREATE INDEX invariants_by_plan ON invariants(plan_id);

-- Custom automation profiles (spec 27); the six built-ins are compiled in.
CREATE TABLE automation_profiles (
    profile_id   TEXT PRIMARY KEY NOT NULL,
    name         TEXT NOT NULL UNIQUE,
    description  TEXT,
    flags        TEXT NOT NULL,
    config_path  TEXT,
    created_at   TEXT NOT NULL,
    updated_at   TEXT NOT NULL
) STRICT;

-- Target projects of a plan, in order (the plan's `project_links` JSON keeps the names even
-- after a project is deleted).
CREATE TABLE plan_projects (
    plan_id     TEXT NOT NULL REFERENCES plans(plan_id) ON DELETE CASCADE,
    project_id  TEXT NOT NULL REFERENCES projects(project_id) ON DELETE CASCADE,
    position    INTEGER NOT NULL,
    PRIMARY KEY (plan_id, project_id)
) STRICT;
CREATE INDEX plan_projects_by_project ON plan_projects(project_id);

-- What a plan was made from: the action, where its automation profile came from, and the
-- action's script and sandbox with the plan's argument values filled in.
CREATE TABLE plan_origins (
    plan_id         TEXT PRIMARY KEY NOT NULL REFERENCES plans(plan_id) ON DELETE CASCADE,
    action_id       TEXT NOT NULL REFERENCES actions(action_id) ON DELETE RESTRICT,
    profile_source  TEXT NOT NULL,
    read_only       INTEGER NOT NULL CHECK (read_only IN (0, 1)),
    script          TEXT,
    sandbox         TEXT
) STRICT;
