-- lock_extend.lua: extend a lock only if the caller still holds it.
-- KEYS[1] the lock key (rg:reaper:lock)
-- ARGV[1] owner id  ARGV[2] new TTL ms
-- Returns 1 when extended, 0 when the caller no longer holds it.

if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return 0
