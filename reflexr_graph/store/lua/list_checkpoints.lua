-- list_checkpoints.lua: the checkpoints a run keeps, without their JSON, read at one moment (a
-- running attempt moves the latest into the history as it saves). Read-only. Standalone (no prelude).
-- KEYS[1] rg:{<run_id>}:run      run record hash (only whether it exists)
-- KEYS[2] rg:{<run_id>}:ckpt     the latest checkpoint
-- KEYS[3] rg:{<run_id>}:history  index of the checkpoints kept before the latest
-- ARGV: none (no ARGV[i] is read)
-- Returns {'missing'} | {'ok', latest seq, saved_at ms, size, attempt, next_node (all '' without
--   a checkpoint), history member, ...} with the members oldest first (see _history.lua)

if redis.call('EXISTS', KEYS[1]) == 0 then
  return {'missing'}
end
local out = {'ok'}
for _, value in ipairs(redis.call('HMGET', KEYS[2], 'seq', 'saved_at', 'size', 'attempt', 'next_node')) do
  table.insert(out, value or '')
end
for _, member in ipairs(redis.call('ZRANGE', KEYS[3], 0, -1)) do
  table.insert(out, member)
end
return out
