-- ack_due.lua: drop a due entry once its message is sent, unless it was rescheduled meanwhile.
-- KEYS and ARGV: store/registry.py's entry 'ack_due' (ARGV: contracts.AckDueArgs).
-- K_DUE: rg:due
-- read_score: the score the caller read with the entry
-- Returns 1 when removed, 0 when the entry is gone or has another score (keep it: a newer
-- retry is due then, and the claim dedups any duplicate message).

local score = redis.call('ZSCORE', K_DUE, run_id)
if score and tonumber(score) == tonumber(read_score) then
  return redis.call('ZREM', K_DUE, run_id)
end
return 0
