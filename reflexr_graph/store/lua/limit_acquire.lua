-- limit_acquire.lua: take a rate token and a concurrency slot of one limit key before a step
-- runs, or say how long to wait. One round trip, fenced by the attempt's token, so a stale
-- attempt spends nothing of a budget the fleet shares. A standalone store's: its keys are of
-- two slots (a cluster store takes a grant in two scripts, limit_take.lua and limit_granted.lua).
-- Prelude: _limit.lua only. KEYS from keys.limit_keys():
-- K_RUN rg:{<run_id>}:run      the owner's token and status; limit_waits, limit_wait_ms, and
--                                 limit_since(_key): when a wait of a released run began (wait.lua)
-- K_EVENTS rg:{<run_id>}:events   a limit_waited event when a grant ends a wait
-- K_LIMITS rg:limits              key -> configuration JSON, for `reflexr-graph limits`
-- K_TAT rg:limit:{<key>}:tat   GCRA theoretical arrival time, epoch ms
-- K_SLOTS rg:limit:{<key>}:slots held, score = lease expiry ms
-- K_STATS rg:limit:{<key>}:stats granted, denied, waited_ms
-- KEYS and ARGV: store/registry.py's entry 'limit_acquire' (ARGV: contracts.LimitArgs).
-- now_ms: now ms  key: limit key  emission_ms: emission interval ms (0: no rate)
-- concurrency: 0 for none  member: slot member  slot_expiry_ms: slot expiry ms
-- waited_ms: ms the step waited so far  config: configuration JSON
-- events_cap: event stream cap  max_reserve_ms: the longest rate wait to reserve, ms
-- Returns store/contracts.py LimitReply: {'fenced'} |
--   {'ok', slots in use, ms to wait before starting (a reserved rate token)} |
--   {'denied', slots in use, ms until the rate allows (0: a slot is missing, poll)}

local owner = redis.call('HMGET', K_RUN, 'token', 'status', 'limit_since', 'limit_since_key')
if token == '' or owner[1] ~= token or owner[2] ~= 'running' then
  return {'fenced'}
end
redis.call('HSET', K_LIMITS, key, config)
local outcome, in_use, wait = take_limit(K_TAT, K_SLOTS, K_STATS, tonumber(now_ms), tonumber(emission_ms),
  tonumber(burst), tonumber(concurrency), member, slot_expiry_ms, tonumber(max_reserve_ms))
if outcome == 'denied' then
  return {'denied', in_use, wait}
end
local waited = count_wait(K_RUN, K_EVENTS, owner, now_ms, wait, key, node, tonumber(waited_ms) or 0,
  events_cap)
if waited > 0 then
  redis.call('HINCRBY', K_STATS, 'waited_ms', waited)
end
return {'ok', in_use, wait}
