-- A graph actor's step journals its walk (SQLite's 025_graph_journal.sql): the entry kinds
-- gain `node_started` and `node_done`.
ALTER TABLE step_journal DROP CONSTRAINT step_journal_kind_check;
ALTER TABLE step_journal ADD CONSTRAINT step_journal_kind_check CHECK (kind IN
    ('start', 'model_started', 'model', 'note', 'tool_started', 'tool', 'resumed',
     'node_started', 'node_done'));
