-- wait_children.lua: a step waits for child runs: their outcomes when all of them ended, or
-- suspend the run as 'waiting', handing back its lease, until child_ended.lua queues it. One
-- round trip, fenced by the token.
-- Prelude: _lib.lua (its KEYS and RUN_ID, NOW, IDEM_GUESS as described there).
-- K_RUN run  K_EVENTS events  K_LEASES rg:leases  K_DUE rg:due  STATUS_SETS
-- K_MAILBOX mailbox (field 'child:<id>': '' until that child ended, then its outcome JSON)
-- KEYS and ARGV: store/registry.py's entry 'wait_children' (ARGV: contracts.WaitChildrenArgs).
-- waiting_for: what the run waits for ('child:<id>' or 'children:<n>')
-- children: the children's run ids, apart by spaces
-- Returns store/contracts.py WaitChildrenReply: {'fenced'} | {'ended', outcome JSON, ...} (in the
--   order of children) | {'waiting'} | {'cancelled'} | {'idem', key}

want(COUNTERS, 'mbox')
if not owned_by(token) then
  return {'fenced'}
end
local ids, fields = {}, {}
for id in string.gmatch(children, '%S+') do
  ids[#ids + 1] = id
  fields[#fields + 1] = 'child:' .. id
end
local ended = {'ended'}
if field('mbox') == '1' then
  local values = redis.call('HMGET', K_MAILBOX, unpack(fields))
  for i = 1, #ids do
    if (values[i] or '') == '' then
      ended = nil
      break
    end
    ended[#ended + 1] = values[i]
  end
else
  ended = nil
end
if ended then
  return ended
end
-- Suspend as wait.lua does: the run holds no lease and no message until its last child ends.
local cancelled = suspend_unless_cancelled()
if cancelled then
  return cancelled
end
put('waiting_for', waiting_for)
put('awaiting', children)
drop('token', 'wake_at')
redis.call('ZREM', K_LEASES, RUN_ID)
redis.call('ZREM', K_DUE, RUN_ID)
set_status('waiting')
emit('run_waiting', 'attempt', attempt_number(), 'signal', waiting_for, 'wake_at', '')
return {'waiting'}
