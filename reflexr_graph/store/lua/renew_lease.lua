-- renew_lease.lua: extend the lease, only for the attempt that still owns the run.
-- Standalone (no prelude): every running attempt calls it every few seconds, and it needs two
-- keys and one read.
-- KEYS[1] rg:{<run_id>}:run  run record hash (the owner's token and status, a cancel asked)
-- KEYS[2] rg:leases          running runs, score = lease expiry ms
-- ARGV: store/contracts.py RenewArgs, in its field order:
-- ARGV[1] run_id  ARGV[2] token  ARGV[3] new lease expiry ms  ARGV[4] now ms
-- Returns store/contracts.py Lease: 1 renewed, 2 renewed but a cancel was asked (the attempt stops
-- at its next boundary: cancel.lua), 0 the token lost the run (superseded, reaped or cancelled --now)
-- or its lease lapsed before this renewal landed: a renewal sent before a Redis outage and landing
-- after it must not revive a lease that lapsed inside the outage, or the reaper, finding it lapsed
-- only later, would count an abandoned attempt instead of an interruption.

local owner = redis.call('HMGET', KEYS[1], 'token', 'status', 'cancel')
if ARGV[2] == '' or owner[1] ~= ARGV[2] or owner[2] ~= 'running' then
  return 0
end
local expiry = redis.call('ZSCORE', KEYS[2], ARGV[1])
if not expiry or tonumber(expiry) < tonumber(ARGV[4]) then
  return 0
end
redis.call('ZADD', KEYS[2], ARGV[3], ARGV[1])
if owner[3] then
  return 2
end
return 1
