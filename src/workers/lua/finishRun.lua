--[[
  Records how a run's handler finished, in the job's hash, before BullMQ records it: if a failover loses
  BullMQ's record, the run comes back through stalled-job recovery and startRun.lua finds this one, so
  the handler does not run again (see src/workers/run-records.ts for the fields).
  KEYS[1] the job's hash  KEYS[2] its lock
  ARGV[1] the worker's lock token  ARGV[2] 'completed', 'failed' or 'moved'  ARGV[3] '1' when a failure is final
  ARGV[4] the return value as JSON text, or the error's message
  Returns 1 when recorded, 0 when the lock is not ours (it expired, and another worker may run the run):
  nothing written.
]]
if redis.call('GET', KEYS[2]) ~= ARGV[1] then
  return 0
end
local starts = tonumber(redis.call('HGET', KEYS[1], 'leasebeatStarts') or '0')
local stalled = tonumber(redis.call('HGET', KEYS[1], 'stc') or '0')
local attempts = tonumber(redis.call('HGET', KEYS[1], 'atm') or '0')
redis.call('HSET', KEYS[1], 'leasebeatFinish',
  cjson.encode({ s = starts, stc = stalled, atm = attempts, o = ARGV[2], f = ARGV[3] == '1', v = ARGV[4] }))
return 1
