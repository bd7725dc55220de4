-- prune.lua: drop index entries of a run whose record has expired (retention passed).
-- Prelude: _lib.lua (KEYS[1..20], ARGV[1..3] as described there).
-- KEYS[1] run  KEYS[6..9] rg:all/dead/leases/due  KEYS[10..16] status sets
-- ARGV[1] run_id  ARGV[2] now ms (unused)  ARGV[3] idempotency key guess (unused)
-- Returns 1 when pruned, 0 when the run still exists (checked here, so no race with create).

if exists() then
  return 0
end
unindex()
return 1
