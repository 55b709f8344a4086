--[[
  Checks the caller's fencing token against the fence and decides the fate of one (job, nominal tick),
  atomically. A job's records are written in nominal tick order with no holes: a new record is refused
  unless the job's previous tick (as the caller scheduled it) is already recorded, so `lastScheduledTick`
  is a contiguous watermark a new leader can plan its catch-up from.
  KEYS[1] fence  KEYS[2] retired generations  KEYS[3] ledger  KEYS[4] ledger index  KEYS[5] pending
  KEYS[6] job state  KEYS[7] paused jobs
  ARGV[1] generation  ARGV[2] transitions  ARGV[3] job name  ARGV[4] tick (ms)  ARGV[5] job id
  ARGV[6] mode: 'enqueue' (claim to add now; also releases a buffered claim), 'buffer' (claim to add once
          the previous run finished) or 'skip'
  ARGV[7] skip reason  ARGV[8] the job's previous nominal tick (ms), or '' when it has none
  Ledger states: 'claimed|<gen>|<transitions>|<jobId>' and 'buffered|<gen>|<transitions>|<jobId>' (both
  in the pending set until added), 'enqueued|<jobId>', 'skipped|<reason>'.
  Returns:
    { 1 }            claimed: add the job, then confirm it (lastJobId now names it: it counts as a run)
    { 2 }            claimed earlier and never confirmed, or a buffered claim released now: add it (same job id)
    { 4 }            buffered: claimed, to be added once the previous run has finished
    { 0, state }     already settled (enqueued, skipped, or buffered when asked to buffer): nothing to do
    { 3, reason }    recorded as skipped (reason may be 'paused' when the job is paused at run time)
    { -1 }           fenced: a newer term exists; the caller must stop enqueuing
    { -2, last }     refused: the previous tick is not recorded (the watermark `last` is older); a caller bug
]]
local generation, transitions = ARGV[1], tonumber(ARGV[2])
local job, tick, jobId, mode, reason, previous = ARGV[3], ARGV[4], ARGV[5], ARGV[6], ARGV[7], ARGV[8]

local fence = redis.call('HMGET', KEYS[1], 'generation', 'transitions')
if fence[1] ~= generation or tonumber(fence[2]) ~= transitions
    or redis.call('SISMEMBER', KEYS[2], generation) == 1 then
  redis.call('HINCRBY', KEYS[1], 'fenced', 1)
  redis.call('HINCRBY', KEYS[6], 'fenced', 1)
  return { -1 }
end

local paused = redis.call('HEXISTS', KEYS[7], job) == 1
local claimedState = generation .. '|' .. transitions .. '|' .. jobId

local function recordSkip(why)
  redis.call('HSET', KEYS[3], tick, 'skipped|' .. why)
  redis.call('HINCRBY', KEYS[6], 'skipped:' .. why, 1)
  return { 3, why }
end

-- The newest run (added or about to be): the next overlap decision waits for it.
local function becomeLastRun()
  redis.call('HSET', KEYS[6], 'lastJobId', jobId, 'lastJobTick', tick)
end

local existing = redis.call('HGET', KEYS[3], tick)
if existing then
  if mode == 'enqueue' and string.sub(existing, 1, 8) == 'claimed|' then
    redis.call('HSET', KEYS[3], tick, 'claimed|' .. claimedState)
    return { 2 }
  end
  if mode == 'enqueue' and string.sub(existing, 1, 9) == 'buffered|' then
    if paused then
      redis.call('ZREM', KEYS[5], tick)
      return recordSkip('paused')
    end
    redis.call('HSET', KEYS[3], tick, 'claimed|' .. claimedState)
    becomeLastRun()
    return { 2 }
  end
  return { 0, existing }
end

local last = redis.call('HGET', KEYS[6], 'lastScheduledTick')
if previous ~= '' and last and tonumber(last) < tonumber(previous) then
  return { -2, last }
end

if mode ~= 'skip' and paused then
  mode, reason = 'skip', 'paused'
end

redis.call('ZADD', KEYS[4], tick, tick)
if not last or tonumber(tick) > tonumber(last) then
  redis.call('HSET', KEYS[6], 'lastScheduledTick', tick)
end
if mode == 'skip' then
  return recordSkip(reason)
end
redis.call('ZADD', KEYS[5], tick, tick)
if mode == 'buffer' then
  redis.call('HSET', KEYS[3], tick, 'buffered|' .. claimedState)
  return { 4 }
end
redis.call('HSET', KEYS[3], tick, 'claimed|' .. claimedState)
becomeLastRun()
return { 1 }
