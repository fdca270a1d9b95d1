-- Provider usage detail (spec sections 16 and 27): the prompt cache's share of a call's input
-- tokens (read back at the cache price, or written to the cache), and the provider's stop
-- reason, so that a reply cut by the completion token limit (`length` / `max_tokens`) is on
-- record for the step it served.
ALTER TABLE model_calls ADD COLUMN cache_read_tokens INTEGER NOT NULL DEFAULT 0 CHECK (cache_read_tokens >= 0);
ALTER TABLE model_calls ADD COLUMN cache_write_tokens INTEGER NOT NULL DEFAULT 0 CHECK (cache_write_tokens >= 0);
ALTER TABLE model_calls ADD COLUMN stop_reason TEXT;

-- A plan's budget (spec section 27): the most it may spend on model calls, in US dollars and
-- in tokens. Checked before every model call; a call that would pass it raises a `budget`
-- approval, answered with higher limits (`plan decide APR --max-cost-usd X`).
CREATE TABLE plan_budgets (
    plan_id      TEXT PRIMARY KEY NOT NULL REFERENCES plans(plan_id) ON DELETE CASCADE,
    max_cost_usd REAL CHECK (max_cost_usd IS NULL OR max_cost_usd >= 0),
    max_tokens   INTEGER CHECK (max_tokens IS NULL OR max_tokens >= 0),
    source       TEXT NOT NULL,
    updated_at   TEXT NOT NULL
) STRICT;

-- A budget that would be exceeded asks a human to raise it: approvals gain the kind `budget`.
-- SQLite cannot change a CHECK constraint, so the table is rebuilt. `actor_pauses` refers to
-- it, so its rows are set aside and the table is made again around the rebuild.
CREATE TABLE actor_pauses_keep AS SELECT * FROM actor_pauses;
DROP TABLE actor_pauses;
CREATE TABLE approvals_new (
    approval_id    TEXT PRIMARY KEY NOT NULL,
    plan_id        TEXT NOT NULL REFERENCES plans(plan_id) ON DELETE CASCADE,
    kind           TEXT NOT NULL CHECK (kind IN ('phase_gate', 'decision', 'child_spawn', 'transient_failure', 'errored', 'error_recovery', 'budget')),
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
CREATE TABLE actor_pauses (
    approval_id  TEXT PRIMARY KEY NOT NULL REFERENCES approvals(approval_id) ON DELETE CASCADE,
    plan_id      TEXT NOT NULL REFERENCES plans(plan_id) ON DELETE CASCADE,
    decision_id  TEXT NOT NULL,
    call_id      TEXT NOT NULL,
    transcript   TEXT NOT NULL,
    created_at   TEXT NOT NULL,
    resumed_at   TEXT
) STRICT;
INSERT INTO actor_pauses SELECT approval_id, plan_id, decision_id, call_id, transcript, created_at, resumed_at FROM actor_pauses_keep;
DROP TABLE actor_pauses_keep;
CREATE INDEX actor_pauses_by_step ON actor_pauses(plan_id, decision_id);
