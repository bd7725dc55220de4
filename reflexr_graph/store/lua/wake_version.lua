-- wake_version.lua: a live worker of a version takes a run held for it (hold_version.lua): a run
-- waiting for 'version:<v>' is queued again; a run still in its grace period (queued or retrying,
-- its retry due: it was held when it was sent) keeps its status. Either way the caller sends its message to the version's queue.
-- Prelude: _lib.lua (KEYS[1..18], ARGV[1..3] as described there).
-- KEYS[1] run  KEYS[3] events  KEYS[9] rg:due  KEYS[10..16] status sets
-- KEYS[19] rg:versions:<graph>:held:<version>  the runs held for that version
-- ARGV: store/contracts.py WakeVersionArgs, in its field order:
-- ARGV[1] run_id  ARGV[2] now ms  ARGV[3] idempotency key guess
-- ARGV[4] version  ARGV[5] due ms (the reaper sends the run then, should its message be lost)
-- Returns 'queued' | 'skip' (claimed, finished, cancelled or upgraded meanwhile) | 'gone'

want('waiting_for', 'wake_at', 'version', 'held_since')
redis.call('SREM', KEYS[19], RUN_ID)
if not exists() then
  return 'gone'
end
local status = field('status')
if status == 'waiting' and waits_for_version(ARGV[4]) then
  drop('waiting_for', 'wake_at', 'held_since')
  set_status('queued')
elseif not ((status == 'queued' or status == 'retrying') and field('version') == ARGV[4]
    and field('held_since') ~= '') then
  return 'skip'
end
redis.call('ZADD', K_DUE, ARGV[5], RUN_ID)
emit('run_woken', 'version', ARGV[4])
return 'queued'
