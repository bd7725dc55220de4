-- signal.lua: send a signal to a run: keep its value in the run's mailbox, and queue the run if
-- it is waiting for that signal. Atomic, so two senders never queue two attempts.
-- Prelude: _lib.lua (its KEYS and RUN_ID, NOW, IDEM_GUESS as described there).
-- K_RUN run  K_EVENTS events  K_DUE rg:due  STATUS_SETS  K_MAILBOX mailbox
-- K_BROKER the broker list the run's message goes onto (kombu's Redis transport), when message is one
-- KEYS and ARGV: store/registry.py's entry 'signal' (ARGV: contracts.SignalArgs).
-- name: signal name  value: JSON (validated by the caller)
-- due_ms: when the reaper sends the message if the caller's own send is lost (due ms)
-- message: the run's message, pushed onto K_BROKER if the run wakes ('': the caller sends it)
-- by: who sends it (a token's name, cli@user@host), recorded as 'by'; '' for none
-- Returns store/contracts.py SignalReply: {'missing'} | {'refused', status} (finished) | {'duplicate', status} (one of that
--   name is in the mailbox already) | {'sent', graph} (queued, its message pushed) |
--   {'queued', graph} (queued: send its message now) | {'kept', status}

want('mbox', 'waiting_for', 'graph')
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
if (by or '') ~= '' then
  emit('signal_received', 'signal', name, 'by', by)
else
  emit('signal_received', 'signal', name)
end
if status == 'waiting' and field('waiting_for') == name then
  drop('waiting_for', 'wake_at')
  put('dispatches', 0)
  set_status('queued')
  -- The due entry stays even when the message goes now: it lists the run as queued, and the
  -- reaper sends it again should the message be lost (a broker list flushed, a worker's crash).
  redis.call('ZADD', K_DUE, due_ms, RUN_ID)
  if message ~= '' then
    -- The message lands with the write that queued the run, in this round trip: no wake waits
    -- for the caller's second call, and a crash of the caller loses none.
    redis.call('LPUSH', K_BROKER, message)
    return {'sent', field('graph')}
  end
  return {'queued', field('graph')}
end
return {'kept', status}
