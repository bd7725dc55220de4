-- _history.lua: helpers that scripts.py prepends to the scripts that save, list, read or go back
-- to a run's checkpoints. Not run on its own, and it reads no KEYS[i] or ARGV[i] itself: the
-- callers pass the keys from their own KEYS, and the run's fields they read.
--   rg:{<run_id>}:ckpt    hash, seq -> checkpoint JSON: every checkpoint the run keeps, the latest
--                         included, each written once, by the save that made it the latest
--   run hash 'ck_first'   the oldest seq kept, 'ck_last' the latest's: the claim reads the latest
--                         by this pointer; the seqs between are kept (each save is latest + 1)
--   run hash 'c:<seq>'    that checkpoint's entry: saved_at ms|size|attempt|next_node (small
--                         fields, so a small run hash stays a compact listpack); 'o' before it
--                         marks a finished checkpoint kept as its entry alone (CKPT_FROM_OUTPUT)
-- A save writes one payload and one entry, and trims the oldest past the bound:
-- REFLEXR_CHECKPOINT_HISTORY (``keep``) checkpoints before the latest, 0 none at all.

local function ckpt_entry(saved_at, size, attempt, next_node)
  return table.concat({saved_at, size, attempt, next_node}, '|')
end

-- A succeeded run's finished checkpoint is its output in an envelope that the run hash tells
-- whole (graph, version, the seq): succeed.lua keeps no payload for one that is exactly that,
-- only its entry, marked by this prefix, and readers rebuild it from the run hash
-- (store/records.py finished_checkpoint, the same text). No claim resumes a succeeded run.
local CKPT_FROM_OUTPUT = 'o'

-- The finished checkpoint's JSON as core/checkpoint.py writes it (format 1); a graph name or
-- version that JSON would escape gives another text, so such a checkpoint keeps its payload.
local function ckpt_finished(graph, version, seq, output)
  return '{"format":1,"graph":"' .. graph .. '","fingerprint":"' .. version .. '","seq":' .. seq
    .. ',"finished":true,"state":null,"inputs":null,"inputs_ref":"run","next":null,"output":'
    .. output .. '}'
end

-- saved_at, size, attempt, next_node of an entry (a node id may hold '|': it is last), and
-- whether it is a finished checkpoint kept without its payload (CKPT_FROM_OUTPUT).
local function ckpt_fields(entry)
  local mark, saved_at, size, attempt, next_node = string.match(entry, '^(o?)([^|]*)|([^|]*)|([^|]*)|(.*)$')
  return saved_at, size, attempt, next_node, mark == CKPT_FROM_OUTPUT
end

local function ckpt_field(seq)
  return 'c:' .. seq
end

-- Saving checkpoint `seq` when the run keeps [first, last] ('' '' for none): returns the range's
-- new first, and the seqs whose payload and entry go (never `seq`: both are written over). The
-- same seq again is a save retried after a lost reply; a lower one, a path the run left (its
-- checkpoints after it go); the oldest go past the bound.
local function ckpt_plan(first, last, seq, keep)
  local n, f, l = tonumber(seq), tonumber(first), tonumber(last)
  local gone = {}
  if not f or n < f then
    for s = f or 1, l or 0 do
      gone[#gone + 1] = s
    end
    f = n
  elseif n <= l then
    for s = n + 1, l do
      gone[#gone + 1] = s
    end
  end
  while n - f > keep do
    gone[#gone + 1] = f
    f = f + 1
  end
  return f, gone
end

-- Drop the payloads of the seqs in `gone` (one HDEL, when any go; a finished checkpoint kept as
-- its entry alone has none, which HDEL passes over); returns the run-hash entry names that go
-- with them, for the caller's one HDEL of the run.
local function ckpt_drop(ckpt, gone)
  local names = {}
  if #gone > 0 then
    redis.call('HDEL', ckpt, unpack(gone))
    for i, s in ipairs(gone) do
      names[i] = ckpt_field(s)
    end
  end
  return names
end

-- Write the payload of `seq`, and drop those that go: one HSET, and one HDEL when any go.
local function ckpt_write(ckpt, seq, payload, gone)
  redis.call('HSET', ckpt, seq, payload)
  return ckpt_drop(ckpt, gone)
end

-- Forget every kept checkpoint and the work recorded since (the memo): the run starts over, its
-- new checkpoints numbered from 1 again (replay from the start, upgrade). Uses the prelude's
-- field, num, drop and put.
local function ckpt_forget_all(ckpt, memo)
  redis.call('DEL', ckpt, memo)
  if field('ck_first') ~= '' then
    for s = num('ck_first'), num('ck_last') do
      drop(ckpt_field(s))
    end
  end
  drop('ck_first', 'ck_last')
  put('memo', '0')
end
