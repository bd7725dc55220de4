-- schedule_advance.lua: move a schedule's next fire time on, if it is still the one the caller
-- planned from. However many schedulers saw the same fire, one moves it on; the others get 0 and
-- drop their plan (the runs they made for it were the same runs: their idempotency key is the fire).
-- KEYS[1] rg:schedule:next  KEYS[2] rg:schedule:last
-- ARGV: store/contracts.py ScheduleAdvanceArgs, in its field order:
-- ARGV[1] name  ARGV[2] the next fire ms the caller planned from  ARGV[3] the new next fire ms
-- ARGV[4] the last fire ms made, '' for none  ARGV[5] that fire's run id, '' for none
-- Returns 1 (moved on) | 0 (another scheduler moved it, or it was paused or deleted meanwhile)

local score = redis.call('ZSCORE', KEYS[1], ARGV[1])
if not score or tonumber(score) ~= tonumber(ARGV[2]) then
  return 0
end
redis.call('ZADD', KEYS[1], ARGV[3], ARGV[1])
if ARGV[5] ~= '' then
  redis.call('HSET', KEYS[2], ARGV[1], ARGV[4] .. '|' .. ARGV[5])
end
return 1
