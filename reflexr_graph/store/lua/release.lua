-- release.lua: hand a running attempt back on soft shutdown so the run is redelivered soon.
-- Prelude: _lib.lua (KEYS[1..18], ARGV[1..3] as described there).
-- KEYS[1..4] run/ckpt/events/tb  KEYS[5] idem  KEYS[7] rg:dead  KEYS[8] rg:leases
-- KEYS[9] rg:due  KEYS[10..16] status sets  KEYS[17..18] memo, mailbox (expiry)
-- ARGV: store/contracts.py ReleaseArgs, in its field order:
-- ARGV[1] run_id  ARGV[2] now ms  ARGV[3] scoped idempotency key guess  ARGV[4] token
-- ARGV[5] max interruptions  ARGV[6] dead retention s
-- Returns store/contracts.py Released: 1 released, 2 released past the interruption bound (now
-- dead), 3 a cancel was asked (the run ends cancelled instead), 0 the token does not own the
-- run; or {'idem', key}.

want(COUNTERS, OPTIONAL_KEYS, 'error_type')
local guard = write_guard(ARGV[4])
if guard == 'fenced' then
  return 0
elseif guard then
  return guard
end
if cancel_requested() then
  end_requested_cancel()
  return 3
end
-- A deploy's shutdown is not the run's failure: the attempt does not count toward max_attempts,
-- but toward the interruption bound, so a run that is always cut short still ends.
if interrupt(ARGV[5]) then
  to_dead('max_interruptions', ARGV[6])
  return 2
end
-- Why it retries now (no failure: last_failure, the 'failed' field, stays the earlier one's).
put('reason', 'shutdown')
to_retrying(NOW, 'shutdown')
return 1
