-- reaper_tick.lua: one reaper pass's reads, in one round trip: take or keep the reaper lock, and,
-- when this reaper holds it, mark the pass (_pass.lua, prepended: did Redis restart since the
-- last?) and find the work of the pass: lapsed leases, due runs, and finished runs past their
-- retention whose index entries may be pruned. Standalone (no prelude): it
-- changes no run, so each run found is then changed by its own script (reap, hold_unserved,
-- reschedule_due, prune), which re-checks it.
-- K_LOCK rg:reaper:lock  K_LEASES rg:leases  K_DUE rg:due
-- K_SUCCEEDED rg:status:succeeded  K_DEAD rg:status:dead  K_CANCELLED rg:status:cancelled
-- K_PASS rg:reaper:pass (the last pass's mark)
-- K_ENDED rg:children:ended (child runs that ended, their parents not told yet: store/children.py)
-- KEYS and ARGV: store/registry.py's entry 'reaper_tick' (ARGV: contracts.TickArgs).
-- owner: this reaper's id  lock_ttl_ms: lock TTL ms (the least it is kept for)  now_ms: now ms
-- limit: at most this many of each kind  run_retention_s: run retention s (succeeded, cancelled)
-- dead_retention_s: dead retention s  idle_ms: the longest the reaper may sleep ms (its lease TTL at most)
-- margin_ms: how long past its planned wake the lock outlives the holder ms (one tick)
-- prune: '1' to read the finished runs past retention, '0' to skip them (their lists are empty):
-- the reaper prunes about once a minute (fleet/reaping/prune.py: PRUNE_EVERY_S), retention being days
-- Returns store/contracts.py TickReply: {lock, lapsed run ids, {run id, due score, ...},
--   succeeded ids, dead ids, cancelled ids past retention, restart window {from, to} or {},
--   next due {run id, due score} or {}, wake ms, ended children} with
--   lock 'held' (kept) | 'taken' | 'other' (another reaper holds it; the lists are empty)
-- The reaper sleeps until 'wake': the first due entry after the due runs returned, the first
-- lease that could lapse, or now + idle_ms, whichever comes first. Nothing it must act on can
-- fall earlier, except a due entry written meanwhile, whose writer nudges it (rg:reaper:nudge):
-- a lease taken meanwhile lapses a lease TTL later. The holder keeps the lock until one tick
-- past that wake; another reaper's wake is when the lock would lapse, so it takes over within a
-- tick of a holder that died.

local ttl, now = tonumber(lock_ttl_ms), tonumber(now_ms)
local idle, margin = tonumber(idle_ms), tonumber(margin_ms)
local holder = redis.call('GET', K_LOCK)
local lock
if holder == owner then
  lock = 'held'
elseif not holder then
  lock = 'taken'
else
  local left = redis.call('PTTL', K_LOCK)
  if left < 0 then
    left = ttl
  end
  return {'other', {}, {}, {}, {}, {}, {}, {}, now + left, {}}
end
local function older(key, before)
  return redis.call('ZRANGEBYSCORE', key, '-inf', before, 'LIMIT', 0, limit)
end
-- Whole milliseconds, written out: Lua would print a large number in exponent form.
local function ms(value)
  return string.format('%.0f', value)
end
local function ms_before(seconds)
  return ms(now - tonumber(seconds) * 1000)
end
local run_before = ms_before(run_retention_s)
local restart = mark_pass(K_PASS, now_ms)
local wake = now + idle
-- The first lease to lapse: read past it only when it has.
local lapsed = {}
local first = redis.call('ZRANGE', K_LEASES, 0, 0, 'WITHSCORES')
if #first > 0 then
  if tonumber(first[2]) <= now then
    -- The next lease after those may lapse any time: a tick from now.
    lapsed = older(K_LEASES, now_ms)
    wake = math.min(wake, now + margin)
  else
    wake = math.min(wake, tonumber(first[2]))
  end
end
local soon = redis.call('ZRANGEBYSCORE', K_DUE, '-inf', ms(wake), 'WITHSCORES', 'LIMIT', 0, tonumber(limit) + 1)
local due, next_due = {}, {}
for i = 1, #soon, 2 do
  if #due < 2 * tonumber(limit) and tonumber(soon[i + 1]) <= now then
    due[#due + 1], due[#due + 2] = soon[i], soon[i + 1]
  else
    next_due = {soon[i], soon[i + 1]}
    wake = math.min(wake, tonumber(soon[i + 1]))
    break
  end
end
local keep = ms(math.max(ttl, wake - now + margin))
if lock == 'held' then
  redis.call('PEXPIRE', K_LOCK, keep)
else
  redis.call('SET', K_LOCK, owner, 'PX', keep)
end
local succeeded, dead, cancelled = {}, {}, {}
if prune == '1' then
  succeeded, dead, cancelled = older(K_SUCCEEDED, run_before), older(K_DEAD, ms_before(dead_retention_s)), older(K_CANCELLED, run_before)
end
return {lock, lapsed, due, succeeded, dead, cancelled, restart,
  next_due, ms(wake), redis.call('ZRANGE', K_ENDED, 0, tonumber(limit) - 1)}
