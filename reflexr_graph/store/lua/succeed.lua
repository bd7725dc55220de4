-- succeed.lua: record the output, fenced by the token, and start the run's retention.
-- Prelude: _lib.lua (its KEYS and RUN_ID, NOW, IDEM_GUESS as described there), and _history.lua.
-- K_RUN/K_CKPT/K_EVENTS/K_TB  K_IDEM idem  K_LEASES rg:leases  K_DUE rg:due
-- the running and succeeded sets  K_MEMO, K_MAILBOX (expiry)
-- KEYS and ARGV: store/registry.py's entry 'succeed' (ARGV: contracts.SucceedArgs).
-- output: JSON  retention_s: run retention s
-- checkpoint: the finished checkpoint JSON, or '' (then the one saved before stays)  seq: its seq
-- skipped: boundaries skipped since the attempt's last write  skip_kinds: their kinds (text)
-- reused_steps: branch steps and reused_calls durable calls answered from records since then
-- history: how many checkpoints the history keeps before the latest (REFLEXR_CHECKPOINT_HISTORY)
-- Events: run_succeeded, with the finished checkpoint's seq and size when there is one (no
-- run_progressed for it); on the cancel path, run_progressed for it and run_cancelled.
-- Returns store/contracts.py Succeeded: 1 recorded, 2 the run was asked to cancel (cancel.lua)
-- while its last step ran: the finished checkpoint is kept (a replay records its output without
-- running anything) and the run ends cancelled, as asked; 0 the token does not own the run;
-- or {'idem', key}.

want(COUNTERS, OPTIONAL_KEYS, LAST_ERROR, NOTES, 'ck_first', 'checkpoints', 'graph', 'version')
-- Already succeeded under this token: this call was retried after a lost reply.
local guard = write_guard(token, 'succeeded')
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
if checkpoint ~= '' then
  local first, gone = ckpt_plan(field('ck_first'), field('ck_last'), seq, tonumber(history) or 0)
  local entry = ckpt_entry(NOW, #checkpoint, attempt_number(), '')
  local derived = not cancel_requested()
    and checkpoint == ckpt_finished(field('graph'), field('version'), seq, output)
  if derived then
    if num('ck_last') >= tonumber(seq) then
      gone[#gone + 1] = seq -- the run went back past this seq: the payload saved at it goes
    end
    drop(unpack(ckpt_drop(K_CKPT, gone)))
    entry = CKPT_FROM_OUTPUT .. entry
  else
    drop(unpack(ckpt_write(K_CKPT, seq, checkpoint, gone)))
  end
  put(ckpt_field(seq), entry)
  put('ck_first', first)
  put('ck_last', seq)
  incr('checkpoints', 1)
  put('next_node', '')
end
note(skipped, skip_kinds, reused_steps, reused_calls)
if cancel_requested() then
  if checkpoint ~= '' then
    emit('run_progressed', 'seq', seq, 'next_node', '', 'size', #checkpoint)
  end
  end_requested_cancel()
  return 2
end
-- The failures of earlier attempts stay in the event stream; the record shows the outcome.
put('output', output)
drop(unpack(LAST_ERROR))
redis.call('ZREM', K_LEASES, RUN_ID)
set_status('succeeded')
-- The finished checkpoint is told by the success itself (its seq and size, as run_progressed
-- tells a save's): one XADD where there were two, and readers see the graph's end saved.
if checkpoint ~= '' then
  emit('run_succeeded', 'attempt', attempt_number(), 'seq', seq, 'size', #checkpoint)
else
  emit('run_succeeded', 'attempt', attempt_number())
end
expire_all(retention_s)
return 1
