--[[
  The current term's proof of life: its producer stamps the fence with Redis' time while it leads (every
  RetryPeriod, and only while its self-fence is open), so a worker can tell a live leader from a dead one
  on one clock (stagedRunMayStart.lua). Fenced: a stale term stamps nothing, and its refusal is counted in
  the fence's tally like any other stale write.
  KEYS[1] fence  KEYS[2] retired generations
  ARGV[1] generation  ARGV[2] transitions
  Returns -1 when fenced (nothing written), else 1.
]]
--- @include "includes/fence"
if fenced(KEYS[1], KEYS[2], ARGV[1], ARGV[2], 1) then
  return -1
end
local time = redis.call('TIME')
redis.call('HSET', KEYS[1], 'aliveAt', tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000))
return 1
