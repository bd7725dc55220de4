-- activity_counts.lua: one shard's runs per minute in four indexes, for the console's overview
-- (store/activity.py): the window's ZCOUNTs in one call, since a cluster store would otherwise
-- send 64 shards x 4 indexes x 60 minutes of them. Read only. Sent as EVAL within a pipeline.
-- Standalone (no prelude). KEYS from store/activity.py, all of one shard (one slot):
-- KEYS and ARGV: store/registry.py's entry 'activity_counts' (ARGV: contracts.ActivityArgs).
-- K_ALL: rg:{s<n>}:all               every run, score = created ms
-- K_SUCCEEDED: rg:{s<n>}:status:succeeded  score = ended ms
-- K_DEAD: rg:{s<n>}:dead              score = dead-lettered ms
-- K_RETRIES: rg:{s<n>}:retries           score = ms the run went retrying
-- start_ms: the window's first ms  width_ms: ms per minute
-- Returns the counts, K_ALL's minutes first, each index's oldest minute first

local start, count, width = tonumber(start_ms), tonumber(minutes), tonumber(width_ms)
local counts = {}
for _, key in ipairs({K_ALL, K_SUCCEEDED, K_DEAD, K_RETRIES}) do
  for i = 0, count - 1 do
    counts[#counts + 1] = redis.call('ZCOUNT', key, string.format('%d', start + i * width),
      '(' .. string.format('%d', start + (i + 1) * width))
  end
end
return counts
