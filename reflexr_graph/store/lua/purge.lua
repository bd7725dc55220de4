-- purge.lua: delete every key of a finished run (succeeded, dead or cancelled) and drop it from
-- every index.
-- Prelude: _lib.lua (KEYS[1..18], ARGV[1..3] as described there).
-- KEYS[1..4] run/ckpt/events/tb  KEYS[5] idem  KEYS[6..9] rg:all/dead/leases/due
-- KEYS[10..16] status sets  KEYS[17..18] memo, mailbox
-- ARGV[1] run_id  ARGV[2] now ms (unused)  ARGV[3] idempotency key guess
-- Returns {'ok'} | {'missing'} | {'refused', status} | {'idem', key}

want(OPTIONAL_KEYS)
local refused, status = refusal(TERMINAL)
if refused then
  return refused
end
if owns_idem() then
  redis.call('DEL', K_IDEM)
end
redis.call('DEL', unpack(present_keys()))
unindex(status)
return {'ok'}
