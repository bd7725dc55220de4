-- purge.lua: delete every key of a finished run (succeeded, dead or cancelled) and drop it from
-- every index.
-- Prelude: _lib.lua (its KEYS and RUN_ID, NOW, IDEM_GUESS as described there).
-- KEYS and ARGV: store/registry.py's entry 'purge'.
-- K_RUN/K_CKPT/K_EVENTS/K_TB  K_IDEM idem  K_ALL/K_DEAD/K_LEASES/K_DUE
-- STATUS_SETS  K_MEMO, K_MAILBOX
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
