-- Several reviewers at once (docs/review.md): one mark per plan attempt, item and reviewer, so
-- two humans marking the same hunk each keep their own row (an upsert of one's row never
-- touches the other's), and a fourth mark, `reviewed` (seen, no verdict yet). The local user,
-- who has no name, is the reviewer ''; rows written before keep their reviewer, or '' when
-- they had none.
UPDATE review_marks SET reviewer = '' WHERE reviewer IS NULL;
ALTER TABLE review_marks ALTER COLUMN reviewer SET DEFAULT '';
ALTER TABLE review_marks ALTER COLUMN reviewer SET NOT NULL;
ALTER TABLE review_marks DROP CONSTRAINT review_marks_pkey;
ALTER TABLE review_marks ADD PRIMARY KEY (plan_id, attempt, item_id, reviewer);
ALTER TABLE review_marks DROP CONSTRAINT review_marks_mark_check;
ALTER TABLE review_marks ADD CONSTRAINT review_marks_mark_check
    CHECK (mark IN ('pending', 'reviewed', 'accepted', 'rejected'));
