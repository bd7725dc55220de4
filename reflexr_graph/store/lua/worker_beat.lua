-- worker_beat.lua: a live worker says it is alive and which graphs it serves, in one round trip.
-- Standalone (no prelude).
-- KEYS[1] rg:workers             live workers, score = heartbeat expiry ms
-- KEYS[2] rg:worker:<name>       this worker's description (JSON), expiring with the heartbeat
-- KEYS[3..] rg:served:<graph>    one per graph the worker serves, score = heartbeat expiry ms
-- ARGV[1] worker name  ARGV[2] now ms  ARGV[3] heartbeat TTL ms  ARGV[4] description JSON
-- Returns the number of graphs recorded. Entries of workers that stopped beating are trimmed here,
-- so every read sees only live workers without a sweeper of its own.

local name, now, ttl = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3])
local expiry = now + ttl
redis.call('ZADD', KEYS[1], expiry, name)
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
redis.call('SET', KEYS[2], ARGV[4], 'PX', ttl)
for i = 3, #KEYS do
  redis.call('ZADD', KEYS[i], expiry, name)
  redis.call('ZREMRANGEBYSCORE', KEYS[i], '-inf', now)
  redis.call('PEXPIRE', KEYS[i], ttl)
end
return #KEYS - 2
