-- cancel.lua: cancel a run. A queued, retrying or waiting run is cancelled at once; a running
-- one too with ARGV[5] = '1' (--now: clearing the token fences out its attempt, whose heartbeat
-- then cancels the step). Without it, a running run is only marked: its attempt learns of it with
-- its next lease renewal or checkpoint, lets the step in flight finish, and ends the run cancelled
-- at the next boundary (it calls this script again, with '1').
-- Prelude: _lib.lua (KEYS[1..18], ARGV[1..3] as described there).
-- KEYS[1..4] run/ckpt/events/tb  KEYS[5] idem  KEYS[8] rg:leases  KEYS[9] rg:due
-- KEYS[10..16] status sets  KEYS[17..18] memo, mailbox (expiry)
-- ARGV: store/contracts.py CancelArgs, in its field order:
-- ARGV[1] run_id  ARGV[2] now ms  ARGV[3] idempotency key guess  ARGV[4] run retention s
-- ARGV[5] '1' to cancel a running run at once, '0' to let its attempt stop at its next boundary
-- ARGV[6] who cancels (a token's name, cli@user@host), recorded as 'by'; '' for none
-- Returns {'ok', HGETALL...} (cancelled) | {'requested', HGETALL...} (the attempt stops at its
--   next boundary) | {'missing'} | {'refused', status} | {'idem', key}

want(OPTIONAL_KEYS)
local by = ARGV[6] or ''
local refused, status = refusal(CANCELLABLE)
if refused then
  return refused
end
if status == 'running' and ARGV[5] ~= '1' then
  if not cancel_requested() then
    put('cancel', ARGV[4])
    if by ~= '' then
      emit('cancel_requested', 'by', by)
    else
      emit('cancel_requested')
    end
  end
  return snapshot('requested')
end
to_cancelled(status, ARGV[4], by)
return snapshot('ok')
