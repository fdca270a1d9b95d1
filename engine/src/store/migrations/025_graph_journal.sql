-- A graph actor's step journals its walk (docs/actors.md, "Graph actors"): a `node_started`
-- entry before each node and a `node_done` entry (the node's output, calls and, when it may
-- have written, the sandbox trees after it) after each node that answered; each llm node's
-- loop journals under `<decision>/<step>:<node>` with the kinds it had. SQLite cannot alter
-- a CHECK constraint, so the table is rebuilt with the two new kinds.
CREATE TABLE step_journal_next (
    plan_id     TEXT NOT NULL REFERENCES plans(plan_id) ON DELETE CASCADE,
    decision_id TEXT NOT NULL,
    seq         INTEGER NOT NULL CHECK (seq >= 1),
    kind        TEXT NOT NULL CHECK (kind IN
                    ('start', 'model_started', 'model', 'note', 'tool_started', 'tool', 'resumed',
                     'node_started', 'node_done')),
    entry       TEXT NOT NULL,
    created_at  TEXT NOT NULL,
    PRIMARY KEY (plan_id, decision_id, seq)
) STRICT;
INSERT INTO step_journal_next (plan_id, decision_id, seq, kind, entry, created_at)
    SELECT plan_id, decision_id, seq, kind, entry, created_at FROM step_journal;
DROP TABLE step_journal;
ALTER TABLE step_journal_next RENAME TO step_journal;
