-- Registered tools and custom skills (spec sections 18 and 19). Definitions are stored as
-- JSON as they were validated at `tool add` / `skill add`; secrets are never stored (MCP
-- server environments name variables as ${NAME}, read when a server starts).
CREATE TABLE registered_tools (
    name         TEXT PRIMARY KEY,
    source       TEXT NOT NULL,
    definition   TEXT NOT NULL,
    config_path  TEXT,
    config_hash  TEXT,
    created_at   TEXT NOT NULL,
    updated_at   TEXT NOT NULL
);

CREATE TABLE custom_skills (
    name         TEXT PRIMARY KEY,
    definition   TEXT NOT NULL,
    config_path  TEXT,
    config_hash  TEXT,
    created_at   TEXT NOT NULL,
    updated_at   TEXT NOT NULL
);
