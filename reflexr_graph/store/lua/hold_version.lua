-- hold_version.lua: keep a run that a worker of another version of its graph was sent. It joins
-- its version's held set, where a live worker of that version takes it (wake_version.lua) at its
-- next beat: only such a worker sends a message to its version's queue, so no message waits in
-- a queue that nobody consumes. For the grace period the run stays queued and is looked at again
-- (a deploy's restart must not flap it); then it waits (status 'waiting', waiting_for
-- 'version:<v>'), holding no message and no due entry. It never restarts on another version (G9).
-- Prelude: _lib.lua (its KEYS and RUN_ID, NOW, IDEM_GUESS as described there).
-- K_RUN run  K_EVENTS events  K_DUE rg:due  STATUS_SETS
-- K_HELD rg:versions:<graph>:held:<version>  the runs waiting for that version
-- KEYS and ARGV: store/registry.py's entry 'hold_version' (ARGV: contracts.HoldVersionArgs).
-- grace_ms: grace ms  recheck_due_ms: when to look again (due ms)
-- Returns store/contracts.py VersionHold: 'began' | 'held' | 'waiting' | 'skip' (claimed, finished
--   or pinned to another version meanwhile) | 'gone'

want('held_since', 'version', 'waiting_for', 'wake_at')
if not exists() then
  redis.call('ZREM', K_DUE, RUN_ID)
  return 'gone'
end
local status = field('status')
local waits_for = 'version:' .. version
if status == 'waiting' and waits_for_version(version) then
  return 'waiting'
end
if (status ~= 'queued' and status ~= 'retrying' and status ~= 'waiting') or field('version') ~= version then
  return 'skip'
end
local since, began = grace_since('held_since')
if began then
  emit('waiting_for_version', 'version', version, 'until', since + tonumber(grace_ms))
end
-- Every time: a worker that took it (and emptied its entry) may have died before it claimed it.
redis.call('SADD', K_HELD, RUN_ID)
if tonumber(NOW) - since < tonumber(grace_ms) then
  redis.call('ZADD', K_DUE, recheck_due_ms, RUN_ID)
  return began and 'began' or 'held'
end
drop('held_since', 'wake_at', 'retry_at')
put('waiting_for', waits_for)
redis.call('ZREM', K_DUE, RUN_ID)
set_status('waiting')
emit('run_waiting', 'attempt', attempt_number(), 'signal', waits_for, 'wake_at', '')
return 'waiting'
