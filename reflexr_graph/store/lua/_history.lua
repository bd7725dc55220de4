-- _history.lua: helpers that scripts.py prepends to the scripts that replace a run's latest
-- checkpoint (save_checkpoint, succeed) or go back to an earlier one (replay). Not run on its
-- own, and it reads no KEYS[i] or ARGV[i] itself: the callers pass these keys from their own KEYS
-- (read_checkpoint gets it too, to read the index as it is written):
--   ckpt   rg:{<run_id>}:ckpt          the latest checkpoint (data, seq, saved_at, size,
--                                      next_node, attempt); the claim reads only this one
--   index  rg:{<run_id>}:history       sorted set, score = seq,
--                                      member = seq|saved_at ms|size|attempt|next_node
--   data   rg:{<run_id>}:history:data  hash, seq -> checkpoint JSON
-- The history holds the checkpoints before the latest, never the latest itself, so each one is
-- stored once; REFLEXR_CHECKPOINT_HISTORY (``keep``) bounds how many it holds, 0 none at all.
-- Every seq in it is below the latest's.

local function history_member(seq, saved_at, size, attempt, next_node)
  return table.concat({seq, saved_at, size, attempt, next_node}, '|')
end

local function history_seq(member)
  return string.match(member, '^[^|]*')
end

-- seq, saved_at, size, attempt, next_node of an index member (a node id may hold '|': it is last).
local function history_entry(member)
  return string.match(member, '^([^|]*)|([^|]*)|([^|]*)|([^|]*)|(.*)$')
end

-- Drop the history's checkpoints numbered `seq` or later: they belong to a path the run left
-- when it went back to an earlier checkpoint. Returns how many were dropped.
local function history_drop_from(index, data, seq)
  local later = redis.call('ZRANGEBYSCORE', index, seq, '+inf')
  for _, member in ipairs(later) do
    redis.call('HDEL', data, history_seq(member))
  end
  if #later > 0 then
    redis.call('ZREMRANGEBYSCORE', index, seq, '+inf')
  end
  return #later
end

-- The oldest go first, so a run that checkpoints thousands of times keeps a bounded history.
local function history_trim(index, data, keep)
  local excess = redis.call('ZCARD', index) - keep
  if excess <= 0 then
    return
  end
  for _, member in ipairs(redis.call('ZRANGE', index, 0, excess - 1)) do
    redis.call('HDEL', data, history_seq(member))
  end
  redis.call('ZREMRANGEBYRANK', index, 0, excess - 1)
end

-- Called just before checkpoint `seq` replaces the latest: the latest moves into the history.
-- The same seq again is this save retried after a lost reply: nothing moves.
local function history_push(ckpt, index, data, seq, keep)
  history_drop_from(index, data, seq)
  local prev = redis.call('HMGET', ckpt, 'data', 'seq', 'saved_at', 'size', 'attempt', 'next_node')
  local prev_seq = tonumber(prev[2])
  if keep > 0 and prev[1] and prev_seq and prev_seq < tonumber(seq) then
    redis.call('HSET', data, prev[2], prev[1])
    redis.call('ZREMRANGEBYSCORE', index, prev_seq, prev_seq)
    redis.call('ZADD', index, prev_seq,
      history_member(prev[2], prev[3] or '', prev[4] or '', prev[5] or '', prev[6] or ''))
  end
  history_trim(index, data, keep)
end

-- Make checkpoint `seq` of the history the latest again; every checkpoint after it (the later
-- ones in the history, and the latest) is dropped. Returns the next node and how many were
-- dropped, or nil when the history holds no checkpoint `seq` (then nothing changed).
local function history_restore(ckpt, index, data, seq)
  local found = redis.call('ZRANGEBYSCORE', index, seq, seq)
  local payload = redis.call('HGET', data, seq)
  if #found == 0 or not payload then
    return nil
  end
  local s, saved_at, size, attempt, next_node = history_entry(found[1])
  -- Counts `seq` itself, which becomes the latest, in place of the latest it replaces.
  local dropped = history_drop_from(index, data, seq)
  redis.call('HSET', ckpt, 'data', payload, 'seq', s, 'saved_at', saved_at, 'size', size,
    'attempt', attempt, 'next_node', next_node)
  return next_node, dropped
end
