-- read_checkpoint.lua: one checkpoint of a run, the latest or one of its history, with the run's
-- recorded inputs it may refer to, read at one moment (a running attempt moves the latest into
-- the history as it saves). Read-only. Standalone (no prelude; _history.lua is prepended).
-- KEYS[1] rg:{<run_id>}:run           run record hash (graph, inputs, state)
-- KEYS[2] rg:{<run_id>}:ckpt          the latest checkpoint
-- KEYS[3] rg:{<run_id>}:history       index of the checkpoints kept before the latest
-- KEYS[4] rg:{<run_id>}:history:data  their JSON
-- ARGV[1] seq
-- Returns {'missing'} (no run) | {'none'} (no checkpoint ARGV[1]) |
--   {'ok', seq, saved_at ms, size, attempt, next_node, checkpoint JSON, graph, inputs JSON, state JSON}

local run = redis.call('HMGET', KEYS[1], 'graph', 'inputs', 'state')
if not run[1] then
  return {'missing'}
end
local seq = ARGV[1]
local latest = redis.call('HMGET', KEYS[2], 'seq', 'saved_at', 'size', 'attempt', 'next_node', 'data')
if latest[1] == seq then
  return {'ok', seq, latest[2] or '', latest[3] or '', latest[4] or '', latest[5] or '', latest[6] or '',
    run[1], run[2] or '', run[3] or ''}
end
local found = redis.call('ZRANGEBYSCORE', KEYS[3], seq, seq)
local payload = redis.call('HGET', KEYS[4], seq)
if #found == 0 or not payload then
  return {'none'}
end
local s, saved_at, size, attempt, next_node = history_entry(found[1])
return {'ok', s, saved_at, size, attempt, next_node, payload, run[1], run[2] or '', run[3] or ''}
