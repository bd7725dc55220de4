-- renew_lease.lua: extend the lease, only for the attempt that still owns the run.
-- Standalone (no prelude): every running attempt calls it every few seconds, and it needs two
-- keys and one read.
-- K_RUN rg:{<run_id>}:run  run record hash (the owner's token and status, a cancel asked)
-- K_LEASES rg:leases          running runs, score = lease expiry ms
-- KEYS and ARGV: store/registry.py's entry 'renew_lease' (ARGV: contracts.RenewArgs).
-- lease_expiry_ms: new lease expiry ms  now_ms: now ms
-- Returns store/contracts.py Lease: 1 renewed, 2 renewed but a cancel was asked (the attempt stops
-- at its next boundary: cancel.lua), 0 the token lost the run (superseded, reaped or cancelled --now)
-- or its lease lapsed before this renewal landed: a renewal sent before a Redis outage and landing
-- after it must not revive a lease that lapsed inside the outage, or the reaper, finding it lapsed
-- only later, would count an abandoned attempt instead of an interruption.

local owner = redis.call('HMGET', K_RUN, 'token', 'status', 'cancel')
if token == '' or owner[1] ~= token or owner[2] ~= 'running' then
  return 0
end
local expiry = redis.call('ZSCORE', K_LEASES, run_id)
if not expiry or tonumber(expiry) < tonumber(now_ms) then
  return 0
end
redis.call('ZADD', K_LEASES, lease_expiry_ms, run_id)
if owner[3] then
  return 2
end
return 1
