-- emit.lua: append a batch of items a step emitted (reflexr_graph.emit) to the run's stream,
-- fenced by the attempt's token, in one round trip. Standalone (no prelude).
-- K_RUN rg:{<run_id>}:run     run record hash (the owner's token and status; 'stream' = '1' says
--                               the stream exists, so the run's end expires it; 'memo' as record.lua)
-- K_STREAM rg:{<run_id>}:stream  the items, entry id 0-<offset>: offsets 1, 2, 3 ... as written
-- K_MEMO rg:{<run_id>}:memo    work recorded since the latest checkpoint; its stream marks,
--                               's|<node>|<branch>|<call>' = the offset of the first item of that
--                               scope since then, are what a later attempt's restart voids from
-- KEYS and ARGV: store/registry.py's entry 'emit' (ARGV: contracts.EmitArgs).
-- max_items: the most items the stream may hold (REFLEXR_STREAM_MAX_ITEMS)
-- attempt: the attempt number the items carry
-- after: the last offset the attempt knows the stream held, -1 before its first write
-- count: how many items follow
-- items: 7 per item: topic, node, branch, durable call ('' outside one), restart
--   ('1' or '0'), value JSON, and the memo field to set to the item's offset if it has none ('' for none)
-- Returns store/contracts.py EmitReply {outcome, last offset}: outcome 1 written, 2 the stream is
-- full (the items that fit were written), 0 the token does not own the run (nothing written).

local owner = redis.call('HMGET', K_RUN, 'token', 'status', 'memo', 'stream')
if token == '' or owner[1] ~= token or owner[2] ~= 'running' then
  return {0, 0}
end
local have = 0
if owner[4] == '1' then
  have = redis.call('XLEN', K_STREAM)
end
-- Only the owner writes: a stream past what it last saw holds this batch (its reply was lost).
local known = tonumber(after) or -1
if known >= 0 and have > known then
  return {1, have}
end
local items = tonumber(count) or 0
local fit = math.max(0, math.min(items, (tonumber(max_items) or 0) - have))
local marked = false
for i = 1, fit do
  local at = items_from - 1 + (i - 1) * 7
  local offset = have + i
  -- Every entry has the same field names in the same order: Redis then keeps them once per node.
  redis.call('XADD', K_STREAM, '0-' .. offset, 't', ARGV[at + 1], 'n', ARGV[at + 2], 'b', ARGV[at + 3],
    'c', ARGV[at + 4], 'a', attempt, 'r', ARGV[at + 5], 'v', ARGV[at + 6])
  if ARGV[at + 7] ~= '' then
    redis.call('HSETNX', K_MEMO, ARGV[at + 7], offset)
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
  redis.call('HSET', K_RUN, unpack(run))
end
if fit < items then
  return {2, have + fit}
end
return {1, have + fit}
