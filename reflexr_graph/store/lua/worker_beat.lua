-- worker_beat.lua: a worker's full beat: it is alive, what it is, and which graphs it serves, in
-- one round trip. Its other beats only refresh its heartbeat (one ZADD: store/workers.py
-- worker_alive); fleet/presence.py makes one a full beat about once a minute.
-- Standalone (no prelude).
-- KEYS and ARGV: store/registry.py's entry 'worker_beat' (ARGV: contracts.WorkerBeatArgs).
-- K_WORKERS: rg:workers             live workers, score = heartbeat expiry ms
-- K_WORKER: rg:worker:<name>       this worker's description (JSON), expiring after described_ms
--     rg:served:<graph>    one per graph (and graph@version) the worker serves, score =
--                                 the entry's expiry ms (now + described_ms)
-- name: worker name  now_ms: now ms  ttl_ms: heartbeat TTL ms  description: JSON
-- described_ms: the description's and served entries' lifetime ms: longer than the gap between two full
-- beats plus a heartbeat TTL, so a live worker's are always there. Readers take a served entry or a
-- description: only for a worker live in rg:workers (store/workers.py), so they outliving the
-- heartbeat counts no dead worker.
-- sets_ms: the served sets' lifetime ms (a set disappears this long after its last worker's last
-- trim)  trim: '1' to trim: drop the entries of workers that stopped beating and set the served
-- sets' expiry. A set this beat adds the worker to gets its expiry now, so none is left without.
-- Returns Redis's TIME, {seconds, microseconds}: the beat samples the store's clock (clock.py)
-- in the round trip it makes anyway.

local now, ttl = tonumber(now_ms), tonumber(ttl_ms)
local described, sets = tonumber(described_ms), tonumber(sets_ms)
local trims = trim == '1'
redis.call('ZADD', K_WORKERS, now + ttl, name)
redis.call('SET', K_WORKER, description, 'PX', described)
if trims then
  redis.call('ZREMRANGEBYSCORE', K_WORKERS, '-inf', now)
end
for i = served_from, #KEYS do
  local added = redis.call('ZADD', KEYS[i], now + described, name)
  if trims then
    redis.call('ZREMRANGEBYSCORE', KEYS[i], '-inf', now)
  end
  if trims or added == 1 then
    redis.call('PEXPIRE', KEYS[i], sets)
  end
end
return redis.call('TIME')
