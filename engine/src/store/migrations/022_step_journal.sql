-- The journal of a model executor's step (docs/sandbox.md, "Resuming a step"): every model
-- call (the assistant message with its tool calls, and the call's record) and every tool
-- call (its result and, for a call that may have written, the sandbox trees after it) in
-- order, written before the next call is made. A step that starts afresh clears its
-- journal; a step whose driver vanished continues from it at the exact call.
CREATE TABLE step_journal (
    plan_id     TEXT NOT NULL REFERENCES plans(plan_id) ON DELETE CASCADE,
    decision_id TEXT NOT NULL,
    seq         INTEGER NOT NULL CHECK (seq >= 1),
    kind        TEXT NOT NULL CHECK (kind IN
                    ('start', 'model_started', 'model', 'note', 'tool_started', 'tool', 'resumed')),
    entry       TEXT NOT NULL,
    created_at  TEXT NOT NULL,
    PRIMARY KEY (plan_id, decision_id, seq)
) STRICT;

-- A model call made again because the one before it was in flight when its driver vanished.
ALTER TABLE model_calls ADD COLUMN retry INTEGER NOT NULL DEFAULT 0 CHECK (retry IN (0, 1));

