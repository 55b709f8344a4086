--[[
  Takes a staged run out of BullMQ's reach, if its handler never started: the point where a take-back
  wins or loses its race with a worker. A run that ran once and now waits for a retry (an attempt
  counted, or a start leasebeat counted) is not taken: it ran. A run a worker took and handed back before
  starting it (stagedRunMayStart.lua) is taken. It may wait in the delayed set, or already in the wait
  list or the prioritized set once BullMQ promoted it. The job's hash is left, in no list, to expire:
  while it exists, an add of the same job id still on the wire from an earlier term is a no-op, as
  BullMQ's deduplication would have made it. All keys are in the queue's slot.
  A run in the active list with no start counted is held by a worker that has not started it: one that
  was told to hand it back (a due staged run no leader has reviewed yet comes back each second, for a
  moment, until one has), or one about to start it. The race is not decided yet, and the run cannot be
  pulled from under the worker's lock: the caller asks again once the worker has let go of it (handed
  back: it is pulled) or started it (it runs).
  A run whose hash does not exist is in no list either: its add never landed (its leader died before it,
  or a failover lost it), or this take-back pulled it before and the hash has since expired. It never ran
  and never will: it counts as pulled, and a placeholder hash takes its place for the same time, so that
  an add of its job id still on the wire lands as a duplicate.
  KEYS[1] the queue's delayed set  KEYS[2] the job's hash  KEYS[3] the queue's wait list
  KEYS[4] the queue's prioritized set  KEYS[5] the queue's active list
  ARGV[1] job id  ARGV[2] how long the hash is kept (ms)
  Returns 1 when the run was pulled (it will never run), 2 when a worker holds it unstarted (ask again),
  0 when it was not waiting unstarted.
]]
if redis.call('EXISTS', KEYS[2]) == 0 then
  redis.call('HSET', KEYS[2], 'leasebeatTakenBack', '1')
  redis.call('PEXPIRE', KEYS[2], ARGV[2])
  return 1
end
if tonumber(redis.call('HGET', KEYS[2], 'atm') or '0') > 0 or tonumber(redis.call('HGET', KEYS[2], 'leasebeatStarts') or '0') > 0 then
  return 0
end
if redis.call('ZREM', KEYS[1], ARGV[1]) == 0 and redis.call('LREM', KEYS[3], 1, ARGV[1]) == 0 and redis.call('ZREM', KEYS[4], ARGV[1]) == 0 then
  if redis.call('LPOS', KEYS[5], ARGV[1]) then
    return 2
  end
  return 0
end
redis.call('PEXPIRE', KEYS[2], ARGV[2])
return 1
