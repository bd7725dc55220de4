-- prune.lua: drop index entries of a run whose record has expired (retention passed), and the
-- rest of its keys: they expired with the record, and deleting them frees their memory now
-- rather than when Redis's expiry cycle samples them.
-- Prelude: _lib.lua (KEYS[1..18], ARGV[1..3] as described there).
-- KEYS[1] run  KEYS[2..4] ckpt/events/tb  KEYS[6] rg:all  KEYS[7] rg:dead  KEYS[10..16] status sets
-- KEYS[17..18] memo, mailbox
-- ARGV: store/contracts.py PruneArgs, in its field order:
-- ARGV[1] run_id  ARGV[2] now ms (unused)  ARGV[3] idempotency key guess (unused)
-- ARGV[4] the terminal status whose set the caller found the run in: only that set, rg:all and
--   (for a dead run) rg:dead hold it, as a finished run has no lease or due entry; '' when not
--   known (a listing found the record gone): every index
-- Returns 1 when pruned, 0 when the run still exists (checked here, so no race with create).

if exists() then
  return 0
end
unindex(ARGV[4])
redis.call('DEL', unpack(PER_RUN))
return 1
