-- hold_unserved.lua: keep a due run whose graph no live worker serves, or dead-letter it once
-- it has waited out the grace period. A rolling deploy that adds a graph briefly has runs of it
-- and no worker for them: those must wait, not die.
-- Prelude: _lib.lua (its KEYS and RUN_ID, NOW, IDEM_GUESS as described there).
-- K_RUN/K_CKPT/K_EVENTS/K_TB  K_IDEM idem  K_DEAD rg:dead  K_LEASES rg:leases
-- K_DUE rg:due  STATUS_SETS  K_MEMO, K_MAILBOX (expiry)
-- KEYS and ARGV: store/registry.py's entry 'hold_unserved' (ARGV: contracts.HoldArgs).
-- grace_ms: grace ms  recheck_due_ms: when to look again (due ms)  dead_retention_s: dead retention s
-- message: the error message to keep if it is dead-lettered
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
local since, began = grace_since('unserved_since')
if began then
  emit('waiting_for_worker', 'graph', field('graph'), 'until', since + tonumber(grace_ms))
end
if tonumber(NOW) - since >= tonumber(grace_ms) then
  put('error_type', 'UnknownGraph')
  put('error', message)
  drop('token')
  to_dead('unknown_graph', dead_retention_s)
  return 'dead'
end
redis.call('ZADD', K_DUE, recheck_due_ms, RUN_ID)
return began and 'began' or 'held'
