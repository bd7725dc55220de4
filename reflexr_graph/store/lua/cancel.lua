-- cancel.lua: cancel an active or waiting run; clearing the token fences out its running attempt.
-- Prelude: _lib.lua (KEYS[1..20], ARGV[1..3] as described there).
-- KEYS[1..4] run/ckpt/events/tb  KEYS[5] idem  KEYS[8] rg:leases  KEYS[9] rg:due
-- KEYS[10..16] status sets  KEYS[17..20] memo, mailbox, history (expiry)
-- ARGV[1] run_id  ARGV[2] now ms  ARGV[3] idempotency key guess  ARGV[4] run retention s
-- Returns {'ok', HGETALL...} | {'missing'} | {'refused', status} | {'idem', key}

local refused, status = refusal(CANCELLABLE)
if refused then
  return refused
end
redis.call('HSET', K_RUN, 'reason', 'cancelled')
redis.call('HDEL', K_RUN, 'token')
redis.call('ZREM', K_LEASES, RUN_ID)
redis.call('ZREM', K_DUE, RUN_ID)
set_status('cancelled')
emit('run_cancelled', 'from_status', status)
expire_all(ARGV[4])
return snapshot('ok')
