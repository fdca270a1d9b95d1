-- Sessions (spec section 20): a user's thread with the orchestrator, with stable ids,
-- its messages (one user and one assistant message per turn), the commands each turn ran,
-- the plans it created, and a recorded summary of turns older than max_history.
CREATE TABLE sessions (
    session_id        TEXT PRIMARY KEY,
    name              TEXT,
    actor             TEXT NOT NULL,
    automation_profile TEXT NOT NULL,
    max_history       INTEGER NOT NULL CHECK (max_history > 0),
    summary           TEXT,
    summarized_turns  INTEGER NOT NULL DEFAULT 0,
    imported_from     TEXT,
    created_at        TEXT NOT NULL,
    updated_at        TEXT NOT NULL
);

CREATE UNIQUE INDEX sessions_name ON sessions(name) WHERE name IS NOT NULL;

CREATE TABLE session_messages (
    session_id    TEXT NOT NULL REFERENCES sessions(session_id) ON DELETE CASCADE,
    seq           INTEGER NOT NULL,
    turn          INTEGER NOT NULL,
    role          TEXT NOT NULL CHECK (role IN ('user', 'assistant')),
    content       TEXT NOT NULL,
    actor         TEXT,
    commands      TEXT NOT NULL DEFAULT '[]',
    input_tokens  INTEGER NOT NULL DEFAULT 0,
    output_tokens INTEGER NOT NULL DEFAULT 0,
    cost_usd      REAL,
    tool_calls    INTEGER NOT NULL DEFAULT 0,
    created_at    TEXT NOT NULL,
    PRIMARY KEY (session_id, seq)
);

CREATE TABLE session_plans (
    session_id TEXT NOT NULL REFERENCES sessions(session_id) ON DELETE CASCADE,
    plan_id    TEXT NOT NULL,
    turn       INTEGER NOT NULL,
    created_at TEXT NOT NULL,
    PRIMARY KEY (session_id, plan_id)
);
