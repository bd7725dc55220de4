-- _limit.lua: a limit's grant in two halves, prepended to the scripts that grant one
-- (store/scripts.py: WITH_LIMIT). take_limit() touches only the limit's keys and count_wait()
-- only the run's: limit_acquire.lua calls both in one script (a standalone store), limit_take.lua
-- and limit_granted.lua one each, on the limit's slot and then the run's (a Redis Cluster store).
-- No KEYS[i] or ARGV[i] of its own: the functions take, as parameters, those of their caller.

-- take_limit(tat, slots, stats keys; now, emission ms, burst, concurrency, slot member, slot
-- expiry ms, longest reserve ms) -> 'ok' | 'denied', slots in use, wait ms (limit_acquire.lua)
local function take_limit(tat_key, slots_key, stats_key, now, emission, burst, concurrency, member, expiry,
                          max_reserve)
  -- Slots are leases: one whose holder stopped renewing it (a killed worker) lapses here.
  local in_use = 0
  if concurrency > 0 then
    redis.call('ZREMRANGEBYSCORE', slots_key, '-inf', now)
    in_use = redis.call('ZCARD', slots_key)
    if in_use >= concurrency then
      redis.call('HINCRBY', stats_key, 'denied', 1)
      return 'denied', in_use, 0
    end
  end

  -- GCRA: each grant moves the theoretical arrival time one emission interval on; a request may
  -- come at most (burst - 1) intervals ahead of it. A request that comes earlier than that, by no
  -- more than max_reserve, reserves its token and is told when to start: one round trip per step,
  -- and waiters never poll a rate. The slot is checked first, so a step that finds no slot spends
  -- no token.
  local wait = 0
  if emission > 0 then
    local tat = tonumber(redis.call('GET', tat_key) or '0') or 0
    if tat < now then
      tat = now
    end
    local tolerance = emission * (burst - 1)
    wait = math.max(0, math.ceil(tat - now - tolerance))
    if wait > max_reserve then
      redis.call('HINCRBY', stats_key, 'denied', 1)
      return 'denied', in_use, wait
    end
    tat = tat + emission
    redis.call('SET', tat_key, string.format('%.3f', tat), 'PX', math.ceil(tat - now) + 1000)
  end

  if concurrency > 0 then
    redis.call('ZADD', slots_key, expiry, member)
    in_use = in_use + 1
  end
  redis.call('HINCRBY', stats_key, 'granted', 1)
  if wait > 0 then
    redis.call('HINCRBY', stats_key, 'reserved', 1)
  end
  return 'ok', in_use, wait
end

-- count_wait(run, events keys; owner = HMGET run token, status, limit_since, limit_since_key;
-- now (ARGV string), wait ms, limit key, node, ms waited in place, event stream cap)
-- -> the ms the step waited for its grant, counted on the run and its events (0: none)
local function count_wait(run_key, events_key, owner, now, wait, key, node, waited_ms, cap)
  local waited = waited_ms + wait
  -- The run was released to wait for this key: the wait began before this attempt, and counts
  -- from then, through every release, once.
  if owner[3] and owner[4] == key then
    waited = tonumber(now) + wait - tonumber(owner[3])
    redis.call('HDEL', run_key, 'limit_since', 'limit_since_key')
  end
  if waited > 0 then
    redis.call('HINCRBY', run_key, 'limit_waits', 1)
    redis.call('HINCRBY', run_key, 'limit_wait_ms', waited)
    -- Stored compactly, as _lib.lua's emit() writes events (store/event_codec.py, code 'l'): the
    -- time, node, wait and key joined by the unit separator; the key last, as the one a user names.
    redis.call('XADD', events_key, 'MAXLEN', '~', cap, '*', 'e',
      table.concat({'l', now, node, waited, key}, '\31'))
  end
  return waited
end
