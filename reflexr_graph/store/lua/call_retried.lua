-- call_retried.lua: a durable call failed and is tried again inside its step (CallRetry): told in
-- the run's history, fenced by the attempt's token. One round trip per retry, off the hot path.
-- Prelude: _lib.lua (its KEYS and RUN_ID, NOW, IDEM_GUESS as described there).
-- K_RUN run (the owner's token and status)  K_EVENTS events
-- KEYS and ARGV: store/registry.py's entry 'call_retried' (ARGV: contracts.CallRetriedArgs).
-- node: the step's node  call: the call's name  try_number: the try that failed (1 for the first)
-- error_type: the error's type (never its message: it may hold values)  delay_ms: ms until the next try
-- Returns store/contracts.py CallRetried: 'ok' | 'fenced'

if not owned_by(token) then
  return 'fenced'
end
emit('call_retried', 'node', node, 'call', call, 'try', try_number, 'error_type', error_type,
  'delay_ms', delay_ms)
return 'ok'
