-- limit_acquire.lua: take a rate token and a concurrency slot of one limit key before a step
-- runs, or say how long to wait. One round trip, fenced by the attempt's token, so a stale
-- attempt spends nothing of a budget the fleet shares. A standalone store's: its keys are of
-- two slots (a cluster store takes a grant in two scripts, limit_take.lua and limit_granted.lua).
-- Prelude: _limit.lua only. KEYS from keys.limit_keys():
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
redis.call('HSET', KEYS[3], ARGV[3], ARGV[11])
local outcome, in_use, wait = take_limit(KEYS[4], KEYS[5], KEYS[6], tonumber(ARGV[2]), tonumber(ARGV[4]),
  tonumber(ARGV[5]), tonumber(ARGV[6]), ARGV[7], ARGV[8], tonumber(ARGV[13]))
if outcome == 'denied' then
  return {'denied', in_use, wait}
end
local waited = count_wait(KEYS[1], KEYS[2], owner, ARGV[2], wait, ARGV[3], ARGV[9], tonumber(ARGV[10]) or 0,
  ARGV[12])
if waited > 0 then
  redis.call('HINCRBY', KEYS[6], 'waited_ms', waited)
end
return {'ok', in_use, wait}
