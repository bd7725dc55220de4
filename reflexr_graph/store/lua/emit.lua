-- emit.lua: append a batch of items a step emitted (reflexr_graph.emit) to the run's stream,
-- fenced by the attempt's token, in one round trip. Standalone (no prelude).
-- KEYS[1] rg:{<run_id>}:run     run record hash (the owner's token and status; 'stream' = '1' says
--                               the stream exists, so the run's end expires it; 'memo' as record.lua)
-- KEYS[2] rg:{<run_id>}:stream  the items, entry id 0-<offset>: offsets 1, 2, 3 ... as written
-- KEYS[3] rg:{<run_id>}:memo    work recorded since the latest checkpoint; its stream marks,
--                               's|<node>|<branch>|<call>' = the offset of the first item of that
--                               scope since then, are what a later attempt's restart voids from
-- ARGV: store/contracts.py EmitArgs, in its field order:
-- ARGV[1] token  ARGV[2] the most items the stream may hold (REFLEXR_STREAM_MAX_ITEMS)
-- ARGV[3] the attempt number the items carry
-- ARGV[4] the last offset the attempt knows the stream held, -1 before its first write
-- ARGV[5] how many items follow
-- then 7 per item, from ARGV[6]: topic, node, branch, durable call ('' outside one), restart
--   ('1' or '0'), value JSON, and the memo field to set to the item's offset if it has none ('' for none)
-- Returns store/contracts.py EmitReply {outcome, last offset}: outcome 1 written, 2 the stream is
-- full (the items that fit were written), 0 the token does not own the run (nothing written).

local owner = redis.call('HMGET', KEYS[1], 'token', 'status', 'memo', 'stream')
if ARGV[1] == '' or owner[1] ~= ARGV[1] or owner[2] ~= 'running' then
  return {0, 0}
end
local have = 0
if owner[4] == '1' then
  have = redis.call('XLEN', KEYS[2])
end
-- Only the owner writes: a stream past what it last saw holds this batch (its reply was lost).
local after = tonumber(ARGV[4]) or -1
if after >= 0 and have > after then
  return {1, have}
end
local count = tonumber(ARGV[5]) or 0
local fit = math.max(0, math.min(count, (tonumber(ARGV[2]) or 0) - have))
local marked = false
for i = 1, fit do
  local at = 5 + (i - 1) * 7
  local offset = have + i
  -- Every entry has the same field names in the same order: Redis then keeps them once per node.
  redis.call('XADD', KEYS[2], '0-' .. offset, 't', ARGV[at + 1], 'n', ARGV[at + 2], 'b', ARGV[at + 3],
    'c', ARGV[at + 4], 'a', ARGV[3], 'r', ARGV[at + 5], 'v', ARGV[at + 6])
  if ARGV[at + 7] ~= '' then
    redis.call('HSETNX', KEYS[3], ARGV[at + 7], offset)
    marked = true
  end
end
local run = {}
if fit > 0 and owner[4] ~= '1' then
  table.insert(run, 'stream')
  table.insert(run, '1')
end
if marked and owner[3] ~= '1' then
  table.insert(run, 'memo')
  table.insert(run, '1')
end
if #run > 0 then
  redis.call('HSET', KEYS[1], unpack(run))
end
if fit < count then
  return {2, have + fit}
end
return {1, have + fit}
