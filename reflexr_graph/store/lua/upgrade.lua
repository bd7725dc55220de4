-- upgrade.lua: move a run of a graph version to another version (G9): one held for its version
-- (hold_version.lua), or one `upgrade --include-running` marked, once its attempt has ended. It
-- starts over from its first step (the seed's rule for a changed graph), or with
-- --resume-compatible resumes from its latest checkpoint, which the caller judged compatible and
-- wrote over to the new version (core/compat.py rebase); the work recorded since it (memo) stays.
-- Prelude: _lib.lua (KEYS[1..18], ARGV[1..3] as described there), then _history.lua.
-- KEYS[1..2] run/ckpt  KEYS[3] events  KEYS[9] rg:due  KEYS[10..16] status sets  KEYS[17] memo
-- KEYS[19] rg:versions:<graph>:held:<from>  the runs held for the version it leaves
-- ARGV: store/contracts.py UpgradeArgs, in its field order:
-- ARGV[1] run_id  ARGV[2] now ms  ARGV[3] idempotency key guess
-- ARGV[4] the version it leaves  ARGV[5] the version it moves to
-- ARGV[6] the latest checkpoint as the new version's ('' starts the run over)
-- ARGV[7] the seq of the checkpoint ARGV[6] replaces (another latest one: 'skip', judge again)
-- ARGV[8] '1': only mark the run (upgrade_to; claim.lua refuses its next attempt on any other
--   version), with ARGV[9] as its mark ('upgrade_mark', which a worker of the new version reads
--   when it moves the run: fleet/versions.py). The mark lives in the run hash, so a marked run that
--   ends where it is loses it in the same write (_lib.lua set_status). A marked run waiting for a
--   signal or a timer moves like a queued one, and if it resumes it goes on waiting.
--   '2': an auto-upgrade leaves the run where it is, its mark dropped, because the new version
--   cannot read its checkpoint (ARGV[9], why): it stays held for its version (waiting_for
--   'version:<v> (why)' once it waits for it), and 'upgrade_held' is recorded once per new version.
-- ARGV[10] who moves it ('auto_upgrade'; '' for an operator), recorded on 'run_upgraded'
-- Returns 'upgraded' | 'resumed' | 'marked' | 'kept' (left held, ARGV[8] '2'; 'still' if it was
--   left held for that version before) | 'running' (its
--   attempt goes on: it stays held or marked) | 'skip' (not of that version, finished, neither
--   held nor marked, or its checkpoint changed) | 'gone'

want(OPTIONAL_KEYS, 'version', 'waiting_for', 'held_since', 'ck_first', 'wait_take', 'upgrade_held')
local from, to, resume_with = ARGV[4], ARGV[5], ARGV[6]
local was_held = redis.call('SREM', KEYS[19], RUN_ID) == 1
if not exists() then
  return 'gone'
end
local status = field('status')
if field('version') ~= from or TERMINAL[status] then
  -- No longer a run to move: its mark goes (so a replay of it is claimed where it is).
  drop('upgrade_to', 'upgrade_mark')
  return 'skip'
end
if ARGV[8] == '1' then
  put('upgrade_to', to)
  put('upgrade_mark', ARGV[9])
  return 'marked'
end
local waits = status == 'waiting' and waits_for_version(from)
if ARGV[8] == '2' then
  drop('upgrade_to', 'upgrade_mark')
  if was_held then
    redis.call('SADD', KEYS[19], RUN_ID)
  end
  if waits then
    put('waiting_for', 'version:' .. from .. ' (' .. ARGV[9] .. ')')
  end
  if field('upgrade_held') == to then
    return 'still'
  end
  put('upgrade_held', to)
  emit('upgrade_held', 'from_version', from, 'version', to, 'reason', ARGV[9])
  return 'kept'
end
if status == 'running' then
  return 'running'
end
local ended = status == 'queued' or status == 'retrying'
-- Waiting for a signal or a timer: its attempt ended when it suspended.
local suspended = status == 'waiting' and not waits
local in_grace = ended and field('held_since') ~= ''
if not (waits or in_grace or ((ended or suspended) and field('upgrade_to') == to)) then
  return 'skip'
end
if resume_with ~= '' and field('ck_last') ~= ARGV[7] then
  return 'skip'
end
if suspended and resume_with ~= '' then
  -- It goes on waiting, on the new version: its signal or timer queues it there.
  redis.call('HSET', K_CKPT, ARGV[7], resume_with)
  drop('upgrade_to', 'upgrade_mark', 'upgrade_held')
  put('version', to)
  emit('run_upgraded', 'from_version', from, 'version', to, 'how', 'resumed', 'by', ARGV[10])
  return 'resumed'
end
if resume_with == '' then
  -- As a replay from the start: the checkpoints and the work recorded since go, numbered from 1 again.
  ckpt_forget_all(K_CKPT, K_MEMO)
  put('checkpoints', 0)
  put('next_node', '')
else
  redis.call('HSET', K_CKPT, ARGV[7], resume_with)
end
drop('waiting_for', 'wake_at', 'held_since', 'retry_at', 'upgrade_to', 'upgrade_mark', 'wait_take',
  'upgrade_held')
put('version', to)
set_status('queued')
redis.call('ZADD', K_DUE, NOW, RUN_ID)
local how = resume_with == '' and 'restarted' or 'resumed'
emit('run_upgraded', 'from_version', from, 'version', to, 'how', how, 'by', ARGV[10])
return resume_with == '' and 'upgraded' or 'resumed'
