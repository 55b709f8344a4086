--[[
  Records that the run of a claimed trigger request is in BullMQ and hands the outcome to the admin, under
  the fence (a late confirm of a term that ended must not write over what the next one recorded). Only a
  request recorded `claimed|…|<jobId>` moves to `enqueued|<jobId>`.
  KEYS[1] fence  KEYS[2] retired generations  KEYS[3] trigger records of the job  KEYS[4] the request's
  result list
  ARGV[1] generation  ARGV[2] transitions  ARGV[3] request id  ARGV[4] job id  ARGV[5] outcome (JSON)
  Returns -1 when fenced (nothing written), 1 when recorded now, 0 when already recorded enqueued for
  this job id, -2 when the request is not claimed for it (nothing written; claim it again).
]]
--- @include "includes/fence"
if fenced(KEYS[1], KEYS[2], ARGV[1], ARGV[2], 1) then
  return -1
end
local id, jobId = ARGV[3], ARGV[4]
local existing = redis.call('HGET', KEYS[3], id) or ''
if existing == 'enqueued|' .. jobId then
  return 0
end
local claimedFor = '|' .. jobId
if string.sub(existing, 1, 8) ~= 'claimed|' or string.sub(existing, -#claimedFor) ~= claimedFor then
  return -2
end
redis.call('HSET', KEYS[3], id, 'enqueued|' .. jobId)
redis.call('RPUSH', KEYS[4], ARGV[5])
redis.call('EXPIRE', KEYS[4], 3600)
return 1
