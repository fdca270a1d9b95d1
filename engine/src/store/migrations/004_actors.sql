-- Model calls (actors): one row per call to a provider, for token and cost accounting.
-- Rolled up per plan and per decision. `plan_id` is NULL for calls outside a plan (`actor run`);
-- `decision_id` is the decision (or step) the call served, when known. `cost_usd` is NULL when
-- no price is configured for the model ("unknown"). Token deltas and prompts are never stored.
CREATE TABLE model_calls (
    call_id        TEXT PRIMARY KEY NOT NULL,
    run_id         TEXT NOT NULL,
    plan_id        TEXT REFERENCES plans(plan_id) ON DELETE CASCADE,
    decision_id    TEXT,
    actor          TEXT NOT NULL,
    provider       TEXT NOT NULL,
    model          TEXT NOT NULL,
    turn           INTEGER NOT NULL CHECK (turn >= 1),
    attempts       INTEGER NOT NULL CHECK (attempts >= 1),
    input_tokens   INTEGER NOT NULL DEFAULT 0 CHECK (input_tokens >= 0),
    output_tokens  INTEGER NOT NULL DEFAULT 0 CHECK (output_tokens >= 0),
    usage_reported INTEGER NOT NULL CHECK (usage_reported IN (0, 1)),
    cost_usd       REAL CHECK (cost_usd IS NULL OR cost_usd >= 0),
    outcome        TEXT NOT NULL CHECK (outcome IN ('ok', 'error')),
    error_kind     TEXT,
    error_message  TEXT,
    started_at     TEXT NOT NULL,
    duration_ms    INTEGER NOT NULL CHECK (duration_ms >= 0)
) STRICT;

CREATE INDEX model_calls_by_plan ON model_calls(plan_id, decision_id);
CREATE INDEX model_calls_by_run ON model_calls(run_id);
