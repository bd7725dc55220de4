-- limit_acquire.lua: take a rate token and a concurrency slot of one limit key before a step
-- runs, or say how long to wait. One round trip, fenced by the attempt's token, so a stale
-- attempt spends nothing of a budget the fleet shares.
-- Standalone (no prelude). KEYS from keys.limit_keys():
-- KEYS[1] rg:{<run_id>}:run      the owner's token and status; limit_waits, limit_wait_ms, and
--                                 limit_since(_key): when a wait of a released run began (wait.lua)
-- KEYS[2] rg:{<run_id>}:events   a limit_waited event when a grant ends a wait
-- KEYS[3] rg:limits              key -> configuration JSON, for `reflexr-graph limits`
-- KEYS[4] rg:limit:{<key>}:tat   GCRA theoretical arrival time, epoch ms
-- KEYS[5] rg:limit:{<key>}:slots slots held, score = lease expiry ms
-- KEYS[6] rg:limit:{<key>}:stats granted, denied, waited_ms
-- ARGV: store/contracts.py LimitArgs, in its field order:
-- ARGV[1] token  ARGV[2] now ms  ARGV[3] limit key  ARGV[4] emission interval ms (0: no rate)
-- ARGV[5] burst  ARGV[6] concurrency (0: none)  ARGV[7] slot member  ARGV[8] slot expiry ms
-- ARGV[9] node  ARGV[10] ms the step waited so far  ARGV[11] configuration JSON
-- ARGV[12] event stream cap  ARGV[13] the longest rate wait to reserve, ms
-- Returns store/contracts.py LimitReply: {'fenced'} |
--   {'ok', slots in use, ms to wait before starting (a reserved rate token)} |
--   {'denied', slots in use, ms until the rate allows (0: a slot is missing, poll)}

local owner = redis.call('HMGET', KEYS[1], 'token', 'status', 'limit_since', 'limit_since_key')
if ARGV[1] == '' or owner[1] ~= ARGV[1] or owner[2] ~= 'running' then
  return {'fenced'}
end
local now = tonumber(ARGV[2])
local emission, burst, concurrency = tonumber(ARGV[4]), tonumber(ARGV[5]), tonumber(ARGV[6])
redis.call('HSET', KEYS[3], ARGV[3], ARGV[11])

-- Slots are leases: one whose holder stopped renewing it (a killed worker) lapses here.
local in_use = 0
if concurrency > 0 then
  redis.call('ZREMRANGEBYSCORE', KEYS[5], '-inf', now)
  in_use = redis.call('ZCARD', KEYS[5])
  if in_use >= concurrency then
    redis.call('HINCRBY', KEYS[6], 'denied', 1)
    return {'denied', in_use, 0}
  end
end

-- GCRA: each grant moves the theoretical arrival time one emission interval on; a request may
-- come at most (burst - 1) intervals ahead of it. A request that comes earlier than that, by no
-- more than ARGV[13], reserves its token and is told when to start: one round trip per step,
-- and waiters never poll a rate. The slot is checked first, so a step that finds no slot spends
-- no token.
local wait = 0
if emission > 0 then
  local tat = tonumber(redis.call('GET', KEYS[4]) or '0') or 0
  if tat < now then
    tat = now
  end
  local tolerance = emission * (burst - 1)
  wait = math.max(0, math.ceil(tat - now - tolerance))
  if wait > tonumber(ARGV[13]) then
    redis.call('HINCRBY', KEYS[6], 'denied', 1)
    return {'denied', in_use, wait}
  end
  tat = tat + emission
  redis.call('SET', KEYS[4], string.format('%.3f', tat), 'PX', math.ceil(tat - now) + 1000)
end

if concurrency > 0 then
  redis.call('ZADD', KEYS[5], ARGV[8], ARGV[7])
  in_use = in_use + 1
end
redis.call('HINCRBY', KEYS[6], 'granted', 1)
local waited = (tonumber(ARGV[10]) or 0) + wait
-- The run was released to wait for this key: the wait began before this attempt, and counts
-- from then, through every release, once.
if owner[3] and owner[4] == ARGV[3] then
  waited = now + wait - tonumber(owner[3])
  redis.call('HDEL', KEYS[1], 'limit_since', 'limit_since_key')
end
if wait > 0 then
  redis.call('HINCRBY', KEYS[6], 'reserved', 1)
end
if waited > 0 then
  redis.call('HINCRBY', KEYS[6], 'waited_ms', waited)
  redis.call('HINCRBY', KEYS[1], 'limit_waits', 1)
  redis.call('HINCRBY', KEYS[1], 'limit_wait_ms', waited)
  -- Stored compactly, as _lib.lua's emit() writes events (store/event_codec.py, code 'l'): the
  -- time, node, wait and key joined by the unit separator; the key last, as the one a user names.
  redis.call('XADD', KEYS[2], 'MAXLEN', '~', ARGV[12], '*', 'e',
    table.concat({'l', ARGV[2], ARGV[9], waited, ARGV[3]}, '\31'))
end
return {'ok', in_use, wait}
