-- _pass.lua: the reaper's pass mark, which scripts.py prepends to reaper_tick.lua. Not run on
-- its own, and it reads no KEYS[i] or ARGV[i] itself: the caller passes the key (rg:reaper:pass)
-- and now (ms) from its own KEYS and ARGV.
-- The mark is "<epoch ms> <run_id of the Redis server>". A server has a new run_id each time it
-- starts (a promoted replica has its own), so the next pass can tell that Redis restarted or
-- failed over since: the window since the last pass is then evidence of an outage that holds
-- even for a reaper that did not see it. A server whose ACL refuses INFO gives no evidence.

-- Mark this pass; returns {from ms, to ms} when the server changed since the last one, else {}.
local function mark_pass(key, now)
  local info = redis.pcall('INFO', 'server')
  if type(info) ~= 'string' then
    return {}
  end
  local server = string.match(info, 'run_id:(%x+)') or ''
  local last = redis.call('GET', key)
  redis.call('SET', key, now .. ' ' .. server)
  if not last then
    return {}
  end
  local at, before = string.match(last, '^(%d+) (.*)$')
  if not at or before == server then
    return {}
  end
  return {at, now}
end
