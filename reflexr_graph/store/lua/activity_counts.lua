-- activity_counts.lua: one shard's runs per minute in four indexes, for the console's overview
-- (store/activity.py): the window's ZCOUNTs in one call, since a cluster store would otherwise
-- send 64 shards x 4 indexes x 60 minutes of them. Read only. Sent as EVAL within a pipeline.
-- Standalone (no prelude). KEYS from store/activity.py, all of one shard (one slot):
-- KEYS[1] rg:{s<n>}:all               every run, score = created ms
-- KEYS[2] rg:{s<n>}:status:succeeded  score = ended ms
-- KEYS[3] rg:{s<n>}:dead              score = dead-lettered ms
-- KEYS[4] rg:{s<n>}:retries           score = ms the run went retrying
-- ARGV[1] the window's first ms  ARGV[2] minutes  ARGV[3] ms per minute
-- Returns the counts, KEYS[1]'s minutes first, each index's oldest minute first

local start, minutes, width = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local counts = {}
for k = 1, 4 do
  for i = 0, minutes - 1 do
    counts[#counts + 1] = redis.call('ZCOUNT', KEYS[k], string.format('%d', start + i * width),
      '(' .. string.format('%d', start + (i + 1) * width))
  end
end
return counts
