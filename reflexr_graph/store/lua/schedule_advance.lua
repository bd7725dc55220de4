-- schedule_advance.lua: move a schedule's next fire time on, if it is still the one the caller
-- planned from. However many schedulers saw the same fire, one moves it on; the others get 0 and
-- drop their plan (the runs they made for it were the same runs: their idempotency key is the fire).
-- K_NEXT rg:schedule:next  K_LAST rg:schedule:last
-- KEYS and ARGV: store/registry.py's entry 'schedule_advance' (ARGV: contracts.ScheduleAdvanceArgs).
-- planned_ms: the next fire ms the caller planned from  next_ms: the new next fire ms
-- last_fire_ms: the last fire ms made, '' for none  last_run_id: that fire's run id, '' for none
-- Returns 1 (moved on) | 0 (another scheduler moved it, or it was paused or deleted meanwhile)

local score = redis.call('ZSCORE', K_NEXT, name)
if not score or tonumber(score) ~= tonumber(planned_ms) then
  return 0
end
redis.call('ZADD', K_NEXT, next_ms, name)
if last_run_id ~= '' then
  redis.call('HSET', K_LAST, name, last_fire_ms .. '|' .. last_run_id)
end
return 1
