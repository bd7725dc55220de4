-- wait_children.lua: a step waits for child runs: their outcomes when all of them ended, or
-- suspend the run as 'waiting', handing back its lease, until child_ended.lua queues it. One
-- round trip, fenced by the token.
-- Prelude: _lib.lua (KEYS[1..18], ARGV[1..3] as described there).
-- KEYS[1] run  KEYS[3] events  KEYS[8] rg:leases  KEYS[9] rg:due  KEYS[10..16] status sets
-- KEYS[18] mailbox (field 'child:<id>': '' until that child ended, then its outcome JSON)
-- ARGV: store/contracts.py WaitChildrenArgs, in its field order:
-- ARGV[1] run_id  ARGV[2] now ms  ARGV[3] idempotency key guess (used when a cancel ends the run)
-- ARGV[4] token  ARGV[5] what the run waits for ('child:<id>' or 'children:<n>')
-- ARGV[6] the children's run ids, apart by spaces
-- Returns store/contracts.py WaitChildrenReply: {'fenced'} | {'ended', outcome JSON, ...} (in the
--   order of ARGV[6]) | {'waiting'} | {'cancelled'} | {'idem', key}

want(COUNTERS, 'mbox')
local token = ARGV[4]
if not owned_by(token) then
  return {'fenced'}
end
local ids, fields = {}, {}
for id in string.gmatch(ARGV[6], '%S+') do
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
local cancelled = cancelled_at_wait()
if cancelled then
  return cancelled
end
-- Suspend as wait.lua does: the run holds no lease and no message until its last child ends.
give_back_attempt()
put('waiting_for', ARGV[5])
put('awaiting', ARGV[6])
drop('token', 'wake_at')
redis.call('ZREM', K_LEASES, RUN_ID)
redis.call('ZREM', K_DUE, RUN_ID)
set_status('waiting')
emit('run_waiting', 'attempt', attempt_number(), 'signal', ARGV[5], 'wake_at', '')
return {'waiting'}
