-- worker_leave.lua: a stopping worker takes itself out of the registry at once, rather than
-- being counted live until its heartbeat expires.
-- Standalone (no prelude).
-- KEYS and ARGV: store/registry.py's entry 'worker_leave' (ARGV: contracts.WorkerLeaveArgs).
-- K_WORKERS: rg:workers  K_WORKER: rg:worker:<name>  served: rg:served:<graph> of its graphs
-- name: worker name
-- Returns 1.

redis.call('ZREM', K_WORKERS, name)
redis.call('DEL', K_WORKER)
for i = served_from, #KEYS do
  redis.call('ZREM', KEYS[i], name)
end
return 1
