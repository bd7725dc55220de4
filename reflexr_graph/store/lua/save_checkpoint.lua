-- save_checkpoint.lua: replace the checkpoint, fenced by the attempt's token, in one round trip;
-- the one it replaces moves into the run's history (_history.lua, prepended), trimmed here.
-- Standalone (no prelude): it runs at every step boundary, so it touches only what it needs.
-- KEYS[1] rg:{<run_id>}:run     run record hash
-- KEYS[2] rg:{<run_id>}:ckpt    latest checkpoint hash
-- KEYS[3] rg:{<run_id>}:events  event stream
-- KEYS[4] rg:status:running     running status set (score = updated ms)
-- KEYS[5] rg:{<run_id>}:memo    work recorded since the previous checkpoint, which this one holds
-- KEYS[6] rg:{<run_id>}:history       index of the checkpoints kept before the latest
-- KEYS[7] rg:{<run_id>}:history:data  their JSON
-- ARGV[1] run_id  ARGV[2] now ms  ARGV[3] token  ARGV[4] checkpoint JSON  ARGV[5] seq
-- ARGV[6] next node id or ''  ARGV[7] event stream cap
-- ARGV[8] boundaries skipped since the attempt's last write  ARGV[9] their kinds (text)
-- ARGV[10] branch steps and ARGV[11] durable calls answered from records since then
-- ARGV[12] how many checkpoints the history keeps (REFLEXR_CHECKPOINT_HISTORY; 0: none)
-- Returns 1 when saved, 2 when saved and a cancel was asked (the attempt stops here: cancel.lua),
-- 0 when the token does not own the run (the caller raises FencedOut).

local owner = redis.call('HMGET', KEYS[1], 'token', 'status', 'attempts', 'interruptions', 'cancel')
if ARGV[3] == '' or owner[1] ~= ARGV[3] or owner[2] ~= 'running' then
  return 0
end
local payload, seq, next_node, now = ARGV[4], ARGV[5], ARGV[6], ARGV[2]
-- The attempt's number as steps see it (_lib.lua: attempt_number), for the history's listing.
local attempt = (tonumber(owner[3]) or 0) + (tonumber(owner[4]) or 0)
history_push(KEYS[2], KEYS[6], KEYS[7], seq, tonumber(ARGV[12]) or 0)
-- Events are stored compactly, as _lib.lua's emit() writes them (store/event_codec.py): one field
-- 'e' holding the code ('k' boundaries_skipped, 'u' work_reused, 'p' run_progressed), the time and
-- the values in event_codec's order, joined by the unit separator.
local US = '\31'
redis.call('HSET', KEYS[2], 'data', payload, 'seq', seq, 'saved_at', now, 'size', #payload,
  'next_node', next_node, 'attempt', attempt)
redis.call('HINCRBY', KEYS[1], 'checkpoints', 1)
redis.call('HSET', KEYS[1], 'next_node', next_node, 'updated_at', now)
redis.call('ZADD', KEYS[4], 'XX', now, ARGV[1])
-- A checkpoint is only ever taken with no fork in flight and no step running: everything the
-- records kept (branch results, durable calls) is in it now, and a retry resumes from here.
redis.call('DEL', KEYS[5])
-- Boundaries the attempt could not save ride along with the next save: no round trip of their own.
local skipped = tonumber(ARGV[8]) or 0
if skipped > 0 then
  redis.call('HINCRBY', KEYS[1], 'skipped', skipped)
  redis.call('XADD', KEYS[3], 'MAXLEN', '~', ARGV[7], '*', 'e', 'k' .. US .. now .. US .. skipped .. US .. ARGV[9])
end
local steps, calls = tonumber(ARGV[10]) or 0, tonumber(ARGV[11]) or 0
if steps + calls > 0 then
  redis.call('HINCRBY', KEYS[1], 'reused_steps', steps)
  redis.call('HINCRBY', KEYS[1], 'reused_calls', calls)
  redis.call('XADD', KEYS[3], 'MAXLEN', '~', ARGV[7], '*', 'e', 'u' .. US .. now .. US .. steps .. US .. calls)
end
-- Never the payload: events are shown to operators and state may be private.
redis.call('XADD', KEYS[3], 'MAXLEN', '~', ARGV[7], '*', 'e',
  'p' .. US .. now .. US .. seq .. US .. next_node .. US .. #payload)
if owner[5] then
  return 2
end
return 1
