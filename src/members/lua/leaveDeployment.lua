--[[
  Removes this deployment from a BullMQ prefix's registry (claimDeployment.lua) when its last writer
  leaves: another instance of the same deployment writes it again at its next heartbeat.
  KEYS[1] the registry  ARGV[1] this deployment, '<prefix>/<lease>'  ARGV[2] this instance's identity
  Returns 1 when removed, 0 when another instance wrote it last.
]]
local entry = redis.call('HGET', KEYS[1], ARGV[1])
if entry and cjson.decode(entry).identity == ARGV[2] then
  redis.call('HDEL', KEYS[1], ARGV[1])
  return 1
end
return 0
