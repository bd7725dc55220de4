-- child_started.lua: a parent's record of the child run its step just made, when the two are in
-- different shards (a cluster): create_run.lua made the child first, with an idempotency key the
-- parent's run id and the step's record name, so a retry after a crash between the two finds the
-- same child and writes this. On one Redis, create_run.lua writes the same in its round trip.
-- Standalone; prelude: _parent.lua.
-- KEYS and ARGV: store/registry.py's entry 'child_started' (ARGV: contracts.ChildStartedArgs).
-- K_PARENT: the parent's run hash  K_PARENT_MEMO: its memo  K_PARENT_MAILBOX: its mailbox
-- token: the parent attempt's token  field: the memo field (its record: the child's id as JSON)
-- child: the child's run id
-- Returns 1 written, 0 the token no longer owns the parent (nothing written), 2 written, but the
--   parent was asked to cancel meanwhile: the caller cancels the child, and the attempt ends

local held = redis.call('HMGET', K_PARENT, 'token', 'status', 'cancel')
if held[1] ~= token or held[2] ~= 'running' then
  return 0
end
record_child(K_PARENT, K_PARENT_MEMO, K_PARENT_MAILBOX, field, child)
-- Recorded all the same, so the parent lists the child it made.
if held[3] then
  return 2
end
return 1
