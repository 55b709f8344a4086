--[[
  What a new leader reads of each job it takes over, for many jobs in one round trip; it also records,
  once per job, when leaders started owing the job its ticks (`scheduledSince`, the first takeover that
  saw it). Unfenced: it decides no tick.
  KEYS[1] paused jobs; for the i-th job (i from 0): KEYS[2+3i] ledger  KEYS[3+3i] pending
          KEYS[4+3i] job state
  ARGV[1] now (ms); ARGV[2+i] the i-th job's name
  Returns, per job, { scheduledSince, paused (0/1), job state (HGETALL, flat), pending ticks with their
  ledger states (flat: tick, state, ...) }.
]]
local now = ARGV[1]
local results = {}
for i = 0, #ARGV - 2 do
  local ledger, pending, state = KEYS[2 + 3 * i], KEYS[3 + 3 * i], KEYS[4 + 3 * i]
  redis.call('HSETNX', state, 'scheduledSince', now)
  local ticks = {}
  for _, tick in ipairs(redis.call('ZRANGE', pending, 0, -1)) do
    ticks[#ticks + 1] = tick
    ticks[#ticks + 1] = redis.call('HGET', ledger, tick) or ''
  end
  results[#results + 1] = {
    redis.call('HGET', state, 'scheduledSince'),
    redis.call('HEXISTS', KEYS[1], ARGV[2 + i]),
    redis.call('HGETALL', state),
    ticks,
  }
end
return results
