-- reschedule_due.lua: after the reaper sent a due run's message, keep its due entry as a
-- safety net, later, unless the run was claimed or rescheduled meanwhile.
-- Why: a message a worker prefetched is lost with that worker if it is SIGKILLed before the
-- claim, and kombu restores it only after the visibility timeout (an hour by default). A run
-- that is not running holds no lease, so only this entry brings it back. Each send doubles
-- the wait, so a run queued behind a long backlog gets a few duplicates, not one per tick;
-- the claim drops duplicates (busy or finished) and resets the count.
-- KEYS[1] rg:due  KEYS[2] rg:{<run_id>}:run
-- ARGV[1] run_id  ARGV[2] the score the caller read with the entry  ARGV[3] now ms
-- ARGV[4] base wait ms  ARGV[5] cap ms
-- Returns the wait in ms, or 0 when the entry is gone or has another score (claimed or rescheduled).

local score = redis.call('ZSCORE', KEYS[1], ARGV[1])
if not score or tonumber(score) ~= tonumber(ARGV[2]) then
  return 0
end
if redis.call('EXISTS', KEYS[2]) == 0 then
  redis.call('ZREM', KEYS[1], ARGV[1])
  return 0
end
local sends = redis.call('HINCRBY', KEYS[2], 'dispatches', 1)
local wait = math.min(tonumber(ARGV[5]), tonumber(ARGV[4]) * 2 ^ (sends - 1))
redis.call('ZADD', KEYS[1], tonumber(ARGV[3]) + wait, ARGV[1])
return wait
