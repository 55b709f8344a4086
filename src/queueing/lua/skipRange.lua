--[[
  Records a range of ticks that will never run (missed while no leader enqueued), under the fence.
  KEYS[1] fence  KEYS[2] retired generations  KEYS[3] skips  KEYS[4] job state
  ARGV[1] generation  ARGV[2] transitions  ARGV[3] first tick  ARGV[4] last tick  ARGV[5] count
  ARGV[6] reason  ARGV[7] range as JSON
  Returns 1, or -1 when fenced.
]]
local fence = redis.call('HMGET', KEYS[1], 'generation', 'transitions')
if fence[1] ~= ARGV[1] or tonumber(fence[2]) ~= tonumber(ARGV[2])
    or redis.call('SISMEMBER', KEYS[2], ARGV[1]) == 1 then
  redis.call('HINCRBY', KEYS[1], 'fenced', 1)
  redis.call('HINCRBY', KEYS[4], 'fenced', 1)
  return -1
end
redis.call('ZADD', KEYS[3], ARGV[3], ARGV[7])
redis.call('HINCRBY', KEYS[4], 'skipped:' .. ARGV[6], ARGV[5])
local last = tonumber(redis.call('HGET', KEYS[4], 'lastScheduledTick') or '-1')
if tonumber(ARGV[4]) > last then
  redis.call('HSET', KEYS[4], 'lastScheduledTick', ARGV[4])
end
return 1
