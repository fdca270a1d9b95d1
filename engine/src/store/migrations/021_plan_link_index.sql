-- `plan tree` looks up the child plans its spawn decisions link to (dependency rows of type
-- `plan`, a few among many): without an index it scanned every dependency row (389,000 in a
-- tree of 100,000 decisions).
CREATE INDEX decision_dependencies_plan_links
    ON decision_dependencies(upstream_decision_id, downstream_ref)
    WHERE dependency_type = 'plan';
