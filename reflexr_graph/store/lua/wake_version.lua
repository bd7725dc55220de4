-- wake_version.lua: a live worker of a version takes a run held for it (hold_version.lua): a run
-- waiting for 'version:<v>' is queued again; a run still in its grace period (queued or retrying,
-- its retry due: it was held when it was sent) keeps its status. Either way the caller sends its message to the version's queue.
-- Prelude: _lib.lua (its KEYS and RUN_ID, NOW, IDEM_GUESS as described there).
-- K_RUN run  K_EVENTS events  K_DUE rg:due  STATUS_SETS
-- K_HELD rg:versions:<graph>:held:<version>  the runs held for that version
-- KEYS and ARGV: store/registry.py's entry 'wake_version' (ARGV: contracts.WakeVersionArgs).
-- due_ms: due ms (the reaper sends the run then, should its message be lost)
-- Returns 'queued' | 'skip' (claimed, finished, cancelled or upgraded meanwhile) | 'gone'

want('waiting_for', 'wake_at', 'version', 'held_since')
redis.call('SREM', K_HELD, RUN_ID)
if not exists() then
  return 'gone'
end
local status = field('status')
if status == 'waiting' and waits_for_version(version) then
  drop('waiting_for', 'wake_at', 'held_since')
  set_status('queued')
elseif not ((status == 'queued' or status == 'retrying') and field('version') == version
    and field('held_since') ~= '') then
  return 'skip'
end
redis.call('ZADD', K_DUE, due_ms, RUN_ID)
emit('run_woken', 'version', version)
return 'queued'
