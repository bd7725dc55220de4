-- worker_beat.lua: a live worker says it is alive and which graphs it serves, in one round trip.
-- Standalone (no prelude).
-- KEYS[1] rg:workers             live workers, score = heartbeat expiry ms
-- KEYS[2] rg:worker:<name>       this worker's description (JSON), expiring with the heartbeat
-- KEYS[3..] rg:served:<graph>    one per graph the worker serves, score = heartbeat expiry ms
-- ARGV[1] worker name  ARGV[2] now ms  ARGV[3] heartbeat TTL ms  ARGV[4] description JSON
-- ARGV[5] '1' for a full beat: also trim the entries of workers that stopped beating and set the
-- served sets' expiry (two TTLs). fleet/presence.py makes every third beat a full one: readers
-- take only entries whose score (expiry) is ahead (store/workers.py), so the trim and the expiry
-- only keep memory bounded, and a beat costs one ZADD per graph rather than three commands.
-- Returns the number of graphs recorded. A graph's served set disappears once no worker has
-- served it for two TTLs.

local name, now, ttl = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3])
local full = ARGV[5] == '1'
local expiry = now + ttl
redis.call('ZADD', KEYS[1], expiry, name)
redis.call('SET', KEYS[2], ARGV[4], 'PX', ttl)
if full then
  redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
end
for i = 3, #KEYS do
  redis.call('ZADD', KEYS[i], expiry, name)
  if full then
    redis.call('ZREMRANGEBYSCORE', KEYS[i], '-inf', now)
    redis.call('PEXPIRE', KEYS[i], 2 * ttl)
  end
end
return #KEYS - 2
