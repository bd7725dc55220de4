-- worker_leave.lua: a stopping worker takes itself out of the registry at once, rather than
-- being counted live until its heartbeat expires.
-- Standalone (no prelude).
-- KEYS[1] rg:workers  KEYS[2] rg:worker:<name>  KEYS[3..] rg:served:<graph> of its graphs
-- ARGV[1] worker name
-- Returns 1.

redis.call('ZREM', KEYS[1], ARGV[1])
redis.call('DEL', KEYS[2])
for i = 3, #KEYS do
  redis.call('ZREM', KEYS[i], ARGV[1])
end
return 1
