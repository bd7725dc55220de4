-- succeed.lua: record the output, fenced by the token, and start the run's retention.
-- Prelude: _lib.lua (KEYS[1..20], ARGV[1..3] as described there).
-- KEYS[1..4] run/ckpt/events/tb  KEYS[5] idem  KEYS[8] rg:leases  KEYS[9] rg:due
-- KEYS[11] rg:status:running  KEYS[13] rg:status:succeeded  KEYS[17..18] memo, mailbox (expiry)
-- KEYS[19] history  KEYS[20] history data: the checkpoint the finished one replaces moves there
-- ARGV[1] run_id  ARGV[2] now ms  ARGV[3] idempotency key guess
-- ARGV[4] token  ARGV[5] output JSON  ARGV[6] run retention s
-- ARGV[7] the finished checkpoint JSON, or '' (then the one saved before stays)  ARGV[8] its seq
-- ARGV[9] boundaries skipped since the attempt's last write  ARGV[10] their kinds (text)
-- ARGV[11] branch steps and ARGV[12] durable calls answered from records since then
-- ARGV[13] how many checkpoints the history keeps (REFLEXR_CHECKPOINT_HISTORY; 0: none)
-- Returns 1 when recorded, 2 when the run was asked to cancel (cancel.lua) while its last step ran:
-- the finished checkpoint is kept (a replay records its output without running anything) and the
-- run ends cancelled, as asked; 0 when the token does not own the run, or {'idem', key}.

local token = ARGV[4]
-- Already succeeded under this token: this call was retried after a lost reply.
if token ~= '' and field('status') == 'succeeded' and field('token') == token then
  return 1
end
if not owned_by(token) then
  return 0
end
local actual = idem_mismatch()
if actual then
  return {'idem', actual}
end
-- The finished checkpoint and the outcome in one write: no moment where the graph finished but
-- neither is recorded, and one round trip fewer at the end of every run.
if ARGV[7] ~= '' then
  history_push(K_CKPT, K_HIST, K_HIST_DATA, ARGV[8], tonumber(ARGV[13]) or 0)
  redis.call('HSET', K_CKPT, 'data', ARGV[7], 'seq', ARGV[8], 'saved_at', NOW, 'size', #ARGV[7],
    'next_node', '', 'attempt', attempt_number())
  redis.call('HINCRBY', K_RUN, 'checkpoints', 1)
  redis.call('HSET', K_RUN, 'next_node', '')
  emit('run_progressed', 'seq', ARGV[8], 'next_node', '', 'size', #ARGV[7])
end
note(ARGV[9], ARGV[10], ARGV[11], ARGV[12])
if cancel_requested() then
  end_requested_cancel()
  return 2
end
-- The failures of earlier attempts stay in the event stream; the record shows the outcome.
redis.call('HSET', K_RUN, 'output', ARGV[5])
redis.call('HDEL', K_RUN, 'reason', 'error_type', 'error')
redis.call('ZREM', K_LEASES, RUN_ID)
redis.call('ZREM', K_DUE, RUN_ID)
set_status('succeeded')
emit('run_succeeded', 'attempt', attempt_number())
expire_all(ARGV[6])
return 1
