--[[
  Takes a staged run out of BullMQ's reach, if it never started: the point where a take-back wins or
  loses its race with BullMQ's promotion of the delayed job. A run that started once and now waits in
  the delayed set for a retry (it has `processedOn`) is not taken: it ran. The job's hash is left, in no
  list, to expire: while it exists, an add of the same job id still on the wire from an earlier term is
  a no-op, as BullMQ's deduplication would have made it. All keys are in the queue's slot.
  KEYS[1] the queue's delayed set  KEYS[2] the job's hash
  ARGV[1] job id  ARGV[2] how long the hash is kept (ms)
  Returns 1 when the run was pulled (it will never run), 0 when it was not in the delayed set unstarted.
]]
if redis.call('HEXISTS', KEYS[2], 'processedOn') == 1 then
  return 0
end
if redis.call('ZREM', KEYS[1], ARGV[1]) == 0 then
  return 0
end
redis.call('PEXPIRE', KEYS[2], ARGV[2])
return 1
