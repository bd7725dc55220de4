-- list_checkpoints.lua: the checkpoints a run keeps, without their JSON: the entries in the run
-- hash (_history.lua, prepended). Read-only. Standalone (no prelude).
-- KEYS and ARGV: store/registry.py's entry 'list_checkpoints'.
-- K_RUN: rg:{<run_id>}:run      run record hash (status, ck_first, ck_last, c:<seq> entries)
-- Returns store/contracts.py CheckpointListReply: {'missing'} | {'ok', seq, entry, ...} oldest
--   first, the latest last; an entry is saved_at ms|size|attempt|next_node

local run = redis.call('HMGET', K_RUN, 'status', 'ck_first', 'ck_last')
if not run[1] then
  return {'missing'}
end
local out = {'ok'}
local first, last = tonumber(run[2]), tonumber(run[3])
if not first then
  return out
end
local names = {}
for s = first, last do
  names[#names + 1] = ckpt_field(s)
end
for i, entry in ipairs(redis.call('HMGET', K_RUN, unpack(names))) do
  if entry then
    out[#out + 1] = tostring(first + i - 1)
    out[#out + 1] = entry
  end
end
return out
