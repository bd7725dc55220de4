-- signal.lua: send a signal to a run: keep its value in the run's mailbox, and queue the run if
-- it is waiting for that signal. Atomic, so two senders never queue two attempts.
-- Prelude: _lib.lua (KEYS[1..18], ARGV[1..3] as described there).
-- KEYS[1] run  KEYS[3] events  KEYS[9] rg:due  KEYS[10..16] status sets  KEYS[18] mailbox
-- KEYS[19] the broker list the run's message goes onto (kombu's Redis transport), when ARGV[7] is one
-- ARGV: store/contracts.py SignalArgs, in its field order:
-- ARGV[1] run_id  ARGV[2] now ms  ARGV[3] idempotency key guess (unused)
-- ARGV[4] signal name  ARGV[5] value JSON (validated by the caller)
-- ARGV[6] when the reaper sends the message if the caller's own send is lost (due ms)
-- ARGV[7] the run's message, pushed onto KEYS[19] if the run wakes ('': the caller sends it)
-- ARGV[8] who sends it (a token's name, cli@user@host), recorded as 'by'; '' for none
-- Returns store/contracts.py SignalReply: {'missing'} | {'refused', status} (finished) | {'duplicate', status} (one of that
--   name is in the mailbox already) | {'sent', graph} (queued, its message pushed) |
--   {'queued', graph} (queued: send its message now) | {'kept', status}

want('mbox', 'waiting_for', 'graph')
local name, value, message = ARGV[4], ARGV[5], ARGV[7]
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
if (ARGV[8] or '') ~= '' then
  emit('signal_received', 'signal', name, 'by', ARGV[8])
else
  emit('signal_received', 'signal', name)
end
if status == 'waiting' and field('waiting_for') == name then
  drop('waiting_for', 'wake_at')
  put('dispatches', 0)
  set_status('queued')
  -- The due entry stays even when the message goes now: it lists the run as queued, and the
  -- reaper sends it again should the message be lost (a broker list flushed, a worker's crash).
  redis.call('ZADD', K_DUE, ARGV[6], RUN_ID)
  if message ~= '' then
    -- The message lands with the write that queued the run, in this round trip: no wake waits
    -- for the caller's second call, and a crash of the caller loses none.
    redis.call('LPUSH', KEYS[19], message)
    return {'sent', field('graph')}
  end
  return {'queued', field('graph')}
end
return {'kept', status}
