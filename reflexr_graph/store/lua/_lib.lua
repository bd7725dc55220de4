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
-- KEYS[10] rg:status:queued     KEYS[11] rg:status:running  KEYS[12] rg:retries (the rollup
--   of retries in the last hour, in the place of the retrying status set, which is never written)
-- KEYS[13] rg:status:succeeded  KEYS[14] rg:status:dead     KEYS[15] rg:status:cancelled
-- KEYS[16] rg:status:waiting
-- KEYS[17] rg:{<run_id>}:memo    work recorded since the latest checkpoint
-- KEYS[18] rg:{<run_id>}:mailbox signals sent that no wait has taken yet
-- then a script's own keys (KEYS[19] on, see its header), then KEYS[#KEYS - 4]:
--          rg:{<run_id>}:asks    the run's waits for external events (store/asks.py; 'asks' = '1')
-- then KEYS[#KEYS - 3], KEYS[#KEYS - 2]:
--          rg:{<run_id>}:lanes   when each branch step ran (record.lua writes it)
--          rg:{s<n>}:children:ended  children of the shard that ended, their parents not told yet
-- KEYS[#KEYS - 1]:
--          rg:{<run_id>}:in      the run's inputs when longer than INLINE_MAX (see init_run)
-- and last, KEYS[#KEYS]:
--          rg:{<run_id>}:stream  what the run's steps emitted (emit.lua writes it)
--
-- ARGV[1]  run_id
-- ARGV[2]  now, epoch ms (from clock.now_ms(): scripts never call TIME, so tests fake time)
-- ARGV[3]  the scoped idempotency key KEYS[5] was built from (a guess the script verifies;
--          the run id when the caller does not know it)
-- ARGV[4..] script-specific, see each script's header and its contract in store/contracts.py
--
-- The run hash is read once and written once. The first read of a field loads BASE_FIELDS and
-- any the script asked for with want() in one HMGET; put() and drop() change the loaded copy,
-- and flush() writes every change in one HSET (and one HDEL for fields that go). scripts.py
-- wraps each body in a function and calls flush() after it, so no path forgets to write.
-- Fields that say which optional keys exist ('ck_last', 'memo', 'mbox', 'tb', 'idem') let a
-- script touch (expire, delete, read) only keys that are there.

local K_RUN, K_CKPT, K_EVENTS, K_TB, K_IDEM = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local K_ALL, K_DEAD, K_LEASES, K_DUE = KEYS[6], KEYS[7], KEYS[8], KEYS[9]
local K_MEMO, K_MAILBOX = KEYS[17], KEYS[18]
-- Where retrying's status set would be: retrying runs have none (UNLISTED), so set_status never
-- writes this position, and to_retrying keeps the last hour's retries there (keys.RETRIES).
local K_RETRIES = KEYS[12]
local RETRIES_KEPT_MS = 3600000
local K_STREAM = KEYS[#KEYS]
local K_CHILDREN_ENDED = KEYS[#KEYS - 2]
local K_INPUTS = KEYS[#KEYS - 1]
local K_LANES = KEYS[#KEYS - 3]
local K_ASKS = KEYS[#KEYS - 4]
-- Redis keeps a hash as a compact listpack while every value is at most hash-max-listpack-value
-- (64 bytes by default); one longer value makes it a hash table, where each field costs some 60
-- bytes more. Inputs longer than this go to a key of their own (K_INPUTS, 'in' = '1').
local INLINE_MAX = 64
local STATUS_SETS = {
  queued = KEYS[10], running = KEYS[11], retrying = KEYS[12],
  succeeded = KEYS[13], dead = KEYS[14], cancelled = KEYS[15],
  waiting = KEYS[16],
}
-- Every key of the run: purge deletes them all.
local PER_RUN = {K_RUN, K_CKPT, K_EVENTS, K_TB, K_MEMO, K_MAILBOX, K_INPUTS, K_STREAM, K_LANES, K_ASKS}
local RUN_ID, NOW, IDEM_GUESS = ARGV[1], ARGV[2], ARGV[3]
local TERMINAL = {succeeded = true, dead = true, cancelled = true}
local ACTIVE = {queued = true, running = true, retrying = true}
local REPLAYABLE = {dead = true, cancelled = true}
local CANCELLABLE = {queued = true, running = true, retrying = true, waiting = true}
-- Statuses without a status set of their own (see set_status).
local UNLISTED = {queued = true, running = true, retrying = true}
-- A cap keeps a run that checkpoints thousands of times from growing its stream forever.
local EVENTS_MAXLEN = 1000

-- The fields every script reads. Each script names the others its paths read with want(), in
-- the groups below or one by one: a field read without being asked for costs an HGET of its own,
-- and every field asked for costs the HMGET (and the script's run time) a little.
-- 'upgrade_to' is there so set_status knows, in the one HMGET, whether an ending run carries a mark.
local RUN, LOADED, WANTED = {}, false, {'status', 'token', 'idem', 'cancel', 'parent', 'upgrade_to'}
-- Set by fresh(): the script knows the run does not exist, so every field reads '' unread.
local FRESH = false
local PUT, PUT_ORDER, DROPPED = {}, {}, {}
local COUNTERS = {'attempts', 'interruptions', 'suspensions', 'max_attempts'}
-- What present_keys() reads, so retention, replay and purge touch only the keys that exist.
local OPTIONAL_KEYS = {'ck_last', 'memo', 'mbox', 'tb', 'in', 'stream', 'lanes', 'asks'}
local LAST_ERROR = {'reason', 'error_type', 'error', 'failed'}
local NOTES = {'skipped', 'reused_steps', 'reused_calls'}
local TIMERS = {'retry_at', 'wake_at', 'waiting_for', 'dispatches', 'unserved_since'}

-- Ask for fields (names, or groups of them) with the first read: call before any field().
-- These loops run on every call of a script, so they count with numbers, not ipairs (a function
-- call per item) or #WANTED (a search per item).
local function want(...)
  local items, n = {...}, #WANTED
  for i = 1, #items do
    local item = items[i]
    if type(item) == 'table' then
      for j = 1, #item do
        WANTED[n + j] = item[j]
      end
      n = n + #item
    else
      n = n + 1
      WANTED[n] = item
    end
  end
end

-- Set by want_whole(): the first read is an HGETALL, and a field the hash lacks reads ''.
local WHOLE = false

-- A small run hash is a listpack, where HMGET finds each name by a scan of the whole hash (a
-- name the hash lacks, as most are, costs the full scan): a script that reads most of its
-- fields (the claim) reads it whole, in one pass, instead of naming them with want(). A run
-- hash large enough to be a hash table (over 128 entries, or a value over 64 bytes) costs that
-- pass more than an HMGET of a few names would.
local function want_whole()
  WHOLE = true
end

local function load()
  if WHOLE then
    local all = redis.call('HGETALL', K_RUN)
    for i = 1, #all, 2 do
      RUN[all[i]] = all[i + 1]
    end
  else
    local names = WANTED
    local values = redis.call('HMGET', K_RUN, unpack(names))
    for i = 1, #names do
      RUN[names[i]] = values[i] or ''
    end
  end
  LOADED = true
end

-- A missing field reads as '': comparisons and concatenation stay simple.
local function field(name)
  if not LOADED then
    load()
  end
  local value = RUN[name]
  if value == nil then
    -- Not asked for up front: one more read (a script's header lists what it wants).
    value = (FRESH or WHOLE) and '' or redis.call('HGET', K_RUN, name) or ''
    RUN[name] = value
  end
  return value
end

-- The run does not exist (create_run knows it from its stream's copy): its hash is not read.
local function fresh()
  LOADED, FRESH = true, true
end

local function num(name)
  return tonumber(field(name)) or 0
end

local function exists()
  return field('status') ~= ''
end

-- A run held for a worker of graph version v waits for 'version:<v>', or for 'version:<v> (why)'
-- when an auto-upgrade could not move it (upgrade.lua): the same wait, with its reason.
local function waits_for_version(v)
  local waits, exact = field('waiting_for'), 'version:' .. v
  return waits == exact or string.sub(waits, 1, #exact + 2) == exact .. ' ('
end

local function put(name, value)
  if not LOADED then
    load()
  end
  value = tostring(value)
  RUN[name] = value
  if PUT[name] == nil then
    PUT_ORDER[#PUT_ORDER + 1] = name
  end
  PUT[name] = value
  DROPPED[name] = nil
end

-- Remove a field (only written when it is there).
local function drop(...)
  if not LOADED then
    load()
  end
  for _, name in ipairs({...}) do
    -- A field not loaded may be there, unless the hash was read whole.
    local value = RUN[name]
    if value ~= '' and (value ~= nil or not WHOLE) then
      DROPPED[name] = true
    end
    PUT[name] = nil
    RUN[name] = ''
  end
end

local function incr(name, by)
  put(name, num(name) + by)
end

-- Write every change of the run hash: at most one HSET and one HDEL.
local function flush()
  local args, n = {}, 0
  for i = 1, #PUT_ORDER do
    local name = PUT_ORDER[i]
    if PUT[name] ~= nil then
      args[n + 1], args[n + 2] = name, PUT[name]
      n = n + 2
    end
  end
  if n > 0 then
    redis.call('HSET', K_RUN, unpack(args))
  end
  local gone = {}
  for name in pairs(DROPPED) do
    gone[#gone + 1] = name
  end
  if #gone > 0 then
    redis.call('HDEL', K_RUN, unpack(gone))
  end
  PUT, PUT_ORDER, DROPPED = {}, {}, {}
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


-- Only the token of the attempt that claimed last may write, and only while it runs.
local function owned_by(token)
  return token ~= '' and field('token') == token and field('status') == 'running'
end

-- The guard before the writes that end an attempt or a run (succeed, fail, release, dead_letter).
-- ``token`` is the attempt's, or nil for an unfenced write (a dead letter of a bad message).
-- Returns 'done' when there is nothing to write: the write already landed under this token
-- (retried after a lost reply: ``done_status`` is the status it leaves the run in), or, unfenced,
-- the run is finished; 'fenced' when the token does not own the run; {'idem', key} when KEYS[5]
-- was built from a wrong guess (each of these scripts may expire it); nil to go ahead.
local function write_guard(token, done_status)
  if token == nil then
    if TERMINAL[field('status')] then
      return 'done'
    end
  else
    if done_status and token ~= '' and field('status') == done_status and field('token') == token then
      return 'done'
    end
    if not owned_by(token) then
      return 'fenced'
    end
  end
  local actual = idem_mismatch()
  if actual then
    return {'idem', actual}
  end
  return nil
end

-- Drop the run from the global indexes it can be in (its keys are deleted or expire
-- separately): ``status`` names the one status set it is in, and a finished run holds no lease
-- or due entry. Without a status (a listing found the record gone, whatever it was), every index.
local function unindex(status)
  redis.call('ZREM', K_ALL, RUN_ID)
  if not STATUS_SETS[status] then
    for _, key in ipairs({K_DEAD, K_LEASES, K_DUE}) do
      redis.call('ZREM', key, RUN_ID)
    end
    for _, key in pairs(STATUS_SETS) do
      redis.call('ZREM', key, RUN_ID)
    end
    return
  end
  if status == 'dead' then
    redis.call('ZREM', K_DEAD, RUN_ID)
  end
  if not UNLISTED[status] then
    redis.call('ZREM', STATUS_SETS[status], RUN_ID)
  end
end

-- The run's own scoped idempotency key: create_run SET it, and a run can lose it only to a
-- dead letter's SET NX (then 'idem_owner' says so).
local function owns_idem()
  if field('idem') == '' then
    return false
  end
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
  cancel_requested = 'z', waiting_for_version = 'v', run_woken = 'b',
  run_upgraded = 'n', call_retried = 't', upgrade_held = 'a',
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
    -- A value holding the separator would shift the fields after it: it is written as U+241F.
    parts[#parts + 1] = (string.gsub(tostring(pairs_[i]), '\31', '\226\144\159'))
  end
  redis.call('XADD', K_EVENTS, 'MAXLEN', '~', EVENTS_MAXLEN, '*', 'e', table.concat(parts, '\31'))
end

-- Redis gives a new stream's first node 4 KB up front (it grows in place up to
-- stream-node-max-bytes), so each run's few events would cost 4 KB. A copy holds exactly what
-- its source has, and later entries grow it as they come: so a new run's stream is a COPY of
-- a template that holds one marker entry (id 0-1, 'e' = '', which readers skip), and its first
-- event is added to that. One call less than an XADD with a DUMP and RESTORE, and no
-- serialising. The template (K_TEMPLATE, from create_run's KEYS) is made on first use.
local function new_events(template)
  if redis.call('COPY', template, K_EVENTS) == 0 then
    redis.call('XADD', template, '0-1', 'e', '')
    redis.call('COPY', template, K_EVENTS)
  end
end

-- Move the run between status sets; the score is the update time so listings sort newest first.
-- Queued, retrying and running runs have no set of their own (their KEYS stay, unused, so that
-- positions hold): every queued or retrying run is in the due set and every running one in the
-- leases, and listings read those (store/keys.py: status_index). A run's start, every save, a
-- retry and its end then touch no status set on the way.
local function set_status(new)
  local old = field('status')
  if STATUS_SETS[old] and not UNLISTED[old] and old ~= new then
    redis.call('ZREM', STATUS_SETS[old], RUN_ID)
  end
  if not UNLISTED[new] then
    redis.call('ZADD', STATUS_SETS[new], NOW, RUN_ID)
  end
  -- A child run that ends, on whichever path, is noted for the reaper to tell its parent (which
  -- may be in another shard: store/children.py), and the reaper is woken for it now: it listens
  -- on a channel of the set's own name (channels are not keys: store/recovery.py reaper_nudges).
  if TERMINAL[new] and not TERMINAL[old] and field('parent') ~= '' then
    redis.call('ZADD', K_CHILDREN_ENDED, NOW, RUN_ID)
    redis.call('PUBLISH', K_CHILDREN_ENDED, '')
  end
  -- A run `upgrade --include-running` marked (upgrade.lua) that ends where it is moves nowhere:
  -- its mark goes in the HDEL flush() makes, so only a marked run pays one.
  if TERMINAL[new] and field('upgrade_to') ~= '' then
    drop('upgrade_to', 'upgrade_mark')
  end
  put('status', new)
  put('updated_at', NOW)
end

-- The run's optional keys that exist now, as its fields tell: an EXPIRE, PERSIST or DEL of a
-- missing key would be a call for nothing.
local function present_keys()
  local found = {K_RUN, K_EVENTS}
  if field('ck_last') ~= '' then found[#found + 1] = K_CKPT end
  if field('memo') == '1' then found[#found + 1] = K_MEMO end
  if field('mbox') == '1' then found[#found + 1] = K_MAILBOX end
  if field('tb') == '1' then found[#found + 1] = K_TB end
  if field('stream') == '1' then found[#found + 1] = K_STREAM end
  if field('in') == '1' then found[#found + 1] = K_INPUTS end
  if field('lanes') == '1' then found[#found + 1] = K_LANES end
  if field('asks') == '1' then found[#found + 1] = K_ASKS end
  return found
end

local function expire_all(seconds)
  -- The run hash may not exist yet (a run created finished, or dead-lettered): write it first.
  flush()
  for _, key in ipairs(present_keys()) do
    redis.call('EXPIRE', key, seconds)
  end
  if owns_idem() then
    redis.call('EXPIRE', K_IDEM, seconds)
  end
end

local function persist_all()
  for _, key in ipairs(present_keys()) do
    redis.call('PERSIST', key)
  end
  if owns_idem() then
    redis.call('PERSIST', K_IDEM)
  end
end

-- The journal (record.lua, wait.lua) wrote the memo since the latest checkpoint: 'memo' = '1'
-- ('0' or missing: there is none; likewise 'mbox' for the mailbox, 'tb' for the traceback).
-- A checkpoint holds everything the memo held, so its save drops the memo, only when there is one.
local function drop_memo()
  if field('memo') == '1' then
    redis.call('DEL', K_MEMO)
    put('memo', '0')
  end
end

-- idem_key is what steps see (the caller's key, else the run id); scope is the scoped key the
-- run owns in KEYS[5] ('' without one); digest identifies the request's inputs and state, so a
-- key reused with other inputs is refused rather than silently answered with this run.
-- Fields that would be empty or zero are not written: field() and num() read a missing one as
-- '' and 0, and so do the readers (records.run_info). A run hash with a large value is a hash
-- table, where each field costs some 60 bytes; the dozen left out here were half of it.
-- The caller has checked that the run does not exist, so every field loaded reads as ''.
local function init_run(graph, inputs, state, idem_key, scope, digest, max_attempts, template)
  if #inputs > INLINE_MAX then
    redis.call('SET', K_INPUTS, inputs)
    put('in', '1')
    inputs = ''
  end
  -- No run_id field: the key names the run, and readers take it from there (records.run_info).
  for name, value in pairs({graph = graph, max_attempts = max_attempts,
      inputs = inputs, created_at = NOW, updated_at = NOW, state = state, digest = digest}) do
    if value ~= '' then
      put(name, value)
    end
  end
  -- The key steps see is the run id unless the caller gave one (claim.lua reads it back so).
  if idem_key ~= RUN_ID then
    put('idempotency_key', idem_key)
  end
  if scope ~= '' then
    put('idem', scope)
  end
  redis.call('ZADD', K_ALL, NOW, RUN_ID)
  if template then
    new_events(template)
  end
  emit('run_enqueued', 'graph', graph)
end

-- The run's inputs JSON, from its hash or, when long, from K_INPUTS (init_run): one GET only then.
local function run_inputs()
  if field('in') == '1' then
    return redis.call('GET', K_INPUTS) or ''
  end
  return field('inputs')
end

-- An attempt cut short by the fleet rather than by the run (a deploy's soft shutdown, Redis
-- unreachable) is not a failure of the run: it moves from 'attempts', which max_attempts bounds,
-- to 'interruptions', which have a bound of their own so a run cut short forever still ends.
-- Returns true when that bound is now passed.
local function interrupt(max_interruptions)
  if num('attempts') > 0 then
    incr('attempts', -1)
  end
  incr('interruptions', 1)
  return num('interruptions') > tonumber(max_interruptions)
end

-- The number of the attempt now running: every claim since the last replay, counted or not
-- (attempts that ended in a wait count as 'suspensions').
local function attempt_number()
  return num('attempts') + num('interruptions') + num('suspensions')
end

-- The run's last failure, 'failed' = <attempt>|<ms>|<reason>|<1 when error_type and error are
-- this failure's, 0 when it had none (an abandoned attempt)>: records.run_info shows it as
-- last_failure once a later attempt runs, while error and reason describe the run as it is now.
local function note_failure(reason, with_error)
  put('failed', attempt_number() .. '|' .. NOW .. '|' .. reason .. '|' .. (with_error and '1' or '0'))
end

-- The attempt holding a lapsed lease died or hung ('abandoned': it counts as a failed attempt),
-- or lost its lease while Redis was unreachable ('store_unavailable': an interruption).
local function abandon(reason, last_beat)
  redis.call('ZREM', K_LEASES, RUN_ID)
  put('reason', reason)
  note_failure(reason, false)
  if last_beat then
    -- When the attempt's heartbeat last renewed its lease: where its worker was last known alive.
    emit('attempt_failed', 'attempt', attempt_number(), 'reason', reason, 'error_type', '', 'counted', '',
      'last_beat_at', last_beat)
  else
    emit('attempt_failed', 'attempt', attempt_number(), 'reason', reason)
  end
end

-- Keeps the last error: an operator needs it to decide whether to replay. Only a running run
-- holds a lease, only a queued, retrying or waiting one a due entry, and a run being created
-- (a dead letter's) neither: the status it leaves says which index to leave.
local function to_dead(reason, retention_s)
  local from = field('status')
  put('reason', reason)
  set_status('dead')
  if from == 'running' then
    redis.call('ZREM', K_LEASES, RUN_ID)
  elseif from ~= '' then
    redis.call('ZREM', K_DUE, RUN_ID)
  end
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
  put('retry_at', due_at)
  redis.call('ZREM', K_LEASES, RUN_ID)
  redis.call('ZADD', K_DUE, due_at, RUN_ID)
  -- The overview's retries per minute: counted where a retry happens, trimmed to the hour it shows.
  redis.call('ZADD', K_RETRIES, NOW, RUN_ID .. '|' .. attempt_number())
  redis.call('ZREMRANGEBYSCORE', K_RETRIES, '-inf', tonumber(NOW) - RETRIES_KEPT_MS)
  emit('run_retrying', 'attempt', attempt_number(), 'reason', reason, 'due_at', due_at)
end

-- A cancel ends the run for good: no lease, no due message, the token gone so that any attempt
-- still running is fenced out; the run's keys expire after the retention.
-- by: who cancelled (a token's name, cli@user@host), '' for the run itself.
local function to_cancelled(from_status, retention_s, by)
  put('reason', 'cancelled')
  drop('token', 'cancel')
  if from_status == 'running' then
    redis.call('ZREM', K_LEASES, RUN_ID)
  else
    redis.call('ZREM', K_DUE, RUN_ID)
  end
  set_status('cancelled')
  if by and by ~= '' then
    emit('run_cancelled', 'from_status', from_status, 'by', by)
  else
    emit('run_cancelled', 'from_status', from_status)
  end
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

-- A wait about to suspend its run (wait.lua, wait_children.lua). A cancel asked for ends the run
-- there instead: the script's reply (the run's keys expire with the cancel, KEYS[5] too: it must
-- be the run's own key). Else nil, once the attempt, which did not fail, gave back its place in
-- max_attempts and was counted as a suspension.
local function suspend_unless_cancelled()
  if cancel_requested() then
    local actual = idem_mismatch()
    if actual then
      return {'idem', actual}
    end
    end_requested_cancel()
    return {'cancelled'}
  end
  if num('attempts') > 0 then
    incr('attempts', -1)
  end
  incr('suspensions', 1)
  return nil
end

-- When a hold's grace period began (hold_unserved.lua, hold_version.lua), kept in the run's field
-- since_field; now, the first time, and then the second value is true: the caller tells it began.
local function grace_since(since_field)
  local since = tonumber(field(since_field))
  if since then
    return since, false
  end
  put(since_field, NOW)
  return tonumber(NOW), true
end

-- What an attempt tells with its writes (core/tally.py): boundaries it could not checkpoint,
-- counted on the run and told in its history so nobody believes they have durability they
-- lack; and branch steps and durable calls answered from their records instead of running.
local function note(skipped, kinds, steps, calls)
  local n = tonumber(skipped) or 0
  if n > 0 then
    incr('skipped', n)
    emit('boundaries_skipped', 'count', n, 'kinds', kinds)
  end
  local s, c = tonumber(steps) or 0, tonumber(calls) or 0
  if s + c > 0 then
    incr('reused_steps', s)
    incr('reused_calls', c)
    emit('work_reused', 'steps', s, 'calls', c)
  end
end

local function snapshot(outcome)
  flush()
  local reply = redis.call('HGETALL', K_RUN)
  table.insert(reply, 1, outcome)
  return reply
end

-- ---- script body follows ----
