-- Several reviewers at once (docs/review.md): one mark per plan attempt, item and reviewer, so
-- two humans marking the same hunk each keep their own row (an upsert of one's row never
-- touches the other's), and a fourth mark, `reviewed` (seen, no verdict yet). The local user,
-- who has no name, is the reviewer ''; rows written before keep their reviewer, or '' when
-- they had none.
CREATE TABLE review_marks_new (
    plan_id     TEXT NOT NULL REFERENCES plans(plan_id) ON DELETE CASCADE,
    attempt     INTEGER NOT NULL,
    item_id     TEXT NOT NULL,
    reviewer    TEXT NOT NULL DEFAULT '',
    resource    TEXT NOT NULL,
    path        TEXT NOT NULL,
    mark        TEXT NOT NULL CHECK (mark IN ('pending', 'reviewed', 'accepted', 'rejected')),
    reason      TEXT,
    updated_at  TEXT NOT NULL,
    PRIMARY KEY (plan_id, attempt, item_id, reviewer)
) STRICT;
INSERT INTO review_marks_new
    (plan_id, attempt, item_id, reviewer, resource, path, mark, reason, updated_at)
    SELECT plan_id, attempt, item_id, COALESCE(reviewer, ''), resource, path, mark, reason,
           updated_at
    FROM review_marks;
DROP TABLE review_marks;
ALTER TABLE review_marks_new RENAME TO review_marks;
