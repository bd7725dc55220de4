-- unhold_version.lua: strike a (graph, version) pair off the index of those that may have held
-- runs, once a worker's beat looked in every shard and found none, unless a hold marked it again
-- since (its generation moved): the beat reads the index, then the shards, then calls this, and a
-- run held in between must stay found.
-- KEYS and ARGV: store/registry.py's entry 'unhold_version' (ARGV: contracts.UnholdArgs).
-- K_HELD: rg:{c}:held_versions  zset <graph>@<version> -> generation (store/versions.py: hold_version)
-- pair: <graph>@<version>  generation: the generation the beat read
-- Returns 1 when struck off, 0 when it was marked again (or is gone)

if tonumber(redis.call('ZSCORE', K_HELD, pair)) == tonumber(generation) then
  return redis.call('ZREM', K_HELD, pair)
end
return 0
