-- prune.lua: drop index entries of a run whose record has expired (retention passed), and the
-- rest of its keys: they expired with the record, and deleting them frees their memory now
-- rather than when Redis's expiry cycle samples them.
-- Prelude: _lib.lua (KEYS[1..20], ARGV[1..3] as described there).
-- KEYS[1] run  KEYS[2..4] ckpt/events/tb  KEYS[6..9] rg:all/dead/leases/due  KEYS[10..16] status sets
-- KEYS[17..20] memo, mailbox, history, history data
-- ARGV[1] run_id  ARGV[2] now ms (unused)  ARGV[3] idempotency key guess (unused)
-- Returns 1 when pruned, 0 when the run still exists (checked here, so no race with create).

if exists() then
  return 0
end
unindex()
redis.call('DEL', unpack(PER_RUN))
return 1
