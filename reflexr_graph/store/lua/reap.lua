-- reap.lua: recover one run whose lease lapsed (its worker died or hung, or Redis was down).
-- Prelude: _lib.lua (KEYS[1..18], ARGV[1..3] as described there).
-- KEYS[1..4] run/ckpt/events/tb  KEYS[5] idem  KEYS[7] rg:dead  KEYS[8] rg:leases
-- KEYS[9] rg:due  KEYS[10..16] status sets  KEYS[17..18] memo, mailbox (expiry)
-- ARGV: store/contracts.py ReapArgs, in its field order:
-- ARGV[1] run_id  ARGV[2] now ms  ARGV[3] idempotency key guess  ARGV[4] dead retention s
-- ARGV[5] ARGV[6] an outage window (from ms, to ms): the reaper saw Redis unreachable in it, or Redis
--   restarted in it (store/recovery.py: reaper_tick, lua/_pass.lua), or '' '': a lease
--   that lapsed inside it was lost to the outage, an interruption rather than a failed attempt
-- ARGV[7] max interruptions
-- ARGV[8] the fleet's lease TTL ms ('' when unknown): the lease's expiry less it is when the
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
-- Every path below dead-letters or cancels the run, which expires KEYS[5]: it must be the run's own key.
local actual = idem_mismatch()
if actual then
  return {'idem', actual}
end
-- Its attempt died before reaching the boundary it was to stop at: nothing more is to run.
if cancel_requested() then
  end_requested_cancel()
  return 'cancelled'
end
local from, to = tonumber(ARGV[5]), tonumber(ARGV[6])
local outage = lease and from and to and tonumber(lease) >= from and tonumber(lease) <= to
if outage then
  abandon('store_unavailable')
  if interrupt(ARGV[7]) then
    to_dead('max_interruptions', ARGV[4])
    return 'dead'
  end
  to_retrying(NOW, 'store_unavailable')
  return 'retrying'
end
local exhausted = out_of_attempts()
local last_beat = nil
if lease and (ARGV[8] or '') ~= '' then
  last_beat = tonumber(lease) - tonumber(ARGV[8])
end
abandon('abandoned', last_beat)
if exhausted then
  to_dead('abandoned', ARGV[4])
  return 'dead'
end
to_retrying(NOW, 'abandoned')
return 'retrying'
