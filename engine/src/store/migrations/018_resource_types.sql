-- Custom resource types (spec section 23 "Custom Resource Types"): the resolved definition
-- as JSON (handler, sandbox strategy, command-line arguments, child rules, capabilities).
-- Built-in types are compiled in and never stored.
CREATE TABLE resource_types (
    name         TEXT PRIMARY KEY NOT NULL,
    definition   TEXT NOT NULL,
    config_path  TEXT,
    created_at   TEXT NOT NULL,
    updated_at   TEXT NOT NULL
) STRICT;
