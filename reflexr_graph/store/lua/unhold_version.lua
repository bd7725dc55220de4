-- unhold_version.lua: strike a (graph, version) pair off the index of those that may have held
-- runs, once a worker's beat looked in every shard and found none, unless a hold marked it again
-- since (its generation moved): the beat reads the index, then the shards, then calls this, and a
-- run held in between must stay found.
-- KEYS[1] rg:{c}:held_versions  zset <graph>@<version> -> generation (store/versions.py: hold_version)
-- ARGV[1] <graph>@<version>  ARGV[2] the generation the beat read
-- Returns 1 when struck off, 0 when it was marked again (or is gone)

if tonumber(redis.call('ZSCORE', KEYS[1], ARGV[1])) == tonumber(ARGV[2]) then
  return redis.call('ZREM', KEYS[1], ARGV[1])
end
return 0
