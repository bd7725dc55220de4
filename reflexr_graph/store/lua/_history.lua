-- _history.lua: helpers that scripts.py prepends to the scripts that save, list, read or go back
-- to a run's checkpoints. Not run on its own, and it reads no KEYS[i] or ARGV[i] itself: the
-- callers pass the checkpoint hash from their own KEYS, and the index from the run hash.
--   rg:{<run_id>}:ckpt   hash, seq -> checkpoint JSON: every checkpoint the run keeps, the latest
--                        included, each stored once
--   run hash 'ckpts'     the index: one entry per kept checkpoint, oldest first, the latest last,
--                        each seq|saved_at ms|size|attempt|next_node, joined by \30
-- A save writes one payload and the index, and trims the oldest payload past the bound:
-- REFLEXR_CHECKPOINT_HISTORY (``keep``) checkpoints before the latest, 0 none at all.

local SEP = '\30'

local function ckpt_entry(seq, saved_at, size, attempt, next_node)
  return table.concat({seq, saved_at, size, attempt, next_node}, '|')
end

-- seq, saved_at, size, attempt, next_node of an index entry (a node id may hold '|': it is last).
local function ckpt_fields(entry)
  return string.match(entry, '^([^|]*)|([^|]*)|([^|]*)|([^|]*)|(.*)$')
end

local function ckpt_list(index)
  local out = {}
  for entry in string.gmatch(index, '[^' .. SEP .. ']+') do
    out[#out + 1] = entry
  end
  return out
end

-- The latest entry's seq and next node, or nil without a checkpoint.
local function ckpt_latest(index)
  local last = string.match(index, '([^' .. SEP .. ']+)$')
  if not last then
    return nil
  end
  local seq, _, _, _, next_node = ckpt_fields(last)
  return seq, next_node
end

-- The index with checkpoint `entry` (number `seq`) as the latest. Entries numbered `seq` or later
-- go: the same seq again is a save retried after a lost reply, later ones belong to a path the
-- run left. The oldest go past the bound. Returns the new index and the seqs whose payloads go
-- (never `seq` itself: its payload is written over).
local function ckpt_add(index, seq, entry, keep)
  local kept, gone, n = {}, {}, tonumber(seq)
  for _, old in ipairs(ckpt_list(index)) do
    local s = string.match(old, '^[^|]*')
    if tonumber(s) < n then
      kept[#kept + 1] = old
    elseif s ~= seq then
      gone[#gone + 1] = s
    end
  end
  local excess = #kept - keep
  for i = 1, excess do
    gone[#gone + 1] = string.match(kept[i], '^[^|]*')
  end
  local out = {}
  for i = math.max(excess, 0) + 1, #kept do
    out[#out + 1] = kept[i]
  end
  out[#out + 1] = entry
  return table.concat(out, SEP), gone
end

-- Write checkpoint `seq` as the latest: one HSET of its payload, one HDEL of those that go.
-- Returns the new index, for the caller to put in the run hash.
local function ckpt_save(ckpt, index, seq, payload, entry, keep)
  local new_index, gone = ckpt_add(index, seq, entry, keep)
  redis.call('HSET', ckpt, seq, payload)
  if #gone > 0 then
    redis.call('HDEL', ckpt, unpack(gone))
  end
  return new_index
end

-- Go back to checkpoint `seq`: it becomes the latest, the ones after it go. Returns the new
-- index, its next node and how many went, or nil when the run keeps no checkpoint `seq`.
local function ckpt_back_to(ckpt, index, seq)
  local kept, gone, found = {}, {}, nil
  for _, entry in ipairs(ckpt_list(index)) do
    local s, _, _, _, next_node = ckpt_fields(entry)
    if found then
      gone[#gone + 1] = s
    else
      kept[#kept + 1] = entry
      if s == seq then
        found = next_node
      end
    end
  end
  if not found or redis.call('HEXISTS', ckpt, seq) == 0 then
    return nil
  end
  if #gone > 0 then
    redis.call('HDEL', ckpt, unpack(gone))
  end
  return table.concat(kept, SEP), found, #gone
end

-- The index entry of checkpoint `seq`, or nil.
local function ckpt_find(index, seq)
  for _, entry in ipairs(ckpt_list(index)) do
    if string.match(entry, '^[^|]*') == seq then
      return entry
    end
  end
  return nil
end
