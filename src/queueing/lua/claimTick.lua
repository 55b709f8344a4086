--[[
  Checks the caller's fencing token against the fence and claims one (job, nominal tick), atomically.
  KEYS[1] fence  KEYS[2] retired generations  KEYS[3] ledger  KEYS[4] ledger index  KEYS[5] pending
  KEYS[6] job state  KEYS[7] paused jobs
  ARGV[1] generation  ARGV[2] transitions  ARGV[3] job name  ARGV[4] tick (ms)  ARGV[5] job id
  ARGV[6] 'enqueue' or 'skip'  ARGV[7] skip reason
  Returns:
    { 1 }            claimed: add the job, then confirm it
    { 2 }            claimed earlier by a term that never confirmed: add again (the job id is the same)
    { 0, state }     already settled (enqueued or skipped): nothing to do
    { 3, reason }    recorded as skipped (reason may be 'paused' when the job is paused at run time)
    { -1 }           fenced: a newer term exists; the caller must stop enqueuing
]]
local generation, transitions = ARGV[1], tonumber(ARGV[2])
local job, tick, jobId, mode, reason = ARGV[3], ARGV[4], ARGV[5], ARGV[6], ARGV[7]

local fence = redis.call('HMGET', KEYS[1], 'generation', 'transitions')
if fence[1] ~= generation or tonumber(fence[2]) ~= transitions
    or redis.call('SISMEMBER', KEYS[2], generation) == 1 then
  redis.call('HINCRBY', KEYS[1], 'fenced', 1)
  redis.call('HINCRBY', KEYS[6], 'fenced', 1)
  return { -1 }
end

local function advanceLastTick()
  local last = tonumber(redis.call('HGET', KEYS[6], 'lastScheduledTick') or '-1')
  if tonumber(tick) > last then
    redis.call('HSET', KEYS[6], 'lastScheduledTick', tick)
  end
end

local existing = redis.call('HGET', KEYS[3], tick)
if existing then
  if string.sub(existing, 1, 8) == 'claimed|' and mode == 'enqueue' then
    redis.call('HSET', KEYS[3], tick, 'claimed|' .. generation .. '|' .. transitions .. '|' .. jobId)
    return { 2 }
  end
  return { 0, existing }
end

if mode == 'enqueue' and redis.call('HEXISTS', KEYS[7], job) == 1 then
  mode, reason = 'skip', 'paused'
end

redis.call('ZADD', KEYS[4], tick, tick)
advanceLastTick()
if mode == 'skip' then
  redis.call('HSET', KEYS[3], tick, 'skipped|' .. reason)
  redis.call('HINCRBY', KEYS[6], 'skipped:' .. reason, 1)
  return { 3, reason }
end
redis.call('HSET', KEYS[3], tick, 'claimed|' .. generation .. '|' .. transitions .. '|' .. jobId)
redis.call('ZADD', KEYS[5], tick, tick)
return { 1 }
