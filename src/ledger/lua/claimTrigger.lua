--[[
  Decides the fate of one manual trigger request under the caller's fencing token, atomically: a request
  runs at most once across any number of leaders, never after the admin gave up on it, never while its
  job is paused.
  Keeps at most ARGV[9] records of the job: a new record lets the oldest go (at most a few per call), but
  only records whose request is past its deadline. A request still within it may be read again from the
  stream by a new leader, and its record is what keeps it from running twice; one past it that comes back
  without a record is refused as expired.
  KEYS[1] fence  KEYS[2] retired generations  KEYS[3] manual records of the job  KEYS[4] paused jobs
  KEYS[5] the request's result list  KEYS[6] the records' order (request id by deadline)
  ARGV[1] generation  ARGV[2] transitions  ARGV[3] job name  ARGV[4] request id  ARGV[5] job id
  ARGV[6] deadline (ms, Redis TIME)  ARGV[7] refusal decided by the caller ('unknown-job', 'paused' for
          a job paused in its definition) or ''  ARGV[8] '1' when the caller added the run already (its
          claim was lost in a failover after the add): it is claimed whatever the deadline or a pause say,
          since the run is in BullMQ and will run
  ARGV[9] records kept per job
  Records: 'claimed|<gen>|<transitions>|<jobId>', 'enqueued|<jobId>', 'refused|<reason>'.
  Returns:
    { 1 }            claimed: add the job, then confirm it
    { 2 }            claimed by an earlier term and never confirmed: add it again (same job id), then confirm
    { 0, record }    already settled (enqueued or refused): nothing to do
    { 3, reason }    refused now (the outcome is pushed to the result list)
    { -1 }           fenced: a newer term exists
]]
local generation, transitions = ARGV[1], tonumber(ARGV[2])
local job, id, jobId, deadline, refusal = ARGV[3], ARGV[4], ARGV[5], tonumber(ARGV[6]), ARGV[7]

--- @include "includes/fence"
if fenced(KEYS[1], KEYS[2], generation, transitions, 1) then
  return { -1 }
end

local existing = redis.call('HGET', KEYS[3], id)
if existing then
  -- A claim the previous term did not confirm: its add may have landed, so finish it with the same id.
  if string.sub(existing, 1, 8) == 'claimed|' then
    redis.call('HSET', KEYS[3], id, 'claimed|' .. generation .. '|' .. transitions .. '|' .. jobId)
    return { 2 }
  end
  return { 0, existing }
end

local time = redis.call('TIME')
local now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
-- Records let go per call at most: one is enough at the cap, more bring a job over it back down.
local PRUNED_PER_CALL = 10

-- A new record of the request, in the job's order; the oldest past their deadline go beyond the cap.
local function record(value)
  redis.call('HSET', KEYS[3], id, value)
  redis.call('ZADD', KEYS[6], deadline, id)
  local excess = redis.call('ZCARD', KEYS[6]) - tonumber(ARGV[9])
  if excess > 0 then
    for _, old in ipairs(redis.call('ZRANGEBYSCORE', KEYS[6], '-inf', '(' .. now, 'LIMIT', 0, math.min(excess, PRUNED_PER_CALL))) do
      redis.call('HDEL', KEYS[3], old)
      redis.call('ZREM', KEYS[6], old)
    end
  end
end

local function refuse(reason)
  record('refused|' .. reason)
  redis.call('RPUSH', KEYS[5], cjson.encode({ refused = reason }))
  redis.call('EXPIRE', KEYS[5], 3600)
  return { 3, reason }
end

if ARGV[8] ~= '1' then
  if refusal ~= '' then return refuse(refusal) end
  if redis.call('HEXISTS', KEYS[4], job) == 1 then return refuse('paused') end
  -- The admin gave up at its deadline (and said so): the request must never run late.
  if now > deadline then return refuse('expired') end
end

record('claimed|' .. generation .. '|' .. transitions .. '|' .. jobId)
return { 1 }
