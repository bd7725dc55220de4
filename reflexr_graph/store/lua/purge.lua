-- purge.lua: delete every key of a dead or cancelled run and drop it from every index.
-- Prelude: _lib.lua (KEYS[1..15], ARGV[1..3] as described there).
-- KEYS[1..4] run/ckpt/events/tb  KEYS[5] idem  KEYS[6..9] rg:all/dead/leases/due
-- KEYS[10..15] status sets  KEYS[16] memo  KEYS[17] history  KEYS[18] history data
-- ARGV[1] run_id  ARGV[2] now ms (unused)  ARGV[3] idempotency key guess
-- Returns {'ok'} | {'missing'} | {'refused', status} | {'idem', key}

local refused = refusal(REPLAYABLE)
if refused then
  return refused
end
if owns_idem() then
  redis.call('DEL', K_IDEM)
end
redis.call('DEL', K_RUN, K_CKPT, K_EVENTS, K_TB, K_MEMO, K_HIST, K_HIST_DATA)
unindex()
return {'ok'}
