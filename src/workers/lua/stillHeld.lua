--[[
  Whether the server still holds a run under our lock after BullMQ recorded its finish: BullMQ deletes
  the lock when it moves the run out of `active`, so a lock that is still ours means the server never got
  that finish (a failover lost it) and the run is still ours to finish (see src/workers/run-records.ts).
  KEYS[1] the job's lock  ARGV[1] the worker's lock token
  Returns 1 when the lock is still ours (the finish was lost), 0 otherwise (recorded, or expired: then
  stalled-job recovery brings the run back and its finish record answers for it).
]]
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return 1
end
return 0
