--[[
  The current term's proof of life: its producer stamps the fence with Redis' time while it leads (every
  RetryPeriod, and only while its self-fence is open), so a worker can tell a live leader from a dead one
  on one clock (stagedRunMayStart.lua). Fenced: a stale term stamps nothing.
  KEYS[1] fence  KEYS[2] retired generations
  ARGV[1] generation  ARGV[2] transitions
  Returns -1 when fenced (nothing written), else 1.
]]
local fence = redis.call('HMGET', KEYS[1], 'generation', 'transitions')
if fence[1] ~= ARGV[1] or tonumber(fence[2]) ~= tonumber(ARGV[2])
    or redis.call('SISMEMBER', KEYS[2], ARGV[1]) == 1 then
  return -1
end
local time = redis.call('TIME')
redis.call('HSET', KEYS[1], 'aliveAt', tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000))
return 1
