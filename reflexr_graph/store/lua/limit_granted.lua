-- limit_granted.lua: a cluster store's second half of a limit's grant, on the run's slot, after
-- limit_take.lua granted it: fenced by the attempt's token (a FENCED reply: the caller gives the
-- slot back), and the wait that the grant ends is counted on the run, once per acquisition.
-- Prelude: _limit.lua only. KEYS from keys.limit_granted_keys():
-- K_RUN rg:{<run_id>}:run      the owner's token and status; limit_waits, limit_wait_ms,
--                                 limit_since(_key) (wait.lua), limit_counted: the last
--                                 acquisition whose wait was counted
-- K_EVENTS rg:{<run_id>}:events   a limit_waited event when the grant ends a wait
-- KEYS and ARGV: store/registry.py's entry 'limit_granted' (ARGV: contracts.GrantedArgs).
-- now_ms: now ms  key: limit key  waited_ms: ms the step waited in
-- place so far  wait_ms: ms to wait before starting (a reserved rate token)  member: slot member
-- events_cap: event stream cap
-- Returns {'fenced'} | {'ok', ms waited before this attempt (the run released to wait), which
--   limit_take.lua did not count}

local owner = redis.call('HMGET', K_RUN, 'token', 'status', 'limit_since', 'limit_since_key', 'limit_counted')
if token == '' or owner[1] ~= token or owner[2] ~= 'running' then
  return {'fenced'}
end
if owner[5] == member then
  return {'ok', 0} -- a retried call: this acquisition's wait is counted already
end
local in_place = (tonumber(waited_ms) or 0) + tonumber(wait_ms)
local waited = count_wait(K_RUN, K_EVENTS, owner, now_ms, tonumber(wait_ms), key, node,
  tonumber(waited_ms) or 0, events_cap)
if waited > 0 then
  redis.call('HSET', K_RUN, 'limit_counted', member)
end
return {'ok', math.max(0, waited - in_place)}
