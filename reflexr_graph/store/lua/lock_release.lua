-- lock_release.lua: release a lock only if the caller still holds it.
-- KEYS and ARGV: store/registry.py's entry 'lock_release' (ARGV: contracts.LockReleaseArgs).
-- K_LOCK: the lock key (rg:reaper:lock)
-- owner: the caller's owner id
-- Returns 1 when released, 0 when another owner holds it (ours had expired).

if redis.call('GET', K_LOCK) == owner then
  return redis.call('DEL', K_LOCK)
end
return 0
