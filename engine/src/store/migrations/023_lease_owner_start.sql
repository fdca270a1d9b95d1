-- The lease owner's start time (clock ticks after boot, `/proc/PID/stat`): a live process
-- that has the owner's pid but another start time is not the owner (the pid was recycled).
ALTER TABLE plan_leases ADD COLUMN started INTEGER;
