-- Actor runs outside plans and paused model executors (spec 16 `actor run`, spec 11 decisions asked during Execute).

-- `agents actor run` records each isolated run as a plans row of kind `actor_run`, so that
-- the tool runner, sandboxes, checkpoints and the execution log work unchanged outside a
-- plan. Plan listings and counts show only kind `plan`, and the lifecycle refuses to drive
-- an actor run.
ALTER TABLE plans ADD COLUMN kind TEXT NOT NULL DEFAULT 'plan' CHECK (kind IN ('plan', 'actor_run'));

-- A model execution actor that called `request_decision` is paused: its transcript up to
-- that call waits here with the `decision` approval that asks the user. Whichever process
-- answers (`plan decide`) and resumes the plan continues the transcript with the answer as
-- the result of call `call_id`. `resumed_at` is set once a run has continued from it.
CREATE TABLE actor_pauses (
    approval_id  TEXT PRIMARY KEY NOT NULL REFERENCES approvals(approval_id) ON DELETE CASCADE,
    plan_id      TEXT NOT NULL REFERENCES plans(plan_id) ON DELETE CASCADE,
    decision_id  TEXT NOT NULL,
    call_id      TEXT NOT NULL,
    transcript   TEXT NOT NULL,
    created_at   TEXT NOT NULL,
    resumed_at   TEXT
) STRICT;
CREATE INDEX actor_pauses_by_step ON actor_pauses(plan_id, decision_id);
