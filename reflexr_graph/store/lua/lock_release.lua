-- lock_release.lua: release a lock only if the caller still holds it.
-- KEYS[1] the lock key (rg:reaper:lock)
-- ARGV[1] owner id
-- Returns 1 when released, 0 when another owner holds it (ours had expired).

if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0
