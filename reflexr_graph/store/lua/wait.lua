-- wait.lua: a step waits for a signal or a timer: take the signal, see the timer fired, or
-- suspend the run as 'waiting', handing back its lease. One round trip, fenced by the token.
-- Prelude: _lib.lua (its KEYS and RUN_ID, NOW, IDEM_GUESS as described there).
-- K_RUN run  K_EVENTS events  K_LEASES rg:leases  K_DUE rg:due  STATUS_SETS
-- K_MEMO memo (the wait's record)  K_MAILBOX mailbox (signals not taken yet)
-- KEYS and ARGV: store/registry.py's entry 'wait' (ARGV: contracts.WaitArgs).
-- signal: name, '' for a durable sleep
-- record_field: the wait's record field in the memo; its wake time is kept at record_field .. '|at'
-- first_wake_ms: the wake time ms to keep if this wait has none yet, '' for no timer
-- waited_ms: ms a step released to wait for a limit ('limit:<key>') waited in place first
-- Returns store/contracts.py WaitReply: {'fenced'} | {'recorded', record JSON} ({"signal": value} or {"due": true}) |
--   {'waiting', wake ms or ''} | {'cancelled'} (a cancel was asked: the run ends instead of waiting)

want(COUNTERS, OPTIONAL_KEYS, 'limit_since_key')
local name, rec, first_wake = signal, record_field, first_wake_ms
if not owned_by(token) then
  return {'fenced'}
end
local done = field('memo') == '1' and redis.call('HGET', K_MEMO, rec)
if done then
  return {'recorded', done}
end
-- The signal moves from the mailbox into the step's record in one step: a crash after this
-- still finds it, and no other wait can take it too.
if name ~= '' then
  local value = field('mbox') == '1' and redis.call('HGET', K_MAILBOX, name)
  if value then
    redis.call('HDEL', K_MAILBOX, name)
    local record = '{"signal":' .. value .. '}'
    redis.call('HSET', K_MEMO, rec, record)
    put('memo', '1')
    return {'recorded', record}
  end
end
-- The first wake time is kept: a step that runs again after a crash or a wake must not restart
-- its timer.
local at_field = rec .. '|at'
if first_wake ~= '' then
  redis.call('HSETNX', K_MEMO, at_field, first_wake)
  put('memo', '1')
end
local wake = ''
if field('memo') == '1' then
  wake = redis.call('HGET', K_MEMO, at_field) or ''
end
if wake ~= '' and tonumber(wake) <= tonumber(NOW) then
  local record = '{"due":true}'
  redis.call('HSET', K_MEMO, rec, record)
  put('memo', '1')
  return {'recorded', record}
end
-- Suspend: the run holds no lease and no message until a signal (signal.lua) or its timer (the
-- due set) wakes it.
local cancelled = suspend_unless_cancelled()
if cancelled then
  return cancelled
end
-- A limit wait is counted by the grant that ends it (limit_acquire.lua), which may come after
-- several releases: the run keeps when the wait began, from its first release for that key.
if string.sub(name, 1, 6) == 'limit:' then
  local key = string.sub(name, 7)
  if field('limit_since_key') ~= key then
    put('limit_since', string.format('%d', tonumber(NOW) - (tonumber(waited_ms) or 0)))
    put('limit_since_key', key)
  end
end
put('waiting_for', name)
put('wake_at', wake)
-- The claim that wakes the run does what this script would for the wait (claim.lua:
-- take_awaited): it takes the signal, or records that the timer fired, so the step that runs
-- again finds its record and makes no round trip here for it. 'wait_take' is
-- <#name>:<name><wake ms or ''>|<record field>. (A limit's wait, 'limit:<key>', is ended by its
-- grant, never by a signal in the mailbox or its timer.)
if string.sub(name, 1, 6) ~= 'limit:' then
  put('wait_take', string.format('%d:%s%s|%s', #name, name, wake, rec))
end
drop('token')
redis.call('ZREM', K_LEASES, RUN_ID)
if wake ~= '' then
  redis.call('ZADD', K_DUE, wake, RUN_ID)
else
  redis.call('ZREM', K_DUE, RUN_ID)
end
set_status('waiting')
emit('run_waiting', 'attempt', attempt_number(), 'signal', name, 'wake_at', wake)
return {'waiting', wake}
