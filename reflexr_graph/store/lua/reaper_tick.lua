-- reaper_tick.lua: one reaper pass's reads, in one round trip: take or keep the reaper lock, and,
-- when this reaper holds it, mark the pass (_pass.lua, prepended: did Redis restart since the
-- last?) and find the work of the pass: lapsed leases, due runs, and finished runs past their
-- retention whose index entries may be pruned. Standalone (no prelude): it
-- changes no run, so each run found is then changed by its own script (reap, hold_unserved,
-- reschedule_due, prune), which re-checks it.
-- KEYS[1] rg:reaper:lock  KEYS[2] rg:leases  KEYS[3] rg:due
-- KEYS[4] rg:status:succeeded  KEYS[5] rg:status:dead  KEYS[6] rg:status:cancelled
-- KEYS[7] rg:reaper:pass (the last pass's mark)
-- ARGV: store/contracts.py TickArgs, in its field order:
-- ARGV[1] owner id  ARGV[2] lock TTL ms  ARGV[3] now ms  ARGV[4] at most this many of each kind
-- ARGV[5] run retention s (succeeded, cancelled)  ARGV[6] dead retention s
-- Returns store/contracts.py TickReply: {lock, lapsed run ids, {run id, due score, ...},
--   succeeded ids, dead ids, cancelled ids past retention, restart window {from, to} or {},
--   next due {run id, due score} or {}} with
--   lock 'held' (kept) | 'taken' | 'other' (another reaper holds it; the lists are empty)
-- The next due entry is the first after the due runs returned, so the reaper sleeps until it
-- rather than a whole tick: a timer wakes on time. Only entries due before the lock would lapse
-- can matter (the holder ticks again before that), so one read up to then yields both.

local owner, ttl, now, limit = ARGV[1], ARGV[2], tonumber(ARGV[3]), ARGV[4]
local holder = redis.call('GET', KEYS[1])
local lock
if holder == owner then
  redis.call('PEXPIRE', KEYS[1], ttl)
  lock = 'held'
elseif not holder then
  redis.call('SET', KEYS[1], owner, 'PX', ttl)
  lock = 'taken'
else
  return {'other', {}, {}, {}, {}, {}, {}, {}}
end
local function older(key, before)
  return redis.call('ZRANGEBYSCORE', key, '-inf', before, 'LIMIT', 0, limit)
end
-- Whole milliseconds, written out: Lua would print a large number in exponent form.
local function ms_before(seconds)
  return string.format('%.0f', now - tonumber(seconds) * 1000)
end
local run_before = ms_before(ARGV[5])
local restart = mark_pass(KEYS[7], ARGV[3])
-- Whole milliseconds, as ms_before.
local soon = redis.call('ZRANGEBYSCORE', KEYS[3], '-inf', string.format('%.0f', now + tonumber(ttl)),
  'WITHSCORES', 'LIMIT', 0, tonumber(limit) + 1)
local due, next_due = {}, {}
for i = 1, #soon, 2 do
  if #due < 2 * tonumber(limit) and tonumber(soon[i + 1]) <= now then
    due[#due + 1], due[#due + 2] = soon[i], soon[i + 1]
  else
    next_due = {soon[i], soon[i + 1]}
    break
  end
end
return {lock, older(KEYS[2], ARGV[3]), due,
  older(KEYS[4], run_before), older(KEYS[5], ms_before(ARGV[6])), older(KEYS[6], run_before), restart,
  next_due}
