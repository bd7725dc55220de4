-- reap.lua: recover one run whose lease lapsed (its worker died or hung).
-- Prelude: _lib.lua (KEYS[1..15], ARGV[1..3] as described there).
-- KEYS[1..4] run/ckpt/events/tb  KEYS[5] idem  KEYS[7] rg:dead  KEYS[8] rg:leases
-- KEYS[9] rg:due  KEYS[10..15] status sets
-- ARGV[1] run_id  ARGV[2] now ms  ARGV[3] idempotency key guess  ARGV[4] dead retention s
-- Returns 'dead' | 'retrying' | 'skip' (not lapsed any more, or a stale entry) | {'idem', key}

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
local exhausted, retry = out_of_attempts()
if retry then
  return retry
end
abandon()
if exhausted then
  to_dead('abandoned', ARGV[4])
  return 'dead'
end
to_retrying(NOW, 'abandoned')
return 'retrying'
