-- signal.lua: send a signal to a run: keep its value in the run's mailbox, and queue the run if
-- it is waiting for that signal. Atomic, so two senders never queue two attempts.
-- Prelude: _lib.lua (KEYS[1..18], ARGV[1..3] as described there).
-- KEYS[1] run  KEYS[3] events  KEYS[9] rg:due  KEYS[10..16] status sets  KEYS[18] mailbox
-- ARGV: store/contracts.py SignalArgs, in its field order:
-- ARGV[1] run_id  ARGV[2] now ms  ARGV[3] idempotency key guess (unused)
-- ARGV[4] signal name  ARGV[5] value JSON (validated by the caller)
-- ARGV[6] when the reaper sends the message if the caller's own send is lost (due ms)
-- Returns store/contracts.py SignalReply: {'missing'} | {'refused', status} (finished) | {'duplicate', status} (one of that
--   name is in the mailbox already) | {'queued', graph} (send its message now) | {'kept', status}

want('mbox', 'waiting_for', 'graph')
local name, value = ARGV[4], ARGV[5]
if not exists() then
  return {'missing'}
end
local status = field('status')
if TERMINAL[status] then
  return {'refused', status}
end
-- A second value before the first was taken would silently replace what the sender meant.
if field('mbox') == '1' and redis.call('HEXISTS', K_MAILBOX, name) == 1 then
  return {'duplicate', status}
end
redis.call('HSET', K_MAILBOX, name, value)
put('mbox', '1')
emit('signal_received', 'signal', name)
if status == 'waiting' and field('waiting_for') == name then
  drop('waiting_for', 'wake_at')
  put('dispatches', 0)
  set_status('queued')
  redis.call('ZADD', K_DUE, ARGV[6], RUN_ID)
  return {'queued', field('graph')}
end
return {'kept', status}
