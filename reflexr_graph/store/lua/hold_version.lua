-- hold_version.lua: keep a run that a worker of another version of its graph was sent. It joins
-- its version's held set, where a live worker of that version takes it (wake_version.lua) at its
-- next beat: only such a worker sends a message to its version's queue, so no message waits in
-- a queue that nobody consumes. For the grace period the run stays queued and is looked at again
-- (a deploy's restart must not flap it); then it waits (status 'waiting', waiting_for
-- 'version:<v>'), holding no message and no due entry. It never restarts on another version (G9).
-- Prelude: _lib.lua (KEYS[1..18], ARGV[1..3] as described there).
-- KEYS[1] run  KEYS[3] events  KEYS[9] rg:due  KEYS[10..16] status sets
-- KEYS[19] rg:versions:<graph>:held:<version>  the runs waiting for that version
-- ARGV: store/contracts.py HoldVersionArgs, in its field order:
-- ARGV[1] run_id  ARGV[2] now ms  ARGV[3] idempotency key guess
-- ARGV[4] version  ARGV[5] grace ms  ARGV[6] when to look again (due ms)
-- Returns store/contracts.py VersionHold: 'began' | 'held' | 'waiting' | 'skip' (claimed, finished
--   or pinned to another version meanwhile) | 'gone'

want('held_since', 'version', 'waiting_for', 'wake_at')
local K_HELD, version = KEYS[19], ARGV[4]
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
local since = tonumber(field('held_since'))
local began = false
if not since then
  began = true
  since = tonumber(NOW)
  put('held_since', NOW)
  emit('waiting_for_version', 'version', version, 'until', since + tonumber(ARGV[5]))
end
-- Every time: a worker that took it (and emptied its entry) may have died before it claimed it.
redis.call('SADD', K_HELD, RUN_ID)
if tonumber(NOW) - since < tonumber(ARGV[5]) then
  redis.call('ZADD', K_DUE, ARGV[6], RUN_ID)
  return began and 'began' or 'held'
end
drop('held_since', 'wake_at', 'retry_at')
put('waiting_for', waits_for)
redis.call('ZREM', K_DUE, RUN_ID)
set_status('waiting')
emit('run_waiting', 'attempt', attempt_number(), 'signal', waits_for, 'wake_at', '')
return 'waiting'
