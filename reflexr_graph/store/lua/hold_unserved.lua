-- hold_unserved.lua: keep a due run whose graph no live worker serves, or dead-letter it once
-- it has waited out the grace period. A rolling deploy that adds a graph briefly has runs of it
-- and no worker for them: those must wait, not die.
-- Prelude: _lib.lua (KEYS[1..18], ARGV[1..3] as described there).
-- KEYS[1..4] run/ckpt/events/tb  KEYS[5] idem  KEYS[7] rg:dead  KEYS[8] rg:leases
-- KEYS[9] rg:due  KEYS[10..16] status sets  KEYS[17..18] memo, mailbox (expiry)
-- ARGV: store/contracts.py HoldArgs, in its field order:
-- ARGV[1] run_id  ARGV[2] now ms  ARGV[3] scoped idempotency key guess
-- ARGV[4] grace ms  ARGV[5] when to look again (due ms)  ARGV[6] dead retention s
-- ARGV[7] the error message to keep if it is dead-lettered
-- Returns store/contracts.py Unserved: 'began' (the wait for a worker just began) | 'held' | 'dead' | 'skip' (claimed or finished
--   meanwhile) | 'gone' | {'idem', key}

want(OPTIONAL_KEYS, 'unserved_since', 'graph')
if not exists() then
  redis.call('ZREM', K_DUE, RUN_ID)
  return 'gone'
end
local status = field('status')
-- A waiting run is due when its timer fires: it needs a worker then like any queued run.
if status ~= 'queued' and status ~= 'retrying' and status ~= 'waiting' then
  return 'skip'
end
local actual = idem_mismatch()
if actual then
  return {'idem', actual}
end
local since = tonumber(field('unserved_since'))
local began = false
if not since then
  began = true
  since = tonumber(NOW)
  put('unserved_since', NOW)
  emit('waiting_for_worker', 'graph', field('graph'), 'until', since + tonumber(ARGV[4]))
end
if tonumber(NOW) - since >= tonumber(ARGV[4]) then
  put('error_type', 'UnknownGraph')
  put('error', ARGV[7])
  drop('token')
  to_dead('unknown_graph', ARGV[6])
  return 'dead'
end
redis.call('ZADD', K_DUE, ARGV[5], RUN_ID)
return began and 'began' or 'held'
