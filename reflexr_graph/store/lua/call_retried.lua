-- call_retried.lua: a durable call failed and is tried again inside its step (CallRetry): told in
-- the run's history, fenced by the attempt's token. One round trip per retry, off the hot path.
-- Prelude: _lib.lua (KEYS[1..18], ARGV[1..3] as described there).
-- KEYS[1] run (the owner's token and status)  KEYS[3] events
-- ARGV: store/contracts.py CallRetriedArgs, in its field order:
-- ARGV[1] run_id  ARGV[2] now ms  ARGV[3] idempotency key guess  ARGV[4] token
-- ARGV[5] the step's node  ARGV[6] the call's name  ARGV[7] the try that failed (1 for the first)
-- ARGV[8] the error's type (never its message: it may hold values)  ARGV[9] ms until the next try
-- Returns store/contracts.py CallRetried: 'ok' | 'fenced'

if not owned_by(ARGV[4]) then
  return 'fenced'
end
emit('call_retried', 'node', ARGV[5], 'call', ARGV[6], 'try', ARGV[7], 'error_type', ARGV[8],
  'delay_ms', ARGV[9])
return 'ok'
