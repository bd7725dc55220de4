-- release.lua: hand a running attempt back on soft shutdown so the run is redelivered soon.
-- Prelude: _lib.lua (its KEYS and RUN_ID, NOW, IDEM_GUESS as described there).
-- K_RUN/K_CKPT/K_EVENTS/K_TB  K_IDEM idem  K_DEAD rg:dead  K_LEASES rg:leases
-- K_DUE rg:due  STATUS_SETS  K_MEMO, K_MAILBOX (expiry)
-- KEYS and ARGV: store/registry.py's entry 'release' (ARGV: contracts.ReleaseArgs).
-- max_interruptions: max interruptions  dead_retention_s: dead retention s
-- Returns store/contracts.py Released: 1 released, 2 released past the interruption bound (now
-- dead), 3 a cancel was asked (the run ends cancelled instead), 0 the token does not own the
-- run; or {'idem', key}.

want(COUNTERS, OPTIONAL_KEYS, 'error_type')
local guard = write_guard(token)
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
if interrupt(max_interruptions) then
  to_dead('max_interruptions', dead_retention_s)
  return 2
end
-- Why it retries now (no failure: last_failure, the 'failed' field, stays the earlier one's).
put('reason', 'shutdown')
to_retrying(NOW, 'shutdown')
return 1
