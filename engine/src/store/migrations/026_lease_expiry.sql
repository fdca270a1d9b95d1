-- How long the owner's heartbeat may be silent before another process may take the plan over
-- (the owner's `lease-expiry-secs` when it took the lease; NULL for leases of older releases,
-- judged by the default).
ALTER TABLE plan_leases ADD COLUMN expiry_secs INTEGER;
