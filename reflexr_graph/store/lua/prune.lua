-- prune.lua: drop index entries of a run whose record has expired (retention passed), and the
-- rest of its keys: they expired with the record, and deleting them frees their memory now
-- rather than when Redis's expiry cycle samples them.
-- Prelude: _lib.lua (its KEYS and RUN_ID, NOW, IDEM_GUESS as described there).
-- K_RUN run  K_CKPT/K_EVENTS/K_TB  K_ALL rg:all  K_DEAD rg:dead  STATUS_SETS
-- K_MEMO, K_MAILBOX
-- KEYS and ARGV: store/registry.py's entry 'prune' (ARGV: contracts.PruneArgs).
-- status: the terminal status whose set the caller found the run in: only that set, rg:all and
--   (for a dead run) rg:dead hold it, as a finished run has no lease or due entry; '' when not
--   known (a listing found the record gone): every index
-- Returns 1 when pruned, 0 when the run still exists (checked here, so no race with create).

if exists() then
  return 0
end
unindex(status)
redis.call('DEL', unpack(PER_RUN))
return 1
