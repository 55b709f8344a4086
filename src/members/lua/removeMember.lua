--[[
  Removes a member record only if it is still the one the leader judged: a member that wrote a
  heartbeat in the meantime is alive and stays. Its cordon and its beat time go with it.
  KEYS[1] members  KEYS[2] cordons  KEYS[3] beat times
  ARGV[1] identity  ARGV[2] the record text the leader last saw
]]
if redis.call('HGET', KEYS[1], ARGV[1]) ~= ARGV[2] then
  return 0
end
redis.call('HDEL', KEYS[1], ARGV[1])
redis.call('HDEL', KEYS[2], ARGV[1])
redis.call('HDEL', KEYS[3], ARGV[1])
return 1
