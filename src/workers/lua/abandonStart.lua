--[[
  Takes back the count of a start whose take the replicas did not confirm (startRuns.lua): the handler
  did not run, so the next take must not count it as a start that never finished.
  KEYS[1] the job's hash  KEYS[2] its lock
  ARGV[1] the worker's lock token  ARGV[2] leasebeatRunner as that start wrote it ('<ms>|<identity>')
  Returns 1 when taken back, 0 when the lock is not ours or another start came since.
]]
if redis.call('GET', KEYS[2]) ~= ARGV[1] or redis.call('HGET', KEYS[1], 'leasebeatRunner') ~= ARGV[2] then
  return 0
end
redis.call('HINCRBY', KEYS[1], 'leasebeatStarts', -1)
return 1
