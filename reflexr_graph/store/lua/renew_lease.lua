-- renew_lease.lua: extend the lease, only for the attempt that still owns the run.
-- Prelude: _lib.lua (KEYS[1..18], ARGV[1..3] as described there).
-- KEYS[1] run  KEYS[8] rg:leases
-- ARGV: store/contracts.py RenewArgs, in its field order:
-- ARGV[1] run_id  ARGV[2] now ms  ARGV[3] idempotency key guess (unused)
-- ARGV[4] token  ARGV[5] new lease expiry ms
-- Returns store/contracts.py Lease: 1 renewed, 2 renewed but a cancel was asked (the attempt stops
-- at its next boundary: cancel.lua), 0 the token lost the run (superseded, reaped or cancelled --now).

if not owned_by(ARGV[4]) then
  return 0
end
redis.call('ZADD', K_LEASES, ARGV[5], RUN_ID)
if cancel_requested() then
  return 2
end
return 1
