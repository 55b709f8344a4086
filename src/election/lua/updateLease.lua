--[[
  Replaces a lease record if it is still at the version (and generation) the caller observed.
  KEYS[1] lease hash
  ARGV[1] expected version  ARGV[2] expected generation
  ARGV[3] holderIdentity  ARGV[4] leaseDurationSeconds  ARGV[5] acquireTime (ms)  ARGV[6] renewTime (ms)
  ARGV[7] leaderTransitions
  Returns the new version, -1 on a version or generation mismatch, -2 when the record does not exist.
]]
local current = redis.call('HMGET', KEYS[1], 'version', 'generation')
if not current[1] then
  return -2
end
if current[1] ~= ARGV[1] or current[2] ~= ARGV[2] then
  return -1
end
local nextVersion = tonumber(current[1]) + 1
redis.call('HSET', KEYS[1],
  'holderIdentity', ARGV[3], 'leaseDurationSeconds', ARGV[4], 'acquireTime', ARGV[5],
  'renewTime', ARGV[6], 'leaderTransitions', ARGV[7], 'version', nextVersion)
return nextVersion
