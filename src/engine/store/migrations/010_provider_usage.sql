-- Provider usage detail (spec sections 16 and 27): the prompt cache's share of a call's input
-- tokens (read back at the cache price, or written to the cache), and the provider's stop
-- reason, so that a reply cut by the completion token limit (`length` / `max_tokens`) is on
-- record for the step it served.
ALTER TABLE model_calls ADD COLUMN cache_read_tokens INTEGER NOT NULL DEFAULT 0 CHECK (cache_read_tokens >= 0);
ALTER TABLE model_calls ADD COLUMN cache_write_tokens INTEGER NOT NULL DEFAULT 0 CHECK (cache_write_tokens >= 0);
ALTER TABLE model_calls ADD COLUMN stop_reason TEXT;
