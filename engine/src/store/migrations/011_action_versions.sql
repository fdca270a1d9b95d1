-- Actions change in place (`action create --update`): each update raises `version`, and a
-- plan records the version it was made from (its rendered script and text are its own copy
-- already). `action delete` removes an action no plan uses; one that finished plans still
-- point to stays as a row with `deleted_at` set and its name freed.
ALTER TABLE actions ADD COLUMN version INTEGER NOT NULL DEFAULT 1;
ALTER TABLE actions ADD COLUMN deleted_at TEXT;
ALTER TABLE plan_origins ADD COLUMN action_version INTEGER;
