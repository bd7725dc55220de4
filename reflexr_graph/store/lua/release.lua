-- release.lua: hand a running attempt back on soft shutdown so the run is redelivered soon.
-- Prelude: _lib.lua (KEYS[1..15], ARGV[1..3] as described there).
-- KEYS[1] run  KEYS[3] events  KEYS[8] rg:leases  KEYS[9] rg:due
-- KEYS[11] rg:status:running  KEYS[12] rg:status:retrying
-- ARGV[1] run_id  ARGV[2] now ms  ARGV[3] idempotency key guess (unused)  ARGV[4] token
-- Returns 1 when released, 0 when the token does not own the run.

if not owned_by(ARGV[4]) then
  return 0
end
-- The attempt still counts: a run that is always cut short must still run out of attempts.
to_retrying(NOW, 'shutdown')
return 1
