-- cancel.lua: cancel a run. A queued, retrying or waiting run is cancelled at once; a running
-- one too with now = '1' (--now: clearing the token fences out its attempt, whose heartbeat
-- then cancels the step). Without it, a running run is only marked: its attempt learns of it with
-- its next lease renewal or checkpoint, lets the step in flight finish, and ends the run cancelled
-- at the next boundary (it calls this script again, with '1').
-- Prelude: _lib.lua (its KEYS and RUN_ID, NOW, IDEM_GUESS as described there).
-- K_RUN/K_CKPT/K_EVENTS/K_TB  K_IDEM idem  K_LEASES rg:leases  K_DUE rg:due
-- STATUS_SETS  K_MEMO, K_MAILBOX (expiry)
-- KEYS and ARGV: store/registry.py's entry 'cancel' (ARGV: contracts.CancelArgs).
-- retention_s: run retention s
-- now: '1' to cancel a running run at once, '0' to let its attempt stop at its next boundary
-- by: who cancels (a token's name, cli@user@host), recorded as 'by'; '' for none
-- Returns {'ok', HGETALL...} (cancelled) | {'requested', HGETALL...} (the attempt stops at its
--   next boundary) | {'missing'} | {'refused', status} | {'idem', key}

want(OPTIONAL_KEYS)
by = by or ''
local refused, status = refusal(CANCELLABLE)
if refused then
  return refused
end
if status == 'running' and now ~= '1' then
  if not cancel_requested() then
    put('cancel', retention_s)
    if by ~= '' then
      emit('cancel_requested', 'by', by)
    else
      emit('cancel_requested')
    end
  end
  return snapshot('requested')
end
to_cancelled(status, retention_s, by)
return snapshot('ok')
