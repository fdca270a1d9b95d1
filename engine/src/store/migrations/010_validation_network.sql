-- A validation may keep the host network (`validation add --network`); by default it runs in
-- a network namespace of its own with only loopback.
ALTER TABLE project_validations ADD COLUMN network INTEGER NOT NULL DEFAULT 0;
