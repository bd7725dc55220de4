-- succeed.lua: record the output, fenced by the token, and start the run's retention.
-- Prelude: _lib.lua (KEYS[1..18], ARGV[1..3] as described there), and _history.lua.
-- KEYS[1..4] run/ckpt/events/tb  KEYS[5] idem  KEYS[8] rg:leases  KEYS[9] rg:due
-- KEYS[11] rg:status:running  KEYS[13] rg:status:succeeded  KEYS[17..18] memo, mailbox (expiry)
-- ARGV: store/contracts.py SucceedArgs, in its field order:
-- ARGV[1] run_id  ARGV[2] now ms  ARGV[3] idempotency key guess
-- ARGV[4] token  ARGV[5] output JSON  ARGV[6] run retention s
-- ARGV[7] the finished checkpoint JSON, or '' (then the one saved before stays)  ARGV[8] its seq
-- ARGV[9] boundaries skipped since the attempt's last write  ARGV[10] their kinds (text)
-- ARGV[11] branch steps and ARGV[12] durable calls answered from records since then
-- ARGV[13] how many checkpoints the history keeps before the latest (REFLEXR_CHECKPOINT_HISTORY)
-- Events: run_succeeded, with the finished checkpoint's seq and size when there is one (no
-- run_progressed for it); on the cancel path, run_progressed for it and run_cancelled.
-- Returns store/contracts.py Succeeded: 1 recorded, 2 the run was asked to cancel (cancel.lua)
-- while its last step ran: the finished checkpoint is kept (a replay records its output without
-- running anything) and the run ends cancelled, as asked; 0 the token does not own the run;
-- or {'idem', key}.

want(COUNTERS, OPTIONAL_KEYS, LAST_ERROR, NOTES, 'ck_first', 'checkpoints', 'graph', 'version')
-- Already succeeded under this token: this call was retried after a lost reply.
local guard = write_guard(ARGV[4], 'succeeded')
if guard == 'done' then
  return 1
elseif guard == 'fenced' then
  return 0
elseif guard then
  return guard
end
-- The finished checkpoint and the outcome in one write: no moment where the graph finished but
-- neither is recorded, and one round trip fewer at the end of every run. When the run succeeds,
-- a finished checkpoint that is exactly its output in the envelope the run hash tells is kept as
-- its entry alone (_history.lua CKPT_FROM_OUTPUT): its payload would repeat the output. A cancel
-- records no output, so there the payload is written, for a replay to record it from.
if ARGV[7] ~= '' then
  local first, gone = ckpt_plan(field('ck_first'), field('ck_last'), ARGV[8], tonumber(ARGV[13]) or 0)
  local entry = ckpt_entry(NOW, #ARGV[7], attempt_number(), '')
  local derived = not cancel_requested()
    and ARGV[7] == ckpt_finished(field('graph'), field('version'), ARGV[8], ARGV[5])
  if derived then
    if num('ck_last') >= tonumber(ARGV[8]) then
      gone[#gone + 1] = ARGV[8] -- the run went back past this seq: the payload saved at it goes
    end
    drop(unpack(ckpt_drop(K_CKPT, gone)))
    entry = CKPT_FROM_OUTPUT .. entry
  else
    drop(unpack(ckpt_write(K_CKPT, ARGV[8], ARGV[7], gone)))
  end
  put(ckpt_field(ARGV[8]), entry)
  put('ck_first', first)
  put('ck_last', ARGV[8])
  incr('checkpoints', 1)
  put('next_node', '')
end
note(ARGV[9], ARGV[10], ARGV[11], ARGV[12])
if cancel_requested() then
  if ARGV[7] ~= '' then
    emit('run_progressed', 'seq', ARGV[8], 'next_node', '', 'size', #ARGV[7])
  end
  end_requested_cancel()
  return 2
end
-- The failures of earlier attempts stay in the event stream; the record shows the outcome.
put('output', ARGV[5])
drop(unpack(LAST_ERROR))
redis.call('ZREM', K_LEASES, RUN_ID)
set_status('succeeded')
-- The finished checkpoint is told by the success itself (its seq and size, as run_progressed
-- tells a save's): one XADD where there were two, and readers see the graph's end saved.
if ARGV[7] ~= '' then
  emit('run_succeeded', 'attempt', attempt_number(), 'seq', ARGV[8], 'size', #ARGV[7])
else
  emit('run_succeeded', 'attempt', attempt_number())
end
expire_all(ARGV[6])
return 1
