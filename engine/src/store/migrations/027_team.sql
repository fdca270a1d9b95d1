-- Team mode (spec sections 15, 21, 22): the server's users and organizations, who belongs to
-- which organization in which role, the policies an organization sets, the humans behind each
-- record (attribution), and the tamper-evident audit log.

-- A user's name is also their personal namespace (`alice/`); users and organizations share
-- one space of names, checked by the engine.
CREATE TABLE users (
    name          TEXT PRIMARY KEY NOT NULL,
    server_admin  INTEGER NOT NULL DEFAULT 0,
    created_at    TEXT NOT NULL
);

CREATE TABLE orgs (
    name        TEXT PRIMARY KEY NOT NULL,
    created_at  TEXT NOT NULL
);

CREATE TABLE org_members (
    org        TEXT NOT NULL REFERENCES orgs(name) ON DELETE CASCADE,
    user_name  TEXT NOT NULL REFERENCES users(name) ON DELETE CASCADE,
    role       TEXT NOT NULL CHECK (role IN ('owner', 'maintainer', 'member', 'viewer')),
    added_at   TEXT NOT NULL,
    PRIMARY KEY (org, user_name)
);

-- Whose token it is, and until when it works (NULL: until revoked). Tokens of older releases
-- have no user: the server treats them as its administrators' (D-team-1).
ALTER TABLE server_tokens ADD COLUMN user_name TEXT;
ALTER TABLE server_tokens ADD COLUMN expires_at TEXT;

-- An organization's policy (spec 22, "Approval Gates by Phase"), as the YAML it was set with.
CREATE TABLE org_policies (
    org         TEXT PRIMARY KEY NOT NULL REFERENCES orgs(name) ON DELETE CASCADE,
    policy      TEXT NOT NULL,
    updated_at  TEXT NOT NULL,
    updated_by  TEXT NOT NULL
);

-- Every mutation and every denied request, each row chained to the one before by hash; the
-- namespace is the target's (an organization's rows are read by its owners).
CREATE TABLE audit_log (
    seq        INTEGER PRIMARY KEY AUTOINCREMENT,
    at         TEXT NOT NULL,
    user_name  TEXT,
    operation  TEXT NOT NULL,
    namespace  TEXT,
    target     TEXT,
    address    TEXT,
    allowed    INTEGER NOT NULL,
    reason     TEXT,
    prev_hash  TEXT NOT NULL,
    hash       TEXT NOT NULL
);

-- Attribution: the human who created a plan, and the human who last drove it (started,
-- resumed, approved, corrected or applied it): an agent's tool call is attributed to them.
ALTER TABLE plans ADD COLUMN created_by TEXT;
ALTER TABLE plans ADD COLUMN driven_by TEXT;
-- The human behind each event.
ALTER TABLE events ADD COLUMN caused_by TEXT;
-- Who answered an approval, and who set a review mark.
ALTER TABLE approvals ADD COLUMN decided_by TEXT;
ALTER TABLE review_marks ADD COLUMN reviewer TEXT;

-- Approvals of a plan's Apply by distinct humans (an organization's `apply.min_approvals`).
CREATE TABLE apply_approvals (
    plan_id      TEXT NOT NULL REFERENCES plans(plan_id) ON DELETE CASCADE,
    user_name    TEXT NOT NULL,
    approved_at  TEXT NOT NULL,
    PRIMARY KEY (plan_id, user_name)
);
