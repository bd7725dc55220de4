-- record.lua: keep one piece of finished work between two checkpoints (a branch step's result,
-- a durable call's), fenced by the attempt's token, in one round trip; and give back the limit
-- slots of the step that made it (core/limits.py: a slot goes back with the step's next write).
-- Standalone (no prelude).
-- KEYS[1] rg:{<run_id>}:run     run record hash (the owner's token and status; 'memo' = '1' says
--                               the memo exists, so the next save deletes it, and only then)
-- KEYS[2] rg:{<run_id>}:memo    the records, field -> JSON
-- KEYS[3..] rg:limit:{<key>}:slots, one per slot given back, in ARGV[4..]'s order
-- ARGV[1] token  ARGV[2] field  ARGV[3] JSON value  ARGV[4..] the slots' members
-- Returns 1 when recorded, 0 when the token does not own the run (the caller raises FencedOut).

-- Unfenced, as a release of its own was: a slot whose step ended is free whoever owns the run.
for i = 4, #ARGV do
  redis.call('ZREM', KEYS[i - 1], ARGV[i])
end
local owner = redis.call('HMGET', KEYS[1], 'token', 'status', 'memo')
if ARGV[1] == '' or owner[1] ~= ARGV[1] or owner[2] ~= 'running' then
  return 0
end
redis.call('HSET', KEYS[2], ARGV[2], ARGV[3])
if owner[3] ~= '1' then
  redis.call('HSET', KEYS[1], 'memo', '1')
end
return 1
