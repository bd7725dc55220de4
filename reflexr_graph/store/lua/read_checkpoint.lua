-- read_checkpoint.lua: one checkpoint of a run, the latest or one of its history, with the run's
-- recorded inputs it may refer to, read at one moment (a running attempt may trim the history as
-- it saves). Read-only. Standalone (no prelude; _history.lua is prepended).
-- KEYS[1] rg:{<run_id>}:run   run record hash (graph, inputs, state, the checkpoint's entry)
-- KEYS[2] rg:{<run_id>}:ckpt  the checkpoints kept, seq -> JSON
-- KEYS[3] rg:{<run_id>}:in    the run's inputs when long ('in' = '1' in the run hash; _lib.lua)
-- ARGV[1] seq
-- Returns {'missing'} (no run) | {'none'} (no checkpoint ARGV[1]) |
--   {'ok', seq, saved_at ms, size, attempt, next_node, checkpoint JSON, graph, inputs JSON, state JSON}

local run = redis.call('HMGET', KEYS[1], 'graph', 'inputs', 'state', ckpt_field(ARGV[1]), 'in')
if not run[1] then
  return {'missing'}
end
local payload = run[4] and redis.call('HGET', KEYS[2], ARGV[1])
if not payload then
  return {'none'}
end
local saved_at, size, attempt, next_node = ckpt_fields(run[4])
if run[5] == '1' then
  run[2] = redis.call('GET', KEYS[3])
end
return {'ok', ARGV[1], saved_at, size, attempt, next_node, payload, run[1], run[2] or '', run[3] or ''}
