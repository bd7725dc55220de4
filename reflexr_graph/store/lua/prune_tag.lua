-- prune_tag.lua: drop a tag index's entries whose run has expired (retention passed), and the
-- index's name from its shard's set once it has none: a sorted set without a member is no key,
-- so a tag index goes with the last run it holds (store/recovery.py: prune_tag_indexes).
-- KEYS[1] the shard's tag index names (keys.tag_indexes)  KEYS[2] one tag index
-- KEYS[3..] the run hash of each of ARGV[1..], in order
-- ARGV[1..] run ids, entries of KEYS[2]
-- Returns how many entries were dropped. The run is checked here, so no race with its creation.

local dropped = 0
for i, run_id in ipairs(ARGV) do
  if redis.call('EXISTS', KEYS[i + 2]) == 0 then
    dropped = dropped + redis.call('ZREM', KEYS[2], run_id)
  end
end
if redis.call('EXISTS', KEYS[2]) == 0 then
  redis.call('SREM', KEYS[1], KEYS[2])
end
return dropped
