-- schedule_put.lua: add a schedule, or change one (pause, resume), with its next fire time.
-- KEYS[1] rg:schedules (name -> definition JSON)  KEYS[2] rg:schedule:next (name -> next fire ms)
-- Publishes on a channel of KEYS[2]'s own name (channels are not keys): a scheduler sleeping until
-- the fire time it read wakes now, as this fire may be sooner (fleet/scheduler.py).
-- ARGV: store/contracts.py SchedulePutArgs, in its field order:
-- ARGV[1] name  ARGV[2] the definition JSON  ARGV[3] next fire ms, '' when paused (no fire is due)
-- ARGV[4] '1' to change an existing schedule, '0' to add a new one
-- Returns 1 (written) | 0 (adding, and the name is taken) | -1 (changing, and there is no such schedule)

local exists = redis.call('HEXISTS', KEYS[1], ARGV[1]) == 1
if ARGV[4] == '1' and not exists then
  return -1
end
if ARGV[4] ~= '1' and exists then
  return 0
end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
if ARGV[3] == '' then
  redis.call('ZREM', KEYS[2], ARGV[1])
else
  redis.call('ZADD', KEYS[2], ARGV[3], ARGV[1])
  redis.call('PUBLISH', KEYS[2], '')
end
return 1
