--[[
  Records how runs' handlers finished, each in its job's hash, before BullMQ records it: if a failover
  loses BullMQ's record, the run comes back through stalled-job recovery and startRuns.lua finds this
  one, so the handler does not run again (see src/workers/run-records.ts for the fields). The finishes a
  worker records in one turn share this script.
  KEYS[2i-1] run i's job hash  KEYS[2i] its lock
  ARGV[4i-3] the worker's lock token for run i  ARGV[4i-2] 'completed', 'failed' or 'moved'
  ARGV[4i-1] '1' when a failure is final  ARGV[4i] the return value as JSON text, or the error's message
  Returns one code per run, in order: 1 when recorded, 0 when the lock is not ours (it expired, and
  another worker may run the run): nothing written for it.
]]
local function finishRun(jobKey, lockKey, token, outcome, final, value)
  if redis.call('GET', lockKey) ~= token then
    return 0
  end
  local counts = redis.call('HMGET', jobKey, 'leasebeatStarts', 'stc', 'atm')
  redis.call('HSET', jobKey, 'leasebeatFinish', cjson.encode({
    s = tonumber(counts[1] or '0'), stc = tonumber(counts[2] or '0'), atm = tonumber(counts[3] or '0'),
    o = outcome, f = final == '1', v = value }))
  return 1
end

local codes = {}
for i = 1, #KEYS / 2 do
  codes[i] = finishRun(KEYS[2 * i - 1], KEYS[2 * i], ARGV[4 * i - 3], ARGV[4 * i - 2], ARGV[4 * i - 1], ARGV[4 * i])
end
return codes
