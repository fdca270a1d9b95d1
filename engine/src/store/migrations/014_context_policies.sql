-- Context policies (spec 05/06 `project context set|show`, spec 25): per project and view,
-- and the policy each plan resolved and froze for its phases.
CREATE TABLE project_context_policies (
    project_id  TEXT NOT NULL REFERENCES projects(project_id) ON DELETE CASCADE,
    view        TEXT NOT NULL CHECK (view IN ('strategize', 'execute', 'apply', 'default')),
    policy      TEXT NOT NULL,
    updated_at  TEXT NOT NULL,
    PRIMARY KEY (project_id, view)
) STRICT;

CREATE TABLE plan_context_policies (
    plan_id     TEXT PRIMARY KEY NOT NULL REFERENCES plans(plan_id) ON DELETE CASCADE,
    policies    TEXT NOT NULL,
    frozen_at   TEXT NOT NULL
) STRICT;
