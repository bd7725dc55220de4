-- create_run.lua: create a queued run, or return the run an idempotency key already names.
-- Prelude: _lib.lua (KEYS[1..18], ARGV[1..3] as described there).
-- KEYS[1] run  KEYS[3] events  KEYS[5] idem  KEYS[6] rg:all  KEYS[9] rg:due
-- KEYS[10] rg:status:queued
-- KEYS[19] run hash of ARGV[10]'s run (the idem key's owner the caller expects), else KEYS[1]
-- ARGV[1] run_id  ARGV[2] now ms  ARGV[3] the scoped idempotency key (graph and key), else the run_id
-- ARGV[4] graph  ARGV[5] inputs JSON  ARGV[6] state JSON or ''  ARGV[7] the caller's
--   idempotency key, '' for none  ARGV[8] max_attempts  ARGV[9] due ms (now + dispatch grace)
-- ARGV[10] run id the caller expects the idem key to name, '' for none
-- ARGV[11] the enqueuer's trace context (W3C headers as JSON), '' for none: every attempt's
--   span joins that trace, so retries and resumes of one run read as one trace
-- ARGV[12] digest of the request's inputs and state
-- Returns {'created', run_id} | {'existing', run_id} | {'conflict', run_id} (the key names a
--   run made from other inputs) | {'retry', current idem owner}

local key, expected, digest = ARGV[7], ARGV[10], ARGV[12]
if key ~= '' then
  local owner = redis.call('GET', K_IDEM) or ''
  -- KEYS[19] must be declared up front, so a changed owner sends the caller round again.
  if owner ~= expected then
    return {'retry', owner}
  end
  -- An idem key can outlive its run by a moment (expiry is lazy); then the key is reusable.
  if owner ~= '' and redis.call('EXISTS', KEYS[19]) == 1 then
    if (redis.call('HGET', KEYS[19], 'digest') or '') ~= digest then
      return {'conflict', owner}
    end
    return {'existing', owner}
  end
end
if exists() then
  return {'existing', RUN_ID}
end
init_run(ARGV[4], ARGV[5], ARGV[6], key ~= '' and key or RUN_ID, key ~= '' and IDEM_GUESS or '',
  digest, ARGV[8])
if ARGV[11] ~= '' then
  redis.call('HSET', K_RUN, 'trace', ARGV[11])
end
set_status('queued')
-- Safety net: if the enqueuer dies before sending the Celery message, the reaper sends it.
redis.call('ZADD', K_DUE, ARGV[9], RUN_ID)
if key ~= '' then
  -- No TTL while the run is active; terminal transitions expire it with the run's keys.
  redis.call('SET', K_IDEM, RUN_ID)
end
return {'created', RUN_ID}
