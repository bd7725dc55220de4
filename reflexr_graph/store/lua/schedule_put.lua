-- schedule_put.lua: add a schedule, or change one (pause, resume), with its next fire time.
-- K_SCHEDULES rg:schedules (name -> definition JSON)  K_NEXT rg:schedule:next (name -> next fire ms)
-- Publishes on a channel of K_NEXT's own name (channels are not keys): a scheduler sleeping until
-- the fire time it read wakes now, as this fire may be sooner (fleet/scheduler.py).
-- KEYS and ARGV: store/registry.py's entry 'schedule_put' (ARGV: contracts.SchedulePutArgs).
-- definition: the definition JSON  next_ms: next fire ms, '' when paused (no fire is due)
-- change: '1' to change an existing schedule, '0' to add a new one
-- Returns 1 (written) | 0 (adding, and the name is taken) | -1 (changing, and there is no such schedule)

local exists = redis.call('HEXISTS', K_SCHEDULES, name) == 1
if change == '1' and not exists then
  return -1
end
if change ~= '1' and exists then
  return 0
end
redis.call('HSET', K_SCHEDULES, name, definition)
if next_ms == '' then
  redis.call('ZREM', K_NEXT, name)
else
  redis.call('ZADD', K_NEXT, next_ms, name)
  redis.call('PUBLISH', K_NEXT, '')
end
return 1
