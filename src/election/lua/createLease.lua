--[[
  Creates a lease record if none exists.
  KEYS[1] lease hash
  ARGV[1] holderIdentity  ARGV[2] leaseDurationSeconds  ARGV[3] acquireTime (ms)  ARGV[4] renewTime (ms)
  ARGV[5] leaderTransitions  ARGV[6] generation id, fresh for every creation
  Returns 1 (the new version), or -1 when the record already exists.
]]
if redis.call('EXISTS', KEYS[1]) == 1 then
  return -1
end
redis.call('HSET', KEYS[1],
  'holderIdentity', ARGV[1], 'leaseDurationSeconds', ARGV[2], 'acquireTime', ARGV[3],
  'renewTime', ARGV[4], 'leaderTransitions', ARGV[5], 'generation', ARGV[6], 'version', 1)
return 1
