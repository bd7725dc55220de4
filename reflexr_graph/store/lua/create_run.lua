-- create_run.lua: create a queued run, or return the run an idempotency key already names.
-- A fork (the fork_* arguments) is created with the checkpoint it resumes from.
-- Prelude: _lib.lua (its KEYS and RUN_ID, NOW, IDEM_GUESS as described there), _history.lua and
-- _parent.lua.
-- KEYS and ARGV: store/registry.py's entry 'create_run' (ARGV: contracts.CreateArgs).
-- Of the prelude's: K_RUN, K_CKPT, K_EVENTS, K_IDEM, K_ALL, K_DUE, the queued and succeeded sets,
--   and K_INPUTS, the run's inputs when longer than INLINE_MAX (_lib.lua: init_run)
-- the run hash of expected_owner's run (the idem key's owner the caller expects), else K_RUN
-- rg:events:template, the stream a new run's events start as a copy of (_lib.lua)
--       with a message, the broker list it goes to (keys.broker_queue); with a parent_token,
--   the parent's run hash, memo and mailbox; with tags, the shard's set of tag index names
--   (rg:tags), then the run's tag indexes (rg:#tag:<sha1 of key=value>), one per tag
-- inputs: JSON  state: JSON or ''  idempotency_key: the caller's, '' for none
-- due_ms: now + dispatch grace  expected_owner: the run id the caller expects the idem key to name,
--   '' for none
-- trace: the enqueuer's trace context (W3C headers as JSON), '' for none: every attempt's span
--   joins that trace, so retries and resumes of one run read as one trace
-- digest: of the request's inputs and state (a fork's: of its source, seq and state)
-- fork_checkpoint: a fork's checkpoint JSON, '' for a run that starts from its first step
-- fork_seq: its seq  fork_next_node: its next node ('' when finished)  fork_source: the run forked
--   from  fork_state_edited: '1' when the fork replaced the checkpoint's state, else '0'
-- fork_output: the output when that checkpoint is the finished one, else '': the run is created
--   succeeded, and no attempt runs  retention_s: run retention s (for that case)
-- tags: the run's tags as JSON, '' for none (nothing written then)
-- priority: the run's priority, '' for none given
-- message: the run's Celery message as kombu's Redis transport queues it, '' for none: when the
--   broker is this Redis, the client hands it over, so a run is recorded with its message, or
--   not at all, in one round trip (client/publish.py)
-- parent: the parent run of a child run (core/children.py), '' for none: kept as 'parent'
-- parent_token: the parent attempt's token when the parent records the child in this same round
--   trip (a standalone store; '' on a cluster, where child_started.lua records it next), then
-- parent_field: the parent's memo field for the child (its record: the child's id as JSON)
-- Returns {'created', run_id} | {'existing', run_id} | {'conflict', run_id} (the key names a
--   run made from other inputs) | {'retry', current idem owner} | {'fenced', ''} (the parent's
--   token no longer owns it: no child is made) | {'cancelled', ''} (the parent was asked to
--   cancel: no child is made, and its attempt ends it)

parent, parent_token = parent or '', parent_token or ''
-- The keys after the named ones: the broker list (with a message), the parent's three (when the
-- parent records the child here), then the tag indexes' names set and the tag indexes.
local at = more_from
local K_BROKER, P_RUN, P_MEMO, P_MAILBOX
if message ~= '' then
  K_BROKER, at = KEYS[at], at + 1
end
if parent_token ~= '' then
  P_RUN, P_MEMO, P_MAILBOX, at = KEYS[at], KEYS[at + 1], KEYS[at + 2], at + 3
end
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
-- The parent's record of its child (_parent.lua), as child_started.lua writes it on a cluster.
local function record_in_parent(child)
  if parent_token ~= '' then
    record_child(P_RUN, P_MEMO, P_MAILBOX, parent_field, child)
  end
end

local key, expected = idempotency_key, expected_owner
if key ~= '' then
  local owner = redis.call('GET', K_IDEM) or ''
  -- The owner's key must be declared up front, so a changed owner sends the caller round again.
  if owner ~= expected then
    return {'retry', owner}
  end
  -- An idem key can outlive its run by a moment (expiry is lazy); then the key is reusable.
  if owner ~= '' and redis.call('EXISTS', K_EXPECTED) == 1 then
    if (redis.call('HGET', K_EXPECTED, 'digest') or '') ~= digest then
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
local copied = redis.call('COPY', K_TEMPLATE, K_EVENTS) == 1
if copied then
  fresh()
elseif exists() then
  record_in_parent(RUN_ID)
  return {'existing', RUN_ID}
end
init_run(graph, inputs, state, key ~= '' and key or RUN_ID, key ~= '' and IDEM_GUESS or '',
  digest, max_attempts, not copied and K_TEMPLATE or nil)
if priority ~= '' then
  put('priority', priority)
end
if parent ~= '' then
  put('parent', parent)
end
record_in_parent(RUN_ID)
if trace ~= '' then
  put('trace', trace)
end
if tags ~= '' then
  -- Tags are indexed by creation time, so listing by a tag reads only the runs that carry it.
  put('tags', tags)
  -- The last five keys are the prelude's (_lib.lua). Each index is named in its shard's set
  -- (KEYS[at]), by which the reaper's prune finds it (store/recovery.py).
  for i = at + 1, #KEYS - 5 do
    redis.call('ZADD', KEYS[i], NOW, RUN_ID)
    redis.call('SADD', KEYS[at], KEYS[i])
  end
end
if key ~= '' then
  -- No TTL while the run is active; terminal transitions expire it with the run's keys.
  redis.call('SET', K_IDEM, RUN_ID)
end
local seed = fork_checkpoint
if seed ~= '' then
  -- The fork's own copy of the checkpoint: the claim reads it as any run's latest, and nothing of
  -- the source run is read again or changed. attempt 0: no attempt of this run saved it.
  redis.call('HSET', K_CKPT, fork_seq, seed)
  put(ckpt_field(fork_seq), ckpt_entry(NOW, #seed, 0, fork_next_node))
  put('ck_first', fork_seq)
  put('ck_last', fork_seq)
  for name, value in pairs({forked_from = fork_source, forked_at_seq = fork_seq, checkpoints = 1,
      next_node = fork_next_node}) do
    put(name, value)
  end
  emit('run_forked', 'from_run', fork_source, 'seq', fork_seq, 'state_edited', fork_state_edited)
end
if fork_output ~= '' then
  -- Forked from a finished checkpoint: the output is known, so the run ends here, with no attempt.
  put('output', fork_output)
  set_status('succeeded')
  emit('run_succeeded', 'attempt', 0)
  expire_all(retention_s)
  return {'created', RUN_ID}
end
set_status('queued')
-- Safety net: if the enqueuer dies before sending the Celery message, or the message is lost
-- later, the reaper sends it.
redis.call('ZADD', K_DUE, due_ms, RUN_ID)
if message ~= '' then
  -- kombu's Redis transport pushes with LPUSH and its consumer pops with BRPOP: the same here.
  redis.call('LPUSH', K_BROKER, message)
end
return {'created', RUN_ID}
