-- prune_tag.lua: drop a tag index's entries whose run has expired (retention passed), and the
-- index's name from its shard's set once it has none: a sorted set without a member is no key,
-- so a tag index goes with the last run it holds (store/recovery.py: prune_tag_indexes).
-- KEYS and ARGV: store/registry.py's entry 'prune_tag'.
-- K_NAMES: the shard's tag index names (keys.tag_indexes)  K_INDEX: one tag index
-- runs: the run hash of each of the run_ids, in order
-- run_ids: run ids, entries of K_INDEX
-- Returns how many entries were dropped. The run is checked here, so no race with its creation.

local dropped = 0
for i = run_ids_from, #ARGV do
  local run_id = ARGV[i]
  if redis.call('EXISTS', KEYS[runs_from + i - run_ids_from]) == 0 then
    dropped = dropped + redis.call('ZREM', K_INDEX, run_id)
  end
end
if redis.call('EXISTS', K_INDEX) == 0 then
  redis.call('SREM', K_NAMES, K_INDEX)
end
return dropped
