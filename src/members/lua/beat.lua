--[[
  Writes a member's heartbeat record, stamps it with Redis's own time, and reads any cordon on it. The
  stamp lets any reader (a leader that has just taken over, the status page, the CLI) tell how long ago a
  member last wrote, on one clock shared by everyone, without trusting the member's clock.
  KEYS[1] members  KEYS[2] beat times (identity -> Redis ms of the last write)  KEYS[3] cordons
  ARGV[1] identity  ARGV[2] the record (JSON)
  Returns the cordon request (JSON) or false.
]]
local now = redis.call('TIME')
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
redis.call('HSET', KEYS[2], ARGV[1], tonumber(now[1]) * 1000 + math.floor(tonumber(now[2]) / 1000))
return redis.call('HGET', KEYS[3], ARGV[1])
