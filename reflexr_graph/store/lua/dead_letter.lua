-- dead_letter.lua: send a run straight to dead (a bad message, before or without a claim),
-- creating its record from the message when there is none. Not fenced.
-- Prelude: _lib.lua (its KEYS and RUN_ID, NOW, IDEM_GUESS as described there).
-- K_RUN/K_CKPT/K_EVENTS/K_TB  K_IDEM idem  K_ALL rg:all  K_DEAD rg:dead
-- K_LEASES rg:leases  K_DUE rg:due  STATUS_SETS  K_MEMO, K_MAILBOX (expiry)
-- K_TEMPLATE rg:events:template (a new record's stream starts as its copy: _lib.lua)
-- KEYS and ARGV: store/registry.py's entry 'dead_letter' (ARGV: contracts.DeadLetterArgs).
-- error_type: error type  message: error message
-- state: or ''  idempotency_key: the message's idempotency key, '' for none
-- max_attempts: (for a replay)  dead_retention_s: dead retention s  digest: of the request
-- Returns store/contracts.py DeadLettered: 1 dead-lettered, 0 the run is already terminal, or
--   {'idem', key}.

want(OPTIONAL_KEYS)
if exists() then
  -- Not fenced: whoever runs a bad message, but a finished run stays as it ended.
  local guard = write_guard(nil)
  if guard == 'done' then
    return 0
  elseif guard then
    return guard
  end
else
  local key = idempotency_key
  init_run(graph, inputs, state, key ~= '' and key or RUN_ID, key ~= '' and IDEM_GUESS or '',
    digest, max_attempts, K_TEMPLATE)
  if key ~= '' then
    -- NX: an existing key names another run that the same request created first.
    redis.call('SET', K_IDEM, RUN_ID, 'NX')
  end
end
put('error_type', error_type)
put('error', message)
drop('token')
to_dead(reason, dead_retention_s)
return 1
