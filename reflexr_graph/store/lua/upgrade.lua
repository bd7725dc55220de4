-- upgrade.lua: move a run held for a graph version (hold_version.lua) to another version, from its
-- first step: the seed's rule for a changed graph, applied only when an operator asks (G9).
-- Prelude: _lib.lua (KEYS[1..18], ARGV[1..3] as described there), then _history.lua.
-- KEYS[1..2] run/ckpt  KEYS[3] events  KEYS[9] rg:due  KEYS[10..16] status sets  KEYS[17] memo
-- KEYS[19] rg:versions:<graph>:held:<from>  the runs held for the version it leaves
-- ARGV: store/contracts.py UpgradeArgs, in its field order:
-- ARGV[1] run_id  ARGV[2] now ms  ARGV[3] idempotency key guess
-- ARGV[4] the version it leaves  ARGV[5] the version it starts on
-- Returns 'upgraded' | 'skip' (not held for that version: claimed, finished, cancelled) | 'gone'

want(OPTIONAL_KEYS, 'version', 'waiting_for', 'held_since', 'ck_first')
local from, to = ARGV[4], ARGV[5]
redis.call('SREM', KEYS[19], RUN_ID)
if not exists() then
  return 'gone'
end
local status = field('status')
local waits = status == 'waiting' and field('waiting_for') == 'version:' .. from
local in_grace = (status == 'queued' or status == 'retrying') and field('held_since') ~= ''
if field('version') ~= from or not (waits or in_grace) then
  return 'skip'
end
-- As a replay from the start: the checkpoints and the work recorded since go, numbered from 1 again.
redis.call('DEL', K_CKPT, K_MEMO)
if field('ck_first') ~= '' then
  for s = num('ck_first'), num('ck_last') do
    drop(ckpt_field(s))
  end
end
drop('ck_first', 'ck_last', 'waiting_for', 'wake_at', 'held_since', 'retry_at')
put('memo', '0')
put('checkpoints', 0)
put('next_node', '')
put('version', to)
set_status('queued')
redis.call('ZADD', K_DUE, NOW, RUN_ID)
emit('run_upgraded', 'from_version', from, 'version', to)
return 'upgraded'
