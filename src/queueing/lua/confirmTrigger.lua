--[[
  Records that the job of a claimed trigger request is in BullMQ and hands the outcome to the admin.
  KEYS[1] manual records of the job  KEYS[2] the request's result list
  ARGV[1] request id  ARGV[2] job id  ARGV[3] outcome (JSON)
]]
redis.call('HSET', KEYS[1], ARGV[1], 'enqueued|' .. ARGV[2])
redis.call('RPUSH', KEYS[2], ARGV[3])
redis.call('EXPIRE', KEYS[2], 3600)
return 1
