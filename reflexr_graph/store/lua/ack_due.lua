-- ack_due.lua: drop a due entry once its message is sent, unless it was rescheduled meanwhile.
-- KEYS[1] rg:due
-- ARGV[1] run_id  ARGV[2] the score the caller read with the entry
-- Returns 1 when removed, 0 when the entry is gone or has another score (keep it: a newer
-- retry is due then, and the claim dedups any duplicate message).

local score = redis.call('ZSCORE', KEYS[1], ARGV[1])
if score and tonumber(score) == tonumber(ARGV[2]) then
  return redis.call('ZREM', KEYS[1], ARGV[1])
end
return 0
