-- reschedule_due.lua: after the reaper sent a due run's message, keep its due entry as a
-- safety net, later, unless the run was claimed or rescheduled meanwhile.
-- Why: a message a worker prefetched is lost with that worker if it is SIGKILLed before the
-- claim, and kombu restores it only after the visibility timeout (an hour by default). A run
-- that is not running holds no lease, so only this entry brings it back. Each send doubles
-- the wait, so a run queued behind a long backlog gets a few duplicates, not one per tick;
-- the claim drops duplicates (busy or finished) and resets the count.
-- KEYS and ARGV: store/registry.py's entry 'reschedule_due' (ARGV: contracts.RescheduleArgs).
-- K_DUE: rg:due  K_RUN: rg:{<run_id>}:run
-- read_score: the score the caller read with the entry  now_ms: now ms
-- base_ms: base wait ms  cap_ms: cap ms
-- Returns the wait in ms, or 0 when the entry is gone or has another score (claimed or rescheduled).

local score = redis.call('ZSCORE', K_DUE, run_id)
if not score or tonumber(score) ~= tonumber(read_score) then
  return 0
end
if redis.call('EXISTS', K_RUN) == 0 then
  redis.call('ZREM', K_DUE, run_id)
  return 0
end
local sends = redis.call('HINCRBY', K_RUN, 'dispatches', 1)
local wait = math.min(tonumber(cap_ms), tonumber(base_ms) * 2 ^ (sends - 1))
redis.call('ZADD', K_DUE, tonumber(now_ms) + wait, run_id)
return wait
