-- Bearer tokens of `agents server` (spec section 21): only a SHA-256 of each secret is kept; the
-- secret is shown once when the token is created. A revoked token keeps its row (who had
-- access, and until when).
CREATE TABLE server_tokens (
    token_id     TEXT PRIMARY KEY,
    name         TEXT NOT NULL,
    secret_hash  TEXT NOT NULL UNIQUE,
    created_at   TEXT NOT NULL,
    last_used_at TEXT,
    revoked_at   TEXT
);
CREATE UNIQUE INDEX server_tokens_active_name ON server_tokens(name) WHERE revoked_at IS NULL;
