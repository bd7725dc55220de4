-- child_ended.lua: tell a parent run that one of its children ended: keep the outcome in the
-- parent's mailbox, and queue the parent if it waits for its children and all of them ended.
-- Atomic with wait_children.lua, so a child that ends while its parent suspends is never missed.
-- Prelude: _lib.lua (its KEYS and RUN_ID, NOW, IDEM_GUESS as described there); the run is the parent.
-- KEYS and ARGV: store/registry.py's entry 'child_ended' (ARGV: contracts.ChildEndedArgs).
-- K_RUN run  K_EVENTS events  K_DUE rg:due  STATUS_SETS  K_MAILBOX mailbox
-- child: the child's run id  outcome: its outcome JSON ({"status": ..., "reason": ...})
-- Returns store/contracts.py ToldParentReply: {'missing'} | {'finished', status} (the parent
--   ended: the outcome is kept for a replay of it, in a mailbox that expires with it) |
--   {'queued', graph} (its message is due now) | {'kept', status}

want('mbox', 'waiting_for', 'awaiting', 'graph')
if not exists() then
  return {'missing'}
end
local status = field('status')
if TERMINAL[status] then
  -- A replay of the parent replays its failed children first (store/interventions.py), whose
  -- ends must then reach it; its mailbox (there, since it has children) keeps its expiry.
  if field('mbox') == '1' then
    redis.call('HSET', K_MAILBOX, 'child:' .. child, outcome)
  end
  return {'finished', status}
end
redis.call('HSET', K_MAILBOX, 'child:' .. child, outcome)
put('mbox', '1')
if status ~= 'waiting' or string.sub(field('waiting_for'), 1, 5) ~= 'child' then
  return {'kept', status}
end
for id in string.gmatch(field('awaiting'), '%S+') do
  if (redis.call('HGET', K_MAILBOX, 'child:' .. id) or '') == '' then
    return {'kept', status}
  end
end
-- Every child it waits for ended: queued as a signal queues it (signal.lua); the reaper that
-- told it sends its message.
drop('waiting_for', 'wake_at', 'awaiting')
put('dispatches', 0)
set_status('queued')
redis.call('ZADD', K_DUE, NOW, RUN_ID)
return {'queued', field('graph')}
