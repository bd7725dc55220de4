-- swap_payload.lua: write one stored payload again only if it still holds what rekey read.
-- KEYS and ARGV: store/registry.py's entry 'swap_payload' (ARGV: contracts.SwapPayloadArgs).
-- K_HOLDER: the run's hash that holds the payload, or its long inputs' string key (keys.inputs)
-- field: the hash field, '' for that string key
-- Returns 1 when written, 0 when the run changed it meanwhile: its newer value, written under the
-- first key already, is kept. One key, so one slot; the compare and the write are one step.

if field == '' then
  if redis.call('GET', K_HOLDER) == read then
    -- KEEPTTL: a finished run's inputs expire with its other keys, as before the rekey.
    redis.call('SET', K_HOLDER, rewritten, 'KEEPTTL')
    return 1
  end
  return 0
end
if redis.call('HGET', K_HOLDER, field) == read then
  redis.call('HSET', K_HOLDER, field, rewritten)
  return 1
end
return 0
