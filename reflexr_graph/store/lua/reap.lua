-- reap.lua: recover one run whose lease lapsed (its worker died or hung, or Redis was down).
-- Prelude: _lib.lua (its KEYS and RUN_ID, NOW, IDEM_GUESS as described there).
-- K_RUN/K_CKPT/K_EVENTS/K_TB  K_IDEM idem  K_DEAD rg:dead  K_LEASES rg:leases
-- K_DUE rg:due  STATUS_SETS  K_MEMO, K_MAILBOX (expiry)
-- KEYS and ARGV: store/registry.py's entry 'reap' (ARGV: contracts.ReapArgs).
-- dead_retention_s: dead retention s
-- outage_from_ms: outage_to_ms an outage window (from ms, to ms): the reaper saw Redis unreachable in it, or Redis
--   restarted in it (store/recovery.py: reaper_tick, lua/_pass.lua), or '' '': a lease
--   that lapsed inside it was lost to the outage, an interruption rather than a failed attempt
-- max_interruptions: max interruptions
-- lease_ttl_ms: the fleet's lease TTL ms ('' when unknown): the lease's expiry less it is when the
--   attempt's heartbeat last renewed it, told on its attempt_failed event as last_beat_at
-- Returns store/contracts.py Reaped: 'dead' | 'retrying' | 'cancelled' (a cancel was asked of the run) | 'skip' (not lapsed
--   any more, or a stale entry) | {'idem', key}

want(COUNTERS, OPTIONAL_KEYS, 'error_type')
if field('status') ~= 'running' then
  -- A lease entry without a running run (e.g. its record expired) is dropped.
  redis.call('ZREM', K_LEASES, RUN_ID)
  return 'skip'
end
-- The reaper read the lease before calling: it may have been renewed since.
local lease = redis.call('ZSCORE', K_LEASES, RUN_ID)
if lease and tonumber(lease) > tonumber(NOW) then
  return 'skip'
end
-- Every path below dead-letters or cancels the run, which expires K_IDEM: it must be the run's own key.
local actual = idem_mismatch()
if actual then
  return {'idem', actual}
end
-- Its attempt died before reaching the boundary it was to stop at: nothing more is to run.
if cancel_requested() then
  end_requested_cancel()
  return 'cancelled'
end
local from, to = tonumber(outage_from_ms), tonumber(outage_to_ms)
local outage = lease and from and to and tonumber(lease) >= from and tonumber(lease) <= to
if outage then
  abandon('store_unavailable')
  if interrupt(max_interruptions) then
    to_dead('max_interruptions', dead_retention_s)
    return 'dead'
  end
  to_retrying(NOW, 'store_unavailable')
  return 'retrying'
end
local exhausted = out_of_attempts()
local last_beat = nil
if lease and (lease_ttl_ms or '') ~= '' then
  last_beat = tonumber(lease) - tonumber(lease_ttl_ms)
end
abandon('abandoned', last_beat)
if exhausted then
  to_dead('abandoned', dead_retention_s)
  return 'dead'
end
to_retrying(NOW, 'abandoned')
return 'retrying'
