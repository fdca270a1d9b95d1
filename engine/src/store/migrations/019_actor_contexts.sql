-- Actor contexts (spec sections 05 and 06, `actor context ...`, `actor run --context`): a
-- named, persisted conversation and set of files an actor run can continue. Messages are
-- provider-neutral message JSON; files are text read from a `--context-dir`.
CREATE TABLE actor_contexts (
    name          TEXT PRIMARY KEY,
    actor         TEXT,
    imported_from TEXT,
    created_at    TEXT NOT NULL,
    updated_at    TEXT NOT NULL
);

CREATE TABLE actor_context_items (
    context_name TEXT NOT NULL REFERENCES actor_contexts(name) ON DELETE CASCADE ON UPDATE CASCADE,
    seq          INTEGER NOT NULL,
    kind         TEXT NOT NULL CHECK (kind IN ('message', 'file')),
    role         TEXT,
    path         TEXT,
    content      TEXT NOT NULL,
    actor        TEXT,
    run_id       TEXT,
    added_at     TEXT NOT NULL,
    PRIMARY KEY (context_name, seq)
);
