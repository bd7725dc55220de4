-- read_checkpoint.lua: one checkpoint of a run, the latest or one of its history, with the run's
-- recorded inputs it may refer to, read at one moment (a running attempt may trim the history as
-- it saves). Read-only. Standalone (no prelude; _history.lua is prepended).
-- KEYS and ARGV: store/registry.py's entry 'read_checkpoint' (ARGV: contracts.ReadCheckpointArgs).
-- K_RUN: rg:{<run_id>}:run   run record hash (graph, inputs, state, the checkpoint's entry; the
--                             version and output a finished checkpoint kept as its entry is made of)
-- K_CKPT: rg:{<run_id>}:ckpt  the checkpoints kept, seq -> JSON
-- K_INPUTS: rg:{<run_id>}:in    the run's inputs when long ('in' = '1' in the run hash; _lib.lua)
-- Returns store/contracts.py CheckpointReply: {'missing'} (no run) | {'none'} (no checkpoint
--   seq) |
--   {'ok', seq, saved_at ms, size, attempt, next_node, checkpoint JSON, graph, inputs JSON, state JSON}
--   with, for a finished checkpoint kept as its entry alone (CKPT_FROM_OUTPUT), checkpoint JSON ''
--   and two more: the run's version and output, which store/records.py finished_checkpoint makes
--   it of (after the output's payload codec: an envelope is decoded first)

local run = redis.call('HMGET', K_RUN, 'graph', 'inputs', 'state', ckpt_field(seq), 'in')
if not run[1] then
  return {'missing'}
end
if not run[4] then
  return {'none'}
end
local saved_at, size, attempt, next_node, from_output = ckpt_fields(run[4])
local payload, made_of = '', nil
if from_output then
  made_of = redis.call('HMGET', K_RUN, 'version', 'output')
else
  payload = redis.call('HGET', K_CKPT, seq)
  if not payload then
    return {'none'}
  end
end
if run[5] == '1' then
  run[2] = redis.call('GET', K_INPUTS)
end
local out = {'ok', seq, saved_at, size, attempt, next_node, payload, run[1], run[2] or '', run[3] or ''}
if made_of then
  out[11], out[12] = made_of[1] or '', made_of[2] or ''
end
return out
