-- record.lua: keep one piece of finished work between two checkpoints (a branch step's result,
-- a durable call's), fenced by the attempt's token, in one round trip; and give back the limit
-- slots of the step that made it (core/limits.py: a slot goes back with the step's next write).
-- Standalone (no prelude).
-- KEYS and ARGV: store/registry.py's entry 'record' (ARGV: contracts.RecordArgs).
--   rg:{<run_id>}:run     run record hash (the owner's token and status; 'memo' = '1' says
--                                the memo exists, so the next save deletes it, and only then;
--                                'lanes' = '1' likewise that the lanes exist, so the run's end expires them)
--  rg:{<run_id>}:memo    the records, field -> JSON
-- rg:{<run_id>}:lanes   when each branch step ran, kept past the next checkpoint
--   rg:limit:{<key>}:slots, one per slot given back, in the members' order
-- field: the record's field  value: its JSON  lane: the branch step's lane field ('' for none: a
-- durable call)  times: its times  members: the slots' members
-- Returns 1 when recorded, 0 when the token does not own the run (the caller raises FencedOut).

-- Unfenced, as a release of its own was: a slot whose step ended is free whoever owns the run.
for i = members_from, #ARGV do
  redis.call('ZREM', KEYS[slots_from + i - members_from], ARGV[i])
end
local owner = redis.call('HMGET', K_RUN, 'token', 'status', 'memo', 'lanes')
if token == '' or owner[1] ~= token or owner[2] ~= 'running' then
  return 0
end
redis.call('HSET', K_MEMO, field, value)
local flags = {}
if owner[3] ~= '1' then
  flags = {'memo', '1'}
end
if lane ~= '' then
  redis.call('HSET', K_LANES, lane, times)
  if owner[4] ~= '1' then
    table.insert(flags, 'lanes')
    table.insert(flags, '1')
  end
end
if #flags > 0 then
  redis.call('HSET', K_RUN, unpack(flags))
end
return 1
