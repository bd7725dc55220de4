-- replay.lua: give a dead or cancelled run a fresh attempt budget and queue it again.
-- Prelude: _lib.lua (its KEYS and RUN_ID, NOW, IDEM_GUESS as described there).
-- K_RUN/K_CKPT/K_EVENTS/K_TB  K_IDEM idem  K_DEAD rg:dead  K_DUE rg:due
-- STATUS_SETS  K_MEMO, K_MAILBOX
-- KEYS and ARGV: store/registry.py's entry 'replay' (ARGV: contracts.ReplayArgs).
-- from_start: '1' = from start
-- from_seq: the seq of the checkpoint to resume from, '' for the latest (_history.lua, prepended)
-- by: who replays (a token's name, cli@user@host), recorded as 'by'; '' for none
-- Returns {'ok', HGETALL...} | {'missing'} | {'refused', status} | {'idem', key}
--   | {'no_checkpoint'} (the run keeps no checkpoint from_seq; nothing changed)

want(COUNTERS, OPTIONAL_KEYS, LAST_ERROR, 'replays', 'ck_first', 'unserved_since', 'wait_take')
local refused, status = refusal(REPLAYABLE)
if refused then
  return refused
end
local from_the_start = from_start == '1'
from_seq, by = from_seq or '', by or ''
-- Back out of bad steps: an earlier checkpoint becomes the latest, and those after it go.
local dropped = 0
if from_seq ~= '' and field('ck_last') ~= from_seq then
  -- Only a seq the run keeps, with its payload: else nothing changes.
  local entry = field(ckpt_field(from_seq))
  if entry == '' or redis.call('HEXISTS', K_CKPT, from_seq) == 0 then
    return {'no_checkpoint'}
  end
  local _, gone = ckpt_plan(field('ck_first'), field('ck_last'), from_seq, num('ck_last'))
  drop(unpack(ckpt_drop(K_CKPT, gone)))
  dropped = #gone
  put('ck_last', from_seq)
  local _, _, _, next_node = ckpt_fields(entry)
  put('next_node', next_node)
end
if field('error_type') ~= '' then
  put('prev_error', field('error_type') .. ': ' .. field('error'))
elseif field('error') ~= '' then
  put('prev_error', field('error'))
end
-- resumes is kept: it only ever grows, so fork-stack ids of the replay never collide. A replay
-- starts a fresh attempt budget; prev_attempts and replays keep what came before, for operators.
put('prev_reason', field('reason'))
put('prev_attempts', attempt_number())
-- wait_take: the steps run again from another point, so no claim takes a signal for them.
drop('attempts', 'interruptions', 'suspensions', 'reason', 'error_type', 'error', 'failed', 'token', 'output',
  'unserved_since', 'wait_take')
incr('replays', 1)
-- The keys that stay lose their TTL first: those dropped below need none.
persist_all()
if from_the_start then
  -- Work recorded since the checkpoint goes with it: a run from the start repeats everything.
  -- So does the history: the new checkpoints are numbered from 1 again.
  ckpt_forget_all(K_CKPT, K_MEMO)
  put('checkpoints', 0)
  put('next_node', '')
elseif from_seq ~= '' then
  -- Records of work done after that checkpoint must not answer for the steps that now run again.
  drop_memo()
end
if status == 'dead' then
  redis.call('ZREM', K_DEAD, RUN_ID)
end
set_status('queued')
redis.call('ZADD', K_DUE, NOW, RUN_ID)
if by ~= '' then
  -- 'by' comes after seq and dropped, which are '' for a replay from the latest or the start.
  local seq, gone = from_seq, from_seq ~= '' and dropped or ''
  emit('run_replayed', 'from_start', from_the_start and '1' or '0', 'from_status', status, 'seq', seq,
    'dropped', gone, 'by', by)
elseif from_seq ~= '' then
  emit('run_replayed', 'from_start', '0', 'from_status', status, 'seq', from_seq, 'dropped', dropped)
else
  emit('run_replayed', 'from_start', from_the_start and '1' or '0', 'from_status', status)
end
return snapshot('ok')
