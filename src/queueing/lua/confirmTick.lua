--[[
  Records that the job of a claimed tick is in BullMQ. (lastJobId was set when the tick was claimed.)
  KEYS[1] ledger  KEYS[2] pending  KEYS[3] job state
  ARGV[1] tick (ms)  ARGV[2] job id  ARGV[3] now (ms)
]]
redis.call('HSET', KEYS[1], ARGV[1], 'enqueued|' .. ARGV[2])
redis.call('ZREM', KEYS[2], ARGV[1])
redis.call('HSET', KEYS[3], 'lastEnqueuedAt', ARGV[3])
redis.call('HINCRBY', KEYS[3], 'enqueued', 1)
return 1
