-- Corrections: replaying the recorded work of unaffected steps, what each correction
-- attempt did, and the look-ups that the affected-set computation and `plan tree` need.

-- For a step a correction keeps but must redo on the rolled-back sandbox: the checkpoints of
-- its earlier run, as {"start": "cp_...", "end": "cp_..."}. Execute three-way merges that
-- delta instead of calling the execution actor; a conflict clears it and the step re-runs.
ALTER TABLE plan_steps ADD COLUMN replay TEXT;

-- `revert` (supersede and recompute) or `append` (a child plan carries the fix).
ALTER TABLE correction_attempts ADD COLUMN mode TEXT NOT NULL DEFAULT 'revert'
    CHECK (mode IN ('revert', 'append'));
-- The plan attempt this correction began (plans.attempt after it).
ALTER TABLE correction_attempts ADD COLUMN plan_attempt INTEGER;
-- What the correction did (JSON): steps re-run, replayed, replays that conflicted, the final
-- checkpoint after it, the child plan of an append.
ALTER TABLE correction_attempts ADD COLUMN result TEXT;
CREATE INDEX correction_attempts_by_plan ON correction_attempts(plan_id, created_at);

CREATE INDEX decision_dependencies_by_downstream ON decision_dependencies(downstream_decision_id);
CREATE INDEX plans_by_root ON plans(root_plan_id);
