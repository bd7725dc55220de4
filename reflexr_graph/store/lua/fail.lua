-- fail.lua: record a failed attempt, fenced by the token; then retry later or dead-letter.
-- Prelude: _lib.lua (its KEYS and RUN_ID, NOW, IDEM_GUESS as described there).
-- K_RUN/K_CKPT/K_EVENTS/K_TB  K_IDEM idem  K_DEAD rg:dead  K_LEASES rg:leases
-- K_DUE rg:due  STATUS_SETS  K_MEMO, K_MAILBOX (expiry)
-- KEYS and ARGV: store/registry.py's entry 'fail' (ARGV: contracts.FailArgs).
-- error_type: error type  message: error message  traceback: or ''
-- reason: code  permanent: '1' if permanent  retry_due_ms: retry due ms
-- dead_retention_s: dead retention s  counted: '1' if the attempt counts toward max_attempts, '0' for an
--   infrastructure failure (an interruption)  max_interruptions: max interruptions
-- skipped: boundaries skipped since the attempt's last write  skip_kinds: their kinds (text)
-- reused_steps: branch steps and reused_calls durable calls answered from records since then
-- Returns store/contracts.py Failed: 'dead' | 'retrying' | 'cancelled' (a cancel was asked while
--   it ran) | 'fenced' | {'idem', key}

want(COUNTERS, OPTIONAL_KEYS, NOTES)
local guard = write_guard(token)
if guard then
  return guard
end
put('error_type', error_type)
put('error', message)
put('reason', reason)
note_failure(reason, true)
-- The traceback lives in its own key: it can be large, and listings read the run hash.
if traceback ~= '' then
  redis.call('SET', K_TB, traceback)
  put('tb', '1')
elseif field('tb') == '1' then
  redis.call('DEL', K_TB)
  put('tb', '0')
end
note(skipped, skip_kinds, reused_steps, reused_calls)
local counts = counted == '1'
emit('attempt_failed', 'attempt', attempt_number(), 'reason', reason, 'error_type', error_type,
  'counted', counts and '1' or '0')
if cancel_requested() then
  end_requested_cancel()
  return 'cancelled'
end
if permanent == '1' then
  to_dead(reason, dead_retention_s)
  return 'dead'
end
if not counts then
  if interrupt(max_interruptions) then
    to_dead('max_interruptions', dead_retention_s)
    return 'dead'
  end
elseif num('attempts') >= num('max_attempts') then
  to_dead('max_attempts', dead_retention_s)
  return 'dead'
end
to_retrying(retry_due_ms, reason)
return 'retrying'
