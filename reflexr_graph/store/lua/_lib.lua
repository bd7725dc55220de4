-- _lib.lua: prelude that scripts.py prepends to every per-run script (not run on its own).
-- It names the KEYS positions that keys.script_keys() builds and the ARGV every per-run
-- script starts with, and holds the helpers they share so each transition is written once.
--
-- KEYS[1]  rg:{<run_id>}:run     run record hash
-- KEYS[2]  rg:{<run_id>}:ckpt    latest checkpoint hash
-- KEYS[3]  rg:{<run_id>}:events  event stream
-- KEYS[4]  rg:{<run_id>}:tb      last traceback
-- KEYS[5]  rg:idem:<graph>:<key> scoped idempotency key, built from ARGV[3]
-- KEYS[6]  rg:all                KEYS[7] rg:dead   KEYS[8] rg:leases   KEYS[9] rg:due
-- KEYS[10] rg:status:queued     KEYS[11] rg:status:running  KEYS[12] rg:status:retrying
-- KEYS[13] rg:status:succeeded  KEYS[14] rg:status:dead     KEYS[15] rg:status:cancelled
-- KEYS[16] rg:status:waiting
-- KEYS[17] rg:{<run_id>}:memo    work recorded since the latest checkpoint
-- KEYS[18] rg:{<run_id>}:mailbox signals sent that no wait has taken yet
-- KEYS[19] rg:{<run_id>}:history       index of the checkpoints kept before the latest
-- KEYS[20] rg:{<run_id>}:history:data  their JSON (see _history.lua)
--
-- ARGV[1]  run_id
-- ARGV[2]  now, epoch ms (from clock.now_ms(): scripts never call TIME, so tests fake time)
-- ARGV[3]  the scoped idempotency key KEYS[5] was built from (a guess the script verifies;
--          the run id when the caller does not know it)
-- ARGV[4..] script-specific, see each script's header

local K_RUN, K_CKPT, K_EVENTS, K_TB, K_IDEM = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local K_ALL, K_DEAD, K_LEASES, K_DUE = KEYS[6], KEYS[7], KEYS[8], KEYS[9]
local K_MEMO, K_MAILBOX = KEYS[17], KEYS[18]
local K_HIST, K_HIST_DATA = KEYS[19], KEYS[20]
local STATUS_SETS = {
  queued = KEYS[10], running = KEYS[11], retrying = KEYS[12],
  succeeded = KEYS[13], dead = KEYS[14], cancelled = KEYS[15],
  waiting = KEYS[16],
}
-- Every key of the run: retention expires them all, purge deletes them all.
local PER_RUN = {K_RUN, K_CKPT, K_EVENTS, K_TB, K_MEMO, K_MAILBOX, K_HIST, K_HIST_DATA}
local RUN_ID, NOW, IDEM_GUESS = ARGV[1], ARGV[2], ARGV[3]
local TERMINAL = {succeeded = true, dead = true, cancelled = true}
local ACTIVE = {queued = true, running = true, retrying = true}
local REPLAYABLE = {dead = true, cancelled = true}
local CANCELLABLE = {queued = true, running = true, retrying = true, waiting = true}
-- A cap keeps a run that checkpoints thousands of times from growing its stream forever.
local EVENTS_MAXLEN = 1000

-- HGET answers false for a missing field; '' keeps comparisons and concatenation simple.
local function field(name)
  return redis.call('HGET', K_RUN, name) or ''
end

local function num(name)
  return tonumber(field(name)) or 0
end

local function exists()
  return redis.call('EXISTS', K_RUN) == 1
end

-- The run's scoped idempotency key ('idem': graph and key) when KEYS[5] was built from a wrong
-- guess, else nil. Scripts ask before their first write on any path that touches KEYS[5], and
-- return {'idem', key} so the caller retries with the right key: keys must be declared, and
-- are built only in Python. A run enqueued without a key has none to mismatch.
local function idem_mismatch()
  local actual = field('idem')
  if actual ~= '' and actual ~= IDEM_GUESS then
    return actual
  end
  return nil
end

-- An operator's operation (cancel, replay, purge) goes ahead only on an existing run in one of
-- the ``allowed`` statuses. Returns the reply that refuses it, or nil and the run's status.
local function refusal(allowed)
  if not exists() then
    return {'missing'}
  end
  local status = field('status')
  if not allowed[status] then
    return {'refused', status}
  end
  local actual = idem_mismatch()
  if actual then
    return {'idem', actual}
  end
  return nil, status
end

-- Whether the run has used all its attempts. A script that dead-letters it touches KEYS[5], so
-- it must know the run's real idempotency key first: the second value, when not nil, is the
-- {'idem', key} reply to return so the caller retries with the right key.
local function out_of_attempts()
  if num('attempts') < num('max_attempts') then
    return false, nil
  end
  local actual = idem_mismatch()
  if actual then
    return true, {'idem', actual}
  end
  return true, nil
end

-- Drop the run from every global index (its keys are deleted or expire separately).
local function unindex()
  for _, key in ipairs({K_ALL, K_DEAD, K_LEASES, K_DUE}) do
    redis.call('ZREM', key, RUN_ID)
  end
  for _, key in pairs(STATUS_SETS) do
    redis.call('ZREM', key, RUN_ID)
  end
end

local function owns_idem()
  return redis.call('GET', K_IDEM) == RUN_ID
end

-- Event type -> short code, as store/event_codec.py (SCHEMAS) lists them. An event is stored as
-- one field, 'e' = code, time and values joined by \31, without the field names: Redis keeps a
-- stream entry's names once when they repeat the first entry's, so every later entry costs only
-- its values. event_codec.py gives the names back at read; a test checks every emit below
-- against it. A type without a code is written the long way, which readers decode too.
local EVENT_CODES = {
  run_enqueued = 'q', attempt_started = 's', run_progressed = 'p', boundaries_skipped = 'k',
  work_reused = 'u', attempt_failed = 'f', run_dead_lettered = 'd', run_retrying = 'r',
  run_succeeded = 'o', run_cancelled = 'c', run_replayed = 'y', waiting_for_worker = 'h',
  signal_received = 'g', run_waiting = 'w', run_forked = 'x', limit_waited = 'l',
  cancel_requested = 'z',
}

-- emit(kind, name1, value1, name2, value2, ...): the names document the call and are checked
-- against event_codec.py; only the values are stored.
local function emit(kind, ...)
  local code = EVENT_CODES[kind]
  if not code then
    redis.call('XADD', K_EVENTS, 'MAXLEN', '~', EVENTS_MAXLEN, '*', 'type', kind, 'at', NOW, ...)
    return
  end
  local parts, pairs_ = {code, NOW}, {...}
  for i = 2, #pairs_, 2 do
    parts[#parts + 1] = tostring(pairs_[i])
  end
  redis.call('XADD', K_EVENTS, 'MAXLEN', '~', EVENTS_MAXLEN, '*', 'e', table.concat(parts, '\31'))
end

-- Redis gives a new stream's first node 4 KB up front (it grows in place up to
-- stream-node-max-bytes), so each run's few events would cost 4 KB. A stream written back by
-- RESTORE holds exactly what it has, and later entries grow it as they come. redis.pcall: where
-- an ACL refuses DUMP or RESTORE the stream stays as it is, only larger.
local function shrink_events()
  local dumped = redis.pcall('DUMP', K_EVENTS)
  if type(dumped) == 'string' then
    redis.pcall('RESTORE', K_EVENTS, 0, dumped, 'REPLACE')
  end
end

-- Move the run between status sets; the score is the update time so listings sort newest first.
local function set_status(new)
  local old = STATUS_SETS[field('status')]
  if old then
    redis.call('ZREM', old, RUN_ID)
  end
  redis.call('ZADD', STATUS_SETS[new], NOW, RUN_ID)
  redis.call('HSET', K_RUN, 'status', new, 'updated_at', NOW)
end

local function touch()
  redis.call('HSET', K_RUN, 'updated_at', NOW)
  local set = STATUS_SETS[field('status')]
  if set then
    redis.call('ZADD', set, 'XX', NOW, RUN_ID)
  end
end

-- Only the token of the attempt that claimed last may write, and only while it runs.
local function owned_by(token)
  if token == '' then
    return false
  end
  local owner = redis.call('HMGET', K_RUN, 'token', 'status')
  return owner[1] == token and owner[2] == 'running'
end

local function expire_all(seconds)
  for _, key in ipairs(PER_RUN) do
    redis.call('EXPIRE', key, seconds)
  end
  if owns_idem() then
    redis.call('EXPIRE', K_IDEM, seconds)
  end
end

local function persist_all()
  for _, key in ipairs(PER_RUN) do
    redis.call('PERSIST', key)
  end
  if owns_idem() then
    redis.call('PERSIST', K_IDEM)
  end
end

-- idem_key is what steps see (the caller's key, else the run id); scope is the scoped key the
-- run owns in KEYS[5] ('' without one); digest identifies the request's inputs and state, so a
-- key reused with other inputs is refused rather than silently answered with this run.
-- Fields that would be empty or zero are not written: field() and num() read a missing one as
-- '' and 0, and so do the readers (records.run_info). A run hash with a large value is a hash
-- table, where each field costs some 60 bytes; the dozen left out here were half of it.
local function init_run(graph, inputs, state, idem_key, scope, digest, max_attempts)
  redis.call('HSET', K_RUN, 'run_id', RUN_ID, 'graph', graph, 'max_attempts', max_attempts,
    'inputs', inputs, 'created_at', NOW, 'updated_at', NOW)
  for name, value in pairs({state = state, digest = digest}) do
    if value ~= '' then
      redis.call('HSET', K_RUN, name, value)
    end
  end
  -- The key steps see is the run id unless the caller gave one (claim.lua reads it back so).
  if idem_key ~= RUN_ID then
    redis.call('HSET', K_RUN, 'idempotency_key', idem_key)
  end
  if scope ~= '' then
    redis.call('HSET', K_RUN, 'idem', scope)
  end
  redis.call('ZADD', K_ALL, NOW, RUN_ID)
  emit('run_enqueued', 'graph', graph)
  shrink_events()
end

-- An attempt cut short by the fleet rather than by the run (a deploy's soft shutdown, Redis
-- unreachable) is not a failure of the run: it moves from 'attempts', which max_attempts bounds,
-- to 'interruptions', which have a bound of their own so a run cut short forever still ends.
-- Returns true when that bound is now passed.
local function interrupt(max_interruptions)
  if num('attempts') > 0 then
    redis.call('HINCRBY', K_RUN, 'attempts', -1)
  end
  local n = redis.call('HINCRBY', K_RUN, 'interruptions', 1)
  return n > tonumber(max_interruptions)
end

-- The number of the attempt now running: every claim since the last replay, counted or not
-- (attempts that ended in a wait count as 'suspensions').
local function attempt_number()
  local n = redis.call('HMGET', K_RUN, 'attempts', 'interruptions', 'suspensions')
  return (tonumber(n[1]) or 0) + (tonumber(n[2]) or 0) + (tonumber(n[3]) or 0)
end

-- The attempt holding a lapsed lease died or hung ('abandoned': it counts as a failed attempt),
-- or lost its lease while Redis was unreachable ('store_unavailable': an interruption).
local function abandon(reason)
  redis.call('ZREM', K_LEASES, RUN_ID)
  redis.call('HSET', K_RUN, 'reason', reason)
  emit('attempt_failed', 'attempt', attempt_number(), 'reason', reason)
end

-- Keeps the last error: an operator needs it to decide whether to replay.
local function to_dead(reason, retention_s)
  redis.call('HSET', K_RUN, 'reason', reason)
  set_status('dead')
  redis.call('ZREM', K_LEASES, RUN_ID)
  redis.call('ZREM', K_DUE, RUN_ID)
  redis.call('ZADD', K_DEAD, NOW, RUN_ID)
  emit('run_dead_lettered', 'reason', reason, 'error_type', field('error_type'))
  expire_all(retention_s)
end

-- The due entry makes the reaper send a message at due_at; a long Celery countdown would be
-- redelivered again and again past the broker's visibility timeout.
-- retry_at is when the next attempt may start: a claim before it (a stray duplicate message)
-- is refused, so the backoff holds whatever messages are about.
local function to_retrying(due_at, reason)
  set_status('retrying')
  redis.call('HSET', K_RUN, 'retry_at', due_at)
  redis.call('ZREM', K_LEASES, RUN_ID)
  redis.call('ZADD', K_DUE, due_at, RUN_ID)
  emit('run_retrying', 'attempt', attempt_number(), 'reason', reason, 'due_at', due_at)
end

-- A cancel ends the run for good: no lease, no due message, the token gone so that any attempt
-- still running is fenced out; the run's keys expire after the retention.
local function to_cancelled(from_status, retention_s)
  redis.call('HSET', K_RUN, 'reason', 'cancelled')
  redis.call('HDEL', K_RUN, 'token', 'cancel')
  redis.call('ZREM', K_LEASES, RUN_ID)
  redis.call('ZREM', K_DUE, RUN_ID)
  set_status('cancelled')
  emit('run_cancelled', 'from_status', from_status)
  expire_all(retention_s)
end

-- A cancel asked of a running run (cancel.lua without --now) waits for its attempt to reach a
-- boundary; the field holds the run retention to expire with. An attempt that ends some other
-- way meanwhile (it fails, is released, suspends, or its lease lapses) ends the run cancelled.
local function cancel_requested()
  return field('cancel') ~= ''
end

local function end_requested_cancel()
  to_cancelled('running', field('cancel'))
end

-- What an attempt tells with its writes (core/tally.py): boundaries it could not checkpoint,
-- counted on the run and told in its history so nobody believes they have durability they
-- lack; and branch steps and durable calls answered from their records instead of running.
local function note(skipped, kinds, steps, calls)
  local n = tonumber(skipped) or 0
  if n > 0 then
    redis.call('HINCRBY', K_RUN, 'skipped', n)
    emit('boundaries_skipped', 'count', n, 'kinds', kinds)
  end
  local s, c = tonumber(steps) or 0, tonumber(calls) or 0
  if s + c > 0 then
    redis.call('HINCRBY', K_RUN, 'reused_steps', s)
    redis.call('HINCRBY', K_RUN, 'reused_calls', c)
    emit('work_reused', 'steps', s, 'calls', c)
  end
end

local function snapshot(outcome)
  local reply = redis.call('HGETALL', K_RUN)
  table.insert(reply, 1, outcome)
  return reply
end

-- ---- script body follows ----
