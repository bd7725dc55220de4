-- replay.lua: give a dead or cancelled run a fresh attempt budget and queue it again.
-- Prelude: _lib.lua (KEYS[1..20], ARGV[1..3] as described there).
-- KEYS[1..4] run/ckpt/events/tb  KEYS[5] idem  KEYS[7] rg:dead  KEYS[9] rg:due
-- KEYS[10..16] status sets  KEYS[17..18] memo, mailbox  KEYS[19..20] history
-- ARGV[1] run_id  ARGV[2] now ms  ARGV[3] idempotency key guess  ARGV[4] '1' = from start
-- ARGV[5] the seq of the checkpoint to resume from, '' for the latest (_history.lua)
-- Returns {'ok', HGETALL...} | {'missing'} | {'refused', status} | {'idem', key}
--   | {'no_checkpoint'} (the run keeps no checkpoint ARGV[5]; nothing changed)

local refused, status = refusal(REPLAYABLE)
if refused then
  return refused
end
local from_start, from_seq = ARGV[4] == '1', ARGV[5] or ''
-- Back out of bad steps: an earlier checkpoint becomes the latest, and those after it go.
local dropped = 0
if from_seq ~= '' and (redis.call('HGET', K_CKPT, 'seq') or '') ~= from_seq then
  local next_node, n = history_restore(K_CKPT, K_HIST, K_HIST_DATA, from_seq)
  if next_node == nil then
    return {'no_checkpoint'}
  end
  dropped = n
  redis.call('HSET', K_RUN, 'next_node', next_node)
end
if field('error_type') ~= '' then
  redis.call('HSET', K_RUN, 'prev_error', field('error_type') .. ': ' .. field('error'))
elseif field('error') ~= '' then
  redis.call('HSET', K_RUN, 'prev_error', field('error'))
end
-- resumes is kept: it only ever grows, so fork-stack ids of the replay never collide. A replay
-- starts a fresh attempt budget; prev_attempts and replays keep what came before, for operators.
redis.call('HSET', K_RUN, 'prev_reason', field('reason'), 'prev_attempts', attempt_number())
redis.call('HDEL', K_RUN, 'attempts', 'interruptions', 'suspensions', 'reason', 'error_type', 'error', 'token',
  'output')
redis.call('HINCRBY', K_RUN, 'replays', 1)
redis.call('HDEL', K_RUN, 'unserved_since')
if from_start then
  -- Work recorded since the checkpoint goes with it: a run from the start repeats everything.
  -- So does the history: the new checkpoints are numbered from 1 again.
  redis.call('DEL', K_CKPT, K_MEMO, K_HIST, K_HIST_DATA)
  redis.call('HSET', K_RUN, 'checkpoints', 0, 'next_node', '')
elseif from_seq ~= '' then
  -- Records of work done after that checkpoint must not answer for the steps that now run again.
  redis.call('DEL', K_MEMO)
end
redis.call('ZREM', K_DEAD, RUN_ID)
persist_all()
set_status('queued')
redis.call('ZADD', K_DUE, NOW, RUN_ID)
if from_seq ~= '' then
  emit('run_replayed', 'from_start', '0', 'from_status', status, 'seq', from_seq, 'dropped', dropped)
else
  emit('run_replayed', 'from_start', from_start and '1' or '0', 'from_status', status)
end
return snapshot('ok')
