-- child_started.lua: a parent's record of the child run its step just made, when the two are in
-- different shards (a cluster): create_run.lua made the child first, with an idempotency key the
-- parent's run id and the step's record name, so a retry after a crash between the two finds the
-- same child and writes this. On one Redis, create_run.lua writes the same in its round trip.
-- Standalone (no prelude).
-- KEYS[1] the parent's run hash  KEYS[2] its memo  KEYS[3] its mailbox
-- ARGV[1] the parent attempt's token  ARGV[2] the memo field (its record: the child's id as JSON)
-- ARGV[3] the child's run id
-- Returns 1 written, 0 the token no longer owns the parent (nothing written), 2 written, but the
--   parent was asked to cancel meanwhile: the caller cancels the child, and the attempt ends

local held = redis.call('HMGET', KEYS[1], 'token', 'status', 'cancel')
if held[1] ~= ARGV[1] or held[2] ~= 'running' then
  return 0
end
redis.call('HSET', KEYS[2], ARGV[2], '"' .. ARGV[3] .. '"')
local fresh = redis.call('HSETNX', KEYS[3], 'child:' .. ARGV[3], '')
redis.call('HSET', KEYS[1], 'memo', '1', 'mbox', '1')
if fresh == 1 then
  redis.call('HINCRBY', KEYS[1], 'children', 1)
end
-- Recorded all the same, so the parent lists the child it made.
if held[3] then
  return 2
end
return 1
