-- create_run.lua: create a queued run, or return the run an idempotency key already names.
-- A fork (ARGV[13..19]) is created with the checkpoint it resumes from.
-- Prelude: _lib.lua (KEYS[1..18], ARGV[1..3] as described there), and _history.lua.
-- KEYS[1] run  KEYS[2] ckpt  KEYS[3] events  KEYS[5] idem  KEYS[6] rg:all  KEYS[9] rg:due
-- KEYS[10] rg:status:queued  KEYS[13] rg:status:succeeded
-- KEYS[19], after the prelude's: the run hash of ARGV[10]'s run (the idem key's owner the caller
--   expects), else KEYS[1]
-- KEYS[20] rg:events:template, the stream a new run's events start as a copy of (_lib.lua)
-- KEYS[21] the broker list ARGV[22]'s message goes to (keys.broker_queue), only with a message
-- KEYS[21..] or, with a message, KEYS[22..], up to the parent's keys and the prelude's last three
--   (children ended, the long inputs, the stream): the shard's set of tag index names
--   (rg:tags), then the run's tag indexes (rg:#tag:<sha1 of key=value>), one per tag of ARGV[20]
-- KEYS[#KEYS - 1] the run's inputs when longer than INLINE_MAX (_lib.lua: init_run)
-- ARGV: store/contracts.py CreateArgs, in its field order:
-- ARGV[1] run_id  ARGV[2] now ms  ARGV[3] the scoped idempotency key (graph and key), else the run_id
-- ARGV[4] graph  ARGV[5] inputs JSON  ARGV[6] state JSON or ''  ARGV[7] the caller's
--   idempotency key, '' for none  ARGV[8] max_attempts  ARGV[9] due ms (now + dispatch grace)
-- ARGV[10] run id the caller expects the idem key to name, '' for none
-- ARGV[11] the enqueuer's trace context (W3C headers as JSON), '' for none: every attempt's
--   span joins that trace, so retries and resumes of one run read as one trace
-- ARGV[12] digest of the request's inputs and state (a fork's: of its source, seq and state)
-- ARGV[13] a fork's checkpoint JSON, '' for a run that starts from its first step
-- ARGV[14] its seq  ARGV[15] its next node ('' when finished)  ARGV[16] the run forked from
-- ARGV[17] '1' when the fork replaced the checkpoint's state, else '0'
-- ARGV[18] the output when that checkpoint is the finished one, else '': the run is created
--   succeeded, and no attempt runs  ARGV[19] run retention s (for that case)
-- ARGV[20] the run's tags as JSON, '' for none (nothing written then)
-- ARGV[21] the run's priority, '' for none given
-- ARGV[22] the run's Celery message as kombu's Redis transport queues it, '' for none: when the
--   broker is this Redis, the client hands it over, so a run is recorded with its message, or
--   not at all, in one round trip (client/publish.py)
-- ARGV[23] the parent run of a child run (core/children.py), '' for none: kept as 'parent'
-- ARGV[24] the parent attempt's token when the parent records the child in this same round trip
--   (a standalone store; '' on a cluster, where child_started.lua records it next), then
-- ARGV[25] the parent's memo field for the child (its record: the child's id as JSON), and KEYS[#KEYS - 7..
--   #KEYS - 5] the parent's run hash, memo and mailbox (before the prelude's last five)
-- Returns {'created', run_id} | {'existing', run_id} | {'conflict', run_id} (the key names a
--   run made from other inputs) | {'retry', current idem owner} | {'fenced', ''} (the parent's
--   token no longer owns it: no child is made) | {'cancelled', ''} (the parent was asked to
--   cancel: no child is made, and its attempt ends it)

local parent, parent_token = ARGV[23] or '', ARGV[24] or ''
local P_RUN, P_MEMO, P_MAILBOX = KEYS[#KEYS - 7], KEYS[#KEYS - 6], KEYS[#KEYS - 5]
if parent_token ~= '' then
  local held = redis.call('HMGET', P_RUN, 'token', 'status', 'cancel')
  if held[1] ~= parent_token or held[2] ~= 'running' then
    return {'fenced', ''}
  end
  -- Its children were cancelled with it (store/interventions.py): it makes no new one.
  if held[3] then
    return {'cancelled', ''}
  end
end
-- The parent's record of its child, as child_started.lua writes it on a cluster: the step's memo
-- record (a retried step finds the child), and the child's place in the mailbox ('' until it
-- ends), which lists the parent's children.
local function record_in_parent(child)
  if parent_token == '' then
    return
  end
  redis.call('HSET', P_MEMO, ARGV[25], '"' .. child .. '"')
  local fresh = redis.call('HSETNX', P_MAILBOX, 'child:' .. child, '')
  redis.call('HSET', P_RUN, 'memo', '1', 'mbox', '1')
  if fresh == 1 then
    redis.call('HINCRBY', P_RUN, 'children', 1)
  end
end

local key, expected, digest = ARGV[7], ARGV[10], ARGV[12]
if key ~= '' then
  local owner = redis.call('GET', K_IDEM) or ''
  -- The owner's key must be declared up front, so a changed owner sends the caller round again.
  if owner ~= expected then
    return {'retry', owner}
  end
  -- An idem key can outlive its run by a moment (expiry is lazy); then the key is reusable.
  if owner ~= '' and redis.call('EXISTS', KEYS[19]) == 1 then
    if (redis.call('HGET', KEYS[19], 'digest') or '') ~= digest then
      return {'conflict', owner}
    end
    record_in_parent(owner)
    return {'existing', owner}
  end
end
-- A new run's stream is a copy of the template (_lib.lua: new_events), and COPY refuses to write
-- over a stream that exists: every recorded run has one (made with its hash, expired, persisted
-- and deleted with it). So a copy made is the existence check too, and a new run's hash is not
-- read; a copy refused (the run exists, or the template is not made yet) asks the hash.
local copied = redis.call('COPY', KEYS[20], K_EVENTS) == 1
if copied then
  fresh()
elseif exists() then
  record_in_parent(RUN_ID)
  return {'existing', RUN_ID}
end
init_run(ARGV[4], ARGV[5], ARGV[6], key ~= '' and key or RUN_ID, key ~= '' and IDEM_GUESS or '',
  digest, ARGV[8], not copied and KEYS[20] or nil)
if ARGV[21] ~= '' then
  put('priority', ARGV[21])
end
if parent ~= '' then
  put('parent', parent)
end
record_in_parent(RUN_ID)
if ARGV[11] ~= '' then
  put('trace', ARGV[11])
end
if ARGV[20] ~= '' then
  -- Tags are indexed by creation time, so listing by a tag reads only the runs that carry it.
  put('tags', ARGV[20])
  -- The last five are the prelude's (_lib.lua), and the parent's three before them. Each index
  -- is named in its shard's set, by which the reaper's prune finds it (store/recovery.py).
  local names = ARGV[22] ~= '' and 22 or 21
  for i = names + 1, #KEYS - (parent_token ~= '' and 8 or 5) do
    redis.call('ZADD', KEYS[i], NOW, RUN_ID)
    redis.call('SADD', KEYS[names], KEYS[i])
  end
end
if key ~= '' then
  -- No TTL while the run is active; terminal transitions expire it with the run's keys.
  redis.call('SET', K_IDEM, RUN_ID)
end
local seed = ARGV[13]
if seed ~= '' then
  -- The fork's own copy of the checkpoint: the claim reads it as any run's latest, and nothing of
  -- the source run is read again or changed. attempt 0: no attempt of this run saved it.
  redis.call('HSET', K_CKPT, ARGV[14], seed)
  put(ckpt_field(ARGV[14]), ckpt_entry(NOW, #seed, 0, ARGV[15]))
  put('ck_first', ARGV[14])
  put('ck_last', ARGV[14])
  for name, value in pairs({forked_from = ARGV[16], forked_at_seq = ARGV[14], checkpoints = 1,
      next_node = ARGV[15]}) do
    put(name, value)
  end
  emit('run_forked', 'from_run', ARGV[16], 'seq', ARGV[14], 'state_edited', ARGV[17])
end
if ARGV[18] ~= '' then
  -- Forked from a finished checkpoint: the output is known, so the run ends here, with no attempt.
  put('output', ARGV[18])
  set_status('succeeded')
  emit('run_succeeded', 'attempt', 0)
  expire_all(ARGV[19])
  return {'created', RUN_ID}
end
set_status('queued')
-- Safety net: if the enqueuer dies before sending the Celery message, or the message is lost
-- later, the reaper sends it.
redis.call('ZADD', K_DUE, ARGV[9], RUN_ID)
if ARGV[22] ~= '' then
  -- kombu's Redis transport pushes with LPUSH and its consumer pops with BRPOP: the same here.
  redis.call('LPUSH', KEYS[21], ARGV[22])
end
return {'created', RUN_ID}
