-- upgrade.lua: move a run of a graph version to another version (G9): one held for its version
-- (hold_version.lua), or one `upgrade --include-running` marked, once its attempt has ended. It
-- starts over from its first step (the seed's rule for a changed graph), or with
-- --resume-compatible resumes from its latest checkpoint, which the caller judged compatible and
-- wrote over to the new version (core/compat.py rebase); the work recorded since it (memo) stays.
-- Prelude: _lib.lua (its KEYS and RUN_ID, NOW, IDEM_GUESS as described there), then _history.lua.
-- K_RUN/K_CKPT  K_EVENTS events  K_DUE rg:due  STATUS_SETS  K_MEMO memo
-- K_HELD rg:versions:<graph>:held:<from>  the runs held for the version it leaves
-- KEYS and ARGV: store/registry.py's entry 'upgrade' (ARGV: contracts.UpgradeArgs).
-- from_version: the version it leaves  to_version: the version it moves to
-- checkpoint: the latest checkpoint as the new version's ('' starts the run over)
-- replaces_seq: the seq of the checkpoint replaces (another latest one: 'skip', judge again)
-- mark: '1': only mark the run (upgrade_to; claim.lua refuses its next attempt on any other
--   version), with held_because as its mark ('upgrade_mark', which a worker of the new version reads
--   when it moves the run: fleet/versions.py). The mark lives in the run hash, so a marked run that
--   ends where it is loses it in the same write (_lib.lua set_status). A marked run waiting for a
--   signal or a timer moves like a queued one, and if it resumes it goes on waiting.
--   '2': an auto-upgrade leaves the run where it is, its mark dropped, because the new version
--   cannot read its checkpoint (held_because, why): it stays held for its version (waiting_for
--   'version:<v> (why)' once it waits for it), and 'upgrade_held' is recorded once per new version.
-- by: who moves it ('auto_upgrade'; '' for an operator), recorded on 'run_upgraded'
-- Returns 'upgraded' | 'resumed' | 'marked' | 'kept' (left held, mark '2'; 'still' if it was
--   left held for that version before) | 'running' (its
--   attempt goes on: it stays held or marked) | 'skip' (not of that version, finished, neither
--   held nor marked, or its checkpoint changed) | 'gone'

want(OPTIONAL_KEYS, 'version', 'waiting_for', 'held_since', 'ck_first', 'wait_take', 'upgrade_held')
local from, to, resume_with = from_version, to_version, checkpoint
local was_held = redis.call('SREM', K_HELD, RUN_ID) == 1
if not exists() then
  return 'gone'
end
local status = field('status')
if field('version') ~= from or TERMINAL[status] then
  -- No longer a run to move: its mark goes (so a replay of it is claimed where it is).
  drop('upgrade_to', 'upgrade_mark')
  return 'skip'
end
if mark == '1' then
  put('upgrade_to', to)
  put('upgrade_mark', held_because)
  return 'marked'
end
local waits = status == 'waiting' and waits_for_version(from)
if mark == '2' then
  drop('upgrade_to', 'upgrade_mark')
  if was_held then
    redis.call('SADD', K_HELD, RUN_ID)
  end
  if waits then
    put('waiting_for', 'version:' .. from .. ' (' .. held_because .. ')')
  end
  if field('upgrade_held') == to then
    return 'still'
  end
  put('upgrade_held', to)
  emit('upgrade_held', 'from_version', from, 'version', to, 'reason', held_because)
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
if resume_with ~= '' and field('ck_last') ~= replaces_seq then
  return 'skip'
end
if suspended and resume_with ~= '' then
  -- It goes on waiting, on the new version: its signal or timer queues it there.
  redis.call('HSET', K_CKPT, replaces_seq, resume_with)
  drop('upgrade_to', 'upgrade_mark', 'upgrade_held')
  put('version', to)
  emit('run_upgraded', 'from_version', from, 'version', to, 'how', 'resumed', 'by', by)
  return 'resumed'
end
if resume_with == '' then
  -- As a replay from the start: the checkpoints and the work recorded since go, numbered from 1 again.
  ckpt_forget_all(K_CKPT, K_MEMO)
  put('checkpoints', 0)
  put('next_node', '')
else
  redis.call('HSET', K_CKPT, replaces_seq, resume_with)
end
drop('waiting_for', 'wake_at', 'held_since', 'retry_at', 'upgrade_to', 'upgrade_mark', 'wait_take',
  'upgrade_held')
put('version', to)
set_status('queued')
redis.call('ZADD', K_DUE, NOW, RUN_ID)
local how = resume_with == '' and 'restarted' or 'resumed'
emit('run_upgraded', 'from_version', from, 'version', to, 'how', how, 'by', by)
return resume_with == '' and 'upgraded' or 'resumed'
