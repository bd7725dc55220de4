-- limit_take.lua: a cluster store's first half of a limit's grant, on the limit's slot: take a
-- rate token and a concurrency slot of one limit key, or say how long to wait (limit_acquire.lua
-- takes them on a standalone store). The run's half, limit_granted.lua, comes next and checks the
-- attempt still owns the run; a slot taken here by an attempt that then lost it, or died, lapses
-- with its lease, which no heartbeat renews. A retried call of an acquisition already granted (a
-- reply lost) is answered with its grant again: one token and one slot per acquisition.
-- Prelude: _limit.lua only. KEYS from keys.limit_take_keys():
-- K_TAT rg:limit:{<key>}:tat             GCRA theoretical arrival time, epoch ms
-- K_SLOTS rg:limit:{<key>}:slots           slots held, score = lease expiry ms
-- K_STATS rg:limit:{<key>}:stats           granted, denied, waited_ms
-- K_GRANT rg:limit:{<key>}:grant:<member>  the acquisition's grant: its start, epoch ms; one slot TTL
-- KEYS and ARGV: store/registry.py's entry 'limit_take' (ARGV: contracts.TakeArgs).
-- now_ms: now ms  emission_ms: emission interval ms (0: no rate)
-- concurrency: 0 for none  member: slot member  slot_expiry_ms: slot expiry ms  max_reserve_ms: the longest rate wait to
-- reserve, ms  waited_ms: ms the step waited in place so far
-- Returns store/contracts.py LimitReply: {'ok', slots in use, ms to wait before starting} |
--   {'denied', slots in use, ms until the rate allows (0: a slot is missing, poll)}

local now = tonumber(now_ms)
local start = redis.call('GET', K_GRANT)
if start then
  return {'ok', redis.call('ZCARD', K_SLOTS), math.max(0, tonumber(start) - now)}
end
local outcome, in_use, wait = take_limit(K_TAT, K_SLOTS, K_STATS, now, tonumber(emission_ms), tonumber(burst),
  tonumber(concurrency), member, slot_expiry_ms, tonumber(max_reserve_ms))
if outcome == 'ok' then
  redis.call('SET', K_GRANT, string.format('%d', now + wait), 'PX', string.format('%d', tonumber(slot_expiry_ms) - now))
  -- The wait in place; one that began before this attempt, when the run was released to wait,
  -- is known to the run's half, which reports the rest.
  local waited = (tonumber(waited_ms) or 0) + wait
  if waited > 0 then
    redis.call('HINCRBY', K_STATS, 'waited_ms', waited)
  end
end
return {outcome, in_use, wait}
