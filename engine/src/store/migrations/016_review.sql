-- Review marks (docs/review.md): per plan attempt, one row per reviewed item of the diff the
-- apply gate shows. An item is a hunk, or a whole file when the file has no text hunks
-- (binary, mode change, pure rename). Ids come from the content, so a hunk a correction
-- changes gets a new id (pending again) and the unchanged ones keep their marks.
CREATE TABLE review_marks (
    plan_id     TEXT NOT NULL REFERENCES plans(plan_id) ON DELETE CASCADE,
    attempt     INTEGER NOT NULL,
    item_id     TEXT NOT NULL,
    resource    TEXT NOT NULL,
    path        TEXT NOT NULL,
    mark        TEXT NOT NULL CHECK (mark IN ('pending', 'accepted', 'rejected')),
    reason      TEXT,
    updated_at  TEXT NOT NULL,
    PRIMARY KEY (plan_id, attempt, item_id)
) STRICT;
