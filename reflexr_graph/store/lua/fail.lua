-- fail.lua: record a failed attempt, fenced by the token; then retry later or dead-letter.
-- Prelude: _lib.lua (KEYS[1..18], ARGV[1..3] as described there).
-- KEYS[1..4] run/ckpt/events/tb  KEYS[5] idem  KEYS[7] rg:dead  KEYS[8] rg:leases
-- KEYS[9] rg:due  KEYS[10..16] status sets  KEYS[17..18] memo, mailbox (expiry)
-- ARGV: store/contracts.py FailArgs, in its field order:
-- ARGV[1] run_id  ARGV[2] now ms  ARGV[3] scoped idempotency key guess
-- ARGV[4] token  ARGV[5] error type  ARGV[6] error message  ARGV[7] traceback or ''
-- ARGV[8] reason code  ARGV[9] '1' if permanent  ARGV[10] retry due ms
-- ARGV[11] dead retention s  ARGV[12] '1' if the attempt counts toward max_attempts, '0' for an
--   infrastructure failure (an interruption)  ARGV[13] max interruptions
-- ARGV[14] boundaries skipped since the attempt's last write  ARGV[15] their kinds (text)
-- ARGV[16] branch steps and ARGV[17] durable calls answered from records since then
-- Returns store/contracts.py Failed: 'dead' | 'retrying' | 'cancelled' (a cancel was asked while
--   it ran) | 'fenced' | {'idem', key}

want(COUNTERS, OPTIONAL_KEYS, NOTES)
local guard = write_guard(ARGV[4])
if guard then
  return guard
end
local error_type, reason = ARGV[5], ARGV[8]
put('error_type', error_type)
put('error', ARGV[6])
put('reason', reason)
note_failure(reason, true)
-- The traceback lives in its own key: it can be large, and listings read the run hash.
if ARGV[7] ~= '' then
  redis.call('SET', K_TB, ARGV[7])
  put('tb', '1')
elseif field('tb') == '1' then
  redis.call('DEL', K_TB)
  put('tb', '0')
end
note(ARGV[14], ARGV[15], ARGV[16], ARGV[17])
local counted = ARGV[12] == '1'
emit('attempt_failed', 'attempt', attempt_number(), 'reason', reason, 'error_type', error_type,
  'counted', counted and '1' or '0')
if cancel_requested() then
  end_requested_cancel()
  return 'cancelled'
end
local permanent = ARGV[9] == '1'
if permanent then
  to_dead(reason, ARGV[11])
  return 'dead'
end
if not counted then
  if interrupt(ARGV[13]) then
    to_dead('max_interruptions', ARGV[11])
    return 'dead'
  end
elseif num('attempts') >= num('max_attempts') then
  to_dead('max_attempts', ARGV[11])
  return 'dead'
end
to_retrying(ARGV[10], reason)
return 'retrying'
