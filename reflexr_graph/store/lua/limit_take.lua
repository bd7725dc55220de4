-- limit_take.lua: a cluster store's first half of a limit's grant, on the limit's slot: take a
-- rate token and a concurrency slot of one limit key, or say how long to wait (limit_acquire.lua
-- takes them on a standalone store). The run's half, limit_granted.lua, comes next and checks the
-- attempt still owns the run; a slot taken here by an attempt that then lost it, or died, lapses
-- with its lease, which no heartbeat renews. A retried call of an acquisition already granted (a
-- reply lost) is answered with its grant again: one token and one slot per acquisition.
-- Prelude: _limit.lua only. KEYS from keys.limit_take_keys():
-- KEYS[1] rg:limit:{<key>}:tat             GCRA theoretical arrival time, epoch ms
-- KEYS[2] rg:limit:{<key>}:slots           slots held, score = lease expiry ms
-- KEYS[3] rg:limit:{<key>}:stats           granted, denied, waited_ms
-- KEYS[4] rg:limit:{<key>}:grant:<member>  the acquisition's grant: its start, epoch ms; one slot TTL
-- ARGV: store/contracts.py TakeArgs, in its field order:
-- ARGV[1] now ms  ARGV[2] emission interval ms (0: no rate)  ARGV[3] burst  ARGV[4] concurrency
-- (0: none)  ARGV[5] slot member  ARGV[6] slot expiry ms  ARGV[7] the longest rate wait to
-- reserve, ms  ARGV[8] ms the step waited in place so far
-- Returns store/contracts.py LimitReply: {'ok', slots in use, ms to wait before starting} |
--   {'denied', slots in use, ms until the rate allows (0: a slot is missing, poll)}

local now = tonumber(ARGV[1])
local start = redis.call('GET', KEYS[4])
if start then
  return {'ok', redis.call('ZCARD', KEYS[2]), math.max(0, tonumber(start) - now)}
end
local outcome, in_use, wait = take_limit(KEYS[1], KEYS[2], KEYS[3], now, tonumber(ARGV[2]), tonumber(ARGV[3]),
  tonumber(ARGV[4]), ARGV[5], ARGV[6], tonumber(ARGV[7]))
if outcome == 'ok' then
  redis.call('SET', KEYS[4], string.format('%d', now + wait), 'PX', string.format('%d', tonumber(ARGV[6]) - now))
  -- The wait in place; one that began before this attempt, when the run was released to wait,
  -- is known to the run's half, which reports the rest.
  local waited = (tonumber(ARGV[8]) or 0) + wait
  if waited > 0 then
    redis.call('HINCRBY', KEYS[3], 'waited_ms', waited)
  end
end
return {outcome, in_use, wait}
