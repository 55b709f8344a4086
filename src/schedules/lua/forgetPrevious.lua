--[[
  Forgets the version a schedule's write replaced or removed, once a leader has recorded the ticks it owed:
  only if it is still the one of that write (a later write may have put another in its place).
  KEYS[1] previous versions
  ARGV[1] id  ARGV[2] the write's time (ms), as the entry begins with it
  Returns 1 when forgotten, 0 when another entry (or none) stands.
]]
local stored = redis.call('HGET', KEYS[1], ARGV[1])
if stored and string.sub(stored, 1, #ARGV[2] + 1) == ARGV[2] .. '|' then
  redis.call('HDEL', KEYS[1], ARGV[1])
  return 1
end
return 0
