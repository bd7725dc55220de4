-- worker_beat.lua: a worker's full beat: it is alive, what it is, and which graphs it serves, in
-- one round trip. Its other beats only refresh its heartbeat (one ZADD: store/workers.py
-- worker_alive); fleet/presence.py makes one a full beat about once a minute.
-- Standalone (no prelude).
-- KEYS[1] rg:workers             live workers, score = heartbeat expiry ms
-- KEYS[2] rg:worker:<name>       this worker's description (JSON), expiring after ARGV[5]
-- KEYS[3..] rg:served:<graph>    one per graph (and graph@version) the worker serves, score =
--                                 the entry's expiry ms (now + ARGV[5])
-- ARGV[1] worker name  ARGV[2] now ms  ARGV[3] heartbeat TTL ms  ARGV[4] description JSON
-- ARGV[5] the description's and served entries' lifetime ms: longer than the gap between two full
-- beats plus a heartbeat TTL, so a live worker's are always there. Readers take a served entry or a
-- description only for a worker live in rg:workers (store/workers.py), so they outliving the
-- heartbeat counts no dead worker.
-- ARGV[6] the served sets' lifetime ms (a set disappears this long after its last worker's last
-- trim)  ARGV[7] '1' to trim: drop the entries of workers that stopped beating and set the served
-- sets' expiry. A set this beat adds the worker to gets its expiry now, so none is left without.
-- Returns Redis's TIME, {seconds, microseconds}: the beat samples the store's clock (clock.py)
-- in the round trip it makes anyway.

local name, now, ttl = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3])
local described, sets = tonumber(ARGV[5]), tonumber(ARGV[6])
local trim = ARGV[7] == '1'
redis.call('ZADD', KEYS[1], now + ttl, name)
redis.call('SET', KEYS[2], ARGV[4], 'PX', described)
if trim then
  redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
end
for i = 3, #KEYS do
  local added = redis.call('ZADD', KEYS[i], now + described, name)
  if trim then
    redis.call('ZREMRANGEBYSCORE', KEYS[i], '-inf', now)
  end
  if trim or added == 1 then
    redis.call('PEXPIRE', KEYS[i], sets)
  end
end
return redis.call('TIME')
