-- dead_letter.lua: send a run straight to dead (a bad message, before or without a claim),
-- creating its record from the message when there is none. Not fenced.
-- Prelude: _lib.lua (KEYS[1..18], ARGV[1..3] as described there).
-- KEYS[1..4] run/ckpt/events/tb  KEYS[5] idem  KEYS[6] rg:all  KEYS[7] rg:dead
-- KEYS[8] rg:leases  KEYS[9] rg:due  KEYS[10..16] status sets  KEYS[17..18] memo, mailbox (expiry)
-- KEYS[19] rg:events:template (a new record's stream starts as its copy: _lib.lua)
-- ARGV: store/contracts.py DeadLetterArgs, in its field order:
-- ARGV[1] run_id  ARGV[2] now ms  ARGV[3] scoped idempotency key (the message's, else the run_id)
-- ARGV[4] reason  ARGV[5] error type  ARGV[6] error message  ARGV[7] graph  ARGV[8] inputs
-- ARGV[9] state or ''  ARGV[10] the message's idempotency key, '' for none
-- ARGV[11] max_attempts (for a replay)  ARGV[12] dead retention s  ARGV[13] digest of the request
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
  local key = ARGV[10]
  init_run(ARGV[7], ARGV[8], ARGV[9], key ~= '' and key or RUN_ID, key ~= '' and IDEM_GUESS or '',
    ARGV[13], ARGV[11], KEYS[19])
  if key ~= '' then
    -- NX: an existing key names another run that the same request created first.
    redis.call('SET', K_IDEM, RUN_ID, 'NX')
  end
end
put('error_type', ARGV[5])
put('error', ARGV[6])
drop('token')
to_dead(ARGV[4], ARGV[12])
return 1
