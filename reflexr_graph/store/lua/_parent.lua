-- _parent.lua: a parent run's record of a child run its step made, which scripts.py prepends to
-- create_run.lua (one Redis: written in the child's own round trip) and child_started.lua (a
-- cluster, where the parent's keys are in another slot: written next). Not run on its own, and
-- it reads no KEYS[i] or ARGV[i] itself: the caller passes the parent's keys and the record's
-- names from its own KEYS and ARGV.

-- The step's memo record (a retried step finds the child), and the child's place in the mailbox
-- ('' until it ends), which lists the parent's children; a child seen again is not counted twice.
local function record_child(parent_run, parent_memo, parent_mailbox, memo_field, child)
  redis.call('HSET', parent_memo, memo_field, '"' .. child .. '"')
  local added = redis.call('HSETNX', parent_mailbox, 'child:' .. child, '')
  redis.call('HSET', parent_run, 'memo', '1', 'mbox', '1')
  if added == 1 then
    redis.call('HINCRBY', parent_run, 'children', 1)
  end
end
