-- save_checkpoint.lua: make a checkpoint the run's latest, fenced by the attempt's token, in one
-- round trip. Its payload is written once, into the checkpoint hash that keeps the history too
-- (_history.lua, prepended); the run hash points at it, and the oldest past the bound goes.
-- Standalone (no prelude): it runs at every step boundary, so it touches only what it needs:
-- one HMGET and one HSET of the run, one HSET of the payload, and the event.
-- KEYS[1] rg:{<run_id>}:run     run record hash (owner, counters, the checkpoints' entries)
-- KEYS[2] rg:{<run_id>}:ckpt    the checkpoints kept, seq -> JSON
-- KEYS[3] rg:{<run_id>}:events  event stream
-- KEYS[4] rg:{<run_id>}:memo    work recorded since the previous checkpoint, which this one holds
-- KEYS[5..] rg:limit:{<key>}:slots, one per limit slot given back, in ARGV[13..]'s order
-- ARGV: store/contracts.py SaveArgs, in its field order:
-- ARGV[1] run_id  ARGV[2] now ms  ARGV[3] token  ARGV[4] checkpoint JSON  ARGV[5] seq
-- ARGV[6] next node id or ''  ARGV[7] event stream cap
-- ARGV[8] boundaries skipped since the attempt's last write  ARGV[9] their kinds (text)
-- ARGV[10] branch steps and ARGV[11] durable calls answered from records since then
-- ARGV[12] how many checkpoints the history keeps before the latest (REFLEXR_CHECKPOINT_HISTORY)
-- ARGV[13..] the members of the slots of the step that just ended (core/limits.py), given back here
-- Returns store/contracts.py Saved: 1 saved, 2 saved and a cancel was asked (the attempt stops
-- here: cancel.lua), 0 the token does not own the run (the caller raises FencedOut).

-- Unfenced, as a release of its own was: a slot whose step ended is free whoever owns the run.
for i = 13, #ARGV do
  redis.call('ZREM', KEYS[i - 8], ARGV[i])
end
-- A small run hash is a listpack, where HMGET scans the hash for each name, the whole of it for
-- a name it lacks: the notes' counters are asked for only by a save that has notes to add.
local skipped = tonumber(ARGV[8]) or 0
local steps, calls = tonumber(ARGV[10]) or 0, tonumber(ARGV[11]) or 0
local names = {'token', 'status', 'attempts', 'interruptions', 'cancel', 'ck_first', 'checkpoints', 'memo',
  'ck_last'}
if skipped + steps + calls > 0 then
  names[10], names[11], names[12] = 'skipped', 'reused_steps', 'reused_calls'
end
local owner = redis.call('HMGET', KEYS[1], unpack(names))
if ARGV[3] == '' or owner[1] ~= ARGV[3] or owner[2] ~= 'running' then
  return 0
end
local payload, seq, next_node, now = ARGV[4], ARGV[5], ARGV[6], ARGV[2]
-- The attempt's number as steps see it (_lib.lua: attempt_number), for the history's listing.
local attempt = (tonumber(owner[3]) or 0) + (tonumber(owner[4]) or 0)
local first, gone = ckpt_plan(owner[6] or '', owner[9] or '', seq, tonumber(ARGV[12]) or 0)
local dropped = ckpt_write(KEYS[2], seq, payload, gone)
local run = {ckpt_field(seq), ckpt_entry(now, #payload, attempt, next_node),
  'ck_last', seq, 'checkpoints', (tonumber(owner[7]) or 0) + 1, 'next_node', next_node, 'updated_at', now}
-- Written only when it moves (each field written is looked for in the hash).
if tostring(first) ~= owner[6] then
  table.insert(run, 'ck_first')
  table.insert(run, first)
end
if #dropped > 0 then
  redis.call('HDEL', KEYS[1], unpack(dropped))
end
-- A checkpoint is only ever taken with no fork in flight and no step running: everything the
-- records kept (branch results, durable calls) is in it now, and a retry resumes from here.
-- Only when the journal wrote one ('memo' = '1', record.lua): most saves have none to delete.
if owner[8] == '1' then
  redis.call('DEL', KEYS[4])
  table.insert(run, 'memo')
  table.insert(run, '0')
end
-- Events are stored compactly, as _lib.lua's emit() writes them (store/event_codec.py): one field
-- 'e' holding the code ('k' boundaries_skipped, 'u' work_reused, 'p' run_progressed), the time and
-- the values in event_codec's order, joined by the unit separator.
local US = '\31'
-- Boundaries the attempt could not save ride along with the next save: no round trip of their own.
if skipped > 0 then
  table.insert(run, 'skipped')
  table.insert(run, (tonumber(owner[10]) or 0) + skipped)
  redis.call('XADD', KEYS[3], 'MAXLEN', '~', ARGV[7], '*', 'e', 'k' .. US .. now .. US .. skipped .. US .. ARGV[9])
end
if steps + calls > 0 then
  table.insert(run, 'reused_steps')
  table.insert(run, (tonumber(owner[11]) or 0) + steps)
  table.insert(run, 'reused_calls')
  table.insert(run, (tonumber(owner[12]) or 0) + calls)
  redis.call('XADD', KEYS[3], 'MAXLEN', '~', ARGV[7], '*', 'e', 'u' .. US .. now .. US .. steps .. US .. calls)
end
redis.call('HSET', KEYS[1], unpack(run))
-- Never the payload: events are shown to operators and state may be private.
redis.call('XADD', KEYS[3], 'MAXLEN', '~', ARGV[7], '*', 'e',
  'p' .. US .. now .. US .. seq .. US .. next_node .. US .. #payload)
if owner[5] then
  return 2
end
return 1
