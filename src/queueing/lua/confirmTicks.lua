--[[
  Records that the jobs of claimed ticks are in BullMQ (lastJobId was set when each tick was claimed).
  Unfenced: it only records what was already added under a fenced claim.
  KEYS, for the i-th tick (i from 0): KEYS[1+3i] ledger  KEYS[2+3i] pending  KEYS[3+3i] job state
  ARGV[1] now (ms); for the i-th tick: ARGV[2+2i] tick (ms)  ARGV[3+2i] job id
]]
local now = ARGV[1]
for i = 0, #KEYS / 3 - 1 do
  local ledger, pending, state = KEYS[1 + 3 * i], KEYS[2 + 3 * i], KEYS[3 + 3 * i]
  local tick, jobId = ARGV[2 + 2 * i], ARGV[3 + 2 * i]
  redis.call('HSET', ledger, tick, 'enqueued|' .. jobId)
  redis.call('ZREM', pending, tick)
  redis.call('HSET', state, 'lastEnqueuedAt', now)
  redis.call('HINCRBY', state, 'enqueued', 1)
end
return #KEYS / 3
