-- claim.lua: start an attempt: fence out earlier ones with a new token and take the lease.
-- Prelude: _lib.lua (its KEYS and RUN_ID, NOW, IDEM_GUESS as described there). The claim returns the
-- checkpoint too, so an attempt starts with one round trip, not two.
-- K_RUN run  K_CKPT ckpt (the latest's payload)  K_EVENTS/K_TB  K_IDEM idem
-- K_DEAD rg:dead  K_LEASES rg:leases  K_DUE rg:due  STATUS_SETS
-- K_MEMO memo (read with the checkpoint; a woken wait's record written)
-- K_MAILBOX mailbox (the signal a woken wait_for_signal waits on taken from it)
-- K_INPUTS the run's long inputs (read only when 'in' = '1')
-- KEYS and ARGV: store/registry.py's entry 'claim' (ARGV: contracts.ClaimArgs).
-- token: (unique per attempt)  lease_expiry_ms: lease expiry ms  dead_retention_s: dead retention s
-- worker: the claiming worker's name ('' when unknown), told on the attempt_started event (not kept
--   on the run too: one place, and the run hash stays smaller)
-- version: the claiming worker's version of the graph ('' checks none)
-- newest: the newest version a live worker serves, as that worker last saw ('' when unknown)
-- Returns store/contracts.py ClaimReply: {outcome, status, attempt number, counted attempts,
--   resumes, graph, inputs, state, idempotency_key, max_attempts, trace, checkpoint JSON or '',
--   tags JSON or '', memo field, value, ...} with outcome claimed|busy|finished|missing|dead|early|waiting,
--   or {'idem', key}, or {'version', v, 'pinned'|'newest'|'moving'|'move'}: the run is on version
--   v (pinned), or has not started and goes on the newest, v, or an upgrade moves it to v (moving;
--   'move' when v is this worker's); v is not this worker's, and nothing changed

-- The claim reads most of the run (the counters, the optional keys' fields, the timers, what the
-- reply carries: graph, inputs, state, trace, tags...), so its first read is the whole hash, one
-- HGETALL, where an HMGET of those thirty-odd names would scan a small hash once per name.
want_whole()

local function reply(outcome)
  flush()
  -- The key steps see: the caller's, else the run id (init_run leaves it out then).
  local idem_key = field('idempotency_key') ~= '' and field('idempotency_key') or RUN_ID
  local checkpoint = ''
  if field('ck_last') ~= '' then
    checkpoint = redis.call('HGET', K_CKPT, field('ck_last')) or ''
  end
  return {outcome, field('status'), attempt_number(), field('attempts'), field('resumes'),
    field('graph'), run_inputs(), field('state'), idem_key, field('max_attempts'),
    field('trace'), checkpoint, field('tags')}
end

-- A run checkpointed before each checkpoint was stored once kept its latest as the ckpt hash's
-- 'data' (and seq, saved_at, size, attempt, next_node): it becomes that hash's seq -> JSON, so
-- an attempt that resumes it after the upgrade starts where it was. (Its older checkpoints,
-- kept under keys of their own then, are not carried over.) Only a run with checkpoints and
-- no pointer to one asks.
local LEGACY = {'data', 'seq', 'saved_at', 'size', 'attempt', 'next_node'}
local function adopt_legacy_checkpoint()
  if field('ck_last') ~= '' or num('checkpoints') == 0 then
    return
  end
  local old = redis.call('HMGET', K_CKPT, unpack(LEGACY))
  if not old[1] or not old[2] then
    return
  end
  redis.call('HDEL', K_CKPT, unpack(LEGACY))
  redis.call('HSET', K_CKPT, old[2], old[1])
  put(ckpt_field(old[2]), ckpt_entry(old[3] or NOW, old[4] or #old[1], old[5] or 0, old[6] or ''))
  put('ck_first', old[2])
  put('ck_last', old[2])
end

-- The work recorded since the checkpoint comes with it, so an attempt reads everything it
-- resumes from in this one round trip (only when the journal wrote some: 'memo' = '1').
local function claimed()
  adopt_legacy_checkpoint()
  local out = reply('claimed')
  if field('memo') == '1' then
    for _, item in ipairs(redis.call('HGETALL', K_MEMO)) do
      table.insert(out, item)
    end
  end
  return out
end

-- A run suspended in wait_for_signal or sleep (wait.lua) keeps what its wait takes, 'wait_take'
-- = <#name>:<name><wake ms or ''>|<record field>. The claim does for that wait what wait.lua
-- would, in this one script: it moves the signal, when the mailbox holds it, out of the mailbox
-- and into the wait's record in the memo, or else, when the wait's wake time has passed, records
-- {"due":true}. So a signal is given once (a crash after the claim finds it in the memo, never in
-- the mailbox again), and the step that runs again reads its record from those the claim
-- returns, without a round trip of its own. Fenced like the rest of the claim.
local function take_awaited()
  local take = field('wait_take')
  if take == '' then
    return
  end
  drop('wait_take')
  local len, rest = string.match(take, '^(%d+):(.*)$')
  if not len then
    return
  end
  local name = string.sub(rest, 1, tonumber(len))
  local wake, rec = string.match(string.sub(rest, tonumber(len) + 1), '^(%d*)|(.*)$')
  if not rec then
    return
  end
  local value = name ~= '' and field('mbox') == '1' and redis.call('HGET', K_MAILBOX, name)
  if value then
    redis.call('HDEL', K_MAILBOX, name)
    redis.call('HSET', K_MEMO, rec, '{"signal":' .. value .. '}')
    put('memo', '1')
  elseif wake ~= '' and tonumber(wake) <= tonumber(NOW) then
    redis.call('HSET', K_MEMO, rec, '{"due":true}')
    put('memo', '1')
  end
end

if not exists() then
  return {'missing'}
end
local status = field('status')
if TERMINAL[status] then
  return reply('finished')
end
if status == 'retrying' and num('retry_at') > tonumber(NOW) then
  return reply('early')
end
-- A waiting run is claimed only once its timer is due (a signal makes it queued instead): any
-- other message about it is a stray duplicate, and it must keep holding no worker.
if status == 'waiting' and (num('wake_at') == 0 or num('wake_at') > tonumber(NOW)) then
  return reply('waiting')
end
if status == 'running' then
  -- The same token again is this claim retried after a lost reply: answer it, change nothing.
  if token ~= '' and field('token') == token then
    return claimed()
  end
  -- Another attempt owns the run. Even when its lease has lapsed, the reaper recovers it, not this
  -- claim: only the reaper knows whether the lease lapsed in a Redis outage (an interruption) or
  -- because the worker died (a counted attempt). It re-sends the run within a tick.
  return reply('busy')
end
-- G9: a run finishes on the graph version it started on; a run not started yet starts on the
-- newest version a live worker serves. The worker holds the first for a worker of its version
-- (hold_version.lua) and hands the second on to the newest version's queue.
local mine, pinned = version or '', field('version')
-- Marked by `upgrade --include-running` (upgrade.lua), its attempt over: no attempt starts on the
-- version it leaves; a worker of the version it moves to moves it (store/upgrades.py), then sends it.
local moving_to = field('upgrade_to')
if mine ~= '' and moving_to ~= '' then
  return {'version', moving_to, moving_to == mine and 'move' or 'moving'}
end
if mine ~= '' and pinned ~= '' and pinned ~= mine then
  return {'version', pinned, 'pinned'}
end
if mine ~= '' and pinned == '' and (newest or '') ~= '' and newest ~= mine then
  return {'version', newest, 'newest'}
end
-- Redis keeps no delivery count, so the run's own counter stops a message that kills its
-- worker every time: the reaper counts each such attempt as abandoned.
local exhausted, retry = out_of_attempts()
if retry then
  return retry
end
if exhausted then
  to_dead('max_attempts', dead_retention_s)
  return reply('dead')
end
incr('attempts', 1)
incr('resumes', 1)
put('token', token)
-- dispatches: the reaper's resend count for the due safety net (reschedule_due.lua) starts over;
-- unserved_since: a worker serves the graph now, so the wait for one (hold_unserved.lua) ends, as
-- does the wait for one of its version (held_since, hold_version.lua).
take_awaited()
drop('dispatches', 'unserved_since', 'held_since', 'waiting_for', 'wake_at')
if mine ~= '' and pinned == '' then
  put('version', mine)
end
set_status('running')
redis.call('ZADD', K_LEASES, lease_expiry_ms, RUN_ID)
redis.call('ZREM', K_DUE, RUN_ID)
emit('attempt_started', 'attempt', attempt_number(), 'worker', worker)
return claimed()
