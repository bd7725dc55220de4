-- record.lua: keep one piece of finished work between two checkpoints (a branch step's result,
-- a durable call's), fenced by the attempt's token, in one round trip; and give back the limit
-- slots of the step that made it (core/limits.py: a slot goes back with the step's next write).
-- Standalone (no prelude).
-- KEYS[1] rg:{<run_id>}:run     run record hash (the owner's token and status; 'memo' = '1' says
--                               the memo exists, so the next save deletes it, and only then;
--                               'lanes' = '1' likewise that the lanes exist, so the run's end expires them)
-- KEYS[2] rg:{<run_id>}:memo    the records, field -> JSON
-- KEYS[3] rg:{<run_id>}:lanes   when each branch step ran, kept past the next checkpoint
-- KEYS[4..] rg:limit:{<key>}:slots, one per slot given back, in ARGV[6..]'s order
-- ARGV[1] token  ARGV[2] field  ARGV[3] JSON value
-- ARGV[4] the branch step's lane field ('' for none: a durable call)  ARGV[5] its times
-- ARGV[6..] the slots' members
-- Returns 1 when recorded, 0 when the token does not own the run (the caller raises FencedOut).

-- Unfenced, as a release of its own was: a slot whose step ended is free whoever owns the run.
for i = 6, #ARGV do
  redis.call('ZREM', KEYS[i - 2], ARGV[i])
end
local owner = redis.call('HMGET', KEYS[1], 'token', 'status', 'memo', 'lanes')
if ARGV[1] == '' or owner[1] ~= ARGV[1] or owner[2] ~= 'running' then
  return 0
end
redis.call('HSET', KEYS[2], ARGV[2], ARGV[3])
local flags = {}
if owner[3] ~= '1' then
  flags = {'memo', '1'}
end
if ARGV[4] ~= '' then
  redis.call('HSET', KEYS[3], ARGV[4], ARGV[5])
  if owner[4] ~= '1' then
    table.insert(flags, 'lanes')
    table.insert(flags, '1')
  end
end
if #flags > 0 then
  redis.call('HSET', KEYS[1], unpack(flags))
end
return 1
