-- save_checkpoint.lua: make a checkpoint the run's latest, fenced by the attempt's token, in one
-- round trip. Its payload is written once, into the checkpoint hash that keeps the history too
-- (_history.lua, prepended); the run hash points at it, and the oldest past the bound goes.
-- Standalone (no prelude): it runs at every step boundary, so it touches only what it needs:
-- one HMGET and one HSET of the run, one HSET of the payload, and the event.
-- KEYS and ARGV: store/registry.py's entry 'save_checkpoint' (ARGV: contracts.SaveArgs).
--    rg:{<run_id>}:run     run record hash (owner, counters, the checkpoints' entries)
--   rg:{<run_id>}:ckpt    the checkpoints kept, seq -> JSON
-- rg:{<run_id>}:events  event stream
--   rg:{<run_id>}:memo    work recorded since the previous checkpoint, which this one holds
--    rg:limit:{<key>}:slots, one per limit slot given back, in the members' order
-- payload: the checkpoint JSON  next_node: '' when finished  events_cap: the event stream's cap
-- skipped: boundaries skipped since the attempt's last write; skip_kinds: their kinds (text)
-- reused_steps, reused_calls: branch steps and durable calls answered from records since then
-- history: how many checkpoints the history keeps before the latest (REFLEXR_CHECKPOINT_HISTORY)
-- members: the slots of the step that just ended (core/limits.py), given back here
-- Returns store/contracts.py Saved: 1 saved, 2 saved and a cancel was asked (the attempt stops
-- here: cancel.lua), 0 the token does not own the run (the caller raises FencedOut).

-- Unfenced, as a release of its own was: a slot whose step ended is free whoever owns the run.
for i = members_from, #ARGV do
  redis.call('ZREM', KEYS[slots_from + i - members_from], ARGV[i])
end
-- A small run hash is a listpack, where HMGET scans the hash for each name, the whole of it for
-- a name it lacks: the notes' counters are asked for only by a save that has notes to add.
local skips = tonumber(skipped) or 0
local steps, calls = tonumber(reused_steps) or 0, tonumber(reused_calls) or 0
local names = {'token', 'status', 'attempts', 'interruptions', 'cancel', 'ck_first', 'checkpoints', 'memo',
  'ck_last'}
if skips + steps + calls > 0 then
  names[10], names[11], names[12] = 'skipped', 'reused_steps', 'reused_calls'
end
local owner = redis.call('HMGET', K_RUN, unpack(names))
if token == '' or owner[1] ~= token or owner[2] ~= 'running' then
  return 0
end
local now = now_ms
-- The attempt's number as steps see it (_lib.lua: attempt_number), for the history's listing.
local attempt = (tonumber(owner[3]) or 0) + (tonumber(owner[4]) or 0)
local first, gone = ckpt_plan(owner[6] or '', owner[9] or '', seq, tonumber(history) or 0)
local dropped = ckpt_write(K_CKPT, seq, payload, gone)
local run = {ckpt_field(seq), ckpt_entry(now, #payload, attempt, next_node),
  'ck_last', seq, 'checkpoints', (tonumber(owner[7]) or 0) + 1, 'next_node', next_node, 'updated_at', now}
-- Written only when it moves (each field written is looked for in the hash).
if tostring(first) ~= owner[6] then
  table.insert(run, 'ck_first')
  table.insert(run, first)
end
if #dropped > 0 then
  redis.call('HDEL', K_RUN, unpack(dropped))
end
-- A checkpoint is only ever taken with no fork in flight and no step running: everything the
-- records kept (branch results, durable calls) is in it now, and a retry resumes from here.
-- Only when the journal wrote one ('memo' = '1', record.lua): most saves have none to delete.
if owner[8] == '1' then
  redis.call('DEL', K_MEMO)
  table.insert(run, 'memo')
  table.insert(run, '0')
end
-- Events are stored compactly, as _lib.lua's emit() writes them (store/event_codec.py): one field
-- 'e' holding the code ('k' boundaries_skipped, 'u' work_reused, 'p' run_progressed), the time and
-- the values in event_codec's order, joined by the unit separator.
local US = '\31'
-- Boundaries the attempt could not save ride along with the next save: no round trip of their own.
if skips > 0 then
  table.insert(run, 'skipped')
  table.insert(run, (tonumber(owner[10]) or 0) + skips)
  redis.call('XADD', K_EVENTS, 'MAXLEN', '~', events_cap, '*', 'e', 'k' .. US .. now .. US .. skips .. US .. skip_kinds)
end
if steps + calls > 0 then
  table.insert(run, 'reused_steps')
  table.insert(run, (tonumber(owner[11]) or 0) + steps)
  table.insert(run, 'reused_calls')
  table.insert(run, (tonumber(owner[12]) or 0) + calls)
  redis.call('XADD', K_EVENTS, 'MAXLEN', '~', events_cap, '*', 'e', 'u' .. US .. now .. US .. steps .. US .. calls)
end
redis.call('HSET', K_RUN, unpack(run))
-- Never the payload: events are shown to operators and state may be private.
redis.call('XADD', K_EVENTS, 'MAXLEN', '~', events_cap, '*', 'e',
  'p' .. US .. now .. US .. seq .. US .. next_node .. US .. #payload)
if owner[5] then
  return 2
end
return 1
