-- limit_granted.lua: a cluster store's second half of a limit's grant, on the run's slot, after
-- limit_take.lua granted it: fenced by the attempt's token (a FENCED reply: the caller gives the
-- slot back), and the wait that the grant ends is counted on the run, once per acquisition.
-- Prelude: _limit.lua only. KEYS from keys.limit_granted_keys():
-- KEYS[1] rg:{<run_id>}:run      the owner's token and status; limit_waits, limit_wait_ms,
--                                 limit_since(_key) (wait.lua), limit_counted: the last
--                                 acquisition whose wait was counted
-- KEYS[2] rg:{<run_id>}:events   a limit_waited event when the grant ends a wait
-- ARGV: store/contracts.py GrantedArgs, in its field order:
-- ARGV[1] token  ARGV[2] now ms  ARGV[3] limit key  ARGV[4] node  ARGV[5] ms the step waited in
-- place so far  ARGV[6] ms to wait before starting (a reserved rate token)  ARGV[7] slot member
-- ARGV[8] event stream cap
-- Returns {'fenced'} | {'ok', ms waited before this attempt (the run released to wait), which
--   limit_take.lua did not count}

local owner = redis.call('HMGET', KEYS[1], 'token', 'status', 'limit_since', 'limit_since_key', 'limit_counted')
if ARGV[1] == '' or owner[1] ~= ARGV[1] or owner[2] ~= 'running' then
  return {'fenced'}
end
if owner[5] == ARGV[7] then
  return {'ok', 0} -- a retried call: this acquisition's wait is counted already
end
local in_place = (tonumber(ARGV[5]) or 0) + tonumber(ARGV[6])
local waited = count_wait(KEYS[1], KEYS[2], owner, ARGV[2], tonumber(ARGV[6]), ARGV[3], ARGV[4],
  tonumber(ARGV[5]) or 0, ARGV[8])
if waited > 0 then
  redis.call('HSET', KEYS[1], 'limit_counted', ARGV[7])
end
return {'ok', math.max(0, waited - in_place)}
